"""Is what a tested OpInfo reaches the installed torch's?

A test run imports the installed torch's op database; a Mac's test_mps.py imports the
checkout's. Where the checkout's OpInfo files differ from the installed ones, the verdict holds
only if the op's OpInfo call and the module-level functions, classes and assignments it
reaches (its sample and reference input functions, the Info class, the helpers and constants
they use, followed through the OpInfo files, the opinfo package, make_tensor's module and the
dtype lists') are the installed torch's, as Python's AST reads them: comments and layout aside.
Review 21's E07: the checkout's heaviside OpInfo gained a `sample_inputs_func` whose input
only the checkout's samples held; a kernel wrong on it was green, as the run used the
installed samples.

The keywords other rules read (porter.harness.opinfo_agreement: the decorators, the MPS
dtypes) and those only another device or other tests read are left to them. An OpInfo file
holding under 90 % of the installed one's definitions (the miniature fixture's excerpt) is
not compared, nor is a definition the checkout has no file for (a partial checkout: the
installed one's stands in, as for headers).
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import json

from porter.runtime.cache_dir import cache_dir
from porter.runtime.whole_file import write_whole
from porter.source.checkout import TESTING, Checkout, opinfo_files

# read by opinfo_agreement's own rules (mps_decorators, _untested_dtypes)
_RULED = {"decorators", "skips", "dtypes", "dtypesIfMPS"}
# what only another device's test reads
_OTHER_DEVICE = {"dtypesIfCUDA", "dtypesIfROCM", "dtypesIfHpu", "dtypesIfXPU", "backward_dtypesIfCUDA",
                 "backward_dtypesIfROCM", "backward_dtypesIfHpu", "backward_dtypesIfXPU"}
# what only other tests read: test_output_match calls the op (`op=`, its name) on the samples
# and compares MPS with the CPU; it reads no alias, reference function, autograd, JIT, sparse
# or error-input knob (upstream's test/test_mps.py TestConsistency)
_OTHER_TESTS = {"aliases", "ref", "reference_numerics_filter", "error_inputs_func", "inplace_variant",
                "method_variant", "operator_variant", "inplace_operator_variant",
                "assert_autodiffed", "autodiff_nonfusible_nodes", "autodiff_fusible_nodes",
                "assert_jit_shape_analysis", "supports_scripting", "supports_tracing",
                "check_batched_grad", "check_batched_gradgrad", "check_batched_forward_grad",
                "check_inplace_batched_forward_grad", "supports_forward_ad", "supports_fwgrad_bwgrad",
                "gradcheck_nondet_tol", "gradcheck_fast_mode", "supports_gradgrad",
                "supports_sparse", "supports_sparse_csr", "supports_sparse_csc", "supports_sparse_bsr",
                "supports_sparse_bsc", "has_nondeterministic_output", "supports_expanded_weight",
                "supports_njt", "decomp_aten_name", "test_neg_view", "test_conjugated_samples"}
_LEFT = _RULED | _OTHER_DEVICE | _OTHER_TESTS
_FOLLOWED = 1000        # definitions compared at most (hypot's OpInfo reaches 26)
# besides the OpInfo files: where the sample functions' tensors and dtype lists come from
# (review 22's B14: make_tensor changed in the checkout was green)
_MORE = ("torch/testing/_creation.py", f"{TESTING}/common_dtype.py")


def _files(checkout: Checkout) -> list[str]:
    """The OpInfo files, the opinfo package's own modules (core.py holds the Info classes and
    the default sample functions) and _MORE, those the checkout has."""
    more = [rel for rel in _MORE if checkout.exists(rel)]
    return sorted(set(opinfo_files(checkout)) | set(checkout.glob(f"{TESTING}/opinfo", "*.py"))
                  | set(more))


def _bound(node: ast.stmt) -> list[str]:
    """The module-level names a statement binds: a def, a class, an assignment's names."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    targets = node.targets if isinstance(node, ast.Assign) else (
        [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else [])
    return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]


