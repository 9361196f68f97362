"""Child process that runs emulated kernels (stdlib only: started as a plain script).

Protocol on stdin/stdout: 8-byte little-endian length, then a pickled dict.
Request: {"lib": path, "index": i, "entry": (name, in type, out type) the parent expects there,
          "out_nbytes": n, "alpha": bytes | None, "numel": n, "sizes": [int] | None,
          "strides": [[int]] | None, "shared": size, "inputs_at": [[offset, n]],
          "out_at": [offset, n]}: the inputs and the output are regions of the memory shared
         with the parent (the file descriptor in argv[1]; porter.emulate.client writes the
         inputs there and reads the output back).
Or {"batch": [request, ...]}, each in its own regions, answered {"batch": [response, ...]}.
Or {"registrations": path}, answered {"registrations": [[name, kind, in type, out type, alpha,
         int, int, int], ...]} (porter.emulate.build.read_registrations).
Response: {"out_at": [offset, n]} or {"error": str}; with "undefined": [bits, bytes, fast]
          where the kernel reached an answer Metal leaves undefined (porter/metal.h's
          porter_reached): the output region holds IEEE's reading, the bytes the NaN reading
          (porter_reading 1; None where only bit 4 was reached, or where the second reading
          gave the same bytes); `fast` names the fast::
          function porter does not model that ran (bit 4), else None.
A kernel that faults kills this process; the parent reports the signal.
"""

import ctypes
import mmap
import pickle
import sys

_libs = {}
# no file descriptor (""): a worker that only reads registrations (porter.emulate.library_reader)
_shared = {"fd": int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1] else None, "map": None,
           "size": 0, "anchor": None, "base": 0}


def _runtime():
    """porter_guarded_run of the worker's runtime (argv[2]: porter/emulate/worker_runtime.c),
    loaded before any kernel library so that their program-scope `constant` arrays end at an
    inaccessible page, and each run starts on a filled stack; None where the parent built
    none."""
    if len(sys.argv) < 3 or not sys.argv[2]:
        return None
    try:
        runtime = ctypes.CDLL(sys.argv[2], mode=ctypes.RTLD_GLOBAL)
    except OSError:
        return None
    run = runtime.porter_guarded_run
    run.restype = ctypes.c_int
    run.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                    ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long, ctypes.c_int,
                    ctypes.c_void_p, ctypes.c_void_p]
    return run


_guarded_run = _runtime()
# porter_guarded_run's answer where the kernel read past a guarded array
_READ_PAST_GUARD = -2


def _shared_base(size):
    """The address of the shared memory, mapped again when the parent has grown it."""
    if size > _shared["size"]:
        _shared["anchor"] = None                 # the map cannot close while it is exported
        if _shared["map"] is not None:
            _shared["map"].close()
        _shared["map"] = mmap.mmap(_shared["fd"], size)
        _shared["anchor"] = ctypes.c_char.from_buffer(_shared["map"])
        _shared["base"], _shared["size"] = ctypes.addressof(_shared["anchor"]), size
    return _shared["base"]


