// porter's Metal mode for the front end (porter.emulate.frontend): what the Metal Shading
// Language adds to C++ at the language level, in clang's own terms. Force-included before a
// kernel file; Metal's library (<metal_stdlib>) comes from porter/emulate/frontend_include.
// Section numbers are those of Apple's Metal Shading Language Specification (MSL 3.x).
#pragma once

// 2.1 Scalar data types: half, bfloat (Metal 3.1+), and the unsigned short names.
typedef _Float16 half;
typedef __bf16 bfloat;
typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long ulong;
typedef __SIZE_TYPE__ size_t;
typedef __PTRDIFF_TYPE__ ptrdiff_t;

// 2.2 Vector data types: clang's extended vectors, which have Metal's swizzles (.xyzw, .rgba).
namespace metal {
template <typename T, int N>
using vec = T __attribute__((ext_vector_type(N)));
}
#define PORTER_METAL_VECTORS(T)                                                   \
  typedef metal::vec<T, 2> T##2;                                                  \
  typedef metal::vec<T, 3> T##3;                                                  \
  typedef metal::vec<T, 4> T##4;                                                  \
  namespace metal { using ::T##2; using ::T##3; using ::T##4; }
PORTER_METAL_VECTORS(bool)
PORTER_METAL_VECTORS(char)
PORTER_METAL_VECTORS(uchar)
PORTER_METAL_VECTORS(short)
PORTER_METAL_VECTORS(ushort)
PORTER_METAL_VECTORS(int)
PORTER_METAL_VECTORS(uint)
PORTER_METAL_VECTORS(long)
PORTER_METAL_VECTORS(ulong)
PORTER_METAL_VECTORS(half)
PORTER_METAL_VECTORS(bfloat)
PORTER_METAL_VECTORS(float)
#undef PORTER_METAL_VECTORS
namespace metal {
using ::half; using ::bfloat; using ::uchar; using ::ushort; using ::uint; using ::ulong;
using ::size_t; using ::ptrdiff_t;
}

// 2.2.3 Vector constructors (float4(a.xy, 0, 1), half2(h), T(a, b) of a vector T) and 2.3
// conversions (static_cast<float2>(h2)): the front end rewrites `float4(`, `T(` of a template
// type parameter and `static_cast<` into these, since C++'s functional cast of an extended
// vector takes one scalar only and its static_cast does not convert between vector types.
// A vector's arguments must have as many elements as it has, as Metal's constructors require.
template <typename T> struct __metal_len { static constexpr int value = 1; static constexpr bool vector = false; };
template <typename T, int N> struct __metal_len<T __attribute__((ext_vector_type(N)))> {
  static constexpr int value = N; static constexpr bool vector = true;
};
template <typename T> struct __metal_len<const T> : __metal_len<T> {};
template <typename T> struct __metal_len<T&> : __metal_len<T> {};
template <typename T> struct __metal_len<T&&> : __metal_len<T> {};
template <typename V, typename... A>
struct __metal_ctor_ok {
  static constexpr int sum = (0 + ... + __metal_len<A>::value);
  // V() value-initializes (zero), as in C++
  static constexpr bool value = sizeof...(A) == 0 || (sizeof...(A) == 1 && sum == 1) ||
                                sum == __metal_len<V>::value;
};
template <typename T> struct __metal_is_float { static constexpr bool value = false; };
template <> struct __metal_is_float<float> { static constexpr bool value = true; };
template <> struct __metal_is_float<half> { static constexpr bool value = true; };
template <> struct __metal_is_float<bfloat> { static constexpr bool value = true; };
template <typename T> struct __metal_is_float<const T> : __metal_is_float<T> {};
template <typename T> struct __metal_is_float<T&> : __metal_is_float<T> {};
template <typename T> T&& __metal_declval();
// one value converted as Metal converts it; constexpr as the conversion it stands for is (a
// `constexpr uint mask = (U(1) << 23) - 1;` is a constant expression in Metal)
template <typename To, typename From>
inline constexpr To __metal_convert(From x) {
  if constexpr (__metal_len<To>::vector && __metal_len<From>::vector) {
    static_assert(__metal_len<To>::value == __metal_len<From>::value,
                  "a vector converts only to a vector of as many elements");
    return To{};
  } else if constexpr (__metal_len<To>::vector) {
    return To(x);
  } else if constexpr (__metal_is_float<To>::value && __metal_is_float<From>::value) {
    return To(float(x));
  } else {
    return static_cast<To>(x);
  }
}
template <typename V, typename... A>
inline constexpr V __metal_vec_ctor(A... args) {
  if constexpr (__metal_len<V>::vector) {
    static_assert(__metal_ctor_ok<V, A...>::value,
                  "the vector constructor's arguments do not have as many elements as its type");
    if constexpr (sizeof...(A) == 1)
      return __metal_convert<V>(args...);
    return V{};
  } else if constexpr (sizeof...(A) == 1) {
    return __metal_convert<V>(args...);
  } else {
    return V(args...);
  }
}
namespace metal {
using ::__metal_vec_ctor;
}

// 4 Address spaces: real qualifiers, so that a mismatch is an error as in Metal. `thread`
// is clang's default address space (an unqualified pointer in a helper is a thread one).
#define device __attribute__((address_space(1)))
// `constant` memory is read-only (MSL §4.2): const as well, so that a write is an error (review
// 27's L42: an assignment to a program-scope `constant` variable was accepted)
#define constant const __attribute__((address_space(2)))
#define threadgroup __attribute__((address_space(3)))
#define threadgroup_imageblock __attribute__((address_space(4)))
// `thread` marks the declaration it opens (clang's default address space is Metal's thread
// one, so it cannot be a qualifier of its own): a pointer or reference declared with no
// address space at all is an error in Metal, and the front end tells the two apart by this mark
#define thread __attribute__((annotate("metal_thread")))
#define ray_data __attribute__((address_space(5)))
#define object_data __attribute__((address_space(6)))

// 5.1 Function qualifiers. ([[host_name("..")]] and [[kernel]] are rewritten by the front end.)
#define kernel __attribute__((annotate("metal_kernel")))
// vertex and fragment are keywords too (review 27's L34: `float vertex = ...;` was "not proven",
// its message saying a Mac builds it): a name spelled so does not compile, as on a Mac
#define vertex __attribute__((annotate("metal_vertex")))
#define fragment __attribute__((annotate("metal_fragment")))
