// Force-included before a .metal file built for host emulation.
//
// It pulls in the real c10/metal/indexing.h (for its helpers), then replaces
// its REGISTER_* macros: upstream's expand to explicit instantiations of GPU
// kernel templates; ours record each (op, dtype) registration in a table that
// the shared library exposes through a C ABI (porter_kernel_info/porter_run).
// File-local macros of kernel files (REGISTER_FLOAT_BINARY_OP,
// INSTANTIATE_UNARY_KERNELS2, ...) are written in terms of these, so they
// register through ours without being redefined.
#pragma once

#include <porter/metal.h>
#include <c10/metal/common.h>
#include <c10/metal/utils.h>
#include <c10/metal/indexing.h>

#if __has_include(<porter_skip.h>)
#include <porter_skip.h>
#endif
#ifndef PORTER_SKIP_LIST
#define PORTER_SKIP_LIST nullptr
#endif

namespace porter {

// Registrations the build step quarantined ("name|dtype" or "name|*"): they are
// recorded but never instantiated, so one unsupported functor does not take
// the rest of the file down with it.
constexpr const char* skip_list[] = {PORTER_SKIP_LIST};

constexpr bool str_eq(const char* a, const char* b) {
  while (*a && *a == *b) ++a, ++b;
  return *a == *b;
}
constexpr bool key_eq(const char* key, const char* name, const char* dtype) {
  // key is "name|dtype"
  while (*key && *key != '|' && *key == *name) ++key, ++name;
  if (*key != '|' || *name) return false;
  ++key;
  return str_eq(key, "*") || str_eq(key, dtype);
}
constexpr bool skipped(const char* name, const char* dtype) {
  for (const char* key : skip_list) {
    if (key && key_eq(key, name, dtype)) return true;
  }
  return false;
}

using fn_t = void (*)(void* out, const void* const* ins, const void* alpha,
                      long numel, int ndim, const long* sizes,
                      const long* const* strides);

struct Entry {
  const char* name;
  const char* kind;
  const char* in;
  const char* out;
  const char* alpha;
  int opmath;
  int line;
  fn_t dense;
  fn_t strided;
};

constexpr int max_entries = 8192;
inline Entry entries[max_entries];
inline int n_entries = 0;

inline int add(Entry e) {
  if (n_entries < max_entries) entries[n_entries++] = e;
  return n_entries;
}

// Byte offset of element `i` (dim 0 fastest, as c10::metal::pos_from_thread_index).
inline long offset(long i, int ndim, const long* sizes, const long* strides) {
  long off = 0;
  for (int d = 0; d < ndim; ++d) {
    off += (i % sizes[d]) * strides[d];
    i /= sizes[d];
  }
  return off;
}

template <typename T>
inline T at(const void* base, long off) {
  return *reinterpret_cast<const T*>(static_cast<const char*>(base) + off);
}
template <typename T>
inline T& ref(void* base, long off) {
  return *reinterpret_cast<T*>(static_cast<char*>(base) + off);
}

// Declared, never defined: naming it in an error spells the functor's real
// output type next to the registered one.
template <typename Actual, typename Registered>
struct registered_output_type_differs_from_functor_result;

template <typename R, typename O>
constexpr void check_output() {
  if constexpr (!::metal::is_same_v<R, O>) {
    (void)sizeof(registered_output_type_differs_from_functor_result<R, O>);
  }
}

template <typename F, typename I, typename A>
struct UnaryAlpha {
  using R = ::c10::metal::result_of<F, I, A>;
  static void run(bool strided, void* out, const void* const* ins, const void* alpha,
                  long n, int ndim, const long* sizes, const long* const* st) {
    F f;
    const A a = *static_cast<const A*>(alpha);
    for (long i = 0; i < n; ++i) {
      if (strided)
        ref<R>(out, offset(i, ndim, sizes, st[0])) = f(at<I>(ins[0], offset(i, ndim, sizes, st[1])), a);
      else
        static_cast<R*>(out)[i] = f(static_cast<const I*>(ins[0])[i], a);
    }
  }
};

template <typename F, typename I>
struct Unary {
  using R = ::c10::metal::result_of<F, I>;
  static void run(bool strided, void* out, const void* const* ins, const void*,
                  long n, int ndim, const long* sizes, const long* const* st) {
    F f;
    for (long i = 0; i < n; ++i) {
      if (strided)
        ref<R>(out, offset(i, ndim, sizes, st[0])) = f(at<I>(ins[0], offset(i, ndim, sizes, st[1])));
      else
        static_cast<R*>(out)[i] = f(static_cast<const I*>(ins[0])[i]);
    }
  }
};

template <typename F, typename I, typename OM>
struct Binary {
  using R = ::c10::metal::result_of<F, I, I>;
  static void run(bool strided, void* out, const void* const* ins, const void*,
                  long n, int ndim, const long* sizes, const long* const* st) {
    F f;
    for (long i = 0; i < n; ++i) {
      if (strided) {
        const I a = at<I>(ins[0], offset(i, ndim, sizes, st[1]));
        const I b = at<I>(ins[1], offset(i, ndim, sizes, st[2]));
        ref<R>(out, offset(i, ndim, sizes, st[0])) = static_cast<R>(f(OM(a), OM(b)));
      } else {
        const I a = static_cast<const I*>(ins[0])[i];
        const I b = static_cast<const I*>(ins[1])[i];
        static_cast<R*>(out)[i] = static_cast<R>(f(OM(a), OM(b)));
      }
    }
  }
};

template <typename F, typename I, typename A>
struct BinaryAlpha {
  using R = ::c10::metal::result_of<F, I, I, A>;
  static void run(bool strided, void* out, const void* const* ins, const void* alpha,
                  long n, int ndim, const long* sizes, const long* const* st) {
    F f;
    const A al = *static_cast<const A*>(alpha);
    for (long i = 0; i < n; ++i) {
      if (strided) {
        const I a = at<I>(ins[0], offset(i, ndim, sizes, st[1]));
        const I b = at<I>(ins[1], offset(i, ndim, sizes, st[2]));
        ref<R>(out, offset(i, ndim, sizes, st[0])) = f(a, b, al);
      } else {
        static_cast<R*>(out)[i] =
            f(static_cast<const I*>(ins[0])[i], static_cast<const I*>(ins[1])[i], al);
      }
    }
  }
};

template <typename F, typename I, typename OM>
struct Ternary {
  using R = ::c10::metal::result_of<F, I, I, I>;
  static void run(bool strided, void* out, const void* const* ins, const void*,
                  long n, int ndim, const long* sizes, const long* const* st) {
    F f;
    for (long i = 0; i < n; ++i) {
      if (strided) {
        const I a = at<I>(ins[0], offset(i, ndim, sizes, st[1]));
        const I b = at<I>(ins[1], offset(i, ndim, sizes, st[2]));
        const I c = at<I>(ins[2], offset(i, ndim, sizes, st[3]));
        ref<R>(out, offset(i, ndim, sizes, st[0])) = static_cast<R>(f(OM(a), OM(b), OM(c)));
      } else {
        const I a = static_cast<const I*>(ins[0])[i];
        const I b = static_cast<const I*>(ins[1])[i];
        const I c = static_cast<const I*>(ins[2])[i];
        static_cast<R*>(out)[i] = static_cast<R>(f(OM(a), OM(b), OM(c)));
      }
    }
  }
};

template <typename Impl>
void dense(void* out, const void* const* ins, const void* alpha, long n, int ndim,
           const long* sizes, const long* const* st) {
  Impl::run(false, out, ins, alpha, n, ndim, sizes, st);
}
template <typename Impl>
void strided(void* out, const void* const* ins, const void* alpha, long n, int ndim,
             const long* sizes, const long* const* st) {
  Impl::run(true, out, ins, alpha, n, ndim, sizes, st);
}

template <bool Skip>
struct Reg {
  template <typename Impl, typename O>
  static int add(const char* name, const char* kind, const char* in, const char* out,
                 const char* alpha, int opmath, int line) {
    check_output<typename Impl::R, O>();
    return ::porter::add(Entry{name, kind, in, out, alpha, opmath, line,
                               &dense<Impl>, &strided<Impl>});
  }
};
template <>
struct Reg<true> {
  template <typename Impl, typename O>
  static int add(const char* name, const char* kind, const char* in, const char* out,
                 const char* alpha, int opmath, int line) {
    return ::porter::add(Entry{name, kind, in, out, alpha, opmath, line, nullptr, nullptr});
  }
};

} // namespace porter