def _lib(path):
    found = _libs.get(path)
    if found is None:
        lib = ctypes.CDLL(path)
        lib.porter_run.restype = ctypes.c_int
        lib.porter_run.argtypes = [
            ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
            ctypes.c_long, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
        lib.porter_kernel_info.restype = ctypes.c_int
        lib.porter_kernel_info.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
        try:
            flags = (ctypes.c_int.in_dll(lib, "porter_reading"),
                     ctypes.c_int.in_dll(lib, "porter_reached"),
                     ctypes.c_char_p.in_dll(lib, "porter_fast_ran"))
        except ValueError:          # a library with no undefined answer to read
            flags = None
        found = _libs[path] = (lib, flags)
    return found


_checked = set()        # (library, index, entry) found to agree: a loaded library never changes


def _entry_error(lib, req):
    """Where the library's entry `index` is not the registration the parent asked for (a
    cache record read beside a library it does not describe): what each says. The sample
    would otherwise run another kernel and be charged with its values."""
    wanted = req.get("entry")
    if wanted is None:
        return None
    key = (req["lib"], req["index"], tuple(wanted))
    if key in _checked:
        return None
    strs, ints = (ctypes.c_char_p * 5)(), (ctypes.c_int * 3)()
    lib.porter_kernel_info(req["index"], strs, ints)
    held = tuple((s or b"").decode() for s in strs[:4])
    held = (held[0], held[2], held[3])
    if held != tuple(wanted):
        return (f"porter's kernel cache is inconsistent: {req['lib']} holds {held} at entry "
                f"{req['index']}, not {tuple(wanted)} (run `porter cache clear`)")
    _checked.add(key)
    return None


def registrations(path):
    """The library's entries as porter.emulate.build.read_registrations reads them: (name,
    kind, in type, out type, alpha, *ints) each. A library built with AddressSanitizer loads
    only where libasan came first: here, not in the parent."""
    lib, _ = _lib(path)
    strs, ints = (ctypes.c_char_p * 5)(), (ctypes.c_int * 3)()
    entries = []
    for i in range(lib.porter_kernel_count()):
        lib.porter_kernel_info(i, strs, ints)
        entries.append([(s or b"").decode() for s in strs] + list(ints))
    return entries


def handle(req):
    if "registrations" in req:
        return {"registrations": registrations(req["registrations"])}
    lib, flags = _lib(req["lib"])
    stale = _entry_error(lib, req)
    if stale is not None:
        return {"error": stale}
    base = _shared_base(req["shared"])
    out_at, n = req["out_at"]
    out = base + out_at
    ctypes.memset(out, 0, max(1, n))             # zeroed, as a fresh buffer is
    addresses = [base + at for at, _ in req["inputs_at"]]
    ins = (ctypes.c_void_p * max(1, len(addresses)))(*addresses)
    alpha = ctypes.create_string_buffer(req["alpha"], max(8, len(req["alpha"]))) if req.get("alpha") else None
    sizes = req.get("sizes")
    strided = sizes is not None
    ndim = len(sizes) if strided else 0
    c_sizes = (ctypes.c_long * max(1, ndim))(*(sizes or []))
    stride_arrays = [(ctypes.c_long * max(1, ndim))(*s) for s in (req.get("strides") or [])]
    c_strides = (ctypes.c_void_p * max(1, len(stride_arrays)))(
        *[ctypes.addressof(a) for a in stride_arrays])

    kernel_run = ctypes.cast(lib.porter_run, ctypes.c_void_p) if _guarded_run is not None else None

    def run(reading, fill=_FILLED, layout=(req["numel"], strided, ndim, c_sizes, c_strides)):
        numel, is_strided, dims, dim_sizes, dim_strides = layout[:5]
        if flags is not None:
            flags[0].value, flags[1].value = reading, 0
        args = (req["index"], int(is_strided), out, ins,
                ctypes.addressof(alpha) if alpha is not None else None,
                numel, dims, dim_sizes, dim_strides)
        if _guarded_run is None:
            return lib.porter_run(*args)
        rc = _guarded_run(kernel_run, fill, *args)
        if rc == _READ_PAST_GUARD:
            # a read past a program-scope `constant` array: porter/metal.h's OUT_OF_BOUNDS
            if flags is not None:
                flags[1].value |= _OUT_OF_BOUNDS
            return 0
        return rc

    if run(0) != 0:
        return {"error": f"kernel {req['index']} is not built"}
    resp = {"out_at": req["out_at"]}
    reached = flags[1].value if flags is not None else 0
    if _guarded_run is not None and n:
        # the same sample on a stack of zeros: an answer that changes read a local before it
        # was written (worker_runtime.c). At most ZEROED_PREFIX of its elements, written over
        # the first run's answers: a changed answer changes the buffer, the others keep the
        # first run's. That is every element of all but upstream's large reference tensors
        # (943,593 elements: 17 M of a binary op's 21 M), of which a dense call runs every
        # k-th element, spread over the whole call (a sweep of values is covered across its
        # range), and a strided one its first elements (docs/testing.md)
        first = _kept(out, n)
        run(0, _ZEROED, _zeroed_layout(req, strided, n) or
            (min(req["numel"], ZEROED_PREFIX), strided, ndim, c_sizes, c_strides))
        # the elements it runs are some of the first run's, with the same inputs: a reading
        # the first run did not reach (a stop at a guard page included) came from the stack
        new = flags is not None and bool(flags[1].value & ~reached)
        if new or _memcmp(out, first, n) != 0:
            reached |= _UNINITIALIZED
            ctypes.memmove(out, first, n)
    if reached:
        fast = (flags[2].value or b"").decode() if reached & _UNMODELLED_FAST else None
        resp["undefined"] = [reached, None, fast]
    if reached & _NAN_READINGS:
        # the same sample with Metal's undefined answers read the other way; IEEE's stays in place
        first = ctypes.string_at(out, n)
        ctypes.memset(out, 0, max(1, n))
        run(1)
        other = ctypes.string_at(out, n)
        # the same bytes both ways ask the verdict nothing new (a half rounding that hides the
        # library's other float): no second comparison
        resp["undefined"][1] = other if other != first else None
        ctypes.memmove(out, first, n)
        flags[0].value = 0
    return resp


# The first run's answers, kept while the run on zeros writes over them: one buffer, grown as
# needed and reused call after call (a fresh copy of a large call's 4 MB of answers, and a
# second to compare, cost a tenth of its time in page faults)
_first = {"buffer": None, "size": 0}
_memcmp = ctypes.CDLL(None).memcmp
_memcmp.restype = ctypes.c_int
_memcmp.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]


