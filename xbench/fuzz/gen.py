"""Random well-typed operators over the language's surface.

The generator builds a straight-line operator body one statement at a time. Each candidate statement is the
text a user would write (`xb.sum(t1, axis=-1, keepdims=True)`, `a[1::2, None] // 3`, `x @ W0`); it is evaluated
at once on traced tensors, so the language's own rules decide what is well-typed: a candidate the language
refuses with an `XbenchError` is dropped and another drawn. Any other exception while tracing is a bug of the
front end and is recorded (`Generator.frontend`).

Shapes mix 0-d and size-1 dims with odd sizes, broadcasting partners, and now and then sizes past the cpu
backend's parallel threshold (2**17 elements); values come from `values.random_recipe`, special values
included; partners of an operation are existing values, new inputs, captured numpy constants or Python
scalars.
"""
from __future__ import annotations

import traceback
from dataclasses import dataclass, field

import numpy as np

from ..dtypes import DTYPES, FLOATS, INTS
from ..errors import XbenchError
from .program import Input, Program, Stmt
from .values import Recipe, random_recipe

PARALLEL = 2 ** 17
DIMS = (1, 1, 1, 2, 2, 3, 3, 4, 5, 6, 7, 8, 9, 12, 13, 16, 17, 24, 31, 32, 33, 48, 64, 65, 100, 128, 129)
BIG_SHAPES = ((131072,), (131073,), (140001,), (2, 65536), (512, 300), (300, 517), (64, 2100), (4, 200, 170),
              (1, 131072), (2, 3, 22000), (257, 513), (1024, 129), (3, 1, 50000))
DTYPE_WEIGHTS = {"float32": 0.34, "float64": 0.08, "float16": 0.08, "bfloat16": 0.06, "int64": 0.1,
                 "int32": 0.1, "int16": 0.04, "int8": 0.05, "uint8": 0.05, "bool": 0.1}

UNARY_FLOAT = ("exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "reciprocal", "sin", "cos",
               "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf", "erfc",
               "erfinv", "sigmoid", "floor", "ceil", "round", "trunc", "isnan", "isinf", "isfinite", "signbit")
UNARY_ANY = ("abs", "sign", "square", "negative")
INFIX = ("+", "-", "*", "/", "//", "%", "**", "&", "|", "^", "<<", ">>", "==", "!=", "<", "<=", ">", ">=")
BINARY_FN = ("maximum", "minimum", "fmax", "fmin", "atan2", "hypot", "copysign", "fmod", "logical_and",
             "logical_or", "logical_xor", "power", "floor_divide", "remainder")
REDUCE = ("sum", "prod", "max", "min", "mean", "var", "std", "any", "all", "argmax", "argmin", "logsumexp")
FLOAT_SCALARS = (0.5, -1.5, 2.0, 3.0, -0.25, 1e-3, 1e4, 0.0, -0.0, 1.0, -1.0, "float('inf')", "-float('inf')",
                 "float('nan')", 1e30, 7.5)
INT_SCALARS = (0, 1, -1, 2, 3, -3, 5, 7, -8, 100, 2 ** 31, -(2 ** 31), 255)


@dataclass
class Value:
    name: str
    shape: tuple[int, ...]
    dtype: str


@dataclass
class Options:
    max_stmts: int = 7
    big: float = 0.1              # chance that the first input is past the parallel threshold
    max_elements: int = 4096      # for ordinary inputs
    dtypes: tuple[str, ...] = DTYPES


@dataclass
class Generator:
    rng: np.random.Generator
    opts: Options = field(default_factory=Options)
    frontend: list[tuple[str, str]] = field(default_factory=list)   # (statement, traceback) of front-end bugs

    # ---- the public entry --------------------------------------------------------------------------
    def program(self, seed: int) -> Program:
        from ..lang.trace import Trace
        b = _Builder(self, np.random.default_rng(seed))
        with Trace("fuzz"):
            b.start()
            n = int(b.rng.integers(1, self.opts.max_stmts + 1))
            tries = 0
            while len(b.stmts) < n and tries < 12 * n:
                tries += 1
                b.step()
            outs = b.outputs()
        return Program(b.inputs, b.consts, b.stmts, outs, seed)


