"""The accuracy gate: a workload's outputs and its training loss curve on an xbench backend against torch eager.

A deep model's float32 result differs from its exact value by rounding accumulated over many ops (and a badly
conditioned one, batch norm over two samples, by much more), which the per-op tolerance table cannot bound. So
the gate asks, for the first forward's outputs and for every step of a short training run (SGD with momentum on
one batch): is xbench's distance from a float64 run of the same model at most FACTOR times eager float32's
distance, or within the tolerance table for one float32 op at the result's scale (whichever is larger)? A
workload passes on a backend when both its outputs and its curve do; the suite marks each backend on its own.
The decode workload also compares its greedy tokens and their logits with eager's. With no steps (an
inference workload on a simulated backend) the outputs of one eval-mode inference are compared instead.
"""
from __future__ import annotations

import copy
import time
from dataclasses import asdict, dataclass, field

import numpy as np
import torch

from ..errors import SimulatorLimitError
from ..verify import tolerance
from .engines import graphs_compiled
from .workloads import Workload, build, dynamo_settings

FACTOR = 4.0
STEPS = 10
LR = 0.05


@dataclass
class Check:
    """One comparison: xbench's and eager's largest distance from float64, and what was allowed."""
    what: str
    ok: bool
    xbench: float
    eager: float
    allowed: float
    worst: str = ""
    exact: bool = False                  # a check of equality (tokens): `worst` says what differs

    def __str__(self) -> str:
        if self.exact:
            return f"{self.what}: {'ok' if self.ok else 'DIFFERS'} ({self.worst})"
        return (f"{self.what}: {'ok' if self.ok else 'DIFFERS'} (xbench {self.xbench:.3g} from float64, eager "
                f"float32 {self.eager:.3g}, allowed {self.allowed:.3g}{'; ' + self.worst if self.worst else ''})")


@dataclass
class GateResult:
    workload: str
    backend: str
    size: str
    steps: int
    checks: list[Check] = field(default_factory=list)
    seconds: float = 0.0
    error: str = ""                      # the run failed: what it raised
    not_run: str = ""                    # a simulator refused the run as too long: why (nothing was judged)
    bisect: dict | None = None           # where a failure was bisected to
    recompiled: int = 0                  # graphs Dynamo compiled after the first training step

    @property
    def ok(self) -> bool:
        return not self.error and bool(self.checks) and all(c.ok for c in self.checks)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["ok"] = self.ok
        return d

    def __str__(self) -> str:
        if self.not_run:
            return f"{self.workload} on {self.backend}: not run ({self.not_run})"
        head = f"{self.workload} on {self.backend}: {'pass' if self.ok else 'FAIL'}"
        if self.error:
            return f"{head} ({self.error})"
        return head + "".join(f"\n  {c}" for c in self.checks)


def _distance(a: torch.Tensor, exact: torch.Tensor) -> float:
    return float((a.detach().double() - exact.detach().double()).abs().max()) if a.numel() else 0.0


def compare_outputs(got: torch.Tensor, eager: torch.Tensor, exact: torch.Tensor, what: str) -> Check:
    scale = float(exact.detach().abs().max()) if exact.numel() else 0.0
    floor = tolerance("float32")[0] * (scale or 1.0)
    mine, theirs = _distance(got, exact), _distance(eager, exact)
    allowed = max(FACTOR * theirs, floor)
    return Check(what, bool(mine <= allowed), mine, theirs, allowed)


def compare_curves(got: list[float], eager: list[float], exact: list[float], what: str = "loss curve") -> Check:
    g, e, x = (np.asarray(v, np.float64) for v in (got, eager, exact))
    floor = tolerance("float32")[0] * float(np.abs(x).max())
    mine, theirs = np.abs(g - x), np.abs(e - x)
    allowed = max(FACTOR * float(theirs.max()), floor)
    worst = int(np.argmax(mine))
    return Check(what, bool((mine <= allowed).all() and np.isfinite(g).all()), float(mine.max()), float(theirs.max()),
                 allowed, f"worst at step {worst}: {g[worst]:.7g}, eager {e[worst]:.7g}, float64 {x[worst]:.7g}")


def double(model: torch.nn.Module, batch: dict) -> tuple[torch.nn.Module, dict]:
    return (copy.deepcopy(model).double(),
            {k: v.double() if torch.is_tensor(v) and v.is_floating_point() else v for k, v in batch.items()})


