"""A SampleInput's tensors moved to a device and back (torch, imported lazily)."""

from __future__ import annotations


def to_device(sample, device: str):
    """A copy of `sample` with every tensor on `device` (CPU copies are real copies), each
    a leaf that requires grad where the original did."""
    import torch

    def move(x):
        if isinstance(x, torch.Tensor):
            y = x.detach().to(device)
            y = y.clone() if device != "meta" and y.data_ptr() == x.data_ptr() and x.numel() else y
            # a sample that requires grad keeps requiring it (upstream's
            # transform_opinfo_sample_to_cpu): some ops refuse such inputs (resize_)
            return y.requires_grad_(x.requires_grad) if x.requires_grad else y
        return x
    return sample.transform(move)


def to_cpu(value):
    import torch
    from torch.utils import _pytree as pytree
    return pytree.tree_map(lambda x: x.cpu() if isinstance(x, torch.Tensor) else x, value)
