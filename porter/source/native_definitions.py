"""The shared CPU/CUDA functions of aten/src/ATen/native/*.cpp, and what they say: where a
structured op's `TORCH_META_FUNC(op)` and `TORCH_IMPL_FUNC(op_out)` are defined (located once for
every reader: the stub calls in porter.source.stub_route, the iterator below), which tensors the
meta function's iterator reads in which order (`iterator_inputs`), which stubs an impl function
calls (`impl_stubs`), and where a shared function calls a stub and what it does before
(`stub_call`, `enclosing_function`, `integers_copied`: for the emulator, which arguments the host
gets, and the checks, which dtypes reach the stub's kernel). The CPU kernels those stubs run are
porter.source.cpu_kernel's."""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

from porter.source import checkout as co
from porter.source.cpp_scan import code_mask, matching_close, split_top_level


# Structured kernels and the stubs they call, in native/*.cpp.
IMPL_MACRO_RE = re.compile(r"CREATE_\w*TORCH_IMPL_FUNC\(\s*(\w+)\s*,\s*(\w+)\s*\)")
IMPL_BODY_RE = re.compile(r"TORCH_IMPL_FUNC\(\s*(\w+)\s*\)[^{]*\{(.*?)\n\}", re.S)
STUB_CALL_RE = re.compile(r"\b(\w+_stub)\s*\(\s*device_type\(\)")


class NativeDefinition(NamedTuple):
    """`MACRO(name)(params) { body }` in a native/*.cpp: offsets into `mask` (its code mask)."""
    path: str
    text: str
    mask: str
    params_open: int       # the parameter list's "("
    params_close: int      # its ")", -1 when unbalanced
    body_open: int         # the body's "{", -1 when missing
    body_close: int        # its "}", -1 when unbalanced


def native_definition(checkout: co.Checkout, macro: str, name: str) -> NativeDefinition | None:
    """The first `TORCH_META_FUNC(name)` / `TORCH_IMPL_FUNC(name)` (as `macro` says) defined in
    aten/src/ATen/native/*.cpp, files in sorted order; None where no file defines it."""
    head = re.compile(rf"\b{macro}\(\s*{re.escape(name)}\s*\)")
    found = checkout.first_definition(co.NATIVE, "*.cpp", name, head)
    if found is None:
        return None
    rel, text, mask, m = found
    paren = mask.find("(", m.end())
    close = matching_close(mask, paren) if paren >= 0 else -1
    brace = mask.find("{", close) if close >= 0 else -1
    end = matching_close(mask, brace) if brace >= 0 else -1
    return NativeDefinition(rel, text, mask, paren, close, brace, end)


def impl_stubs(text: str) -> dict[str, list[str]]:
    """Structured kernel (`heaviside_out`) -> the stubs its TORCH_IMPL_FUNC calls, in a .cpp."""
    found: dict[str, list[str]] = {}
    for m in IMPL_MACRO_RE.finditer(text):
        found.setdefault(m.group(1), []).append(m.group(2))
    for m in IMPL_BODY_RE.finditer(text):
        found.setdefault(m.group(1), []).extend(STUB_CALL_RE.findall(m.group(2)))
    return found


BUILD_OP_RE = re.compile(r"\bbuild_(?:borrowing_)?(?:unary|binary)\w*_op\(\s*[^,()]*(?:\(\))?\s*,([^;]*)\)\s*;")


def iterator_inputs(checkout: co.Checkout, op: str) -> tuple[int, ...] | None:
    """Which of `TORCH_META_FUNC(op)`'s tensor parameters its iterator reads, in the iterator's
    order (the kernel's operands): threshold_backward(grad, self, ...) adds `self` then `grad`,
    (1, 0); threshold(self, ...) adds self twice, (0, 0); None when porter cannot read it."""
    found = native_definition(checkout, "TORCH_META_FUNC", op)
    if found is None or found.body_close < 0:
        return None
    mask = found.mask
    tensors = [p.split()[-1].lstrip("&*")
               for p in split_top_level(mask[found.params_open + 1:found.params_close])
               if "Tensor" in p and p.split()]
    body = mask[found.body_open:found.body_close]
    names = re.findall(r"\.add_(?:const_|owned_)?input\(\s*(\w+)\s*\)", body)
    if not names:
        built = BUILD_OP_RE.search(body)
        names = [a.strip() for a in split_top_level(built.group(1))] if built else []
    if not names or any(n not in tensors for n in names):
        return None
    return tuple(tensors.index(n) for n in names)


