// Host emulation of the parts of the Metal Shading Language that PyTorch's
// kernel files and c10/metal headers use, for g++ on Linux.
//
// Fidelity choices (each one was needed by real upstream code):
// - `half` is _Float16: g++ rounds it after every operation, like fp16 ALUs.
// - `bfloat` is a 16-bit class rounding to nearest-even. float -> bfloat is
//   explicit so that `cond ? bfloat : float` yields float as in Metal, instead
//   of being ambiguous.
// - No libm header is included: a global `expm1f`/`log1p` from glibc would
//   collide with c10::metal's helpers once `using namespace c10::metal` is
//   active. Math goes through __builtin_* instead.
// - `constant` must be `const`: upstream overloads val_at_offs on address
//   space (constant void* vs device void*).
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include <porter/swizzles.h>

#define __METAL__ 1
#ifndef __METAL_VERSION__
#define __METAL_VERSION__ 310
#endif
// Apple's compiler defines __METAL_MACOS__ when it targets macOS (PyTorch's metallib is built
// for macOS only), and __HAVE_BFLOAT__ where the language has `bfloat` (Metal 3.1 and later;
// every version porter builds is). Upstream and Apple's headers test them with defined().
#define __METAL_MACOS__ 1
#if __METAL_VERSION__ >= 310
#define __HAVE_BFLOAT__ 1
#endif

// Address spaces and function qualifiers carry no meaning on the host.
#define device
#define constant const
#define thread
#define threadgroup
#define threadgroup_imageblock
#define ray_data
#define object_data
#define kernel
#define vertex
#define fragment

typedef _Float16 half;
#include <porter/half_literal.h>
typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long ulong;
// Metal's size_t and ptrdiff_t (MSL §2.1), unqualified as a kernel spells them (<cstdint>
// need not declare them outside std::)
typedef decltype(sizeof(0)) size_t;
typedef decltype(static_cast<int*>(nullptr) - static_cast<int*>(nullptr)) ptrdiff_t;

// the readings' switches (defined with the library's undefined answers, below)
extern "C" int porter_reading;
extern "C" int porter_reached;

// bfloat below is porter's model of a type an Apple GPU converts and compares in hardware, not
// the kernel's code: in the -O0 build the samples run on, compiled optimized (its sanitizers
// kept). At -O0 with AddressSanitizer it was a third of the kernel time of a heaviside
// `--watch` round (from_integer alone a seventh); optimized, the round's kernels took 0.08 s
// less CPU for 0.016 s more compile (docs/measurements.md). The functors that call it keep
// -O0, their locals in the stack frame (porter.emulate.toolchain's FLAGS); at -O0 g++ inlines
// nothing, and it never inlines -O0 code into optimized code. The optimizing builds (the
// contracted one, the folding one: __OPTIMIZE__) compile it at their own level: g++ inlines
// one function into another only where their optimization options are the same, and
// `bfloat * float + float` inlined is one expression, which it contracts into an fma as clang
// does (review 78's finding 1: not inlined, the product came back rounded, and the contracted
// build answered as the plain one).
#if defined(__GNUC__) && !defined(__clang__) && !defined(__OPTIMIZE__)
#define PORTER_OWN_CODE_BEGIN _Pragma("GCC push_options") _Pragma("GCC optimize(\"O2\")")
#define PORTER_OWN_CODE_END _Pragma("GCC pop_options")
#else
#define PORTER_OWN_CODE_BEGIN
#define PORTER_OWN_CODE_END
#endif

PORTER_OWN_CODE_BEGIN
struct bfloat {
  unsigned short bits;
  // An integer float cannot hold exactly (past 2^24) converted to bfloat: through float, as
  // the shim's other conversions go, it rounds twice; LLVM's sitofp to bfloat rounds once.
  // Which an Apple GPU does is not documented: where the two differ, bit 4096
  // (UNSETTLED_LIBRARY) and reading 1 gives the once-rounded (review 38's U08).
  template <typename U>
  static constexpr unsigned short from_integer(U v) {
    const unsigned short twice = from_float(static_cast<float>(v));
    if (__builtin_is_constant_evaluated()) return twice;
    long double x = static_cast<long double>(v);       // exact: 64 bits of mantissa
    const bool negative = x < 0;
    if (negative) x = -x;
    if (x < 16777216.0L) return twice;                 // float holds it: one rounding either way
    int e = 0;
    __builtin_frexpl(x, &e);                           // 2^(e-1) <= x < 2^e
    const long double unit = __builtin_ldexpl(1.0L, e - 8);   // bfloat's spacing there
    long double q = __builtin_floorl(x / unit);
    const long double rest = x - q * unit;
    if (rest > unit / 2 || (rest == unit / 2 && __builtin_fmodl(q, 2.0L) != 0)) q += 1;
    const float once_f = static_cast<float>(q * unit) * (negative ? -1.0f : 1.0f);
    const unsigned short once = from_float(once_f);
    if (once == twice) return twice;
    porter_reached |= 4096;
    return porter_reading ? once : twice;
  }

  static constexpr unsigned short from_float(float f) {
    unsigned int u = __builtin_bit_cast(unsigned int, f);
    // Apple GPUs flush float32 subnormals, and bfloat's subnormals are float32's: the
    // conversion flushes them to a signed zero (upstream #193897 measured it; a bit pattern
    // made with as_type keeps its bits, as there).
    if ((u & 0x7f800000u) == 0) return (unsigned short)((u >> 16) & 0x8000u);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
      return (unsigned short)((u >> 16) | 0x40u); // quiet NaN, keep sign
    }
    u += 0x7fffu + ((u >> 16) & 1u); // round to nearest even
    return (unsigned short)(u >> 16);
  }
  // `bfloat r;` leaves r uninitialized, as Metal's scalar does, so that the worker's two
  // fillings of the stack tell a read of it (review 78's finding 2: zeroed here, it read 0 on
  // both, a relu's lucky answer); `bfloat()` and `bfloat{}` are zero, as value-initialization is
  bfloat() = default;
  template <typename U,
            std::enable_if_t<std::is_arithmetic_v<U> || std::is_same_v<U, _Float16>, bool> = true>
  constexpr explicit bfloat(U v)
      : bits(std::is_integral_v<U> && sizeof(U) >= 4 ? from_integer(v)
                                                     : from_float(static_cast<float>(v))) {}
  // a value that converts to float (one component of a swizzle, `v.yx.x`), as Metal's
  // static_cast<bfloat> takes any scalar
  template <typename U,
            std::enable_if_t<std::is_class_v<U> && !std::is_same_v<U, bfloat> &&
                                 std::is_convertible_v<const U&, float>, bool> = true>
  constexpr explicit bfloat(const U& v) : bits(from_float(static_cast<float>(v))) {}
  constexpr operator float() const {
    return __builtin_bit_cast(float, (unsigned int)bits << 16);
  }
  static constexpr bfloat from_bits(unsigned short b) {
    bfloat r{};
    r.bits = b;
    return r;
  }
  constexpr bfloat operator-() const { return from_bits(bits ^ 0x8000u); }
  constexpr bfloat operator+() const { return *this; }
  template <typename U> bfloat& operator+=(U o) { return *this = bfloat(float(*this) + float(o)); }
  template <typename U> bfloat& operator-=(U o) { return *this = bfloat(float(*this) - float(o)); }
  template <typename U> bfloat& operator*=(U o) { return *this = bfloat(float(*this) * float(o)); }
  template <typename U> bfloat& operator/=(U o) { return *this = bfloat(float(*this) / float(o)); }
  bfloat& operator++() { return *this += 1.0f; }
  bfloat& operator--() { return *this -= 1.0f; }
};

// bfloat (op) bfloat and bfloat (op) integer stay bfloat; with float they widen, and with
// float itself they compute in float (without these, `abs(a) == a` took the half overload:
// the float went through half, inf at 4.98e6).
#define PORTER_BF_ARITH(OP)                                                     \
  constexpr inline bfloat operator OP(bfloat a, bfloat b) {                     \
    return bfloat(float(a) OP float(b));                                        \
  }                                                                             \
  template <typename I, std::enable_if_t<std::is_integral_v<I>, bool> = true>   \
  constexpr inline bfloat operator OP(bfloat a, I b) {                          \
    return bfloat(float(a) OP float(b));                                        \
  }                                                                             \
  template <typename I, std::enable_if_t<std::is_integral_v<I>, bool> = true>   \
  constexpr inline bfloat operator OP(I a, bfloat b) {                          \
    return bfloat(float(a) OP float(b));                                        \
  }                                                                             \
  constexpr inline float operator OP(bfloat a, half b) { return float(a) OP float(b); } \
  constexpr inline float operator OP(half a, bfloat b) { return float(a) OP float(b); } \
  constexpr inline float operator OP(bfloat a, float b) { return float(a) OP b; }       \
  constexpr inline float operator OP(float a, bfloat b) { return a OP float(b); }
PORTER_BF_ARITH(+)
PORTER_BF_ARITH(-)
PORTER_BF_ARITH(*)
PORTER_BF_ARITH(/)
#undef PORTER_BF_ARITH

#define PORTER_BF_CMP(OP)                                                       \
  constexpr inline bool operator OP(bfloat a, bfloat b) { return float(a) OP float(b); } \
  constexpr inline bool operator OP(bfloat a, half b) { return float(a) OP float(b); }   \
  constexpr inline bool operator OP(half a, bfloat b) { return float(a) OP float(b); }   \
  constexpr inline bool operator OP(bfloat a, float b) { return float(a) OP b; }         \
  constexpr inline bool operator OP(float a, bfloat b) { return a OP float(b); }         \
  template <typename I, std::enable_if_t<std::is_integral_v<I>, bool> = true>            \
  constexpr inline bool operator OP(bfloat a, I b) { return float(a) OP float(bfloat(b)); } \
  template <typename I, std::enable_if_t<std::is_integral_v<I>, bool> = true>            \
  constexpr inline bool operator OP(I a, bfloat b) { return float(bfloat(a)) OP float(b); }
PORTER_BF_CMP(==)
PORTER_BF_CMP(!=)
PORTER_BF_CMP(<)
PORTER_BF_CMP(<=)
PORTER_BF_CMP(>)
PORTER_BF_CMP(>=)
#undef PORTER_BF_CMP
PORTER_OWN_CODE_END

// Metal's math constants (float `_F` and half `_H` flavours).
#define MAXFLOAT __FLT_MAX__
#define HUGE_VALF __builtin_huge_valf()
#define INFINITY __builtin_inff()
#define NAN __builtin_nanf("")
#define FLT_MAX __FLT_MAX__
#define FLT_MIN __FLT_MIN__
#define FLT_EPSILON __FLT_EPSILON__
#define FLT_MANT_DIG __FLT_MANT_DIG__
#define FLT_MAX_EXP __FLT_MAX_EXP__
#define FLT_MIN_EXP __FLT_MIN_EXP__
#define HALF_MAX ((half)65504.0f)
#define HALF_MIN ((half)6.103515625e-05f)
#define HALF_EPSILON ((half)0.0009765625f)
#define M_E_F 2.71828182845904523536028747135266250f
#define M_LOG2E_F 1.44269504088896340735992468100189214f
#define M_LOG10E_F 0.434294481903251827651128918916605082f
#define M_LN2_F 0.693147180559945309417232121458176568f
#define M_LN10_F 2.30258509299404568401799145468436421f
#define M_PI_F 3.14159265358979323846264338327950288f
#define M_PI_2_F 1.57079632679489661923132169163975144f
#define M_PI_4_F 0.785398163397448309615660845819875721f
#define M_1_PI_F 0.318309886183790671537767526745028724f
#define M_2_PI_F 0.636619772367581343075535053490057448f
#define M_2_SQRTPI_F 1.12837916709551257389615890312154517f
#define M_SQRT2_F 1.41421356237309504880168872420969808f
#define M_SQRT1_2_F 0.707106781186547524400844362104849039f
#define M_E_H ((half)M_E_F)
#define M_LOG2E_H ((half)M_LOG2E_F)
#define M_LOG10E_H ((half)M_LOG10E_F)
#define M_LN2_H ((half)M_LN2_F)
#define M_LN10_H ((half)M_LN10_F)
#define M_PI_H ((half)M_PI_F)
#define M_PI_2_H ((half)M_PI_2_F)
#define M_PI_4_H ((half)M_PI_4_F)
#define M_1_PI_H ((half)M_1_PI_F)
#define M_2_PI_H ((half)M_2_PI_F)
#define M_2_SQRTPI_H ((half)M_2_SQRTPI_F)
#define M_SQRT2_H ((half)M_SQRT2_F)
#define M_SQRT1_2_H ((half)M_SQRT1_2_F)

