"""porter: port PyTorch operators to native Metal (MPS) kernels and prove the port works."""

__version__ = "0.1.0"
# The name on PyPI (`porter` there is an unrelated 2013 project); the import package and the
# command stay `porter`.
DISTRIBUTION = "porter-mps"
