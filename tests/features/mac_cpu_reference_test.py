"""porter.harness.mac_cpu_reference: libc++'s complex<float> formulas (a Mac's CPU reference)
beside the exact value, as before/after rows, and when each reference is used."""

from __future__ import annotations

import numpy as np
import pytest

from porter.harness import mac_cpu_reference as mac

# (op, input, libc++'s value in float, the exact value rounded to complex64, a Mac's CPU
# departs from it beyond complex64's default tolerance)
_ROWS = (
    pytest.param("asinh", 2 + 3j, (1.9686379 + 0.96465862j), (1.9686379 + 0.96465850j), False,
                 id="asinh positive real part: close"),
    # off: None, not asserted: the cancellation leaves the model 1e-6 (numpy 2.4's SIMD float32
    # log) or 1e-5 (earlier numpy) from the exact value, either side of complex64's tolerance
    pytest.param("asinh", -6.786881446838379 + 8.347665786743164j, (-3.0684404 + 0.88603812j),
                 (-3.0684087 + 0.88604492j), None, id="asinh upstream-like sample: cancels"),
    pytest.param("asinh", -501 - 501j, (-7.3092742 - 0.75315136j), (-7.2563267 - 0.78539765j),
                 True, id="asinh(-501-501i): 5% off"),
    pytest.param("asinh", 8.5e37 - 8.5e37j, (np.inf - 0.78539819j), (88.375435 - 0.78539819j),
                 True, id="asinh beyond 1.8e19: z*z overflows"),
    pytest.param("acosh", 2 + 3j, (1.9833870 + 1.0001436j), (1.9833870 + 1.0001435j), False,
                 id="acosh close"),
    pytest.param("acosh", -501 + 0.25j, (6.9007001 + 3.1411192j), (6.9097524 + 3.1410937j), True,
                 id="acosh negative real part: cancels"),
    pytest.param("atanh", 0.5 + 0.25j, (0.50037003 + 0.31439817j), (0.50037003 + 0.31439814j),
                 False, id="atanh close"),
    pytest.param("atanh", 1 + 0j, (np.inf + 0j), (np.inf + 0j), False, id="atanh pole"),
    pytest.param("asin", 0.5 + 0.5j, (0.45227847 + 0.53063750j), (0.45227844 + 0.53063750j),
                 False, id="asin through asinh(iz)"),
    pytest.param("acos", 0.5 - 0.5j, (1.1185179 + 0.53063750j), (1.1185179 + 0.53063750j),
                 False, id="acos lower half plane"),
    pytest.param("atan", 2 + 1j, (1.1780972 + 0.17328680j), (1.1780972 + 0.17328680j), False,
                 id="atan through atanh(iz)"),
)


@pytest.mark.parametrize("op, z, libcxx, exact, off", _ROWS)
def test_libcxx_value_beside_the_exact_one(op, z, libcxx, exact, off):
    values = np.array([z], dtype=np.complex64)
    local = np.array([exact], dtype=np.complex64)
    got = mac.apply(op, values, local)[0]
    # where the formula cancels (off: the rows a Mac departs on), the model's last digits carry
    # float32 log's last ulp, which numpy builds answer apart (2.4's SIMD log moved the
    # cancelling asinh row by 9e-6): those rows are held to 2e-5, the close ones to 2e-7
    np.testing.assert_allclose(got, np.complex64(libcxx), rtol=2e-7 if off is False else 2e-5,
                               atol=0)
    np.testing.assert_allclose(np.complex64(mac._exact(op, values)[0]), np.complex64(exact),
                               rtol=2e-7, atol=0)
    if off is not None:
        assert bool(mac._off(op, values)[0]) is off


def test_special_values_keep_the_local_reference():
    # inf and NaN follow Annex G in both libraries: the model is not used there
    values = np.array([complex(np.inf, 1), complex(np.nan, 0), complex(1, np.inf)], np.complex64)
    local = np.array([7 + 7j, 8 + 8j, 9 + 9j], np.complex64)
    assert list(mac.apply("asinh", values, local)) == list(local)
    assert not mac._off("asinh", values).any()


def test_only_complex64_of_the_six_ops_is_modelled():
    assert mac.model("asinh", "complex64") is not None
    assert mac.model("asinh", "float32") is None
    assert mac.model("sqrt", "complex64") is None          # libc++'s sqrt agrees within tolerance


def test_which_reference_each_run_uses(monkeypatch):
    torch = pytest.importorskip("torch")
    x = torch.tensor([-501 - 501j, 2 + 3j], dtype=torch.complex64)
    local = torch.asinh(x)
    # upstream's samples off a Mac: the Mac's value beside this machine's
    found = mac.for_torch("asinh", x, local, reference_inputs=False)
    assert found is not None and "libc++" in found[1]
    assert abs(found[0][0] - local[0]) > 1e-2 and abs(found[0][1] - local[1]) < 1e-6
    # porter's reference inputs: no Mac compare; the exact value on every platform, rows counted
    assert mac.for_torch("asinh", x, local, reference_inputs=True) is None
    held, off = mac.exact_reference("asinh", x, local, reference_inputs=True)
    assert off == 1 and torch.allclose(held, local)
    assert mac.exact_reference("asinh", x, local, reference_inputs=False) == (local, None)
    # on a Mac the local CPU is libc++ already: no second reference
    monkeypatch.setattr("sys.platform", "darwin")
    assert mac.for_torch("asinh", x, local, reference_inputs=False) is None
    # ...but reference inputs are held to the exact value there too (a Mac's libc++ is off)
    wrong_local = local.clone()
    wrong_local[0] = complex(found[0][0])
    held, off = mac.exact_reference("asinh", x, wrong_local, reference_inputs=True)
    assert torch.allclose(held, local)


def test_a_zero_dimensional_sample():
    # upstream's samples include 0-d tensors: one row, same shape back
    torch = pytest.importorskip("torch")
    x = torch.tensor(-501 - 501j, dtype=torch.complex64)
    local = torch.asinh(x)
    mac_ref, _ = mac.for_torch("asinh", x, local, reference_inputs=False)
    assert mac_ref.shape == () and abs(mac_ref - local) > 1e-2
    held, off = mac.exact_reference("asinh", x, local, reference_inputs=True)
    assert held.shape == () and off == 1
