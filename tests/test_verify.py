"""`porter candidates --verify` and the sweep: every op porter accepts on the real-size tree is
planned in memory, built and run through the emulated output-match test; nothing is written."""

from __future__ import annotations

import json
import os
import shutil

import pytest

pytest.importorskip("torch")
if shutil.which(os.environ.get("CXX", "g++")) is None:
    pytest.skip("no C++ compiler for the Metal emulator", allow_module_level=True)

from porter.source.checkout import Checkout  # noqa: E402
from porter.harness import measure_port as verifymod  # noqa: E402
from porter.survey.port_candidates import find  # noqa: E402
from tests.porter_run import git_init, porter, snapshot  # noqa: E402

# Ports porter used to write that a Mac rejects, before the planning side's completeness checks
# (issue 12, cases 4 and 5): each is now refused with the reason, never written.
REFUSED_AS_INCOMPLETE = {
    # the tree's acosh runs at::vml (no CPU lambda): its body comes from the MPSGraph selector,
    # which says nothing of complex values (asinh and atanh: tests/test_complex_ports.py)
    "acosh": "a complex64 kernel",
    # torch 2.13's MetalShaderLibrary.h has no exec_ternary_kernel taking a scalar (issue 22)
    "addcmul": "a scalar overload of exec_ternary_kernel",
    "addcdiv": "a scalar overload of exec_ternary_kernel",
}
# measured after another op's port, which the command asks for first: none since sgn's command
# ports sign with it (sgn_out runs sign_stub for real inputs; porter.port.joint)
AFTER: dict[str, str] = {}


# The sweep's verified ports and how each is written for the reference-inputs run below
WRITTEN_BY = {"frac": "migrate-from-mpsgraph", "sign": "migrate-from-mpsgraph",
              "signbit": "migrate-from-mpsgraph", "heaviside": "new-op", "special_log_ndtr": "new-op",
              # bodies translated with their kernel's context (issue 22): locals, lambdas of
              # cpu/Activation.cpp and cpu/BinaryOpsKernel.cpp, helpers of native/Math.h
              "mish": "migrate-from-mpsgraph", "nan_to_num": "migrate-from-mpsgraph",
              "sigmoid_backward": "migrate-from-mpsgraph", "tanh_backward": "migrate-from-mpsgraph",
              "special_ndtri": "new-op", "special_airy_ai": "new-op",
              "special_legendre_polynomial_p": "new-op", "special_laguerre_polynomial_l": "new-op",
              "threshold": "migrate-from-mpsgraph", "logical_not": "migrate-from-mpsgraph",
              "conj_physical": "migrate-from-mpsgraph",
              # two CPU lambdas chosen by a scalar (eps < 0): one functor branching on it
              "logit": "migrate-from-mpsgraph", "logit_backward": "migrate-from-mpsgraph",
              # after sign (above): sgn_stub's complex overload from the CPU's sgn_impl
              "sgn": "migrate-from-mpsgraph"}
# red on the reference inputs, as porter reports them: tanh_backward float32
# (values near cancellation, 1 - y*y at y ~ 1: torch's x86 CPU kernels fuse the multiply-add, as
# a Mac's CPU does in its scalar loop and not in its NEON body; the emulated Metal kernel rounds
# twice, rel 8e-5 off, and passes only contracted, which is not proven: red on a Mac either way);
# logit_backward on every dtype: at x = -0.0 the installed CPU's vectorized path (no x == 0 case:
# dy / (x * (1 - x)) = -inf) and its scalar lambda (dy * inf = +inf), which porter translates,
# disagree; float16 also rounds each CPU operation to half (2944 where float gives 2940)
# special.log_ndtr: c10::metal::erfc is 1 - erf, zero past x = 5.5 in float, where the CPU's
# log1p(-erfc(x/sqrt 2)/2) is a normal number (docs/red.md, "Lost precision, a real red")
# the two special polynomials: a NaN or infinite float32 degree converted to int64, undefined in
# Metal (x86's least integer here, an Apple GPU may saturate): not proven on float32
# special.airy_ai: at large negative integers (the phase 2/3 |x|^1.5 near 1000 in float) an
# answer of sin, cos or exp one float away, which Metal's bound in ulp allows, moves the result
# past float32's tolerance: not proven on every dtype but bool and uint8 (gelu_backward, the
# same on float32 at one extreme grad: tests/test_str_ports.py)
REFERENCE_FAILS = {"tanh_backward": ("float32",),
                   "special.airy_ai": ("int8", "int16", "int32", "int64", "float32"),
                   "special.laguerre_polynomial_l": ("float32",),
                   "special.legendre_polynomial_p": ("float32",),
                   "special.log_ndtr": ("uint8", "int8", "int16", "int32", "int64", "float32"),
                   "logit_backward": ("float32", "float16", "bfloat16")}
