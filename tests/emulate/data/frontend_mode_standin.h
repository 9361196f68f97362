// A stand-in for the front end's Metal mode (porter/emulate/frontend_mode/metal_mode.h), used by
// tests/emulate/test_frontend_stdlib.py only while that file is absent from the tree: the
// language-level names the library headers rely on (porter/emulate/frontend_include/README.md),
// with the same choices (clang's _Float16, __bf16, extended vectors, address spaces 1-3).
#pragma once
typedef _Float16 half;
typedef __bf16 bfloat;
typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long ulong;
typedef unsigned long size_t;
typedef long ptrdiff_t;
namespace metal {
template <typename T, int N>
using vec = T __attribute__((ext_vector_type(N)));
}
#define PORTER_STANDIN_VECTORS(T)                                                         \
  typedef metal::vec<T, 2> T##2;                                                         \
  typedef metal::vec<T, 3> T##3;                                                         \
  typedef metal::vec<T, 4> T##4;
PORTER_STANDIN_VECTORS(bool)
PORTER_STANDIN_VECTORS(char)
PORTER_STANDIN_VECTORS(uchar)
PORTER_STANDIN_VECTORS(short)
PORTER_STANDIN_VECTORS(ushort)
PORTER_STANDIN_VECTORS(int)
PORTER_STANDIN_VECTORS(uint)
PORTER_STANDIN_VECTORS(long)
PORTER_STANDIN_VECTORS(ulong)
PORTER_STANDIN_VECTORS(half)
PORTER_STANDIN_VECTORS(bfloat)
PORTER_STANDIN_VECTORS(float)
#undef PORTER_STANDIN_VECTORS
#define device __attribute__((address_space(1)))
#define constant __attribute__((address_space(2)))
#define threadgroup __attribute__((address_space(3)))
#define thread
#define kernel
