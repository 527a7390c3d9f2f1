"""The order a program's kernels run in, chosen for a lower peak of live buffer bytes.

Lowering leaves the kernels in the graph's order. Any order that keeps each buffer's writes and reads in their
relative order computes the same values, and the generated code allocates a buffer at its first writer and
frees a temporary after its last user, an input too where the caller hands its inputs over (`donated`), so the
order decides how many bytes are live at once. A backward graph shows it most: its weight gradients, outputs
kept to the end, come early, while the activations saved for it are still held. `for_memory` schedules
greedily: of the kernels whose dependencies have run, the one whose allocations less its frees grow the live
bytes least, the earliest on a tie. The new order is kept only where it lowers the peak clearly, so small
programs keep the order they were written in.
"""
from __future__ import annotations

from .kernel import Buffer, Kernel

KEEP_BELOW = 0.97            # the new order's peak must be at most this fraction of the old one's...
MIN_SAVED = 256 * 1024       # ...and save at least this many bytes


def dependencies(kernels: list[Kernel]) -> list[set[int]]:
    """For each kernel, the earlier kernels it must follow: the last writer of each buffer it reads or writes,
    and every reader since that write of each buffer it writes."""
    last_writer: dict[str, int] = {}
    readers: dict[str, set[int]] = {}
    out = []
    for i, k in enumerate(kernels):
        d = {last_writer[n] for n in k.reads() + k.writes() if n in last_writer}
        for n in k.writes():
            d |= readers.get(n, set())
        d.discard(i)
        for n in k.reads():
            readers.setdefault(n, set()).add(i)
        for n in k.writes():
            last_writer[n], readers[n] = i, set()
        out.append(d)
    return out


def _freed(buf: Buffer, outputs: set[str], donated: set[str]) -> bool:
    return (buf.role == "temp" or buf.name in donated) and buf.name not in outputs


def peak(kernels: list[Kernel], buffers: dict[str, Buffer], inputs: list[str], outputs: list[str],
         donated=()) -> int:
    """The most bytes live at once when the kernels run in this order: inputs live from the start, the
    `donated` ones, like temporaries, only until their last user."""
    outs, donated = set(outputs), set(donated)
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for i, k in enumerate(kernels):
        for n in k.reads() + k.writes():
            first.setdefault(n, i)
            last[n] = i
    live = sum(buffers[n].nbytes for n in set(inputs))
    top = live
    for i, k in enumerate(kernels):
        used = set(k.reads() + k.writes())
        live += sum(buffers[n].nbytes for n in used if first[n] == i and buffers[n].role in ("temp", "output"))
        top = max(top, live)
        live -= sum(buffers[n].nbytes for n in used if last[n] == i and _freed(buffers[n], outs, donated))
    return top


def greedy(kernels: list[Kernel], buffers: dict[str, Buffer], inputs: list[str], outputs: list[str],
           donated=()) -> list[int]:
    """A dependency-respecting order (indices into `kernels`) chosen kernel by kernel for the least growth."""
    outs, donated = set(outputs), set(donated)
    deps = dependencies(kernels)
    after: list[list[int]] = [[] for _ in kernels]
    for i, d in enumerate(deps):
        for j in d:
            after[j].append(i)
    waiting = [len(d) for d in deps]
    touched = [set(k.reads() + k.writes()) for k in kernels]
    users: dict[str, list[int]] = {}
    for i, names in enumerate(touched):
        for n in names:
            users.setdefault(n, []).append(i)
    uses = {n: len(u) for n, u in users.items()}
    allocated = set(inputs)

    def growth(i: int) -> int:
        g = 0
        for n in touched[i]:
            b = buffers[n]
            if n not in allocated and b.role in ("temp", "output"):
                g += b.nbytes
            if uses[n] == 1 and _freed(b, outs, donated):
                g -= b.nbytes
        return g

    known: dict[int, int] = {}              # growth of the ready kernels, until a buffer of theirs changes
    ready = {i for i, w in enumerate(waiting) if w == 0}
    order = []
    while ready:
        for i in ready - known.keys():
            known[i] = growth(i)
        i = min(ready, key=lambda i: (known[i], i))
        ready.remove(i)
        order.append(i)
        for n in touched[i]:
            allocated.add(n)
            uses[n] -= 1
            for j in users[n]:
                known.pop(j, None)
        for j in after[i]:
            waiting[j] -= 1
            if waiting[j] == 0:
                ready.add(j)
    return order


def for_memory(kernels: list[Kernel], buffers: dict[str, Buffer], inputs: list[str], outputs: list[str],
               donated=()) -> list[Kernel]:
    """`kernels` in the greedy order where that lowers the peak clearly, else as they are."""
    if len(kernels) < 2:
        return kernels
    order = greedy(kernels, buffers, inputs, outputs, donated)
    moved = [kernels[i] for i in order]
    before = peak(kernels, buffers, inputs, outputs, donated)
    after = peak(moved, buffers, inputs, outputs, donated)
    return moved if after <= before * KEEP_BELOW and before - after >= MIN_SAVED else kernels
