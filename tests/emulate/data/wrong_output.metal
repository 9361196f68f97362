// exp of an int returns float, but is registered with an int output.
#include <c10/metal/indexing.h>
#include <metal_stdlib>
using namespace metal;
using namespace c10::metal;

struct exp_functor {
  template <typename T>
  inline enable_if_t<is_scalar_floating_point_v<T>, T> operator()(const T x) {
    return T(precise::exp(x));
  }
  template <typename T>
  inline enable_if_t<is_scalar_integral_v<T>, float> operator()(const T x) {
    return precise::exp(static_cast<float>(x));
  }
};

REGISTER_UNARY_OP(exp, float, float);
REGISTER_UNARY_OP(exp, int, int);
