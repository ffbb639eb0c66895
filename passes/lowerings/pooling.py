"""Pooling over the last 1 to 3 dims, as Inductor lowers it. Average pooling sums each
window, its taps unrolled in one pointwise body when the window is small (Inductor's bound, 25)
and a reduction over the window otherwise, out-of-bounds taps masked loads of 0; its backward
gathers from the windows that cover each input position. Max pooling and adaptive max pooling
(its general case) unroll the window into two pointwise nodes, values and positions; max
pooling over more than 25 taps reduces the window instead (a max, an argmax); its backward
gathers, as average pooling's, from the windows whose maximum was the position. A backward
over more windows, and the empty, global and even adaptive cases decompose (mind's own rules,
passes/aten_rules/) to a scatter-add, reductions and max pooling."""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import sympy
import torch
from mind.ir import dtypes as dt
from mind.ir.diagnostics import MindError
from mind.ir.symbols import IntLike

from . import Unsupported, register_lowering
from .masked import masked_load

aten = torch.ops.aten

#: the most taps one pointwise body unrolls (Inductor's bound for avg_pool2d)
UNROLL_LIMIT = 25


#: each pooling argument, and its least value
_LEAST = {"kernel": 1, "stride": 1, "padding": 0, "dilation": 1}


@dataclass(frozen=True)
class Window:
    """Pooling over the last `len(kernel)` dims of an input of `sizes`."""

    sizes: Sequence[IntLike]
    kernel: Sequence[int]
    stride: Sequence[int]
    padding: Sequence[int]
    #: the step between taps (max pooling's `dilation`), 1 along every dim where empty
    dilation: Sequence[int] = ()

    def __post_init__(self) -> None:
        """Arguments torch refuses are refused here, not met as an empty window later."""
        n = len(self.kernel)
        for name, least in _LEAST.items():
            values = getattr(self, name)
            if name == "dilation" and not values:
                continue
            if not all(isinstance(v, int) for v in values):
                raise Unsupported(f"pooling with a symbolic {name}")
            if len(values) != n or any(v < least for v in values):
                raise MindError(
                    f"pooling's {name} must be {n} ints of at least {least}, got {list(values)}"
                )

    @property
    def spatial(self) -> Sequence[IntLike]:
        return self.sizes[-len(self.kernel) :]

    def starts(self, out_idx: Sequence[IntLike]) -> list[IntLike]:
        """Each window's first input position (before padding is cut off), per pooled dim."""
        pooled = out_idx[-len(self.kernel) :]
        return [o * s - p for o, s, p in zip(pooled, self.stride, self.padding)]

    def step(self, d: int) -> int:
        return self.dilation[d] if self.dilation else 1

    def extent(self, d: int) -> int:
        """The input positions a window spans along dim d, from its first tap to its last."""
        return (self.kernel[d] - 1) * self.step(d) + 1

    def reach(self) -> list[int]:
        """Along each pooled dim, the most windows that span one input position."""
        return [-(-self.extent(d) // s) for d, s in enumerate(self.stride)]

    def covering(self, b, pos: Sequence[IntLike], js: Sequence[int], pooled: Sequence[IntLike]):
        """The output positions of taps `js` (each below `reach`) over the input positions
        `pos`, one per pooled dim, and the b8 body value where they are outputs (of `pooled`)
        whose windows span `pos` (None: everywhere)."""
        outs, mask = [], None
        for d, (h, j, m) in enumerate(zip(pos, js, self.reach())):
            k, s, p, size = self.extent(d), self.stride[d], self.padding[d], pooled[d]
            o = sympy.floor((h + p - k + s * m) / s) + 1 - m + j  # a non-negative numerator
            outs.append(o)
            conds = []
            # o grows with h: checks that hold at the input's ends hold everywhere
            if (o.subs(h, self.spatial[d] - 1) < size) != sympy.true:
                conds.append(b.lt(b.index(o), b.constant(size, dt.i64)))
            if j > 0 or s > k:  # the window may start past pos
                conds.append(b.ge(b.index(h + p - o * s), b.constant(0, dt.i64)))
            if m > 1 and (o.subs(h, 0) < 0) != sympy.false:  # the first may precede the output
                conds.append(b.ge(b.index(o), b.constant(0, dt.i64)))
            for cond in conds:
                mask = cond if mask is None else b.logical_and(mask, cond)
        return outs, mask

    def tap(self, b, x, out_idx: Sequence[IntLike], offsets: Sequence[IntLike], out_sizes):
        """x at the window of `out_idx` shifted by `offsets`, 0 where that lies in the padding."""
        positions, mask = self.tap_position(b, out_idx, offsets, out_sizes)
        return masked_load(b, x, [*out_idx[: -len(self.kernel)], *positions], mask)

    def tap_position(self, b, out_idx, offsets, out_sizes) -> tuple[list[IntLike], object]:
        """The input position of tap `offsets` of the window of `out_idx`, per pooled dim, and
        the b8 body value where it lies inside the input (None: everywhere)."""
        starts = self.starts(out_idx)
        positions = [s + k * self.step(d) for d, (s, k) in enumerate(zip(starts, offsets))]
        mask = None
        for d, pos in enumerate(positions):
            for cond in self._bounds(b, d, pos, out_sizes[-len(self.kernel) + d]):
                mask = cond if mask is None else b.logical_and(mask, cond)
        return positions, mask

    def _bounds(self, b, d: int, pos: IntLike, out_size: IntLike) -> list:
        """The checks `0 <= pos < size` that some output's window needs along dim d."""
        low, high = self.reaches_out(d, out_size)
        conds = []
        if low:
            conds.append(b.ge(b.index(pos), b.constant(0, dt.i64)))
        if high:
            conds.append(b.lt(b.index(pos), b.constant(self.spatial[d], dt.i64)))
        return conds

    def reaches_out(self, d: int, out_size: IntLike) -> tuple[bool, bool]:
        """Whether some output's window along dim d starts before the input (padding), and
        whether one ends past it."""
        size, k, s, p = self.spatial[d], self.kernel[d], self.stride[d], self.padding[d]
        last = (out_size - 1) * s - p + (k - 1) * self.step(d) + 1  # past the last window
        return p > 0, not (isinstance(last, int) and isinstance(size, int) and last <= size)

    def divisor(self, b, out_idx, out_sizes, count_include_pad: bool):
        """What each window's sum is divided by: torch's `pool_size`, the window cut at the
        padded input's end, or with `count_include_pad` off, at the input's own ends. A number
        where every window has the same, else an i64 body value (dims whose windows all count
        `k` join as that number)."""
        fixed, count = 1, None
        for d, start in enumerate(self.starts(out_idx)):
            size, k, p = self.spatial[d], self.kernel[d], self.padding[d]
            if self._whole(d, out_sizes[-len(self.kernel) + d], count_include_pad):
                fixed *= k
                continue
            lo = b.index(start)
            hi = b.minimum(b.add(lo, b.constant(k, dt.i64)), b.constant(size + p, dt.i64))
            if not count_include_pad:
                lo = b.maximum(lo, b.constant(0, dt.i64))
                hi = b.minimum(hi, b.constant(size, dt.i64))
            n = b.sub(hi, lo)
            count = n if count is None else b.mul(count, n)
        if count is None:
            return fixed
        return count if fixed == 1 else b.mul(count, b.constant(fixed, dt.i64))

    def _whole(self, d: int, out_size: IntLike, count_include_pad: bool) -> bool:
        """Every window along dim d counts `k`: none runs past the padded input (a ceil-mode
        output's last may), and padding counts or there is none."""
        size, k, s, p = self.spatial[d], self.kernel[d], self.stride[d], self.padding[d]
        last = (out_size - 1) * s - p + k
        fits = isinstance(last, int) and isinstance(size, int) and last <= size + p
        return fits and (p == 0 or count_include_pad)


def _expand(value, n: int, default=None) -> list[int]:
    """A pooling argument as one int per pooled dim (torch accepts one int for all)."""
    if isinstance(value, int):
        return [value] * n
    value = list(value) or default
    return value * n if len(value) == 1 else value


def avg_pool(ctx, x, kernel_size, stride=(), padding=0, ceil_mode=False,
             count_include_pad=True, divisor_override=None, *, n: int):  # fmt: skip
    out = ctx.out
    kernel = _expand(kernel_size, n)
    window = Window(x.type.shape, kernel, _expand(stride, n, kernel), _expand(padding, n))
    compute = dt.upcast(out.dtype)

    def divide(b, total, idx):
        div = divisor_override or window.divisor(b, idx, out.shape, count_include_pad)
        div = b.constant(div, compute) if isinstance(div, int) else b.cast(div, compute)
        return b.truediv(total, div)

    if math.prod(kernel) <= UNROLL_LIMIT:

        def body(b, idx):
            taps = [
                b.cast(window.tap(b, x, idx, offsets, out.shape), compute)
                for offsets in itertools.product(*map(range, kernel))
            ]
            total = taps[0]
            for t in taps[1:]:
                total = b.add(total, t)
            return divide(b, total, idx)

        return ctx.pointwise(out.dtype, out.shape, body)

    def tap(b, idx, ridx):
        return b.cast(window.tap(b, x, idx, list(ridx), out.shape), compute)

    total = ctx.reduction(compute, out.shape, kernel, "sum", tap)
    return ctx.pointwise(out.dtype, out.shape, lambda b, idx: divide(b, b.load(total, idx), idx))


def avg_pool_backward(ctx, grad, x, kernel_size, stride, padding, ceil_mode,
                      count_include_pad, divisor_override=None, *, n: int):  # fmt: skip
    """Each input position gathers `grad / divisor` from the windows that cover it, as
    Inductor's lowering does: along a dim at most ceil(k / s) of them, from the first output
    whose window ends past the position; taps beyond the output or the window are masked."""
    out = ctx.out
    kernel = _expand(kernel_size, n)
    window = Window(x.type.shape, kernel, _expand(stride, n, kernel), _expand(padding, n))
    reach = window.reach()
    if math.prod(reach) > UNROLL_LIMIT:
        raise Unsupported("avg_pool backward over more windows than Inductor unrolls")
    compute = dt.upcast(out.dtype)
    pooled = grad.type.shape[-n:]

    def body(b, idx):
        batch, total = list(idx[:-n]), None
        for js in itertools.product(*map(range, reach)):
            outs, mask = window.covering(b, idx[-n:], js, pooled)
            g = b.cast(masked_load(b, grad, [*batch, *outs], mask), compute)
            div = divisor_override or window.divisor(
                b, [*batch, *outs], grad.type.shape, count_include_pad
            )
            div = b.constant(div, compute) if isinstance(div, int) else b.cast(div, compute)
            if mask is not None:  # a masked tap's divisor may be 0
                div = b.where(mask, div, b.constant(1.0, compute))
            term = b.truediv(g, div)
            total = term if total is None else b.add(total, term)
        return total

    return ctx.pointwise(out.dtype, out.shape, body)


def max_pool_window(sizes, kernel_size, stride, padding, dilation, n: int) -> Window:
    """The window of max pooling's arguments (torch's defaults filled in) over `sizes`."""
    kernel = _expand(kernel_size, n)
    return Window(
        sizes, kernel, _expand(stride, n, kernel), _expand(padding, n), _expand(dilation, n, [1])
    )


def gathers(window: Window) -> bool:
    """Whether max pooling's backward over `window` gathers (`max_pool_backward`): at most 25
    windows span an input position, Inductor's bound."""
    return math.prod(window.reach()) <= UNROLL_LIMIT


def max_pool_backward(ctx, grad, x, kernel_size, stride, padding, dilation, ceil_mode, indices,
                      *, n: int):  # fmt: skip
    """Each input position gathers the gradient of the windows that span it and took their
    maximum there (their index is its flat position), as Inductor's lowering does: one
    pointwise node in the gradient's dtype, with no zero-filled buffer to scatter into, no
    atomics, and consumers (a batch norm's backward) that may fuse with it."""
    out = ctx.out
    window = max_pool_window(x.type.shape, kernel_size, stride, padding, dilation, n)
    reach = window.reach()
    if not gathers(window):
        raise Unsupported("max_pool backward over more windows than Inductor unrolls")
    compute = dt.upcast(out.dtype)
    pooled = grad.type.shape[-n:]

    def body(b, idx):
        batch, total = list(idx[:-n]), None
        here = _flat(b, idx[-n:], window.spatial)
        for js in itertools.product(*map(range, reach)):
            outs, mask = window.covering(b, idx[-n:], js, pooled)
            tap = [*batch, *outs]
            hit = b.eq(masked_load(b, indices, tap, mask), here)
            hit = b.logical_and(mask, hit) if mask is not None else hit
            g = b.cast(masked_load(b, grad, tap, mask), compute)
            total = b.where(hit, g, b.constant(0.0, compute)) if total is None else (
                b.where(hit, b.add(total, g), total)
            )  # fmt: skip
        return total

    return ctx.pointwise(out.dtype, out.shape, body)


@register_lowering(aten.adaptive_max_pool2d, aten.adaptive_max_pool3d)
def adaptive_max_pool(ctx, x, output_size):
    """The general case (mind's rule takes empty, global and even ones), as Inductor lowers
    it: the largest window's taps unrolled, each masked past its own window's end, the values
    and the flat positions of their maxima as two pointwise nodes. NaN wins, as in eager."""
    values, indices = ctx.outs
    n = len(output_size)
    sizes = x.type.shape[-n:]
    if not all(isinstance(s, int) for s in [*sizes, *output_size]):
        raise Unsupported("adaptive max pooling over symbolic sizes")
    if not values.dtype.is_floating_point:
        raise Unsupported("adaptive max pooling over integers")
    if any(o < 1 for o in output_size):
        raise MindError(f"adaptive pooling's output_size must be positive ints, got {output_size}")
    reach = [-(-(i + o - 1) // o) for i, o in zip(sizes, output_size)]
    if math.prod(reach) > UNROLL_LIMIT:
        raise Unsupported("adaptive max pooling over more taps than Inductor unrolls")
    compute = dt.upcast(values.dtype)

    def best(b, idx):
        batch, pooled = list(idx[:-n]), idx[-n:]
        starts = [sympy.floor(o * i / m) for o, i, m in zip(pooled, sizes, output_size)]
        ends = [
            sympy.floor(((o + 1) * i + m - 1) / m) for o, i, m in zip(pooled, sizes, output_size)
        ]
        taps = []
        for js in itertools.product(*map(range, reach)):
            pos = [s + j for s, j in zip(starts, js)]
            mask = None
            for p, e, j in zip(pos, ends, js):
                if j > 0:
                    cond = b.lt(b.index(p), b.index(e))
                    mask = cond if mask is None else b.logical_and(mask, cond)
            taps.append((mask, _max_tap(b, x, [*batch, *pos], mask, compute), _flat(b, pos, sizes)))
        return max_with_position(b, taps)

    return (
        ctx.pointwise(values.dtype, values.shape, lambda b, idx: best(b, idx)[0]),
        ctx.pointwise(indices.dtype, indices.shape, lambda b, idx: best(b, idx)[1]),
    )


def _i64(b, value: IntLike):
    return b.constant(value, dt.i64)


def _first_inside(b, window: Window, d: int, start: IntLike):
    """The input position of the first tap at or past 0 of the window starting at `start`."""
    first = b.index(start)
    if window.padding[d] == 0:
        return first
    step = _i64(b, window.step(d))
    before = b.maximum(b.sub(_i64(b, 0), first), _i64(b, 0))
    skipped = b.floordiv(b.add(before, b.sub(step, _i64(b, 1))), step)
    return b.add(first, b.mul(skipped, step))


def _max_tap(b, x, index, mask, compute):
    """x at `index` in `compute`, -inf where `mask` is off."""
    value = b.load(x, index, mask=mask, other=float("-inf")) if mask else b.load(x, index)
    return b.cast(value, compute)


def _flat(b, positions, sizes):
    """The flat position over the pooled dims (what max pooling's indices hold)."""
    strides = [math.prod(sizes[d + 1 :]) for d in range(len(sizes))]
    return b.index(sum((p * s for p, s in zip(positions, strides)), sympy.Integer(0)))


def max_with_position(b, taps):
    """The largest of `taps` ((mask, value, flat position) each) and its position, as eager
    picks: the first tap inside the input, then any larger one, or a NaN."""
    value = position = found = None  # found: where a tap was taken (True: everywhere)
    for mask, v, flat in taps:
        if value is None:
            value, position, found = v, flat, True if mask is None else mask
            continue
        pick = b.logical_or(b.gt(v, value), b.isnan(v))
        if found is not True:
            pick = b.logical_or(pick, b.logical_not(found))
        if mask is not None:
            pick = b.logical_and(mask, pick)
        found = True if found is True or mask is None else b.logical_or(found, mask)
        value, position = b.where(pick, v, value), b.where(pick, flat, position)
    return value, position


def max_pool(ctx, x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False, *, n: int):
    """Max pooling with indices, as Inductor lowers it: the window's taps unrolled (at most
    25), out-of-bounds taps masked to -inf, the values and positions as two pointwise nodes;
    a larger window is reduced (`_max_pool_reduction`)."""
    values, indices = ctx.outs
    if not values.dtype.is_floating_point:
        raise Unsupported("max pooling of integers")
    window = max_pool_window(x.type.shape, kernel_size, stride, padding, dilation, n)
    kernel = window.kernel
    compute = dt.upcast(values.dtype)
    sizes = x.type.shape[-n:]
    if math.prod(kernel) > UNROLL_LIMIT:
        return _max_pool_reduction(ctx, x, window, compute)

    def best(b, idx):
        taps = []
        for offsets in itertools.product(*map(range, kernel)):
            pos, mask = window.tap_position(b, idx, offsets, values.shape)
            index = [*idx[:-n], *pos]
            taps.append((mask, _max_tap(b, x, index, mask, compute), _flat(b, pos, sizes)))
        return max_with_position(b, taps)

    return (
        ctx.pointwise(values.dtype, values.shape, lambda b, idx: best(b, idx)[0]),
        ctx.pointwise(indices.dtype, indices.shape, lambda b, idx: best(b, idx)[1]),
    )


def _max_pool_reduction(ctx, x, window: Window, compute):
    """Max pooling over a window of more than 25 taps, as Inductor lowers it: a max and an
    argmax over the window (out-of-bounds taps -inf), and a pointwise node that turns the
    argmax's offset in the window into the flat input position. As eager picks, the last NaN
    wins (a third reduction finds it), and a window of -inf only gives its first tap inside
    the input (the argmax's first tap may lie in the padding)."""
    values, indices = ctx.outs
    n, kernel = len(window.kernel), window.kernel
    offsets = [math.prod(kernel[d + 1 :]) for d in range(n)]

    def tap(b, idx, ridx):
        positions, mask = window.tap_position(b, idx, ridx, values.shape)
        return _max_tap(b, x, [*idx[:-n], *positions], mask, compute)

    def nan_offset(b, idx, ridx):
        offset = b.index(sum((k * o for k, o in zip(ridx, offsets)), sympy.Integer(0)))
        return b.where(b.isnan(tap(b, idx, ridx)), offset, b.constant(-1, dt.i64))

    best = ctx.reduction(values.dtype, values.shape, kernel, "max", tap)
    first = ctx.reduction(dt.i64, values.shape, kernel, "argmax", tap)
    last_nan = ctx.reduction(dt.i64, values.shape, kernel, "max", nan_offset)

    def position(b, idx):
        nan = b.load(last_nan, idx)
        offset = b.where(b.ge(nan, _i64(b, 0)), nan, b.load(first, idx))
        starts, chosen, inside = window.starts(idx), [], None
        for d, start in enumerate(starts):
            tap_d = b.floordiv(offset, _i64(b, offsets[d])) if offsets[d] > 1 else offset
            tap_d = b.mod(tap_d, _i64(b, kernel[d])) if d else tap_d
            step = window.step(d)
            chosen.append(b.add(b.index(start), b.mul(tap_d, _i64(b, step)) if step > 1 else tap_d))
            low, high = window.reaches_out(d, values.shape[d - n])
            checks = [(low, b.ge, 0), (high, b.lt, window.spatial[d])]
            for ok in [cmp(chosen[-1], _i64(b, bound)) for on, cmp, bound in checks if on]:
                inside = ok if inside is None else b.logical_and(inside, ok)
        if inside is not None:  # a window of -inf only: its first tap inside the input
            firsts = [_first_inside(b, window, d, start) for d, start in enumerate(starts)]
            chosen = [b.where(inside, c, f) for c, f in zip(chosen, firsts)]
        flat = chosen[-1]
        for d in range(n - 1):
            term = b.mul(chosen[d], _i64(b, math.prod(window.spatial[d + 1 :])))
            flat = b.add(term, flat)
        return flat

    return best, ctx.pointwise(indices.dtype, indices.shape, position)


#: the lowerings over n pooled dims, and their overloads for n = 2 and 3 (1-d pooling is 2-d)
for _lowering, *_overloads in (
    (avg_pool, aten.avg_pool2d, aten.avg_pool3d),
    (avg_pool_backward, aten.avg_pool2d_backward, aten.avg_pool3d_backward),
    (max_pool, aten.max_pool2d_with_indices, aten.max_pool3d_with_indices),
    (
        max_pool_backward,
        aten.max_pool2d_with_indices_backward,
        aten.max_pool3d_with_indices_backward,
    ),
):
    for _n, _overload in enumerate(_overloads, start=2):
        register_lowering(_overload)(functools.partial(_lowering, n=_n))
