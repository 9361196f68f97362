// A bool-returning functor registered with its input type as output (porter's old
// logical_and port): every one of these registrations stops the file compiling on a Mac.
#include <c10/metal/indexing.h>
#include <metal_stdlib>
using namespace metal;
using namespace c10::metal;

struct logical_and_functor {
  template <typename T>
  inline bool operator()(const T a, const T b) {
    return a && b;
  }
};

REGISTER_BINARY_OP(logical_and, float, float);
REGISTER_BINARY_OP(logical_and, half, half);
REGISTER_BINARY_OP(logical_and, long, long);
REGISTER_BINARY_OP(logical_and, int, int);
REGISTER_BINARY_OP(logical_and, bool, bool);