extern "C" {
__attribute__((visibility("default"))) int porter_kernel_count() {
  return porter::n_entries;
}
// strs: name, kind, in, out, alpha; ints: opmath, line, built
__attribute__((visibility("default"))) int porter_kernel_info(int i, const char** strs,
                                                             int* ints) {
  if (i < 0 || i >= porter::n_entries) return -1;
  const porter::Entry& e = porter::entries[i];
  strs[0] = e.name;
  strs[1] = e.kind;
  strs[2] = e.in;
  strs[3] = e.out;
  strs[4] = e.alpha;
  ints[0] = e.opmath;
  ints[1] = e.line;
  ints[2] = e.dense != nullptr;
  return 0;
}
__attribute__((visibility("default"))) int porter_run(int i, int strided, void* out,
                                                     const void* const* ins,
                                                     const void* alpha, long numel,
                                                     int ndim, const long* sizes,
                                                     const long* const* strides) {
  if (i < 0 || i >= porter::n_entries || !porter::entries[i].dense) return -1;
  const porter::Entry& e = porter::entries[i];
  (strided ? e.strided : e.dense)(out, ins, alpha, numel, ndim, sizes, strides);
  return 0;
}
}

#define PORTER_CAT_(a, b) a##b
#define PORTER_CAT(a, b) PORTER_CAT_(a, b)
#define PORTER_REGISTER(O, NAME, KIND, IN, OUT, ALPHA, OPMATH, ...)               \
  static const int PORTER_CAT(porter_registration_, __COUNTER__)                 \
      [[maybe_unused]] = ::porter::Reg<::porter::skipped(#NAME, #IN)>::template add< \
          __VA_ARGS__, O>(#NAME, KIND, #IN, #OUT, ALPHA, OPMATH, __LINE__)

#undef REGISTER_UNARY_OP
#undef REGISTER_UNARY_ALPHA_OP
#undef REGISTER_BINARY_OP_
#undef REGISTER_BINARY_OP
#undef REGISTER_OPMATH_BINARY_OP
#undef REGISTER_BINARY_CASTOUT_OP
#undef REGISTER_BINARY_ALPHA_OP
#undef REGISTER_TERNARY_OP_
#undef REGISTER_TERNARY_OP
#undef REGISTER_OPMATH_TERNARY_OP

#define REGISTER_UNARY_OP(NAME, DTYPE0, DTYPE1)                                  \
  PORTER_REGISTER(DTYPE1, NAME, "unary", \
                  DTYPE0, DTYPE1, "", 0, ::porter::Unary<NAME##_functor, DTYPE0>)
#define REGISTER_UNARY_ALPHA_OP(NAME, DTYPEI, DTYPEA, DTYPEO)                    \
  PORTER_REGISTER(DTYPEO, \
                  NAME, "unary_alpha", DTYPEI, DTYPEO, #DTYPEA, 0, ::porter::UnaryAlpha<NAME##_functor, DTYPEI, DTYPEA>)
#define REGISTER_BINARY_OP_(NAME, DTYPEI, DTYPEO, OMT)                           \
  PORTER_REGISTER(DTYPEO, NAME,   \
                  "binary", DTYPEI, DTYPEO, "", (!::metal::is_same_v<DTYPEI, OMT>), ::porter::Binary<NAME##_functor, DTYPEI, OMT>)
#define REGISTER_BINARY_OP(NAME, DTYPEI, DTYPEO)                                 \
  REGISTER_BINARY_OP_(NAME, DTYPEI, DTYPEO, DTYPEI)
#define REGISTER_OPMATH_BINARY_OP(NAME, DTYPEI, DTYPEO)                          \
  REGISTER_BINARY_OP_(NAME, DTYPEI, DTYPEO, ::c10::metal::opmath_t<DTYPEI>)
// Castout kernels run the same functor and cast on store: nothing new to emulate.
#define REGISTER_BINARY_CASTOUT_OP(NAME, DTYPEI, DTYPEO) static_assert(true, "")
#define REGISTER_BINARY_ALPHA_OP(NAME, DTYPEI, DTYPEA, DTYPEO)                   \
  PORTER_REGISTER(DTYPEO, \
                  NAME, "binary_alpha", DTYPEI, DTYPEO, #DTYPEA, 0, ::porter::BinaryAlpha<NAME##_functor, DTYPEI, DTYPEA>)
#define REGISTER_TERNARY_OP_(NAME, DTYPEI, DTYPEO, OMT)                          \
  PORTER_REGISTER(DTYPEO, NAME,  \
                  "ternary", DTYPEI, DTYPEO, "", (!::metal::is_same_v<DTYPEI, OMT>), ::porter::Ternary<NAME##_functor, DTYPEI, OMT>)
#define REGISTER_TERNARY_OP(NAME, DTYPEI, DTYPEO)                                \
  REGISTER_TERNARY_OP_(NAME, DTYPEI, DTYPEO, DTYPEI)
#define REGISTER_OPMATH_TERNARY_OP(NAME, DTYPEI, DTYPEO)                         \
  REGISTER_TERNARY_OP_(NAME, DTYPEI, DTYPEO, ::c10::metal::opmath_t<DTYPEI>)
