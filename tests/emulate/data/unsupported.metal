// simd_shuffle is a Metal builtin the shim does not emulate: that functor is
// quarantined, the other one still builds and runs.
#include <c10/metal/indexing.h>
#include <metal_stdlib>
using namespace metal;

struct neg_functor {
  template <typename T>
  inline T operator()(const T x) {
    return T(-x);
  }
};

struct shuffled_functor {
  inline float operator()(const float x) {
    return simd_shuffle(x, 0u);
  }
};

REGISTER_UNARY_OP(neg, float, float);
REGISTER_UNARY_OP(shuffled, float, float);