namespace metal {

// ---------------------------------------------------------------- vectors
template <typename T, int N>
struct vec;
// A vector declared without an initializer (`float2 acc;`) is uninitialized, as in Metal: its
// default constructor is trivial, so that the worker's two fillings of the stack tell a read
// of it (review 40's U25, U03t); `float2()` and `float2{}` are zero, as value-initialization
// is. The other constructors start from zero through this tag.
struct vec_zero {};
// Each vector has Metal's size and alignment (MSL §2.2, the table of vector data types): a
// 2- or 4-vector is aligned to its size, a 3-vector has a 4-vector's size and alignment
// (float3: 16 bytes, half3: 8), so sizeof and alignof answer as on a Mac (review 20's N14-N17)

template <typename T>
struct is_vec : std::false_type {};
template <typename T, int N>
struct is_vec<vec<T, N>> : std::true_type {};

// A swizzle (`v.yx`, `c.rgb`): a member of the vector's anonymous union, over the same storage.
// Read, it is the vector of its components; assigned, it writes them, which Metal allows only
// when no component repeats (MSL 2.2.1). The vector's own copy is written out (below), so that
// `a.xy = b.xy` assigns two components, not the union's whole storage.
// One component of a swizzle (`v.yx.y`, `c.rgb.r`: Metal's swizzle is a vector, whose
// components are read and written as any vector's): element K of the vector's storage.
template <typename T, int N, int K>
struct swizzle_component {
  T e[N];
  constexpr operator T() const { return e[K]; }
  constexpr swizzle_component& operator=(const T& v) { e[K] = v; return *this; }
  constexpr swizzle_component& operator=(const swizzle_component& o) { return *this = T(o); }
  template <typename U>
  constexpr swizzle_component& operator+=(const U& o) { return *this = T(e[K] + o); }
  template <typename U>
  constexpr swizzle_component& operator-=(const U& o) { return *this = T(e[K] - o); }
  template <typename U>
  constexpr swizzle_component& operator*=(const U& o) { return *this = T(e[K] * o); }
  template <typename U>
  constexpr swizzle_component& operator/=(const U& o) { return *this = T(e[K] / o); }
};
// absent: a component past the swizzle's size, which converts to nothing
template <typename T, int N>
struct swizzle_component<T, N, -1> {
  T e[N];
};
template <int K, int... I>
constexpr int swizzle_index() {
  constexpr int idx[] = {I...};
  return K < int(sizeof...(I)) ? idx[K < int(sizeof...(I)) ? K : 0] : -1;
}

template <typename T, int N, int... I>
struct swizzle {
  union {
    T e[N];
    PORTER_SWIZZLE_COMPONENTS
  };
  using vector_type = vec<T, int(sizeof...(I))>;
  static constexpr bool writable() {
    constexpr int idx[] = {I...};
    for (int a = 0; a < int(sizeof...(I)); ++a)
      for (int b = a + 1; b < int(sizeof...(I)); ++b)
        if (idx[a] == idx[b]) return false;
    return true;
  }
  constexpr operator vector_type() const { return vector_type(e[I]...); }
  constexpr swizzle& operator=(const vector_type& v) {
    static_assert(writable(), "Metal: a swizzle that repeats a component cannot be assigned to");
    int k = 0;
    ((e[I] = v[k++]), ...);
    return *this;
  }
  constexpr swizzle& operator=(const swizzle& o) { return *this = vector_type(o); }
  template <typename U>
  constexpr swizzle& operator+=(const U& o) { return *this = vector_type(*this) + o; }
  template <typename U>
  constexpr swizzle& operator-=(const U& o) { return *this = vector_type(*this) - o; }
  template <typename U>
  constexpr swizzle& operator*=(const U& o) { return *this = vector_type(*this) * o; }
  template <typename U>
  constexpr swizzle& operator/=(const U& o) { return *this = vector_type(*this) / o; }
  constexpr T operator[](int i) const { return vector_type(*this)[i]; }
};
template <typename T>
struct is_swizzle : std::false_type {};
template <typename T, int N, int... I>
struct is_swizzle<swizzle<T, N, I...>> : std::true_type {};
// a swizzle as the vector it reads; anything else as it is
template <typename T>
constexpr decltype(auto) as_vector(const T& v) {
  if constexpr (is_swizzle<T>::value) {
    return typename T::vector_type(v);
  } else {
    return (v);
  }
}

template <typename U>
constexpr bool is_splat_scalar_v = std::is_arithmetic_v<U> || std::is_same_v<U, _Float16>;

// Vector element operations as Metal computes them (review 36's K06, K11, K18). clang's
// extended vectors, which Metal's are, do not promote their elements: `char2 / char2` and
// `uchar2 << uchar2` compute in 8 bits, where the promoted C++ operation of each element here
// is defined, so the sanitizers see nothing. A signed element operation whose answer does not
// fit the element (LLVM's `sdiv <2 x i8>` of -128 by -1, `add nsw`), a shift count at or past
// the element's width or negative, and an index past the vector are undefined on a Mac: each
// notes its family's bit (below, after porter_reached), and the sample is not proven.
namespace detail {
inline void note_vector_undefined(int bit);
enum : int { VEC_PLAIN = 0, VEC_OVERFLOWS = 1, VEC_SHIFT = 2, VEC_REMAINDER = 3 };
template <typename T>
constexpr bool narrow_integer_v =
    std::is_integral_v<T> && !std::is_same_v<T, bool> && sizeof(T) < sizeof(int);
// the element of `T` that `v` (the promoted answer of its operation) is, noting an answer
// Metal leaves undefined: `left` and `count` are the operands (a shift reads the count); the
// least element's remainder by -1 overflows as its quotient does, though it is 0 (review 37's
// N13)
template <typename T, typename R, typename L, typename C>
constexpr T vector_element(R v, L left, C count, int kind) {
  if constexpr (narrow_integer_v<T>) {
    if ((kind == VEC_OVERFLOWS || kind == VEC_REMAINDER) && std::is_signed_v<T> &&
        (v < R(std::numeric_limits<T>::min()) || v > R(std::numeric_limits<T>::max()) ||
         (kind == VEC_REMAINDER && left == L(std::numeric_limits<T>::min()) && count == C(-1))))
      note_vector_undefined(1024);      // NARROW_VECTOR_OVERFLOW
    if (kind == VEC_SHIFT && (count < 0 || count >= C(8 * sizeof(T))))
      note_vector_undefined(32);        // UNDEFINED_SHIFT
  }
  return T(v);
}
}  // namespace detail

#define PORTER_VEC_COMMON(N)                                                    \
  using value_type = T;                                                         \
  static constexpr int size = N;                                                \
  constexpr T& operator[](int i) {                                              \
    if (i < 0 || i >= N) { detail::note_vector_undefined(64); i = 0; }          \
    return (&x)[i];                                                             \
  }                                                                             \
  constexpr const T& operator[](int i) const {                                  \
    if (i < 0 || i >= N) { detail::note_vector_undefined(64); i = 0; }          \
    return (&x)[i];                                                             \
  }                                                                             \
  /* scalar -> vector replicates (half2(h), float2(x)); implicit as in Metal */ \
  template <typename U, std::enable_if_t<is_splat_scalar_v<U>, bool> = true>    \
  constexpr vec(U s) : vec(vec_zero{}) { for (int i = 0; i < N; ++i) (*this)[i] = T(s); } \
  constexpr explicit vec(bfloat s) : vec(vec_zero{}) { for (int i = 0; i < N; ++i) (*this)[i] = T(s); } \
  template <typename U>                                                         \
  constexpr explicit vec(const vec<U, N>& o) : vec(vec_zero{}) {                          \
    for (int i = 0; i < N; ++i) (*this)[i] = T(o[i]);                           \
  }                                                                             \
  constexpr vec(const vec& o) : vec(vec_zero{}) { for (int i = 0; i < N; ++i) (*this)[i] = o[i]; } \
  constexpr vec& operator=(const vec& o) {                                      \
    for (int i = 0; i < N; ++i) (*this)[i] = o[i];                              \
    return *this;                                                               \
  }

template <typename T>
struct alignas(2 * sizeof(T)) vec<T, 2> {
  union {
    struct { T x, y; };
    struct { T r, g; };
    PORTER_SWIZZLES_2
  };
  vec() = default;
  constexpr explicit vec(vec_zero) : x(), y() {}
  template <typename A, typename B>
  constexpr vec(A a, B b) : x(T(a)), y(T(b)) {}
  PORTER_VEC_COMMON(2)
};
template <typename T>
struct alignas(4 * sizeof(T)) vec<T, 3> {
  union {
    struct { T x, y, z; };
    struct { T r, g, b; };
    PORTER_SWIZZLES_3
  };
  vec() = default;
  constexpr explicit vec(vec_zero) : x(), y(), z() {}
  template <typename A, typename B, typename C>
  constexpr vec(A a, B b, C c) : x(T(a)), y(T(b)), z(T(c)) {}
  // float3(v.xy, z), float3(x, v.yz): a vector argument gives its components in order
  template <typename A, typename B,
            std::enable_if_t<is_vec<std::decay_t<decltype(as_vector(std::declval<A>()))>>::value !=
                             is_vec<std::decay_t<decltype(as_vector(std::declval<B>()))>>::value, bool> = true>
  constexpr vec(const A& a, const B& b) : vec(vec_zero{}) { fill(as_vector(a), as_vector(b)); }
  PORTER_VEC_COMMON(3)
 private:
  template <typename A, typename B>
  constexpr void fill(const A& a, const B& b) {
    int k = 0;
    put(k, a);
    put(k, b);
  }
  template <typename A>
  constexpr void put(int& k, const A& a) {
    if constexpr (is_vec<A>::value) {
      for (int i = 0; i < A::size; ++i) (*this)[k++] = T(a[i]);
    } else {
      (*this)[k++] = T(a);
    }
  }
};
template <typename T>
struct alignas(4 * sizeof(T)) vec<T, 4> {
  union {
    struct { T x, y, z, w; };
    struct { T r, g, b, a; };
    PORTER_SWIZZLES_4
  };
  vec() = default;
  constexpr explicit vec(vec_zero) : x(), y(), z(), w() {}
  template <typename A, typename B, typename C, typename D>
  constexpr vec(A a, B b, C c, D d) : x(T(a)), y(T(b)), z(T(c)), w(T(d)) {}
  // float4(v.xy, u.zw), float4(v.xyz, w), float4(x, y, v.zw): vector arguments in order
  template <typename A, typename B,
            std::enable_if_t<is_vec<std::decay_t<decltype(as_vector(std::declval<A>()))>>::value ||
                             is_vec<std::decay_t<decltype(as_vector(std::declval<B>()))>>::value, bool> = true>
  constexpr vec(const A& a, const B& b) : vec(vec_zero{}) { put(0, as_vector(a), as_vector(b)); }
  template <typename A, typename B, typename C,
            std::enable_if_t<is_vec<std::decay_t<decltype(as_vector(std::declval<A>()))>>::value ||
                             is_vec<std::decay_t<decltype(as_vector(std::declval<B>()))>>::value ||
                             is_vec<std::decay_t<decltype(as_vector(std::declval<C>()))>>::value, bool> = true>
  constexpr vec(const A& a, const B& b, const C& c) : vec(vec_zero{}) {
    put(0, as_vector(a), as_vector(b), as_vector(c));
  }
  PORTER_VEC_COMMON(4)
 private:
  template <typename... A>
  constexpr void put(int k, const A&... parts) {
    auto one = [&](const auto& p) {
      using P = std::decay_t<decltype(p)>;
      if constexpr (is_vec<P>::value) {
        for (int i = 0; i < P::size; ++i) (*this)[k++] = T(p[i]);
      } else {
        (*this)[k++] = T(p);
      }
    };
    (one(parts), ...);
  }
};
#undef PORTER_VEC_COMMON

#define PORTER_VEC_ARITH(OP, KIND)                                              \
  template <typename T, int N>                                                  \
  constexpr vec<T, N> operator OP(const vec<T, N>& a, const vec<T, N>& b) {     \
    vec<T, N> r;                                                                \
    for (int i = 0; i < N; ++i)                                                 \
      r[i] = detail::vector_element<T>(a[i] OP b[i], a[i], b[i], detail::KIND);       \
    return r;                                                                   \
  }                                                                             \
  template <typename T, int N, typename S,                                      \
            std::enable_if_t<!is_vec<S>::value && !is_swizzle<S>::value, bool> = true>                   \
  constexpr vec<T, N> operator OP(const vec<T, N>& a, S b) {                    \
    vec<T, N> r;                                                                \
    for (int i = 0; i < N; ++i)                                                 \
      r[i] = detail::vector_element<T>(a[i] OP T(b), a[i], T(b), detail::KIND);       \
    return r;                                                                   \
  }                                                                             \
  template <typename T, int N, typename S,                                      \
            std::enable_if_t<!is_vec<S>::value && !is_swizzle<S>::value, bool> = true>                   \
  constexpr vec<T, N> operator OP(S a, const vec<T, N>& b) {                    \
    vec<T, N> r;                                                                \
    for (int i = 0; i < N; ++i)                                                 \
      r[i] = detail::vector_element<T>(T(a) OP b[i], T(a), b[i], detail::KIND);       \
    return r;                                                                   \
  }                                                                             \
  template <typename T, int N, typename S>                                      \
  constexpr vec<T, N>& operator OP##=(vec<T, N>& a, const S& b) {               \
    return a = a OP b;                                                          \
  }                                                                              \
  template <typename A, typename B,                                             \
            std::enable_if_t<is_swizzle<A>::value || is_swizzle<B>::value, bool> = true> \
  constexpr auto operator OP(const A& a, const B& b) {                          \
    return as_vector(a) OP as_vector(b);                                        \
  }
