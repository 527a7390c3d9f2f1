"""Search spaces from schedule knobs, pruned by hard limits before anything is compiled."""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from ..backends import knobs_of
from ..ir.kernel import Kernel, Program
from ..ir.schedule import Knob, Schedule


@dataclass
class Space:
    kernel: Kernel
    knobs: dict[str, Knob]
    default: Schedule
    configs: list[dict[str, Any]] = field(default_factory=list)     # legal, default first
    pruned: list[tuple[dict[str, Any], str]] = field(default_factory=list)

    @property
    def size(self) -> int:
        return len(self.configs)


def build(backend, program: Program, kernel: Kernel, restrict: dict[str, tuple] | None = None) -> Space:
    """Every combination of the kernel's knob choices (optionally restricted), default first; combinations
    the backend rules out without compiling (`backend.check(program, kernel, schedule) -> reason | None`: shared
    memory, threads per block, registers, Unified Buffer) are set aside with the reason."""
    knobs = knobs_of(backend, kernel, program)
    default = backend.default_schedule(kernel)
    restrict = restrict or {}
    names = sorted(knobs)
    choices = [tuple(restrict.get(n, knobs[n].choices)) for n in names]
    space = Space(kernel, knobs, default)
    check = getattr(backend, "check", None)
    base = dict(default)
    seen = set()
    for combo in [tuple(base.get(n, knobs[n].default) for n in names)] + list(itertools.product(*choices)):
        if combo in seen:
            continue
        seen.add(combo)
        config = dict(zip(names, combo))
        reason = check(program, kernel, Schedule(config)) if check else None
        if reason:
            space.pruned.append((config, reason))
        else:
            space.configs.append(config)
    return space


def neighbours(space: Space, config: dict[str, Any]) -> list[dict[str, Any]]:
    """Legal configurations differing from `config` in one knob."""
    legal = {tuple(sorted(c.items())) for c in space.configs}
    out = []
    for name, knob in space.knobs.items():
        for v in knob.choices:
            if v != config.get(name):
                c = dict(config, **{name: v})
                if tuple(sorted(c.items())) in legal:
                    out.append(c)
    return out
