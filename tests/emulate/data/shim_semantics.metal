// Metal semantics the shim must reproduce, checked at compile time and at run time.
#include <c10/metal/indexing.h>
#include <c10/metal/utils.h>
#include <metal_stdlib>
using namespace metal;
using namespace c10::metal;

static_assert(is_floating_point_v<float2>, "float vectors are floating point in Metal");
static_assert(is_floating_point_v<bfloat> && is_floating_point_v<half>, "");
static_assert(!is_scalar_v<half2> && is_scalar_v<bfloat>, "");
static_assert(is_same_v<decltype(bfloat(1) * 2.0f), float>, "bfloat * float is float");
static_assert(is_same_v<decltype(true ? bfloat(1) : 2.0f), float>, "cond ? bfloat : float");
static_assert(is_same_v<decltype(half(1) + half(1)), half>, "");
static_assert(is_same_v<opmath_t<half2>, float2>, "");

// (a * b) + c in half: rounded after the product, as on fp16 hardware.
struct half_fma_functor {
  inline half operator()(const half a, const half b, const half c) {
    return a * b + c;
  }
};

// float2 compare -> bool2, reduced with all/any; scalar broadcast on vectors.
struct vec_functor {
  inline bool operator()(const float2 a, const float2 b) {
    const float2 twice = a * 2.0f;
    return all((twice - a) == a) && any(b != b + 1.0f) && (twice.x == 2 * a.x);
  }
};

REGISTER_TERNARY_OP(half_fma, half, half);
REGISTER_BINARY_OP(vec, float2, bool);
