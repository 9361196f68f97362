"""porter.source.host_scan.HostFile: what a host `.mm` file registers, as (text, facts) tables."""

from __future__ import annotations

import pytest

from porter.source.host_scan import HostFile

_noop = (
    pytest.param("// REGISTER_DISPATCH(exp_stub, &exp_kernel);\n", id="commented out"),
    pytest.param("#define REG(S) \\\n  REGISTER_DISPATCH(S##_stub, &S##_kernel)\n", id="inside a define"),
    pytest.param('auto s = "REGISTER_DISPATCH(exp_stub, &exp_kernel)";\n', id="in a string"),
    pytest.param("  foo(); REGISTER_DISPATCH(exp_stub, &exp_kernel);\n", id="not at the start of a line"),
)


@pytest.mark.parametrize("text", _noop)
def test_registers_nothing(text):
    host = HostFile(text)
    assert (host.dispatch_registrations, host.mpsgraph_stubs) == ([], {})


# (stub, function, line, via macro, condition porter cannot decide)
_fixes = (
    pytest.param("REGISTER_DISPATCH(exp_stub, &exp_kernel_mps);\n", [("exp_stub", "exp_kernel_mps", 1, False, "")],
                 id="REGISTER_DISPATCH"),
    pytest.param("\n  REGISTER_DISPATCH( exp_stub , exp_kernel_mps );\n", [("exp_stub", "exp_kernel_mps", 2, False, "")],
                 id="no &, spaces, indented"),
    pytest.param("REGISTER_MPS_DISPATCH(exp_stub, &at::native::mps::exp_kernel);\n",
                 [("exp_stub", "at::native::mps::exp_kernel", 1, False, "")], id="MPS spelling, qualified"),
    pytest.param("REGISTER_UNARY_TI_DISPATCH(sinc);\n", [("sinc_stub", "sinc_kernel_mps", 1, True, "")],
                 id="the TI macro names stub and function"),
    # what the build defines decides it: carried as the condition, never assumed either way
    pytest.param("#ifdef PORTER_FLAG\nREGISTER_DISPATCH(exp_stub, &exp_kernel_mps);\n#endif\n",
                 [("exp_stub", "exp_kernel_mps", 2, False, "#ifdef PORTER_FLAG")], id="under a build flag"),
    pytest.param("#if 1\nREGISTER_DISPATCH(exp_stub, &exp_kernel_mps);\n#endif\n",
                 [("exp_stub", "exp_kernel_mps", 2, False, "")], id="under #if 1"),
)


@pytest.mark.parametrize(("text", "found"), _fixes)
def test_dispatch_registrations(text, found):
    assert [tuple(r) for r in HostFile(text).dispatch_registrations] == found


def test_mpsgraph_stubs():
    host = HostFile("x\nREGISTER_MPS_UNARY_STUB(acosh, acoshWithTensor);\n"
                    "// REGISTER_MPS_UNARY_STUB(asinh, asinhWithTensor);\n")
    assert host.mpsgraph_stubs == {"acosh": ("acoshWithTensor", 2)}


HOST = """\
namespace at::native {
static void exp_kernel_mps(TensorIteratorBase& iter) {
  lib.exec_unary_kernel(iter, "exp");
}

static void add_kernel_mps(TensorIteratorBase& iter,
                           const Scalar& alpha) {
  lib.exec_binary_kernel(iter, "add", alpha);   // } in a comment
  lib.exec_binary_kernel_with_params<Params>(iter, "add_alpha", params);
}

void not_a_kernel() {
  other("exp");
}

REGISTER_DISPATCH(exp_stub, &exp_kernel_mps);
REGISTER_DISPATCH(add_stub, &add_kernel_mps);
REGISTER_UNARY_TI_DISPATCH(sinc);
REGISTER_DISPATCH(sub_stub, &elsewhere_mps);
} // namespace at::native
"""


def test_kernel_functions_and_their_calls():
    fns = HostFile(HOST).kernel_functions
    assert list(fns) == ["exp_kernel_mps", "add_kernel_mps", "not_a_kernel"]
    add = fns["add_kernel_mps"]
    assert (add.params, add.line) == ("TensorIteratorBase& iter, const Scalar& alpha", 6)
    assert [tuple(c[:4]) for c in add.calls] == [("binary", "add", False, ("alpha",)),
                                                 ("binary", "add_alpha", True, ("params",))]
    assert tuple(fns["exp_kernel_mps"].calls[0][:4]) == ("unary", "exp", False, ())
    assert HOST[add.start:add.end].endswith('params);\n}')
    assert fns["not_a_kernel"].kernels == ()


# what a Mac compiles and runs of a host function's calls: (kernel, line, after the return on
# line, condition) of each call the compiler sees, and the lines of those it never sees
_calls = (
    pytest.param('  lib.exec_unary_kernel(iter, "logit", eps);\n', [("logit", 2, 0, "")], [], id="the call"),
    pytest.param('  // lib.exec_unary_kernel(iter, "logit", eps);\n', [], [2], id="commented out"),
    pytest.param('  /* lib.exec_unary_kernel(iter, "logit", eps); */\n', [], [2], id="block comment"),
    pytest.param('#if 0\n  lib.exec_unary_kernel(iter, "logit", eps);\n#endif\n', [], [3], id="under #if 0"),
    pytest.param('#if FLAG\n  lib.exec_unary_kernel(iter, "logit", eps);\n#endif\n',
                 [("logit", 3, 0, "#if FLAG")], [], id="under an undecidable #if"),
    pytest.param('  return;\n  lib.exec_unary_kernel(iter, "logit", eps);\n', [("logit", 3, 2, "")], [],
                 id="after an unconditional return"),
    pytest.param('  if (iter.numel() == 0) return;\n  lib.exec_unary_kernel(iter, "logit", eps);\n',
                 [("logit", 3, 0, "")], [], id="after a guarded return"),
    pytest.param('  if (c) {\n    return;\n  }\n  lib.exec_unary_kernel(iter, "logit", eps);\n',
                 [("logit", 5, 0, "")], [], id="after a return in a block"),
    pytest.param('  return lib.exec_unary_kernel(iter, "logit", eps);\n', [("logit", 2, 0, "")], [],
                 id="the return that makes the call"),
)


@pytest.mark.parametrize(("code", "calls", "disabled"), _calls)
def test_calls_the_compiler_sees(code, calls, disabled):
    fn = HostFile("static void f(TensorIteratorBase& iter, const Scalar& eps) {\n" + code + "}\n").kernel_functions["f"]
    assert [(c.kernel, c.line, c.after_return, c.condition) for c in fn.calls] == calls
    assert list(fn.disabled) == disabled


@pytest.mark.parametrize(("stub", "kernels"), (
    pytest.param("exp_stub", ("exp",), id="through the registered function"),
    pytest.param("add_stub", ("add", "add_alpha"), id="every call"),
    pytest.param("sinc_stub", ("sinc",), id="the TI macro's kernel is the op"),
    pytest.param("sub_stub", (), id="function defined elsewhere"),
    pytest.param("mul_stub", (), id="not registered"),
))
def test_kernels_of_stub(stub, kernels):
    assert HostFile(HOST).kernels_of_stub(stub) == kernels


@pytest.mark.parametrize(("text", "offset"), (
    pytest.param(HOST, HOST.rindex("} // namespace at::native"), id="the last one"),
    pytest.param("namespace at::native {\n}\n", -1, id="no comment, not found"),
))
def test_namespace_end(text, offset):
    assert HostFile(text).namespace_end == offset
