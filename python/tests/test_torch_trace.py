"""The torch layer without a GPU: the custom op's registration, its fake (meta) implementation
under FakeTensorMode and torch.compile(fullgraph=True) tracing, the forward-only autograd error,
and argument errors. Meta tensors stand in for CUDA tensors, so this runs wherever torch does."""

import json
import re

import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (the torch layer loads only with torch)")

import flashjit  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402

BF16 = torch.bfloat16


def meta(*shape, dtype=BF16, **kwargs):
    return torch.empty(*shape, device="meta", dtype=dtype, **kwargs)


def bhsd(b, s, h, d, **kwargs):
    """A [B, S, H, D] view of a BHSD tensor, as SDPA users hold them."""
    return meta(b, h, s, d, **kwargs).transpose(1, 2)


def test_the_op_is_registered_with_its_schema():
    op = torch.ops.flashjit.attention.default
    schema = str(op._schema)
    for arg in ("Tensor q", "Tensor k", "Tensor v", r"Tensor\? cu_seqlens_q", "(Sym)?Int max_seqlen_q",
                "bool causal", "(Sym)?Int window_left", "float softmax_scale", "bool return_lse",
                r"Tensor\? q_rope", r"str\? config"):
        assert re.search(arg, schema), arg
    assert schema.endswith("-> (Tensor, Tensor)")


def test_dense_output_follows_q_and_v():
    q, k, v = meta(2, 100, 8, 64), meta(2, 50, 2, 64), meta(2, 50, 2, 32)
    o = flashjit.attention(q, k, v, causal=True)
    assert o.shape == (2, 100, 8, 32) and o.dtype == BF16 and o.device.type == "meta"
    assert o.is_contiguous()


def test_bhsd_input_gives_bhsd_memory_order():
    q = bhsd(2, 100, 8, 64)
    o = flashjit.attention(q, bhsd(2, 50, 8, 64), bhsd(2, 50, 8, 64))
    assert o.shape == (2, 100, 8, 64)
    assert o.transpose(1, 2).is_contiguous()


def test_lse_shapes():
    o, lse = flashjit.attention(meta(3, 17, 4, 64), meta(3, 9, 4, 64), meta(3, 9, 4, 64), return_lse=True)
    assert lse.shape == (3, 4, 17) and lse.dtype == torch.float32
    total_q, total_k = 40, 30
    cu = meta(4, dtype=torch.int32)
    o, lse = flashjit.attention(meta(total_q, 8, 64), meta(total_k, 2, 64), meta(total_k, 2, 64),
                                cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=20, max_seqlen_k=15, return_lse=True)
    assert o.shape == (total_q, 8, 64) and lse.shape == (8, total_q)


def test_rope_columns_add_to_the_head_dim():
    o = flashjit.attention(meta(1, 16, 4, 128), meta(1, 16, 4, 128), meta(1, 16, 4, 128),
                           q_rope=meta(1, 16, 4, 64), k_rope=meta(1, 16, 4, 64))
    assert o.shape == (1, 16, 4, 128)


def test_out_is_written_and_returned():
    out = meta(2, 8, 4, 64)
    o = flashjit.attention(meta(2, 8, 4, 64), meta(2, 8, 4, 64), meta(2, 8, 4, 64), out=out)
    assert o is out


def test_fake_tensor_mode():
    with FakeTensorMode() as mode:
        q = mode.from_tensor(meta(2, 64, 8, 128))
        k = mode.from_tensor(meta(2, 64, 8, 128))
        o, lse = flashjit.attention(q, k, k, causal=True, return_lse=True)
    assert type(o).__name__ == "FakeTensor"
    assert o.shape == (2, 64, 8, 128) and lse.shape == (2, 8, 64)


class Recorder:
    """A torch.compile backend that keeps the graph and runs it as traced."""

    def __init__(self):
        self.graphs = []

    def __call__(self, gm, example_inputs):
        self.graphs.append(gm)
        return gm.forward

    def op_calls(self):
        return [n for g in self.graphs for n in g.graph.nodes
                if n.op == "call_function" and "flashjit" in str(n.target)]


@pytest.mark.parametrize("config", [None, {"tuning": {"BN": 64}}, "path", "text"])
def test_torch_compile_traces_one_graph(config, tmp_path):
    if config == "path":
        config = tmp_path / "pin.json"
        config.write_text(json.dumps({"tuning": {"BN": 64}}))
        config = str(config)
    elif config == "text":
        config = json.dumps({"tuning": {"BN": 64}})
    recorder = Recorder()

    def layer(q, k, v):
        return flashjit.attention(q, k, v, causal=True, window=(32, 0), softmax_scale=0.1, config=config) * 2

    compiled = torch.compile(layer, backend=recorder, fullgraph=True)
    o = compiled(meta(2, 64, 8, 64), meta(2, 64, 2, 64), meta(2, 64, 2, 64))
    assert o.shape == (2, 64, 8, 64)
    assert len(recorder.graphs) == 1
    (call,) = recorder.op_calls()
    assert call.args[7] is True  # causal
    assert call.args[8:10] == (32, 0)  # window


def test_torch_compile_varlen_and_lse():
    recorder = Recorder()

    def layer(q, k, v, cu_q, cu_k):
        o, lse = flashjit.attention(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=32,
                                    max_seqlen_k=32, return_lse=True)
        return o, lse

    compiled = torch.compile(layer, backend=recorder, fullgraph=True)
    cu = meta(3, dtype=torch.int32)
    o, lse = compiled(meta(48, 4, 64), meta(48, 4, 64), meta(48, 4, 64), cu, cu)
    assert o.shape == (48, 4, 64) and lse.shape == (4, 48)
    assert len(recorder.op_calls()) == 1


