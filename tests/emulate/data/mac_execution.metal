// What a Mac computes where g++ alone computes otherwise (tests/emulate/test_mac_execution.py):
// each planted functor has a clean twin beside it.
#include <c10/metal/indexing.h>
#include <c10/metal/utils.h>
#include <metal_stdlib>
using namespace metal;
using namespace c10::metal;

// fast::tanh is Apple's (exp(2x) - 1) / (exp(2x) + 1): NaN past x ~ 44.36 (planted: a kernel
// that relies on a precise tanh calls it); the twin calls precise::tanh.
struct fast_tanh_functor {
  template <typename T>
  inline T operator()(const T x) {
    return static_cast<T>(fast::tanh(float(x)));
  }
};
struct precise_tanh_functor {
  template <typename T>
  inline T operator()(const T x) {
    return static_cast<T>(precise::tanh(float(x)));
  }
};
REGISTER_UNARY_OP(fast_tanh, float, float);
REGISTER_UNARY_OP(fast_tanh, half, half);
REGISTER_UNARY_OP(precise_tanh, float, float);
REGISTER_UNARY_OP(precise_tanh, half, half);

// powr is defined for a base >= 0 alone: a negative base is NaN on Apple GPUs (planted); pow
// is the twin
struct power_r_functor {
  template <typename T>
  inline T operator()(const T a, const T b) {
    return static_cast<T>(::metal::powr(float(a), float(b)));
  }
};
struct power_functor {
  template <typename T>
  inline T operator()(const T a, const T b) {
    return static_cast<T>(::metal::pow(float(a), float(b)));
  }
};
// Metal has no bfloat clamp: the call takes float's (the shim's clamp did not build for bfloat)
struct clamp01_functor {
  template <typename T>
  inline T operator()(const T x) {
    return static_cast<T>(::metal::clamp(x, T(0), T(1)));
  }
};
REGISTER_UNARY_OP(clamp01, bfloat, bfloat);
// static_cast<bfloat> of one component of a swizzle (it did not build for bfloat)
struct swizzle_cast_functor {
  template <typename T>
  inline T operator()(const T x) {
    float2 v = float2(float(x), 2.0f * float(x));
    return static_cast<T>(v.yx.x);
  }
};
REGISTER_UNARY_OP(swizzle_cast, bfloat, bfloat);
// a float compared with a bfloat compares in float (the shim's half overload took it: inf at
// 4.98e6, so abs(a) == a was false)
struct abs_equal_functor {
  template <typename T>
  inline T operator()(const T a) {
    return static_cast<T>(::metal::abs(a) == a);
  }
};
REGISTER_UNARY_OP(abs_equal, bfloat, bfloat);
REGISTER_UNARY_OP(clamp01, float, float);
REGISTER_BINARY_OP(power_r, float, float);
REGISTER_BINARY_OP(power, float, float);

// Metal has no bfloat nextafter: bfloat goes through float's and rounds back (planted); the
// twin steps bfloat's own bits.
struct step_functor {
  template <typename T>
  inline T operator()(const T a, const T b) {
    return static_cast<T>(::metal::nextafter(a, b));
  }
};
struct step_bits_functor {
  inline bfloat operator()(const bfloat a, const bfloat b) {
    const ushort bits = as_type<ushort>(a);
    const bool away = (float(a) < float(b)) == ((bits & 0x8000) == 0);
    return as_type<bfloat>(ushort(away ? bits + 1 : bits - 1));
  }
};
REGISTER_BINARY_OP(step, bfloat, bfloat);
REGISTER_BINARY_OP(step, float, float);
REGISTER_BINARY_OP(step_bits, bfloat, bfloat);

// Apple GPUs flush float32 (and bfloat) subnormals, operands and results; half keeps its own.
struct positive_functor {
  template <typename T>
  inline bool operator()(const T x) {
    return x > T(0);
  }
};
struct halve_functor {
  template <typename T>
  inline T operator()(const T x) {
    return static_cast<T>(float(x) * 0.5f);
  }
};
REGISTER_UNARY_OP(positive, float, bool);
REGISTER_UNARY_OP(positive, half, bool);
REGISTER_UNARY_OP(positive, bfloat, bool);
REGISTER_UNARY_OP(halve, float, float);
REGISTER_UNARY_OP(halve, half, half);
REGISTER_UNARY_OP(halve, bfloat, bfloat);

// Swizzles read and written, .rgba, splats, and a vector built of a swizzle and a scalar.
struct swizzle_functor {
  inline float2 operator()(const float2 z) {
    float4 v = float4(z.yx, z);
    v.zw = v.zw * 2.0f;
    const float3 c = v.rgb;
    const half2 h = half2(half(c.z));
    return float2(v.w + float(h.y), c.x) + float2(0.5f).yx;
  }
};
REGISTER_UNARY_OP(swizzle, float2, float2);
// the library takes a swizzle as the vector it reads
struct swizzle_library_functor {
  inline float2 operator()(const float2 z) {
    return float2(dot(z.yx, z.xy), max(z.yx, z).x);
  }
};
REGISTER_UNARY_OP(swizzle_library, float2, float2);
// a swizzle is a vector: its own components are read and written (review 33's L16, v.yx.y)
struct swizzle_of_swizzle_functor {
  inline float2 operator()(const float2 z) {
    float4 v = float4(z, z * 3.0f);
    v.wzyx.x = 7.0f;
    return float2(v.yx.y + v.zw.g, v.w + v.rgb.b);
  }
};
REGISTER_UNARY_OP(swizzle_of_swizzle, float2, float2);
// fmax3/fmin3 are fmax/fmin of three (MSL 2.1 on): a NaN operand yields the others' answer
struct three_way_functor {
  template <typename T>
  inline T operator()(const T a, const T b) {
    return T(fmax3(float(a), float(b), 0.5f) + fmin3(float(a), float(b), 0.5f) +
             precise::fmax3(float(a), 0.0f, 0.0f) * 0.0f + fast::fmin3(float(b), 1.0f, 1.0f) * 0.0f);
  }
};
REGISTER_BINARY_OP(three_way, float, float);
REGISTER_BINARY_OP(three_way, half, half);

