"""Functional updates of a graph input written back in place, as the model wrote them.

AOT functionalises an in-place update of an input (a static KV cache's `keys.index_copy_(2, pos, k)`) into
`new = index_copy(keys, 2, pos, k)`, the graph reading `new`, and a final `copy_(keys, new)`. Run as captured,
each decoded token makes a whole new cache and copies all of it back. `write_in_place` gives the update back
its in-place form where that is the same computation: the update at its place in the graph (torch runs it, a
few rows), everything after reading the input itself, and no copy back.
"""
from __future__ import annotations

import torch
import torch.fx as fx

aten = torch.ops.aten

IN_PLACE = {aten.index_copy.default: aten.index_copy_.default, aten.index_put.default: aten.index_put_.default}


def write_in_place(gm: fx.GraphModule) -> int:
    """Rewrite `copy_(x, update(x, ...))` on a graph input `x` as `update_(x, ...)` where nothing reads `x`'s
    old value after the update; returns how many were rewritten (the graph is recompiled if any)."""
    order = {n: i for i, n in enumerate(gm.graph.nodes)}
    done = 0
    for back in list(gm.graph.nodes):
        if back.op != "call_function" or back.target is not aten.copy_.default:
            continue
        dst, new = back.args[:2]
        if not (isinstance(new, fx.Node) and dst.op == "placeholder" and new.op == "call_function"
                and new.target in IN_PLACE and new.args and new.args[0] is dst):
            continue
        if any(order[u] > order[new] for u in dst.users if u not in (new, back)):
            continue                                 # the old value is read after the update
        with gm.graph.inserting_before(new):
            update = gm.graph.call_function(IN_PLACE[new.target], new.args, new.kwargs)
        update.meta = dict(new.meta)
        new.replace_all_uses_with(update)
        back.replace_all_uses_with(update)
        gm.graph.erase_node(back)
        gm.graph.erase_node(new)
        done += 1
    if done:
        gm.graph.lint()
        gm.recompile()
    return done
