"""Launching a cooperative kernel (codegen/cooperative.py): the programs of one group split a
row between them and wait for each other at barriers, so a group runs only if all its programs
are resident on the GPU at once. The launcher therefore sizes the grid from the compiled
kernel's occupancy, once, when the module loads: `splits` programs a group (grid axis 0) and as
many groups (axis 1) as fit beside each other, each group then taking every `groups`-th row.
Work on other streams may hold SMs for a while (a collective): the group's programs then wait
for it to end. Two cooperative kernels running at once on two streams, each sized to fill the
GPU, could each hold programs the other's groups wait for; CUDA's cooperative launch
(`launch_cooperative_grid`, which only Triton's launcher sets) would rule that out, and is not
used yet.

It also owns what the kernel's last three arguments point at, made at a stream's first launch:
the workspace where the programs of a group leave their partials (two rows' worth a group, so
that a program ahead by a row never overwrites what a slower one still reads) and one zeroed
semaphore a group (`triton_helpers.group_barrier` leaves it ready for the next round). Launches
on one stream run one after another and share them; each stream has its own, so the same graph
running on two streams at once does not mix their barriers. (A CUDA graph records its stream's
first launch with the zeroing, which its replays then repeat: harmless.)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch
from mind.ir.logs import channel

from .errors import KernelError

log = channel("launch")

#: the most programs an SM holds at once on the GPUs Triton targets (Volta to Hopper: 32; this
#: bound only caps the estimate)
MAX_BLOCKS_PER_SM = 16
#: registers are given to a warp in units of this many
REGISTER_UNIT = 256
#: shared memory the hardware keeps per program besides the kernel's own (sm80 and later)
RESERVED_SHARED = 1024
#: the kernel's parameters the launcher passes after the call's: workspace, semaphores, groups
LAUNCHER_PARAMETERS = 3


@dataclass(frozen=True)
class Cooperation:
    """What a cooperative kernel's launch needs: programs per group and f32 partials per
    program and row."""

    splits: int
    partials: int

    def launcher(self, launch: Callable, kernel, device: torch.device, name: str) -> Callable:
        """`launch` with the grid's groups capped at what is resident at once, and the
        workspace, semaphores and group count passed after the wrapper's arguments. `kernel`:
        Triton's compiled kernel, or torch's launcher's object of it (`resources`)."""
        with torch.cuda.device(device):
            props = torch.cuda.get_device_properties(device)
        return self._with_workspace(launch, self.groups(resources(kernel), props, name), device)

    def groups(self, used: Resources, props, name: str) -> int:
        """How many groups of programs that each use `used` the GPU `props` describes holds at
        once."""
        per_sm = blocks_per_sm(used, props)
        resident = props.multi_processor_count * per_sm
        groups = resident // self.splits
        log.debug(
            "kernel %s: cooperative, %d programs an SM (%d registers), groups of %d: %d groups",
            name, per_sm, used.registers, self.splits, groups,
        )  # fmt: skip
        if groups < 1:
            raise KernelError(
                f"kernel '{name}': its {self.splits} cooperating programs cannot all be resident "
                f"at once on {props.name} ({resident} fit); compile without cooperative "
                "reductions (the to-triton option cooperative=false)"
            )
        return groups

    def interpreted(self, launch: Callable) -> Callable:
        """The interpreter runs programs one after another: a group of one program (a row
        that is one chunk) runs, a larger one would wait at its first barrier for ever."""
        if self.splits > 1:
            raise KernelError(
                f"a cooperative kernel of {self.splits} programs a group cannot run in Triton's "
                "interpreter, which runs programs one after another"
            )
        return self._with_workspace(launch, 1, torch.device("cpu"))

    def _with_workspace(self, launch: Callable, groups: int, device: torch.device) -> Callable:
        """`launch` passing each stream's own workspace and semaphores, made at its first launch."""
        spaces: dict[Any, tuple[torch.Tensor, torch.Tensor]] = {}

        def cooperative(gx: int, gy: int, gz: int, stream, *args) -> None:
            space = spaces.get(stream)
            if space is None:
                space = spaces[stream] = self._space(groups, device)
            g = min(gy, groups)
            launch(gx, g, gz, stream, *args, *space, g)

        return cooperative

    def _space(self, groups: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        workspace = torch.empty(2 * groups * self.partials * self.splits, device=device)
        return workspace, torch.zeros(groups, dtype=torch.int32, device=device)


class Resources(NamedTuple):
    """What one program of a kernel holds on an SM."""

    warps: int
    #: registers a thread
    registers: int
    #: bytes of shared memory
    shared: int


def resources(kernel) -> Resources:
    """What a program of `kernel` holds: Triton's compiled kernel (which loads its binary, and
    learns its registers, lazily), or torch's launcher's object of one, loaded (what a launch
    record restores: no Triton compiled kernel exists in that process)."""
    metadata = getattr(kernel, "metadata", None)
    if metadata is None:
        return Resources(kernel.num_warps, kernel.n_regs, kernel.shared)
    if hasattr(kernel, "_init_handles"):
        kernel._init_handles()
    return Resources(metadata.num_warps, kernel.n_regs, metadata.shared)


def blocks_per_sm(used: Resources, props) -> int:
    """How many programs that each use `used` an SM holds at once, by threads, registers and
    shared memory (CUDA's occupancy rules, registers rounded up to whole allocation units a
    warp)."""
    per_warp = -(-max(used.registers, 1) * 32 // REGISTER_UNIT) * REGISTER_UNIT
    by_threads = props.max_threads_per_multi_processor // (32 * used.warps)
    by_registers = props.regs_per_multiprocessor // (per_warp * used.warps)
    by_shared = props.shared_memory_per_multiprocessor // (used.shared + RESERVED_SHARED)
    return min(by_threads, by_registers, by_shared, MAX_BLOCKS_PER_SM)
