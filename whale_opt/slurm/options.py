"""How the Slurm bridge reads a cluster: :class:`BridgeOptions`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from whale_opt.problem_data import GpuType

GRES_MODES = ("plain", "indexed")


@dataclass(frozen=True)
class BridgeOptions:
    """How the bridge reads a Slurm cluster.

    ``gres_mode``: ``plain`` (Slurm picks GPU indices on the chosen node) or
    ``indexed`` (nodes offer ``gpu:g0:1,...``; whale_opt's indices are
    enforced). ``partition``: manage only this partition's nodes and jobs
    (None: all). ``gpu_types``: GPU memory and speed per type name (others
    get ``default_gpu_memory_gb`` and speed 1). ``default_duration_s``: the
    estimate for a job without a time limit. ``nvlink``: the layout assumed
    for every node (Slurm does not report NVLink). ``allow_preemption``: let
    whale_opt preempt (``scontrol requeuehold``) requeueable running jobs.
    """

    gres_mode: str = "plain"
    partition: str | None = None
    gpu_types: Mapping[str, GpuType] = field(default_factory=dict)
    default_duration_s: int = 3600
    default_gpu_memory_gb: float = 80.0
    nvlink: str = "nvswitch"
    allow_preemption: bool = False

    def __post_init__(self) -> None:
        if self.gres_mode not in GRES_MODES:
            raise ValueError(f"gres_mode must be one of {GRES_MODES}, got {self.gres_mode!r}")
        if self.default_duration_s < 1:
            raise ValueError(f"default_duration_s must be >= 1, got {self.default_duration_s}")
        object.__setattr__(self, "gpu_types", MappingProxyType(dict(self.gpu_types)))

    def manages(self, partitions: tuple[str, ...]) -> bool:
        """Whether a node or job of ``partitions`` is this bridge's."""
        return self.partition is None or self.partition in partitions