PORTER_VEC_ARITH(+, VEC_OVERFLOWS)
PORTER_VEC_ARITH(-, VEC_OVERFLOWS)
PORTER_VEC_ARITH(*, VEC_OVERFLOWS)
PORTER_VEC_ARITH(/, VEC_OVERFLOWS)
PORTER_VEC_ARITH(%, VEC_REMAINDER)
PORTER_VEC_ARITH(&, VEC_PLAIN)
PORTER_VEC_ARITH(|, VEC_PLAIN)
PORTER_VEC_ARITH(^, VEC_PLAIN)
PORTER_VEC_ARITH(<<, VEC_SHIFT)
PORTER_VEC_ARITH(>>, VEC_SHIFT)
#undef PORTER_VEC_ARITH

#define PORTER_VEC_CMP(OP)                                                      \
  template <typename T, int N>                                                  \
  constexpr vec<bool, N> operator OP(const vec<T, N>& a, const vec<T, N>& b) {  \
    vec<bool, N> r;                                                             \
    for (int i = 0; i < N; ++i) r[i] = a[i] OP b[i];                            \
    return r;                                                                   \
  }                                                                             \
  template <typename T, int N, typename S,                                      \
            std::enable_if_t<!is_vec<S>::value && !is_swizzle<S>::value, bool> = true>                   \
  constexpr vec<bool, N> operator OP(const vec<T, N>& a, S b) {                 \
    vec<bool, N> r;                                                             \
    for (int i = 0; i < N; ++i) r[i] = a[i] OP T(b);                            \
    return r;                                                                   \
  }                                                                             \
  template <typename T, int N, typename S,                                      \
            std::enable_if_t<!is_vec<S>::value && !is_swizzle<S>::value, bool> = true>                   \
  constexpr vec<bool, N> operator OP(S a, const vec<T, N>& b) {                 \
    vec<bool, N> r;                                                             \
    for (int i = 0; i < N; ++i) r[i] = T(a) OP b[i];                            \
    return r;                                                                   \
  }                                                                             \
  template <typename A, typename B,                                             \
            std::enable_if_t<is_swizzle<A>::value || is_swizzle<B>::value, bool> = true> \
  constexpr auto operator OP(const A& a, const B& b) {                          \
    return as_vector(a) OP as_vector(b);                                        \
  }
PORTER_VEC_CMP(==)
PORTER_VEC_CMP(!=)
PORTER_VEC_CMP(<)
PORTER_VEC_CMP(<=)
PORTER_VEC_CMP(>)
PORTER_VEC_CMP(>=)
PORTER_VEC_CMP(&&)
PORTER_VEC_CMP(||)
#undef PORTER_VEC_CMP

template <typename T, int N>
constexpr vec<T, N> operator-(const vec<T, N>& a) {
  vec<T, N> r;
  for (int i = 0; i < N; ++i) r[i] = detail::vector_element<T>(-a[i], a[i], 0, detail::VEC_OVERFLOWS);
  return r;
}
template <typename T, int N>
constexpr vec<T, N> operator+(const vec<T, N>& a) { return a; }
template <typename T, int N>
constexpr vec<T, N> operator~(const vec<T, N>& a) {
  vec<T, N> r;
  for (int i = 0; i < N; ++i) r[i] = T(~a[i]);
  return r;
}
template <typename T, int N>
constexpr vec<bool, N> operator!(const vec<T, N>& a) {
  vec<bool, N> r;
  for (int i = 0; i < N; ++i) r[i] = !a[i];
  return r;
}
template <typename T, int N, int... I>
constexpr auto operator-(const swizzle<T, N, I...>& a) { return -as_vector(a); }
template <typename T, int N, int... I>
constexpr auto operator~(const swizzle<T, N, I...>& a) { return ~as_vector(a); }
template <typename T, int N, int... I>
constexpr auto operator!(const swizzle<T, N, I...>& a) { return !as_vector(a); }
template <int N>
constexpr bool all(const vec<bool, N>& v) {
  for (int i = 0; i < N; ++i) if (!v[i]) return false;
  return true;
}
template <int N>
constexpr bool any(const vec<bool, N>& v) {
  for (int i = 0; i < N; ++i) if (v[i]) return true;
  return false;
}
constexpr bool all(bool b) { return b; }
constexpr bool any(bool b) { return b; }

template <typename T, unsigned N>
struct array {
  T elems[N ? N : 1];
  constexpr T& operator[](unsigned i) { return elems[i]; }
  constexpr const T& operator[](unsigned i) const { return elems[i]; }
  constexpr unsigned size() const { return N; }
};

// ---------------------------------------------------------------- traits
using std::conditional_t;
using std::declval;
using std::enable_if;
using std::enable_if_t;
using std::false_type;
using std::integral_constant;
using std::is_const_v;
using std::is_convertible_v;
using std::is_pointer_v;
using std::is_reference_v;
using std::is_same;
using std::is_same_v;
using std::is_void_v;
using std::remove_cv_t;
using std::remove_reference_t;
using std::decay_t;
using std::true_type;

template <typename T> struct is_floating_point_s : std::is_floating_point<T> {};
template <> struct is_floating_point_s<half> : std::true_type {};
template <> struct is_floating_point_s<bfloat> : std::true_type {};
template <typename T, int N> struct is_floating_point_s<vec<T, N>> : is_floating_point_s<T> {};
template <typename T> struct is_floating_point : is_floating_point_s<std::remove_cv_t<T>> {};
template <typename T> constexpr bool is_floating_point_v = is_floating_point<T>::value;

template <typename T> struct is_integral_s : std::is_integral<T> {};
template <typename T, int N> struct is_integral_s<vec<T, N>> : std::is_integral<T> {};
template <typename T> struct is_integral : is_integral_s<std::remove_cv_t<T>> {};
template <typename T> constexpr bool is_integral_v = is_integral<T>::value;

template <typename T> struct is_scalar_s
    : std::integral_constant<bool, std::is_arithmetic_v<T> || std::is_same_v<T, half> ||
                                       std::is_same_v<T, bfloat> || std::is_pointer_v<T> ||
                                       std::is_enum_v<T>> {};
template <typename T> struct is_scalar : is_scalar_s<std::remove_cv_t<T>> {};
template <typename T> constexpr bool is_scalar_v = is_scalar<T>::value;

template <typename T> struct is_arithmetic
    : std::integral_constant<bool, is_floating_point_v<T> || is_integral_v<T>> {};
template <typename T> constexpr bool is_arithmetic_v = is_arithmetic<T>::value;

template <typename T> struct is_signed_s : std::is_signed<T> {};
template <> struct is_signed_s<half> : std::true_type {};
template <> struct is_signed_s<bfloat> : std::true_type {};
template <typename T, int N> struct is_signed_s<vec<T, N>> : is_signed_s<T> {};
template <typename T> struct is_signed : is_signed_s<std::remove_cv_t<T>> {};
template <typename T> constexpr bool is_signed_v = is_signed<T>::value;
template <typename T> constexpr bool is_unsigned_v = is_integral_v<T> && !is_signed_v<T>;

template <typename T> struct is_vector : is_vec<std::remove_cv_t<T>> {};
template <typename T> constexpr bool is_vector_v = is_vector<T>::value;

template <typename T> struct make_unsigned { using type = std::make_unsigned_t<T>; };
template <typename T> using make_unsigned_t = typename make_unsigned<T>::type;
template <typename T> struct make_signed { using type = std::make_signed_t<T>; };
template <typename T> using make_signed_t = typename make_signed<T>::type;

template <typename T> struct numeric_limits : std::numeric_limits<T> {};
template <> struct numeric_limits<half> {
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr int digits = 11;
  static constexpr int radix = 2;
  static constexpr int min_exponent = -13;
  static constexpr int max_exponent = 16;
  static constexpr half min() { return (half)6.103515625e-05f; }
  static constexpr half max() { return (half)65504.0f; }
  static constexpr half lowest() { return (half)-65504.0f; }
  static constexpr half epsilon() { return (half)0.0009765625f; }
  static constexpr half infinity() { return (half)__builtin_inff(); }
  static constexpr half quiet_NaN() { return (half)__builtin_nanf(""); }
  static constexpr half denorm_min() { return (half)5.9604644775390625e-08f; }
};
template <> struct numeric_limits<bfloat> {
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr int digits = 8;
  static constexpr int radix = 2;
  static constexpr int min_exponent = -125;
  static constexpr int max_exponent = 128;
  static constexpr bfloat min() { return bfloat::from_bits(0x0080); }
  static constexpr bfloat max() { return bfloat::from_bits(0x7f7f); }
  static constexpr bfloat lowest() { return bfloat::from_bits(0xff7f); }
  static constexpr bfloat epsilon() { return bfloat::from_bits(0x3c00); }
  static constexpr bfloat infinity() { return bfloat::from_bits(0x7f80); }
  static constexpr bfloat quiet_NaN() { return bfloat::from_bits(0x7fc0); }
  static constexpr bfloat denorm_min() { return bfloat::from_bits(0x0001); }
};

