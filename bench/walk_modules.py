"""Which porter modules one `porter test OP --device emulate` walks through, and which of its
calls climb from a lower layer to a higher one. Prints figures; asserts nothing.

    PYTHONPATH=CHECKOUT python bench/walk_modules.py [--op add] [--device emulate] [--root DIR]

CHECKOUT: the porter tree to measure (default: this one).
The command runs in-process (PORTER_NO_FORK=1) under `sys.setprofile`, in a child Python per
run, twice against one fresh cache directory: cold (op_db loaded, the reference cache
recorded) and warm (samples and references read from the cache). Every call event of a porter
function is an edge from the nearest porter frame below it (callbacks through torch count as
the porter function that handed them over) to the called function's module. A module is
"walked" when one of its functions is called (module and class bodies and dataclasses' generated
methods being made, all run by an import, do not count).
A call "climbs" when the caller's package sits in a lower layer than the callee's (LAYERS);
calls inside one package never climb. The kernel worker process is not traced.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# package -> layer; a lower layer never imports (nor calls into) a higher one
LAYERS = {"errors": 0, "runtime": 0, "source": 1, "apply": 1, "dispatch": 1, "port": 2,
          "emulate": 3, "harness": 4, "survey": 5, "checks": 5, "commands": 6, "cli": 6,
          "__main__": 6, "__init__": 6, "testing": 7}

CHILD = r"""
import inspect, json, os, sys, threading
edges, walked = set(), set()

def porter_module(frame):
    name = frame.f_globals.get("__name__", "")
    return name if name == "porter" or name.startswith("porter.") else None

def profile(frame, event, arg):
    if event != "call":
        return
    callee = porter_module(frame)
    if callee is None or not frame.f_code.co_flags & inspect.CO_NEWLOCALS or \
            frame.f_code.co_name == "__create_fn__":
        return      # a module or class body, or a dataclass being made: run by an import
    walked.add(callee)
    back = frame.f_back
    while back is not None and porter_module(back) is None:
        back = back.f_back
    if back is not None and porter_module(back) != callee:
        edges.add((porter_module(back), callee))

sys.setprofile(profile)
threading.setprofile(profile)
from porter import cli
try:
    code = cli.main(json.loads(sys.argv[1]))
finally:
    sys.setprofile(None)
    imported = sorted(m for m in sys.modules if m.startswith("porter"))
    with open(sys.argv[2], "w") as f:
        json.dump({"walked": sorted(walked), "edges": sorted(edges), "imported": imported}, f)
"""


def package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def walk(argv: list[str], env: dict) -> dict:
    with tempfile.NamedTemporaryFile("r", suffix=".json") as out:
        subprocess.run([sys.executable, "-c", CHILD, json.dumps(argv), out.name], env=env,
                       cwd=tempfile.gettempdir(), stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False)
        return json.load(open(out.name))


def report(label: str, data: dict) -> None:
    climbs = sorted((a, b) for a, b in data["edges"]
                    if LAYERS.get(package(a), 9) < LAYERS.get(package(b), 9))
    print(f"{label}: {len(data['walked'])} modules walked, {len(data['imported'])} imported, "
          f"{len(climbs)} climbing calls")
    for module in data["walked"]:
        print(f"  {module}")
    for a, b in climbs:
        print(f"  climb: {a} -> {b}")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--op", default="add")
    parser.add_argument("--device", default="emulate")
    parser.add_argument("--root", help="a checkout (default: a fresh real-size tree)")
    args = parser.parse_args()
    sys.path.insert(0, os.environ.get("PYTHONPATH", "").split(os.pathsep)[0] or str(REPO))
    scratch = Path(tempfile.mkdtemp(prefix="porter-walk-"))
    root = Path(args.root) if args.root else None
    if root is None:
        from porter.testing.trees import build_real_tree
        root = build_real_tree(scratch / "pytorch")
    env = {**os.environ, "PORTER_NO_FORK": "1", "PORTER_CACHE_DIR": str(scratch / "cache"),
           "PYTHONPATH": os.environ.get("PYTHONPATH") or str(REPO)}
    argv = ["test", args.op, "--device", args.device, "--root", str(root)]
    print(f"porter {' '.join(argv)}")
    report("cold (records the reference cache)", walk(argv, env))
    report("warm (from the reference cache)", walk(argv, env))
    import shutil
    shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
