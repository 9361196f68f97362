// Integer division by zero: the GPU returns a value, the host raises SIGFPE.
#include <c10/metal/indexing.h>
#include <metal_stdlib>
using namespace metal;

struct div_trunc_functor {
  template <typename T>
  inline T operator()(const T a, const T b) {
    return a / b;
  }
};

REGISTER_BINARY_OP(div_trunc, int, int);
REGISTER_BINARY_OP(div_trunc, float, float);
