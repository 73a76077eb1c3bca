"""What the placement search reads of a cluster state.

:class:`Occupancy` is the read side of
:class:`~whale_opt.placement.state.ClusterState` as the search
(:mod:`whale_opt.placement.search`, :mod:`whale_opt.placement.fitting`) sees
it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

import numpy as np

from whale_opt.placement.eligibility import NodeGroup
from whale_opt.placement.index import FreeIndex
from whale_opt.placement.profile import INF
from whale_opt.problem_data import Instance, QueuedJob
from whale_opt.topology import NodeTopology

__all__ = ["NodeGroup", "Occupancy"]


class Occupancy(Protocol):
    """What the search reads of a cluster state (see
    :class:`~whale_opt.placement.state.ClusterState` for each method)."""

    @property
    def instance(self) -> Instance: ...

    def topology(self, node: int) -> NodeTopology: ...

    def free_mask(self, node: int) -> int: ...

    def free_count(self, node: int) -> int: ...

    def healthy_count(self, node: int) -> int: ...

    def shares_now(self, node: int) -> Mapping[int, tuple[int, int]]: ...

    def gpu_peak(self, node: int, start: int, end: int) -> float: ...

    def free_counts(self) -> np.ndarray: ...

    def first_end_at(self, node: int) -> float: ...

    def first_ends(self) -> np.ndarray: ...

    def free_index(self) -> FreeIndex: ...

    def eligible(self, position: int, shaped: QueuedJob | None = None) -> tuple[int, ...]: ...

    def node_groups(
        self,
        position: int,
        shaped: QueuedJob | None = None,
        gpu_type: str | None = None,
        within: frozenset[int] | None = None,
    ) -> list[NodeGroup]: ...

    def part_fit(
        self,
        node: int,
        start: int,
        duration: int,
        gpus: float,
        job: QueuedJob,
        give_up: float = INF,
    ) -> float: ...

    def quota_fit(
        self, job: QueuedJob, start: float, duration: int, give_up: float = INF
    ) -> float: ...

    def node_fit(
        self, node: int, start: int, duration: int, job: QueuedJob, give_up: float = INF
    ) -> float: ...

    def free_from(self, node: int, gpus: float) -> float: ...

    def quota_releases(self, job: QueuedJob) -> list[int]: ...

    def host_releases(self, job: QueuedJob, nodes: Iterable[int]) -> list[np.ndarray]: ...

    def room(self, job: QueuedJob, node: int, t: int, duration: int) -> int: ...
