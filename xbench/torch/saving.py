"""What a training graph saves for its backward: decompositions and a joint-graph rewrite that let AOTAutograd's
min-cut partitioner keep fewer and smaller activations.

- **Max pooling keeps int8 window offsets** (`max_pool2d_offsets`): `max_pool2d_with_indices` becomes the values
  and each maximum's offset in its window, with the int64 indices computed from the offsets. The partitioner
  recomputes that last step in the backward, so the graph saves an eighth of the indices' bytes.
- **Batch norm in training is pointwise around its statistics** (torch's decomposition): the partitioner can then
  recompute a normalised activation from the convolution output it saves anyway.
- **Detaches are aliases** (torch's core decomposition): the partitioner recomputes through an alias, not through
  a detach, and autograd detaches every output a backward formula saves (a ReLU's).
- **Max pooling's backward reads only its input's shape** (`shape_only_inputs`): an empty tensor of that shape
  stands in, so a ReLU before the pool (ResNet's stem) is recomputed in the backward instead of saved beside the
  convolution output.

Inductor's graphs keep the same things, by its own decompositions.
"""
from __future__ import annotations

import importlib

import torch
import torch.fx as fx

aten = torch.ops.aten


def _two(v) -> list[int]:
    return [int(v)] * 2 if isinstance(v, int) or len(v) == 1 else [int(i) for i in v]


def max_pool2d_offsets(x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """max_pool2d_with_indices as (values, indices computed from int8 window offsets)."""
    k = _two(kernel_size)
    if k[0] * k[1] > torch.iinfo(torch.int8).max:
        return NotImplemented
    s, p, d = (_two(stride) if stride else k), _two(padding), _two(dilation)
    prims = torch.ops.prims
    values, offsets = prims._low_memory_max_pool_with_offsets(x, k, s, p, d, ceil_mode)
    return values, prims._low_memory_max_pool_offsets_to_indices(offsets, k, list(x.shape[-2:]), s, p, d)


def decompositions() -> dict:
    from torch._decomp import decomposition_table
    importlib.import_module("torch._inductor.inductor_prims")     # registers torch.ops.prims._low_memory_*
    ops = (aten._native_batch_norm_legit_functional.default, aten.detach.default)
    return {aten.max_pool2d_with_indices.default: max_pool2d_offsets, **{op: decomposition_table[op] for op in ops}}


# the argument each op reads only the shape and dtype of
SHAPE_ONLY = {aten.max_pool2d_with_indices_backward.default: 1, aten.max_pool3d_with_indices_backward.default: 1}


def shape_only_inputs(gm: fx.GraphModule) -> int:
    """Give each op in SHAPE_ONLY an empty tensor of its argument's shape in place of the argument; the count."""
    n = 0
    for node in list(gm.graph.nodes):
        i = SHAPE_ONLY.get(node.target)
        if i is None or not isinstance(node.args[i], fx.Node) or "val" not in node.args[i].meta:
            continue
        val = node.args[i].meta["val"]
        with gm.graph.inserting_before(node):
            empty = gm.graph.call_function(aten.empty.memory_format, (list(val.shape),),
                                           {"dtype": val.dtype, "device": val.device})
        empty.meta["val"] = val
        node.update_arg(i, empty)
        n += 1
    if n:
        gm.graph.lint()
        gm.recompile()
    return n


def partition(joint: fx.GraphModule, joint_inputs, **kwargs):
    """AOTAutograd's min-cut partition of the joint graph, after `shape_only_inputs`."""
    from functorch.compile import min_cut_rematerialization_partition
    shape_only_inputs(joint)
    return min_cut_rematerialization_partition(joint, joint_inputs, **kwargs)
