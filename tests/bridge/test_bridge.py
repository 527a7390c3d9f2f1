"""The torch.compile backend on the things real graphs contain, each against torch eager: fallbacks and their
reasons, verification naming the op at fault, random ops and Python scalars without recompiling, dynamic shapes,
autocast, mutated buffers and inputs, aliased outputs, graph constants, graph breaks, and zero-copy tensors."""
from __future__ import annotations

import logging
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import xbench as xb
import xbench.torch as xt
from xbench.errors import ArgumentError, VerificationError
from xbench.torch import aten, interop
from xbench.torch.interop import from_numpy, shared_array, to_numpy


def close(a, b, rtol=2e-5, atol=2e-5):
    torch.testing.assert_close(a, b, rtol=rtol, atol=atol)


class MLP(torch.nn.Module):
    def __init__(self, p: float = 0.0):
        super().__init__()
        self.l1, self.l2 = torch.nn.Linear(12, 24), torch.nn.Linear(24, 5)
        self.drop = torch.nn.Dropout(p)

    def forward(self, x, scale: float = 1.0):
        h = F.gelu(self.l1(x))
        return self.l2(self.drop(h)) * scale


def test_the_backend_name_works_without_importing_xbench():
    code = ("import sys, torch\n"
            "f = torch.compile(lambda x: torch.softmax(x * 3, -1).sum(0), backend='xbench')\n"
            "y = f(torch.arange(6.0).reshape(2, 3))\n"
            "assert 'xbench.torch' in sys.modules\n"
            "print(repr(y.tolist()))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    want = torch.softmax(torch.arange(6.0).reshape(2, 3) * 3, -1).sum(0).tolist()
    np.testing.assert_allclose(eval(out.stdout.strip().splitlines()[-1]), want, rtol=1e-6)


def test_forward_and_backward_of_a_function():
    def f(x, w, b):
        return torch.softmax(F.gelu(x @ w + b), -1).sum(0)

    x, w, b = (torch.randn(s, requires_grad=True) for s in ((8, 16), (16, 32), (32,)))
    got = torch.compile(f, backend="xbench")(x, w, b)
    got.sum().backward()
    grads = [t.grad.clone() for t in (x, w, b)]
    for t in (x, w, b):
        t.grad = None
    want = f(x, w, b)
    want.sum().backward()
    close(got, want)
    for g, t in zip(grads, (x, w, b)):
        close(g, t.grad)


def test_bad_options_name_the_choices():
    with pytest.raises(ArgumentError, match="(?s)unknown option.*targte.*options are target"):
        xt.Options.parse({"targte": "ascend"})
    with pytest.raises(ArgumentError, match="(?s)unknown target 'npu'.*cpu, cuda, ascend"):
        xt.Options.parse({"target": "npu"})


def test_an_op_xbench_lacks_runs_on_torch_and_explain_says_why():
    def f(x):
        return torch.special.bessel_j0(x * 2.0).exp() + 1.0

    x = torch.randn(5, 7)
    close(torch.compile(f, backend="xbench")(x), f(x))
    e = xt.explain(f, x)
    (fallback,) = e.fallbacks
    assert fallback.op == "aten.special_bessel_j0.default"
    assert "no operator for aten.special_bessel_j0" in fallback.reason
    assert fallback.where.startswith(__file__)                       # the model's own line
    (graph,) = e.graphs
    assert len(graph.partitions) == 2                                # x * 2 before it, exp + 1 after it
    assert "on torch: aten.special_bessel_j0" in str(e)


def _broken_gelu(x, approximate="none"):
    return {}["no such key"]                                 # a rule with a Python bug in it


def _widened_gelu(x, approximate="none"):
    gelu = aten.library_call(xb.ops.get("gelu"))
    return gelu(x, approximate).astype(xb.float64)          # no exception: the probe's type check must catch it


@pytest.mark.parametrize("rule, reason", [
    (_broken_gelu, "xbench's rule for it failed (KeyError: 'no such key'); please report it"),
    (_widened_gelu, "xbench's rule for it returned the wrong type (lowers to float64[4, 24], ATen gives "
                    "float32[4, 24]); please report it")])
def test_a_rule_that_breaks_or_mistypes_leaves_the_op_on_torch_and_says_it_is_xbenchs_bug(monkeypatch, rule,
                                                                                          reason):
    monkeypatch.setitem(aten.RULES, "gelu", rule)
    torch._dynamo.reset()
    m = MLP().eval()
    x = torch.randn(4, 12)
    with torch.no_grad():
        with pytest.warns(UserWarning, match=r"aten\.gelu\.default .*" + re.escape(reason)):
            close(torch.compile(m, backend="xbench")(x), m(x))      # still right: gelu ran on torch
        with pytest.warns(UserWarning, match="please report"):
            e = xt.explain(m, x)
    (fallback,) = e.fallbacks
    assert fallback.op == "aten.gelu.default" and fallback.defect
    assert fallback.reason == reason
    torch._dynamo.reset()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("error")                               # kept on torch by the user: no warning
        close(torch.compile(m, backend="xbench", options={"fallback_ops": ["aten.gelu.default"]})(x), m(x))


def test_the_float64_reference_of_an_op_torch_refuses_in_float64_is_torch_in_its_own_dtypes(caplog):
    from xbench.torch.verify import OpCheck, _run_torch

    def f(x, w, scales):
        return torch.ops.aten._weight_int8pack_mm(x, w, scales)         # int8 weights: float32/16 activations only

    gm = torch.fx.symbolic_trace(f)
    x, w, s = torch.randn(4, 8), torch.randint(-8, 8, (6, 8), dtype=torch.int8), torch.rand(6)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    (node,) = [n for n in gm.graph.nodes if n.op == "call_function"]
    with pytest.raises(RuntimeError, match="float tensor"):
        node.target(x.double(), w, s.double())                           # what the upcast would ask of torch
    caplog.set_level(logging.DEBUG, logger="xbench")
    got, reference = _run_torch(node, dict(zip(placeholders, (x, w, s))), gm)
    assert got.dtype == torch.float32 and reference == "its own dtypes"
    torch.testing.assert_close(got, x @ (w.float() * s[:, None]).T, rtol=1e-5, atol=1e-5)
    assert any("no float64 run on torch" in r.message for r in caplog.records)
    # a check against that reference says what it was compared with; one against float64 says nothing extra
    check = OpCheck("n", "aten._weight_int8pack_mm", "([4, 8])", "float32", True, 0.0, 0.1, "", "", reference)
    assert "(reference: torch in its own dtypes)" in str(check)
    assert "reference" not in str(OpCheck("n", "aten.mm", "([4, 8])", "float32", True, 0.0, 0.1, "", ""))
    plain = torch.fx.symbolic_trace(lambda a: torch.ops.aten.mul(a, 2.0))
    (mul,) = [n for n in plain.graph.nodes if n.op == "call_function"]
    (p,) = [n for n in plain.graph.nodes if n.op == "placeholder"]
    y, ref = _run_torch(mul, {p: x}, plain)
    assert y.dtype == torch.float64 and ref == "float64"
    # a call torch refuses in its own dtypes too is not hidden behind the fallback: it raises
    bad = torch.fx.symbolic_trace(lambda a, b: torch.ops.aten.mm(a, b))
    (mm,) = [n for n in bad.graph.nodes if n.op == "call_function"]
    pa, pb = [n for n in bad.graph.nodes if n.op == "placeholder"]
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        _run_torch(mm, {pa: torch.randn(4, 8), pb: torch.randn(5, 3)}, bad)


def test_fallback_ops_keeps_an_op_on_torch():
    m = MLP().eval()
    x = torch.randn(4, 12)
    with torch.no_grad():
        e = xt.explain(m, x, options={"fallback_ops": ["aten.gelu"]})
        close(torch.compile(m, backend="xbench", options={"fallback_ops": ["gelu"]})(x), m(x))
    assert [f.op for f in e.fallbacks] == ["aten.gelu.default"]
    assert e.fallbacks[0].reason == "kept on torch (fallback_ops)"


def test_verify_names_the_op_that_is_wrong(monkeypatch):
    right = aten.rule_for(torch.ops.aten.gelu.default)[0]

    def off_in_one_element(x, approximate="none"):
        y = right(x, approximate=approximate)
        first = (xb.iota(y.shape, y.ndim - 1) == 3) & (xb.iota(y.shape, 0) == 0)
        return y + xb.where(first, 1e-3, 0.0) * xb.abs(y)

    m = MLP().eval()
    x = torch.randn(4, 12)
    with torch.no_grad():
        close(torch.compile(m, backend="xbench", options={"verify": True})(x), m(x))      # a right model passes
        monkeypatch.setitem(aten.RULES, "gelu", off_in_one_element)
        torch._dynamo.reset()
        with pytest.raises(VerificationError) as info:
            torch.compile(m, backend="xbench", options={"verify": True})(x)
    assert "aten.gelu.default (gelu)" in str(info.value)
    assert info.value.loc is not None and info.value.loc.filename == __file__


def test_dropout_draws_a_new_mask_each_step_without_recompiling():
    def f(x):
        return F.dropout(x, 0.4, training=True) * 3.0

    x = torch.ones(20000, requires_grad=True)
    with xt.recording() as session:
        compiled = torch.compile(f, backend="xbench")
        outs, grads = [], []
        for _ in range(3):
            y = compiled(x)
            y.sum().backward()
            outs.append(y.detach().clone())
            grads.append(x.grad.clone())
            x.grad = None
    assert all(p.specializations == 1 for g in session.graphs for p in g.partitions)
    for y, g in zip(outs, grads):
        kept = y != 0
        assert abs(1.0 - kept.float().mean().item() - 0.4) < 0.02          # 20000 draws: sigma 0.0035
        close(y[kept], torch.full_like(y[kept], 3.0 / 0.6))
        close(g, y / 1.0)                                                    # the same mask, scaled alike
    assert not torch.equal(outs[0], outs[1]) and not torch.equal(outs[1], outs[2])


def test_python_scalars_that_change_are_run_time_inputs():
    m = MLP().eval()
    x = torch.randn(4, 12)
    with torch.no_grad(), xt.recording() as session:
        compiled = torch.compile(m, backend="xbench")
        for s in (0.5, 0.7, 0.9, 1.3):
            close(compiled(x, s), m(x, s))
    specs = [p.specializations for g in session.graphs for p in g.partitions]
    assert specs and max(specs) == 1


def test_dynamic_shapes_specialise_per_shape_and_log_each(caplog):
    m = MLP().eval()
    caplog.set_level(logging.INFO, logger="xbench")
    with torch.no_grad(), xt.recording() as session:
        compiled = torch.compile(m, backend="xbench", dynamic=True)
        for n in (3, 6, 6, 9):
            x = torch.randn(n, 12)
            close(compiled(x), m(x))
    (graph,) = session.graphs
    assert graph.partitions[0].specializations == 3
    assert sum("recompiled for new input shapes" in r.message for r in caplog.records) == 2


def test_autocast_bfloat16_regions():
    m = MLP().eval()
    x = torch.randn(8, 12)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        got = torch.compile(m, backend="xbench")(x)
        want = m(x)
    assert got.dtype == want.dtype == torch.bfloat16
    close(got.float(), want.float(), rtol=2e-2, atol=2e-2)


def test_batch_norm_running_statistics_are_updated_like_eager():
    def net():
        torch.manual_seed(3)
        return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU())

    mine, theirs = net(), net()
    compiled = torch.compile(mine, backend="xbench")
    for _ in range(2):
        x = torch.randn(2, 3, 6, 6)
        close(compiled(x), theirs(x), rtol=1e-4, atol=1e-4)
    close(mine[1].running_mean, theirs[1].running_mean)
    close(mine[1].running_var, theirs[1].running_var)
    assert int(mine[1].num_batches_tracked) == 2


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_under_bfloat16_autocast_stays_in_one_graph(training):
    # a bfloat16 input with float32 weights and statistics: the output in bfloat16, the saved statistics in the
    # dtype the graph records (each batch norm once fell back to torch here, splitting the graph around it)
    def net():
        torch.manual_seed(3)
        return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                                   torch.nn.Conv2d(4, 2, 3)).train(training)

    mine, theirs = net(), net()
    x = torch.randn(2, 3, 8, 8)
    with xt.recording() as session, torch.autocast("cpu", dtype=torch.bfloat16), \
            torch.set_grad_enabled(training):
        got, want = torch.compile(mine, backend="xbench")(x), theirs(x)
        if training:
            got.float().square().sum().backward()
            want.float().square().sum().backward()
    assert got.dtype == want.dtype == torch.bfloat16
    close(got.float(), want.float(), rtol=3e-2, atol=3e-2)
    # one xbench partition per graph; torch keeps only the running statistics' in-place copies (training)
    assert all(len(g.partitions) == 1 and all("copy_" in f.op for f in g.fallbacks) for g in session.graphs)
    assert len(session.graphs) == (2 if training else 1)
    if training:
        close(mine[0].weight.grad, theirs[0].weight.grad, rtol=5e-2, atol=5e-2)
        close(mine[1].running_mean, theirs[1].running_mean, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("norm", ["layer", "group", "instance"])
def test_norms_of_a_bfloat16_input_under_autocast_stay_in_one_graph(norm):
    # CPU autocast leaves these norms alone: a bfloat16 activation meets float32 weights, ATen's output is
    # bfloat16 and the graph records bfloat16 statistics (SegFormer's layer norms each fell back to torch on this,
    # and every group and instance norm did)
    def net():
        torch.manual_seed(4)
        layer = {"layer": lambda: torch.nn.LayerNorm([4, 6, 6]), "group": lambda: torch.nn.GroupNorm(2, 4),
                 "instance": lambda: torch.nn.InstanceNorm2d(4, affine=True)}[norm]()
        return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), layer, torch.nn.Conv2d(4, 2, 3))

    mine, theirs = net(), net()
    x = torch.randn(2, 3, 8, 8)
    with xt.recording() as session, torch.autocast("cpu", dtype=torch.bfloat16):
        got, want = torch.compile(mine, backend="xbench")(x), theirs(x)
        got.float().square().sum().backward()
        want.float().square().sum().backward()
    assert got.dtype == want.dtype == torch.bfloat16
    close(got.float(), want.float(), rtol=3e-2, atol=3e-2)
    assert [(len(g.partitions), len(g.fallbacks)) for g in session.graphs] == [(1, 0), (1, 0)]
    for i in (0, 1):     # through the norm's backward (the conv's bias gradient is 0 under an instance norm)
        a, b = mine[i].weight.grad, theirs[i].weight.grad
        close(a, b, rtol=3e-2, atol=3e-2 * b.abs().max().item())


