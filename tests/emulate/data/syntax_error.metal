// A --body that is a statement, pasted into an expression: a syntax error in any C++.
#include <c10/metal/indexing.h>
#include <metal_stdlib>
using namespace metal;
using namespace c10::metal;

struct neg_functor {
  template <typename T>
  inline T operator()(const T x) {
    return -x;
  }
};

struct signbit_functor {
  template <typename T>
  inline T operator()(const T x) {
    return static_cast<T>(return x;);
  }
};

REGISTER_UNARY_OP(neg, float, float);
REGISTER_UNARY_OP(signbit, float, float);