class _Builder:
    def __init__(self, g: Generator, rng: np.random.Generator):
        self.g = g
        self.rng = rng
        self.inputs: list[Input] = []
        self.consts: dict[str, Recipe] = {}
        self.stmts: list[Stmt] = []
        self.values: list[Value] = []
        self.env: dict = {}
        import xbench
        self.ns = {"xb": xbench, "np": np}
        self.big = False

    # ---- random choices -----------------------------------------------------------------------------
    def choice(self, seq):
        return seq[int(self.rng.integers(0, len(seq)))]

    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def dtype(self) -> str:
        names = [d for d in DTYPE_WEIGHTS if d in self.g.opts.dtypes]
        w = np.array([DTYPE_WEIGHTS[d] for d in names])
        return names[int(self.rng.choice(len(names), p=w / w.sum()))]

    def shape(self, big: bool = False) -> tuple[int, ...]:
        if big:
            return self.choice(BIG_SHAPES)
        rank = int(self.rng.choice(5, p=[0.1, 0.25, 0.38, 0.2, 0.07]))
        for _ in range(20):
            s = tuple(self.choice(DIMS) for _ in range(rank))
            if self.chance(0.03) and rank:
                s = s[:-1] + (0,)
            if int(np.prod(s, dtype=np.int64)) <= self.g.opts.max_elements:
                return s
        return (3,) * rank

    def partner(self, shape: tuple[int, ...]) -> tuple[int, ...]:
        """A shape that broadcasts with `shape`."""
        s = list(shape)
        r = self.rng.random()
        if r < 0.3:
            return tuple(s)
        if r < 0.5 and s:
            return tuple(s[int(self.rng.integers(0, len(s) + 1)):])          # trailing dims
        if r < 0.75:
            return tuple(1 if self.chance(0.5) else n for n in s)
        if r < 0.85:
            return ()
        if len(s) < 4 and int(np.prod(s, dtype=np.int64)) * 3 <= 4 * PARALLEL:
            return (self.choice((1, 2, 3)),) + tuple(s)
        return tuple(s)

    # ---- names --------------------------------------------------------------------------------------
    def new_input(self, shape, dtype, role="any") -> str:
        name = "abcdefghijklmnopqrstuvw"[len(self.inputs)] if len(self.inputs) < 23 else f"in{len(self.inputs)}"
        from ..ir.graph import Var
        from ..lang.tensor import Tensor
        self.inputs.append(Input(name, tuple(shape), dtype, random_recipe(self.rng, tuple(shape), dtype, role)))
        self.env[name] = Tensor(Var(tuple(shape), dtype, hint=name))
        self.values.append(Value(name, tuple(shape), dtype))
        return name

    def new_const(self, shape, dtype, role="any") -> str:
        name = f"W{len(self.consts)}"
        r = random_recipe(self.rng, tuple(shape), dtype, role)
        self.consts[name] = r
        self.ns[name] = r.make()
        return name

    def start(self) -> None:
        self.big = self.chance(self.g.opts.big)
        self.new_input(self.shape(self.big), self.dtype())
        if self.chance(0.4):
            v = self.values[0]
            self.new_input(self.partner(v.shape), self.dtype() if self.chance(0.4) else v.dtype)

    def pick(self, pred=lambda v: True) -> Value | None:
        cands = [v for v in self.values if pred(v)]
        if not cands:
            return None
        w = np.arange(1, len(cands) + 1, dtype=np.float64) ** 1.5       # recent values more often
        return cands[int(self.rng.choice(len(cands), p=w / w.sum()))]

    def operand(self, like: Value, dtype: str | None = None, role: str = "any", shape=None) -> tuple[str, tuple]:
        """Text of a second operand for `like`: an existing value, a new input, a constant or a scalar.
        Returns (text, names used)."""
        shape = self.partner(like.shape) if shape is None else shape
        dtype = dtype or (like.dtype if self.chance(0.7) else self.dtype())
        r = self.rng.random()
        if r < 0.3:
            v = self.pick(lambda v: _broadcasts(v.shape, like.shape) and v.name != like.name)
            if v is not None:
                return v.name, (v.name,)
        if r < 0.5:
            return self.scalar(dtype), ()
        if r < 0.65:
            c = self.new_const(shape, dtype, role)
            return c, (c,)
        n = self.new_input(shape, dtype, role)
        return n, (n,)

    def scalar(self, dtype: str) -> str:
        if dtype == "bool":
            return self.choice(("True", "False"))
        if dtype in INTS and self.chance(0.8):
            return repr(self.choice(INT_SCALARS))
        v = self.choice(FLOAT_SCALARS)
        return v if isinstance(v, str) else repr(v)

    # ---- statements ---------------------------------------------------------------------------------
    def add(self, text: str, uses) -> Value | None:
        from ..lang.tensor import Tensor
        ns = dict(self.ns)
        ns.update(self.env)
        try:
            out = eval(text, ns)
        except XbenchError:
            return None
        except RecursionError:
            return None
        except Exception:
            self.g.frontend.append((text, traceback.format_exc(limit=6)))
            return None
        if not isinstance(out, Tensor):
            return None
        name = f"t{len(self.stmts)}"
        uses = tuple(dict.fromkeys(u for u in uses if u))
        self.stmts.append(Stmt(name, text, uses, tuple(out.shape), str(out.dtype)))
        self.env[name] = out
        self.values.append(Value(name, tuple(out.shape), str(out.dtype)))
        return self.values[-1]

    def step(self) -> None:
        kinds = {"unary": 12, "binary": 20, "where": 4, "cast": 5, "reduce": 9, "normalize": 6, "scan": 3,
                 "contract": 4, "movement": 12, "gather": 5, "sort": 2, "create": 2, "clip": 3, "scatter": 2,
                 "concat": 3, "pad": 3, "window": 2}
        names = list(kinds)
        w = np.array([kinds[k] for k in names], dtype=np.float64)
        kind = names[int(self.rng.choice(len(names), p=w / w.sum()))]
        getattr(self, "s_" + kind)()

    def s_unary(self):
        v = self.pick()
        if self.chance(0.75):
            fn = self.choice(UNARY_FLOAT)
            text = self.choice((f"xb.{fn}({v.name})",) * 3 + ((f"{v.name}.{fn}()",) if fn in
                                                              ("exp", "log", "sqrt", "tanh") else ()))
        else:
            fn = self.choice(UNARY_ANY + ("invert", "neg", "abs_builtin"))
            text = {"invert": f"~{v.name}", "neg": f"-{v.name}", "abs_builtin": f"abs({v.name})"}.get(
                fn, f"xb.{fn}({v.name})")
        self.add(text, (v.name,))

    def s_binary(self):
        a = self.pick()
        if self.chance(0.7):
            op = self.choice(INFIX)
            role = "small" if op in ("<<", ">>", "**") else "any"
            b, used = self.operand(a, role=role)
            if op in ("<<", ">>") and _is_scalar(b):
                b = str(int(self.rng.integers(0, 8)))
            text = f"{b} {op} {a.name}" if self.chance(0.25) else f"{a.name} {op} {b}"
        else:
            fn = self.choice(BINARY_FN)
            b, used = self.operand(a, role="small" if fn == "power" else "any")
            text = f"xb.{fn}({a.name}, {b})" if self.chance(0.8) else f"xb.{fn}({b}, {a.name})"
        self.add(text, (a.name,) + used)

    def s_where(self):
        c = self.pick()
        a, ua = self.operand(c)
        b, ub = self.operand(c)
        cond = self.choice((f"{c.name} > 0", f"{c.name} != {c.name}", f"xb.isnan({c.name})" if c.dtype in FLOATS
                            else f"{c.name} < 2", f"{c.name} == 0"))
        self.add(f"xb.where({cond}, {a}, {b})", (c.name,) + ua + ub)

    def s_cast(self):
        v = self.pick()
        d = self.dtype()
        text = self.choice((f"{v.name}.astype(xb.{d if d != 'bool' else 'bool_'})", f"xb.cast({v.name}, {d!r})"))
        self.add(text, (v.name,))

    def _axis(self, v: Value, allow_tuple=True):
        if not v.shape or self.chance(0.2):
            return None
        if allow_tuple and len(v.shape) > 1 and self.chance(0.25):
            k = int(self.rng.integers(1, len(v.shape) + 1))
            axes = sorted(self.rng.choice(len(v.shape), size=k, replace=False).tolist())
            return tuple(int(a) for a in axes)
        a = int(self.rng.integers(0, len(v.shape)))
        return a - len(v.shape) if self.chance(0.3) else a

    def s_reduce(self):
        v = self.pick()
        kind = self.choice(REDUCE)
        axis = self._axis(v, kind not in ("argmax", "argmin"))
        keep = self.chance(0.35)
        args = f"axis={axis!r}" + (", keepdims=True" if keep else "")
        if kind in ("var", "std") and self.chance(0.3):
            args += ", ddof=1"
        text = f"{v.name}.{kind}({args})" if kind not in ("logsumexp",) and self.chance(0.5) else \
            f"xb.{kind}({v.name}, {args})"
        self.add(text, (v.name,))

    def s_normalize(self):
        v = self.pick(lambda v: v.dtype in FLOATS) or self.pick()
        x = v.name
        axis = self._axis(v, False)
        k = f"axis={axis!r}, keepdims=True"
        text = self.choice((
            f"{x} / {x}.sum()", f"{x} / {x}.sum({k})", f"{x} - {x}.max({k})", f"xb.exp({x} - {x}.max({k}))",
            f"{x} * xb.rsqrt(({x} * {x}).mean(axis=-1, keepdims=True) + 1e-6)",
            f"({x} - {x}.mean({k})) / ({x}.std({k}) + 1e-5)", f"{x} - {x}.min()", f"{x} * {x}.mean()",
            f"xb.where(xb.isfinite({x} + 1), {x}, 0)", f"{x} / xb.sqrt(({x} * {x}).sum({k}))",
            f"{x}.sum({k}) - {x}.sum({k})", f"{x} + {x}.argmax()", f"xb.log(xb.exp({x}).sum({k}))",
        ))
        self.add(text, (x,))

    def s_scan(self):
        v = self.pick(lambda v: len(v.shape) > 0)
        if v is None:
            return
        fn = self.choice(("cumsum", "cumprod", "cummax", "cummin"))
        axis = int(self.rng.integers(-len(v.shape), len(v.shape)))
        self.add(f"xb.{fn}({v.name}, axis={axis})", (v.name,))

    def s_contract(self):
        v = self.pick(lambda v: len(v.shape) >= 1 and v.dtype != "bool")
        if v is None:
            return
        k = v.shape[-1]
        r = self.rng.random()
        n = self.choice((1, 3, 8, 17, 32))
        if r < 0.45:
            w, used = self._tensor((k, n), v.dtype)
            self.add(f"{v.name} @ {w}", (v.name,) + used)
        elif r < 0.6 and len(v.shape) >= 2:
            w, used = self._tensor((n, v.shape[-2]), v.dtype)
            self.add(f"{w} @ {v.name}", (v.name,) + used)
        elif r < 0.7:
            w, used = self._tensor((k,), v.dtype)
            self.add(f"xb.dot({v.name}, {w})" if len(v.shape) == 1 else f"{v.name} @ {w}", (v.name,) + used)
        elif r < 0.85 and len(v.shape) == 2:
            w, used = self._tensor((v.shape[1], n), v.dtype)
            spec = self.choice(("ij,jk->ik", "ij,jk->ki", "ij,jk->i"))
            self.add(f"xb.einsum({spec!r}, {v.name}, {w})", (v.name,) + used)
        elif len(v.shape) == 3:
            w, used = self._tensor((v.shape[0], v.shape[2], n), v.dtype)
            self.add(f"xb.einsum('bij,bjk->bik', {v.name}, {w})", (v.name,) + used)
        else:
            w, used = self._tensor(v.shape, v.dtype)
            self.add(f"xb.tensordot({v.name}, {w}, axes={len(v.shape)})", (v.name,) + used)

    def _tensor(self, shape, dtype, role="any") -> tuple[str, tuple]:
        v = self.pick(lambda u: u.shape == tuple(shape) and u.dtype == dtype)
        if v is not None and self.chance(0.5):
            return v.name, (v.name,)
        if self.chance(0.4):
            c = self.new_const(shape, dtype, role)
            return c, (c,)
        n = self.new_input(shape, dtype, role)
        return n, (n,)

    def s_movement(self):
        v = self.pick()
        x, s = v.name, v.shape
        r = self.rng.random()
        if r < 0.2:
            self.add(f"{x}.reshape({_factor(self.rng, int(np.prod(s, dtype=np.int64)))!r})", (x,))
        elif r < 0.35 and len(s) >= 2:
            perm = tuple(int(i) for i in self.rng.permutation(len(s)))
            self.add(self.choice((f"xb.transpose({x}, {perm!r})", f"{x}.T", f"{x}.swapaxes(0, -1)",
                                  f"xb.moveaxis({x}, 0, -1)")), (x,))
        elif r < 0.45 and s:
            self.add(f"xb.flip({x}, axis={int(self.rng.integers(-len(s), len(s)))})", (x,))
        elif r < 0.75 and s:
            self.add(f"{x}[{self._index(s)}]", (x,))
        elif r < 0.85:
            a = int(self.rng.integers(0, len(s) + 1))
            self.add(self.choice((f"{x}[None]", f"xb.expand_dims({x}, {a})", f"xb.squeeze({x})",
                                  f"{x}[..., None]")), (x,))
        else:
            target = self.partner(s)
            big = tuple(max(p, q) for p, q in zip(_pad_left(s, len(target)), _pad_left(target, len(s))))
            if int(np.prod(big, dtype=np.int64)) <= 8 * PARALLEL:
                self.add(f"xb.broadcast_to({x}, {big!r})", (x,))

    def _index(self, shape) -> str:
        parts = []
        for n in shape:
            r = self.rng.random()
            if r < 0.3 and n:
                i = int(self.rng.integers(-n, n))
                parts.append(str(i))
            elif r < 0.85:
                step = self.choice((1, 1, 1, 2, 3, -1, -2))
                a = self.choice((None, 0, 1, -1, n // 2, n + 3))
                b = self.choice((None, None, n, n - 1, -1, 2, 0))
                parts.append(_slice(a, b, step))
            else:
                parts.append(":")
            if self.chance(0.08):
                parts.append("None")
        if parts and self.chance(0.2):
            parts = parts[:len(parts) // 2] + ["..."]
        return ", ".join(parts) or "..."

    def s_gather(self):
        v = self.pick(lambda v: len(v.shape) >= 1 and all(v.shape))
        if v is None:
            return
        axis = int(self.rng.integers(0, len(v.shape)))
        n = v.shape[axis]
        ishape = self.choice(((), (1,), (3,), (5, 2), (7,), (int(self.rng.integers(1, 40)),)))
        dt = self.choice(("int64", "int32", "int16", "uint8"))
        name = self.new_input(ishape, dt, "index")
        lo, hi = (-n - 2, n + 2) if self.chance(0.4) else (0, n - 1)
        if dt == "uint8":
            lo = 0
        info = np.iinfo(dt)
        lo, hi = max(lo, int(info.min)), min(hi, int(info.max))
        inp = self.inputs[-1]
        self.inputs[-1] = Input(inp.name, inp.shape, inp.dtype,
                                Recipe(inp.shape, dt, "ints", inp.recipe.seed, (lo, hi)))
        r = self.rng.random()
        if r < 0.45:
            self.add(f"xb.take({v.name}, {name}, axis={axis})", (v.name, name))
        elif r < 0.7:
            self.add(f"{v.name}[{name}]" if axis == 0 else f"{v.name}[:, {name}]" if axis == 1 else
                     f"xb.take({v.name}, {name}, axis={axis})", (v.name, name))
        else:
            shape = tuple(self.choice((1, m)) if i != axis else self.choice((1, 3, m)) for i, m in enumerate(v.shape))
            self.inputs[-1] = Input(inp.name, shape, dt, Recipe(shape, dt, "ints", inp.recipe.seed, (max(lo, 0)
                                                                                                     if dt == "uint8"
                                                                                                     else lo, hi)))
            from ..ir.graph import Var
            from ..lang.tensor import Tensor
            self.env[name] = Tensor(Var(shape, dt, hint=name))
            self.values[-1] = Value(name, shape, dt)
            self.add(f"xb.take_along_axis({v.name}, {name}, axis={axis})", (v.name, name))

    def s_scatter(self):
        v = self.pick(lambda v: len(v.shape) >= 1 and all(v.shape) and v.dtype != "bool")
        if v is None:
            return
        n = v.shape[0]
        k = self.choice((1, 3, 6))
        idx = self.new_input((k,), "int64", "index")
        inp = self.inputs[-1]
        self.inputs[-1] = Input(inp.name, inp.shape, inp.dtype, Recipe((k,), "int64", "ints", inp.recipe.seed,
                                                                      (0, n - 1)))
        upd, used = self._tensor((k,) + v.shape[1:], v.dtype)
        self.add(f"xb.scatter_add({v.name}, {idx}, {upd}, axis=0)", (v.name, idx) + used)

    def s_sort(self):
        v = self.pick(lambda v: len(v.shape) >= 1 and v.dtype != "bool")
        if v is None:
            return
        axis = int(self.rng.integers(-len(v.shape), len(v.shape)))
        d = self.chance(0.5)
        r = self.rng.random()
        if r < 0.4:
            self.add(f"xb.sort({v.name}, axis={axis}, descending={d})", (v.name,))
        elif r < 0.7:
            self.add(f"xb.argsort({v.name}, axis={axis}, descending={d})", (v.name,))
        else:
            k = int(self.rng.integers(0, v.shape[axis] + 1))
            self.add(f"xb.topk({v.name}, {k}, axis={axis})[{int(self.chance(0.5))}]", (v.name,))

    def s_create(self):
        v = self.pick()
        s = v.shape
        r = self.rng.random()
        if r < 0.35 and s:
            self.add(f"{v.name} + xb.arange({s[-1]})", (v.name,))
        elif r < 0.6:
            self.add(f"xb.full({s!r}, {self.scalar(v.dtype)}) * {v.name}", (v.name,))
        elif r < 0.8:
            self.add(self.choice((f"xb.zeros_like({v.name}) + 1", f"xb.ones_like({v.name}, dtype=xb.float32)",
                                  f"xb.full_like({v.name}, 3)")), (v.name,))
        elif s:
            self.add(f"xb.iota({s!r}, {int(self.rng.integers(0, len(s)))}) * {v.name}", (v.name,))

    def s_clip(self):
        v = self.pick()
        lo, hi = self.scalar(v.dtype), self.scalar(v.dtype)
        if self.chance(0.3):
            t, used = self.operand(v)
            self.add(f"xb.clip({v.name}, {t}, {hi})", (v.name,) + used)
        else:
            self.add(self.choice((f"xb.clip({v.name}, {lo}, {hi})", f"{v.name}.clip({lo})",
                                  f"xb.clip({v.name}, None, {hi})")), (v.name,))

    def s_concat(self):
        v = self.pick(lambda v: len(v.shape) >= 1)
        if v is None:
            return
        axis = int(self.rng.integers(0, len(v.shape)))
        n = v.shape[axis]
        pieces, used = [v.name], [v.name]
        for _ in range(int(self.rng.integers(1, 3))):
            r = self.rng.random()
            if r < 0.3:
                sl = [":"] * len(v.shape)
                sl[axis] = self.choice(("0:0", f"{n}:", ":1", "::-1", "1:"))
                pieces.append(f"{v.name}[{', '.join(sl)}]")
            elif r < 0.6:
                other = self.pick(lambda u: u.name != v.name and len(u.shape) == len(v.shape) and all(
                    a == b for i, (a, b) in enumerate(zip(u.shape, v.shape)) if i != axis))
                pieces.append(other.name if other else f"{v.name} * 2")
                if other:
                    used.append(other.name)
            else:
                shape = tuple(m if i != axis else self.choice((1, 2, 5)) for i, m in enumerate(v.shape))
                w, u = self._tensor(shape, v.dtype if self.chance(0.7) else self.dtype())
                pieces.append(w)
                used += list(u)
        fn = self.choice(("concat", "concatenate"))
        if self.chance(0.2) and all(p == pieces[0] for p in pieces):
            self.add(f"xb.stack([{', '.join(pieces)}], axis={axis})", tuple(used))
        else:
            self.add(f"xb.{fn}([{', '.join(pieces)}], axis={axis})", tuple(used))

    def s_pad(self):
        v = self.pick(lambda v: len(v.shape) >= 1)
        if v is None:
            return
        mode = self.choice(("constant", "constant", "reflect", "edge", "circular"))
        widths = tuple((int(self.rng.integers(-1 if self.chance(0.2) else 0, 3)),
                        int(self.rng.integers(0, 3))) for _ in v.shape)
        extra = f", value={self.scalar(v.dtype)}" if mode == "constant" and self.chance(0.5) else ""
        self.add(f"xb.pad({v.name}, {widths!r}, mode={mode!r}{extra})", (v.name,))

    def s_window(self):
        v = self.pick(lambda v: len(v.shape) >= 1 and v.shape[-1] >= 2)
        if v is None:
            return
        w = int(self.rng.integers(1, min(v.shape[-1], 5) + 1))
        stride = self.choice((1, 1, 2))
        if len(v.shape) >= 2 and v.dtype != "bool" and self.chance(0.4):
            # a 1-d convolution: windows of (C, L) contracted with (O, C, w) weights
            c = v.shape[-2]
            k, used = self._tensor((self.choice((1, 2, 4)), c, w), v.dtype)
            self.add(f"xb.einsum('...clk,ock->...ol', xb.sliding_window({v.name}, ({w},), stride={stride}), {k})",
                     (v.name,) + used)
            return
        red = self.choice(("sum", "max", "mean"))
        self.add(f"xb.sliding_window({v.name}, ({w},), stride={stride}).{red}(axis=-1)", (v.name,))

    # ---- outputs ------------------------------------------------------------------------------------
    def outputs(self) -> list[str]:
        if not self.stmts:
            v = self.values[0]
            self.add(f"{v.name} * 2" if v.dtype != "bool" else f"~{v.name}", (v.name,))
        if not self.stmts:
            self.add(f"xb.asarray({self.new_const((3,), 'float32')})", tuple(self.consts))
        outs = [self.stmts[-1].name]
        others = [s.name for s in self.stmts[:-1]]
        for _ in range(int(self.rng.choice(4, p=[0.55, 0.25, 0.12, 0.08]))):
            if others:
                o = self.choice(others)
                if o not in outs:
                    outs.append(o)
        if self.chance(0.04):
            c = self.new_const(self.choice(((), (4,), (2, 3))), self.dtype())
            v = self.add(f"xb.asarray({c})", (c,))
            if v is not None:
                outs.append(v.name)
        if self.chance(0.03):
            outs.append(self.inputs[0].name)
        return outs


def _broadcasts(a, b) -> bool:
    return all(x == y or 1 in (x, y) for x, y in zip(reversed(a), reversed(b)))


def _pad_left(s, n):
    return (1,) * (n - len(s)) + tuple(s)


def _is_scalar(text: str) -> bool:
    return text[:1].isdigit() or text[:1] == "-" or text.startswith(("float(", "True", "False"))


def _slice(a, b, step) -> str:
    t = ("" if a is None else str(a)) + ":" + ("" if b is None else str(b))
    return t + (f":{step}" if step != 1 else "")


def _factor(rng, n: int) -> tuple[int, ...]:
    if n == 0:
        return (0, 3) if rng.random() < 0.5 else (0,)
    dims = []
    m = n
    for p in (2, 3, 5, 7, 11, 13):
        while m % p == 0 and rng.random() < 0.6:
            dims.append(p)
            m //= p
    dims.append(m)
    rng.shuffle(dims)
    out: list[int] = []
    for d in dims:
        if out and rng.random() < 0.5:
            out[-1] *= d
        else:
            out.append(d)
    if rng.random() < 0.3:
        out.insert(int(rng.integers(0, len(out) + 1)), 1)
    if rng.random() < 0.3 and out:
        out[int(rng.integers(0, len(out)))] = -1
    return tuple(out[:4]) if np.prod(out[:4]) == n or -1 in out[:4] else (n,)


__all__ = ["Generator", "Options", "Program", "Input", "Stmt"]
