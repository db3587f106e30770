"""What the counters of `grading.judge.observe` record of one call: an `Observation` (FLOPs,
products, elements read and written, operators, Triton launches, numbers taken into Python,
writes into the arguments), with the largest tensor made (`TensorRecord`) and each Triton kernel
launched (`Launch`).
"""

from __future__ import annotations

import math
import weakref
from collections import defaultdict
from dataclasses import dataclass, field


@dataclass
class TensorRecord:
    numel: int = 0
    nbytes: int = 0
    shape: tuple[int, ...] = ()
    op: str = ""

    def __str__(self) -> str:
        return f"{self.numel} elements, shape {self.shape}, made by {self.op or 'nothing'}"


@dataclass
class Launch:
    """One Triton kernel launch. `loads` counts the elements each program read (interpreter)."""

    kernel: str
    grid: tuple[int, int, int]
    loads: dict[tuple[int, int, int], int] = field(default_factory=lambda: defaultdict(int))

    @property
    def programs(self) -> int:
        return math.prod(self.grid)

    @property
    def most_loaded_by_one_program(self) -> int:
        return max(self.loads.values(), default=0)


@dataclass
class Observation:
    """What one call did, as the counters saw it."""

    flops: int = 0
    largest: TensorRecord = field(default_factory=TensorRecord)
    multiplies: int = 0  # elementwise products (mul and friends): FLOPs count them as zero
    written: int = 0  # elements every (non-view) op produced, summed: elementwise work too
    read: int = 0  # elements every (non-view) op was given, summed: what reductions do
    ops: set[str] = field(default_factory=set)  # operator names, e.g. "mm", "softmax"
    launches: list[Launch] = field(default_factory=list)
    listed: int = 0  # elements of numbers turned into Python lists (.tolist())
    # Integer tensors whose values were converted from floating-point ones (x.long(), and what is
    # computed from those): their .tolist() counts as floating-point elements. By id, since a
    # tensor's == is elementwise; the value is the tensor itself, held weakly.
    from_floats: weakref.WeakValueDictionary = field(default_factory=weakref.WeakValueDictionary)
    # (argument, operator) for every write into memory a watched argument owns
    inputs_written: list[tuple[str, str]] = field(default_factory=list)

    @property
    def kernel_loads(self) -> int:
        """Elements every program of every Triton kernel loaded (counted under the interpreter,
        the CPU's way to run kernels; 0 on a GPU)."""
        return sum(sum(launch.loads.values()) for launch in self.launches)

    @property
    def work(self) -> int:
        """All the arithmetic PyTorch did: FLOPs of products, plus every element each operator
        read and wrote (a broadcast product summed away costs its full size here)."""
        return self.flops + self.read + self.written
