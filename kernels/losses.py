"""Loss functions (category 16), as `torch.nn.functional` defines them: `reduction` is "mean" (default),
"sum" or "none"; ATen's `*_forward` forms take it as 0 (none), 1 (mean), 2 (sum)."""
from __future__ import annotations

import numpy as np

import xbench as xb
from xbench import Tensor
from xbench.ops import Sample

from ._samples import noncontig, tensor

register = xb.ops.register
F = "torch.nn.functional."
_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _reduce(loss, reduction: str):
    reduction = _REDUCTIONS.get(reduction, reduction)       # ATen's calls name it by number
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    if reduction == "mean":
        return loss.mean()
    raise ValueError(f"reduction must be 'none', 'mean' or 'sum', got {reduction!r}")


def _pair_samples(low=-3.0, high=3.0, tlow=-3.0, thigh=3.0, kwargs=({},), avoid_diff=()):
    def gen(dtype, shapes):
        for j, red in enumerate(("mean", "sum", "none")):
            for shape in shapes.pointwise[1:] if j == 0 else shapes.pointwise[-2:]:
                x = tensor(shapes, dtype, shape, "lx", red, low=low, high=high)
                t = tensor(shapes, dtype, shape, "lt", red, low=tlow, high=thigh)
                if avoid_diff:
                    x64, t64 = x.astype(np.float64), t.astype(np.float64)
                    for p in avoid_diff:
                        for sgn in (1, -1):
                            near = np.abs((x64 - t64) - sgn * p) < 0.05
                            x64 = np.where(near, x64 + 0.2, x64)
                    x = x64.astype(x.dtype)
                for kw in kwargs:
                    yield Sample((x, t), {"reduction": red, **kw}, note=f"{shape} {red} {kw or ''}".strip())
        if shapes.noncontig:
            x = tensor(shapes, dtype, (6, 5), "lxnc", low=low, high=high)
            t = tensor(shapes, dtype, (6, 5), "ltnc", low=tlow, high=thigh)
            yield Sample((noncontig(x), noncontig(t)), dict(kwargs[0]), note="non-contiguous")
    return gen


@register("loss", samples=_pair_samples(), torch=F + "mse_loss", grad=True)
def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean"):
    """(input - target)**2, reduced."""
    d = input - target
    return _reduce(d * d, reduction)


@register("loss", samples=_pair_samples(avoid_diff=(0.0,)), torch=F + "l1_loss", grad=True)
def l1_loss(input: Tensor, target: Tensor, reduction: str = "mean"):
    """|input - target|, reduced."""
    return _reduce(xb.abs(input - target), reduction)


@register("loss", samples=_pair_samples(kwargs=({}, {"beta": 0.5}), avoid_diff=(0.0, 0.5, 1.0)),
          torch=F + "smooth_l1_loss", grad=True)
def smooth_l1_loss(input: Tensor, target: Tensor, reduction: str = "mean", beta: float = 1.0):
    """0.5 d**2 / beta where |d| < beta, else |d| - beta / 2 (d = input - target; beta=0: L1)."""
    z = xb.abs(input - target)
    if beta == 0:
        return _reduce(z, reduction)
    return _reduce(xb.where(z < beta, (0.5 / beta) * z * z, z - 0.5 * beta), reduction)


@register("loss", samples=_pair_samples(kwargs=({}, {"delta": 0.5}), avoid_diff=(0.0, 0.5, 1.0)),
          torch=F + "huber_loss", grad=True)
def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean", delta: float = 1.0):
    """0.5 d**2 where |d| < delta, else delta * (|d| - delta / 2)."""
    z = xb.abs(input - target)
    return _reduce(xb.where(z < delta, 0.5 * z * z, delta * (z - 0.5 * delta)), reduction)


