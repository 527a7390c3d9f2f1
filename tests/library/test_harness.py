"""The library harness itself: it must pass correct operators, fail wrong ones (values, result dtypes,
gradients), say why a backend declines, and render the grid it reports."""
import dataclasses
import json
import math

import numpy as np
import pytest

import xbench as xb
from xbench import ops
from xbench.library import coverage, harness
from xbench.ops import SHAPES, NoTorch, Sample
from xbench.ops import _samples as S


def _no_scalars(gen):
    """The harness tests check the harness, not the backends' handling of 0-d arrays (the grid does)."""
    return lambda dtype, shapes: (s for s in gen(dtype, shapes) if all(np.ndim(a) for a in s.args))


@pytest.fixture
def registered():
    """Register throwaway operators under unique names; remove them afterwards."""
    added = []

    def reg(fn, **kw):
        name = f"_test_{fn.__name__}"
        kw.setdefault("samples", _no_scalars(S.unary()))
        op = ops.register("unary", name=name, **kw)(fn)
        added.append(name)
        return name, op
    yield reg
    for n in added:
        ops.REGISTRY.pop(n, None)
        ops.INFO.pop(n, None)


def test_a_correct_operator_passes_everywhere(registered):
    def square(input):
        return input * input
    name, _ = registered(square, torch="torch.square", grad=True)
    for backend in ("reference", "cpu"):
        c = harness.check(name, backend, "float32", "quick")
        assert c.status == "pass", c.reason
        assert c.samples >= 6 and c.ratio <= 1.0
    assert harness.check(name, "torch", "float16", "quick").status == "pass"
    g = harness.check(name, "grad", "float64", "quick")
    assert g.status == "pass" and g.samples == harness.GRAD_SAMPLES, g.reason


def test_the_torch_check_catches_wrong_values_and_wrong_result_dtypes(registered):
    def not_quite_sin(input):
        return xb.sin(input) * 1.001
    name, _ = registered(not_quite_sin, torch="torch.sin")
    c = harness.check(name, "torch", "float64", "quick")
    assert c.status == "fail" and "differs" in c.reason and c.error > 1e-4

    def floor_keeps_float(input):               # torch.floor keeps int32; this makes float32
        return xb.floor(input.astype("float32"))
    name, _ = registered(floor_keeps_float, torch="torch.floor", dtypes=("int32",))
    c = harness.check(name, "torch", "int32", "quick")
    assert c.status == "fail" and "result dtypes differ" in c.reason, c.reason


def test_the_gradient_check_catches_a_gradient_that_finite_differences_disagree_with(registered):
    def staircase(input):                       # ~ input, but the autodiff gradient of floor is 0
        return xb.floor(input * 1e7) * 1e-7
    name, _ = registered(staircase, torch=NoTorch("test"), grad=True)
    c = harness.check(name, "grad", "float64", "quick")
    assert c.status == "fail" and "finite differences" in c.reason, c.reason


def test_the_gradient_check_compares_with_torch_autograd(registered):
    def cube(input):
        return input * input * input
    name, _ = registered(cube, torch=lambda torch, input: input ** 3 + 0.01 * torch.sin(input), grad=True)
    c = harness.check(name, "grad", "float64", "quick")
    assert c.status == "fail" and "torch.autograd" in c.reason, c.reason


def test_outputs_pytorch_does_not_differentiate_get_no_cotangent_against_torch_autograd(registered):
    def doubled_and_total(input):               # like native_layer_norm's statistics: detached in PyTorch
        return input * 2.0, input.sum()
    name, _ = registered(doubled_and_total, grad=True,
                         torch=lambda torch, input: (input * 2.0, input.sum().detach()))
    c = harness.check(name, "grad", "float64", "quick")
    assert c.status == "pass" and "does not differentiate output(s) 1" in c.notes, c.reason

    def tripled_and_total(input):
        return input * 3.0, input.sum()
    name, _ = registered(tripled_and_total, grad=True,
                         torch=lambda torch, input: (input * 2.0 + input.detach(), input.sum().detach()))
    c = harness.check(name, "grad", "float64", "quick")
    assert c.status == "fail" and "torch.autograd" in c.reason, c.reason


def test_a_wrong_backend_result_fails_with_its_worst_error(registered, monkeypatch):
    def double(input):
        return input * 2.0
    name, op = registered(double)

    class Skewed:                               # the cpu result, off by 1 %
        def __init__(self, art):
            self.art = art

        def run(self, *arrays):
            return [o * np.float32(1.01) for o in self.art.run(*arrays)]

        def __getattr__(self, name):
            return getattr(self.art, name)

    monkeypatch.setattr(op, "compile", lambda backend, *a, **k: Skewed(type(op).compile(op, backend, *a, **k)))
    c = harness.check(name, "cpu", "float32", "quick")
    assert c.status == "fail" and 0 < c.error < math.inf and c.ratio > 1 and "outside tolerance" in c.reason


