// Force-included before a .metal file built for host emulation (precompiled once per
// cache; the per-build skip list comes in a second force-include, porter_skip.h).
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

namespace porter {

constexpr bool str_eq(const char* a, const char* b) {
  while (*a && *a == *b) ++a, ++b;
  return *a == *b;
}
// key is "name|dtype" or "name|*"; the skip list itself is per build (porter_skip.h)
constexpr bool key_eq(const char* key, const char* name, const char* dtype) {
  while (*key && *key != '|' && *key == *name) ++key, ++name;
  if (*key != '|' || *name) return false;
  ++key;
  return str_eq(key, "*") || str_eq(key, dtype);
}

using elem_t = void (*)(void* out, const void* const* in, const void* alpha);

struct Entry {
  const char* name;
  const char* kind;
  const char* in;
  const char* out;
  const char* alpha;
  int opmath;
  int line;
  elem_t elem;  // nullptr when quarantined
  int arity;
  long in_size;
  long out_size;
};


// porter's own loop over the elements, not the kernel's code: optimized and uninstrumented,
// whatever the build's flags. The kernel's code (each registration's `elem` and all it calls)
// keeps the -O0 build and its sanitizers; at -O0 with AddressSanitizer this loop and its
// offsets were over half the time a sample's kernel took (a binary op's reference inputs are
// millions of strided elements).
#if defined(__GNUC__) && !defined(__clang__)
#define PORTER_HARNESS \
  __attribute__((optimize("O2"), no_sanitize_address, no_sanitize("undefined")))
#else
#define PORTER_HARNESS __attribute__((no_sanitize("address", "undefined")))
#endif

// Byte offset of element `i` (dim 0 fastest, as c10::metal::pos_from_thread_index).
PORTER_HARNESS inline long offset(long i, int ndim, const long* sizes, const long* strides) {
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

// Per (functor, dtype) only an element function is instantiated: load, call, store.
// The loop over elements and strides is shared, non-template code below; this keeps
// what g++ must generate at -O0 per registration to a minimum.
template <typename F, typename I>
struct Unary {
  using R = ::c10::metal::result_of<F, I>;
  static constexpr int arity = 1;
  static void elem(void* out, const void* const* in, const void*) {
    *static_cast<R*>(out) = F()(*static_cast<const I*>(in[0]));
  }
};

template <typename F, typename I, typename A>
struct UnaryAlpha {
  using R = ::c10::metal::result_of<F, I, A>;
  static constexpr int arity = 1;
  static void elem(void* out, const void* const* in, const void* alpha) {
    *static_cast<R*>(out) = F()(*static_cast<const I*>(in[0]), *static_cast<const A*>(alpha));
  }
};

template <typename F, typename I, typename OM>
struct Binary {
  using R = ::c10::metal::result_of<F, I, I>;
  static constexpr int arity = 2;
  static void elem(void* out, const void* const* in, const void*) {
    *static_cast<R*>(out) = static_cast<R>(
        F()(OM(*static_cast<const I*>(in[0])), OM(*static_cast<const I*>(in[1]))));
  }
};

template <typename F, typename I, typename A>
struct BinaryAlpha {
  using R = ::c10::metal::result_of<F, I, I, A>;
  static constexpr int arity = 2;
  static void elem(void* out, const void* const* in, const void* alpha) {
    *static_cast<R*>(out) = F()(*static_cast<const I*>(in[0]), *static_cast<const I*>(in[1]),
                                *static_cast<const A*>(alpha));
  }
};

template <typename F, typename I, typename OM>
struct Ternary {
  using R = ::c10::metal::result_of<F, I, I, I>;
  static constexpr int arity = 3;
  static void elem(void* out, const void* const* in, const void*) {
    *static_cast<R*>(out) = static_cast<R>(F()(OM(*static_cast<const I*>(in[0])),
                                               OM(*static_cast<const I*>(in[1])),
                                               OM(*static_cast<const I*>(in[2]))));
  }
};

// Three tensors and a scalar (addcmul's value): the scalar comes as the host binds it, never
// converted to the opmath type (the functor decides how it computes with it).
template <typename F, typename I, typename A, typename OM>
struct TernaryAlpha {
  using R = ::c10::metal::result_of<F, I, I, I, A>;
  static constexpr int arity = 3;
  static void elem(void* out, const void* const* in, const void* alpha) {
    *static_cast<R*>(out) = static_cast<R>(F()(OM(*static_cast<const I*>(in[0])),
                                               OM(*static_cast<const I*>(in[1])),
                                               OM(*static_cast<const I*>(in[2])),
                                               *static_cast<const A*>(alpha)));
  }
};

// Apple GPUs flush float32 subnormals: an operand that is one reads as a signed zero, a result
// that would be one is a signed zero (upstream #125051: nextafter(0, 1) > 0 is false on MPS;
// #194110: frexp of every float32 subnormal is (0, 0); #193897: bfloat comparisons see its
// subnormals as zero). Half keeps its subnormals (they are normal floats, and the shim's half
// conversions are integer code). The host CPU's own switches do the same to float arithmetic,
// comparisons and libm while a kernel runs: SSE's flush-to-zero and denormals-are-zero, or
// AArch64's FPCR.FZ.
struct FlushSubnormals {
#if defined(__x86_64__) || defined(__i386__)
  unsigned saved = __builtin_ia32_stmxcsr();
  FlushSubnormals() { __builtin_ia32_ldmxcsr(saved | 0x8040u); }   // FTZ | DAZ
  ~FlushSubnormals() { __builtin_ia32_ldmxcsr(saved); }
#elif defined(__aarch64__)
  unsigned saved = __builtin_aarch64_get_fpcr();
  FlushSubnormals() { __builtin_aarch64_set_fpcr(saved | (1u << 24)); }   // FZ
  ~FlushSubnormals() { __builtin_aarch64_set_fpcr(saved); }
#else
#error "porter's Metal emulation models Apple GPUs' subnormal flushing on x86-64 and AArch64 hosts"
#endif
};

// Set by the worker's runtime when AddressSanitizer reports a read outside any object
// (porter/emulate/worker_runtime.c); null where no runtime is loaded. The run stops there: the
// sample is not proven already, and a report per element costs milliseconds each.
extern "C" __attribute__((weak, visibility("default"))) volatile int porter_address_errors;

// `st == nullptr`: dense (contiguous buffers); otherwise byte strides per operand, out first.
// The strided offsets advance as an odometer (dim 0 fastest, as `offset` computes them), not
// by a division per dim, operand and element.
PORTER_HARNESS static void run_loop(const Entry& e, void* out, const void* const* ins,
                                    const void* alpha, long n, int ndim, const long* sizes,
                                    const long* const* st) {
  FlushSubnormals flush;
  volatile int* const address_errors = &porter_address_errors;
  const int operands = e.arity + 1;           // out first
  constexpr int kMaxDims = 64;
  long coord[kMaxDims] = {};
  long off[4] = {};
  const bool odometer = st && ndim <= kMaxDims;
  for (long i = 0; i < n; ++i) {
    if (address_errors && *address_errors) return;
    const void* p[3];
    long o0;
    if (odometer) {
      o0 = off[0];
      for (int k = 0; k < e.arity; ++k) p[k] = static_cast<const char*>(ins[k]) + off[k + 1];
    } else if (st) {
      o0 = offset(i, ndim, sizes, st[0]);
      for (int k = 0; k < e.arity; ++k)
        p[k] = static_cast<const char*>(ins[k]) + offset(i, ndim, sizes, st[k + 1]);
    } else {
      o0 = i * e.out_size;
      for (int k = 0; k < e.arity; ++k)
        p[k] = static_cast<const char*>(ins[k]) + i * e.in_size;
    }
    ::metal::detail::bracket_calls = 0;       // each element's library calls, from the first
    e.elem(static_cast<char*>(out) + o0, p, alpha);
    if (odometer) {
      for (int d = 0; d < ndim; ++d) {
        for (int k = 0; k < operands; ++k) off[k] += st[k][d];
        if (++coord[d] < sizes[d]) break;
        for (int k = 0; k < operands; ++k) off[k] -= st[k][d] * sizes[d];
        coord[d] = 0;
      }
    }
  }
}

// Registrations are constant-initialised entries in the `porter_kernels` section (the
// linker provides __start_/__stop_ symbols): no per-registration initialisation code.
template <bool Skip>
struct Reg {
  template <typename Impl, typename O>
  static constexpr elem_t elem() {
    check_output<typename Impl::R, O>();
    return &Impl::elem;
  }
  template <typename Impl>
  static constexpr int arity = Impl::arity;
  template <typename Impl>
  static constexpr long out_size = long(sizeof(typename Impl::R));
};
template <>
struct Reg<true> {
  template <typename Impl, typename O>
  static constexpr elem_t elem() { return nullptr; }
  template <typename Impl>
  static constexpr int arity = 0;
  template <typename Impl>
  static constexpr long out_size = 0;
};

template <bool Skip>
struct Castout {
  template <typename Impl, typename O>
  static constexpr bool built() {
    check_output<typename Impl::R, O>();
    return &Impl::elem != nullptr;
  }
};
template <>
struct Castout<true> {
  template <typename Impl, typename O>
  static constexpr bool built() { return true; }
};

} // namespace porter

// Weak: a file with no registration left (its last port reverted) has no porter_kernels
// section, so the linker defines neither symbol; the library then has no kernels, and loads.
extern "C" {
extern const porter::Entry __start_porter_kernels[] __attribute__((weak));
extern const porter::Entry __stop_porter_kernels[] __attribute__((weak));
}
namespace porter {
// Entries in registration order (the linker keeps section contents in TU order).
static const Entry* entries = __start_porter_kernels;
static int n_entries_() {
  return __start_porter_kernels ? int(__stop_porter_kernels - __start_porter_kernels) : 0;
}
// A program-scope `constant` array of the kernel file, as the build writes it
// (porter/emulate/guarded_arrays.py): the worker's guard pages copy it to the end of pages an
// inaccessible page follows, so that a read past its end is seen (porter/emulate/
// worker_runtime.c; where the worker runs with AddressSanitizer, a heap copy with redzones on
// both sides). Loaded where that library is not, the array stays where it is.
extern "C" const void* porter_guard_copy(const void* src, unsigned long size) __attribute__((weak));
template <typename A>
const A& guarded(const A& a) {
  if (!porter_guard_copy) return a;
  return *static_cast<const A*>(porter_guard_copy(&a, sizeof(A)));
}
} // namespace porter
extern "C" {
// weak: each piece of a file built in pieces (porter.emulate.groups) carries them; one is kept
__attribute__((visibility("default"), weak)) int porter_kernel_count() {
  return porter::n_entries_();
}
// strs: name, kind, in, out, alpha; ints: opmath, line, built
__attribute__((visibility("default"), weak)) int porter_kernel_info(int i, const char** strs,
                                                             int* ints) {
  if (i < 0 || i >= porter::n_entries_()) return -1;
  const porter::Entry& e = porter::entries[i];
  strs[0] = e.name;
  strs[1] = e.kind;
  strs[2] = e.in;
  strs[3] = e.out;
  strs[4] = e.alpha;
  ints[0] = e.opmath;
  ints[1] = e.line;
  ints[2] = e.elem != nullptr;
  return 0;
}
__attribute__((visibility("default"), weak)) int porter_run(int i, int strided, void* out,
                                                     const void* const* ins,
                                                     const void* alpha, long numel,
                                                     int ndim, const long* sizes,
                                                     const long* const* strides) {
  if (i < 0 || i >= porter::n_entries_() || !porter::entries[i].elem) return -1;
  porter::run_loop(porter::entries[i], out, ins, alpha, numel, ndim, sizes,
                   strided ? strides : nullptr);
  return 0;
}
}

#define PORTER_CAT_(a, b) a##b
#define PORTER_CAT(a, b) PORTER_CAT_(a, b)
#define PORTER_PASTE_(a, b) a##b
#define PORTER_PASTE(a, b) PORTER_PASTE_(a, b)
// Which registrations a build emits (porter.emulate.groups: one object per functor): the
// per-build header porter_skip.h may redefine PORTER_SELECT(NAME) to 0 or 1 per name, through
// `#define PORTER_GROUP_<name> PORTER_PROBE` and PORTER_IN_GROUP. A registration left out
// emits nothing and instantiates nothing.
#define PORTER_SECOND_(a, b, ...) b
#define PORTER_IS_PROBE(...) PORTER_SECOND_(__VA_ARGS__, 0, 0)
#define PORTER_PROBE ~, 1
#define PORTER_IN_GROUP(NAME) PORTER_IS_PROBE(PORTER_PASTE(PORTER_GROUP_, NAME))
#define PORTER_NOT_0 1
#define PORTER_NOT_1 0
#define PORTER_NOT(X) PORTER_PASTE(PORTER_NOT_, X)
#define PORTER_SELECT(NAME) 1
#define PORTER_REGISTER(O, NAME, ...)                                             \
  PORTER_CAT(PORTER_REGISTER_IF_, PORTER_SELECT(NAME))(O, NAME, __VA_ARGS__)
#define PORTER_REGISTER_IF_0(...) static_assert(true, "")
#define PORTER_REGISTER_IF_1(O, NAME, KIND, IN, OUT, ALPHA, OPMATH, ...)          \
  __attribute__((section("porter_kernels"), used, aligned(8)))                   \
  static constexpr ::porter::Entry PORTER_CAT(PORTER_CAT(porter_registration_, NAME), \
                                             PORTER_CAT(__, __COUNTER__)) = {         \
      #NAME, KIND, #IN, #OUT, ALPHA, OPMATH, __LINE__,                             \
      ::porter::Reg<::porter::skipped(#NAME, #IN)>::template elem<__VA_ARGS__, O>(), \
      ::porter::Reg<::porter::skipped(#NAME, #IN)>::template arity<__VA_ARGS__>,     \
      long(sizeof(IN)),                                                            \
      ::porter::Reg<::porter::skipped(#NAME, #IN)>::template out_size<__VA_ARGS__>}

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
// Castout kernels run the same functor and cast on store: nothing new to run, but they are
// built as a Mac builds them (the functor instantiated for DTYPEI; DTYPEO, which names the
// kernel the host asks for, is the functor's result), so a castout line that would not
// compile is caught by the build check.
#define REGISTER_BINARY_CASTOUT_OP(NAME, DTYPEI, DTYPEO)                         \
  static_assert(::porter::Castout<::porter::skipped(#NAME, #DTYPEI)>::template built< \
                    ::porter::Binary<NAME##_functor, DTYPEI, DTYPEI>, DTYPEO>(),  \
                "castout " #NAME)
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
// Ternary kernels with a scalar: torch 2.13's indexing.h has no macro for them (upstream added
// one with its addcmul port), so ours exist only where the checkout's header defines theirs: a
// kernel file using them against a header without them fails to build, as on a Mac.
#ifdef REGISTER_TERNARY_ALPHA_OP_
#undef REGISTER_TERNARY_ALPHA_OP_
#define REGISTER_TERNARY_ALPHA_OP_(NAME, DTYPEI, DTYPEA, DTYPEO, OMT)            \
  PORTER_REGISTER(DTYPEO, NAME, "ternary_alpha", DTYPEI, DTYPEO, #DTYPEA,      \
                  (!::metal::is_same_v<DTYPEI, OMT>),                         \
                  ::porter::TernaryAlpha<NAME##_functor, DTYPEI, DTYPEA, OMT>)
#endif
#ifdef REGISTER_TERNARY_ALPHA_OP
#undef REGISTER_TERNARY_ALPHA_OP
#define REGISTER_TERNARY_ALPHA_OP(NAME, DTYPEI, DTYPEA, DTYPEO)                  \
  PORTER_REGISTER(DTYPEO, NAME, "ternary_alpha", DTYPEI, DTYPEO, #DTYPEA, 0,   \
                  ::porter::TernaryAlpha<NAME##_functor, DTYPEI, DTYPEA, DTYPEI>)
#endif
#ifdef REGISTER_OPMATH_TERNARY_ALPHA_OP
#undef REGISTER_OPMATH_TERNARY_ALPHA_OP
#define REGISTER_OPMATH_TERNARY_ALPHA_OP(NAME, DTYPEI, DTYPEA, DTYPEO)           \
  PORTER_REGISTER(DTYPEO, NAME, "ternary_alpha", DTYPEI, DTYPEO, #DTYPEA,      \
                  (!::metal::is_same_v<DTYPEI, ::c10::metal::opmath_t<DTYPEI>>), \
                  ::porter::TernaryAlpha<NAME##_functor, DTYPEI, DTYPEA,       \
                                         ::c10::metal::opmath_t<DTYPEI>>)
#endif