def _definitions(text: str) -> dict[str, list]:
    """Module-level name -> [digest of its statements' AST (positions aside), first line, the
    names they use], as Python reads the file (review 22's B09: a regex cut `class OpInfo` at a
    line of its docstring); every statement binding a name counts, in order. Kept in porter's
    cache by the file's bytes (the op database's file takes ~2 s to parse); {} where the file
    does not parse."""
    key = hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()
    if key in _PARSED:
        return _PARSED[key]
    store = cache_dir("opinfo_reach") / f"{key}.json"
    try:
        found = json.loads(store.read_text())
    except (OSError, ValueError):
        found = None
    if not isinstance(found, dict):
        try:
            tree = ast.parse(text)
        except SyntaxError:
            tree = ast.Module(body=[], type_ignores=[])
        parts: dict[str, list] = {}
        for node in tree.body:
            for name in _bound(node):
                entry = parts.setdefault(name, [[], node.lineno, set()])
                entry[0].append(ast.dump(node))
                entry[2].update(_names(node))
        found = {name: [hashlib.sha256("\n".join(dumps).encode()).hexdigest(), line, sorted(used)]
                 for name, (dumps, line, used) in parts.items()}
        with contextlib.suppress(OSError):
            write_whole(store, json.dumps(found))
    _PARSED[key] = found
    return found


_PARSED: dict[str, dict] = {}


def _names(node: ast.AST) -> list[str]:
    return [n.id for n in ast.walk(node) if isinstance(n, ast.Name)]


class _Index:
    """The module-level definitions of one tree's files: name -> (file, [digest, line, used])."""

    def __init__(self, checkout: Checkout):
        self.files = set(_files(checkout))
        self.defs: dict[str, tuple[str, list]] = {}
        for rel in sorted(self.files):
            for name, facts in _definitions(checkout.read(rel)).items():
                self.defs.setdefault(name, (rel, facts))


WHOLE = 0.9     # a file with this share of the installed one's module-level names is whole


def _partial(checkout: Checkout, installed: Checkout, rel: str) -> bool:
    """Whether the checkout's OpInfo file `rel` holds only part of the installed one's
    definitions (a miniature's 60 of some 560): an excerpt, whose OpInfos are shortened on
    purpose, left to the installed torch's as a folder the checkout holds in part is
    (porter.emulate.host_compile)."""
    if not installed.exists(rel):
        return False
    theirs = _definitions(installed.read(rel))
    mine = _definitions(checkout.read(rel))
    return bool(theirs) and len(set(mine) & set(theirs)) < WHOLE * len(theirs)


def first_difference(checkout: Checkout, installed: Checkout, mine, theirs) -> str | None:
    """Where the checkout's OpInfo `mine` (opinfo_source.OpInfoSource) or what it reaches first
    differs from the installed torch's `theirs`, in words; None where they agree."""
    if _partial(checkout, installed, mine.path):
        return None
    if mine.cls != theirs.cls or [ast.dump(a) for a in mine.node.args] != \
            [ast.dump(a) for a in theirs.node.args]:
        return f"its call is `{mine.cls}(...)`, the installed one's `{theirs.cls}(...)`"
    ours = {k.arg: k.value for k in mine.node.keywords if k.arg not in _LEFT}
    wheel = {k.arg: k.value for k in theirs.node.keywords if k.arg not in _LEFT}
    for key in sorted(set(ours) | set(wheel), key=str):
        a, b = ours.get(key), wheel.get(key)
        if a is None or b is None or ast.dump(a) != ast.dump(b):
            label = "a `**` argument" if key is None else f"`{key}=`"
            how = "only the checkout's has" if b is None else (
                "only the installed one's has" if a is None else "differs")
            return f"{label} {how}"
    mine_index, their_index = _Index(checkout), _Index(installed)
    queue = [mine.cls] + [n for value in ours.values() for n in _names(value)]
    seen: set[str] = set()
    followed = 0
    while queue:
        name = queue.pop(0)
        if name in seen:
            continue
        seen.add(name)
        here, there = mine_index.defs.get(name), their_index.defs.get(name)
        if here is None and there is None:
            continue                    # a builtin, an import, a parameter
        followed += 1
        if followed > _FOLLOWED:
            # never "the same" for what was not compared
            return f"it reaches more than the {_FOLLOWED} definitions porter compares"
        if here is None and there[0] not in mine_index.files:
            continue                    # a file the checkout does not have: the installed one's
        if here is None or there is None:
            where = here[0] if here else there[0]
            return (f"`{name}` ({where}) is defined only in the "
                    + ("checkout's" if here else "installed torch's") + " OpInfo files")
        if here[1][0] != there[1][0]:
            return f"`{name}` ({here[0]}:{here[1][1]}), which it reaches, differs"
        queue += here[1][2]
    return None
