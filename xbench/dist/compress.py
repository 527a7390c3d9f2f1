"""Compressed gradient communication as DDP communication hooks: fp16, bf16 (also on CPU, where torch's own
bf16 hook refuses), int8 and int4 with per-block power-of-two scales and error feedback, each in two forms.

- two-phase: compress, all-to-all of the compressed parts (a compressed reduce-scatter), every owner
  decompresses and sums its part in float32 and averages it, compresses it again, all-gather of the
  compressed parts, decompress. Bytes per rank: 2(p-1)/p x compressed size, flat in p.
- all-gather: compress, all-gather of everyone's compressed buffer, decompress and sum. Bytes per rank:
  (p-1) x compressed size: it grows with p (`xbench.dist.schemes.break_even`).

Error feedback (Karimireddy et al., "Error Feedback Fixes SignSGD", ICML 2019): the rank keeps what its
compression lost (x - decompress(compress(x))) per bucket and adds it to the next step's gradient; in the
two-phase form the owner of a part does the same for its second compression. Every rank decodes the same
bytes, so replicas stay identical.

The codecs are xbench operators (`xbench.dist.codec`) run on `backend` (cpu by default). Hooks never wait:
the second phase starts from the first one's completion callback, on a process group of its own, in bucket
order (`xbench.dist.futures`).

    state = CompressionState("int4", form="two-phase", error_feedback=True)
    ddp.register_comm_hook(state, compression_hook)
"""

import threading
import time
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from . import codec
from .futures import OrderedIssuer, completed, then, work_future
from .schemes import BITS, compressed_bytes, form_name, padded, scheme_name, wire_bytes

_CODEC_LOCK = threading.Lock()      # the codecs run on communication threads; one kernel launch at a time
_LOW = {"fp16": "float16", "bf16": "bfloat16"}


def _run(op, *arrays, backend: str) -> Any:
    with _CODEC_LOCK:
        return op.run(*arrays, backend=backend)


def _low_numpy(scheme: str) -> np.dtype:
    if scheme == "fp16":
        return np.dtype(np.float16)
    import ml_dtypes

    return np.dtype(ml_dtypes.bfloat16)