namespace detail {
inline float nan_sign_read(float x);
}
namespace detail {
inline void note_vector_undefined(int bit);
}
template <typename To, typename From>
inline To as_type(const From& from) {
  static_assert(sizeof(To) == sizeof(From), "as_type: size mismatch");
  if constexpr (std::is_same_v<From, float>) detail::nan_sign_read(from);
  To to;
  __builtin_memcpy(&to, &from, sizeof(To));
  // a bool (or a bool vector's element) whose byte is neither 0 nor 1 has no value in Metal's
  // bool; this CPU reads it as true, a Mac's compiler may test its low bit or its byte: bit 128
  // (UNDEFINED_ARGUMENT), not proven (review 40's L23b)
  if constexpr (std::is_same_v<To, bool> || std::is_same_v<To, vec<bool, 2>> ||
                std::is_same_v<To, vec<bool, 3>> || std::is_same_v<To, vec<bool, 4>>) {
    unsigned char bytes[sizeof(To)];
    __builtin_memcpy(bytes, &from, sizeof(To));
    int elements = 1;                       // a bool3's fourth byte is padding
    if constexpr (!std::is_same_v<To, bool>) elements = To::size;
    for (int i = 0; i < elements; ++i)
      if (bytes[i] > 1) detail::note_vector_undefined(128);
  }
  return to;
}

// ---------------------------------------------------------------- undefined answers
// Metal leaves some answers undefined: a NaN operand of fast:: min/max/fmin/fmax/fmin3/fmax3/
// clamp (MSL §6.5's fast-math note) and of fmedian3 (the specification says nothing of a NaN
// there). A Mac answers something; porter cannot know what, so the kernel runs twice on such a
// sample (porter/emulate/worker.py): `porter_reading` 0 gives IEEE's answer (the NaN operand
// ignored, as fmax does), 1 gives NaN, and porter_harness's verdict holds the kernel to both.
// `porter_reached` says which family ran into one (a bit each), so a sample that never reaches
// one runs once. Weak: each piece of a file built in pieces carries them; one is kept.
// Bit 4 (UNMODELLED_FAST) says the kernel ran a fast:: function porter runs as the precise one
// (a Mac's answer is only within fast math's bound), and `porter_fast_ran` names it: however
// the call was spelled (a using-declaration, a helper, a macro), the sample is not proven.
extern "C" {
__attribute__((visibility("default"), weak)) int porter_reading = 0;
__attribute__((visibility("default"), weak)) int porter_reached = 0;
__attribute__((visibility("default"), weak)) const char* porter_fast_ran = nullptr;
}
namespace detail {
enum : int { UNDEFINED_FAST_NAN = 1, UNDEFINED_MEDIAN_NAN = 2, UNMODELLED_FAST = 4,
             UNDEFINED_CONVERSION = 8, NAN_SIGN = 16, UNDEFINED_SHIFT = 32,
             OUT_OF_BOUNDS = 64, UNDEFINED_ARGUMENT = 128, SIGNED_OVERFLOW = 256,
             SIGNED_ZEROS = 512, NARROW_VECTOR_OVERFLOW = 1024, DIVIDE_OVERFLOW = 2048,
             UNSETTLED_LIBRARY = 4096 };
// Bit 4096 (UNSETTLED_LIBRARY): an answer of Metal's library or conversions the specification
// leaves open, read both ways (reading 1 the other answer): an integer past 2^24 to bfloat
// (bfloat::from_integer), ilogb of zero or NaN (C's FP_ILOGB0/FP_ILOGBNAN are either least or
// greatest int; glibc's are INT_MIN), frexp of a float subnormal (flushed as Apple GPUs flush
// the library's arguments, or not) (review 38's U08, B13, B10)
inline int unsettled(int here, int other) {
  if (here == other) return here;
  porter_reached |= UNSETTLED_LIBRARY;
  return porter_reading ? other : here;
}
inline void note_vector_undefined(int bit) { porter_reached |= bit; }
static_assert(UNDEFINED_SHIFT == 32 && OUT_OF_BOUNDS == 64 && NARROW_VECTOR_OVERFLOW == 1024,
              "vector_element and operator[] name these bits before the enum");
// Bit 16 (NAN_SIGN): the sign of x86's default NaN read (signbit, copysign's sign, as_type's
// bits): an invalid operation (0/0, inf - inf) makes it negative here, and an Apple GPU, as
// ARM does, makes it positive (review 31's N06). A NaN of the inputs (torch's is positive)
// keeps its sign on both, and is not noted.
inline float nan_sign_read(float x) {
  if (__builtin_bit_cast(unsigned int, x) == 0xffc00000u) porter_reached |= NAN_SIGN;
  return x;
}
}
// Bit 8 (UNDEFINED_CONVERSION): a float converted to an integer type outside its range, or a
// NaN (toolchain.FLAGS' -fsanitize=float-cast-overflow calls these instead of libubsan's; hidden,
// so each library binds its own). x86 answers the least integer; what an Apple GPU answers
// is not known here, and the sample is not proven.
// Each check's handler and its _abort twin (what a check built without recovery calls) note
// the family's bit.
#define PORTER_UBSAN_NOTES(CHECK, BIT, ...)                                                 \
  __attribute__((visibility("hidden"), weak)) void __ubsan_handle_##CHECK(__VA_ARGS__) {    \
    porter_reached |= ::metal::detail::BIT;                                                 \
  }                                                                                         \
  __attribute__((visibility("hidden"), weak)) void __ubsan_handle_##CHECK##_abort(__VA_ARGS__) { \
    porter_reached |= ::metal::detail::BIT;                                                 \
  }
extern "C" {
PORTER_UBSAN_NOTES(float_cast_overflow, UNDEFINED_CONVERSION, void*, void*)
// Bits 32 and 64: a shift by a negative count or one of at least the width, an index past an
// array of known bound (-fsanitize=shift-exponent,bounds)
PORTER_UBSAN_NOTES(shift_out_of_bounds, UNDEFINED_SHIFT, void*, void*, void*)
PORTER_UBSAN_NOTES(out_of_bounds, OUT_OF_BOUNDS, void*, void*)
// Bit 256: a signed integer operation overflowed (-fsanitize=signed-integer-overflow). The
// instrumented operation goes on with the wrapped value, as a GPU's adder gives it; but the
// overflow is undefined in Metal, and clang may fold code on the assumption that it never
// happens (`a + 1 < a` is false), so such a sample is run again on a build that assumes it
// too (porter.emulate.emulator_device: review 34's N01, N04). The least integer divided by
// -1 is not one of these: bit 2048 (DIVIDE_OVERFLOW), not proven whatever the answer (x86
// traps on it only where g++ did not fold it, and LLVM folds it to poison: review 38's U03).
PORTER_UBSAN_NOTES(add_overflow, SIGNED_OVERFLOW, void*, void*, void*)
PORTER_UBSAN_NOTES(sub_overflow, SIGNED_OVERFLOW, void*, void*, void*)
PORTER_UBSAN_NOTES(mul_overflow, SIGNED_OVERFLOW, void*, void*, void*)
PORTER_UBSAN_NOTES(negate_overflow, SIGNED_OVERFLOW, void*, void*)
PORTER_UBSAN_NOTES(divrem_overflow, DIVIDE_OVERFLOW, void*, void*, void*)
}
#undef PORTER_UBSAN_NOTES
namespace detail {
// `ieee` where no operand is NaN; else the reading's answer, and the family is noted
inline float undefined_on_nan(bool any_nan, float ieee, int family) {
  if (!any_nan) return ieee;
  porter_reached |= family;
  return porter_reading ? __builtin_nanf("") : ieee;
}
inline float fast_max(float x, float y) {
  return undefined_on_nan(x != x || y != y, __builtin_fmaxf(x, y), UNDEFINED_FAST_NAN);
}
inline float fast_min(float x, float y) {
  return undefined_on_nan(x != x || y != y, __builtin_fminf(x, y), UNDEFINED_FAST_NAN);
}
inline void undefined_argument(bool undefined);
inline float fast_clamp(float x, float lo, float hi) {
  undefined_argument(lo > hi);
  return undefined_on_nan(x != x || lo != lo || hi != hi,
                          __builtin_fminf(__builtin_fmaxf(x, lo), hi), UNDEFINED_FAST_NAN);
}
// the fast:: functions whose answers porter models (porter/emulate/fast_calls.py's MODELLED):
// fast::tanh as Apple's formula, the NaN answers of min/max/fmin/fmax both ways
constexpr bool same_name(const char* a, const char* b) {
  return *a == *b && (*a == 0 || same_name(a + 1, b + 1));
}
constexpr bool fast_modelled(const char* name) {
  return same_name(name, "tanh") || same_name(name, "fmax") || same_name(name, "fmin");
}
// a fast:: function's answer, noting the function where porter does not model it
inline float fast_ran(const char* name, float answer) {
  if (!fast_modelled(name)) {
    porter_reached |= UNMODELLED_FAST;
    porter_fast_ran = name;
  }
  return answer;
}
// Bit 512 (SIGNED_ZEROS): fmax/fmin of zeros of both signs. IEEE 754-2019's maximumNumber
// answers +0 (minimumNumber -0); the specification's text ("returns y if x < y, otherwise it
// returns x") answers x. Which an Apple GPU answers is not known: reading 1 gives the text's,
// and the verdict holds the kernel to both (review 34's B01). A sign no one reads is no
// difference: torch compares -0 and +0 equal.
inline float zeros_either(float x, float y, float ieee) {
  if (x != 0.0f || y != 0.0f || __builtin_signbit(x) == __builtin_signbit(y)) return ieee;
  porter_reached |= SIGNED_ZEROS;
  return porter_reading ? x : ieee;
}
// the median as fmin/fmax compose it: with no NaN, the middle value
inline float median3(float x, float y, float z, int family) {
  const float m = __builtin_fmaxf(__builtin_fminf(x, y), __builtin_fminf(__builtin_fmaxf(x, y), z));
  return undefined_on_nan(x != x || y != y || z != z, m, family);
}
} // namespace detail

