"""Input values for generated operators: seeded numpy recipes, with the special values of each dtype mixed in.

A `Recipe` makes its array deterministically and writes itself as numpy code, so a regression test saved from a
failure holds the same values in a line a person can read (`np.random.default_rng(3).standard_normal(...)`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..dtypes import FLOATS, INTS, to_numpy

# special values: the edges where backends disagree (signed zeros, infinities, NaN, the largest and the
# subnormal magnitudes, ties of rounding, the integer extremes)
SPECIAL_FLOATS = {
    "float32": (np.nan, np.inf, -np.inf, 0.0, -0.0, 3.0e38, -3.0e38, 1e-40, -1e-42, 1.1754944e-38, 0.5, -0.5,
                1.5, 2.5, -2.5, 1e6, -3e7, 16777217.0, 1.0, -1.0, 1e-30),
    "float64": (np.nan, np.inf, -np.inf, 0.0, -0.0, 1e308, -1e308, 5e-324, 2.2250738585072014e-308, 0.5, -0.5,
                2.5, -2.5, 1e15, 1.0, -1.0, 9007199254740993.0),
    "float16": (np.nan, np.inf, -np.inf, 0.0, -0.0, 65504.0, -65504.0, 6e-8, 6.1e-5, 0.5, -0.5, 2.5, -2.5, 1.0,
                -1.0, 2049.0),
    "bfloat16": (np.nan, np.inf, -np.inf, 0.0, -0.0, 3.0e38, -3.0e38, 1e-40, 0.5, -0.5, 2.5, -2.5, 1.0, -1.0,
                 257.0),
}


def special_ints(dtype: str) -> tuple[int, ...]:
    info = np.iinfo(dtype)
    return (int(info.min), int(info.max), 0, -1 if info.min < 0 else 1, 1, int(info.min) + 1, 2, -2 if info.min < 0
            else 3)


def np_code(dtype: str) -> str:
    return "ml_dtypes.bfloat16" if dtype == "bfloat16" else "np.bool_" if dtype == "bool" else f"np.{dtype}"


def _num(v) -> str:
    v = float(v) if isinstance(v, (float, np.floating)) else v
    if isinstance(v, float):
        if v != v:
            return "np.nan"
        if v in (np.inf, -np.inf):
            return "np.inf" if v > 0 else "-np.inf"
        if v == 0 and np.signbit(v):
            return "-0.0"
        return repr(v)
    return repr(int(v)) if not isinstance(v, (bool, np.bool_)) else repr(bool(v))


@dataclass(frozen=True, eq=False)
class Recipe:
    """`kind` in normal (scale), uniform (lo, hi), wide (lo, hi: log10 magnitudes, random signs), ints (lo, hi),
    bools (p), arange, full (value) or literal (the array itself); `specials` overwrite flat positions."""
    shape: tuple[int, ...]
    dtype: str
    kind: str
    seed: int = 0
    params: tuple = ()
    specials: tuple[tuple[int, object], ...] = ()
    data: np.ndarray | None = field(default=None, repr=False)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def base(self) -> np.ndarray:
        rng = np.random.default_rng(self.seed)
        k, p, s = self.kind, self.params, self.shape
        if k == "literal":
            return np.asarray(self.data).reshape(s)
        if k == "normal":
            a = rng.standard_normal(s) * p[0]
        elif k == "uniform":
            a = rng.uniform(p[0], p[1], s)
        elif k == "wide":
            a = np.where(rng.random(s) < 0.5, -1.0, 1.0) * 10.0 ** rng.uniform(p[0], p[1], s)
        elif k == "ints":
            a = rng.integers(p[0], p[1], s, dtype=np.int64, endpoint=True)
        elif k == "bools":
            a = rng.random(s) < p[0]
        elif k == "arange":
            a = np.arange(self.size).reshape(s) % p[0] - p[1]
        elif k == "full":
            a = np.full(s, p[0])
        else:
            raise ValueError(f"unknown recipe kind {k!r}")
        with np.errstate(over="ignore", invalid="ignore"):
            return np.asarray(a).astype(to_numpy(self.dtype) if self.dtype != "bool" else np.bool_)

    def make(self) -> np.ndarray:
        a = self.base()
        if self.specials:
            a = a.copy()
            flat = a.reshape(-1)
            with np.errstate(over="ignore", invalid="ignore"):
                for i, v in self.specials:
                    flat[i] = v
        return a

    def code(self) -> str:
        """Numpy code making the array (a literal for `literal` recipes)."""
        k, p, s, dt = self.kind, self.params, self.shape, np_code(self.dtype)
        rng = f"np.random.default_rng({self.seed})"
        if k == "literal":
            a = np.asarray(self.data)
            flat = ", ".join(_num(v) for v in a.reshape(-1).tolist())
            text = f"np.array([{flat}], dtype={dt}).reshape({s!r})"
        elif k == "normal":
            text = f"({rng}.standard_normal({s!r}) * {p[0]!r}).astype({dt})"
        elif k == "uniform":
            text = f"{rng}.uniform({p[0]!r}, {p[1]!r}, {s!r}).astype({dt})"
        elif k == "wide":
            text = (f"_wide({rng}, {s!r}, {p[0]!r}, {p[1]!r}).astype({dt})")
        elif k == "ints":
            text = f"{rng}.integers({p[0]!r}, {p[1]!r}, {s!r}, dtype=np.int64, endpoint=True).astype({dt})"
        elif k == "bools":
            text = f"({rng}.random({s!r}) < {p[0]!r})"
        elif k == "arange":
            text = f"(np.arange({self.size}).reshape({s!r}) % {p[0]!r} - {p[1]!r}).astype({dt})"
        elif k == "full":
            text = f"np.full({s!r}, {_num(p[0])}).astype({dt})"
        else:
            raise ValueError(k)
        if self.specials:
            at = [i for i, _ in self.specials]
            vals = ", ".join(_num(v) for _, v in self.specials)
            text = f"_put({text}, {at!r}, [{vals}])"
        return text

    def needs(self) -> set[str]:
        """Helpers the code uses."""
        out = set()
        if self.kind == "wide":
            out.add("_wide")
        if self.specials:
            out.add("_put")
        if self.dtype == "bfloat16":
            out.add("ml_dtypes")
        return out


HELPERS = {
    "_put": "def _put(a, at, values):\n    a = a.copy()\n    a.reshape(-1)[at] = values\n    return a\n",
    "_wide": "def _wide(rng, shape, lo, hi):\n    return np.where(rng.random(shape) < 0.5, -1.0, 1.0) * "
             "10.0 ** rng.uniform(lo, hi, shape)\n",
}


def literal(values: np.ndarray) -> Recipe:
    a = np.asarray(values)
    from ..dtypes import canonical
    return Recipe(tuple(a.shape), str(canonical(a.dtype)), "literal", data=a.copy())


def random_recipe(rng: np.random.Generator, shape: tuple[int, ...], dtype: str, role: str = "any",
                  specials: float = 0.35) -> Recipe:
    """Values for an input of `shape` and `dtype`. `role`: any, positive (logs, roots, divisors), index
    (`(lo, hi)` range given by the caller through `ints`), or small (exponents, shift counts)."""
    seed = int(rng.integers(0, 2**31))
    n = int(np.prod(shape, dtype=np.int64))
    if dtype == "bool":
        return Recipe(shape, dtype, "bools", seed, (float(rng.choice([0.1, 0.5, 0.9])),))
    if dtype in INTS:
        info = np.iinfo(dtype)
        if role == "small":
            r = Recipe(shape, dtype, "ints", seed, (0, min(7, int(info.max))))
        elif role == "positive":
            r = Recipe(shape, dtype, "ints", seed, (1, min(20, int(info.max))))
        else:
            choice = rng.choice(["small", "mid", "full"], p=[0.55, 0.25, 0.2])
            lo, hi = {"small": (max(-10, int(info.min)), 10), "mid": (max(-1000, int(info.min)),
                                                                         min(1000, int(info.max))),
                      "full": (int(info.min), int(info.max))}[choice]
            r = Recipe(shape, dtype, "ints", seed, (lo, hi))
        if n and role == "any" and rng.random() < specials:
            r = _sprinkle(rng, r, special_ints(dtype), n)
        return r
    assert dtype in FLOATS, dtype
    if role == "positive":
        r = Recipe(shape, dtype, "uniform", seed, (0.25, 4.0))
    elif role == "small":
        r = Recipe(shape, dtype, "uniform", seed, (-2.0, 2.0))
    else:
        choice = rng.choice(["normal", "ints", "wide", "uniform"], p=[0.5, 0.2, 0.15, 0.15])
        if choice == "normal":
            r = Recipe(shape, dtype, "normal", seed, (float(rng.choice([1.0, 0.01, 3.0, 100.0])),))
        elif choice == "ints":
            r = Recipe(shape, dtype, "ints", seed, (-8, 8))
        elif choice == "wide":
            top = {"float16": 4.0, "bfloat16": 30.0, "float32": 30.0, "float64": 100.0}[dtype]
            r = Recipe(shape, dtype, "wide", seed, (-top / 2, top))
        else:
            r = Recipe(shape, dtype, "uniform", seed, (-1.0, 1.0))
        if n and rng.random() < specials:
            r = _sprinkle(rng, r, SPECIAL_FLOATS[dtype], n)
    return r


def _sprinkle(rng, r: Recipe, pool, n: int) -> Recipe:
    k = int(min(n, max(1, rng.integers(1, 6) if n < 64 else int(n * rng.choice([0.001, 0.01, 0.05])) + 1)))
    at = rng.choice(n, size=k, replace=False) if k < n else np.arange(n)
    vals = [pool[int(rng.integers(0, len(pool)))] for _ in range(k)]
    return Recipe(r.shape, r.dtype, r.kind, r.seed, r.params, tuple((int(i), v) for i, v in zip(at, vals)))
