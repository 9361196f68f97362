"""porter: port PyTorch operators to native Metal (MPS) kernels and prove the port works."""

__version__ = "0.1.0"