// A NaN into fast:: min/max (fast math) or into fmedian3 has no defined answer (MSL §6.5): the
// worker runs such a call both ways, IEEE's answer and NaN; metal::fmax's answer is defined
struct fast_max_functor {
  inline float operator()(const float a, const float b) {
    return fast::fmax(a, b);
  }
};
struct ieee_max_functor {
  inline float operator()(const float a, const float b) {
    return fmax(a, b);
  }
};
struct median_functor {
  inline float operator()(const float a, const float b) {
    return fmedian3(a, b, 0.5f);
  }
};
// max3/min3/median3 of floats (MSL §6.5; review 16's B03: "does not build" of max3(float))
struct float_three_functor {
  template <typename T>
  inline T operator()(const T a, const T b) {
    return T(max3(float(a), float(b), 0.5f) + 10.0f * min3(float(a), float(b), -0.5f) +
             100.0f * median3(float(a), float(b), 0.25f));
  }
};
REGISTER_BINARY_OP(float_three, float, float);
REGISTER_BINARY_OP(float_three, half, half);
REGISTER_BINARY_OP(fast_max, float, float);
REGISTER_BINARY_OP(ieee_max, float, float);
REGISTER_BINARY_OP(median, float, float);

// MSL's integer functions (review 33b's B13/B20/B27/B29/B30 calls and their kin), each against
// the value the MSL table defines: a wrong shim answer sets its bit in the result.
struct integer_library_functor {
  template <typename T>
  inline T operator()(const T x) {
    int wrong = 0;
    wrong |= (max3(1, 2, 3) != 3) << 0;
    wrong |= (min3(3, 1, 2) != 1 || median3(3, 1, 2) != 2) << 1;
    wrong |= (extract_bits(0xF0u, 4u, 4u) != 0xFu || extract_bits(int(0xF0), 4u, 4u) != -1) << 2;
    wrong |= (insert_bits(0xFFu, 0u, 4u, 2u) != 0xCFu) << 3;
    wrong |= (reverse_bits(1u) != 0x80000000u || reverse_bits(uchar(1)) != uchar(0x80)) << 4;
    wrong |= (mulhi(0x80000000u, 4u) != 2u || mulhi(-1, 1) != -1 || madhi(0x80000000u, 4u, 1u) != 3u) << 5;
    wrong |= (addsat(char(100), char(100)) != char(127) || subsat(uchar(1), uchar(2)) != uchar(0)) << 6;
    wrong |= (madsat(short(200), short(200), short(0)) != short(32767)) << 7;
    wrong |= (hadd(2147483647, 1) != 1073741824 || hadd(-3, 0) != -2 || rhadd(1, 2) != 2) << 8;
    wrong |= (rotate(uchar(0x81), uchar(1)) != uchar(0x03) || rotate(1, -1) != int(0x80000000)) << 9;
    const int2 m = max3(int2(1, 5), int2(2, 4), int2(3, 3));
    const uint2 z = clz(uint2(1u, 0u));
    wrong |= (m.x != 3 || m.y != 5 || z.x != 31u || z.y != 32u) << 10;
    return x + T(wrong);
  }
};
REGISTER_UNARY_OP(integer_library, float, float);

// Apple's compiler defines these for every version porter builds (macOS, bfloat from 3.1).
struct predefined_functor {
  template <typename T>
  inline T operator()(const T x) {
#if defined(__METAL_MACOS__) && defined(__HAVE_BFLOAT__)
    return x;
#else
    return -x;
#endif
  }
};
REGISTER_UNARY_OP(predefined, float, float);

// a * a - p, p being a * a rounded: 0 when the product rounds, its rounding error in an fma
struct product_error_functor {
  inline float operator()(const float a, const float p) {
    return a * a - p;
  }
};
REGISTER_BINARY_OP(product_error, float, float);

// the same product written twice in one expression: clang contracts it as written, fma(a, a,
// -(a * a)), the rounding error of a * a; g++'s value numbering made one product of the two
// first, leaving 0 to every build (review 27's N16)
struct product_twice_functor {
  inline float operator()(const float a) {
    return a * a - a * a;
  }
};
REGISTER_UNARY_OP(product_twice, float, float);

// fract's answer is below 1 in half too (review 36's K02): a float fract just below 1, rounded
// to half, was 1.0 (what is left below 1 shows it)
struct fraction_functor {
  template <typename T>
  inline T operator()(const T x) {
    return T(1) - fract(x);
  }
};
struct fraction2_functor {
  inline half operator()(const half x) {
    return half(1) - fract(half2(x, x)).y;
  }
};
REGISTER_UNARY_OP(fraction, half, half);
REGISTER_UNARY_OP(fraction2, half, half);

// Metal's dot is its library's formula: whether a Mac runs it as one fma is not documented, so
// a contracted build's fusing inside it counts (review 36's K03t): a * a - a * a, as dot
struct library_dot_functor {
  inline float operator()(const float a) {
    return dot(float2(a, a), float2(a, -a));
  }
};
REGISTER_UNARY_OP(library_dot, float, float);