// ---------------------------------------------------------------- math
namespace detail {
template <typename T, int N, typename F>
inline vec<T, N> map(const vec<T, N>& v, F f) {
  vec<T, N> r;
  for (int i = 0; i < N; ++i) r[i] = T(f(v[i]));
  return r;
}
template <typename T, int N, typename F>
inline vec<T, N> map2(const vec<T, N>& a, const vec<T, N>& b, F f) {
  vec<T, N> r;
  for (int i = 0; i < N; ++i) r[i] = T(f(a[i], b[i]));
  return r;
}
// A float32 subnormal, read or answered by Metal's library on an Apple GPU, is a signed zero
// (prelude.h's FlushSubnormals). The host's FTZ/DAZ switches flush float arithmetic, but libm
// takes some arguments apart as integers: glibc's logf(1e-40f) is -103.97 under DAZ where a
// Mac's log reads 0 and answers -inf (review 19's N09); sinf(1e-40f) returns its argument's
// bits. So every float argument of the library, and every float answer, passes through here.
inline float ftz(float x) {
  return (__builtin_bit_cast(unsigned int, x) & 0x7f800000u) == 0 ? __builtin_copysignf(0.0f, x) : x;
}
// frexp of a float subnormal: flushed first (0, exponent 0), or taken apart as it is: which
// an Apple GPU answers is not documented (bit 4096, reading 1 the exact one)
inline float frexp_either(float x, int& e) {
  int flushed_e = 0, exact_e = 0;
  const float flushed = __builtin_frexpf(ftz(x), &flushed_e);
  float exact = flushed;
  exact_e = flushed_e;
  const unsigned int u = __builtin_bit_cast(unsigned int, x);
  if ((u & 0x7f800000u) == 0 && (u & 0x7fffffu) != 0) {
    // taken apart from its bits: libm's frexpf reads it as zero under the worker's DAZ
    const unsigned int f = u & 0x7fffffu;
    const int k = 32 - __builtin_clz(f);          // f < 2^k: x = (f / 2^k) x 2^(k - 149)
    exact = __builtin_copysignf(float(f) / float(1u << k), x);
    exact_e = k - 149;
  }
  if (flushed == exact && flushed_e == exact_e) {
    e = flushed_e;
    return flushed;
  }
  const bool other = unsettled(0, 1) == 1;     // noted; reading 1 is the exact one
  e = other ? exact_e : flushed_e;
  return other ? exact : flushed;
}
// ilogb of zero (a flushed subnormal too) or NaN: FP_ILOGB0 / FP_ILOGBNAN are the least or
// the greatest int as the implementation chooses (glibc: INT_MIN for both)
inline int ilogb_either(float x) {
  const int here = __builtin_ilogbf(ftz(x));
  if (ftz(x) == 0.0f) return unsettled(here, -2147483647);
  if (x != x) return unsettled(here, 2147483647);
  return here;
}
// sinpi/cospi are exact at integers and half-integers in Metal (lgamma's reflection
// formula relies on sinpi(n) == 0 to return inf at the poles).
// (in double: the float answer rounds it, and within_ulps brackets it)
inline double sinpi_wide(float x) {
  if (__builtin_isinf(x) || __builtin_isnan(x)) return __builtin_nan("");
  const double r = __builtin_fmod((double)x, 2.0);
  if (r == __builtin_trunc(r)) return __builtin_copysign(0.0, (double)x);
  return __builtin_sin(3.14159265358979323846 * r);
}
inline double cospi_wide(float x) {
  if (__builtin_isinf(x) || __builtin_isnan(x)) return __builtin_nan("");
  const double r = __builtin_fmod(__builtin_fabs((double)x), 2.0);
  if (r + 0.5 == __builtin_trunc(r + 0.5)) return 0.0;
  return __builtin_cos(3.14159265358979323846 * r);
}
inline float sinpi(float x) { return (float)sinpi_wide(x); }
inline float cospi(float x) { return (float)cospi_wide(x); }
// powr is defined for x >= 0 alone (MSL §6.5); Apple's computes it as exp2(y * log2(x)), so a
// negative base gives NaN (KhronosGroup/SPIRV-Cross #2206: powr(-2, 2) is NaN on Apple GPUs),
// where pow(-2, 2) is 4
// and so are the products of zero and infinity in y * log2(x): powr(0, 0), powr(inf, 0) and
// powr(1, inf) are NaN (OpenCL's powr, whose domain MSL's follows, says the same), and a NaN
// operand is NaN, where pow(1, NaN) and pow(NaN, 0) are 1 (review 34's B02)
inline float powr(float x, float y) {
  if (x < 0.0f || x != x || y != y) return __builtin_nanf("");
  if ((x == 0.0f || __builtin_isinf(x)) && y == 0.0f) return __builtin_nanf("");
  if (x == 1.0f && __builtin_isinf(y)) return __builtin_nanf("");
  return __builtin_powf(x, y);
}
inline float fast_tanh(float x) {
  const float e = __builtin_expf(2.0f * x);
  return (e - 1.0f) / (e + 1.0f);
}
inline half nextafter_half(half from, half to) {
  if (from != from || to != to) return (half)__builtin_nanf("");
  if (from == to) return to;
  unsigned short b = __builtin_bit_cast(unsigned short, from);
  if ((b & 0x7fff) == 0) {
    b = (unsigned short)((__builtin_bit_cast(unsigned short, to) & 0x8000) | 1);
  } else if ((from < to) == !(b & 0x8000)) {
    ++b;
  } else {
    --b;
  }
  return __builtin_bit_cast(half, b);
}
// Bit 4096 (UNSETTLED_LIBRARY) too: a function of Metal's library the specification holds to a
// bound in ulp, not to the correctly rounded answer (MSL §7.4's accuracy tables: `sin`, `exp`,
// `rsqrt`, `pow`, ...), may answer either float around the exact value. `r` is this CPU's
// answer, `exact` the value in double: where they differ, reading 1 is the other float around
// it, so a functor that compares such bits exactly (`rsqrt(3) == 1 / sqrt(3)`, review 38's
// B09) is not proven, and one within a tolerance passes both ways. Reading 1 moves the answers
// of every other function an element calls, in the order it first calls them (the first, the
// third, ...: bracket_calls, reset per element by prelude.h's run_loop), so that two functions
// with one exact value (`pow(3, -0.5) == rsqrt(3)`, review 40's B17) do not move together,
// while one function answers one argument alike wherever it is called (B18). An answer farther off, which a bound of several ulp
// allows, is not modelled. A half overload reads at half's spacing (Metal's half functions
// have bounds of their own): half_bracket. Exact answers (exp(0), sqrt(4)) and answers past
// the type's range have one reading, but pow's and powr's (review 40's B04, V15: Apple's powr
// is exp2(y * log2(x)), 242.99997 for powr(3, 5)): their other reading is the float below
// in magnitude, unless that formula is exact too (pow_exact_may_move). fast::tanh, whose
// formula porter runs (detail::fast_tanh), has one reading.
inline int bracket_half_depth = 0;
inline int bracket_calls = 0;
struct half_bracket {
  half_bracket() { ++bracket_half_depth; }
  ~half_bracket() { --bracket_half_depth; }
};
// the function whose answer within_ulps reads (PORTER_MATH1/2's name), and the functions an
// element has called, in order (a function past the list's end moves)
inline const char* bracket_function = "";
inline const char* bracket_seen[16];
inline float bracket_read(float r, float other) {
  porter_reached |= UNSETTLED_LIBRARY;
  int k = 0;
  while (k < bracket_calls && !same_name(bracket_seen[k], bracket_function)) ++k;
  if (k == bracket_calls && k < 16) bracket_seen[bracket_calls++] = bracket_function;
  const bool moves = k % 2 == 0;
  return porter_reading && moves ? other : r;
}
// Apple's pow is exp2(y * log2(x)): exact where log2|x| is (a power of two, 1 included) or y
// is 0, so pow(1, 2) is 1 on a Mac, and only other exact answers may read the float below
inline bool pow_exact_may_move(float x, float y) {
  int e = 0;
  const bool power_of_two = x != 0.0f && __builtin_frexpf(__builtin_fabsf(x), &e) == 0.5f;
  return !power_of_two && y != 0.0f;
}
inline float within_ulps(float r, double exact, bool exact_may_move = false) {
  if (!__builtin_isfinite(r) || !__builtin_isfinite(exact)) return r;
  if (bracket_half_depth > 0) {
    const half h = (half)r;
    const double hd = (double)(float)h;
    if (!__builtin_isfinite(hd) || hd == 0.0 || (hd == exact && !exact_may_move)) return r;
    const half toward = hd == exact ? (half)0.0f : exact > hd ? (half)65504.0f : (half)-65504.0f;
    const half other = nextafter_half(h, toward);
    if (other == h) return r;
    return bracket_read(r, (float)other);
  }
  if (r == 0.0f || ((double)r == exact && !exact_may_move)) return r;
  const float toward = (double)r == exact ? 0.0f
                       : exact > (double)r ? __builtin_inff() : -__builtin_inff();
  const float other = __builtin_nextafterf(r, toward);
  if (!__builtin_isfinite(other)) return r;
  return bracket_read(r, other);
}
} // namespace detail

// One-argument functions: float and half in metal::, float only in precise::
// and fast:: (upstream relies on precise:: taking bfloat without ambiguity).
#define PORTER_MATH1_SCALAR(NAME, EXPR)                                         \
  inline float NAME(float x) {                                                  \
    x = detail::ftz(x);                                                         \
    detail::bracket_function = #NAME;                                           \
    return detail::ftz(EXPR);                                                   \
  }
// a half vector's elements go through the half overload where there is one (declared first)
#define PORTER_MATH1_VEC(NAME)                                                  \
  template <typename T, int N>                                                  \
  inline vec<T, N> NAME(const vec<T, N>& v) {                                   \
    return detail::map(v, [](T e) {                                             \
      if constexpr (std::is_same_v<T, half>) return NAME(e);                    \
      else return NAME(float(e));                                               \
    });                                                                         \
  }
