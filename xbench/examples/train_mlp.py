"""Train a small network on scikit-learn's digits with xbench operators only, in bfloat16 mixed precision.

    python -m xbench.examples.train_mlp                 # the MLP: forward, loss, backward and Adam on the cpu backend
    python -m xbench.examples.train_mlp --model transformer --epochs 30
    python -m xbench.examples.train_mlp --plot loss.png --no-torch

One training step is one xbench operator: the forward pass (`xb.ops.linear`, `xb.ops.relu`), the loss
(`xb.ops.cross_entropy`), the backward pass (`xb.value_and_grad`) and the Adam update, traced once under
`xb.autocast("bf16")` (matrix products on bfloat16 operands with float32 accumulation, everything else in
float32, float32 master weights) and compiled once for the cpu backend. The same model trained in PyTorch
eager (with `torch.autocast("cpu", torch.bfloat16)`) gives the step time to compare with.
"""
from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass, field

import numpy as np

import xbench as xb
from xbench import Tensor

ops = xb.ops


# ---- data ------------------------------------------------------------------------------------------------

def load_digits(test_fraction: float = 0.2, seed: int = 0):
    """(x_train, y_train, x_test, y_test): 8x8 digit images scaled to [0, 1] as 64 float32 features, int64
    labels; a fixed stratified split (scikit-learn's bundled copy: no download)."""
    from sklearn.datasets import load_digits as _load
    from sklearn.model_selection import train_test_split
    d = _load()
    x = (d.data / 16.0).astype(np.float32)
    y = d.target.astype(np.int64)
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=test_fraction, random_state=seed, stratify=y)
    return x_tr, y_tr, x_te, y_te


# ---- models ----------------------------------------------------------------------------------------------

def init_mlp(hidden: int = 128, seed: int = 0) -> dict[str, np.ndarray]:
    """Kaiming-uniform weights, zero biases (PyTorch's nn.Linear initialisation for the weights)."""
    rng = np.random.default_rng(seed)

    def lin(o, i):
        bound = 1.0 / math.sqrt(i)
        return rng.uniform(-bound, bound, (o, i)).astype(np.float32), np.zeros(o, np.float32)
    w1, b1 = lin(hidden, 64)
    w2, b2 = lin(10, hidden)
    return {"w1": w1, "b1": b1, "w2": w2, "b2": b2}


def mlp_logits(x, w1, b1, w2, b2):
    """logits = linear(relu(linear(x, w1, b1)), w2, b2), in the xbench language."""
    return ops.linear(ops.relu(ops.linear(x, w1, b1)), w2, b2)


@xb.tensor_op
def mlp_loss(x: Tensor, y: Tensor, w1: Tensor, b1: Tensor, w2: Tensor, b2: Tensor):
    """Mean cross-entropy of the MLP's logits."""
    return ops.cross_entropy(mlp_logits(x, w1, b1, w2, b2), y)


@xb.tensor_op
def mlp_predict(x: Tensor, w1: Tensor, b1: Tensor, w2: Tensor, b2: Tensor):
    """Predicted class of every row of x."""
    return ops.argmax(mlp_logits(x, w1, b1, w2, b2), dim=-1)


def init_transformer(d: int = 32, hidden: int = 64, seed: int = 0) -> dict[str, np.ndarray]:
    """A one-block transformer over the 8 rows of a digit (8 tokens of 8 pixels)."""
    rng = np.random.default_rng(seed)

    def lin(o, i):
        bound = 1.0 / math.sqrt(i)
        return rng.uniform(-bound, bound, (o, i)).astype(np.float32)
    return {"we": lin(d, 8), "pos": (0.02 * rng.standard_normal((8, d))).astype(np.float32),
            "wq": lin(d, d), "wk": lin(d, d), "wv": lin(d, d), "wo": lin(d, d),
            "g1": np.ones(d, np.float32), "be1": np.zeros(d, np.float32),
            "wf1": lin(hidden, d), "bf1": np.zeros(hidden, np.float32), "wf2": lin(d, hidden),
            "bf2": np.zeros(d, np.float32), "g2": np.ones(d, np.float32), "be2": np.zeros(d, np.float32),
            "wc": lin(10, d), "bc": np.zeros(10, np.float32)}


