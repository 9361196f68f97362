"""`porter emulate check`'s CPU references (porter/emulate/references.py) for the kernels of
upstream's ActivationKernel.metal: each name, with the kernel's operands in the order its functor
takes them, against the functor's own formula written out in float64. A reference that takes
its operands in another order (log_sigmoid_backward takes self first, the gradient second), or
names the wrong op, fails its row."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from porter.emulate.references import ALPHAS, reference  # noqa: E402

X = torch.tensor([-7.0, -3.0, -0.75, -0.25, 0.0, 0.3, 0.5, 2.5, 3.0, 9.0], dtype=torch.float64)
G = torch.tensor([1.5, -2.0, 0.25, 3.0, -1.0, 0.5, 2.0, -0.75, 1.25, 4.0], dtype=torch.float64)


def _sig(v):
    return 1 / (1 + torch.exp(-v))


# kernel name -> (operands, the functor's formula)
ROWS = {
    "hardsigmoid": ((X,), lambda: torch.clamp(X / 6 + 0.5, 0, 1)),
    "hardsigmoid_backward": ((G, X), lambda: torch.where((X > -3) & (X < 3), G / 6, 0.0)),
    "hardswish": ((X,), lambda: X * torch.clamp(X + 3, 0, 6) / 6),
    "hardswish_backward": ((G, X), lambda: torch.where(
        X <= -3, 0.0, torch.where(X >= 3, G, G * (X / 3 + 0.5)))),
    "silu": ((X,), lambda: X * _sig(X)),
    "silu_backward": ((G, X), lambda: G * _sig(X) * (1 + X - X * _sig(X))),
    "log_sigmoid_forward": ((X,), lambda: torch.log(_sig(X))),
    "log_sigmoid_backward": ((X, G), lambda: G * _sig(-X)),
    "shrink_backward": ((G, X, ALPHAS["shrink_backward"]),
                        lambda: torch.where(X.abs() <= ALPHAS["shrink_backward"], 0.0, G)),
    "glu": ((G, X), lambda: G * _sig(X)),
}


@pytest.mark.parametrize("kernel", sorted(ROWS))
def test_an_activation_kernels_reference_is_its_functors_formula(kernel):
    operands, formula = ROWS[kernel]
    fn = reference(kernel)
    assert fn is not None, kernel
    # float32's precision: the CPU kernels compute some constants (hardsigmoid's 1/6) in float
    torch.testing.assert_close(fn(*operands), formula(), rtol=1e-7, atol=1e-12)


def test_a_kernel_whose_params_the_check_cannot_lay_out_has_no_reference():
    # elu's params struct holds half (and, backward, bool) fields: a reference would only turn
    # "no-reference" into a packing error charged to the kernel
    assert reference("elu_backward") is None
