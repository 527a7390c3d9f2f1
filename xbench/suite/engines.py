"""One workload on one engine in one precision: the callable the suite times.

Engines: `eager` (torch as written), `xbench` (`torch.compile(backend="xbench")` on a target) and `inductor`
(`torch.compile()`). Precisions: `float32`, and `bfloat16` as `torch.autocast("cpu", torch.bfloat16)` around the
forward (backward follows autocast's casts, as in training scripts). Modes (the workload's):

- `train`: forward, backward, an SGD step with momentum and `zero_grad()` (gradients kept and zeroed in place);
- `infer`: one forward under `no_grad` in `eval()`, without labels;
- `decode`: a prefill of the prompt into a static KV cache (transformers `StaticCache`: its shapes do not change,
  so a compiler specialises the decode step once), then greedy decoding one token at a time.

Each engine has its own copy of the model from the same weights, and each xbench run records the graphs it
compiled (`xbench.torch.recording`), from which the suite predicts other hardware.
"""
from __future__ import annotations

import contextlib
import copy
import time
from dataclasses import dataclass, field

import torch

from .workloads import SIZES, Workload

ENGINES = ("eager", "xbench", "inductor")
PRECISIONS = ("float32", "bfloat16")
LR = 1e-3


def autocast(precision: str):
    if precision == "float32":
        return contextlib.nullcontext()
    if precision == "bfloat16":
        return torch.autocast("cpu", dtype=torch.bfloat16)
    raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")


def graphs_compiled() -> int:
    """Graphs Dynamo has compiled in this process so far (any backend)."""
    from torch._dynamo.utils import counters
    return counters["stats"]["unique_graphs"]


def inputs(batch: dict, mode: str) -> dict:
    """The batch a mode calls the model with: inference leaves the labels out."""
    return {k: v for k, v in batch.items() if not (mode == "infer" and k == "labels")}


@dataclass
class Run:
    """A workload's model on one engine and precision, ready to call (`step()`)."""
    workload: Workload
    engine: str
    precision: str
    model: torch.nn.Module
    batch: dict
    size: str = "tiny"
    target: str = "cpu"
    options: dict = field(default_factory=dict)
    mode: str = ""
    sessions: dict = field(default_factory=dict)       # phase ("step", "prefill", "decode") -> recording session
    compiles: list = field(default_factory=list)       # graphs Dynamo compiled during each call of `step`
    calls: dict = field(default_factory=dict)          # phase -> [(xbench specialisation, times it ran)], last step

    def __post_init__(self):
        if self.engine not in ENGINES:
            raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {self.engine!r}")
        self.mode = self.mode or self.workload.mode
        self.base = self.model
        self.base.train(self.mode == "train")
        if self.engine == "xbench":
            self.compiled = torch.compile(self.base, backend="xbench",
                                          options={"target": self.target, **self.options})
        elif self.engine == "inductor":
            self.compiled = torch.compile(self.base)
        else:
            self.compiled = self.base
        self.opt = torch.optim.SGD(self.base.parameters(), lr=LR, momentum=0.9) if self.mode == "train" else None
        self.args = inputs(self.batch, self.mode)
        self.tokens = 0

    @property
    def name(self) -> str:
        return f"{self.engine}/{self.precision}"

    @contextlib.contextmanager
    def _recording(self, phase: str):
        """Record the phase's graphs in its session, and which specialisations ran how often this time."""
        if self.engine != "xbench":
            yield
            return
        from ..torch import recording
        from .predict import compiled_programs
        rec = self.sessions.get(phase)
        if rec is None:
            rec = self.sessions[phase] = recording({"target": self.target, **self.options})
        before = {id(c): c.calls for c in compiled_programs(rec.session)}
        with rec:
            yield
        self.calls[phase] = [(c, c.calls - before.get(id(c), 0)) for c in compiled_programs(rec.session)
                             if c.calls > before.get(id(c), 0)]

    def step(self) -> dict[str, float]:
        """One unit of the mode's work; the seconds each phase took (`step`, or `prefill` and `decode`), and
        the CPU seconds of the process (all its threads) under `<phase>:cpu`: on a loaded machine wall time
        includes waiting for a core, CPU time only the work."""
        before = graphs_compiled()
        try:
            return self._decode() if self.mode == "decode" else self._step()
        finally:
            self.compiles.append(graphs_compiled() - before)

    def _step(self) -> dict[str, float]:
        t0, c0 = time.perf_counter(), time.process_time()
        with self._recording("step"):
            if self.mode == "train":
                with autocast(self.precision):
                    out = self.compiled(**self.args)
                out.loss.backward()
                self.opt.step()
                self.opt.zero_grad(set_to_none=False)
            else:
                with torch.no_grad(), autocast(self.precision):
                    out = self.compiled(**self.args)
        self.last = out
        return {"step": time.perf_counter() - t0, "step:cpu": time.process_time() - c0}

    def _decode(self) -> dict[str, float]:
        import transformers
        prompt = self.args["input_ids"]
        batch, length = prompt.shape
        n = self.workload.decode_tokens[SIZES.index(self.size)]
        with torch.no_grad(), autocast(self.precision):
            t0, c0 = time.perf_counter(), time.process_time()
            cache = transformers.StaticCache(config=self.base.config, max_cache_len=length + n)
            with self._recording("prefill"):
                out = self.compiled(input_ids=prompt, cache=cache, use_cache=True,
                                    position_ids=torch.arange(length).unsqueeze(0))
            token = out.logits[:, -1].argmax(-1, keepdim=True)
            t1, c1 = time.perf_counter(), time.process_time()
            tokens, logits = [token], [out.logits[:, -1].float()]
            with self._recording("decode"):
                for i in range(n - 1):
                    out = self.compiled(input_ids=token, cache=cache, use_cache=True,
                                        position_ids=torch.tensor([[length + i]]))
                    token = out.logits[:, -1].argmax(-1, keepdim=True)
                    tokens.append(token)
                    logits.append(out.logits[:, -1].float())
            t2, c2 = time.perf_counter(), time.process_time()
        self.tokens = batch * (n - 1)
        self.last = (torch.cat(tokens, 1), torch.stack(logits, 1))
        return {"prefill": t1 - t0, "decode": t2 - t1, "prefill:cpu": c1 - c0, "decode:cpu": c2 - c1}


def runs(w: Workload, size: str, engines=ENGINES, precisions=PRECISIONS, *, seed: int = 0, target: str = "cpu",
         options: dict | None = None) -> list[Run]:
    """One `Run` per engine and precision, every model a copy of the same weights. Dynamo's caches are reset
    first: it reuses a graph compiled for another instance of the same model class with the same backend and
    options, and then xbench's recording of this run's graphs (the predictions' input) would stay empty."""
    import torch._dynamo

    from .workloads import build
    torch._dynamo.reset()
    model, batch = build(w.name, size, seed)
    out = []
    for precision in precisions:
        for engine in engines:
            out.append(Run(w, engine, precision, copy.deepcopy(model), batch, size, target, dict(options or {})))
    return out
