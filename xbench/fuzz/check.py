"""`assert_agrees(op, arrays, backends)`: the fuzzer's judgement of one operator, for regression tests."""
from __future__ import annotations

import inspect
import textwrap

import numpy as np

from .oracle import expected, judge

OPTIONS = {"cuda": {"ptx": False}}
PRELUDE = "import numpy as np\nimport xbench as xb\nfrom xbench import Tensor\n\n"


def _source_of(op) -> tuple[str, dict]:
    fn = op.fn
    src = PRELUDE + textwrap.dedent(inspect.getsource(fn))
    consts = {n: v for n, v in fn.__globals__.items() if n in fn.__code__.co_names and isinstance(v, np.ndarray)}
    return src, consts


def outcomes(op, arrays, backends=("cpu", "cuda", "ascend"), isolate: bool = False,
             timeout: float = 300.0) -> dict[str, tuple[str, str]]:
    """{backend: (kind, message)}: kind ok, wrong, error, unsupported, crash or hang (the last two only with
    `isolate`, which runs the backends in a child process)."""
    from ..errors import BackendError
    from .worker import Worker, _unsupported
    arrays = [np.asarray(a) for a in arrays]
    graph = op.trace(*arrays)
    exp = expected(graph, arrays)
    res = {}
    worker = None
    try:
        for b in backends:
            if isolate:
                if worker is None:
                    worker = Worker()
                src, consts = _source_of(op)
                out = worker.run(src, consts, arrays, b, timeout, OPTIONS.get(b), name=op.fn.__name__)
                if out.kind != "ok":
                    res[b] = (out.kind, out.error)
                    continue
                outs = out.outputs
            else:
                try:
                    outs = op.compile(b, *arrays, **OPTIONS.get(b, {})).run(*arrays)
                except BackendError as exc:
                    res[b] = ("unsupported" if _unsupported(exc) else "error", f"{type(exc).__name__}: {exc}")
                    continue
                except Exception as exc:
                    res[b] = ("error", f"{type(exc).__name__}: {exc}")
                    continue
            v = judge(exp, list(outs))
            res[b] = ("ok", "") if v.ok else ("wrong", v.message)
    finally:
        if worker is not None:
            worker.close()
    return res


def assert_agrees(op, arrays, backends=("cpu", "cuda", "ascend"), isolate: bool = False) -> None:
    """Every backend gives the reference's values (on the elements the fuzzer's oracle judges)."""
    res = outcomes(op, arrays, backends, isolate)
    bad = {b: r for b, r in res.items() if r[0] != "ok"}
    assert not bad, "; ".join(f"{b}: {k}: {m}" for b, (k, m) in bad.items())
