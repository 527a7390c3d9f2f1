"""The training example: one step is one operator (forward, cross-entropy, backward, Adam) that verifies
against the reference under bf16 autocast, and a few epochs on the digits learn."""
import numpy as np

import xbench as xb
from xbench.examples import train_mlp as T


def _step_args(params, names, x, y, t=1):
    zeros = [np.zeros_like(params[k]) for k in names]
    return [x, y] + [params[k] for k in names] + zeros + zeros + [T.adam_hyper(t, 3e-3)]


def test_one_step_is_one_operator_with_bf16_contractions_and_it_verifies():
    x, y, _, _ = T.load_digits()
    params = T.init_mlp(hidden=32)
    names = list(params)
    step = T.make_step(T.mlp_loss, names)
    args = _step_args(params, names, x[:16], y[:16])
    with xb.autocast("bf16"):
        graph = step.trace(*args)
        results = xb.verify(step, *args, backend="cpu")
    contract_types = {tuple(v.dtype for v in e.inputs) for e in graph.eqns if e.prim.name == "contract"}
    assert contract_types == {("bfloat16", "bfloat16")}
    assert [v.dtype for v in graph.outputs] == ["float32"] * (1 + 3 * len(names))   # f32 master weights
    assert all(r.ok for r in results), [r.message for r in results if not r.ok]


def test_adam_matches_torch_adam_for_a_few_steps():
    import torch
    rng = np.random.default_rng(0)
    p = rng.standard_normal((5, 3)).astype(np.float32)
    grads = [rng.standard_normal((5, 3)).astype(np.float32) for _ in range(4)]
    tp = torch.from_numpy(p.copy()).requires_grad_(True)
    opt = torch.optim.Adam([tp], lr=0.01)
    m, v = np.zeros_like(p), np.zeros_like(p)
    for t, g in enumerate(grads, start=1):
        p, m, v = T.adam(p, g, m, v, T.adam_hyper(t, 0.01))
        tp.grad = torch.from_numpy(g)
        opt.step()
    np.testing.assert_allclose(p, tp.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_a_few_epochs_learn_the_digits():
    _, hist = T.train("mlp", epochs=4, low="bf16", verbose=False)
    assert hist.test_accuracy[-1] >= 0.9, hist.test_accuracy
    first, last = np.mean(hist.loss[:10]), np.mean(hist.loss[-10:])
    assert last < 0.5 * first
    assert len(hist.step_seconds) == len(hist.loss) - 1 and hist.step_ms > 0