def test_backward_says_forward_only():
    q = meta(1, 16, 2, 64, requires_grad=True)
    k, v = meta(1, 16, 2, 64), meta(1, 16, 2, 64)
    o = flashjit.attention(q, k, v)
    assert o.requires_grad
    with pytest.raises(RuntimeError, match="forward only"):
        o.sum().backward()


def test_under_no_grad_nothing_requires_grad():
    q = meta(1, 16, 2, 64, requires_grad=True)
    with torch.no_grad():
        o = flashjit.attention(q, meta(1, 16, 2, 64), meta(1, 16, 2, 64))
    assert not o.requires_grad


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: (meta(2, 8, 6, 64), meta(2, 8, 4, 64), meta(2, 8, 4, 64)), "multiple of the KV heads"),
        (lambda: (meta(2, 8, 4, 64), meta(2, 8, 4, 32), meta(2, 8, 4, 64)), "head dims differ"),
        (lambda: (meta(2, 8, 4, 64), meta(3, 8, 4, 64), meta(3, 8, 4, 64)), "batch sizes differ"),
        (lambda: (meta(2, 8, 4, 64), meta(2, 8, 4, 64), meta(2, 9, 4, 64)), "does not match k"),
        (lambda: (meta(2, 8, 4, 64, dtype=torch.float32),) * 3, "bfloat16, float16, float8_e4m3fn or float8_e5m2"),
        (lambda: (meta(2, 8, 4, 64), meta(2, 8, 4, 64, dtype=torch.float16), meta(2, 8, 4, 64)), "share one dtype"),
        (lambda: (meta(8, 4, 64), meta(8, 4, 64), meta(8, 4, 64)), r"expected \[batch, seqlen, heads, dim\]"),
        (lambda: (meta(2, 8, 64, 4).transpose(2, 3), meta(2, 8, 4, 64), meta(2, 8, 4, 64)), "contiguous"),
    ],
)
def test_argument_errors_name_the_tensor_and_rule(make, match):
    with pytest.raises(flashjit.ArgumentError, match=match):
        flashjit.attention(*make())


def test_ragged_batches_need_both_offsets_and_the_longest_lengths():
    cu = meta(3, dtype=torch.int32)
    t = meta(10, 2, 64)
    with pytest.raises(flashjit.ArgumentError, match="go together"):
        flashjit.attention(t, t, t, cu_seqlens_q=cu, max_seqlen_q=5, max_seqlen_k=5)
    with pytest.raises(flashjit.ArgumentError, match="synchronise"):
        flashjit.attention(t, t, t, cu_seqlens_q=cu, cu_seqlens_k=cu)
    with pytest.raises(flashjit.ArgumentError, match="int32"):
        flashjit.attention(t, t, t, cu_seqlens_q=cu.long(), cu_seqlens_k=cu.long(), max_seqlen_q=5, max_seqlen_k=5)


def test_a_causal_window_has_no_right_side():
    t = meta(1, 8, 2, 64)
    with pytest.raises(flashjit.ArgumentError, match="right side is 0"):
        flashjit.attention(t, t, t, causal=True, window=(4, 4))


def test_cpu_tensors_are_refused_with_the_reason():
    t = torch.zeros(1, 8, 2, 64, dtype=BF16)
    with pytest.raises(flashjit.ArgumentError, match="CUDA tensors"):
        flashjit.attention(t, t, t)


def test_a_config_object_is_refused_by_torch_compile_with_the_way_out():
    pinned = flashjit.Config({"tuning": {"BN": 64}})

    def layer(q, k, v):
        return flashjit.attention(q, k, v, config=pinned)

    t = meta(1, 8, 2, 64)
    with pytest.raises(Exception, match=r"config\.to_json\(\)"):
        torch.compile(layer, backend=Recorder(), fullgraph=True)(t, t, t)


def test_torch_compile_of_cuda_tensors_traces_the_op():
    # Fake CUDA tensors (no GPU needed): the compiled call is one graph holding the op, with the
    # pinned config turned into its JSON text at trace time.
    recorder = Recorder()

    def layer(q, k, v):
        return flashjit.attention(q, k, v, causal=True, config={"tuning": {"BN": 64}}) * 2

    with FakeTensorMode(allow_non_fake_inputs=True):
        q = torch.empty(1, 8, 2, 64, device="cuda", dtype=BF16)
        o = torch.compile(layer, backend=recorder, fullgraph=True)(q, q, q)
    assert o.shape == (1, 8, 2, 64) and o.device.type == "cuda"
    (call,) = recorder.op_calls()
    assert json.loads(call.args[14]) == {"tuning": {"BN": 64}}


def test_sixteen_bit_q_beside_fp8_k_and_v():
    f8, f32 = torch.float8_e4m3fn, torch.float32
    q, k, v = meta(2, 7, 8, 128), meta(2, 9, 2, 128, dtype=f8), meta(2, 9, 2, 128, dtype=f8)
    o = flashjit.attention(q, k, v, causal=True, k_scale=meta(2, 2, 9, dtype=f32), v_scale=meta(2, 2, 9, dtype=f32))
    assert o.dtype == BF16 and tuple(o.shape) == (2, 7, 8, 128)
