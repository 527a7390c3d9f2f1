"""What a training graph saves for its backward (`xbench/torch/saving.py`): max pooling's int8 window offsets
instead of int64 indices, and no ReLU output that the partitioner can recompute from the convolution output it
saves anyway; the gradients stay eager's."""

import torch
from torch import nn

from xbench.torch import saving


def _stem():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(3, 2, 1),
                         nn.Conv2d(8, 4, 3))


def _saved(model, x) -> list:
    """The (shape, dtype) of each tensor one warm training step saves for its backward."""
    model(x).square().mean().backward()
    seen = []

    def pack(t):
        seen.append((tuple(t.shape), t.dtype))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = model(x).square().mean()
    loss.backward()
    return seen


def test_a_stem_saves_pooling_offsets_and_recomputes_its_relu_with_eagers_gradients():
    x = torch.randn(2, 3, 16, 16)
    eager, model = _stem(), _stem()
    compiled = torch.compile(model, backend="xbench")
    saved = _saved(compiled, x)
    assert ((2, 8, 8, 8), torch.int8) in saved                              # the pool's window offsets
    assert not [s for s in saved if s[1] == torch.int64]                    # no int64 indices
    # the convolution's output, saved for batch norm's backward; the ReLU's output (the same shape) is not
    assert saved.count(((2, 8, 16, 16), torch.float32)) == 1
    plain = _saved(eager, x)
    assert plain.count(((2, 8, 16, 16), torch.float32)) >= 2                # eager keeps both
    for p, q in zip(model.parameters(), eager.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5)


def test_max_pool_backward_is_given_an_empty_tensor_of_its_inputs_shape():
    aten = torch.ops.aten
    x = torch.randn(1, 2, 6, 6)

    def f(x):
        y = torch.relu(x)
        values, indices = aten.max_pool2d_with_indices(y, [2, 2], [2, 2])
        return aten.max_pool2d_with_indices_backward(values, y, [2, 2], [2, 2], [0, 0], [1, 1], False, indices)

    gm = torch.fx.experimental.proxy_tensor.make_fx(f)(x)
    assert saving.shape_only_inputs(gm) == 1
    (node,) = [n for n in gm.graph.nodes if n.target == aten.max_pool2d_with_indices_backward.default]
    assert node.args[1].target == aten.empty.memory_format
    torch.testing.assert_close(gm(x), f(x))