def _bce_samples(logits: bool):
    def gen(dtype, shapes):
        lo, hi = (-4.0, 4.0) if logits else (0.02, 0.98)
        yield from _pair_samples(lo, hi, 0.0, 1.0)(dtype, shapes)
        x = tensor(shapes, dtype, (8, 5), "bcew", low=lo, high=hi)
        t = tensor(shapes, dtype, (8, 5), "bcewt", low=0.0, high=1.0)
        w = tensor(shapes, dtype, (5,), "bceww", low=0.5, high=2.0)
        yield Sample((x, t, w), note="weight (broadcast)")
        if logits:
            pw = tensor(shapes, dtype, (5,), "bcepw", low=0.5, high=3.0)
            yield Sample((x, t), {"pos_weight": pw}, note="pos_weight")
            yield Sample((x, t, w), {"pos_weight": pw, "reduction": "sum"}, note="weight, pos_weight, sum")
    return gen


@register("loss", samples=_bce_samples(False), torch=F + "binary_cross_entropy", grad=("input",))
def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor = None, reduction: str = "mean"):
    """-(target * log(input) + (1 - target) * log(1 - input)), each log clamped at -100 (as PyTorch)."""
    log_p = xb.maximum(xb.log(input), -100.0)
    log_q = xb.maximum(xb.log(1.0 - input), -100.0)
    loss = -(target * log_p + (1.0 - target) * log_q)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


@register("loss", samples=_bce_samples(True), torch=F + "binary_cross_entropy_with_logits",
          grad=("input", "target", "weight"))
def binary_cross_entropy_with_logits(input: Tensor, target: Tensor, weight: Tensor = None, reduction: str = "mean",
                                     pos_weight: Tensor = None):
    """binary_cross_entropy(sigmoid(input), target), computed stably from the logits; `pos_weight`
    weighs the positive term."""
    softplus_neg = xb.maximum(-input, 0.0) + xb.log1p(xb.exp(-xb.abs(input)))    # log(1 + exp(-x))
    if pos_weight is None:
        loss = (1.0 - target) * input + softplus_neg
    else:
        loss = (1.0 - target) * input + ((pos_weight - 1.0) * target + 1.0) * softplus_neg
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


@register("loss", samples=_pair_samples(-3.0, 3.0, -1.0, 1.0), torch=F + "soft_margin_loss", grad=("input",))
def soft_margin_loss(input: Tensor, target: Tensor, reduction: str = "mean"):
    """log(1 + exp(-target * input)) (targets +-1)."""
    z = -target * input
    return _reduce(xb.maximum(z, 0.0) + xb.log1p(xb.exp(-xb.abs(z))), reduction)


def _mrl_samples(dtype, shapes):
    for red in ("mean", "sum", "none"):
        for shape in ((17,), (4, 9)):
            a = tensor(shapes, dtype, shape, "mrla", red)
            b = tensor(shapes, dtype, shape, "mrlb", red)
            t = np.where(tensor(shapes, "bool", shape, "mrlt", red), 1.0, -1.0).astype(a.dtype)
            a = np.where(np.abs(-(t * (a.astype(np.float64) - b)) + 0.3) < 0.05, a + np.asarray(0.2, a.dtype), a)
            yield Sample((a, b, t), {"margin": 0.3, "reduction": red}, note=f"{shape} {red}")


@register("loss", samples=_mrl_samples, torch=F + "margin_ranking_loss", grad=("input1", "input2"))
def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float = 0.0,
                        reduction: str = "mean"):
    """max(0, -target * (input1 - input2) + margin)."""
    return _reduce(xb.maximum(-target * (input1 - input2) + margin, 0.0), reduction)


# ---- negative log likelihood and cross entropy --------------------------------------------------------

def _class_axis_gather(input, target):
    """input[n, target[n, ...], ...]: the class axis is 1 (or 0 for an unbatched (C,) input)."""
    if input.ndim == 1:
        return xb.gather(input, target.reshape((1,)), axis=0).reshape(())
    return xb.take_along_axis(input, target.unsqueeze(1), axis=1).squeeze(1)