def _kept(out, n):
    """The address of a copy of the `n` bytes at `out`, good until the next call."""
    if n > _first["size"]:
        _first["buffer"] = ctypes.create_string_buffer(n)
        _first["size"] = n
    ctypes.memmove(_first["buffer"], out, n)
    return ctypes.addressof(_first["buffer"])


def _zeroed_layout(req, strided: bool, out_nbytes: int):
    """A dense call of more than ZEROED_PREFIX elements as a one-dimensional strided one over
    every k-th element (the byte step of each operand times k), as run()'s layout (with the
    stride arrays it points to), or None: run its prefix."""
    numel = req["numel"]
    if strided or numel <= ZEROED_PREFIX or "in_item" not in req:
        return None
    step = -(-numel // ZEROED_PREFIX)
    count = -(-numel // step)
    sizes = (ctypes.c_long * 1)(count)
    steps = [out_nbytes // numel] + [req["in_item"]] * len(req["inputs_at"])
    arrays = [(ctypes.c_long * 1)(item * step) for item in steps]
    pointers = (ctypes.c_void_p * len(arrays))(*[ctypes.addressof(a) for a in arrays])
    return count, True, 1, sizes, pointers, arrays     # the arrays, alive while it runs


# porter/metal.h's porter_reached bits: the families read both ways (NaN operands, zeros of
# both signs, the library's unsettled answers); a fast:: function porter
# runs as the precise one (4) and a float converted out of an integer type's range (8): no
# second reading, the sample is not proven
_NAN_READINGS = 1 | 2 | 512 | 4096
_UNMODELLED_FAST = 4
_OUT_OF_BOUNDS = 64
# the worker's own: the answer changed with the stack's filling (porter.emulate.
# emulator_device's _READ_BEFORE_WRITTEN); the fillings, the first as g++'s pattern
_UNINITIALIZED = 32768
_FILLED, _ZEROED = 0xFE, 0x00
ZEROED_PREFIX = 1 << 16


def _handled(req):
    try:
        return handle(req)
    except Exception as err:  # reported to the parent, the worker lives on
        return {"error": f"{type(err).__name__}: {err}"}


def main():
    inp, outp = sys.stdin.buffer, sys.stdout.buffer
    while True:
        header = inp.read(8)
        if len(header) < 8:
            return
        req = pickle.loads(inp.read(int.from_bytes(header, "little")))
        if "batch" in req:
            # many calls in one round trip (porter.emulate.client.answer_ahead), each in its
            # own regions of the shared memory
            resp = {"batch": [_handled(one) for one in req["batch"]]}
        else:
            resp = _handled(req)
        data = pickle.dumps(resp, protocol=pickle.HIGHEST_PROTOCOL)
        outp.write(len(data).to_bytes(8, "little"))
        outp.write(data)
        outp.flush()


if __name__ == "__main__":
    main()
