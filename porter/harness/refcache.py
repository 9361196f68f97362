"""The reference cache: OpInfo samples and CPU references on disk, so that a repeat
`porter test OP --device emulate` neither imports the op database (~5 s) nor torch (~1.5 s).

What a cached verdict depends on, and where each part comes from:

- samples and CPU references: the torch that `op_db` comes from (version, build, and every
  source file of its `torch/testing` package: OpInfo definitions, sample functions,
  `make_tensor`, seeds) and porter's own code that generated and recorded them. All of it is
  in `environment()`'s key: change any byte and every entry misses. So is ATEN_CPU_CAPABILITY,
  which picks the CPU kernels (torch's AVX2/AVX512 builds fuse multiply-adds, DEFAULT does not).
- the OpInfo's own DecorateInfos (xfail, skip, tolerance overrides on MPS) and the dtypes it
  declares for MPS: recorded with the samples, under the same key.
- the checkout's `common_mps.py` expectations and `test_mps.py` tolerance lists: never cached;
  read again on every run (they change with every port), so they cannot go stale.
- the kernels: never cached here; built from the checkout's `.metal` on every run
  (porter.emulate.build keeps its own content-addressed cache of the compiled library).

Layout under `porter.runtime.cache_dir.cache_dir("references")` (or $PORTER_REFCACHE_DIR):
`ops-<key>.json` (what a name on the command line resolves to, and each OpInfo's record),
`ref-<key>.ref` (one OpInfo, dtype and kind of rows: samples, references, meta; the format is
save_refs'), `files.json` (content hashes of the torch sources by stat, so a warm run hashes
nothing). Entries are used least-recently first evicted once the directory
passes `PORTER_REFCACHE_MB` (default 2048); `porter cache clear` empties it.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from porter.runtime.cache_dir import cache_dir
from porter.runtime.whole_file import write_whole

if TYPE_CHECKING:
    from porter.dispatch.numpy_tensors import PArray

FORMAT = "porter-refcache-v6"   # v6: a record names its op's function (the scalar loop asked on demand)
# a binary op's full verdict records about 220 MB (heaviside, every dtype): at 512 MB a user
# porting three such ops recorded each again on every switch between them
DEFAULT_LIMIT_MB = 2048
# porter modules whose code decides what is recorded, or how a recorded sample is judged
_PORTER_SOURCES = ("harness/opinfo_run.py", "harness/cached_run.py", "harness/refcache.py",
                   "harness/verdicts.py", "harness/opdb.py", "harness/devices.py",
                   "dispatch/kernel_choice.py", "dispatch/numpy_tensors.py",
                   "emulate/numpy_run.py", "emulate/emulator_device.py",
                   "harness/mac_cpu_reference.py",
                   # porter's own rows: the edge values, the layouts, the float64 values
                   "harness/edges.py", "harness/shapes.py", "harness/sample_rules.py",
                   "harness/two_ways.py", "harness/lost_precision.py", "harness/mismatches.py",
                   # a backward op's samples are its forward op's, through the formula
                   "harness/backward.py")
# the rows of a verdict the cache holds, each apart: upstream's samples, porter's reference
# inputs (porter.harness.verdict_scope), porter's layouts
ROWS = ("samples", "reference", "shapes")


def directory() -> Path:
    """$PORTER_REFCACHE_DIR (e.g. a CI cache path of its own), else porter's cache dir."""
    own = os.environ.get("PORTER_REFCACHE_DIR")
    return Path(own) if own else cache_dir("references")


def limit_bytes() -> int:
    try:
        return int(float(os.environ.get("PORTER_REFCACHE_MB", DEFAULT_LIMIT_MB)) * 1024 * 1024)
    except ValueError:
        return DEFAULT_LIMIT_MB * 1024 * 1024


# ----------------------------------------------------------------- whether a run uses the cache

def wanted(opts, backend) -> bool:
    """Only emulate runs are cached: a real device's verdict is the device's, every time."""
    return (getattr(backend, "name", "") == "emulate" and hasattr(backend, "run_portable")
            and not getattr(opts, "no_cache", False) and not opts.upstream
            and not getattr(opts, "grad", False)     # backward ops: built from the checkout
            # the cache holds the samples on the newest macOS's lists
            and not getattr(opts, "macos", None))