def _nll(input, target, weight, ignore_index: int, reduction: str):
    valid = target != ignore_index
    safe = xb.where(valid, target, 0)
    picked = _class_axis_gather(input, safe)
    w = xb.gather(weight, safe, axis=0) if weight is not None else xb.ones(safe.shape, input.dtype)
    w = xb.where(valid, w, 0.0)
    loss = -(picked * w)
    total = w.sum()
    if reduction == "none":
        return loss, total
    if reduction == "sum":
        return loss.sum(), total
    if reduction == "mean":
        return loss.sum() / total, total
    raise ValueError(f"reduction must be 'none', 'mean' or 'sum', got {reduction!r}")


def _nll_samples(dtype, shapes, image: bool = False):
    cases = [((6, 5), (6,)), ((1, 3), (1,)), ((32, 10), (32,)), ((5,), ())] if not image else \
        [((2, 4, 3, 5), (2, 3, 5)), ((1, 3, 2, 2), (1, 2, 2))]
    if not image:
        cases.append(((3, 4, 6), (3, 6)))
    for shape, tshape in cases:
        c = shape[1] if len(shape) > 1 else shape[0]
        x = tensor(shapes, dtype, shape, "nll", low=-4.0, high=0.0)
        t = tensor(shapes, "int64", tshape, "nllt", ints=(0, c))
        w = tensor(shapes, dtype, (c,), "nllw", low=0.5, high=2.0)
        for red in ("mean", "sum", "none"):
            yield Sample((x, t), {"reduction": red}, note=f"{shape} {red}")
        yield Sample((x, t, w), {"reduction": "mean"}, note=f"{shape} weight, mean")
        if len(tshape):
            t2 = t.copy()
            t2.reshape(-1)[::2] = -100
            yield Sample((x, t2), {"reduction": "mean"}, note=f"{shape} ignore_index -100 on half")
            yield Sample((x, t2, w), {"reduction": "sum", "ignore_index": -100}, note=f"{shape} weight, ignore, sum")


@register("loss", samples=_nll_samples, torch=F + "nll_loss", grad=("input",))
def nll_loss(input: Tensor, target: Tensor, weight: Tensor = None, ignore_index: int = -100,
             reduction: str = "mean"):
    """-input[n, target[n]] (weighted by weight[target]); targets equal to ignore_index count for nothing;
    "mean" divides by the total weight of the counted targets."""
    return _nll(input, target, weight, ignore_index, reduction)[0]


def _nll_forward_samples(image: bool):
    def gen(dtype, shapes):
        for s in _nll_samples(dtype, shapes, image):
            if not image and s.args[0].ndim > 2:      # ATen's nll_loss_forward takes (C,) or (N, C) only
                continue
            args = s.args + (None,) * (3 - len(s.args))
            red = {"none": 0, "mean": 1, "sum": 2}[s.kwargs.get("reduction", "mean")]
            yield Sample(args + (red, s.kwargs.get("ignore_index", -100)), {}, s.note, s.grad)
    return gen


def _nll_aten(input, target, weight, reduction: int, ignore_index: int):
    out, total = _nll(input, target, weight, ignore_index, _REDUCTIONS[reduction])
    if reduction == 0 and input.ndim > 1:      # ATen sums no weights when it does not reduce a batch
        total = xb.zeros((), total.dtype)
    return out, total


@register("loss", samples=_nll_forward_samples(False), torch="torch.ops.aten.nll_loss_forward",
          grad=("self",))
def nll_loss_forward(self: Tensor, target: Tensor, weight: Tensor | None, reduction: int, ignore_index: int):
    """ATen's nll_loss_forward: (output, total_weight), reduction 0 none, 1 mean, 2 sum; `self` is (C,) or
    (N, C)."""
    if self.ndim > 2:
        raise ValueError(f"nll_loss_forward needs a (C,) or (N, C) input, got {self.shape} (see nll_loss2d_forward)")
    return _nll_aten(self, target, weight, reduction, ignore_index)


