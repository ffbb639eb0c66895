"""Roundings to bf16 or f16 in a body, and where dropping one is allowed.

A bf16 op computes in f32 and rounds its result (a `cast` to bf16). Where its consumer casts the
value back to f32 in the same kernel, the rounding can go: the chain computes in f32 and rounds
where it stores, as Inductor's kernels do. `inline` drops it between a node and a consumer it
is inlined into, `fuse` between a buffer it removes and the node that read it. Neither drops
the rounding of a value a comparison takes (`compared`), nor a conversion the program wrote
(`converts`)."""

from __future__ import annotations

from mind.dialects import loops, scheduled
from mind.dialects.loops import Cast, Load
from mind.ir.core import Operation, Value

#: ops that decide on their operands' exact values
COMPARISONS = frozenset(("eq", "ne", "lt", "le", "gt", "ge"))
#: reduction and scan kinds that pick a position among exact values (a tie goes to the first)
PICKS = frozenset(("argmax", "argmin"))


def rounds(value: Value) -> bool:
    """Whether `value` is a float cast to a narrower float (f32 to bf16: a rounding)."""
    cast = value.owner
    if not isinstance(cast, Cast):
        return False
    wide, narrow = cast.x.type.dtype, value.type.dtype
    return wide.is_floating_point and narrow.is_floating_point and narrow.itemsize < wide.itemsize


def converts(value: Value) -> bool:
    """Whether `value` is a loaded value cast: a conversion the program wrote
    (`x.to(torch.bfloat16)`), whose rounding is the point, not a by-product of computing in bf16."""
    cast = value.owner
    return isinstance(cast, Cast) and isinstance(cast.x.owner, Load)


def compared(value: Value) -> bool:
    """Whether a comparison takes `value`: a rounding it undoes stays. A backward compares the
    forward's values, recomputed, with the rounded ones it saved (`x == max`, in amax's,
    scatter_reduce's, max_pool's); unrounded, no element ties, and the gradient, divided by
    the tie count, is NaN. So does a value an argmax, an argmin or a sort orders (`_orders`):
    two values that round to one bf16 tie, and eager's argmax picks the first of them."""
    return any(getattr(user, "kind", None) in COMPARISONS or _orders(user) for user in value.users)


def _orders(user: Operation | None) -> bool:
    """Whether `user` orders the value it takes by its exact value: a scheduled body's argmax,
    argmin or sort, or the yield of a loops node that is one."""
    if isinstance(user, loops.Yield):
        user = user.parent_op
    if isinstance(user, loops.Sort | scheduled.Sort):
        return True
    kind = getattr(user, "reduction_type", None) or getattr(user, "scan_type", None)
    return kind in PICKS
