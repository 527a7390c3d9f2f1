"""The migration path's torch side: an xbench operator as a torch custom op (forward and gradient against
torch, through torch.compile and torch.export), module replacement in a transformers T5, and the op-by-op ATen
override under an unchanged eager BERT; bad input named clearly."""
from __future__ import annotations

import copy

import pytest
import torch

import xbench as xb
import xbench.torch as xt
from xbench import Tensor
from xbench.errors import ArgumentError, DTypeError
from xbench.suite.workloads import build

N, D = xb.dims("N D")


@xb.tensor_op
def fused_rmsnorm(x: Tensor[N, D, xb.float32], w: Tensor[D, xb.float32], eps: float = 1e-6) -> Tensor[N, D]:
    return x * xb.rsqrt((x * x).mean(axis=-1, keepdims=True) + eps) * w


def torch_rmsnorm(x, w, eps=1e-6):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


@pytest.fixture(scope="module")
def rms():
    return xt.custom_op(fused_rmsnorm, name="xbtest::rmsnorm")


def test_a_custom_op_matches_torch_forward_and_backward(rms):
    x = torch.randn(6, 16, requires_grad=True)
    w = torch.randn(16, requires_grad=True)
    y = torch.ops.xbtest.rmsnorm(x, w, 1e-5)
    torch.testing.assert_close(y, torch_rmsnorm(x, w, 1e-5))
    (y * torch.arange(16.0)).sum().backward()
    got = x.grad.clone(), w.grad.clone()
    x.grad = w.grad = None
    (torch_rmsnorm(x, w, 1e-5) * torch.arange(16.0)).sum().backward()
    torch.testing.assert_close(got[0], x.grad)
    torch.testing.assert_close(got[1], w.grad)
    assert rms.calls >= 2                                          # the forward and the backward ran on xbench


def test_a_custom_op_passes_torchs_own_checks(rms):
    x, w = torch.randn(3, 8, requires_grad=True), torch.randn(8, requires_grad=True)
    result = torch.library.opcheck(torch.ops.xbtest.rmsnorm.default, (x, w))
    assert set(result.values()) == {"SUCCESS"}, result


def test_compile_and_export_trace_through_a_custom_op(rms):
    x, w = torch.randn(4, 8), torch.randn(8)

    def f(x, w):
        return torch.relu(rms(x, w)) * 2

    want = torch.relu(torch_rmsnorm(x, w)) * 2
    torch.testing.assert_close(torch.compile(f, backend="aot_eager", fullgraph=True)(x, w), want)
    e = xt.explain(f, x, w)                                       # the bridge inlines it into its partition
    assert not e.fallbacks and len(e.graphs[0].partitions) == 1
    torch.testing.assert_close(torch.compile(f, backend="xbench")(x, w), want)

    class M(torch.nn.Module):
        def forward(self, x, w):
            return rms(x, w)

    ep = torch.export.export(M(), (x, w))
    assert "xbtest.rmsnorm" in ep.graph_module.code
    torch.testing.assert_close(ep.module()(x, w), torch_rmsnorm(x, w))


def test_a_custom_op_on_bad_input(rms):
    with pytest.raises(DTypeError, match="float32"):
        rms(torch.randn(4, 8, dtype=torch.float64), torch.randn(8, dtype=torch.float64))
    with pytest.raises(xb.XbenchError, match="dim D"):
        rms(torch.randn(4, 8), torch.randn(9))
    x = torch.randn(8, 12)[:, ::3]                                 # non-contiguous: copied once, right values
    assert not x.is_contiguous()
    torch.testing.assert_close(rms(x, torch.ones(4)), torch_rmsnorm(x, torch.ones(4)))
    with pytest.raises(ArgumentError, match="has no namespace"):
        xt.custom_op(fused_rmsnorm, name="rmsnorm")
    with pytest.raises(ArgumentError, match="already registered for another operator"):
        xt.custom_op(xb.tensor_op(lambda x: x + 1), name="xbtest::rmsnorm")


def test_a_custom_op_on_an_explicit_backend_with_verification():
    op = xt.custom_op(fused_rmsnorm, name="xbtest::rmsnorm_ascend", backend="ascend", verify=True)
    x, w = torch.randn(5, 16), torch.randn(16)
    torch.testing.assert_close(op(x, w), torch_rmsnorm(x, w), rtol=1e-5, atol=1e-5)