@register("loss", samples=_nll_forward_samples(True), torch="torch.ops.aten.nll_loss2d_forward",
          grad=("self",))
def nll_loss2d_forward(self: Tensor, target: Tensor, weight: Tensor | None, reduction: int, ignore_index: int):
    """nll_loss_forward for (N, C, H, W) inputs and (N, H, W) targets."""
    if self.ndim != 4:
        raise ValueError(f"nll_loss2d_forward needs an (N, C, H, W) input, got {self.shape}")
    return _nll_aten(self, target, weight, reduction, ignore_index)


def _nll_backward_samples(image: bool):
    """(grad_output, self, target, weight, reduction, ignore_index, total_weight): the forward's samples with
    the total weight of their counted targets (as nll_loss_forward returns it) and a gradient shaped like its
    output."""
    def gen(dtype, shapes):
        for s in _nll_forward_samples(image)(dtype, shapes):
            x, t, w, red, ignore = s.args
            valid = t != ignore
            wt = np.ones(x.shape[1 if x.ndim > 1 else 0]) if w is None else w.astype(np.float64)
            total = np.asarray(wt[np.where(valid, t, 0)][valid].sum(), x.dtype)
            g = tensor(shapes, dtype, t.shape if red == 0 else (), "nllg", low=-2.0, high=2.0)
            yield Sample((g, x, t, w, red, ignore, total), {}, s.note, s.grad)
    return gen


def _nll_backward(grad_output, self, target, weight, reduction: int, ignore_index: int, total_weight):
    axis = 1 if self.ndim > 1 else 0
    valid = target != ignore_index
    safe = xb.where(valid, target, 0)
    w = xb.gather(weight, safe, axis=0) if weight is not None else xb.ones(safe.shape, self.dtype)
    w = xb.where(valid, w, 0.0)
    if reduction == 1:
        g = grad_output / total_weight
    elif reduction in (0, 2):
        g = grad_output
    else:
        raise ValueError(f"reduction must be 0 (none), 1 (mean) or 2 (sum), got {reduction}")
    scale = xb.expand_dims(-(w * g), axis)                                     # the class axis, size 1
    hit = (xb.iota(tuple(self.shape), axis) == xb.expand_dims(safe, axis)) & xb.expand_dims(valid, axis)
    return xb.where(hit, scale, 0.0).astype(self.dtype)        # (nothing counted: 0, not 0 / 0)


@register("loss", samples=_nll_backward_samples(False), torch="torch.ops.aten.nll_loss_backward")
def nll_loss_backward(grad_output: Tensor, self: Tensor, target: Tensor, weight: Tensor | None, reduction: int,
                      ignore_index: int, total_weight: Tensor):
    """The gradient of nll_loss_forward with respect to self ((C,) or (N, C)): -weight[target] * grad_output
    at each counted target's class (divided by total_weight for the mean), 0 elsewhere."""
    if self.ndim > 2:
        raise ValueError(f"nll_loss_backward needs a (C,) or (N, C) input, got {self.shape} (see nll_loss2d_backward)")
    return _nll_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight)


@register("loss", samples=_nll_backward_samples(True), torch="torch.ops.aten.nll_loss2d_backward")
def nll_loss2d_backward(grad_output: Tensor, self: Tensor, target: Tensor, weight: Tensor | None, reduction: int,
                        ignore_index: int, total_weight: Tensor):
    """nll_loss_backward for (N, C, H, W) inputs and (N, H, W) targets."""
    if self.ndim != 4:
        raise ValueError(f"nll_loss2d_backward needs an (N, C, H, W) input, got {self.shape}")
    return _nll_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight)


def _log_softmax(x, axis: int):
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - xb.log(xb.exp(shifted).sum(axis=axis, keepdims=True))


