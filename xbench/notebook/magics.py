"""`%%tensorop` and `%xbench`: the IPython magics of xbench (`%load_ext xbench` registers them)."""
from __future__ import annotations

import copy
from typing import Any

from IPython.core.magic import Magics, cell_magic, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import display

from .. import dtypes as D
from ..errors import XbenchError
from . import runner
from .cell import CellError, CellSource
from .progress import CellProgress
from .runner import DEFAULT_BUDGET, DEFAULT_SIZES, STRATEGIES, OperatorResult, Settings
from .view import SHOW_CHOICES, CellView, ErrorView, session_text


class OptionError(XbenchError, ValueError):
    """A %%tensorop or %xbench option that cannot be used; the message says what to write."""


def parse_list(text: str | None) -> list[str] | None:
    if text is None:
        return None
    return [t.strip() for t in text.split(",") if t.strip()]


def parse_sizes(text: str | None) -> dict[str, int]:
    """`N=4096,D=1024` -> {"N": 4096, "D": 1024}."""
    if not text:
        return {}
    out = {}
    for part in text.split(","):
        name, eq, value = part.strip().partition("=")
        name = name.strip()
        try:
            size = int(value.strip().replace("_", "")) if eq else -1
        except ValueError:
            size = -1
        if not name.isidentifier() or size < 1:
            raise OptionError(f"--sizes: cannot read {part.strip()!r}",
                              hint="give NAME=SIZE pairs separated by commas, e.g. --sizes N=4096,D=1024")
        out[name] = size
    return out


def check_backends(names: list[str] | None) -> list[str] | None:
    if names is None:
        return None
    if not names:
        raise OptionError("--backends is empty", hint="e.g. --backends cpu,cuda,ascend")
    return names


def check_targets(names: list[str] | None) -> list[str] | None:
    if names is None:
        return None
    from ..hw import list_targets
    known = list_targets()
    bad = [n for n in names if n not in known]
    if bad or not names:
        raise OptionError(f"--targets: unknown target {', '.join(map(repr, bad)) or '(none given)'}",
                          hint=f"known targets: {', '.join(known)}")
    return names


def check_dtype(name: str | None) -> str | None:
    if name is None:
        return None
    try:
        return str(D.canonical(name))
    except (ValueError, TypeError):
        raise OptionError(f"--dtype: unknown element type {name!r}", hint=f"use one of {', '.join(D.DTYPES)}") \
            from None


