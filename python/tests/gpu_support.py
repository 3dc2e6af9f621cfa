"""What the GPU suites share: skipping without torch or a GPU, and the error measure."""

import pytest


def require_torch_gpu():
    """torch, or a skip of the calling test module when torch or a GPU (for torch or flashjit) is missing."""
    torch = pytest.importorskip("torch", reason="torch is not installed (the GPU tests run through it)")
    import flashjit

    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU visible to torch (torch.cuda.is_available() is False)", allow_module_level=True)
    if not flashjit.gpu_available():
        pytest.skip(f"flashjit sees no GPU: {flashjit._core.gpu_unavailable_reason()}", allow_module_level=True)
    return torch


def rel_error(out, ref):
    """||out - ref|| / ||ref|| in float64 (absolute where ref is all zeros); out must be finite."""
    import torch

    assert torch.isfinite(out).all(), "non-finite output"
    ref = ref.double()
    denom = ref.norm().item()
    return (out.double() - ref).norm().item() / (denom if denom > 0 else 1.0)