def _ce_samples(dtype, shapes):
    yield from (s for s in _nll_samples(dtype, shapes) if s.args[1].dtype == np.int64)
    x = tensor(shapes, dtype, (8, 5), "cels", low=-3.0, high=3.0)
    t = tensor(shapes, "int64", (8,), "celst", ints=(0, 5))
    w = tensor(shapes, dtype, (5,), "celsw", low=0.5, high=2.0)
    yield Sample((x, t), {"label_smoothing": 0.1}, note="label smoothing")
    yield Sample((x, t, w), {"label_smoothing": 0.2, "reduction": "sum"}, note="weight, label smoothing, sum")
    p = np.exp(tensor(shapes, "float64", (8, 5), "celp"))
    p = (p / p.sum(axis=1, keepdims=True)).astype(x.dtype)
    yield Sample((x, p), note="class probabilities")
    yield Sample((x, p), {"label_smoothing": 0.1, "reduction": "none"}, note="probabilities, smoothing, none")


@register("loss", samples=_ce_samples, torch=F + "cross_entropy", grad=("input",))
def cross_entropy(input: Tensor, target: Tensor, weight: Tensor = None, ignore_index: int = -100,
                  reduction: str = "mean", label_smoothing: float = 0.0):
    """nll_loss(log_softmax(input, 1), target) for class indices; -(target * log_softmax) summed over classes
    for class probabilities; `label_smoothing` mixes in the uniform distribution."""
    axis = 0 if input.ndim == 1 else 1
    logp = _log_softmax(input, axis)
    c = input.shape[axis]
    if target.dtype in ("int32", "int64"):
        nll, total = _nll(logp, target, weight, ignore_index, reduction)
        if label_smoothing == 0:
            return nll
        valid = target != ignore_index
        wl = logp if weight is None else logp * weight.reshape((c,) + (1,) * (logp.ndim - 1 - axis))
        smooth = xb.where(valid, -wl.sum(axis=axis), 0.0)
        if reduction == "none":
            sm = smooth
        elif reduction == "sum":
            sm = smooth.sum()
        elif weight is None:
            sm = smooth.sum() / valid.astype(input.dtype).sum()
        else:
            sm = smooth.sum() / total
        return (1.0 - label_smoothing) * nll + (label_smoothing / c) * sm
    t = target if label_smoothing == 0 else target * (1.0 - label_smoothing) + label_smoothing / c
    wl = logp if weight is None else logp * weight.reshape((c,) + (1,) * (logp.ndim - 1 - axis))
    loss = -(t * wl).sum(axis=axis)
    if reduction == "mean":
        n = loss.size if loss.ndim else 1
        return loss.sum() * (1.0 / n)
    return _reduce(loss, reduction)


# ---- connectionist temporal classification --------------------------------------------------------------

_NEG = float("-inf")


def _logsumexp3(a, b, c):
    """log(exp(a) + exp(b) + exp(c)) elementwise, -inf where all three are -inf (with clean gradients)."""
    m = xb.maximum(xb.maximum(a, b), c)
    finite = m != _NEG
    m0 = xb.where(finite, m, 0.0)
    s = xb.exp(a - m0) + xb.exp(b - m0) + xb.exp(c - m0)
    return xb.where(finite, m0 + xb.log(xb.where(finite, s, 1.0)), _NEG)