def check_budget(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        budget = int(text.replace("_", ""))
    except ValueError:
        budget = 0
    if budget < 1:
        raise OptionError(f"--budget: cannot read {text!r}",
                          hint="give the number of candidates to evaluate per kernel, e.g. --budget 8")
    return budget


def check_strategy(name: str | None) -> str | None:
    if name is not None and name not in STRATEGIES:
        raise OptionError(f"--strategy: there is no {name!r} search", hint=f"use one of {', '.join(STRATEGIES)}")
    return name


def check_show(name: str | None) -> str | None:
    if name is not None and name not in SHOW_CHOICES:
        raise OptionError(f"--show: there is no {name!r} tab", hint=f"use one of {', '.join(SHOW_CHOICES)}")
    return name


@magics_class
class XbenchMagics(Magics):
    """The magics of one IPython session; `defaults` are the session settings `%xbench` shows and sets."""

    def __init__(self, shell: Any = None, **kwargs: Any):
        super().__init__(shell, **kwargs)
        self.defaults = Settings()
        self.compiled: dict[str, OperatorResult] = {}
        self.last_error: CellError | None = None
        self.last_view: CellView | None = None

    # ---- %%tensorop -------------------------------------------------------------------------------------------
    @magic_arguments()
    @argument("--backends", "-b", metavar="LIST",
              help="backends to compile for, comma-separated, e.g. cpu,cuda,ascend (default: every installed "
                   "backend, or the %%xbench session default)")
    @argument("--show", "-s", metavar="TAB",
              help=f"the tab to open first, and the text printed in plain-text outputs: {'|'.join(SHOW_CHOICES)}")
    @argument("--profile", "-p", action="store_true",
              help="also profile every backend that passed (xb.profile): metrics table and roofline")
    @argument("--sizes", metavar="DIMS",
              help=f"sizes of the dims in the annotations, e.g. N=4096,D=1024 (dims not given: "
                   f"{', '.join(map(str, DEFAULT_SIZES[:3]))}, ... in order, each dim a size of its own)")
    @argument("--targets", "-t", metavar="LIST",
              help="hardware targets for predictions and the roofline, e.g. h100,ascend-910b")
    @argument("--dtype", metavar="DTYPE",
              help="element type of the random inputs where the annotation names none (default float32)")
    @argument("--tune", action="store_true",
              help="after compiling, tune the schedule of every operator on the first backend (xb.tune) at these "
                   "sizes, with a progress bar, and add a Tuning tab; op(...) uses the best schedule from then on")
    @argument("--budget", metavar="N",
              help=f"with --tune: candidates evaluated per kernel (default {DEFAULT_BUDGET})")
    @argument("--strategy", metavar="NAME",
              help=f"with --tune: the search, {'|'.join(STRATEGIES)} (default auto: exhaustive when the space fits "
                   "the budget, else guided)")
    @cell_magic
    def tensorop(self, line: str, cell: str) -> None:
        """Compile every function defined in the cell as an xbench operator.

        Each function becomes an `Operator` in the notebook's namespace (`xb` and `Tensor` need no import; dims
        in `Tensor[N, D]` annotations need no declaration). The cell makes random inputs from the annotations,
        compiles every operator for each backend, checks each backend against the float64 reference, times what
        runs on this machine and publishes the result to the xbench panel. Its output is one widget with tabs:
        Summary, IR, the code of each backend (CPU, CUDA, PTX, Ascend C), Side by side, Resources, Metrics,
        Roofline, and Tuning with --tune (a backend without its hardware here, cuda or ascend, is tuned with the
        performance model for the first of --targets of its kind, and checks every candidate in its simulator at
        these sizes: keep them small).

            %%tensorop --backends cpu,cuda --show cuda
            def softmax(x: Tensor[N, D]) -> Tensor[N, D]:
                e = xb.exp(x - x.max(axis=-1, keepdims=True))
                return e / e.sum(axis=-1, keepdims=True)
        """
        try:
            settings = self._settings(line, "%%tensorop")
        except OptionError as exc:
            raise self._fail(CellError(str(exc), "")) from None
        number = getattr(self.shell, "execution_count", 0) if self.shell is not None else 0
        source = CellSource.from_cell(cell, self.shell, number)
        namespace = self.shell.user_ns if self.shell is not None else {}
        try:
            ops = source.run(namespace)
        except CellError as err:
            self._stale(self._defined(source), err)
            raise self._fail(err) from None
        notes = []
        unknown = runner.unknown_sizes(ops, settings.sizes)
        if unknown:
            raise self._fail(CellError(f"xbench: --sizes names {', '.join(unknown)}, which no operator in this cell "
                                       f"has in its annotations", ""))
        compilable = []
        for op in ops:
            _, missing = runner.tensor_params(op)
            if missing:
                notes.append(f"{op.name}: defined as an operator, not compiled (parameter "
                             f"{', '.join(missing)} has no Tensor[...] annotation); call it from another operator "
                             f"or on arrays")
            else:
                compilable.append(op)
        results = []
        show = settings.show or ("tuning" if settings.tune else None)
        progress = CellProgress(len(runner.steps(settings)) * len(compilable), self.shell)
        for op in compilable:
            try:
                result = runner.evaluate(op, settings, progress=progress.step)
            except Exception as exc:  # the user's own mistake, shown at their line
                progress.close()
                if results:           # what compiled before it still shows
                    display(CellView(results, show, notes))
                err = source.error(exc, f"operator {op.name}")
                self._stale([o.name for o in compilable[compilable.index(op):]], err)
                raise self._fail(err) from None
            self.compiled[op.name] = result
            results.append(result)
            self._publish(result)
        progress.close()
        self.last_error = None
        self.last_view = CellView(results, show, notes)
        display(self.last_view)

    def _fail(self, err: CellError) -> CellError:
        self.last_error = err
        if err.full:
            display(ErrorView(err.full))
        return err

    @staticmethod
    def _defined(source: CellSource) -> list[str]:
        """The functions the cell defines (read from its `def` lines when it does not parse)."""
        try:
            return source.defined_functions()
        except CellError:
            import re
            return re.findall(r"^def\s+([A-Za-z_]\w*)", source.text, flags=re.MULTILINE)

    def _stale(self, names: list[str], err: CellError) -> None:
        """Operators of this cell that the panel lists from an earlier run: each backend an error now (a run
        that raised leaves no pass on show)."""
        from .registry import registry
        reg = registry()
        first = err.short.splitlines()[0].removeprefix("xbench: ") if err.short else "the cell raised"
        for name in names:
            previous = reg.get(name)
            if previous is not None:
                reg.publish(runner.failed_record(previous, f"the last run of its cell raised: {first}"))

    def _publish(self, result: OperatorResult) -> None:
        from .registry import registry
        registry().publish(result.record())

    def _settings(self, line: str, magic: str) -> Settings:
        try:
            args = parse_argstring(self.tensorop, line)
        except Exception as exc:  # argparse's own message names the option
            raise OptionError(f"{magic}: {exc}", hint=f"see {magic}? for the options") from None
        s = copy.deepcopy(self.defaults)
        self._apply(s, args)
        if args.tune:
            s.tune = True
        if args.budget is not None:
            s.budget = check_budget(args.budget)
        if args.strategy is not None:
            s.strategy = check_strategy(args.strategy)
        if not s.tune:
            given = [o for o, v in (("--budget", args.budget), ("--strategy", args.strategy)) if v is not None]
            if given or args.show == "tuning":
                what = " and ".join(given) or "--show tuning"
                raise OptionError(f"{magic}: {what} {'have' if len(given) > 1 else 'has'} no effect without --tune",
                                  hint="add --tune to tune the operators of this cell")
        return s

    @staticmethod
    def _apply(s: Settings, args: Any) -> None:
        if args.backends is not None:
            s.backends = check_backends(parse_list(args.backends))
        if args.targets is not None:
            s.targets = check_targets(parse_list(args.targets))
        if args.sizes is not None:
            s.sizes = {**s.sizes, **parse_sizes(args.sizes)}
        if args.dtype is not None:
            s.dtype = check_dtype(args.dtype)
        if args.show is not None:
            s.show = check_show(args.show)
        if args.profile:
            s.profile = True

    # ---- %xbench ----------------------------------------------------------------------------------------------
    @magic_arguments()
    @argument("--backends", "-b", metavar="LIST", help="default backends of %%tensorop, e.g. cpu,cuda")
    @argument("--show", "-s", metavar="TAB", help="default tab to open first")
    @argument("--profile", "-p", action="store_true", help="profile in every %%tensorop cell")
    @argument("--no-profile", action="store_true", help="stop profiling by default")
    @argument("--sizes", metavar="DIMS", help="default dim sizes, e.g. N=1024,D=512 (merged with earlier ones)")
    @argument("--targets", "-t", metavar="LIST", help="default targets, e.g. h100,ascend-910b")
    @argument("--dtype", metavar="DTYPE", help="default element type of random inputs")
    @argument("--reset", action="store_true", help="forget every session default")
    @argument("--traceback", action="store_true", help="print the full traceback of the last %%tensorop error")
    @line_magic
    def xbench(self, line: str) -> Any:
        """Show or set the session defaults of `%%tensorop`, and list the operators compiled in this kernel.

            %xbench                                   # defaults and compiled operators
            %xbench --backends cpu,cuda --sizes N=64  # set defaults (a cell's own flags still win)
            %xbench --reset
        """
        try:
            args = parse_argstring(self.xbench, line)
        except Exception as exc:
            raise CellError(f"xbench: %xbench: {exc} (see %xbench? for the options)", "") from None
        if args.traceback:
            print(self.last_error.full if self.last_error and self.last_error.full
                  else "no %%tensorop error in this session")
            return None
        try:
            if args.reset:
                self.defaults = Settings()
            self._apply(self.defaults, args)
        except OptionError as exc:
            raise CellError(str(exc), "") from None
        if args.no_profile:
            self.defaults.profile = False
        return SessionView(self.defaults)


class SessionView:
    def __init__(self, defaults: Settings):
        from .registry import registry
        self.defaults = copy.deepcopy(defaults)
        self.records = registry().snapshot()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        text, page = session_text(self.defaults, self.records)
        return {"text/plain": text, "text/html": page}
