"""torch's dtypes without importing torch (~2 s): what the checkout's test code reads of them
when porter runs its tolerance rules or computes its allowed_dtypes (a warm verdict imports no
torch). Anything else read of it raises NeedsTorch, and the caller retries with real torch or
says the code is not modelled."""

from __future__ import annotations


class NeedsTorch(AttributeError):
    pass


class Dtype:
    def __init__(self, name: str, floating: bool, complex_: bool, signed: bool, itemsize: int):
        self.name, self.is_floating_point, self.is_complex = name, floating, complex_
        self.is_signed, self.itemsize = signed, itemsize

    def __repr__(self) -> str:
        return f"torch.{self.name}"

    def __getattr__(self, attr):
        raise NeedsTorch(attr)


class StandInTorch:
    """Only the dtypes; anything else a rule reads makes the caller retry with real torch."""

    def __init__(self):
        table = {"bool": (False, False, False, 1), "uint8": (False, False, False, 1),
                 "int8": (False, False, True, 1), "int16": (False, False, True, 2),
                 "int32": (False, False, True, 4), "int64": (False, False, True, 8),
                 "uint16": (False, False, False, 2), "uint32": (False, False, False, 4),
                 "uint64": (False, False, False, 8),
                 "float16": (True, False, True, 2), "bfloat16": (True, False, True, 2),
                 "float32": (True, False, True, 4), "float64": (True, False, True, 8),
                 "complex32": (False, True, True, 4), "complex64": (False, True, True, 8),
                 "complex128": (False, True, True, 16)}
        for name, spec in table.items():
            setattr(self, name, Dtype(name, *spec))
        for alias, name in {"half": "float16", "float": "float32", "double": "float64",
                            "short": "int16", "int": "int32", "long": "int64",
                            "chalf": "complex32", "cfloat": "complex64",
                            "cdouble": "complex128"}.items():
            setattr(self, alias, getattr(self, name))

    def __getattr__(self, attr):
        raise NeedsTorch(attr)


STAND_IN = StandInTorch()
