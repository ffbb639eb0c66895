"""The math `tl` lacks, in the form the mode takes: libdevice's when compiled
(`math_compiled`), `tl` primitives or torch on the host values when interpreted
(`math_interpreted`)."""

from __future__ import annotations

from triton import knobs

if knobs.runtime.interpret:
    from .math_interpreted import *  # noqa: F403
else:
    from .math_compiled import *  # noqa: F403