# ----------------------------------------------------------------- stub calls

def integers_copied(root: Path, stub: str) -> bool:
    """Whether the shared CPU/CUDA function copies integer (and bool) inputs to the output and
    returns before it calls `stub` (nan_to_num_out): for those dtypes no kernel ever runs."""
    found = stub_call(root, stub)
    if found is None:
        return False
    text, m = found
    head = text.rfind("\n}", 0, m.start())      # the end of the function before this one
    before = text[head + 1 if head >= 0 else 0:m.start()]
    return bool(re.search(r"isIntegralType\([^;]*includeBool\s*=\s*\*/\s*true\)", before)
                and "copy_(" in before and "return" in before)


def native_sources(root: Path) -> list[tuple[Path, str]]:
    """(path, text) of each native/*.cpp of the checkout, in name order."""
    return [(path, path.read_text(encoding="utf-8", errors="replace"))
            for path in sorted((Path(root) / co.NATIVE).glob("*.cpp"))]


def stub_call(root: Path, stub: str, op: str | None = None,
              sources: list[tuple[Path, str]] | None = None) -> tuple[str, re.Match] | None:
    """The first native/*.cpp text calling `stub(iter.device_type(), ...)`, with that call's match
    (up to the comma after the device type). With `op`, a call inside another op's structured
    function is passed over: sub_out runs add_stub with -alpha, which is sub's call, not add's.
    `sources`: native_sources(root), where the caller has read them already."""
    call = re.compile(rf"\b{re.escape(stub)}\s*\(\s*(?:\w+\.)?device_type\(\)\s*,")
    texts = [text for _, text in (sources if sources is not None else native_sources(root))]
    for text in texts:
        if stub not in text:
            continue
        for m in call.finditer(text):
            owner = _enclosing_out_function(text, m.start())
            if op is None or owner is None or owner == op:
                return text, m
    return _helper_call(texts, stub, op)


def _helper_call(texts: list[str], stub: str, op: str | None) -> tuple[str, re.Match] | None:
    """`unary_op_impl_float_out(result, self, logit_stub, Scalar(...))`: the stub handed to a
    helper of its file that builds the iterator and runs its stub parameter on it, passing on
    what follows (`stub(iter.device_type(), iter, args...)`). The match runs from the helper's
    name to the stub argument, so that, as for a direct call, the call's arguments after its
    first are what the stub receives after the iterator."""
    handed = re.compile(rf"\b(\w+)\s*\([^;{{}}]*?(?=\b{re.escape(stub)}\s*[,)])")
    for text in texts:
        if stub not in text:
            continue
        mask = code_mask(text)
        for m in handed.finditer(mask):
            owner = _enclosing_out_function(text, m.start())
            if (op is None or owner is None or owner == op) and runs_parameter(mask, m.group(1)):
                return text, m
    return None


def ops_calling(root: Path, stub: str) -> set[str]:
    """The ops whose structured `<op>_out` function calls `stub` (threshold_stub: threshold and
    threshold_backward), in the checkout's native/*.cpp."""
    call = re.compile(rf"\b{re.escape(stub)}\s*\(\s*(?:\w+\.)?device_type\(\)\s*,")
    found: set[str] = set()
    for path in sorted((Path(root) / co.NATIVE).glob("*.cpp")):
        text = path.read_text(encoding="utf-8", errors="replace")
        if stub in text:
            found |= {owner for m in call.finditer(text)
                      if (owner := _enclosing_out_function(text, m.start())) is not None}
    return found


