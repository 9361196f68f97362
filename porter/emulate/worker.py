"""Child process that runs emulated kernels (stdlib only: started as a plain script).

Protocol on stdin/stdout: 8-byte little-endian length, then a pickled dict.
Request: {"lib": path, "index": i, "out_nbytes": n, "inputs": [bytes], "alpha": bytes | None,
          "numel": n, "sizes": [int] | None, "strides": [[int]] | None}
Response: {"out": bytes} or {"error": str}.
A kernel that faults kills this process; the parent reports the signal.
"""

import ctypes
import pickle
import sys

_libs = {}


def _lib(path):
    lib = _libs.get(path)
    if lib is None:
        lib = _libs[path] = ctypes.CDLL(path)
        lib.porter_run.restype = ctypes.c_int
        lib.porter_run.argtypes = [
            ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
            ctypes.c_long, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    return lib


def handle(req):
    lib = _lib(req["lib"])
    out = ctypes.create_string_buffer(max(1, req["out_nbytes"]))
    inputs = [ctypes.create_string_buffer(b, max(1, len(b))) for b in req["inputs"]]
    ins = (ctypes.c_void_p * max(1, len(inputs)))(*[ctypes.addressof(b) for b in inputs])
    alpha = ctypes.create_string_buffer(req["alpha"], max(8, len(req["alpha"]))) if req.get("alpha") else None
    sizes = req.get("sizes")
    strided = sizes is not None
    ndim = len(sizes) if strided else 0
    c_sizes = (ctypes.c_long * max(1, ndim))(*(sizes or []))
    stride_arrays = [(ctypes.c_long * max(1, ndim))(*s) for s in (req.get("strides") or [])]
    c_strides = (ctypes.c_void_p * max(1, len(stride_arrays)))(
        *[ctypes.addressof(a) for a in stride_arrays])
    rc = lib.porter_run(req["index"], int(strided), out, ins,
                        ctypes.addressof(alpha) if alpha is not None else None,
                        req["numel"], ndim, c_sizes, c_strides)
    if rc != 0:
        return {"error": f"kernel {req['index']} is not built"}
    return {"out": out.raw[:req["out_nbytes"]]}


def main():
    inp, outp = sys.stdin.buffer, sys.stdout.buffer
    while True:
        header = inp.read(8)
        if len(header) < 8:
            return
        req = pickle.loads(inp.read(int.from_bytes(header, "little")))
        try:
            resp = handle(req)
        except Exception as err:  # reported to the parent, the worker lives on
            resp = {"error": f"{type(err).__name__}: {err}"}
        data = pickle.dumps(resp, protocol=pickle.HIGHEST_PROTOCOL)
        outp.write(len(data).to_bytes(8, "little"))
        outp.write(data)
        outp.flush()


if __name__ == "__main__":
    main()
