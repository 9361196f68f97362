"""porter candidates: the inventory of what is left to port, consistent with what the commands do."""

from __future__ import annotations

import json

import pytest
from expecttest import assert_expected_inline

from tests.porter_run import porter, snapshot


def test_table_on_fixture(mini_root):
    before = snapshot(mini_root)
    result = porter("candidates", root=mini_root)
    assert result.code == 0, result.err
    assert_expected_inline(result.out, """\
OP                 STATE     SHAPE     KIND     AUTO            FILES A PORT TOUCHES                                                                   BODY FROM / WHY NOT
acosh              mpsgraph  stub      unary    unverified      UnaryOps.mm, UnaryKernel.metal, UnaryKernel.mm                                         selector acosh
asinh              mpsgraph  macro     unary    unverified      native_functions.yaml, UnaryOps.mm, UnaryKernel.metal, UnaryKernel.mm                  CPU lambda
atanh              mpsgraph  macro     unary    unverified      native_functions.yaml, UnaryOps.mm, UnaryKernel.metal, UnaryKernel.mm                  CPU lambda
frac               mpsgraph  impl      unary    unverified      native_functions.yaml, UnaryOps.mm, UnaryKernel.metal, UnaryKernel.mm                  CPU lambda
logical_and        mpsgraph  macro     binary   unverified      native_functions.yaml, BinaryOps.mm, BinaryKernel.metal, BinaryKernel.mm               CPU lambda (truth values: one template for every dtype, complex64 included)
logical_or         mpsgraph  macro     binary   unverified      native_functions.yaml, BinaryOps.mm, BinaryKernel.metal, BinaryKernel.mm               CPU lambda (truth values: one template for every dtype, complex64 included)
logical_xor        mpsgraph  macro     binary   unverified      native_functions.yaml, BinaryOps.mm, BinaryKernel.metal, BinaryKernel.mm               CPU lambda (truth values: one template for every dtype, complex64 included)
logit              mpsgraph  function  scalar   unverified      native_functions.yaml, UnaryOps.mm, UnaryKernel.metal, UnaryKernel.mm, MPSFallback.mm  CPU lambda
sgn                mpsgraph  impl      unary    --complex-body  native_functions.yaml, UnaryOps.mm, UnaryKernel.metal, UnaryKernel.mm                  needs --complex-body EXPR (in x) for the body of sgn_functor (`sgn_impl` has no complex definition in aten/src/ATen/native/cpu/zmath.h, aten/src/ATen/native/Math.h or the CPU kernel files (CPU lambda at aten/src/ATen/native/cpu/UnaryOpsKernel.cpp:108)); sign's port first, in one command: sgn_out runs it for real inputs
sigmoid_backward   mpsgraph  impl      binary   unverified      native_functions.yaml, Activation.mm, ActivationKernel.metal, ActivationKernel.mm      CPU lambda
sign               mpsgraph  impl      unary    unverified      native_functions.yaml, UnaryOps.mm, UnaryKernel.metal, UnaryKernel.mm                  CPU lambda
signbit            mpsgraph  impl      unary    unverified      native_functions.yaml, UnaryOps.mm, UnaryKernel.metal, UnaryKernel.mm                  CPU lambda
softplus           mpsgraph  impl      scalar   unverified      native_functions.yaml, Activation.mm, ActivationKernel.metal, ActivationKernel.mm      CPU lambda
tanh_backward      mpsgraph  impl      binary   unverified      native_functions.yaml, Activation.mm, ActivationKernel.metal, ActivationKernel.mm      CPU lambda
threshold          mpsgraph  impl      scalar   unverified      native_functions.yaml, Activation.mm, ActivationKernel.metal, ActivationKernel.mm      CPU lambda
addcdiv            mpsgraph  impl      ternary  no              native_functions.yaml, PointwiseOps.mm, PointwiseOps.metal                             incomplete: the checkout has no c10/metal/indexing.h to define REGISTER_OPMATH_TERNARY_ALPHA_OP in
addcmul            mpsgraph  impl      ternary  no              native_functions.yaml, PointwiseOps.mm, PointwiseOps.metal                             incomplete: the checkout has no c10/metal/indexing.h to define REGISTER_OPMATH_TERNARY_ALPHA_OP in
conj_physical      mpsgraph  function  unary    no              native_functions.yaml, UnaryOps.mm, UnaryKernel.metal, UnaryKernel.mm                  no DispatchStub behind its CPU kernel
gelu               mpsgraph  impl      other    no              native_functions.yaml, Activation.mm                                                   cannot port 'gelu', whose str argument picks its kernel: get_gelutype_enum, which aten/src/ATen/native/Activation.cpp:88 converts approximate with, is defined in no aten/src/ATen/native/*.h as `if (s == "...") return Enum::X;` branches
gelu_backward      mpsgraph  impl      other    no              native_functions.yaml, Activation.mm                                                   cannot port 'gelu_backward', whose str argument picks its kernel: get_gelutype_enum, which aten/src/ATen/native/Activation.cpp:94 converts approximate with, is defined in no aten/src/ATen/native/*.h as `if (s == "...") return Enum::X;` branches
logical_not        mpsgraph  function  unary    no              native_functions.yaml, UnaryOps.mm, UnaryKernel.metal, UnaryKernel.mm                  no DispatchStub behind its CPU kernel
mish_backward      mpsgraph  function  binary   no              native_functions.yaml, Activation.mm, BinaryKernel.metal, BinaryKernel.mm              no DispatchStub behind its CPU kernel
nan_to_num         mpsgraph  function  scalar   --body          native_functions.yaml, UnaryOps.mm, UnaryKernel.metal, UnaryKernel.mm                  CPU lambda: `_nan_to_num_replace` has no known Metal translation; its translation is refused: the checkout has no c10/metal/special_math.h to define it in
pow                mpsgraph  macro     binary   no              native_functions.yaml, BinaryOps.mm, BinaryKernel.metal, BinaryKernel.mm               no DispatchStub behind its CPU kernel
softplus_backward  mpsgraph  impl      scalar   no              native_functions.yaml, Activation.mm, BinaryKernel.metal, BinaryKernel.mm              no DispatchStub behind its CPU kernel, and an in-place port passes no scalars to a kernel
heaviside          no-mps    -         binary   unverified      native_functions.yaml, BinaryKernel.metal, BinaryKernel.mm, common_mps.py              CPU lambda
special_log_ndtr   no-mps    -         unary    unverified      native_functions.yaml, UnaryKernel.metal, UnaryKernel.mm, common_mps.py                CPU lambda
special_ndtri      no-mps    -         unary    --body          native_functions.yaml, UnaryKernel.metal, UnaryKernel.mm, common_mps.py                CPU lambda: `calc_ndtri` needs c10::metal::ndtri, which this checkout's c10/metal headers do not define; its translation is refused: the checkout has no c10/metal/special_math.h to define it in

25 op(s) on MPSGraph (20 forward, 5 backward), 3 without MPS. AUTO: yes, the command writes the kernel body itself and the port it writes was measured green (`--verify`, on this checkout as it is); unverified, it writes the body itself, and whether that port is green is not measured yet; fails DTYPE, it writes a port that is red there; --body or --complex-body, the command needs that EXPR (WHY NOT says what it replaces); no, the port is refused (WHY NOT says why). `porter candidates --verify` measures the 16 unverified.
  forward ops (20 on MPSGraph, 3 without MPS): 14 ported automatically, 1 with --complex-body EXPR, 2 with --body EXPR, 6 refused (3 no DispatchStub, 2 incomplete, 1 str argument).
  backward ops (5 on MPSGraph): 2 ported automatically, 3 refused (2 no DispatchStub, 1 str argument).
Backward ops are tested through their forward op's samples: `porter test OP --device emulate`.
1 other op(s) still name an MPS kernel of their own in native_functions.yaml (not unary/binary/alpha/scalar elementwise): not listed.
FILES leaves out OpInfo files (MPS DecorateInfos): `porter migrate-from-mpsgraph OP --dry-run` or `porter new-op OP --dry-run` shows every edit.
""")
    assert snapshot(mini_root) == before


