"""Upsampling through the bridge: torch's tracing would decompose it into gathers through index tensors, whose
gradients are scatter-adds; the graphs keep the ATen op and its backward op whole, both on the library's
kernels, with eager's results."""
import pytest
import torch
import torch.nn.functional as F

import xbench.torch as xt

aten = torch.ops.aten


class Head(torch.nn.Module):
    def __init__(self, mode, dims):
        super().__init__()
        self.mode, conv = mode, (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)[dims - 1]
        self.conv = conv(3, 4, 1)

    def forward(self, x):
        align = None if self.mode.startswith("nearest") else False
        return F.interpolate(self.conv(x), scale_factor=2, mode=self.mode, align_corners=align).square().mean()


CASES = [("bilinear", 2, "upsample_bilinear2d"), ("bicubic", 2, "upsample_bicubic2d"),
         ("nearest", 2, "upsample_nearest2d"), ("linear", 1, "upsample_linear1d"),
         ("trilinear", 3, "upsample_trilinear3d"), ("nearest", 3, "upsample_nearest3d")]


@pytest.mark.parametrize("mode, dims, op", CASES, ids=[c[2] for c in CASES])
@pytest.mark.parametrize("bf16", [False, True], ids=["float32", "bfloat16"])
def test_upsampling_trains_as_one_op_each_way_with_eagers_gradients(mode, dims, op, bf16):
    torch.manual_seed(0)
    mine, theirs = Head(mode, dims), Head(mode, dims)
    theirs.load_state_dict(mine.state_dict())
    x = torch.randn((2, 3) + (5, 4, 3)[:dims])
    with xt.recording() as session, torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        got, want = torch.compile(mine, backend="xbench")(x), theirs(x)
    got.backward()
    want.backward()
    forward, backward = session.graphs
    assert forward.ops.get(f"aten.{op}.default") == 1 and backward.ops.get(f"aten.{op}_backward.default") == 1
    assert not [o for g in session.graphs for o in g.ops if "index" in o]          # no gathers, no scatters
    assert not forward.fallbacks and not backward.fallbacks
    tol = dict(rtol=2e-2, atol=2e-2) if bf16 else dict(rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(got, want, **tol)
    for p, q in zip(mine.parameters(), theirs.parameters()):
        torch.testing.assert_close(p.grad, q.grad, **tol)


def test_torchs_own_decompositions_are_back_after_the_bridge_traces():
    torch.compile(Head("bilinear", 2), backend="xbench")(torch.randn(1, 3, 4, 4)).backward()
    key = torch._C.DispatchKey
    assert key.CompositeImplicitAutograd in aten.upsample_bilinear2d.vec.py_kernels
    assert key.Autograd in aten.upsample_bilinear2d.default.py_kernels
    with torch._dispatch.python.enable_python_dispatcher():
        gm = torch.fx.experimental.proxy_tensor.make_fx(
            lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"))(torch.randn(1, 1, 2, 2))
    assert any("index" in str(n.target) for n in gm.graph.nodes)            # torch's gathers, as before