def test_replace_swaps_t5_layer_norms_and_keeps_the_weights():
    import transformers
    from transformers.models.t5.modeling_t5 import T5LayerNorm
    cfg = transformers.T5Config(vocab_size=64, d_model=16, d_kv=8, d_ff=32, num_layers=1, num_decoder_layers=1,
                                num_heads=2, dropout_rate=0.0, decoder_start_token_id=0)
    torch.manual_seed(0)
    model = transformers.T5ForConditionalGeneration(cfg)
    eager = copy.deepcopy(model)
    keys = list(model.state_dict())
    xt.replace(model, {T5LayerNorm: fused_rmsnorm})
    assert sum(isinstance(m, xt.XbenchModule) for m in model.modules()) == 7     # encoder: 2 + final, decoder: 3 + final
    assert list(model.state_dict()) == keys                        # checkpoints load unchanged
    batch = {"input_ids": torch.randint(0, 64, (2, 6)), "labels": torch.randint(0, 64, (2, 5))}
    out, ref = model(**batch), eager(**batch)
    torch.testing.assert_close(out.logits, ref.logits, rtol=1e-5, atol=1e-5)
    out.loss.backward()
    ref.loss.backward()
    for (name, a), b in zip(model.named_parameters(), eager.parameters()):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-4, atol=1e-6, msg=name)


def test_replace_names_what_it_cannot_map():
    @xb.tensor_op
    def scaled(x: Tensor, gain: Tensor):
        return x * gain

    with pytest.raises(ArgumentError, match="(?s)has nothing for scaled's argument 'gain'.*weight"):
        xt.replace(torch.nn.Sequential(torch.nn.LayerNorm(4)), {torch.nn.LayerNorm: scaled})
    model = xt.replace(torch.nn.Sequential(torch.nn.LayerNorm(4)), {torch.nn.LayerNorm: (scaled, {"gain": "weight"})})
    x = torch.randn(3, 4)
    torch.testing.assert_close(model(x), x * model[0].weight)


def test_the_aten_override_runs_an_unchanged_eager_bert():
    model, batch = build("bert", "tiny")
    model.eval()
    taken = ["addmm", "add", "gelu", "native_layer_norm", "embedding", "tanh", "view", "nonexistent_op"]
    with torch.no_grad():
        want = model(**batch).logits
        xt.stats(reset=True)
        with xt.enabled(ops=taken) as st:
            got = model(**batch).logits
            got = model(**batch).logits
    torch.testing.assert_close(got, want)
    assert {"addmm", "add", "gelu", "native_layer_norm", "tanh"} <= set(st.calls)
    assert st.calls["addmm"] % 2 == 0 and st.calls["addmm"] >= 2 * 6      # every linear layer, both calls
    assert "view" not in st.registered
    assert "a view" in st.skipped["view"] and "no library operator" in st.skipped["nonexistent_op"]
    with torch.no_grad():                                                  # outside the block: torch again
        n = sum(st.calls.values())
        model(**batch)
        assert sum(st.calls.values()) == n


def test_the_override_leaves_dtypes_it_has_not_qualified_to_torch():
    xt.stats(reset=True)
    with xt.enabled(ops=["mul"], dtypes=("float32",)) as st:
        a = torch.arange(6.0, dtype=torch.float64) * 3                  # float64: not taken over
        b = torch.arange(6.0) * torch.arange(6.0)
    torch.testing.assert_close(a, torch.arange(6.0, dtype=torch.float64) * 3)
    torch.testing.assert_close(b, torch.arange(6.0) ** 2)
    assert st.calls["mul"] == 1


def ddp_grads_match(rendezvous: str) -> None:
    """One DDP step (gloo, world size 1) of a model with the xbench custom op: gradients equal torch's."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    rms = xt.custom_op(fused_rmsnorm, name="xbtest::rmsnorm")

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin, self.w = torch.nn.Linear(8, 8), torch.nn.Parameter(torch.ones(8))

        def forward(self, x):
            return rms(self.lin(x), self.w)

    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=0, world_size=1)
    try:
        torch.manual_seed(0)
        net = Net()
        plain = copy.deepcopy(net)
        ddp = DDP(net)
        x = torch.randn(4, 8)
        ddp(x).pow(2).sum().backward()
        torch_rmsnorm(plain.lin(x), plain.w).pow(2).sum().backward()
        for a, b in zip(net.parameters(), plain.parameters()):
            torch.testing.assert_close(a.grad, b.grad)
    finally:
        dist.destroy_process_group()


def test_a_custom_op_trains_under_ddp(tmp_path):
    """In a child process, which leaves without tearing Gloo down: freeing DDP's reducer can deadlock in
    ~ProcessGroupGloo (joining a Gloo thread that waits for the GIL to drop a finished allreduce's thread-local
    Python state), and a hang there would stop the whole test run."""
    import os
    import subprocess
    import sys
    code = ("import os, sys\n"
            "from tests.bridge import test_migration as t\n"
            f"t.ddp_grads_match({str(tmp_path / 'rendezvous')!r})\n"
            "print('ddp ok', flush=True)\n"
            "os._exit(0)\n")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=root)
    assert run.returncode == 0 and "ddp ok" in run.stdout, (run.stdout + run.stderr)[-3000:]
