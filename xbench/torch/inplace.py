"""Functional updates of a graph input written back in place, as the model wrote them.

AOT functionalises an in-place update of an input (a static KV cache's `keys.index_copy_(2, pos, k)`) into
`new = index_copy(keys, 2, pos, k)`, the graph reading `new`, and a final `copy_(keys, new)`. Run as captured,
each decoded token makes a whole new cache and copies all of it back. `write_in_place` writes back only what the
update changes, in one of two forms:

- one slice (`index_copy` at a single position, a decoded token's row): the graph goes on reading `new`, which
  xbench computes as a select its readers fuse (the cache read once, the row from `k`), and the final copy back
  becomes the update itself, torch writing the row once xbench is done. The update no longer splits the graph:
  one partition for the whole decode step instead of one per layer.
- any other update: made in place at its place in the graph (torch runs it, a few rows), everything after reading
  the input itself, and no copy back; where the old value is read after the update, the graph is left as captured.
"""
from __future__ import annotations

import torch
import torch.fx as fx

aten = torch.ops.aten

IN_PLACE = {aten.index_copy.default: aten.index_copy_.default, aten.index_put.default: aten.index_put_.default}


def one_slice(node: fx.Node) -> bool:
    """Whether the functional update `node` writes a single slice of its input (an index_copy at one position)."""
    if node.target is not aten.index_copy.default or len(node.args) < 3:
        return False
    index = node.args[2].meta.get("val") if isinstance(node.args[2], fx.Node) else None
    return index is not None and index.numel() == 1


def write_in_place(gm: fx.GraphModule) -> int:
    """Rewrite `copy_(x, update(x, ...))` on a graph input `x` as `update_(x, ...)`: in the copy's place for a
    one-slice update (the graph reads `update(x, ...)` as before), else in the update's place where nothing reads
    `x`'s old value after it; returns how many were rewritten (the graph is recompiled if any)."""
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    done = 0
    for back in list(gm.graph.nodes):
        if back.op != "call_function" or back.target is not aten.copy_.default:
            continue
        dst, new = back.args[:2]
        if not (isinstance(new, fx.Node) and dst.op == "placeholder" and new.op == "call_function"
                and new.target in IN_PLACE and new.args and new.args[0] is dst):
            continue
        deferred = one_slice(new)
        if not deferred and any(order[u] > order[new] for u in dst.users if u not in (new, back)):
            continue                                 # the old value is read after the update
        with gm.graph.inserting_before(back if deferred else new):
            update = gm.graph.call_function(IN_PLACE[new.target], new.args, new.kwargs)
        update.meta = dict(new.meta)
        back.replace_all_uses_with(update)
        gm.graph.erase_node(back)
        if not deferred:
            new.replace_all_uses_with(update)
            gm.graph.erase_node(new)
        done += 1
    if done:
        gm.graph.lint()
        gm.recompile()
    return done