def transformer_logits(x, we, pos, wq, wk, wv, wo, g1, be1, wf1, bf1, wf2, bf2, g2, be2, wc, bc):
    """Embed the 8 rows, one pre-norm attention block (one head) and MLP block, mean-pool, classify."""
    d = we.shape[0]
    h = ops.linear(x.reshape((x.shape[0], 8, 8)), we) + pos                   # [B, 8, d]
    a = ops.layer_norm(h, (d,), g1, be1)
    q, k, v = ops.linear(a, wq), ops.linear(a, wk), ops.linear(a, wv)
    att = ops.softmax((q @ k.mT) * (1.0 / math.sqrt(d)), dim=-1)
    h = h + ops.linear(att @ v, wo)
    f = ops.layer_norm(h, (d,), g2, be2)
    h = h + ops.linear(ops.gelu(ops.linear(f, wf1, bf1)), wf2, bf2)
    return ops.linear(h.mean(axis=1), wc, bc)


@xb.tensor_op
def transformer_loss(x: Tensor, y: Tensor, we: Tensor, pos: Tensor, wq: Tensor, wk: Tensor, wv: Tensor,
                     wo: Tensor, g1: Tensor, be1: Tensor, wf1: Tensor, bf1: Tensor, wf2: Tensor, bf2: Tensor,
                     g2: Tensor, be2: Tensor, wc: Tensor, bc: Tensor):
    """Mean cross-entropy of the transformer's logits."""
    return ops.cross_entropy(transformer_logits(x, we, pos, wq, wk, wv, wo, g1, be1, wf1, bf1, wf2, bf2, g2, be2,
                                                wc, bc), y)


@xb.tensor_op
def transformer_predict(x: Tensor, we: Tensor, pos: Tensor, wq: Tensor, wk: Tensor, wv: Tensor, wo: Tensor,
                        g1: Tensor, be1: Tensor, wf1: Tensor, bf1: Tensor, wf2: Tensor, bf2: Tensor, g2: Tensor,
                        be2: Tensor, wc: Tensor, bc: Tensor):
    """Predicted class of every digit."""
    return ops.argmax(transformer_logits(x, we, pos, wq, wk, wv, wo, g1, be1, wf1, bf1, wf2, bf2, g2, be2, wc,
                                         bc), dim=-1)


MODELS = {"mlp": (init_mlp, mlp_loss, mlp_predict), "transformer": (init_transformer, transformer_loss,
                                                                     transformer_predict)}


# ---- the optimiser, as xbench operators ----------------------------------------------------------------

@xb.tensor_op
def adam(p: Tensor, g: Tensor, m: Tensor, v: Tensor, hyper: Tensor, beta1: float = 0.9, beta2: float = 0.999):
    """One Adam step for one parameter: (p, m, v) updated. `hyper` = [lr_t, eps_t], the step's bias-corrected
    learning rate lr * sqrt(1 - beta2**t) / (1 - beta1**t) and eps * sqrt(1 - beta2**t), so one compiled
    operator serves every step."""
    m = beta1 * m + (1.0 - beta1) * g
    v = beta2 * v + (1.0 - beta2) * g * g
    return p - hyper[0:1] * m / (xb.sqrt(v) + hyper[1:2]), m, v


@xb.tensor_op
def sgd(p: Tensor, g: Tensor, lr: Tensor):
    """p - lr * g (`lr` an array of one value)."""
    return p - lr * g


def adam_hyper(step: int, lr: float, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8) -> np.ndarray:
    c2 = math.sqrt(1.0 - beta2 ** step)
    return np.array([lr * c2 / (1.0 - beta1 ** step), eps * c2], np.float32)


# ---- training --------------------------------------------------------------------------------------------

