"""The reference backend: a numpy interpreter of the graph IR in float64 (int64 for integers). It is the
ground truth every other backend is verified against, so it favours obviousness over speed."""
from __future__ import annotations

import numpy as np

from ...dtypes import is_float, to_numpy
from ...ir.graph import Graph
from ...ir.kernel import Kernel, Program
from ...ir.schedule import Knob, Schedule
from .. import Artifact, KernelInfo


def exact(arr: np.ndarray) -> np.ndarray:
    """An input as the reference computes with it: float64 for floats, int64 for ints, bool for bools."""
    arr = np.asarray(arr)
    if arr.dtype == np.bool_:
        return arr
    if np.issubdtype(arr.dtype, np.integer):
        return arr.astype(np.int64)
    return arr.astype(np.float64)


def evaluate(graph: Graph, *arrays: np.ndarray) -> list[np.ndarray]:
    """Run the graph on numpy arrays; results in float64 / int64 / bool. Integer values of a narrower type wrap
    to it after every primitive, as PyTorch's do (int8 100 + 100 is -56 before anything reads it)."""
    env: dict[int, np.ndarray] = {v.id: exact(a) for v, a in zip(graph.inputs, arrays)}
    for e in graph.eqns:
        ins = [env[v.id] for v in e.inputs]
        out = e.prim.reference(*ins, **e.params)
        outs = out if e.prim.multiple_results else (out,)
        for v, o in zip(e.outputs, outs):
            o = exact(np.asarray(o))
            if v.dtype in NARROW_INTS:
                o = o.astype(v.dtype).astype(np.int64)
            env[v.id] = o
    return [env[v.id] for v in graph.outputs]


NARROW_INTS = ("int8", "uint8", "int16", "int32")


class ReferenceArtifact(Artifact):
    def run(self, *arrays: np.ndarray) -> list[np.ndarray]:
        outs = evaluate(self.program.graph, *self.check_inputs(arrays))
        result = []
        for o, name in zip(outs, self.program.outputs):
            dt = self.program.buffers[name].dtype
            if is_float(dt):
                with np.errstate(over="ignore", invalid="ignore"):
                    result.append(o.astype(to_numpy(dt)))
            else:
                result.append(o.astype(to_numpy(dt)))
        return result

    def run_exact(self, *arrays: np.ndarray) -> list[np.ndarray]:
        return evaluate(self.program.graph, *self.check_inputs(arrays))


class ReferenceBackend:
    name = "reference"

    def available(self) -> tuple[bool, str]:
        return True, "numpy"

    def knobs(self, kernel: Kernel, program: Program | None = None) -> dict[str, Knob]:
        return {}

    def default_schedule(self, kernel: Kernel) -> Schedule:
        return Schedule()

    def compile(self, program: Program, schedules=None, **options) -> ReferenceArtifact:
        src = "# the reference backend interprets the graph IR with numpy in float64\n" + program.graph.text()
        infos = [KernelInfo(k.name, k.kind, k.text(), Schedule()) for k in program.kernels]
        return ReferenceArtifact(self.name, program, src, infos, {"engine": f"numpy {np.__version__}"})


backend = ReferenceBackend()
