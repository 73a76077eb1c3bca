"""Least attained service, Tiresias-style with two discretised queues.

Tiresias (Gu et al., NSDI 2019) ranks jobs by the GPU-seconds of service
they already had, discretised into a few queues so that jobs do not swap
places at every tick. Here: queue 1 holds jobs whose ``attained_gpu_s`` is
below a threshold (default 3600 GPU-seconds, one GPU-hour), queue 2 the
rest; queue 1 goes before queue 2, FIFO (submit time, then id) inside each.
New jobs have attained nothing, so they start in queue 1 ahead of requeued
long runners, without any duration estimate.

As in every baseline, a higher priority class rank goes first; this order
applies within a rank (:mod:`whale_opt.policies.ordered`).
"""

from __future__ import annotations

from whale_opt.policies.ordered import OrderedPolicy, ranked
from whale_opt.problem_data import Instance


class LasPolicy(OrderedPolicy):
    """Two-queue least attained service; FIFO inside a queue; earliest-end placement.

    Parameters
    ----------
    threshold_gpu_s
        Attained service (GPU-seconds) from which a job falls to the second
        queue.
    """

    name = "las"
    prefer = "end"
    THRESHOLD_GPU_S = 3600.0

    def __init__(self, threshold_gpu_s: float = THRESHOLD_GPU_S) -> None:
        if threshold_gpu_s < 0:
            raise ValueError(f"threshold_gpu_s must be >= 0 (got {threshold_gpu_s!r})")
        self.threshold_gpu_s = threshold_gpu_s

    def order(self, instance: Instance) -> list[int]:
        """Queue 1 (attained below the threshold) first, each queue by submit time."""
        return ranked(instance, lambda k, job: job.attained_gpu_s >= self.threshold_gpu_s)