def test_mutated_inputs_aliased_outputs_and_graph_constants():
    def f(x, buf):
        buf.add_(1.0)                                    # an input mutated in place (AOT copies it back)
        y = x * torch.tensor([1.0, 2.0, 3.0])            # a tensor constant made inside the graph
        return y, y.view(3, 1), buf * 2                  # the second output aliases the first

    x, b1, b2 = torch.randn(3), torch.zeros(3), torch.zeros(3)
    got = torch.compile(f, backend="xbench")(x, b1)
    want = f(x, b2)
    for g, w in zip(got, want):
        close(g, w)
    close(b1, b2)


def test_graph_breaks_give_several_graphs():
    def f(x):
        y = torch.sin(x) * 2
        if float(y.sum()) > 0:                           # data-dependent Python control flow: a graph break
            return y + 1
        return y - 1

    x = torch.randn(10)
    close(torch.compile(f, backend="xbench")(x), f(x))
    e = xt.explain(f, x)
    assert e.dynamo_graphs == 2 and len(e.graph_breaks) == 1
    assert not e.fallbacks


def test_tensors_cross_without_copies():
    t = torch.randn(4, 5)
    a = to_numpy(t)
    assert np.shares_memory(a, t.numpy())
    back = from_numpy(a)
    assert back.data_ptr() == t.data_ptr()
    bf = torch.randn(3, 4).to(torch.bfloat16)
    nb = to_numpy(bf)
    assert str(nb.dtype) == "bfloat16" and nb.ctypes.data == bf.data_ptr()
    assert torch.equal(from_numpy(nb), bf)
    strided = torch.randn(6, 8)[:, ::2]
    assert np.array_equal(to_numpy(strided), strided.numpy()) and to_numpy(strided).flags.c_contiguous
    zero_d = np.array(2.5)
    zero_d.flags.writeable = False
    assert from_numpy(zero_d).shape == () and float(from_numpy(zero_d)) == 2.5


def test_a_tensor_passed_again_gets_its_array_again_until_its_memory_changes():
    w = torch.nn.Parameter(torch.randn(6, 6))
    a = shared_array(w)
    assert shared_array(w) is a and a.ctypes.data == w.data_ptr()
    with torch.no_grad():
        w.mul_(2)                                  # new values in the same memory: the same array sees them
    assert shared_array(w) is a and np.array_equal(a, w.detach().numpy())
    with torch.no_grad():
        w.t_()                                     # same memory and shape, transposed: copied, as to_numpy does
    b = shared_array(w)
    assert b is not a and np.array_equal(b, w.detach().numpy())
    w.data = torch.randn(6, 6)                     # new memory
    c = shared_array(w)
    assert c.ctypes.data == w.data_ptr() and np.array_equal(c, w.detach().numpy())
    cache = torch.zeros(4, 8)                      # a plain tensor (a KV cache)
    assert shared_array(cache).dtype == np.float32
    cache.data = cache.data.view(torch.int32)      # same memory, another dtype
    assert shared_array(cache).dtype == np.int32
    keys = id(w), id(cache)
    del w, cache                                   # nothing kept for tensors that are gone
    assert not set(keys) & set(interop._shared)