def test_a_declining_backend_gives_unsupported_with_its_reason(registered):
    def neg(input):
        return -input
    name, _ = registered(neg)
    c = harness.check(name, "cuda", "bfloat16", "tiny", limit=1)
    assert c.status == "unsupported" and "bfloat16" in c.reason


def test_dtypes_an_operator_does_not_take_are_unsupported_with_a_reason(registered):
    def ident(input):
        return input + 0
    name, _ = registered(ident, dtypes=("float32",))
    c = harness.check(name, "cpu", "int32")
    assert c.status == "unsupported" and "takes float32" in c.reason


def test_an_operator_without_samples_fails_rather_than_passing_silently(registered):
    def nothing(input):
        return input
    name, _ = registered(nothing, samples=lambda dtype, shapes: iter(()))
    assert harness.check(name, "cpu", "float32").status == "fail"


def test_registry_metadata_aliases_and_errors():
    softmax = ops.info("_softmax")
    assert softmax.category == "softmax" and softmax.torch == "torch.ops.aten._softmax"
    assert ops.get("absolute") is ops.get("abs") and "absolute" in ops.info("abs").aliases
    assert "abs" in ops.list("unary") and "abs" in ops.list("unary", aliases=False)
    assert "absolute" not in ops.list(aliases=False)
    with pytest.raises(ValueError, match="unknown operator category"):
        ops.register("nonsense")
    with pytest.raises(AttributeError, match="did you mean"):
        ops.get("softmaxx")
    with pytest.raises(ValueError, match="not parameters"):
        ops.register("unary", name="_test_bad_grad", grad=("x",))(lambda input: input)


def test_samples_are_deterministic_and_cover_the_promised_cases():
    shapes = SHAPES["quick"]
    a = list(S.unary()("float16", shapes))
    b = list(S.unary()("float16", shapes))
    assert len(a) == len(b) and all(np.array_equal(x.args[0], y.args[0], equal_nan=True) for x, y in zip(a, b))
    notes = [s.note for s in a]
    assert "non-contiguous" in notes and "empty" in notes and "special values" in notes
    nc = a[notes.index("non-contiguous")].args[0]
    assert not nc.flags.c_contiguous
    sv = a[notes.index("special values")].args[0].astype(np.float64)
    assert np.isnan(sv).any() and np.isposinf(sv).any() and np.isneginf(sv).any()
    assert (sv == 0).any() and np.signbit(sv[sv == 0]).any()
    assert not a[notes.index("special values")].grad
    x = S.tensor(shapes, "float32", (1000,), "t", avoid=(0.0,), margin=0.1)
    assert np.abs(x).min() >= 0.1
    assert S.noncontig(np.arange(6.0)).flags.c_contiguous is False
    assert isinstance(S.tensor(shapes, "bool", (), "b"), np.ndarray)


def test_grid_renderings_and_the_command_line(tmp_path, capsys):
    no_scalars = dataclasses.replace(SHAPES["quick"], pointwise=((17,), (16, 17)))   # rendering, not backends
    grid = coverage.run(ops=["neg", "softmax"], backends=["reference", "cpu"], dtypes=["float32", "int32"],
                        shapes=no_scalars, progress=False, save=False)
    assert not grid.failures and {c.status for c in grid.cells} <= {"pass", "unsupported"}
    assert grid.cell("neg", "grad", "float64") is None              # float64 was not asked for
    data = json.loads(grid.to_json())
    assert len(data["cells"]) == len(grid.cells) and data["backends"] == ["reference", "cpu", "torch", "grad"]
    md = grid.to_markdown()
    assert "| `neg` | unary | int32 |" in md
    assert grid.to_csv().splitlines()[0].startswith("op,backend,dtype,status")
    text = grid.text()
    assert "neg" in text and "pass" in text
    out = tmp_path / "grid.md"
    coverage.main(["--ops", "neg", "--backends", "cpu", "--dtypes", "float64", "--quick", "--out", str(out)])
    assert out.read_text().startswith("# xbench library coverage")
    assert "neg" in capsys.readouterr().out
    with pytest.raises(ValueError, match=r"\.json, \.csv"):
        grid.save(tmp_path / "grid.xlsx")


def test_sample_repr_names_shapes_and_statics():
    s = Sample((np.zeros((2, 3), np.float32), 2.5), {"dim": -1}, note="x")
    assert repr(s) == "(float32[2, 3], 2.5, dim=-1) [x]"
