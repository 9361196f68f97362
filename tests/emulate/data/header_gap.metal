// A functor written against newer c10/metal headers than the ones the build finds: the
// qualified call names a function those headers do not define. The other functor builds.
#include <c10/metal/utils.h>
#include <c10/metal/indexing.h>
#include <metal_stdlib>
using namespace metal;

struct neg_functor {
  template <typename T>
  inline T operator()(const T x) {
    return T(-x);
  }
};

struct halved_functor {
  template <typename T>
  inline T operator()(const T x) {
    return c10::metal::porter_halved_in_newer_headers(x);
  }
};

REGISTER_UNARY_OP(neg, float, float);
REGISTER_UNARY_OP(halved, float, float);
