"""The direct path of flashjit.attention up to the binding, without a GPU: the kernel load and
the binding's LaunchPlan are replaced by recorders (the GPU suite runs the real ones), and CPU
tensors that call themselves CUDA tensors stand in for device memory. What is checked is what
the torch layer hands the binding: the short launch for calls of q, k and v alone and the full
one otherwise, the output's shape, dtype and memory order, and one plan per call signature."""

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (the torch layer loads only with torch)")

from flashjit import _torch as layer  # noqa: E402

BF16 = torch.bfloat16


class CudaLike(torch.Tensor):
    """A CPU tensor that passes the layer's is_cuda check."""

    @property
    def is_cuda(self):
        return True


def cuda_like(*shape, dtype=BF16):
    return torch.zeros(*shape, dtype=dtype).as_subclass(CudaLike)


class Recorder:
    def __init__(self):
        self.loads, self.plans, self.launches = 0, [], []


@pytest.fixture
def recorder(monkeypatch):
    rec = Recorder()

    class Kernel:
        tile_counter = True

    class LaunchPlan:
        def __init__(self, kernel, q, k, v, o, q_rope, k_rope, lse, **sizes):
            rec.plans.append({"q": q, "k": k, "v": v, "o": o, **sizes})

        def launch_dense(self, *args):
            rec.launches.append(("dense", args))

        def launch(self, *args):
            rec.launches.append(("full", args))

    def load_kernel(config, seqlen_k, device):
        rec.loads += 1
        return Kernel()

    monkeypatch.setattr(layer._core, "load_kernel", load_kernel)
    monkeypatch.setattr(layer._core, "LaunchPlan", LaunchPlan)
    monkeypatch.setattr(layer, "_raw_stream", lambda device: 1234)
    monkeypatch.setattr(layer, "_capturing", lambda: False)
    monkeypatch.setattr(layer, "_plans", {})
    return rec


def attend(q, k, v, causal=True, return_lse=False):
    return layer._attend(q, k, v, causal, None, None, None, None, None, None, return_lse, None, None, None, None)


def test_q_k_v_alone_take_the_short_launch_with_their_pointers(recorder):
    q, k, v = cuda_like(2, 64, 8, 64), cuda_like(2, 80, 2, 64), cuda_like(2, 80, 2, 64)
    o = attend(q, k, v)
    kind, args = recorder.launches[-1]
    assert kind == "dense"
    assert args == (1234, q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), 0)
    assert o.shape == q.shape and o.stride() == q.stride() and o.dtype == BF16


def test_the_lse_takes_the_full_launch(recorder):
    q = cuda_like(2, 64, 8, 64)
    o, lse = attend(q, q, q, return_lse=True)
    kind, args = recorder.launches[-1]
    assert kind == "full"
    assert args[4] == o.data_ptr() and args[7] == lse.data_ptr() != 0
    assert lse.shape == (2, 8, 64) and lse.dtype == torch.float32


def test_the_output_keeps_q_memory_order_and_v_head_dim(recorder):
    bhsd = cuda_like(2, 8, 64, 64).transpose(1, 2)
    o = attend(bhsd, bhsd, bhsd)
    assert o.stride() == bhsd.stride()
    q, k, v = cuda_like(2, 64, 8, 128), cuda_like(2, 64, 8, 128), cuda_like(2, 64, 8, 64)
    o = attend(q, k, v)
    assert o.shape == (2, 64, 8, 64) and o.stride() == (64 * 8 * 64, 8 * 64, 64, 1)
    assert recorder.plans[-1]["o"] == (64 * 8 * 64, 8 * 64, 64)


def test_one_plan_per_call_signature(recorder):
    q = cuda_like(1, 32, 4, 64)
    attend(q, q, q)
    attend(cuda_like(1, 32, 4, 64), q, q)  # new tensors, same signature: the plan is reused
    assert recorder.loads == 1 and len(recorder.launches) == 2
    attend(cuda_like(1, 4, 32, 64).transpose(1, 2), q, q)  # other strides: another plan
    attend(q, q, q, causal=False)  # another flag: another plan
    assert recorder.loads == 3
    assert recorder.plans[1]["q"] == (32 * 4 * 64, 64, 32 * 64)


def test_a_capturing_stream_gets_a_counter_of_its_own(recorder, monkeypatch):
    monkeypatch.setattr(layer, "_capturing", lambda: True)
    q = cuda_like(1, 32, 4, 64)
    o = attend(q, q, q)
    counter = o._flashjit_tile_counter  # kept alive by the output, zeroed
    assert counter.dtype == torch.int32 and counter.numel() == 1 and counter.item() == 0
    assert recorder.launches[-1][1][-1] == counter.data_ptr() != 0