#define PORTER_MATH1_F(NAME, EXPR) PORTER_MATH1_SCALAR(NAME, EXPR) PORTER_MATH1_VEC(NAME)
// The half overload computes in float and rounds once to half; fract's answer then stays
// below 1 as Metal's does ([0, 1): OpenCL's fmin(x - floor(x), 0x1.ffcp-1h) for half),
// where a float fract just below 1 rounds up to half's 1.0 (review 36's K02)
#define PORTER_MATH1(NAME, EXPR)                                                \
  PORTER_MATH1_SCALAR(NAME, EXPR)                                               \
  inline half NAME(half h) {                                                    \
    const detail::half_bracket at_half_precision;                               \
    half r = half(NAME(float(h)));                                              \
    if constexpr (detail::same_name(#NAME, "fract")) r = r < half(1) ? r : half(0x1.ffcp-1f); \
    return r;                                                                   \
  }                                                                             \
  PORTER_MATH1_VEC(NAME)

#define PORTER_MATH2_F(NAME, EXPR)                                              \
  inline float NAME(float x, float y) {                                         \
    x = detail::ftz(x); y = detail::ftz(y);                                     \
    detail::bracket_function = #NAME;                                           \
    return detail::ftz(EXPR);                                                   \
  }                                                                             \
  template <typename T, int N>                                                  \
  inline vec<T, N> NAME(const vec<T, N>& a, const vec<T, N>& b) {               \
    return detail::map2(a, b, [](T e, T f) { return NAME(float(e), float(f)); }); \
  }
#define PORTER_MATH2(NAME, EXPR)                                                \
  PORTER_MATH2_F(NAME, EXPR)                                                    \
  inline half NAME(half x, half y) {                                            \
    const detail::half_bracket at_half_precision;                               \
    return half(NAME(float(x), float(y)));                                      \
  }

// the precise tanh within its bound (PORTER_ULPS); fast:: runs Apple's formula instead
#define PORTER_TANH(x) PORTER_ULPS(__builtin_tanhf(x), __builtin_tanh(x))
#define PORTER_FMAX(x, y) detail::zeros_either(x, y, (x == 0.0f && y == 0.0f) ? (__builtin_signbit(x) ? y : x) : __builtin_fmaxf(x, y))
#define PORTER_FMIN(x, y) detail::zeros_either(x, y, (x == 0.0f && y == 0.0f) ? (__builtin_signbit(x) ? x : y) : __builtin_fminf(x, y))
// The functions the specification holds to a bound in ulp answer through PORTER_ULPS (either
// float around the exact value, detail::within_ulps); the others are correctly rounded or
// exact there (ceil, fabs, fmax, fmod, ...) and answer this CPU's bits.
#define PORTER_ULPS(r, exact) detail::within_ulps(r, exact)
#define PORTER_ULPS_POW(r, exact) detail::within_ulps(r, exact, detail::pow_exact_may_move(x, y))
#define PORTER_MATH_TABLE(M1, M2)                                                                             \
  M1(acos, PORTER_ULPS(__builtin_acosf(x), __builtin_acos(x)))                                                \
  M1(acosh, PORTER_ULPS(__builtin_acoshf(x), __builtin_acosh(x)))                                             \
  M1(asin, PORTER_ULPS(__builtin_asinf(x), __builtin_asin(x)))                                                \
  M1(asinh, PORTER_ULPS(__builtin_asinhf(x), __builtin_asinh(x)))                                             \
  M1(atan, PORTER_ULPS(__builtin_atanf(x), __builtin_atan(x)))                                                \
  M1(atanh, PORTER_ULPS(__builtin_atanhf(x), __builtin_atanh(x)))                                             \
  M1(cbrt, PORTER_ULPS(__builtin_cbrtf(x), __builtin_cbrt(x)))                                                \
  M1(ceil, __builtin_ceilf(x))                                                                                \
  M1(cos, PORTER_ULPS(__builtin_cosf(x), __builtin_cos(x)))                                                   \
  M1(cosh, PORTER_ULPS(__builtin_coshf(x), __builtin_cosh(x)))                                                \
  M1(cospi, PORTER_ULPS(detail::cospi(x), detail::cospi_wide(x)))                                             \
  M1(exp, PORTER_ULPS(__builtin_expf(x), __builtin_exp(x)))                                                   \
  M1(exp2, PORTER_ULPS(__builtin_exp2f(x), __builtin_exp2(x)))                                                \
  M1(exp10, PORTER_ULPS(__builtin_powf(10.0f, x), __builtin_pow(10.0, x)))                                    \
  M1(fabs, __builtin_fabsf(x))                                                                                \
  M1(abs, __builtin_fabsf(x))                                                                                 \
  M1(floor, __builtin_floorf(x))                                                                              \
  M1(fract, __builtin_fminf(x - __builtin_floorf(x), 0x1.fffffep-1f))                                         \
  M1(log, PORTER_ULPS(__builtin_logf(x), __builtin_log(x)))                                                   \
  M1(log2, PORTER_ULPS(__builtin_log2f(x), __builtin_log2(x)))                                                \
  M1(log10, PORTER_ULPS(__builtin_log10f(x), __builtin_log10(x)))                                             \
  M1(logb, __builtin_logbf(x))                                                                                \
  M1(rint, __builtin_rintf(x))                                                                                \
  M1(round, __builtin_roundf(x))                                                                              \
  M1(rsqrt, PORTER_ULPS(1.0f / __builtin_sqrtf(x), 1.0 / __builtin_sqrt(x)))                                  \
  M1(saturate, __builtin_fminf(__builtin_fmaxf(x, 0.0f), 1.0f))                                               \
  M1(sign, (x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : x == x ? __builtin_copysignf(0.0f, x) : 0.0f))               \
  M1(sin, PORTER_ULPS(__builtin_sinf(x), __builtin_sin(x)))                                                   \
  M1(sinh, PORTER_ULPS(__builtin_sinhf(x), __builtin_sinh(x)))                                                \
  M1(sinpi, PORTER_ULPS(detail::sinpi(x), detail::sinpi_wide(x)))                                             \
  M1(sqrt, PORTER_ULPS(__builtin_sqrtf(x), __builtin_sqrt(x)))                                                \
  M1(tan, PORTER_ULPS(__builtin_tanf(x), __builtin_tan(x)))                                                   \
  M1(tanh, PORTER_TANH(x))                                                                                    \
  M1(tanpi, PORTER_ULPS(detail::sinpi(x) / detail::cospi(x), detail::sinpi_wide(x) / detail::cospi_wide(x)))  \
  M1(trunc, __builtin_truncf(x))                                                                              \
  M2(atan2, PORTER_ULPS(__builtin_atan2f(x, y), __builtin_atan2(x, y)))                                       \
  M2(copysign, __builtin_copysignf(x, detail::nan_sign_read(y)))                                              \
  M2(fdim, __builtin_fdimf(x, y))                                                                             \
  M2(fmax, PORTER_FMAX(x, y))                                                                                 \
  M2(fmin, PORTER_FMIN(x, y))                                                                                 \
  M2(fmod, __builtin_fmodf(x, y))                                                                             \
  M2(pow, PORTER_ULPS_POW(__builtin_powf(x, y), __builtin_pow(x, y)))                                             \
  M2(powr, PORTER_ULPS_POW(detail::powr(x, y), __builtin_pow(x, y)))                                              \
  M2(step, (y < x ? 0.0f : 1.0f))

PORTER_MATH_TABLE(PORTER_MATH1, PORTER_MATH2)

// fmax3/fmin3 (MSL 2.1 on): fmax(x, fmax(y, z)), fmin(x, fmin(y, z)), so a NaN operand yields
// the larger/smaller of the others, as fmax/fmin do. fmedian3's answer for a NaN operand is not
// in the specification: both readings run (detail::undefined_on_nan).
#define PORTER_MATH3_F(NAME, EXPR)                                              \
  inline float NAME(float x, float y, float z) {                                \
    x = detail::ftz(x); y = detail::ftz(y); z = detail::ftz(z);                 \
    return detail::ftz(EXPR);                                                   \
  }                                                                             \
  template <typename T, int N>                                                  \
  inline vec<T, N> NAME(const vec<T, N>& a, const vec<T, N>& b, const vec<T, N>& c) { \
    vec<T, N> r;                                                                \
    for (int i = 0; i < N; ++i) r[i] = T(NAME(float(a[i]), float(b[i]), float(c[i]))); \
    return r;                                                                   \
  }
#define PORTER_MATH3(NAME, EXPR)                                                \
  PORTER_MATH3_F(NAME, EXPR)                                                    \
  inline half NAME(half x, half y, half z) { return half(NAME(float(x), float(y), float(z))); }
PORTER_MATH3(fmax3, __builtin_fmaxf(x, __builtin_fmaxf(y, z)))
PORTER_MATH3(fmin3, __builtin_fminf(x, __builtin_fminf(y, z)))
PORTER_MATH3(fmedian3, detail::median3(x, y, z, detail::UNDEFINED_MEDIAN_NAN))

// Metal's max/min on floats are fmax/fmin (a NaN operand yields the other).
PORTER_MATH2(max, __builtin_fmaxf(x, y))
PORTER_MATH2(min, __builtin_fminf(x, y))
template <typename T, std::enable_if_t<std::is_integral_v<T>, bool> = true>
constexpr inline T max(T a, T b) { return a < b ? b : a; }
template <typename T, std::enable_if_t<std::is_integral_v<T>, bool> = true>
constexpr inline T min(T a, T b) { return b < a ? b : a; }
namespace detail {
// Bit 128 (UNDEFINED_ARGUMENT): a call whose arguments Metal leaves the answer of undefined
// (clamp with minval > maxval; extract_bits/insert_bits past the width; abs of the least
// value, whose |x| the type cannot hold): a Mac answers something porter cannot know, so the
// sample is not proven (review 33's C01-C03; review 38's B02)
inline void undefined_argument(bool undefined) {
  if (undefined) porter_reached |= UNDEFINED_ARGUMENT;
}
}  // namespace detail
template <typename T, std::enable_if_t<std::is_integral_v<T>, bool> = true>
inline T abs(T a) {
  if constexpr (std::is_signed_v<T>) {
    detail::undefined_argument(a == std::numeric_limits<T>::min());
    if (a == std::numeric_limits<T>::min()) return a;
  }
  return a < 0 ? T(-a) : a;
}
// MSL §6.3: |x - y| "without modulo overflow": the difference of the unsigned type, whose
// arithmetic wraps where the signed one would overflow (review 38's B18: INT_MAX, INT_MIN)
template <typename T, std::enable_if_t<std::is_integral_v<T>, bool> = true>
constexpr inline T absdiff(T a, T b) {
  using U = std::make_unsigned_t<T>;
  return a > b ? T(U(U(a) - U(b))) : T(U(U(b) - U(a)));
}
namespace detail {
template <typename T> constexpr bool greater(const T& a, const T& b) { return a > b; }
template <typename T, int N> inline bool greater(const vec<T, N>& a, const vec<T, N>& b) {
  for (int i = 0; i < N; ++i) if (a[i] > b[i]) return true;
  return false;
}
}
template <typename T, std::enable_if_t<!std::is_same_v<T, bfloat>, bool> = true>
inline T clamp(T x, T lo, T hi) {
  detail::undefined_argument(detail::greater(lo, hi));
  return min(max(x, lo), hi);
}
// Metal has no bfloat clamp: a bfloat call takes float's (bfloat converts to float) and
// answers a float, as max and min of bfloat do here
inline float clamp(bfloat x, bfloat lo, bfloat hi) { return clamp(float(x), float(lo), float(hi)); }
template <typename T, std::enable_if_t<std::is_integral_v<T>, bool> = true>
inline T clz(T x) {
  constexpr int bits = int(sizeof(T)) * 8;
  using U = std::make_unsigned_t<T>;
  U u = U(x);
  if (u == 0) return T(bits);
  return T(__builtin_clzll((unsigned long long)u) - (64 - bits));
}
template <typename T, std::enable_if_t<std::is_integral_v<T>, bool> = true>
inline T ctz(T x) {
  constexpr int bits = int(sizeof(T)) * 8;
  using U = std::make_unsigned_t<T>;
  U u = U(x);
  return u == 0 ? T(bits) : T(__builtin_ctzll((unsigned long long)u));
}
template <typename T, std::enable_if_t<std::is_integral_v<T>, bool> = true>
inline T popcount(T x) {
  return T(__builtin_popcountll((unsigned long long)std::make_unsigned_t<T>(x)));
}
// Metal has no bool overload of these: a bool argument is promoted to int, its best match, and
// the call answers an int (review 27's B08, B13: `auto m = max(a, b)` of bools was a bool here,
// `m + m` then 1 where a Mac computes 2)
constexpr inline int max(bool a, bool b) { return max(int(a), int(b)); }
constexpr inline int min(bool a, bool b) { return min(int(a), int(b)); }
constexpr inline int abs(bool a) { return int(a); }
constexpr inline int absdiff(bool a, bool b) { return absdiff(int(a), int(b)); }
inline int clamp(bool x, bool lo, bool hi) { return clamp(int(x), int(lo), int(hi)); }
inline int clz(bool x) { return clz(int(x)); }
inline int ctz(bool x) { return ctz(int(x)); }
inline int popcount(bool x) { return popcount(int(x)); }

// The rest of MSL's integer functions ("Integer functions" table), for the integer types the
// front end declares them for (not bool: a Mac promotes a bool argument to int, so those call
// shapes stay in NOT_EXECUTABLE). Each is computed exactly in a wider type and then narrowed,
// so no intermediate wraps where Metal's definition does not.
namespace detail {
template <typename T>
constexpr bool msl_int = std::is_integral_v<T> && !std::is_same_v<T, bool>;
using wide = __int128;
using uwide = unsigned __int128;
template <typename T>
constexpr T saturate(wide v) {
  constexpr wide lo = wide(std::numeric_limits<T>::min());
  constexpr wide hi = wide(std::numeric_limits<T>::max());
  return T(v < lo ? lo : v > hi ? hi : v);
}
} // namespace detail
#define PORTER_MSL_INT template <typename T, std::enable_if_t<detail::msl_int<T>, bool> = true>
PORTER_MSL_INT constexpr inline T max3(T x, T y, T z) { return max(x, max(y, z)); }
PORTER_MSL_INT constexpr inline T min3(T x, T y, T z) { return min(x, min(y, z)); }
// ... and of floats (MSL §6.5): Metal's max/min of floats are fmax/fmin, and median3's answer
// for a NaN operand is fmedian3's, undefined (both readings run)
// (float and half alone: the integer vectors keep PORTER_INT_VEC3's overloads)
#define PORTER_FLOAT_MATH3(NAME, EXPR)                                          \
  inline float NAME(float x, float y, float z) { return EXPR; }                 \
  inline half NAME(half x, half y, half z) { return half(NAME(float(x), float(y), float(z))); } \
  template <typename T, int N, std::enable_if_t<std::is_same_v<T, float> || std::is_same_v<T, half>, bool> = true> \
  inline vec<T, N> NAME(const vec<T, N>& a, const vec<T, N>& b, const vec<T, N>& c) { \
    vec<T, N> r;                                                                \
    for (int i = 0; i < N; ++i) r[i] = T(NAME(float(a[i]), float(b[i]), float(c[i]))); \
    return r;                                                                   \
  }
PORTER_FLOAT_MATH3(max3, __builtin_fmaxf(x, __builtin_fmaxf(y, z)))
PORTER_FLOAT_MATH3(min3, __builtin_fminf(x, __builtin_fminf(y, z)))
PORTER_FLOAT_MATH3(median3, detail::median3(x, y, z, detail::UNDEFINED_MEDIAN_NAN))
#undef PORTER_FLOAT_MATH3
PORTER_MSL_INT constexpr inline T median3(T x, T y, T z) {
  return max(min(x, y), min(max(x, y), z));
}
// Bits [offset, offset + bits - 1] of x in the low bits; the high bits are zero for an unsigned
// T and copies of bit offset + bits - 1 for a signed T; 0 when bits is 0 (MSL). offset + bits
// past the width is undefined in Metal: computed here on the wide value.
PORTER_MSL_INT inline T extract_bits(T x, uint offset, uint bits) {
  detail::undefined_argument(offset + bits > sizeof(T) * 8);
  if (bits == 0) return T(0);
  using U = std::make_unsigned_t<T>;
  detail::uwide field = (detail::uwide(U(x)) >> offset) & ((detail::uwide(1) << bits) - 1);
  if (std::is_signed_v<T> && ((field >> (bits - 1)) & 1)) field |= ~((detail::uwide(1) << bits) - 1);
  return T(U(field));
}
// base with bits [offset, offset + bits - 1] replaced by the low `bits` bits of insert (MSL).
PORTER_MSL_INT inline T insert_bits(T base, T insert, uint offset, uint bits) {
  detail::undefined_argument(offset + bits > sizeof(T) * 8);
  if (bits == 0) return base;
  using U = std::make_unsigned_t<T>;
  detail::uwide mask = ((detail::uwide(1) << bits) - 1) << offset;
  detail::uwide r = (detail::uwide(U(base)) & ~mask) | ((detail::uwide(U(insert)) << offset) & mask);
  return T(U(r));
}
PORTER_MSL_INT inline T reverse_bits(T x) {
  using U = std::make_unsigned_t<T>;
  constexpr int n = int(sizeof(T)) * 8;
  U u = U(x), r = 0;
  for (int i = 0; i < n; ++i) r = U(r | U(((u >> i) & 1u) << (n - 1 - i)));
  return T(r);
}
// The high half of the full product x * y (MSL mulhi); madhi adds c to it, wrapping as T does.
PORTER_MSL_INT inline T mulhi(T x, T y) {
  constexpr int n = int(sizeof(T)) * 8;
  if constexpr (std::is_signed_v<T>) return T((detail::wide(x) * detail::wide(y)) >> n);
  else return T((detail::uwide(x) * detail::uwide(y)) >> n);
}
PORTER_MSL_INT inline T madhi(T a, T b, T c) {
  using U = std::make_unsigned_t<T>;
  return T(U(U(mulhi(a, b)) + U(c)));
}
PORTER_MSL_INT inline T addsat(T x, T y) { return detail::saturate<T>(detail::wide(x) + detail::wide(y)); }
PORTER_MSL_INT inline T subsat(T x, T y) { return detail::saturate<T>(detail::wide(x) - detail::wide(y)); }
// a * b + c saturated: exact in 128 bits for every T but ulong, whose product can pass 2^127.
PORTER_MSL_INT inline T madsat(T a, T b, T c) {
  if constexpr (std::is_same_v<std::make_unsigned_t<T>, T> && sizeof(T) == 8) {
    detail::uwide v = detail::uwide(a) * detail::uwide(b) + detail::uwide(c);
    return v > detail::uwide(std::numeric_limits<T>::max()) ? std::numeric_limits<T>::max() : T(v);
  } else {
    return detail::saturate<T>(detail::wide(a) * detail::wide(b) + detail::wide(c));
  }
}
// (x + y) >> 1 and (x + y + 1) >> 1 without the sum overflowing (MSL hadd, rhadd).
PORTER_MSL_INT inline T hadd(T x, T y) { return T((detail::wide(x) + detail::wide(y)) >> 1); }
PORTER_MSL_INT inline T rhadd(T x, T y) { return T((detail::wide(x) + detail::wide(y) + 1) >> 1); }
// v's bits rotated left by i; bits leaving the top come back at the bottom. The count is
// taken modulo the width (OpenCL's rule, which MSL's table inherits).
PORTER_MSL_INT inline T rotate(T v, T i) {
  using U = std::make_unsigned_t<T>;
  constexpr unsigned n = unsigned(sizeof(T)) * 8;
  unsigned k = unsigned(U(i)) % n;
  U u = U(v);
  return T(k == 0 ? u : U(U(u << k) | U(u >> (n - k))));
}
#undef PORTER_MSL_INT
// Their vector forms: element by element, as MSL defines every integer function on vectors.
#define PORTER_MSL_INT_VEC template <typename T, int N, std::enable_if_t<detail::msl_int<T>, bool> = true>
#define PORTER_INT_VEC1(NAME)                                                                   \
  PORTER_MSL_INT_VEC inline vec<T, N> NAME(const vec<T, N>& a) {                                \
    vec<T, N> r;                                                                                \
    for (int i = 0; i < N; ++i) r[i] = NAME(a[i]);                                              \
    return r;                                                                                   \
  }
#define PORTER_INT_VEC2(NAME)                                                                   \
  PORTER_MSL_INT_VEC inline vec<T, N> NAME(const vec<T, N>& a, const vec<T, N>& b) {            \
    vec<T, N> r;                                                                                \
    for (int i = 0; i < N; ++i) r[i] = NAME(a[i], b[i]);                                        \
    return r;                                                                                   \
  }
#define PORTER_INT_VEC3(NAME)                                                                   \
  PORTER_MSL_INT_VEC inline vec<T, N> NAME(const vec<T, N>& a, const vec<T, N>& b,              \
                                           const vec<T, N>& c) {                                \
    vec<T, N> r;                                                                                \
    for (int i = 0; i < N; ++i) r[i] = NAME(a[i], b[i], c[i]);                                  \
    return r;                                                                                   \
  }
PORTER_INT_VEC1(clz)
PORTER_INT_VEC1(ctz)
PORTER_INT_VEC1(popcount)
PORTER_INT_VEC1(reverse_bits)
PORTER_INT_VEC2(absdiff)
PORTER_INT_VEC2(addsat)
PORTER_INT_VEC2(subsat)
PORTER_INT_VEC2(hadd)
PORTER_INT_VEC2(rhadd)
PORTER_INT_VEC2(mulhi)
PORTER_INT_VEC2(rotate)
PORTER_INT_VEC3(madhi)
PORTER_INT_VEC3(madsat)
PORTER_INT_VEC3(max3)
PORTER_INT_VEC3(min3)
PORTER_INT_VEC3(median3)
PORTER_MSL_INT_VEC inline vec<T, N> extract_bits(const vec<T, N>& x, uint offset, uint bits) {
  vec<T, N> r;
  for (int i = 0; i < N; ++i) r[i] = extract_bits(x[i], offset, bits);
  return r;
}
PORTER_MSL_INT_VEC inline vec<T, N> insert_bits(const vec<T, N>& base, const vec<T, N>& insert,
                                                uint offset, uint bits) {
  vec<T, N> r;
  for (int i = 0; i < N; ++i) r[i] = insert_bits(base[i], insert[i], offset, bits);
  return r;
}
#undef PORTER_INT_VEC1
#undef PORTER_INT_VEC2
#undef PORTER_INT_VEC3
#undef PORTER_MSL_INT_VEC

inline float fma(float a, float b, float c) {
  return detail::ftz(__builtin_fmaf(detail::ftz(a), detail::ftz(b), detail::ftz(c)));
}
// rounded once, to half, as a GPU's fp16 fma and LLVM's folding of one give it: through float
// it rounded twice (review 34's N02: 1.5h * 0.6669921875h + 2^-24 is 1.0009765625, float's tie
// 1 + 2^-11 then rounded to 1.0). A product of halves is exact in double, and so is its sum
// with a half wherever the answer lies in half's range; _Float16 takes a double in one rounding.
inline half fma(half a, half b, half c) {
  return half(__builtin_fma(double(a), double(b), double(c)));
}
template <typename T, int N>
inline vec<T, N> fma(const vec<T, N>& a, const vec<T, N>& b, const vec<T, N>& c) {
  vec<T, N> r;
  for (int i = 0; i < N; ++i) r[i] = T(fma(a[i], b[i], c[i]));
  return r;
}
// A multiply-add of Metal's own formula (mad, mix, dot): whether Apple's library runs it as
// one fma is not documented, so the contracted build's fusing of a line marked
// `porter: may contract NAME` counts for the kernels whose code calls it
// (porter.emulate.fused_kernels; review 36's K03t)
inline float mad(float a, float b, float c) { return a * b + c; }  // porter: may contract mad
inline float mix(float x, float y, float a) { return x + (y - x) * a; }  // porter: may contract mix
// MSL §6.2's `x + (y - x) * a` in half, as an fp16 ALU computes it: through float, `y - x` kept
// bits half rounds away (review 35's N12: mix(-1, 2048, 1) is 2047 in half, 2048 in float)
inline half mix(half x, half y, half a) { return x + (y - x) * a; }  // porter: may contract mix
inline float ldexp(float x, int k) { return detail::ftz(__builtin_ldexpf(detail::ftz(x), k)); }
inline half ldexp(half x, int k) { return half(__builtin_ldexpf(float(x), k)); }
inline float frexp(float x, int& e) { return detail::frexp_either(x, e); }
inline half frexp(half x, int& e) { return half(__builtin_frexpf(float(x), &e)); }
inline int ilogb(float x) { return detail::ilogb_either(x); }
inline float modf(float x, float& ip) { return __builtin_modff(detail::ftz(x), &ip); }
// both parts of a half are halves exactly (review 37's N21: Metal has the half overload)
inline half modf(half x, half& ip) {
  float whole;
  half frac = half(__builtin_modff(float(x), &whole));
  ip = half(whole);
  return frac;
}
// flushed like every float argument and answer of the library (review 35's B10g)
// sine and cosine, each within its bound, read as one function of their own (review 40's V13:
// sincos was read once, and its answers need not be sin's and cos's)
inline float sincos(float x, float& c) {
  x = detail::ftz(x);
  detail::bracket_function = "sincos";
  c = detail::ftz(detail::within_ulps(__builtin_cosf(x), __builtin_cos(x)));
  detail::bracket_function = "sincos";
  return detail::ftz(detail::within_ulps(__builtin_sinf(x), __builtin_sin(x)));
}
inline half sincos(half x, half& c) {
  const detail::half_bracket at_half_precision;
  float cf = 0.0f;
  const float sf = sincos(float(x), cf);
  c = half(cf);
  return half(sf);
}
// flushed like every float answer of the library (detail::ftz): on an Apple GPU a step into the
// subnormals is a signed zero (upstream #125051: `nextafter(0, 1) > 0` is false on MPS; review
// 34's B03)
inline float nextafter(float x, float y) {
  return detail::ftz(__builtin_nextafterf(detail::ftz(x), detail::ftz(y)));
}
inline half nextafter(half x, half y) { return detail::nextafter_half(x, y); }
// No bfloat overload: Metal has none. A call with bfloat arguments resolves to float's, steps one
// float ULP and rounds back, which returns its input for most inputs (upstream #190476).

#define PORTER_CLASSIFY(NAME, EXPR)                                             \
  inline bool NAME(float x) { return EXPR; }                                    \
  inline bool NAME(half h) { return NAME(float(h)); }                           \
  template <typename T, int N>                                                  \
  inline vec<bool, N> NAME(const vec<T, N>& v) {                                \
    vec<bool, N> r;                                                             \
    for (int i = 0; i < N; ++i) r[i] = NAME(float(v[i]));                       \
    return r;                                                                   \
  }
PORTER_CLASSIFY(isnan, __builtin_isnan(x))
PORTER_CLASSIFY(isinf, __builtin_isinf(x))
PORTER_CLASSIFY(isfinite, __builtin_isfinite(x))
PORTER_CLASSIFY(isnormal, __builtin_isnormal(x))
PORTER_CLASSIFY(signbit, __builtin_signbit(detail::nan_sign_read(x)))
#undef PORTER_CLASSIFY
inline bool isunordered(float x, float y) { return __builtin_isunordered(x, y); }
inline bool isunordered(half x, half y) { return __builtin_isunordered(float(x), float(y)); }
inline bool isordered(float x, float y) { return !__builtin_isunordered(x, y); }

template <typename T, typename U>
constexpr inline T select(T a, T b, U c) {
  if constexpr (is_vec<U>::value) {
    // Metal's vector select takes a bool vector and no other vector converts to one: an int
    // vector a helper returns reached here (review 28's M14); the kernel is then not proven
    static_assert(std::is_same_v<typename U::value_type, bool>,
                  "metal::select takes a bool vector condition");
    T r;
    for (int i = 0; i < U::size; ++i) r[i] = c[i] ? b[i] : a[i];
    return r;
  } else {
    return c ? b : a;
  }
}

template <typename T, int N>
inline auto dot(const vec<T, N>& a, const vec<T, N>& b) {
  T r = T(0);
  for (int i = 0; i < N; ++i) r = T(r + a[i] * b[i]);  // porter: may contract dot
  return r;
}
// MSL defines length as sqrt(x0^2 + x1^2 + ...) and does not say whether an implementation
// scales to keep the squares from overflowing or flushing: where this naive sum does (the
// length of float2(3e20, 4e20) inf, of float2(3e-20, 4e-20) 0) and the scaled one is a normal
// number, both are read (bit 4096: review 40's V16, V16t). distance and normalize follow.
template <typename T, int N>
inline T length(const vec<T, N>& a) {
  const T naive = T(sqrt(float(dot(a, a))));
  if (!(__builtin_isinf(float(naive)) || float(naive) == 0.0f)) return naive;
  double squares = 0.0;
  for (int i = 0; i < N; ++i) squares += double(float(a[i])) * double(float(a[i]));
  const T scaled = T(float(__builtin_sqrt(squares)));
  if (!__builtin_isfinite(float(scaled)) || float(scaled) == 0.0f) return naive;
  porter_reached |= detail::UNSETTLED_LIBRARY;
  return porter_reading ? scaled : naive;
}
template <typename T, int N>
inline T length_squared(const vec<T, N>& a) { return dot(a, a); }
template <typename T, int N>
inline T distance(const vec<T, N>& a, const vec<T, N>& b) { return length(a - b); }
template <typename T, int N>
inline vec<T, N> normalize(const vec<T, N>& a) { return a / length(a); }

// A swizzle passed to the library is the vector it reads (Metal's swizzle is a vector rvalue):
// these forward it, and exist only where an argument is one, so no other call sees them.
#define PORTER_SWIZZLE_ARGS1(NAME)                                              \
  template <typename A, std::enable_if_t<is_swizzle<A>::value, bool> = true>    \
  inline auto NAME(const A& a) { return NAME(as_vector(a)); }
#define PORTER_SWIZZLE_ARGS2(NAME)                                              \
  template <typename A, typename B,                                             \
            std::enable_if_t<is_swizzle<A>::value || is_swizzle<B>::value, bool> = true> \
  inline auto NAME(const A& a, const B& b) { return NAME(as_vector(a), as_vector(b)); }
#define PORTER_SWIZZLE_ARGS3(NAME)                                              \
  template <typename A, typename B, typename C,                                 \
            std::enable_if_t<is_swizzle<A>::value || is_swizzle<B>::value ||   \
                             is_swizzle<C>::value, bool> = true>                \
  inline auto NAME(const A& a, const B& b, const C& c) {                        \
    return NAME(as_vector(a), as_vector(b), as_vector(c));                      \
  }
#define PORTER_SWIZZLE_M1(NAME, EXPR) PORTER_SWIZZLE_ARGS1(NAME)
#define PORTER_SWIZZLE_M2(NAME, EXPR) PORTER_SWIZZLE_ARGS2(NAME)
PORTER_MATH_TABLE(PORTER_SWIZZLE_M1, PORTER_SWIZZLE_M2)
PORTER_SWIZZLE_ARGS2(max)
PORTER_SWIZZLE_ARGS2(min)
PORTER_SWIZZLE_ARGS2(dot)
PORTER_SWIZZLE_ARGS2(distance)
PORTER_SWIZZLE_ARGS1(length)
PORTER_SWIZZLE_ARGS1(length_squared)
PORTER_SWIZZLE_ARGS1(normalize)
PORTER_SWIZZLE_ARGS1(all)
PORTER_SWIZZLE_ARGS1(any)
PORTER_SWIZZLE_ARGS1(isnan)
PORTER_SWIZZLE_ARGS1(isinf)
PORTER_SWIZZLE_ARGS1(isfinite)
PORTER_SWIZZLE_ARGS1(signbit)
PORTER_SWIZZLE_ARGS3(fma)
PORTER_SWIZZLE_ARGS3(fmax3)
PORTER_SWIZZLE_ARGS3(fmin3)
PORTER_SWIZZLE_ARGS3(select)
#undef PORTER_SWIZZLE_M1
#undef PORTER_SWIZZLE_M2
#undef PORTER_SWIZZLE_ARGS1
#undef PORTER_SWIZZLE_ARGS2
#undef PORTER_SWIZZLE_ARGS3

// precise:: and fast:: only have float candidates.
namespace precise {
PORTER_MATH_TABLE(PORTER_MATH1_F, PORTER_MATH2_F)
PORTER_MATH2_F(max, __builtin_fmaxf(x, y))
PORTER_MATH2_F(min, __builtin_fminf(x, y))
inline float fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
inline float sincos(float x, float& c) { return ::metal::sincos(x, c); }
inline float ldexp(float x, int k) { return detail::ftz(__builtin_ldexpf(detail::ftz(x), k)); }
inline float frexp(float x, int& e) { return detail::frexp_either(x, e); }
inline float divide(float x, float y) { return x / y; }
PORTER_MATH3_F(fmax3, __builtin_fmaxf(x, __builtin_fmaxf(y, z)))
PORTER_MATH3_F(fmin3, __builtin_fminf(x, __builtin_fminf(y, z)))
PORTER_MATH3_F(fmedian3, detail::median3(x, y, z, detail::UNDEFINED_MEDIAN_NAN))
} // namespace precise
namespace fast {
// fast::tanh is (exp(2x) - 1) / (exp(2x) + 1) in float (upstream #186286, by Apple's engineer):
// exp(2x) overflows past x ~ 44.36 and inf / inf is NaN (upstream #186278).
#undef PORTER_TANH
#define PORTER_TANH(x) detail::fast_tanh(x)
// a NaN operand of min/max/fmin/fmax/fmin3/fmax3/clamp: undefined (MSL §6.5), both readings run
#undef PORTER_FMAX
#undef PORTER_FMIN
#define PORTER_FMAX(x, y) detail::fast_max(x, y)
#define PORTER_FMIN(x, y) detail::fast_min(x, y)
// every other fast:: function runs as the precise one and says so (detail::fast_ran)
#define PORTER_FAST1(NAME, EXPR) PORTER_MATH1_F(NAME, detail::fast_ran(#NAME, EXPR))
#define PORTER_FAST2(NAME, EXPR) PORTER_MATH2_F(NAME, detail::fast_ran(#NAME, EXPR))
PORTER_MATH_TABLE(PORTER_FAST1, PORTER_FAST2)
#undef PORTER_FAST1
#undef PORTER_FAST2
PORTER_MATH2_F(max, detail::fast_max(x, y))
PORTER_MATH2_F(min, detail::fast_min(x, y))
inline float fma(float a, float b, float c) { return detail::fast_ran("fma", __builtin_fmaf(a, b, c)); }
inline float sincos(float x, float& c) { return detail::fast_ran("sincos", ::metal::sincos(x, c)); }
inline float divide(float x, float y) { return detail::fast_ran("divide", x / y); }
PORTER_MATH3_F(fmax3, detail::undefined_on_nan(x != x || y != y || z != z,
                                               __builtin_fmaxf(x, __builtin_fmaxf(y, z)),
                                               detail::UNDEFINED_FAST_NAN))
PORTER_MATH3_F(fmin3, detail::undefined_on_nan(x != x || y != y || z != z,
                                               __builtin_fminf(x, __builtin_fminf(y, z)),
                                               detail::UNDEFINED_FAST_NAN))
PORTER_MATH3_F(clamp, detail::fast_clamp(x, y, z))
PORTER_MATH3_F(fmedian3, detail::median3(x, y, z, detail::UNDEFINED_FAST_NAN | detail::UNDEFINED_MEDIAN_NAN))
} // namespace fast

#undef PORTER_MATH_TABLE
#undef PORTER_ULPS
#undef PORTER_ULPS_POW
#undef PORTER_TANH
#undef PORTER_FMAX
#undef PORTER_FMIN
#undef PORTER_MATH1
#undef PORTER_MATH1_F
#undef PORTER_MATH2
#undef PORTER_MATH2_F
#undef PORTER_MATH3
#undef PORTER_MATH3_F

} // namespace metal

#define PORTER_VEC_TYPEDEFS(T, NAME)                                            \
  typedef ::metal::vec<T, 2> NAME##2;                                           \
  typedef ::metal::vec<T, 3> NAME##3;                                           \
  typedef ::metal::vec<T, 4> NAME##4;
PORTER_VEC_TYPEDEFS(float, float)
PORTER_VEC_TYPEDEFS(half, half)
PORTER_VEC_TYPEDEFS(bfloat, bfloat)
PORTER_VEC_TYPEDEFS(bool, bool)
PORTER_VEC_TYPEDEFS(signed char, char)
PORTER_VEC_TYPEDEFS(unsigned char, uchar)
PORTER_VEC_TYPEDEFS(short, short)
PORTER_VEC_TYPEDEFS(unsigned short, ushort)
PORTER_VEC_TYPEDEFS(int, int)
PORTER_VEC_TYPEDEFS(unsigned int, uint)
PORTER_VEC_TYPEDEFS(long, long)
PORTER_VEC_TYPEDEFS(unsigned long, ulong)
#undef PORTER_VEC_TYPEDEFS

// Metal's `precise::` and `fast::` are reachable as `::precise::` once
// `using namespace metal;` is in effect; keep them reachable without it too.
namespace precise = ::metal::precise;
namespace fast = ::metal::fast;

// Apple's clang contracts `a * b + c` to one fma within one expression (`-ffp-contract=on`),
// never a product that reaches its sum through a variable, a return or a call; g++'s
// contracted build (`-ffp-contract=fast`) fuses wherever the value flows. That build wraps each
// product of the kernel file that no sum of its own expression takes (the front end's
// lone_products) in this barrier, which g++'s fma pass does not look through (review 36's K05).
template <typename T>
constexpr T __porter_lone(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    return __builtin_assoc_barrier(x);
  } else {
    return x;
  }
}
template <typename T, int N>
constexpr ::metal::vec<T, N> __porter_lone(::metal::vec<T, N> x) {
  for (int i = 0; i < N; ++i) x[i] = __porter_lone(T(x[i]));
  return x;
}
