"""A sum of matrix products as one product over the concatenated operands.

Autograd accumulates the gradient of a weight used at every step of a loop (an unrolled LSTM's recurrent
weights) as `mm(a1, b1) + mm(a2, b2) + ...`: one small product per step, each as wide as the weight, and an add
of the weight's size after each. `sum(ai @ bi) = [a1 a2 ...] @ [b1; b2; ...]`, one product whose inner dimension
is the sum of theirs: what a fused RNN kernel computes. `batch_products` makes that rewrite where an add tree's
leaves include three or more such products; transposes around a product (`t(t(mm(...)))`, `t(mm(a, b))`, which
is `mm(t(b), t(a))`) are seen through. The sum's rounding changes as any reassociation does.
"""
from __future__ import annotations

import torch
import torch.fx as fx

aten = torch.ops.aten

MIN_PRODUCTS = 3          # fewer: the concatenations cost about what they save
_ADD = aten.add.Tensor
_T = (aten.t.default,)


def _val(n):
    return n.meta.get("val") if isinstance(n, fx.Node) else None


def _is_transpose(n: fx.Node) -> bool:
    if n.op != "call_function":
        return False
    if n.target in _T:
        return True
    return (n.target is aten.transpose.int and _val(n) is not None and _val(n).dim() == 2
            and sorted(int(d) % 2 for d in n.args[1:3]) == [0, 1])


def _product(n: fx.Node) -> tuple[fx.Node, fx.Node, bool] | None:
    """(a, b, transposed): `n` is `mm(a, b)` (transposed: its transpose) under any number of transposes."""
    flips = False
    chain = [n]
    while _is_transpose(n):
        n = n.args[0]
        flips = not flips
        chain.append(n)
    if not (isinstance(n, fx.Node) and n.op == "call_function" and n.target is aten.mm.default):
        return None
    if any(len(c.users) != 1 for c in chain):          # the product is read elsewhere too: keep it
        return None
    a, b = n.args[:2]
    return a, b, flips


def _leaves(root: fx.Node) -> tuple[list[fx.Node], list[fx.Node]] | None:
    """The operands of the add tree under `root` (inner adds used only inside it), and its inner adds."""
    shape, dtype = _val(root).shape, _val(root).dtype
    leaves, inner, todo = [], [], [root]
    while todo:
        n = todo.pop()
        if (n is root or len(n.users) == 1) and _plain_add(n) and _val(n).shape == shape:
            inner.append(n)
            todo.extend(reversed(n.args[:2]))
        else:
            v = _val(n)
            if v is None or v.shape != shape or v.dtype != dtype:
                return None                               # broadcasting or promotion: not a plain sum
            leaves.append(n)
    return leaves, inner


def _plain_add(n) -> bool:
    return (isinstance(n, fx.Node) and n.op == "call_function" and n.target is _ADD and not n.kwargs
            and len(n.args) == 2 and all(isinstance(a, fx.Node) for a in n.args))


def _call(g: fx.Graph, target, args: tuple) -> fx.Node:
    """A new node of `target` over `args`, its example value computed from theirs (fake tensors, as captured)."""
    node = g.call_function(target, args)
    node.meta["val"] = target(*[_val(a) if isinstance(a, fx.Node) else
                                [_val(x) for x in a] if isinstance(a, list) else a for a in args])
    return node


def _stacked(g: fx.Graph, parts: list[fx.Node], dim: int) -> fx.Node:
    """cat(parts, dim), concatenating the transposes' inputs along the other dimension where all are transposes
    (then one transpose of the result: the product reads it transposed, no copy)."""
    if all(_is_transpose(p) for p in parts):
        return _call(g, aten.t.default, (_call(g, aten.cat.default, ([p.args[0] for p in parts], 1 - dim)),))
    return _call(g, aten.cat.default, (parts, dim))


def _transposed(g: fx.Graph, n: fx.Node) -> fx.Node:
    return n.args[0] if _is_transpose(n) else _call(g, aten.t.default, (n,))


def batch_products(gm: fx.GraphModule) -> int:
    """Rewrite every add tree with at least `MIN_PRODUCTS` matrix-product leaves of one orientation as one product
    of concatenated operands plus the other leaves; returns how many trees were rewritten."""
    g = gm.graph
    done = 0
    gone: set[fx.Node] = set()                            # erased by an earlier rewrite
    for root in reversed(list(g.nodes)):
        if root in gone or not _plain_add(root) or _val(root) is None or _val(root).dim() != 2:
            continue
        if len(root.users) == 1 and any(_plain_add(u) and _val(u) is not None and _val(u).shape == _val(root).shape
                                        for u in root.users):
            continue                                      # an inner add: its root handles it
        found = _leaves(root)
        if found is None:
            continue
        leaves, inner = found
        products = [(leaf, p) for leaf in leaves if (p := _product(leaf)) is not None]
        for flip in (False, True):
            group = [(leaf, p) for leaf, p in products if p[2] is flip]
            if len(group) < MIN_PRODUCTS:
                continue
            before = set(g.nodes)
            with g.inserting_before(root):
                if flip:     # t(a @ b) = t(b) @ t(a)
                    a = _stacked(g, [_transposed(g, p[1]) for _, p in group], 1)
                    b = _stacked(g, [_transposed(g, p[0]) for _, p in group], 0)
                else:
                    a = _stacked(g, [p[0] for _, p in group], 1)
                    b = _stacked(g, [p[1] for _, p in group], 0)
                total = _call(g, aten.mm.default, (a, b))
                rest = [leaf for leaf in leaves if all(leaf is not x for x, _ in group)]
                for other in rest:
                    total = _call(g, _ADD, (total, other))
            for n in g.nodes:
                if n not in before and "stack_trace" in root.meta:
                    n.meta.setdefault("stack_trace", root.meta["stack_trace"])
            root.replace_all_uses_with(total)
            for n in inner:
                n.args = ()
            for n in inner:
                g.erase_node(n)
            gone.update(inner)
            for leaf in {id(leaf): leaf for leaf, _ in group}.values():    # a product added twice is one node
                _erase_unread(g, leaf, gone)
            done += 1
            break
    if done:
        g.lint()
        gm.recompile()
    return done


def _erase_unread(g: fx.Graph, n, gone: set) -> None:
    """Erase `n` and, below it, the transposes and products that nothing reads any more (into `gone`)."""
    if not (isinstance(n, fx.Node) and n.op == "call_function" and not n.users
            and (n.target is aten.mm.default or _is_transpose(n))):
        return
    below = n.args[:2] if n.target is aten.mm.default else n.args[:1]
    g.erase_node(n)
    gone.add(n)
    for b in below:
        _erase_unread(g, b, gone)
