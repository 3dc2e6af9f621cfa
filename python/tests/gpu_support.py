"""What the GPU suites share: skipping without torch or a GPU, the error measure, and fp8
quantisation with dequantisation scales."""

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


def quantised(x, dtype, per_token=False):
    """x [B, S, H, D] stored as fp8 with its dequantisation scale: amax over the largest finite
    value, one float32 for the tensor or float32 [B, H, S] per token."""
    import torch

    top = torch.finfo(dtype).max
    if per_token:
        amax = x.float().abs().amax(-1).clamp_min(1e-12)  # [B, S, H]
        scale = amax / top
        stored = (x.float() / scale[..., None]).to(dtype)
        return stored, scale.permute(0, 2, 1).contiguous()
    scale = (x.float().abs().amax().clamp_min(1e-12) / top).reshape(1)
    return (x.float() / scale).to(dtype), scale


def dequantised(stored, scale):
    """fp64 values of `quantised`'s output: stored x scale (per token: scale [B, H, S])."""
    return stored.double() * (scale.double().permute(0, 2, 1)[..., None] if scale.dim() == 3 else scale.double())