# verified ports whose own test writes them and runs `--reference-inputs` on every dtype
REFERENCE_TESTED_ELSEWHERE = {"softplus": "tests/test_scalar_ops.py",
                              "logical_and": "tests/test_logical_ops.py",
                              "logical_or": "tests/test_logical_ops.py",
                              "logical_xor": "tests/test_logical_ops.py",
                              "softplus_backward": "tests/test_activation_ports.py",
                              "mish_backward": "tests/test_activation_ports.py",
                              "threshold_backward": "tests/test_activation_ports.py",
                              "asinh": "tests/test_complex_ports.py",
                              "atanh": "tests/test_complex_ports.py",
                              # its row joining sub_out, which runs add's kernel with -alpha
                              "sub": "tests/test_host_path.py",
                              # one kernel per value of approximate, picked in the host
                              "gelu": "tests/test_str_ports.py",
                              "gelu_backward": "tests/test_str_ports.py"}


@pytest.mark.slow(seconds=1100)      # minutes: --full runs it, CI does
def test_sweep_every_accepted_port_builds_and_passes_or_is_refused_with_a_reason(real_root):
    """Then each verified port written (below): one test, so that the written ports' run reads
    the samples, CPU references and kernel builds the in-memory sweep recorded (two tests ran
    on two xdist workers at once, each computing them: about 240 s each)."""
    _every_accepted_port_builds_and_passes_or_is_refused_with_a_reason(real_root)
    _every_verified_port_once_written_passes_the_reference_inputs_on_every_dtype(real_root)


def _every_accepted_port_builds_and_passes_or_is_refused_with_a_reason(real_tree_template):
    checkout = Checkout.at(real_tree_template)
    before = snapshot(real_tree_template)
    candidates = find(checkout).candidates
    verdicts = [verifymod.verify(checkout, c.op, c.state) for c in candidates]
    assert snapshot(real_tree_template) == before            # measured in memory, nothing written
    by_status: dict[str, list] = {}
    for v in verdicts:
        by_status.setdefault(v.status, []).append(v)
    for v in by_status.get(verifymod.REFUSED, []):
        assert v.detail.strip(), v
    for v in by_status.get(verifymod.VERIFIED, []):
        after = f" (after {AFTER[v.op]}'s port: `porter status {AFTER[v.op]}`)" if v.op in AFTER else ""
        assert v.passed == v.tested > 0 and v.detail == f"{v.passed}/{v.tested} dtypes{after}", v
    # measured red, as the written port is below (REFERENCE_FAILS): the full verdict's reference
    # inputs, with the first failing dtype
    fails = {v.op: v.failed_dtype for v in by_status.get(verifymod.FAILS, [])}
    assert fails == {"logit_backward": "float16", "tanh_backward": "float32",
                     "special_log_ndtr": "uint8", "special_laguerre_polynomial_l": "float32",
                     "special_legendre_polynomial_p": "float32", "gelu_backward": "float32",
                     "special_airy_ai": "int8"}, fails
    assert all("(reference inputs)" in v.detail for v in by_status[verifymod.FAILS])
    refused = {v.op: v.detail for v in by_status[verifymod.REFUSED]}
    for op, why in REFUSED_AS_INCOMPLETE.items():
        assert refused[op].startswith("incomplete port: ") and why in refused[op], (op, refused[op])
    assert by_status.get(verifymod.NOT_RUN, []) == []
    # the counts the README states
    counts = {k: len(v) for k, v in by_status.items()}
    assert counts == {"verified": 24, "fails": 7, "refused": 7}, counts
    assert {v.op for v in by_status["verified"]} == {"frac", "sign", "signbit", "heaviside",
                                                     "softplus", "sub",
                                                     "logical_and", "logical_or", "logical_xor",
                                                     "softplus_backward", "mish_backward",
                                                     "mish", "nan_to_num", "sigmoid_backward",
                                                     "special_ndtri", "threshold",
                                                     "logical_not", "conj_physical", "logit",
                                                     "threshold_backward",
                                                     "asinh", "atanh", "sgn",
                                                     # a str picking the kernel (issue 22, item 6)
                                                     "gelu"}
    # each measured op is written and run with reference inputs, below or in its own test file
    assert {v.op for v in by_status["verified"]} | set(fails) == \
        set(WRITTEN_BY) | set(REFERENCE_TESTED_ELSEWHERE)


def _every_verified_port_once_written_passes_the_reference_inputs_on_every_dtype(real_root):
    # `candidates --verify` runs the reference inputs on the port planned in memory; the same plan,
    # written, must pass `porter test OP --device emulate --reference-inputs` on every dtype the MPS
    # test sends (the reference inputs start with the standard samples, so this also covers the
    # sweep above). signbit's automatic body reads the sign bit, so -0.0 passes.
    git_init(real_root)
    for op, command in WRITTEN_BY.items():
        res = porter(command, op, root=real_root)
        assert res.code == 0, (op, res.err)
        git_init(real_root)                 # commits the port: porter edits clean files only
    res = porter("test", *WRITTEN_BY, "--device", "emulate", "--reference-inputs", "--json", root=real_root)
    report = json.loads(res.out)
    # the shapes row (reference false too) keyed apart, so it cannot stand in for the samples'
    rows = {(o["key"], "shapes" if o["shapes"] else o["reference"]): {c["dtype"]: c["outcome"] for c in o["dtypes"]}
            for o in report["ops"]}
    reference = {key: outcomes for (key, ref), outcomes in rows.items() if ref is True}
    assert len(reference) == len(WRITTEN_BY), sorted(rows)
    for key, outcomes in reference.items():
        # integer dtypes the CPU refuses (mish) keep their expected failure
        assert "pass" in rows[key, False].values(), (key, rows[key, False])
        assert set(rows[key, False].values()) <= {"pass", "xfail"}, (key, rows[key, False])
        if key in REFERENCE_FAILS:
            assert {outcomes[d] for d in REFERENCE_FAILS[key]} == {"fail"}, (key, outcomes)
            continue
        assert outcomes == rows[key, False], (key, outcomes)
    assert sum(len(o) for o in reference.values()) >= 35      # every dtype, not a sample of them
    assert res.code == 1, res.out          # their reference rows fail, and say so


