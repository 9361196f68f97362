"""The OpInfo database the checkout's tests would use, and op-name resolution.

Which torch: the checkout's own `torch/testing/_internal` when the checkout is an importable
torch (a built source tree: `torch/__init__.py` plus the compiled `torch/_C` extension), else
the installed torch. Importing `op_db` costs ~5 s, so it is imported once per process.

One op, several spellings, all accepted on the command line:
  OpInfo name `special.log_ndtr`, aten name `special_log_ndtr`, full name with variant
  `round.decimals_0`, test fragment `round_decimals_0`, xfail key `rounddecimals_0`, and the
  aten name of an OpInfo in a Python namespace (`mish` for `nn.functional.mish`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from porter.errors import PorterError
from porter.source.checkout import torch_is_importable

_CACHE: dict = {}


@dataclass(frozen=True)
class OpDb:
    ops: list            # OpInfo objects, `_refs` excluded
    source: str          # "checkout" or "installed"
    torch_version: str
    torch_path: str


def _stand_in_for_expecttest() -> None:
    """torch's `common_utils` imports expecttest for `assertExpectedInline`, which porter never
    calls; torch does not depend on it. Where it is missing (a CUDA machine with torch and no
    network), a stand-in lets the OpInfo database import; calling it says what is missing."""
    import importlib.util
    if sys.modules.get("expecttest") is not None or importlib.util.find_spec("expecttest") is not None:
        return
    import types
    import unittest

    class TestCase(unittest.TestCase):
        def assertExpectedInline(self, *args, **kwargs):
            raise RuntimeError("expecttest is not installed (porter's stand-in)")

    module = types.ModuleType("expecttest")
    module.ACCEPT = False
    module.TestCase = TestCase
    sys.modules["expecttest"] = module


def frame_walking_extract_test_fn():
    """torch's `common_utils.extract_test_fn` (the running unittest test function, or None), the
    same search over the same frames, without `inspect.stack()`: that reads every frame's source
    lines, and torch calls it twice per `sample_inputs`/`reference_inputs` (~13 ms a call 40 frames
    deep: heaviside's samples over its 9 dtypes take 2.5 s against 3.0 s, bench/bench_samples.py)."""
    import unittest

    try:
        frame = sys._getframe(1)
        while frame is not None:
            self_val = frame.f_locals.get("self", frame)     # the frame: not a TestCase
            if isinstance(self_val, unittest.TestCase):
                test_id = self_val.id()
                *_, cls_name, test_name = test_id.rsplit(".", 2)
                if cls_name == type(self_val).__name__ and test_name.startswith("test"):
                    return getattr(self_val, test_name).__func__
            frame = frame.f_back
    except Exception:
        pass
    return None


def _walk_frames_for_the_test_fn() -> None:
    """Swap in `frame_walking_extract_test_fn` where torch's is the inspect.stack() one (the
    opinfo module imported it by name, so both names)."""
    from torch.testing._internal import common_utils
    from torch.testing._internal.opinfo import core

    original = getattr(common_utils, "extract_test_fn", None)
    if original is None or "stack" not in original.__code__.co_names:
        return
    common_utils.extract_test_fn = frame_walking_extract_test_fn
    if getattr(core, "extract_test_fn", None) is original:
        core.extract_test_fn = frame_walking_extract_test_fn


def load(root: Path | None = None) -> OpDb:
    """Import torch and its op_db once; prefer the checkout's torch when it is importable."""
    if "db" in _CACHE:
        return _CACHE["db"]
    if "torch" not in sys.modules and torch_is_importable(root):
        sys.path.insert(0, str(Path(root).resolve()))
    _stand_in_for_expecttest()
    try:
        import torch
        from torch.testing._internal.common_methods_invocations import op_db
    except ImportError as err:
        missing = getattr(err, "name", None) or ""
        hint = ("install torch (pip install torch) or build the checkout" if missing.startswith("torch")
                else f"torch's test utilities need {missing or 'a missing module'}: pip install {missing or '...'}")
        raise PorterError(f"cannot import torch's OpInfo database: {err}", hint=hint) from None
    _walk_frames_for_the_test_fn()
    torch_dir = Path(torch.__file__).resolve().parent
    source = "installed"
    if root is not None and torch_dir == (Path(root) / "torch").resolve():
        source = "checkout"
    ops = [op for op in op_db if not op.name.startswith("_refs")]
    db = OpDb(ops, source, torch.__version__, str(torch_dir))
    _CACHE["db"] = db
    return db


def xfail_key(op) -> str:
    return op.name + op.variant_test_name


def spellings(op) -> set[str]:
    names = {op.name, op.full_name, op.formatted_name, xfail_key(op)}
    aten = getattr(op, "aten_name", None)
    if aten:
        names.add(aten)
        if op.variant_test_name:
            names.add(f"{aten}.{op.variant_test_name}")
    return names


def aten_base(op) -> str:
    """The aten op an OpInfo tests, as its stub and yaml row name it: the OpInfo name without
    its Python namespace (nn.functional.mish -> mish, special.erfcx -> erfcx)."""
    return op.name.rsplit(".", 1)[-1]


def find(db: OpDb, name: str) -> list:
    """Every OpInfo (all variants) that `name` names; a full name selects one variant."""
    exact = [op for op in db.ops if name in (op.full_name, op.formatted_name, xfail_key(op))
             and op.variant_test_name]
    if exact:
        return exact
    by_name = [op for op in db.ops if name == op.name or name == getattr(op, "aten_name", None)
               or name == op.name.replace(".", "_")]
    if by_name:
        return by_name
    rest = [op for op in db.ops if name in spellings(op)]
    if rest:
        return rest
    # the aten name of an op whose OpInfo lives in a namespace: mish -> nn.functional.mish
    if "." not in name:
        namespaced = [op for op in db.ops if aten_base(op) == name]
        if namespaced:
            return namespaced
    import difflib
    close = difflib.get_close_matches(name, sorted({op.name for op in db.ops}), n=3)
    hint = f"did you mean {', '.join(close)}?" if close else "see torch's op_db for OpInfo names"
    raise PorterError(f"no OpInfo named {name!r} in the op database ({db.source} torch "
                      f"{db.torch_version})", hint=hint)


def by_key(db: OpDb) -> dict[str, list]:
    out: dict[str, list] = {}
    for op in db.ops:
        out.setdefault(xfail_key(op), []).append(op)
    return out