@dataclass
class History:
    """What a run measured: loss per step, test accuracy per epoch, step times (seconds)."""
    loss: list[float] = field(default_factory=list)
    test_accuracy: list[float] = field(default_factory=list)
    step_seconds: list[float] = field(default_factory=list)
    compile_seconds: float = 0.0

    @property
    def step_ms(self) -> float:
        """Median wall time of one training step (forward, backward, update), in ms, after the first epoch."""
        t = self.step_seconds[len(self.step_seconds) // 4:] or self.step_seconds
        return 1e3 * float(np.median(t))


def make_step(loss_op, names: list[str], optimizer: str = "adam"):
    """One training step as one xbench operator: (loss, new params, new optimiser state)."""
    grads_of = xb.value_and_grad(loss_op, argnums=tuple(range(2, 2 + len(names))))
    n = len(names)

    def body(*args):
        x, y = args[0], args[1]
        params = list(args[2:2 + n])
        loss, grads = grads_of(x, y, *params)
        if optimizer == "sgd":
            lr = args[2 + n]
            return (loss,) + tuple(sgd(p, g, lr) for p, g in zip(params, grads))
        ms, vs, hyper = list(args[2 + n:2 + 2 * n]), list(args[2 + 2 * n:2 + 3 * n]), args[2 + 3 * n]
        out, new_m, new_v = [], [], []
        for p, g, m, v in zip(params, grads, ms, vs):
            p2, m2, v2 = adam(p, g, m, v, hyper)
            out.append(p2)
            new_m.append(m2)
            new_v.append(v2)
        return (loss,) + tuple(out) + tuple(new_m) + tuple(new_v)

    import inspect
    P = inspect.Parameter
    extra = ["lr"] if optimizer == "sgd" else [f"m_{k}" for k in names] + [f"v_{k}" for k in names] + ["hyper"]
    params = [P(nm, P.POSITIONAL_ONLY, annotation=Tensor) for nm in ["x", "y"] + names + extra]
    body.__signature__ = inspect.Signature(params)
    body.__name__ = f"train_step_{loss_op.name}"
    return xb.tensor_op(body)


def train(model: str = "mlp", epochs: int = 20, batch: int = 64, lr: float = 3e-3, low: str | None = "bf16",
          backend: str = "cpu", seed: int = 0, optimizer: str = "adam", verbose: bool = True):
    """Train `model` on the digits; returns (params, History)."""
    init, loss_op, predict = MODELS[model]
    x_tr, y_tr, x_te, y_te = load_digits(seed=seed)
    params = init(seed=seed)
    names = list(params)
    step = make_step(loss_op, names, optimizer)
    state_m = {k: np.zeros_like(v) for k, v in params.items()}
    state_v = {k: np.zeros_like(v) for k, v in params.items()}
    hist = History()
    rng = np.random.default_rng(seed)
    ctx = xb.autocast(low) if low else _null()
    t = 0
    with ctx:
        for epoch in range(epochs):
            order = rng.permutation(len(x_tr))
            for i in range(0, len(order) - batch + 1, batch):
                idx = order[i:i + batch]
                t += 1
                args = [x_tr[idx], y_tr[idx]] + [params[k] for k in names]
                if optimizer == "sgd":
                    args.append(np.array([lr], np.float32))
                else:
                    args += [state_m[k] for k in names] + [state_v[k] for k in names] + [adam_hyper(t, lr)]
                t0 = time.perf_counter()
                out = step.run(*args, backend=backend)
                dt = time.perf_counter() - t0
                if t == 1:
                    hist.compile_seconds = dt
                else:
                    hist.step_seconds.append(dt)
                hist.loss.append(float(out[0]))
                n = len(names)
                params = dict(zip(names, out[1:1 + n]))
                if optimizer != "sgd":
                    state_m = dict(zip(names, out[1 + n:1 + 2 * n]))
                    state_v = dict(zip(names, out[1 + 2 * n:1 + 3 * n]))
            pred = predict.run(x_te, *[params[k] for k in names], backend=backend)
            hist.test_accuracy.append(float((pred == y_te).mean()))
            if verbose:
                print(f"epoch {epoch + 1:3d}  loss {np.mean(hist.loss[-len(order) // batch:]):.4f}  "
                      f"test accuracy {hist.test_accuracy[-1]:.4f}", flush=True)
    return params, hist


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


# ---- the same model in PyTorch eager -------------------------------------------------------------------

def torch_step_ms(model: str = "mlp", steps: int = 200, batch: int = 64, lr: float = 3e-3, bf16: bool = True,
                  seed: int = 0) -> tuple[float, float]:
    """(median step ms, test accuracy after `steps` steps) of the same model and optimiser in PyTorch eager on
    this CPU, with torch.autocast("cpu", torch.bfloat16) when `bf16`."""
    import torch
    torch.manual_seed(seed)
    x_tr, y_tr, x_te, y_te = load_digits(seed=seed)
    p = {k: torch.from_numpy(v.copy()).requires_grad_(True) for k, v in MODELS[model][0](seed=seed).items()}
    F = torch.nn.functional

    def logits(x):
        if model == "mlp":
            return F.linear(F.relu(F.linear(x, p["w1"], p["b1"])), p["w2"], p["b2"])
        d = p["we"].shape[0]
        h = F.linear(x.reshape(x.shape[0], 8, 8), p["we"]) + p["pos"]
        a = F.layer_norm(h, (d,), p["g1"], p["be1"])
        q, k, v = F.linear(a, p["wq"]), F.linear(a, p["wk"]), F.linear(a, p["wv"])
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d), dim=-1)
        h = h + F.linear(att @ v, p["wo"])
        f = F.layer_norm(h, (d,), p["g2"], p["be2"])
        h = h + F.linear(F.gelu(F.linear(f, p["wf1"], p["bf1"])), p["wf2"], p["bf2"])
        return F.linear(h.mean(1), p["wc"], p["bc"])

    opt = torch.optim.Adam(p.values(), lr=lr)
    xt, yt = torch.from_numpy(x_tr), torch.from_numpy(y_tr)
    rng = np.random.default_rng(seed)
    times = []
    t = 0
    while t < steps:
        order = rng.permutation(len(x_tr))
        for i in range(0, len(order) - batch + 1, batch):
            idx = torch.from_numpy(order[i:i + batch])
            t0 = time.perf_counter()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                loss = F.cross_entropy(logits(xt[idx]), yt[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            times.append(time.perf_counter() - t0)
            t += 1
            if t >= steps:
                break
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        acc = float((logits(torch.from_numpy(x_te)).argmax(-1).numpy() == y_te).mean())
    return 1e3 * float(np.median(times[len(times) // 4:])), acc


def plot_loss(hist: History, path=None, title: str = "digits, bf16 autocast, xbench cpu backend"):
    """Loss per step and test accuracy per epoch; saved to `path` if given; returns the figure."""
    import matplotlib
    if path is not None:
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(1, 2, figsize=(9, 3.2))
    ax[0].plot(hist.loss, lw=0.8)
    ax[0].set_xlabel("step")
    ax[0].set_ylabel("cross-entropy")
    ax[0].set_yscale("log")
    ax[0].set_title(title, fontsize=9)
    ax[1].plot(range(1, len(hist.test_accuracy) + 1), hist.test_accuracy, marker="o", ms=3)
    ax[1].set_xlabel("epoch")
    ax[1].set_ylabel("test accuracy")
    ax[1].set_ylim(min(0.8, min(hist.test_accuracy, default=0.8)), 1.0)
    ax[1].grid(alpha=0.3)
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=120)
    return fig


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m xbench.examples.train_mlp", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=sorted(MODELS), default="mlp")
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--precision", choices=["bf16", "fp16", "fp32"], default="bf16")
    p.add_argument("--backend", default="cpu")
    p.add_argument("--plot", help="save the loss curve to this file (png, svg, pdf)")
    p.add_argument("--no-torch", action="store_true", help="skip the PyTorch eager comparison")
    a = p.parse_args(argv)
    low = None if a.precision == "fp32" else a.precision
    _, hist = train(a.model, a.epochs, a.batch, a.lr, low, a.backend)
    print(f"\n{a.model}: test accuracy {hist.test_accuracy[-1]:.4f} after {a.epochs} epochs "
          f"({len(hist.loss)} steps); first step (trace + compile) {hist.compile_seconds:.1f} s, then "
          f"{hist.step_ms:.2f} ms per step on {a.backend}")
    if not a.no_torch:
        ms, acc = torch_step_ms(a.model, steps=len(hist.loss), batch=a.batch, lr=a.lr, bf16=low == "bf16")
        print(f"PyTorch eager ({'bf16 autocast' if low == 'bf16' else 'float32'}): {ms:.2f} ms per step, test "
              f"accuracy {acc:.4f}; xbench / PyTorch step time: {hist.step_ms / ms:.2f}x")
    if a.plot:
        plot_loss(hist, a.plot)
        print(f"loss curve: {a.plot}")
    return 0 if hist.test_accuracy[-1] >= 0.95 else 1


if __name__ == "__main__":
    raise SystemExit(main())