def test_real_tree_finds_the_known_ops(real_root):
    result = porter("candidates", "--json", root=real_root)
    assert result.code == 0, result.err
    found = {c["op"]: c for c in json.loads(result.out)["candidates"]}
    for op in ("sign", "signbit", "frac", "sgn", "asinh", "acosh", "atanh"):
        assert found[op]["state"] == "mpsgraph", op
        assert found[op]["kind"] == "unary"
    for op in ("heaviside", "special_ndtri", "special_log_ndtr"):
        assert found[op]["state"] == "no-mps", op
    assert found["heaviside"]["kind"] == "binary"
    # torch 2.13's yaml names acosh_out_mps and the fixture keeps the hidden stub line: both go.
    assert found["acosh"]["shape"] == "stub"
    assert "aten/src/ATen/native/native_functions.yaml" in found["acosh"]["files"]
    assert found["sign"]["command"] == "porter migrate-from-mpsgraph sign"
    assert found["heaviside"]["command"] == "porter new-op heaviside"


@pytest.mark.parametrize("tree", ["mini_root"])
@pytest.mark.slow
def test_automatic_agrees_with_the_commands(tree, request):
    """AUTO says yes exactly when the command writes the body itself (no --body, no skeleton)."""
    root = request.getfixturevalue(tree)
    listed = json.loads(porter("candidates", "--json", root=root).out)["candidates"]
    assert listed
    compared = 0
    for c in listed:
        command = "migrate-from-mpsgraph" if c["state"] == "mpsgraph" else "new-op"
        # the command is printed only where it runs as written: none for a refused op (the JSON
        # named one for every op) nor for one that needs --body EXPR (run bare, it exits 1)
        assert (c["command"] is None) == (c["verdict"] != "automatic"), c
        assert c["command"] in (None, f"porter {command} {c['op']}"), c
        # nothing measured these ports: AUTO never says yes unmeasured (it said yes for ports
        # that are red), and says the flag or the refusal otherwise
        assert c["auto"] == {"automatic": "unverified", "--body": "--body",
                             "--complex-body": "--complex-body", "refused": "no"}[c["verdict"]], c
        result = porter(command, c["op"], "--dry-run", "--json", root=root)
        if c["verdict"] in ("--body", "--complex-body"):
            # the bare command asks for the flag AUTO names
            assert result.code == 1 and c["verdict"] in result.out + result.err, (c["op"], result.out)
        if result.code != 0:
            assert not c["automatic"], (c["op"], result.err)
            continue
        compared += 1
        origin = json.loads(result.out)["functor"]
        assert (origin in ("cpu-lambda", "mpsgraph-selector")) == c["automatic"], (c["op"], origin)
        if c["automatic"]:
            expected = "cpu-lambda" if c["how"].startswith("CPU lambda") else "mpsgraph-selector"
            assert origin == expected, c["op"]
    # the loop ran, over both kinds: a candidate the command writes, and one it does not
    assert compared and any(c["automatic"] for c in listed) and not all(c["automatic"] for c in listed)