def test_candidates_verify_table_and_json_carry_the_measurement(real_tree_template, monkeypatch, capsys):
    measured = {
        "heaviside": verifymod.Verdict("heaviside", verifymod.VERIFIED, "9/9 dtypes", 9, 9),
        "sign": verifymod.Verdict("sign", verifymod.FAILS, "float32: wrong at 0", 8, 9, "float32"),
    }

    def fake(checkout, op, state, **options):
        assert not options            # measured on the full verdict: verify's defaults
        return measured.get(op) or verifymod.Verdict(op, verifymod.REFUSED, f"{op} is refused")
    monkeypatch.setattr(verifymod, "verify", fake)
    res = porter("candidates", "--verify", root=real_tree_template)
    rows = {line.split()[0]: line.split() for line in res.out.splitlines() if line and not line.startswith(" ")}
    assert rows["heaviside"][4] == "yes"                 # measured green: the only yes there is
    assert rows["sign"][4:6] == ["fails", "float32"]
    # an op the command ports automatically, whose measurement refused it: no
    assert rows["frac"][4] == "no"
    # an op that needs a flag keeps the flag (its bare command is what was refused)
    assert rows["acosh"][4] == "--complex-body"
    assert "  sign: fails: float32: wrong at 0" in res.out
    data = json.loads(porter("candidates", "--verify", "--json", root=real_tree_template).out)
    by_op = {c["op"]: c for c in data["candidates"]}
    assert by_op["heaviside"]["verify"]["detail"] == "9/9 dtypes" and by_op["heaviside"]["auto"] == "yes"
    assert by_op["sign"]["verify"]["failed_dtype"] == "float32" and by_op["sign"]["auto"] == "fails float32"
    assert by_op["sign"]["command"] == "porter migrate-from-mpsgraph sign"     # it runs, and says red
    assert by_op["frac"]["command"] is None                                    # it refuses
    # plain candidates reads back what --verify measured of this tree as it is
    plain = {c["op"]: c for c in json.loads(porter("candidates", "--json", root=real_tree_template).out)["candidates"]}
    assert {op: c["auto"] for op, c in plain.items()} == {op: c["auto"] for op, c in by_op.items()}


def test_a_scalar_port_that_needs_a_body_says_so_not_its_skeletons_build_error(real_root):
    # logit with its two CPU lambdas chosen by the iterator (not by eps): no lambda porter can
    # translate, so the command asks for --body; the sweep said "does not build: static
    # assertion failed: write the Metal body"
    cpu = real_root / "aten/src/ATen/native/cpu/UnaryOpsKernel.cpp"
    text = cpu.read_text()
    assert text.count("if (eps < scalar_t(0)) {") == 1
    cpu.write_text(text.replace("if (eps < scalar_t(0)) {", "if (iter.is_contiguous()) {"))
    checkout = Checkout.at(real_root)
    for op, params in (("logit", "x, eps"),):
        v = verifymod.verify(checkout, op, "mpsgraph")
        assert v.status == verifymod.REFUSED, (op, v)
        assert v.detail.startswith(f"incomplete port: needs --body EXPR (in {params}) for the body of {op}_functor"), v.detail
        assert "build" not in v.detail and "static assert" not in v.detail, v.detail



def test_each_measured_port_reads_its_shadow_afresh(real_root, monkeypatch):
    """`candidates --verify` checks op after op in one process, each in a shadow of the tree at
    one reused path: what the last op's check read there (porter.runtime.run_memo: the host
    files' include graph, the host folders' files) is not this op's (review 48)."""
    from types import SimpleNamespace

    from porter.apply.changes import ChangeSet
    from porter.emulate import host_macros
    from porter.harness import opinfo_run
    from porter.runtime import run_memo

    graphs = []

    def tests_of(op, root, backend, **kwargs):
        graphs.append(host_macros._graph(backend.root))
        return []

    monkeypatch.setattr(opinfo_run, "make_context", lambda *a, **k: SimpleNamespace())
    monkeypatch.setattr(opinfo_run, "run_op_tests", tests_of)
    checkout = Checkout(real_root)
    for op in ("heaviside", "hypot"):
        verifymod.measure(checkout, op, ChangeSet(real_root))
    run_memo.forget()
    assert len(graphs) == 2 and graphs[0].root == graphs[1].root
    assert graphs[0] is not graphs[1]