def rows_of(opts) -> tuple[str, ...]:
    """The kinds of rows a run asks for (ROWS)."""
    return ("samples",) + (("reference",) if getattr(opts, "reference_inputs", False) else ()) \
        + (("shapes",) if getattr(opts, "shapes", False) else ())


def samples_recordable(checkout) -> bool:
    """The op_db run records the samples upstream's built-in keywords ask for: a checkout whose
    test asks with others (requires_grad=False, conjugated inputs) gets other samples on a
    Mac, so its runs neither read nor write the cache."""
    from porter.harness import sample_rules
    rules = sample_rules.load(checkout)
    built_in = sample_rules.BUILT_IN
    return (rules.requires_grad, rules.conjugated) == (built_in.requires_grad, built_in.conjugated)


def missing_refs(env: str, record: dict, rows=("samples",)) -> bool:
    """Whether a file of `record` (one OpInfo of save_ops) that `rows` ask for is gone:
    evict() removes files one at a time, least recently used first."""
    kinds = [kind for kind in rows if kind == "samples" or (
        record.get({"reference": "has_reference", "shapes": "has_shapes"}.get(kind, ""))
        and record.get("rows", {}).get(kind) == "recorded")]
    return any(not ref_path(env, record["full_name"], dtype, kind).is_file()
               for kind in kinds for dtype in record.get("supported", ()))


def recorded_ops(env: str, queries: list[str], rows=("samples",)) -> list[dict] | None:
    """The recorded OpInfos of every name on the command line, or None when one is not
    recorded, or its rows of a kind the run asks for are recorded as uncacheable: the run
    then goes the op_db way (and records)."""
    entries = []
    for query in queries:
        data = load_ops(env, query)
        if data is None or any(r.get("uncacheable") for r in data["ops"]):
            return None
        if any(r.get("rows", {}).get(kind) != "recorded" for r in data["ops"] for kind in rows
               if r.get({"reference": "has_reference", "shapes": "has_shapes"}.get(kind, ""))):
            return None
        entries.append(data)
    return entries


# ----------------------------------------------------------------- the environment key

def torch_dir(root: Path | None) -> Path | None:
    """The torch package `porter.harness.opdb.load` would import, found without importing it."""
    from porter.source.checkout import torch_is_importable
    if torch_is_importable(root):
        return (Path(root) / "torch").resolve()
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))).resolve()


def _sources(torch_pkg: Path) -> list[Path]:
    """Files whose bytes decide samples, references and OpInfo records."""
    files = [torch_pkg / "version.py"]
    for dirpath, dirnames, filenames in os.walk(torch_pkg / "testing"):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        files += [Path(dirpath) / f for f in sorted(filenames) if f.endswith(".py")]
    porter_pkg = Path(__file__).resolve().parent.parent
    files += [porter_pkg / rel for rel in _PORTER_SOURCES]
    return files


def _build_identity(torch_pkg: Path) -> list[str]:
    """The compiled torch (every kernel the references ran): size and mtime of its libraries."""
    out = []
    for pattern in ("_C*.so", "_C*.pyd", "lib/*.so*", "lib/*.dylib", "lib/*.dll"):
        for path in sorted(torch_pkg.glob(pattern)):
            st = path.stat()
            out.append(f"{path.name}:{st.st_size}:{st.st_mtime_ns}")
    return out


def _content_hashes(files: list[Path]) -> list[str]:
    """sha256 of each file, re-read only when its (size, mtime, inode) changed."""
    index_path = directory() / "files.json"
    try:
        index = json.loads(index_path.read_text())
    except (OSError, ValueError):
        index = {}
    out, changed = [], False
    for path in files:
        try:
            st = path.stat()
        except OSError:
            out.append(f"{path}:missing")
            continue
        stamp = f"{st.st_size}:{st.st_mtime_ns}:{st.st_ino}"
        known = index.get(str(path))
        if known is None or known[0] != stamp:
            known = [stamp, hashlib.sha256(path.read_bytes()).hexdigest()]
            index[str(path)] = known
            changed = True
        out.append(f"{path}:{known[1]}")
    if changed:
        write_whole(index_path, json.dumps(index).encode())
    return out