def train_curve(model, batch: dict, steps: int, compiled: list | None = None) -> tuple[list[float], torch.Tensor]:
    """SGD with momentum for `steps` steps on one batch: the losses, and the first step's logits. `compiled`
    receives, before each step after the first, the count of graphs Dynamo has compiled so far."""
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    losses, first = [], None
    for _ in range(steps):
        if compiled is not None and losses:
            compiled.append(graphs_compiled())
        out = model(**batch)
        out.loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(float(out.loss.detach()))
        if first is None:
            first = out.logits.detach().clone()
    return losses, first


def infer(model, batch: dict) -> torch.Tensor:
    """The logits of one inference (eval mode, no gradients)."""
    model.eval()
    with torch.no_grad():
        return model(**batch).logits


def _decode(model, config, prompt: torch.Tensor, n: int):
    import transformers
    cache = transformers.StaticCache(config=config, max_cache_len=prompt.shape[1] + n)
    token, tokens, logits = prompt, [], []
    pos = torch.arange(prompt.shape[1]).unsqueeze(0)
    for _ in range(n):
        out = model(input_ids=token, cache=cache, use_cache=True, position_ids=pos)
        token = out.logits[:, -1].argmax(-1, keepdim=True)
        tokens.append(token)
        logits.append(out.logits[:, -1])
        pos = pos[:, -1:] + 1
    return torch.cat(tokens, 1), torch.stack(logits, 1)


def gate(w: Workload, backend: str = "cpu", size: str = "tiny", steps: int = STEPS, *, seed: int = 0,
         options: dict | None = None) -> GateResult:
    """Run `w` on `backend` and on torch eager (float32 and float64) and compare (see the module's docstring)."""
    result = GateResult(w.name, backend, size, steps)
    t0 = time.perf_counter()
    import torch._dynamo

    opts = {"target": backend, **(options or {})}
    torch._dynamo.reset()     # as in engines.runs: a graph compiled at another size would make this one's shapes dynamic
    try:
        with dynamo_settings(w):
            model, batch = build(w.name, size, seed)
            eager = copy.deepcopy(model)
            exact, batch64 = double(model, batch)
            compiled = torch.compile(model, backend="xbench", options=opts)
            if steps:
                counts: list[int] = []
                got, logits = train_curve(compiled, batch, steps, counts)
                result.recompiled = graphs_compiled() - counts[0] if counts else 0
                want, eager_logits = train_curve(eager, batch, steps)
                exact_losses, exact_logits = train_curve(exact, batch64, steps)
            else:
                logits, eager_logits, exact_logits = (infer(m, b) for m, b in ((compiled, batch), (eager, batch),
                                                                               (exact, batch64)))
            result.checks.append(compare_outputs(logits, eager_logits, exact_logits,
                                                 "outputs" if steps else "inference outputs"))
            if steps:
                result.checks.append(compare_curves(got, want, exact_losses, f"{steps}-step loss curve"))
            if w.mode == "decode":
                result.checks += _decode_checks(w, size, seed, opts)
    except SimulatorLimitError as exc:
        result.not_run = str(exc).splitlines()[0]
    except Exception as exc:   # a backend that cannot run the workload fails the gate, with the reason
        result.error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    result.seconds = time.perf_counter() - t0
    return result


def _decode_checks(w: Workload, size: str, seed: int, opts: dict) -> list[Check]:
    from .workloads import SIZES
    model, batch = build(w.name, size, seed)
    model.eval()
    n = w.decode_tokens[SIZES.index(size)]
    exact = copy.deepcopy(model).double()
    compiled = torch.compile(model, backend="xbench", options=opts)
    with torch.no_grad():
        tokens, logits = _decode(compiled, model.config, batch["input_ids"], n)
        e_tokens, e_logits = _decode(model, model.config, batch["input_ids"], n)
        # float64 follows eager's tokens, so the three score the same sequence
        x_logits = _forced(exact, batch["input_ids"], e_tokens)
    same = bool(torch.equal(tokens, e_tokens))
    differ = int((tokens != e_tokens).sum())
    checks = [Check("greedy tokens", same, float(differ), 0.0, 0.0,
                    f"{differ} of {tokens.numel()} differ from eager's" if differ else
                    f"the {tokens.numel()} tokens equal eager's", exact=True)]
    if same:
        checks.append(compare_outputs(logits, e_logits, x_logits, "decode logits"))
    return checks


def _forced(model, prompt: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """The logits of each next token after the prompt and `tokens[:, :i]`, in one forward (no cache)."""
    seq = torch.cat([prompt, tokens[:, :-1]], 1)
    out = model(input_ids=seq)
    return out.logits[:, prompt.shape[1] - 1:]
