"""The hierarchical AllReduce for real: 4 gloo processes as 2 'nodes' x 2, bit-for-bit against flat
AllReduce on integers, within float32 rounding on floats, bytes per link class measured by the kernel's TCP
counters against the cost model, and as a DDP hook."""
from __future__ import annotations

import numpy as np
import pytest

from . import jobs

pytestmark = pytest.mark.timeout(400)


@pytest.fixture(scope="module")
def result(launch):
    return launch(jobs.hier_job, 4, ranks_per_node=2, timeout=300)


def test_topology_as_two_nodes_of_two(result):
    r = result[0]
    assert r["topology"] == [(0, 0, 0), (1, 0, 1), (2, 1, 0), (3, 1, 1)]
    assert (r["nodes"], r["ranks_per_node"]) == (2, 2)


def test_integers_bit_for_bit(result):
    for r in result:
        for key, (equal, dtype_kept, shape) in r["int_exact"].items():
            assert equal and dtype_kept, key
            assert shape == [int(key.split("-")[0])]


def test_floats_within_rounding(result):
    for r in result:
        hier_err, flat_err = r["float_err"]
        assert hier_err < 4 * 4 * np.finfo(np.float32).eps * 8 and flat_err < 4 * 4 * np.finfo(np.float32).eps * 8


def test_bytes_per_link_class(result):
    r = result[0]
    n = 4 << 18
    model = r["model"]
    # the cost model: flat ring 2(p-1)/p n per rank, half its edges between nodes; hierarchical: n per rank
    # inside (reduce-scatter + all-gather of halves), n/2 per rank between (AllReduce of the shard by 2)
    assert model["flat"] == {"intra": pytest.approx(3 * n), "inter": pytest.approx(3 * n)}
    assert model["hier"] == {"intra": pytest.approx(4 * n), "inter": pytest.approx(2 * n)}
    for name in ("flat", "hier"):
        for cls in ("intra", "inter"):
            measured = r["wire"][name][cls]
            assert model[name][cls] <= measured <= model[name][cls] * 1.01 + 16384, (name, cls, measured)
    assert r["wire"]["hier"]["inter"] < r["wire"]["flat"]["inter"] * 0.7


def test_as_a_ddp_hook(result):
    for r in result:
        for a, b, c in zip(r["ddp_hier"], r["ddp_flat"], r["ddp_default"]):
            assert np.array_equal(b, c)                  # the flat async hook is DDP's own AllReduce
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
        assert r["decisions"]["hier"] > 0 and r["decisions"]["flat"] == 0
    for a, b in zip(result[0]["ddp_hier"], result[3]["ddp_hier"]):
        assert np.array_equal(a, b)                      # replicas stay identical
