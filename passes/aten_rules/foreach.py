"""mind's rule for the foreach ops (`_foreach_add.List`, `_foreach_addcmul.Scalar`, ...: what an
optimizer step with `foreach=True`, the default on a GPU, traces to): each is its op on each
tensor of its lists, `[aten.add(x, y) for x, y in zip(xs, ys)]`. Each parameter's chain of
updates then fuses into one kernel that reads its state once, where ATen runs each foreach op
over every parameter in turn. torch has no rule for them (Inductor lowers them itself, as these
per-tensor ops).

An argument that is a list (of tensors or of numbers) is taken element by element; any other
(a tensor, a number, `alpha`) is each element's. Overloads that hold a list in a tensor
(`_foreach_addcmul.Tensor`'s `scalars`) keep ATen's kernel.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

aten = torch.ops.aten

PREFIX = "_foreach_"
#: each foreach op's op on one tensor, where it is not `aten.<name>` with the same positional
#: arguments (`value` is keyword-only in addcmul, positional in `_foreach_addcmul.Scalar`)
_ELEMENT: dict[str, Callable] = {
    "norm": lambda x, ord=2, dtype=None: aten.linalg_vector_norm(x, ord, dtype=dtype),
    "addcmul": lambda x, a, b, value=1: aten.addcmul(x, a, b, value=value),
    "addcdiv": lambda x, a, b, value=1: aten.addcdiv(x, a, b, value=value),
    # of a number: clamp_min, clamp_max (`aten.maximum` takes tensors only)
    "maximum": lambda x, y: (aten.maximum if isinstance(y, torch.Tensor) else aten.clamp_min)(x, y),
    "minimum": lambda x, y: (aten.minimum if isinstance(y, torch.Tensor) else aten.clamp_max)(x, y),
}
#: foreach ops with no op on one tensor of that name (products, sums of powers)
_NO_ELEMENT = ("mm", "powsum")


def _per_element(element: Callable) -> Callable:
    """The rule of a foreach op whose op on one tensor is `element`."""

    def rule(*args, **kwargs):
        count = next(len(a) for a in (*args, *kwargs.values()) if isinstance(a, list | tuple))

        def at(value, i: int):
            return value[i] if isinstance(value, list | tuple) else value

        return [
            element(*(at(a, i) for a in args), **{k: at(v, i) for k, v in kwargs.items()})
            for i in range(count)
        ]

    return rule


def _takes_lists_only_as_lists(overload: torch._ops.OpOverload) -> bool:
    """Whether every list the overload takes is a list argument (no `Tensor scalars`), and it
    returns a list (not an in-place variant)."""
    schema = overload._schema
    if [str(r.type) for r in schema.returns] != ["List[Tensor]"]:
        return False
    return not any(a.name == "scalars" and str(a.type) == "Tensor" for a in schema.arguments)


def _rules() -> dict:
    rules = {}
    names = {n.split("::")[1].split(".")[0] for n in torch._C._dispatch_get_all_op_names()}
    for name in sorted(n for n in names if n.startswith(PREFIX) and not n.endswith("_")):
        base = name[len(PREFIX) :]
        element = _ELEMENT.get(base) or getattr(aten, base, None)
        if element is None or base in _NO_ELEMENT:
            continue
        packet = getattr(aten, name)
        for overload in (getattr(packet, o) for o in packet.overloads()):
            if _takes_lists_only_as_lists(overload):
                rules[overload] = _per_element(element)
    return rules


#: op overload -> mind's rule
RULES = _rules()
