// Two hypot functors in upstream style: the textbook formula that overflowed on
// real MPS (pytorch issue 192507) and the one built on c10::metal::hypot.
#include <c10/metal/indexing.h>
#include <c10/metal/utils.h>
#include <metal_stdlib>
using namespace metal;

struct naive_hypot_functor {
  template <typename T>
  inline T operator()(const T a, const T b) {
    return static_cast<T>(precise::sqrt(float(a) * a + float(b) * b));
  }
};

struct hypot_functor {
  template <typename T>
  inline T operator()(const T a, const T b) {
    return static_cast<T>(
        c10::metal::hypot(::metal::fabs(float(a)), ::metal::fabs(float(b))));
  }
};

#define REGISTER_FLOAT_BINARY_OP(NAME)    \
  REGISTER_BINARY_OP(NAME, float, float); \
  REGISTER_BINARY_OP(NAME, half, half);   \
  REGISTER_BINARY_OP(NAME, bfloat, bfloat)

REGISTER_FLOAT_BINARY_OP(naive_hypot);
REGISTER_FLOAT_BINARY_OP(hypot);
