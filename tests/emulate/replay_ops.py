"""Upstream Metal bugs replayed on porter's trees: the op laid into a real-size tree as upstream
shapes it (structured impl, DispatchStub, CPU kernel, Metal functor, host function), with the
functor as it was before the fix or after it. Written in porter's words, in upstream's shapes.
"""

from __future__ import annotations

from pathlib import Path

from porter.source.checkout import KERNELS, NATIVE, OPERATIONS

# upstream #190476: ::metal::nextafter has no bfloat overload, so bfloat goes through float's
NEXTAFTER_BEFORE = """\
struct nextafter_functor {
  template <typename T>
  inline T operator()(const T a, const T b) {
    return static_cast<T>(::metal::nextafter(a, b));
  }
};
"""
# upstream #190481: bfloat steps its own bits, as c10's BFloat16 nextafter does
NEXTAFTER_AFTER = """\
struct nextafter_functor {
  template <typename T, enable_if_t<!is_same_v<T, bfloat>, bool> = true>
  inline T operator()(const T a, const T b) {
    return static_cast<T>(::metal::nextafter(a, b));
  }
  template <typename T, enable_if_t<is_same_v<T, bfloat>, bool> = true>
  inline T operator()(const T a, const T b) {
    if (::metal::isnan(a) || ::metal::isnan(b)) {
      return static_cast<T>(NAN);
    }
    const ushort from = as_type<ushort>(a);
    const ushort to = as_type<ushort>(b);
    if (from == to || (((from | to) & 0x7fff) == 0)) {
      return b;
    }
    if ((from & 0x7fff) == 0) {
      return as_type<bfloat>(ushort((to & 0x8000) | 1));
    }
    const bool away = (float(a) < float(b)) == ((from & 0x8000) == 0);
    return as_type<bfloat>(ushort(away ? from + 1 : from - 1));
  }
};
"""


def _insert(path: Path, anchor: str, text: str, before: bool = False) -> None:
    body = path.read_text()
    assert anchor in body, (path, anchor)
    body = body.replace(anchor, text + anchor if before else anchor + text, 1)
    path.write_text(body)


def lay_nextafter(root: Path, functor: str) -> None:
    """nextafter as upstream has it (structured, nextafter_stub, a CPU kernel, a Metal kernel
    registered for float, half and bfloat), with `functor` as its Metal functor."""
    lay_nextafter_cpu(root)
    metal = root / KERNELS / "BinaryKernel.metal"
    body = metal.read_text()
    metal.write_text(body.rstrip("\n") + "\n\n" + functor + "\nREGISTER_FLOAT_BINARY_OP(nextafter);\n")
    _insert(root / OPERATIONS / "BinaryKernel.mm", "static void atan2_mps_kernel(TensorIteratorBase& iter) {",
            "static void nextafter_mps_kernel(TensorIteratorBase& iter) {\n"
            "  lib.exec_binary_kernel(iter, \"nextafter\");\n}\n\n", before=True)
    _insert(root / OPERATIONS / "BinaryKernel.mm", "REGISTER_DISPATCH(atan2_stub, &atan2_mps_kernel)",
            "\nREGISTER_DISPATCH(nextafter_stub, &nextafter_mps_kernel)")


def lay_nextafter_cpu(root: Path) -> None:
    """nextafter's structured function, its stub and its CPU kernel (the fixture's native
    sources have none; a real-size tree's BinaryOps.h may declare the stub already)."""
    native = root / NATIVE
    if "nextafter_stub" not in (native / "BinaryOps.h").read_text():
        _insert(native / "BinaryOps.h", "DECLARE_DISPATCH(structured_binary_fn, copysign_stub)",
                "\nDECLARE_DISPATCH(structured_binary_fn, nextafter_stub)")
    _insert(native / "BinaryOps.cpp", "} // namespace at::meta",
            "TORCH_META_FUNC(nextafter) (const Tensor& self, const Tensor& other) {\n"
            "  build_borrowing_binary_op(maybe_get_output(), self, other);\n}\n\n", before=True)
    _insert(native / "BinaryOps.cpp", "DEFINE_DISPATCH(copysign_stub);",
            "\nDEFINE_DISPATCH(nextafter_stub);")
    _insert(native / "BinaryOps.cpp", "TORCH_IMPL_FUNC(hypot_out)",
            "TORCH_IMPL_FUNC(nextafter_out) (const Tensor& self, const Tensor& other, "
            "const Tensor& result) {\n  nextafter_stub(device_type(), *this);\n}\n\n", before=True)
    _insert(native / "cpu" / "BinaryOpsKernel.cpp", "void xlogy_kernel(TensorIteratorBase& iter) {",
            "void nextafter_kernel(TensorIteratorBase& iter) {\n"
            "  AT_DISPATCH_FLOATING_TYPES_AND2(kBFloat16, kHalf, iter.common_dtype(), "
            "\"nextafter_cpu\", [&]() {\n"
            "    cpu_kernel(iter, [](scalar_t a, scalar_t b) -> scalar_t {\n"
            "      return std::nextafter(a, b);\n    });\n  });\n}\n\n", before=True)
    _insert(native / "cpu" / "BinaryOpsKernel.cpp", "REGISTER_DISPATCH(copysign_stub, &copysign_kernel)",
            "\nREGISTER_DISPATCH(nextafter_stub, &nextafter_kernel)")


# upstream #186278: gelu's tanh approximation through fast::tanh for half and bfloat, whose
# exp(2x) overflows to inf / inf = NaN once its argument passes ~44 (x ~ 10.5)
GELU_TANH_BEFORE = """\
template <typename T>
inline float gelu_tanh_of(float u) {
  if (is_same_v<T, float>) {
    return ::metal::precise::tanh(u);
  }
  return ::metal::fast::tanh(u);
}

struct gelu_tanh_functor {
  template <typename T>
  inline T operator()(const T x) {
    const float v = float(x);
    const float u = 0.797884583f * (v + 0.044715f * v * v * v);
    return static_cast<T>(0.5f * v * (1.0f + gelu_tanh_of<T>(u)));
  }
};
"""
# upstream #186286: the argument clamped to [-10, 10] first, where tanh is saturated already
GELU_TANH_AFTER = GELU_TANH_BEFORE.replace(
    "return ::metal::fast::tanh(u);", "return ::metal::fast::tanh(::metal::clamp(u, -10.0f, 10.0f));")


def swap_gelu_tanh(root: Path, functor: str) -> None:
    """Replace the gelu_tanh functor `porter migrate-from-mpsgraph gelu` wrote with `functor`."""
    metal = root / KERNELS / "ActivationKernel.metal"
    body = metal.read_text()
    helper = "template <typename T>\ninline float gelu_tanh_of"
    start = body.index(helper) if helper in body else body.index("struct gelu_tanh_functor {")
    end = body.index("};\n", start) + len("};\n")
    metal.write_text(body[:start] + functor + body[end:])
