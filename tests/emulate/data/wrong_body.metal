// sin_functor computes cos: builds fine, must fail the comparison with CPU.
#include <c10/metal/indexing.h>
#include <metal_stdlib>
using namespace metal;
using namespace c10::metal;

struct sin_functor {
  template <typename T>
  inline enable_if_t<is_scalar_floating_point_v<T>, T> operator()(const T x) {
    return T(precise::cos(x));
  }
  template <typename T>
  inline enable_if_t<is_scalar_integral_v<T>, float> operator()(const T x) {
    return precise::cos(static_cast<float>(x));
  }
};

struct exp_functor {
  template <typename T>
  inline enable_if_t<is_scalar_floating_point_v<T>, T> operator()(const T x) {
    return T(precise::exp(x));
  }
};

REGISTER_UNARY_OP(sin, float, float);
REGISTER_UNARY_OP(sin, half, half);
REGISTER_UNARY_OP(sin, int, float);
REGISTER_UNARY_OP(exp, float, float);
