"""A functionalised update of a graph input (a static KV cache's index_copy_) is written back in place: no whole
new cache, no copy back, the same values as eager."""
from __future__ import annotations

import torch
import torch.fx as fx

import xbench as xb
from xbench.torch.inplace import write_in_place

aten = torch.ops.aten


def _graph(read_after: bool) -> fx.GraphModule:
    g = fx.Graph()
    x, idx, src = g.placeholder("x"), g.placeholder("idx"), g.placeholder("src")
    before = g.call_function(aten.mul.Tensor, (x, 2.0))
    new = g.call_function(aten.index_copy.default, (x, 0, idx, src))
    late = g.call_function(aten.mul.Tensor, (x, 3.0)) if read_after else before
    total = g.call_function(aten.add.Tensor, (new, late))
    g.call_function(aten.copy_.default, (x, new))
    g.output((total,))
    return fx.GraphModule(torch.nn.Module(), g)


def test_the_update_is_made_in_place_where_no_one_reads_the_old_value_after_it():
    x, idx, src = torch.zeros(5, 3), torch.tensor([1, 3]), torch.ones(2, 3)
    gm = _graph(read_after=False)
    assert write_in_place(gm) == 1
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert aten.index_copy_.default in targets and aten.copy_.default not in targets
    (total,) = gm(x, idx, src)
    want = torch.zeros(5, 3).index_copy(0, idx, src)
    torch.testing.assert_close(x, want)                              # the input itself was updated
    torch.testing.assert_close(total, want)                          # + 2 * the old value (zeros)
    # the old value read after the update: left as captured
    assert write_in_place(_graph(read_after=True)) == 0


def test_a_static_cache_update_through_the_bridge_matches_eager():
    def step(cache, pos, k):
        cache.index_copy_(1, pos, k)
        return cache.sum(1) * 2

    compiled = torch.compile(step, backend="xbench")
    cache, ref = torch.zeros(2, 6, 4), torch.zeros(2, 6, 4)
    with xb.torch.recording() as session, torch.no_grad():
        for i in range(3):
            k = torch.full((2, 1, 4), float(i + 1))
            got = compiled(cache, torch.tensor([i]), k)
            want = step(ref, torch.tensor([i]), k)
            torch.testing.assert_close(got, want)
            torch.testing.assert_close(cache, ref)
    ops = {f.op for g in session.graphs for f in g.fallbacks}
    assert ops == {"aten.index_copy_.default"}                     # torch writes the row; no copy_ back


def test_one_slice_updates_leave_the_graph_whole_and_are_written_back_at_the_end():
    # two caches, each updated at one position and read afterwards, the second update depending on what the
    # first cache holds (a decode step's layers): one xbench partition reads the updated caches as selects,
    # and torch writes the two rows into the caches once it is done
    def step(k_cache, v_cache, pos, x):
        k_cache.index_copy_(1, pos, x * 2)
        y = k_cache.sum(1, keepdim=True) + x
        v_cache.index_copy_(1, pos, y)
        return v_cache.sum(1) * 3

    compiled = torch.compile(step, backend="xbench")
    caches, refs = [torch.zeros(2, 6, 4) for _ in range(2)], [torch.zeros(2, 6, 4) for _ in range(2)]
    with xb.torch.recording() as session, torch.no_grad():
        for i in range(3):
            x = torch.rand(2, 1, 4)
            got = compiled(*caches, torch.tensor([i]), x)
            want = step(*refs, torch.tensor([i]), x)
            torch.testing.assert_close(got, want)
            for c, r in zip(caches, refs):
                torch.testing.assert_close(c, r)
    (graph,) = session.graphs
    assert len(graph.partitions) == 1
    assert [f.op for f in graph.fallbacks] == ["aten.index_copy_.default"] * 2
    nodes = [n for n in graph.graph.graph.nodes if n.op == "call_function"]
    assert [n.target for n in nodes[-2:]] == [aten.index_copy_.default] * 2      # the write-backs come last