def environment(root: Path | None, device_type: str, sample_mode: str = "") -> str | None:
    """The key every entry of this run shares, or None when no torch is installed."""
    pkg = torch_dir(root)
    if pkg is None:
        return None
    h = hashlib.sha256(FORMAT.encode())
    for part in [str(pkg), device_type, sample_mode, os.environ.get("ATEN_CPU_CAPABILITY", ""),
                 *_build_identity(pkg),
                 *_content_hashes(_sources(pkg))]:
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:32]


def _name(kind: str, *parts: str) -> str:
    return f"{kind}-" + hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


# ----------------------------------------------------------------- the format of a sample

@dataclass(frozen=True)
class Sample:
    input: object
    args: list
    kwargs: dict
    promoted: dict
    out_dtype: str | None            # the meta output dtype (the host's kernel lookup)
    ref: "PArray | None"
    ref_cast: bool
    ref_error: str | None
    # porter's rows (porter.harness.cached_run): the sample's name (a layout's), whether it is
    # one of porter's edge values, and what the op_db run computed with torch beside the
    # reference (the float64 value, the scalar loop's answers, the exact-value rows)
    name: str = ""
    porter_edge: bool = False
    extra: dict | None = None


class Encoder:
    """Sample values as JSON, tensors as named numpy arrays beside it."""

    def __init__(self):
        self.arrays: dict = {}

    def value(self, x, name: str, keep_layout: bool = False):
        import torch
        from porter.dispatch.numpy_tensors import Unsupported, from_torch
        if isinstance(x, torch.Tensor) and keep_layout and not x.is_contiguous() \
                and not (x.is_conj() or x.is_neg()) and all(s >= 0 for s in x.stride()):
            # a layout sample: its storage from the first element on and its strides, which
            # the emulator sends as they are (porter.emulate.numpy_run)
            storage = x.new_empty(0).set_(x.untyped_storage(), x.storage_offset(),
                                          ((x.untyped_storage().nbytes() // x.element_size())
                                           - x.storage_offset(),), (1,))
            arr = from_torch(storage)
            self.arrays[name] = arr.data
            return {"t": "strided", "k": name, "dtype": arr.dtype, "shape": list(x.shape),
                    "strides": list(x.stride())}
        if isinstance(x, torch.Tensor):
            if not x.is_contiguous() or x.is_conj() or x.is_neg():
                raise Unsupported("a non-contiguous or lazily conjugated tensor")
            arr = from_torch(x)
            self.arrays[name] = arr.data
            return {"t": "array", "k": name, "dtype": arr.dtype}
        if isinstance(x, bool) or x is None or isinstance(x, (int, float, str)):
            return {"t": "py", "v": x}
        if isinstance(x, complex):
            return {"t": "complex", "v": [x.real, x.imag]}
        if isinstance(x, (list, tuple)) and all(isinstance(v, (bool, int, float, str)) for v in x):
            return {"t": "list" if isinstance(x, list) else "tuple", "v": list(x)}
        if isinstance(x, torch.dtype):
            return {"t": "dtype", "v": str(x).removeprefix("torch.")}
        raise Unsupported(f"a sample value of type {type(x).__name__}")


def _decode(value: dict, arrays: dict):
    from porter.dispatch.numpy_tensors import PArray, Unsupported
    kind = value["t"]
    if kind == "array":
        return PArray(value["dtype"], arrays[value["k"]])
    if kind == "strided":
        from porter.dispatch.numpy_tensors import strided
        return strided(value["dtype"], arrays[value["k"]], value["shape"], value["strides"])
    if kind == "complex":
        return complex(*value["v"])
    if kind == "tuple":
        return tuple(value["v"])
    if kind == "dtype":
        raise Unsupported("a dtype argument")
    return value["v"]


def decode_sample(raw: dict, arrays: dict) -> Sample:
    return Sample(_decode(raw["input"], arrays), [_decode(a, arrays) for a in raw["args"]],
                  {k: _decode(v, arrays) for k, v in raw["kwargs"].items()}, raw["promoted"],
                  raw["out_dtype"], _decode(raw["ref"], arrays) if raw["ref"] else None, raw["ref_cast"],
                  raw["ref_error"], raw.get("name", ""), raw.get("porter_edge", False),
                  {k: (_decode(v, arrays) if isinstance(v, dict) and "t" in v else v)
                   for k, v in raw["extra"].items()} if raw.get("extra") else None)


# ----------------------------------------------------------------- entries

def _touch(path: Path) -> None:
    try:
        os.utime(path)
    except OSError:
        pass


def save_ops(env: str, query: str, records: list[dict], meta: dict) -> None:
    data = json.dumps({"query": query, "ops": records, "meta": meta}).encode()
    write_whole(directory() / (_name("ops", env, query) + ".json"), data)


def load_ops(env: str, query: str) -> dict | None:
    path = directory() / (_name("ops", env, query) + ".json")
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    _touch(path)
    return data


def ref_path(env: str, full_name: str, dtype: str, rows: str = "samples") -> Path:
    return directory() / (_name("ref", env, full_name, dtype, rows) + REF_SUFFIX)


# A record: MAGIC, the header's length (8 bytes, little-endian), the header (JSON: the meta
# and, per array, its name, numpy dtype string, shape, offset and length), then the arrays'
# bytes, each at a multiple of ALIGN. A warm run reads ~25 records holding ~5,000 arrays and
# ~300 MB for one binary op's full verdict: `.npz` parsed every array's header with
# ast.literal_eval and checked every member's CRC (7 s of a 15 s run under load); this is one
# read and one JSON parse per record, the arrays numpy views of the bytes read. No pickle: a
# cache directory may be restored from a CI cache, and loading it runs no code.
REF_SUFFIX = ".ref"
MAGIC = b"porter-ref\n"
ALIGN = 64


def save_refs(env: str, full_name: str, dtype: str, arrays: dict, meta: dict,
              rows: str = "samples") -> None:
    import numpy as np
    table, chunks, offset = [], [], 0
    for name, value in arrays.items():
        arr = np.asarray(value, order="C")        # (ascontiguousarray makes a 0-d array 1-d)
        if arr.dtype.hasobject:
            raise ValueError(f"{name}: an object array cannot be recorded")
        table.append([name, arr.dtype.str, list(arr.shape), offset, arr.nbytes])
        chunks.append(arr)
        offset += -(-arr.nbytes // ALIGN) * ALIGN
    header = json.dumps({"meta": meta, "arrays": table}).encode()
    start = -(-(len(MAGIC) + 8 + len(header)) // ALIGN) * ALIGN
    out = bytearray(start + offset)
    out[:len(MAGIC) + 8 + len(header)] = MAGIC + len(header).to_bytes(8, "little") + header
    dest = np.frombuffer(out, np.uint8)
    for (_, _, _, at, nbytes), arr in zip(table, chunks):
        dest[start + at:start + at + nbytes] = arr.reshape(-1).view(np.uint8)
    del dest                                # the bytearray is exported while a view holds it
    write_whole(ref_path(env, full_name, dtype, rows), out)


def load_refs(env: str, full_name: str, dtype: str, rows: str = "samples") -> tuple[dict, dict] | None:
    """(meta, arrays) of one OpInfo, dtype and kind of rows, or None (also for a record that is
    cut short or not one: a miss, which the op_db run records again)."""
    found = _read_record(ref_path(env, full_name, dtype, rows))
    return None if found is None else found[:2]


def _read_record(path: Path) -> tuple[dict, dict, tuple, object] | None:
    """load_refs of the record at `path`, with the identity of the file it read (device,
    inode, size) and its mapping (which keeps that file, and so its inode, while it is held)."""
    import mmap

    import numpy as np
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            size = st.st_size
            # mapped copy-on-write: writable, as np.load's arrays were, and read from the page
            # cache as the arrays are used, not zeroed and copied first (a binary op's reference
            # rows are tens of MB, read on every verdict). The cache replaces a record by a
            # rename and evicts by unlinking, never truncating, so the mapping stays whole.
            buf = mmap.mmap(f.fileno(), size, access=mmap.ACCESS_COPY)
        if buf[:len(MAGIC)] != MAGIC:
            return None
        length = int.from_bytes(buf[len(MAGIC):len(MAGIC) + 8], "little")
        body = len(MAGIC) + 8
        header = json.loads(buf[body:body + length])
        start = -(-(body + length) // ALIGN) * ALIGN
        arrays = {}
        for name, dt, shape, at, nbytes in header["arrays"]:
            if start + at + nbytes > size:
                return None
            arrays[name] = np.frombuffer(buf, np.dtype(dt), nbytes // np.dtype(dt).itemsize,
                                         start + at).reshape(tuple(shape)) if nbytes else \
                np.empty(tuple(shape), np.dtype(dt))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    _touch(path)
    return header["meta"], arrays, (st.st_dev, st.st_ino, size), buf


# Rows held in the process while held_rows runs (porter test --watch): (path, device, inode,
# size) -> [(meta, decoded samples), the record's mapping, asked since the last round began]
_HELD: "dict[tuple, list] | None" = None


@contextlib.contextmanager
def held_rows():
    """While it runs, load_row keeps the rows it decoded for the next ask of the same record:
    each `--watch` round reads every row the last one read, and decoding them again was
    ~0.05 s of a round's main thread (docs/measurements.md). What is held ends with it."""
    global _HELD
    if _HELD is not None:            # already holding: the outer one ends it
        yield
        return
    _HELD = {}
    try:
        yield
    finally:
        _HELD = None


def next_round() -> None:
    """A `--watch` round begins: drop the held rows the last round did not ask for, and those
    whose record file is gone or was replaced since (`porter cache clear`, the size bound's
    eviction). Each held row keeps its record's mapping, and with it the file's disk space:
    what nobody reads again is let go within a round, not at the watch's end."""
    held = _HELD
    if held is None:
        return
    for key in list(held):
        entry = held[key]
        try:
            st = os.stat(key[0])
            current = (st.st_dev, st.st_ino, st.st_size) == key[1:]
        except OSError:
            current = False
        if not entry[2] or not current:
            del held[key]
        else:
            entry[2] = False


def load_row(env: str, full_name: str, dtype: str, rows: str = "samples") -> tuple[dict, list] | None:
    """(meta, samples) of one record: load_refs, each sample decoded (decode_sample); None for
    a miss. Under held_rows, the same record file asked again (its path, device, inode and
    size: the cache replaces a record by a rename, and the held entry keeps the record's
    mapping, so its inode cannot be reused while held) gives the same answer without reading
    it; its arrays are then read-only, so that no round can change what the next one reads."""
    path = ref_path(env, full_name, dtype, rows)
    held = _HELD
    if held is not None:
        try:
            st = os.stat(path)
            entry = held.get((str(path), st.st_dev, st.st_ino, st.st_size))
        except OSError:
            entry = None
        if entry is not None:
            entry[2] = True
            _touch(path)                 # used: the size bound evicts it last
            return entry[0]
    found = _read_record(path)
    if found is None:
        return None
    meta, arrays, ident, mapping = found
    if held is not None:
        for arr in arrays.values():
            arr.flags.writeable = False
    answer = meta, [decode_sample(raw, arrays) for raw in meta["samples"]]
    if held is not None:
        for key in [k for k in held if k[0] == str(path)]:
            del held[key]                # the record replaced: its old file let go now
        held[(str(path), *ident)] = [answer, mapping, True]
    return answer


# ----------------------------------------------------------------- size bound, clear

def entries() -> list[Path]:
    d = directory()
    if not d.is_dir():
        return []
    # .npz: records of porter-refcache-v4 and before, which no key names now: evicted first
    return [p for p in d.iterdir() if p.suffix in (REF_SUFFIX, ".npz", ".json")
            and p.name != "files.json"]


def evict(limit: int | None = None) -> int:
    """Remove least-recently-used entries until the cache fits `limit` bytes; returns how many."""
    limit = limit_bytes() if limit is None else limit
    stats = []
    for p in entries():
        try:
            st = p.stat()
        except OSError:
            continue
        stats.append((st.st_mtime_ns, st.st_size, p))
    total = sum(s for _, s, _ in stats)
    removed = 0
    for _, size, path in sorted(stats, key=lambda t: t[0]):
        if total <= limit:
            break
        path.unlink(missing_ok=True)
        total -= size
        removed += 1
    return removed


def clear() -> tuple[int, int]:
    """Remove every entry; (files, bytes) removed."""
    files = size = 0
    d = directory()
    if not d.is_dir():
        return 0, 0
    for p in d.iterdir():
        if p.is_file():
            size += p.stat().st_size
            p.unlink(missing_ok=True)
            files += 1
    return files, size