FUNCTION_HEAD_RE = re.compile(r"^(?:TORCH_IMPL_FUNC\((?P<impl>\w+)\)\s*|[A-Za-z_][\w:&<> ]*\b(?P<name>\w+))"
                              r"\s*\((?P<params>[^{;]*?)\)\s*\{", re.M | re.S)


def enclosing_function(text: str, at: int) -> re.Match | None:
    """The head of the function definition that holds offset `at` (a `TORCH_IMPL_FUNC(name)` or
    a plain definition): its `impl` or `name` group names it, `params` are its parameters."""
    heads = list(FUNCTION_HEAD_RE.finditer(text[:at]))
    return heads[-1] if heads else None


# a test of the device in a shared function: code that runs for MPS alone (or for all but MPS)
DEVICE_TEST_RE = re.compile(r"\bkMPS\b|\bis_mps\s*\(|DeviceType::MPS|"
                            r"device_type\(\)\s*[!=]=|[!=]=\s*(?:\w+\.)?device_type\(\)")


def device_dependent(root: Path, stub: str, op: str | None = None) -> tuple[str, int, str] | None:
    """(file, line, statement) of the first test of the device in the shared function that runs
    `stub` (`TORCH_IMPL_FUNC(heaviside_out)`), or None: such code does on MPS what the CPU
    reference, run through the same function on the CPU, never does (a `result.neg_()` under
    `if (device_type() == kMPS)`), and what porter, which runs the kernel alone, never models."""
    sources = native_sources(root)
    found = stub_call(root, stub, op, sources)
    if found is None:
        return None
    text, m = found
    head = enclosing_function(text, m.start())
    if head is None:
        return None
    mask = code_mask(text)
    close = matching_close(mask, head.end() - 1)
    body = mask[head.end():close if close > 0 else len(mask)]
    test = DEVICE_TEST_RE.search(body)
    if test is None:
        return None
    at = head.end() + test.start()
    line_start = text.rfind("\n", 0, at) + 1
    line_end = text.find("\n", at)
    path = next(p for p, t in sources if t is text)      # the text stub_call matched in
    name = f"{co.NATIVE}/{path.name}"
    return name, text.count("\n", 0, at) + 1, text[line_start:line_end if line_end >= 0 else None].strip()


def _enclosing_out_function(text: str, at: int) -> str | None:
    """The op whose structured `<op>_out` function holds offset `at` (`TORCH_IMPL_FUNC(sub_out)`
    or `Tensor& sub_out(...)`), or None where the enclosing function is named otherwise."""
    head = enclosing_function(text, at)
    if head is None:
        return None
    name = head.group("impl") or head.group("name")
    return name[:-len("_out")] if name.endswith("_out") else None


# ----------------------------------------------------------------- helpers that run a stub

ITER_STUB_CALL_RE = re.compile(r"\b(\w+)\s*\(\s*\w+\.device_type\(\)")


def definitions(mask: str, function: str):
    """(parameter list, body) of each definition of `function` in a code mask."""
    head = re.compile(rf"^[\w:&<> ]*\b{re.escape(function)}\s*\(", re.M)
    for m in head.finditer(mask):
        close_paren = matching_close(mask, m.end() - 1)
        if close_paren < 0:
            continue
        after = mask[close_paren + 1:close_paren + 200].lstrip()
        if not after.startswith("{"):
            continue        # a declaration or a call, not the definition
        open_brace = mask.index("{", close_paren)
        end = matching_close(mask, open_brace)
        yield mask[m.end():close_paren], mask[open_brace:end if end > 0 else len(mask)]


def runs_parameter(mask: str, helper: str) -> bool:
    """Whether some definition of `helper` runs one of its parameters as a stub on a
    TensorIterator it builds (`Stub& stub` ... `stub(iter.device_type(), iter)`)."""
    for params, body in definitions(mask, helper):
        names = {p.split()[-1].lstrip("&*") for p in split_top_level(params) if p.split()}
        if "TensorIterator" in body and names & set(ITER_STUB_CALL_RE.findall(body)):
            return True
    return False