def test_docs_porting_quotes_the_counts_candidates_prints_on_the_real_tree(real_tree_template):
    # docs/porting.md's "which ops" paragraph states these counts; when a port moves an op (a refusal
    # lifted, a body derived), this fails with the lines to paste
    from pathlib import Path

    counts = json.loads(porter("candidates", "--json", root=real_tree_template).out)["summary"]
    assert counts["headline"] == "32 op(s) on MPSGraph (25 forward, 7 backward), 6 without MPS"
    readme = " ".join((Path(__file__).parents[1] / "docs" / "porting.md").read_text().split())
    for group in ("forward", "backward"):
        assert counts[group] in readme, f"docs/porting.md's 'which ops' paragraph should quote:\n{counts[group]}"


def test_auto_column_says_what_the_summary_counts_on_the_real_tree(real_tree_template):
    # acosh is counted "with --complex-body EXPR" (its MPS test sends complex64, its body comes
    # from the MPSGraph selector, and the command refuses it without one): AUTO must not say
    # "yes" for it. asinh and atanh take their complex64 overload from their CPU lambda, with
    # the float2 routines porter adds to c10/metal/utils.h: ported automatically, and utils.h
    # among the files
    result = porter("candidates", root=real_tree_template)
    assert result.code == 0, result.err
    data = json.loads(porter("candidates", "--json", root=real_tree_template).out)
    cells = {line.split()[0]: line.split()[4] for line in result.out.splitlines()[1:] if line and not line[0].isspace()
             and len(line.split()) > 4 and line.split()[1] in ("mpsgraph", "no-mps")}
    assert cells["acosh"] == "--complex-body", cells["acosh"]
    by_op = {c["op"]: c for c in data["candidates"]}
    assert by_op["acosh"]["verdict"] == "--complex-body" and by_op["acosh"]["automatic"] is False, by_op["acosh"]
    for op in ("asinh", "atanh"):
        # not measured here: the command writes the body itself, "unverified" until --verify
        assert cells[op] == "unverified" and by_op[op]["verdict"] == "automatic", by_op[op]
        assert "c10/metal/utils.h" in by_op[op]["files"], by_op[op]
    # every row: the cell is the verdict the summary counts, and the counts agree
    words = {"unverified": "ported automatically", "--complex-body": "with --complex-body EXPR",
             "--body": "with --body EXPR"}
    for group, backward in (("forward", False), ("backward", True)):
        rows = [c for c in data["candidates"] if c["backward"] is backward]
        for c in rows:
            assert c["automatic"] == (c["verdict"] == "automatic"), c["op"]
        for cell, phrase in words.items():
            n = sum(cells[c["op"]] == cell for c in rows)
            assert (f"{n} {phrase}" in data["summary"][group]) if n else phrase not in data["summary"][group], \
                (group, cell, n, data["summary"][group])
        refused = sum(cells[c["op"]] == "no" for c in rows)
        assert (f"{refused} refused (" in data["summary"][group]) if refused else \
            "refused" not in data["summary"][group], (group, refused)


def test_sub_is_refused_as_its_command_refuses_it_while_add_stub_has_no_mps_kernel(real_root):
    # sub_out runs add_stub with -alpha: with add's host registration, sub is its row alone;
    # without it (upstream's own BinaryKernel.mm registers no add_stub), the command refuses
    # naming add_stub, and candidates says the same instead of asking for a --body
    def sub_row():
        listed = json.loads(porter("candidates", "--json", root=real_root).out)["candidates"]
        return next(c for c in listed if c["op"] == "sub")

    assert sub_row()["verdict"] == "automatic"
    host = real_root / "aten/src/ATen/native/mps/operations/BinaryKernel.mm"
    text = host.read_text()
    assert "REGISTER_DISPATCH(add_stub, &add_mps_kernel)" in text
    host.write_text(text.replace("REGISTER_DISPATCH(add_stub, &add_mps_kernel)", ""))
    row = sub_row()
    assert row["verdict"] == "refused", row
    assert "sub_out runs add_stub(iter, -alpha)" in row["how"] and "once that stub has its MPS kernel" in row["how"], row
    command = porter("migrate-from-mpsgraph", "sub", "--dry-run", root=real_root)
    assert command.code == 2 and "sub_out runs add_stub(iter, -alpha)" in command.err, command.err
