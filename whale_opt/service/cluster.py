"""One named cluster: its Scheduler, its event log position and its latest decision.

Every change to a cluster is an *event* (``submit``, ``finish``,
``checkpointed``, ``node``, ``drain``, ``apply``), applied by
:meth:`ClusterRuntime.apply_event` both live and when the log is replayed
after a restart, so the two cannot differ. An event's payload holds what it
needs to be replayed without the solver: a submitted job as a record, a
round's decision as decision@1 (``decide`` is a solve, then an ``apply``
event of its decision). What an event takes from the cluster's state when it
happens (a submission without ``submitted_at`` is submitted at the clock) is
written into its payload by :meth:`ClusterRuntime.stamp` before it is
applied and stored, so a replay reads the value, never takes it again.
:meth:`ClusterRuntime.precheck` refuses what the Scheduler would refuse,
before anything changes.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from whale_opt.decision import Action, Decision, job_nodes
from whale_opt.io import decision_from_dict, decision_to_dict
from whale_opt.problem_data import QueuedJob
from whale_opt.scheduler import Scheduler
from whale_opt.service import codec
from whale_opt.service.errors import ApiError, invalid, not_found

EVENT_KINDS = ("create", "submit", "finish", "checkpointed", "node", "drain", "apply")
# Events that cannot make a decision being computed invalid: a new job stays
# queued, a checkpoint only moves what a preemption would cost. A finish (of a
# job the round may start), a node down or draining, an applied decision can.
HARMLESS_TO_A_ROUND = ("submit", "checkpointed")


@dataclass(frozen=True)
class LatestDecision:
    """The last decision applied to a cluster, the clock it was made at, and how."""

    now: int
    decision: Decision
    source: str

    def to_dict(self) -> dict[str, Any]:
        """JSON form (stored in snapshots)."""
        return {"now": self.now, "source": self.source, "decision": decision_to_dict(self.decision)}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> LatestDecision:
        """The inverse of :meth:`to_dict`."""
        return cls(raw["now"], decision_from_dict(raw["decision"], "snapshot"), raw["source"])


class ClusterRuntime:
    """A cluster held in memory; the event log in storage is its truth.

    ``seq`` is the number of the last event applied; ``clock`` the latest
    ``now`` a round or a node event moved to (rounds may not go back);
    ``changed_at`` the last event that could invalidate a round in flight.
    """

    def __init__(
        self,
        name: str,
        scheduler: Scheduler,
        seq: int = 0,
        clock: int | None = None,
        latest: LatestDecision | None = None,
    ) -> None:
        self.name = name
        self.scheduler = scheduler
        self.seq = seq
        self.clock = scheduler.template.now if clock is None else clock
        self.latest = latest
        self.changed_at = seq
        self.lock = asyncio.Lock()
        self.deciding = False
        # (seq, job id) -> why it waits, for the Kubernetes filter (bounded by its user).
        self.explained: OrderedDict[tuple[int, str], list[str]] = OrderedDict()
        self._probe: dict[str, Any] | None = None

    # -- building -----------------------------------------------------------------

    @classmethod
    def from_create(cls, name: str, payload: dict[str, Any]) -> ClusterRuntime:
        """The cluster a ``create`` event describes."""
        return cls(name, codec.build_scheduler(payload["instance"], payload["settings"]))

    def snapshot(self) -> dict[str, Any]:
        """JSON form of the whole state (see :func:`restore`)."""
        return {
            "scheduler": codec.encode(self.scheduler),
            "clock": self.clock,
            "latest": None if self.latest is None else self.latest.to_dict(),
        }

    @classmethod
    def restore(cls, name: str, seq: int, raw: dict[str, Any]) -> ClusterRuntime:
        """The cluster a :meth:`snapshot` taken at event ``seq`` describes."""
        latest = raw.get("latest")
        return cls(
            name,
            codec.decode(raw["scheduler"]),
            seq,
            raw["clock"],
            None if latest is None else LatestDecision.from_dict(latest),
        )

    @property
    def probe(self) -> dict[str, Any]:
        """instance@1 skeleton that submitted jobs are validated in."""
        from whale_opt.service.work import probe_base

        if self._probe is None:
            self._probe = probe_base(self.scheduler.template)
        return self._probe

    # -- events -------------------------------------------------------------------

    def stamp(self, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        """``payload`` completed with what it takes from the cluster now (lock held).

        A submitted job without ``submitted_at`` is submitted at :attr:`clock`; an
        explicit value (0 included) is kept. The stamped payload is the one applied
        and stored, so a replay after a restart gives the same time.
        """
        if kind != "submit" or "submitted_at" in payload["job"]:
            return payload
        return {**payload, "job": {**payload["job"], "submitted_at": self.clock}}

    def precheck(self, kind: str, payload: dict[str, Any]) -> None:
        """Raise the 4xx :meth:`apply_event` would meet; change nothing."""
        s = self.scheduler
        job_id = payload.get("job_id") or payload.get("job", {}).get("id")
        if kind == "submit" and (job_id in s.queue or job_id in s.running):
            raise ApiError(409, f"job {job_id!r} is already known to cluster {self.name!r}")
        if kind == "finish" and job_id not in s.queue and job_id not in s.running:
            raise not_found("job", str(job_id))
        if kind == "checkpointed":
            if job_id not in s.running:
                if job_id in s.queue:
                    raise ApiError(409, f"job {job_id!r} is queued, not running")
                raise not_found("job", str(job_id))
            if payload["now"] < s.running[job_id].started_at:
                raise invalid("now", "precedes the job's start", payload["now"])
        if kind in ("node", "drain") and payload["node_id"] not in s.nodes:
            raise not_found("node", payload["node_id"])
        if kind in ("node", "apply", "checkpointed") and payload["now"] < self.clock:
            raise ApiError(
                409, f"now={payload['now']} is before the cluster's clock ({self.clock})"
            )

    def apply_event(self, kind: str, payload: dict[str, Any]) -> dict[str, Any]:
        """Apply one event (live or replayed); what it did, as JSON."""
        s = self.scheduler
        out: dict[str, Any] = {}
        if kind == "submit":
            if "submitted_at" not in payload["job"]:  # the record's default 0 is no time
                raise ValueError("a submit event must be stamped first (ClusterRuntime.stamp)")
            job = codec.record(QueuedJob, payload["job"])
            s.submit(job, checkpoint_s=payload.get("checkpoint_s"))
            out = {"job": job.id, "state": "queued", "submitted_at": job.submitted_at}
        elif kind == "finish":
            s.finish(payload["job_id"])
            out = {"job": payload["job_id"], "state": "gone"}
        elif kind == "checkpointed":
            s.checkpointed(payload["job_id"], payload["now"])
            self.clock = max(self.clock, payload["now"])
            out = {"job": payload["job_id"], "checkpoint_at": payload["now"]}
        elif kind == "node":
            lost = s.set_node_down(payload["node_id"], payload["down"])
            for job_id in lost:
                s.requeue(job_id, None, payload["now"])
            self.clock = max(self.clock, payload["now"])
            out = {"node": payload["node_id"], "down": payload["down"], "requeued": lost}
        elif kind == "drain":
            still = s.drain(payload["node_id"], payload["draining"])
            out = {"node": payload["node_id"], "draining": payload["draining"], "running": still}
        elif kind == "apply":
            decision = decision_from_dict(payload["decision"], "event")
            s.apply(decision, payload["now"])
            self.clock = max(self.clock, payload["now"])
            self.latest = LatestDecision(payload["now"], decision, payload["source"])
            out = {"applied_at": payload["now"]}
        else:
            raise ValueError(f"unknown event kind {kind!r}")
        self.seq += 1
        if kind not in HARMLESS_TO_A_ROUND:
            self.changed_at = self.seq
        return out

    # -- views --------------------------------------------------------------------

    def summary(self) -> dict[str, Any]:
        """Name, policy, clock, counts."""
        s = self.scheduler
        return {
            "name": self.name,
            "policy": s.solver,
            "seq": self.seq,
            "clock": self.clock,
            "queued": len(s.queue),
            "running": len(s.running),
            "nodes": len(s.nodes),
            "nodes_down": sorted(n.id for n in s.nodes.values() if n.down),
            "nodes_draining": sorted(n.id for n in s.nodes.values() if n.draining),
            "decided_at": None if self.latest is None else self.latest.now,
            "deciding": self.deciding,
        }

    def state(self) -> dict[str, Any]:
        """The summary plus the queue, the running jobs and the latest decision."""
        s = self.scheduler
        return {
            **self.summary(),
            "queue": [self.job_view(job_id) for job_id in s.queue],
            "running_jobs": [self.job_view(job_id) for job_id in s.running],
            "latest": None if self.latest is None else self.latest.to_dict(),
        }

    def job_view(self, job_id: str) -> dict[str, Any]:
        """One job: queued (with its plan, if the latest decision has one) or running."""
        s = self.scheduler
        if job_id in s.running:
            held = s.running[job_id]
            nodes = list(dict.fromkeys(gpu.rpartition("/")[0] for gpu in held.gpus))
            return {
                "id": job_id,
                "state": "running",
                "gpus": list(held.gpus),
                "nodes": nodes,
                "started_at": held.started_at,
                "expected_end": held.expected_end,
            }
        if job_id not in s.queue:
            raise not_found("job", job_id)
        job = s.queue[job_id]
        view: dict[str, Any] = {
            "id": job_id,
            "state": "queued",
            "gpus_requested": job.gpu_count,
            "submitted_at": job.submitted_at,
            "tenant": job.tenant,
        }
        item = self._latest_item(job_id)
        if item is not None and self.latest is not None:
            view["latest_action"] = item.action.value
            if item.start_s is not None:
                view["expected_start"] = self.latest.now + item.start_s
            if item.action is Action.PLANNED:
                view["planned_nodes"] = list(job_nodes(item))
            if item.reason:
                view["reason"] = item.reason
        return view

    def _latest_item(self, job_id: str) -> Any:
        if self.latest is None:
            return None
        return next((item for item in self.latest.decision.jobs if item.id == job_id), None)

    def prewarm(self, now: int, lookahead_s: int) -> list[dict[str, Any]]:
        """Queued jobs the latest decision plans to start by ``now + lookahead_s``."""
        if self.latest is None:
            return []
        out = []
        for item in self.latest.decision.by_action(Action.PLANNED):
            if item.id not in self.scheduler.queue or item.start_s is None:
                continue
            start = self.latest.now + item.start_s
            if start <= now + lookahead_s:
                out.append(
                    {
                        "id": item.id,
                        "nodes": list(item.nodes),
                        "node_gpus": list(item.node_gpus),
                        "expected_start": start,
                        "starts_in_s": start - now,
                    }
                )
        return sorted(out, key=lambda hint: (hint["expected_start"], hint["id"]))
