"""Which nodes and GPUs are out, over outages that may overlap.

Two outages of one node (one from the failure trace, one from the MTBF model,
say) may overlap: the node is out from the first failure to the last repair.
:class:`Hardware` counts the outages in force per node and GPU and tells the
scheduler only when one flips between in and out. A node down or a GPU failed
in the cluster file stays so (its count starts at one, with no repair).
"""

from __future__ import annotations

from collections import defaultdict

from whale_opt.problem_data import FieldError, Instance
from whale_opt.scheduler import Scheduler
from whale_opt.sim.config import Outage


class Hardware:
    """The outages in force on ``cluster``, told to ``scheduler`` as they flip."""

    def __init__(self, cluster: Instance, scheduler: Scheduler) -> None:
        self.cluster = cluster
        self.scheduler = scheduler
        self.node_down: dict[str, int] = defaultdict(int)
        self.gpu_down: dict[str, int] = defaultdict(int)
        self.draining: dict[str, int] = defaultdict(int)
        for node in cluster.nodes:
            if node.down:
                self.node_down[node.id] = 1
            for index in node.failed_gpus:
                self.gpu_down[node.gpu_id(index)] = 1

    def check(self, outage: Outage) -> None:
        """ValueError when ``outage`` names a node or GPU the cluster lacks
        (:meth:`Outage.check_on`)."""
        try:
            outage.check_on(self.cluster)
        except FieldError as exc:
            raise ValueError(f"outage at {outage.at_s} s: {exc}") from None

    def fail(self, outage: Outage) -> tuple[str | None, list[str]]:
        """``outage`` begins. Returns the node or GPU id that went out (None: it
        already was) and the running jobs that lost GPUs, which the scheduler
        keeps as running until the caller requeues them."""
        if outage.kind == "drain":
            self.draining[outage.node] += 1
            if self.draining[outage.node] > 1:
                return None, []
            self.scheduler.drain(outage.node)
            return outage.node, []
        if outage.gpu is None:
            self.node_down[outage.node] += 1
            if self.node_down[outage.node] > 1:
                return None, []
            return outage.node, self.scheduler.set_node_down(outage.node)
        gpu_id = f"{outage.node}/{outage.gpu}"
        self.gpu_down[gpu_id] += 1
        if self.gpu_down[gpu_id] > 1:
            return None, []
        return gpu_id, self.scheduler.fail_gpu(gpu_id)

    def repair(self, outage: Outage) -> str | None:
        """``outage`` ends. Returns the node or GPU id that came back (None: another
        outage still holds it)."""
        if outage.kind == "drain":
            self.draining[outage.node] -= 1
            if self.draining[outage.node]:
                return None
            self.scheduler.drain(outage.node, draining=False)
            return outage.node
        if outage.gpu is None:
            self.node_down[outage.node] -= 1
            if self.node_down[outage.node]:
                return None
            self.scheduler.set_node_down(outage.node, down=False)
            return outage.node
        gpu_id = f"{outage.node}/{outage.gpu}"
        self.gpu_down[gpu_id] -= 1
        if self.gpu_down[gpu_id]:
            return None
        self.scheduler.fail_gpu(gpu_id, failed=False)
        return gpu_id