class CompressionState:
    """State of a compression hook: scheme, form, error-feedback residuals, process groups, and counters of
    the bytes the model says each call sends (`bytes_sent`) and of calls."""

    def __init__(self, scheme: str = "int4", form: str = "two-phase", error_feedback: bool = True,
                 group: Any = None, backend: str = "cpu", block: int = codec.BLOCK, groups: tuple | None = None):
        self.scheme = scheme_name(scheme)
        self.form = form_name(form)
        if self.form == "ring" and self.scheme not in ("fp32", "fp16"):
            raise ValueError(f"xbench: {self.scheme} cannot be summed on the wire; use form='two-phase' or "
                             f"'all-gather'")
        if block % 2 or block < 2:
            raise ValueError(f"xbench: block = {block}; write an even block size (256 is the default)")
        self.error_feedback = bool(error_feedback) and self.scheme != "fp32"
        self.backend = backend
        self.block = block
        self.world = dist.get_world_size(group)
        self.rank = dist.get_rank(group)
        # one process group per phase: collectives started from callbacks never interleave with new buckets'.
        # `groups` (two groups over the same ranks, from `phase_groups`) may be shared by states used one at a time
        self.groups = groups or phase_groups(group)
        self.issuer = OrderedIssuer()
        self.residual: dict[Any, torch.Tensor] = {}
        self.owner_residual: dict[Any, torch.Tensor] = {}
        self.bytes_sent = 0.0
        self.calls = 0
        self.timeline: list[tuple[Any, int, float, float]] = []    # (key, values, started, finished)

    def __repr__(self) -> str:
        ef = ", error feedback" if self.error_feedback else ""
        return f"CompressionState({self.scheme}, {self.form}{ef}, {self.world} ranks, codecs on {self.backend})"

    # --- public -------------------------------------------------------------------------------------------
    def allreduce_mean(self, x: torch.Tensor, key: Any = 0) -> torch.futures.Future:
        """A future of the mean over ranks of float32 tensor `x` through this scheme; `key` names the
        error-feedback residual (a DDP bucket index)."""
        if x.dtype != torch.float32:
            raise TypeError(f"xbench: compression hooks take float32 gradients, got {x.dtype}")
        flat = x.reshape(-1)
        n = flat.numel()
        self.calls += 1
        self.bytes_sent += wire_bytes(self.scheme, self.form, n, self.world, self.block) if self.world > 1 else 0.0
        started = time.perf_counter()
        if self.world == 1:
            fut = completed(flat.clone())
        elif self.form == "ring":
            fut = self._ring(flat)
        elif self.scheme in ("int8", "int4"):
            fut = self._int_two_phase(flat, key) if self.form == "two-phase" else self._int_all_gather(flat, key)
        else:
            fut = self._float_two_phase(flat, key) if self.form == "two-phase" else self._float_all_gather(flat, key)

        def finish(y: torch.Tensor) -> torch.Tensor:
            self.timeline.append((key, n, started, time.perf_counter()))
            return y.view_as(x)
        return then(fut, finish)

    # --- helpers ------------------------------------------------------------------------------------------
    def _with_residual(self, flat: torch.Tensor, m: int, key: Any) -> torch.Tensor:
        n = flat.numel()
        xp = torch.zeros(m, dtype=torch.float32)
        xp[:n] = flat
        if self.error_feedback:
            r = self.residual.get((key, n))
            if r is not None:
                xp[:n] += r
        return xp

    def _keep_residual(self, xp: torch.Tensor, decoded: np.ndarray, n: int, key: Any) -> None:
        if self.error_feedback:
            self.residual[(key, n)] = (xp[:n] - torch.from_numpy(decoded).reshape(-1)[:n]).clone()

    def _quantize(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return _run(codec.QUANTIZE[BITS[self.scheme]], rows, backend=self.backend)

    def _dequantize(self, q: np.ndarray, e: np.ndarray) -> np.ndarray:
        return _run(codec.DEQUANTIZE[BITS[self.scheme]], q, e, backend=self.backend)

    def _code_width(self) -> int:
        return self.block * BITS[self.scheme] // 8

    def _pack(self, q: np.ndarray, e: np.ndarray, parts: int) -> torch.Tensor:
        """Codes and exponents of `parts` equal row ranges, as one uint8 row per part."""
        qb = np.ascontiguousarray(q).view(np.uint8).reshape(parts, -1)
        eb = np.ascontiguousarray(e).view(np.uint8).reshape(parts, -1)
        return torch.from_numpy(np.concatenate([qb, eb], axis=1))

    def _unpack(self, buf: torch.Tensor, parts: int, rows: int) -> tuple[np.ndarray, np.ndarray]:
        a = buf.reshape(parts, -1).numpy()
        w = rows * self._code_width()
        qdt = np.int8 if self.scheme == "int8" else np.uint8
        q = np.ascontiguousarray(a[:, :w]).view(qdt).reshape(parts, rows, self._code_width())
        e = np.ascontiguousarray(a[:, w:]).view(np.int8).reshape(parts, rows, 1)
        return q, e

    # --- plain AllReduce (fp32, or fp16 summed on the wire like torch's fp16_compress_hook) --------------
    def _ring(self, flat: torch.Tensor) -> torch.futures.Future:
        buf = flat.to(torch.float16) if self.scheme == "fp16" else flat.clone()
        work = dist.all_reduce(buf, group=self.groups[0], async_op=True)
        return then(work_future(work), lambda _: buf.to(torch.float32).div_(self.world))

    # --- integer codes ------------------------------------------------------------------------------------
    def _int_two_phase(self, flat: torch.Tensor, key: Any) -> torch.futures.Future:
        p, B, n = self.world, self.block, flat.numel()
        m = padded(n, p, self.scheme, "two-phase", B)
        rows = m // B
        per = rows // p
        xp = self._with_residual(flat, m, key)
        q, e = self._quantize(xp.numpy().reshape(rows, B))
        if self.error_feedback:
            self._keep_residual(xp, self._dequantize(q, e), n, key)
        send = self._pack(q, e, p)
        recv = torch.empty_like(send)
        ticket = self.issuer.ticket()
        work = dist.all_to_all_single(recv, send, group=self.groups[0], async_op=True)

        def owner(_: Any) -> torch.futures.Future:
            qs, es = self._unpack(recv, p, per)
            part = torch.from_numpy(_run(codec.DEQUANTIZE_SUM[BITS[self.scheme]], qs, es, backend=self.backend))
            part = part.reshape(-1).div_(p)
            okey = (key, n)
            if self.error_feedback and okey in self.owner_residual:
                part += self.owner_residual[okey]
            q2, e2 = self._quantize(part.numpy().reshape(per, B))
            if self.error_feedback:
                self.owner_residual[okey] = part - torch.from_numpy(self._dequantize(q2, e2)).reshape(-1)
            send2 = self._pack(q2, e2, 1).reshape(-1)
            recv2 = torch.empty(p * send2.numel(), dtype=torch.uint8)

            def start() -> torch.futures.Future:
                w = dist.all_gather_single(recv2, send2, group=self.groups[1], async_op=True)
                return then(work_future(w), lambda _: recv2)
            return self.issuer.submit(ticket, start)

        def decode(recv2: torch.Tensor) -> torch.Tensor:
            qs, es = self._unpack(recv2, p, per)
            y = self._dequantize(qs.reshape(rows, -1), es.reshape(rows, 1))
            return torch.from_numpy(y).reshape(-1)[:n]
        return then(then(work_future(work), owner), decode)

    def _int_all_gather(self, flat: torch.Tensor, key: Any) -> torch.futures.Future:
        p, B, n = self.world, self.block, flat.numel()
        m = padded(n, p, self.scheme, "all-gather", B)
        rows = m // B
        xp = self._with_residual(flat, m, key)
        q, e = self._quantize(xp.numpy().reshape(rows, B))
        if self.error_feedback:
            self._keep_residual(xp, self._dequantize(q, e), n, key)
        send = self._pack(q, e, 1).reshape(-1)
        recv = torch.empty(p * send.numel(), dtype=torch.uint8)
        work = dist.all_gather_single(recv, send, group=self.groups[0], async_op=True)

        def decode(_: Any) -> torch.Tensor:
            qs, es = self._unpack(recv, p, rows)
            s = _run(codec.DEQUANTIZE_SUM[BITS[self.scheme]], qs, es, backend=self.backend)
            return torch.from_numpy(s).reshape(-1)[:n].div_(p)
        return then(work_future(work), decode)

    # --- float16 / bfloat16 / float32 parts ---------------------------------------------------------------
    def _to_low(self, values: np.ndarray) -> np.ndarray:
        if self.scheme == "fp32":
            return values
        return _run(codec.CAST[_LOW[self.scheme]], values, backend=self.backend)

    def _wire(self, low: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(low).view(np.uint8))       # gloo has no int16; bytes are bytes

    def _from_wire(self, t: torch.Tensor) -> np.ndarray:
        dt = np.dtype(np.float32) if self.scheme == "fp32" else _low_numpy(self.scheme)
        return t.numpy().view(dt)

    def _sum(self, parts: np.ndarray) -> np.ndarray:
        if self.scheme == "fp32":
            return parts.sum(axis=0, dtype=np.float32)
        return _run(codec.sum_low, parts, backend=self.backend)

    def _float_two_phase(self, flat: torch.Tensor, key: Any) -> torch.futures.Future:
        p, n = self.world, flat.numel()
        m = padded(n, p, self.scheme, "two-phase")
        per = m // p
        xp = self._with_residual(flat, m, key)
        low = self._to_low(xp.numpy())
        if self.error_feedback:
            self._keep_residual(xp, low.astype(np.float32), n, key)
        send = self._wire(low)
        recv = torch.empty_like(send)
        ticket = self.issuer.ticket()
        work = dist.all_to_all_single(recv, send, group=self.groups[0], async_op=True)

        def owner(_: Any) -> torch.futures.Future:
            part = torch.from_numpy(self._sum(self._from_wire(recv).reshape(p, per))).div_(p)
            okey = (key, n)
            if self.error_feedback and okey in self.owner_residual:
                part += self.owner_residual[okey]
            low2 = self._to_low(part.numpy())
            if self.error_feedback:
                self.owner_residual[okey] = part - torch.from_numpy(low2.astype(np.float32))
            send2 = self._wire(low2)
            recv2 = torch.empty(p * send2.numel(), dtype=torch.uint8)

            def start() -> torch.futures.Future:
                w = dist.all_gather_single(recv2, send2, group=self.groups[1], async_op=True)
                return then(work_future(w), lambda _: recv2)
            return self.issuer.submit(ticket, start)

        def decode(recv2: torch.Tensor) -> torch.Tensor:
            return torch.from_numpy(self._from_wire(recv2).astype(np.float32))[:n]
        return then(then(work_future(work), owner), decode)

    def _float_all_gather(self, flat: torch.Tensor, key: Any) -> torch.futures.Future:
        p, n = self.world, flat.numel()
        xp = self._with_residual(flat, n, key)
        low = self._to_low(xp.numpy())
        if self.error_feedback:
            self._keep_residual(xp, low.astype(np.float32), n, key)
        send = self._wire(low)
        recv = torch.empty(p * send.numel(), dtype=torch.uint8)
        work = dist.all_gather_single(recv, send, group=self.groups[0], async_op=True)

        def decode(_: Any) -> torch.Tensor:
            return torch.from_numpy(self._sum(self._from_wire(recv).reshape(p, n))).div_(p)
        return then(work_future(work), decode)


def phase_groups(group: Any = None) -> tuple:
    """Two new process groups over the ranks of `group` (collective: every rank calls it)."""
    ranks = list(range(dist.get_world_size())) if group is None else dist.get_process_group_ranks(group)
    return dist.new_group(ranks), dist.new_group(ranks)


def compression_hook(state: CompressionState, bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP communication hook: the bucket's gradients averaged through `state`'s scheme."""
    return state.allreduce_mean(bucket.buffer(), bucket.index())


def expected_bytes(state: CompressionState, n: int) -> float:
    """Bytes one rank sends for a bucket of n values under `state` (the model, see `schemes.wire_bytes`)."""
    return wire_bytes(state.scheme, state.form, n, state.world, state.block)


__all__ = ["CompressionState", "compressed_bytes", "compression_hook", "expected_bytes"]