def _ctc_samples(dtype, shapes):
    cases = [(12, 3, 5, 4, [12, 10, 9], [4, 2, 3]), (6, 2, 4, 3, [6, 6], [3, 1]), (8, 1, 3, 2, [8], [2])]
    for t, n, c, s, il, tl in cases:
        rng = shapes.rng("ctc", t, n, c)
        logits = rng.standard_normal((t, n, c))
        lp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        targets = rng.integers(1, c, size=(n, s)).astype(np.int64)
        yield Sample((lp.astype(tensor(shapes, dtype, (1,), "d").dtype), targets, np.array(il, np.int64),
                      np.array(tl, np.int64)), note=f"T={t} N={n} C={c} S={s}")
        yield Sample((lp.astype(tensor(shapes, dtype, (1,), "d").dtype), targets, np.array(il, np.int64),
                      np.array(tl, np.int64)), {"reduction": "sum"}, note=f"T={t} N={n} sum")
    rng = shapes.rng("ctc-rep")
    lp = rng.standard_normal((7, 2, 4))
    lp = lp - np.log(np.exp(lp).sum(-1, keepdims=True))
    targets = np.array([[2, 2, 3], [1, 1, 1]], np.int64)             # repeated labels need blanks between
    yield Sample((lp.astype(tensor(shapes, dtype, (1,), "d").dtype), targets, np.array([7, 5], np.int64),
                  np.array([3, 3], np.int64)), {"reduction": "none"}, note="repeated labels, one impossible")
    yield Sample((lp.astype(tensor(shapes, dtype, (1,), "d").dtype), targets, np.array([7, 5], np.int64),
                  np.array([3, 3], np.int64)), {"reduction": "none", "zero_infinity": True},
                 note="zero_infinity", grad=False)


@register("loss", samples=_ctc_samples, torch=F + "ctc_loss", grad=("log_probs",), dtypes=("float32", "float64"),
          notes="the forward recursion is unrolled over the T time steps (T is static); lengths are tensors",
          torch_grad=False)
def ctc_loss(log_probs: Tensor, targets: Tensor, input_lengths: Tensor, target_lengths: Tensor, blank: int = 0,
             reduction: str = "mean", zero_infinity: bool = False):
    """Connectionist temporal classification loss: -log of the total probability of every alignment of the
    (padded) `targets` [N, S] with the log-probabilities `log_probs` [T, N, C], each sequence cut to its
    input and target length. "mean" divides each loss by its target length, then averages."""
    t_len, n, c = log_probs.shape
    s = targets.shape[1]
    width = 2 * s + 1
    pos = xb.iota((n, width), 1)
    label_at = (pos - 1) // 2
    labels = xb.where(pos % 2 == 1, xb.take_along_axis(targets, xb.minimum(label_at, s - 1), axis=1), blank)
    valid = pos < (2 * target_lengths + 1).unsqueeze(1)
    # log-probability of each extended label at each time: [T, N, 2S+1]
    emit = xb.take_along_axis(log_probs, xb.broadcast_to(labels.unsqueeze(0), (t_len, n, width)), axis=2)
    prev2 = xb.concat([xb.full((n, 2), blank, labels.dtype), labels[:, :-2]], axis=1)
    skip_ok = (labels != blank) & (labels != prev2) & (pos >= 2)
    alpha = xb.where(valid & (pos < 2), emit[0], _NEG)
    for t in range(1, t_len):
        a1 = xb.concat([xb.full((n, 1), _NEG, alpha.dtype), alpha[:, :-1]], axis=1)
        a2 = xb.concat([xb.full((n, 2), _NEG, alpha.dtype), alpha[:, :-2]], axis=1)
        nxt = emit[t] + _logsumexp3(alpha, a1, xb.where(skip_ok, a2, _NEG))
        nxt = xb.where(valid, nxt, _NEG)
        alpha = xb.where((input_lengths > t).unsqueeze(1), nxt, alpha)
    last = 2 * target_lengths
    end1 = xb.take_along_axis(alpha, last.unsqueeze(1), axis=1)[:, 0]
    end2 = xb.take_along_axis(alpha, xb.maximum(last - 1, 0).unsqueeze(1), axis=1)[:, 0]
    end2 = xb.where(target_lengths > 0, end2, _NEG)
    loss = -_logsumexp3(end1, end2, xb.full(end1.shape, _NEG, end1.dtype))
    if zero_infinity:
        loss = xb.where(loss == float("inf"), 0.0, loss)
    if reduction == "mean":
        return (loss / xb.maximum(target_lengths, 1).astype(loss.dtype)).mean()
    return _reduce(loss, reduction)
