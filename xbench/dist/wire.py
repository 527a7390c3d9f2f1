"""Bytes on the wire, measured: the kernel's TCP counters of the sockets gloo opened, per peer rank.

Gloo's TCP transport keeps one connection per pair of ranks (and more for subgroups). Each socket's
`tcp_info` (getsockopt TCP_INFO) counts the bytes it received (`tcpi_bytes_received`, Linux >= 4.1); the ranks
exchange their sockets' (local port, remote port) pairs once to learn which peer is at the other end. The
difference of two snapshots is what every peer sent this rank in between -- payload plus gloo's small
per-message headers -- and summing over ranks by link class gives the bytes each class carried.

    wc = WireCounter()                 # collective: every rank constructs it
    with wc:
        dist.all_reduce(x)
    wc.by_link(topology)               # collective: {'intra': bytes, 'inter': bytes} over all ranks
"""
from __future__ import annotations

import os
import socket
import struct
from typing import Any

_TCP_INFO_LEN = 232
_BYTES_RECEIVED_OFFSET = 128        # struct tcp_info: u64 tcpi_bytes_acked at 120, tcpi_bytes_received at 128


def sockets() -> dict[tuple[int, int], int]:
    """(local port, remote port) -> bytes received, for this process's TCP sockets on IPv4/IPv6."""
    out: dict[tuple[int, int], int] = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            fd = int(name)
            if not os.readlink(f"/proc/self/fd/{fd}").startswith("socket:"):
                continue
            s = socket.socket(fileno=os.dup(fd))
        except (OSError, ValueError):
            continue
        try:
            if s.type != socket.SOCK_STREAM or s.family not in (socket.AF_INET, socket.AF_INET6):
                continue
            try:
                local, remote = s.getsockname()[1], s.getpeername()[1]
            except OSError:
                continue
            info = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO_LEN)
            if len(info) < _BYTES_RECEIVED_OFFSET + 8:
                continue
            out[(local, remote)] = struct.unpack_from("Q", info, _BYTES_RECEIVED_OFFSET)[0]
        finally:
            s.close()
    return out


class WireCounter:
    """Measures what each peer sent this rank between `__enter__` and `__exit__`. Constructing it and
    `by_link` are collective over `group` (they exchange socket lists and results)."""

    def __init__(self, group: Any = None):
        import torch.distributed as dist

        self.group = group
        self.rank = dist.get_rank(group)
        self.world = dist.get_world_size(group)
        self._peer_of: dict[tuple[int, int], int] = {}
        self._refresh_peers()
        self.before: dict[tuple[int, int], int] = {}
        self.after: dict[tuple[int, int], int] = {}

    def _refresh_peers(self) -> None:
        import torch.distributed as dist

        mine = list(sockets())
        everyone: list[Any] = [None] * self.world
        dist.all_gather_object(everyone, mine, group=self.group)
        owner = {}
        for r, socks in enumerate(everyone):
            for local, remote in socks:
                owner[(local, remote)] = r
        self._peer_of = {(lo, re): owner[(re, lo)] for lo, re in mine if (re, lo) in owner}

    def __enter__(self) -> WireCounter:
        self.before = sockets()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.after = sockets()

    def received_from(self) -> dict[int, int]:
        """Peer rank -> bytes it sent this rank inside the window (sockets opened inside the window count
        from zero; call `refresh()` before the window when subgroups were created after construction)."""
        out: dict[int, int] = {}
        for key, after in self.after.items():
            peer = self._peer_of.get(key)
            if peer is None:
                continue
            out[peer] = out.get(peer, 0) + after - self.before.get(key, 0)
        return out

    def refresh(self) -> None:
        """Learn the peers of sockets opened since construction (collective)."""
        self._refresh_peers()

    def by_link(self, topology: Any) -> dict[str, int]:
        """Bytes carried by each link class of `topology`, summed over all ranks (collective)."""
        import torch.distributed as dist

        mine: dict[str, int] = {}
        for peer, n in self.received_from().items():
            cls = topology.link(peer, self.rank).name
            mine[cls] = mine.get(cls, 0) + n
        everyone: list[Any] = [None] * self.world
        dist.all_gather_object(everyone, mine, group=self.group)
        total: dict[str, int] = {}
        for d in everyone:
            for k, v in d.items():
                total[k] = total.get(k, 0) + v
        return total

    def per_rank(self) -> list[dict[int, int]]:
        """Every rank's `received_from()` (collective)."""
        import torch.distributed as dist

        everyone: list[Any] = [None] * self.world
        dist.all_gather_object(everyone, self.received_from(), group=self.group)
        return everyone
