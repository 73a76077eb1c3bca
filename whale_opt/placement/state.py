"""Cluster state over time, for list scheduling (greedy, decoders, simulator).

A :class:`ClusterState` holds, per node, the GPUs free right now (a bit
mask: exact ids) and GPU / CPU / memory usage profiles for the future
(counts: nothing is reserved by id past now), and per tenant a GPU usage
profile for quotas. Placement rules (what fits where) live here once, so
every policy that list-schedules obeys the same ones as the checker.

Soft preferences (a ``zone``, ``preferred_gpu_types``, ``prefer_nvlink``)
are priced, not required: a job that has one takes the placement whose
first criterion (its end; its start under ``best-fit`` and ``frag-aware``)
plus the penalty of the preferences it drops, in seconds, is least. Only
such jobs pay for the extra searches (see :meth:`ClusterState.best_placement`).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from whale_opt import preferences
from whale_opt.placement.profile import EPS, INF, Profile
from whale_opt.problem_data import Instance, QueuedJob, RunningJob
from whale_opt.topology import (
    NodeTopology,
    choose_gpus,
    eligible_nodes,
    needs_nvlink,
    node_can_host,
    node_topologies,
    nvlink_shaped,
    popcount,
    single_node,
)

PREFERENCES = ("end", "best-fit", "frag-aware")


@dataclass(frozen=True)
class Placement:
    """Where and when a job goes: per node (position, GPU count, GPU mask now)."""

    start: int
    end: int
    gpu_type: str
    nodes: tuple[int, ...]
    counts: tuple[int, ...]
    masks: tuple[int, ...] = ()  # exact GPUs, only when start == 0


class ClusterState:
    """Free GPUs now and resource usage over time, node by node and tenant by tenant."""

    def __init__(
        self,
        instance: Instance,
        topologies: tuple[NodeTopology, ...] | None = None,
        preempted: frozenset[str] = frozenset(),
        *,
        wait_for_release: bool = True,
        prefer: str = "end",
        priced: bool = True,
    ) -> None:
        # wait_for_release: an NVLink job is planned on a partially linked node no
        # earlier than the first end of a job there (the checker's rule); bounds
        # relax it (False). priced: soft preferences are priced into placements;
        # bounds want plain earliest ends (False).
        if prefer not in PREFERENCES:
            raise ValueError(f"unknown placement preference {prefer!r}; choose {PREFERENCES}")
        self.instance = instance
        self.wait_for_release = wait_for_release
        self.prefer = prefer
        self.priced = priced
        self.topologies = topologies if topologies is not None else node_topologies(instance)
        self.free_now = [topo.healthy for topo in self.topologies]
        n = len(instance.nodes)
        self.gpu_use = [Profile() for _ in range(n)]
        self.cpu_use = [Profile() for _ in range(n)]
        self.mem_use = [Profile() for _ in range(n)]
        self.tenant_use: dict[str, Profile] = {}
        self._eligible: dict[tuple[tuple[str, ...], int, str], tuple[int, ...]] = {}
        self._first_free: list[dict[int, float]] = [{} for _ in range(n)]
        self.first_end: list[float] = [INF] * n  # first end of any job on the node
        self._quota_memo: dict[tuple[str, int, int, int], float] = {}
        for job in instance.running:
            if job.id in preempted:
                continue
            per_node: dict[int, int] = {}
            for gpu in job.gpus:
                ref = instance.parse_gpu(gpu)
                self.free_now[ref.node] &= ~(1 << ref.index)
                per_node[ref.node] = per_node.get(ref.node, 0) + 1
            self._occupy(
                job.tenant, per_node, len(job.gpus), job.cpu, job.memory_gb, 0, job.remaining_s
            )

    def copy(self) -> ClusterState:
        """An independent copy (topologies and eligibility shared: they never change)."""
        twin = object.__new__(ClusterState)
        twin.instance = self.instance
        twin.wait_for_release = self.wait_for_release
        twin.prefer = self.prefer
        twin.priced = self.priced
        twin.topologies = self.topologies
        twin.free_now = list(self.free_now)
        twin.gpu_use = [p.copy() for p in self.gpu_use]
        twin.cpu_use = [p.copy() for p in self.cpu_use]
        twin.mem_use = [p.copy() for p in self.mem_use]
        twin.tenant_use = {name: p.copy() for name, p in self.tenant_use.items()}
        twin._eligible = self._eligible
        twin._first_free = [dict(cache) for cache in self._first_free]
        twin.first_end = list(self.first_end)
        twin._quota_memo = {}
        return twin

    # -- bookkeeping ---------------------------------------------------------

    def _occupy(
        self,
        tenant: str,
        per_node: dict[int, int],
        total: int,
        cpu: float,
        memory_gb: float,
        start: int,
        end: int,
    ) -> None:
        for node, count in per_node.items():
            self.gpu_use[node].add(start, end, count)
            self._first_free[node] = {}
            if end > 0:
                self.first_end[node] = min(self.first_end[node], end)
            self.cpu_use[node].add(start, end, cpu * count / total)
            self.mem_use[node].add(start, end, memory_gb * count / total)
        self.tenant_profile(tenant).add(start, end, total)
        self._quota_memo.clear()

    def tenant_profile(self, tenant: str) -> Profile:
        """The GPU usage profile of ``tenant``."""
        if tenant not in self.tenant_use:
            self.tenant_use[tenant] = Profile()
        return self.tenant_use[tenant]

    def eligible(self, position: int, shaped: QueuedJob | None = None) -> tuple[int, ...]:
        """Nodes that could ever hold (part of) queued job ``position``, or of
        ``shaped``, the job with another topology (an NVLink-shaped try)."""
        job = self.instance.queue[position] if shaped is None else shaped
        # Eligibility depends only on the job's shape: share it between alike jobs.
        shape = (self.instance.eligible_types[position], job.gpus, job.topology)
        if shape not in self._eligible:
            if shaped is None:
                found = eligible_nodes(self.instance, position, self.topologies)
            else:
                found = tuple(
                    n for n in self.eligible(position) if node_can_host(job, self.topologies[n])
                )
            self._eligible[shape] = found
        return self._eligible[shape]

    def commit(self, position: int, placement: Placement) -> None:
        """Record ``placement`` of queued job ``position``."""
        job = self.instance.queue[position]
        for node, mask in zip(placement.nodes, placement.masks, strict=False):
            self.free_now[node] &= ~mask
        self._occupy(
            job.tenant,
            dict(zip(placement.nodes, placement.counts, strict=True)),
            job.gpus,
            job.cpu,
            job.memory_gb,
            placement.start,
            placement.end,
        )

    # -- fitting -------------------------------------------------------------

    def _node_fit(
        self,
        node: int,
        start: int,
        duration: int,
        gpus: int,
        job: QueuedJob,
        give_up: float = INF,
    ) -> float:
        """Earliest t >= start at which ``gpus`` of ``job`` fit on ``node`` for ``duration``."""
        node_rec = self.instance.nodes[node]
        limit = popcount(self.topologies[node].healthy)
        share = gpus / job.gpus
        t: float = start
        while t <= give_up and t < INF:
            t0 = int(t)
            t = self.gpu_use[node].earliest(t0, duration, gpus, limit, give_up)
            if job.cpu and t < INF:
                t = self.cpu_use[node].earliest(
                    int(t), duration, job.cpu * share, node_rec.cpu, give_up
                )
            if job.memory_gb and t < INF:
                t = self.mem_use[node].earliest(
                    int(t), duration, job.memory_gb * share, node_rec.memory_gb, give_up
                )
            if t == t0:
                return t
        return INF

    def _quota_fit(
        self, job: QueuedJob, start: float, duration: int, give_up: float = INF
    ) -> float:
        quota = self.instance.tenants.get(job.tenant)
        if quota is None or quota.gpu_quota is None or start == INF:
            return start
        # Many nodes ask the same question of the tenant's profile: remember answers
        # until the next commit changes it.
        key = (job.tenant, job.gpus, duration, int(start))
        found = self._quota_memo.get(key)
        if found is None:
            found = self.tenant_profile(job.tenant).earliest(
                int(start), duration, job.gpus, quota.gpu_quota
            )
            self._quota_memo[key] = found
        return found if found <= give_up else INF

    def _free_from(self, node: int, gpus: int) -> float:
        """First t >= 1 when ``node`` has ``gpus`` GPUs unused (cached until it changes)."""
        cache = self._first_free[node]
        if gpus not in cache:
            profile = self.gpu_use[node]
            room = popcount(self.topologies[node].healthy) - gpus + EPS
            i = bisect.bisect_right(profile.times, 1) - 1
            found = INF
            while i < len(profile.times):
                if profile.levels[i] <= room:
                    found = max(1, profile.times[i])
                    break
                i += 1
            cache[gpus] = found
        return cache[gpus]

    def _quota_releases(self, job: QueuedJob) -> list[int]:
        """Moments when the job's tenant's GPU use drops (quota frees up)."""
        quota = self.instance.tenants.get(job.tenant)
        if quota is None or quota.gpu_quota is None:
            return []
        profile = self.tenant_profile(job.tenant)
        return [
            profile.times[k]
            for k in range(1, len(profile.times))
            if profile.levels[k] < profile.levels[k - 1]
        ]

    def node_fit(
        self, node: int, start: int, duration: int, job: QueuedJob, give_up: float = INF
    ) -> float:
        """Earliest t >= start where the whole job fits on ``node`` and in its quota."""
        t: float = start
        while t <= give_up and t < INF:
            t0 = t
            t = self._node_fit(node, int(t), duration, job.gpus, job, give_up)
            t = self._quota_fit(job, t, duration, give_up)
            if t == t0:
                return t
        return INF

    def fits_now(
        self,
        job: QueuedJob,
        duration: int,
        per_node: dict[int, int],
        released: Sequence[RunningJob] = (),
    ) -> bool:
        """Whether ``job`` may run on [0, duration) with ``per_node`` GPUs per node as
        far as GPU counts, CPU, host memory and its tenant's quota go, once the
        ``released`` running jobs (still on this timeline) are gone. Which GPUs
        are free now is the caller's business."""
        timeline = self._releasing(released, per_node, job.tenant) if released else self
        return all(
            timeline._node_fit(node, 0, duration, count, job, 0) == 0
            for node, count in per_node.items()
        ) and (timeline._quota_fit(job, 0, duration, 0) == 0)

    def _releasing(
        self, released: Sequence[RunningJob], nodes: Iterable[int], tenant: str
    ) -> ClusterState:
        """A twin for :meth:`fits_now`: ``released`` jobs' usage taken off ``nodes``
        and ``tenant``'s profile (other profiles shared with this timeline: read only)."""
        twin = object.__new__(ClusterState)
        twin.instance = self.instance
        twin.topologies = self.topologies
        twin.gpu_use, twin.cpu_use, twin.mem_use = (
            list(self.gpu_use),
            list(self.cpu_use),
            list(self.mem_use),
        )
        touched = set(nodes)
        for node in touched:
            for profiles in (twin.gpu_use, twin.cpu_use, twin.mem_use):
                profiles[node] = profiles[node].copy()
        twin.tenant_use = dict(self.tenant_use)
        twin.tenant_use[tenant] = self.tenant_profile(tenant).copy()
        twin._quota_memo = {}
        for job in released:
            per_node: dict[int, int] = {}
            for gpu in job.gpus:
                ref = self.instance.parse_gpu(gpu)
                per_node[ref.node] = per_node.get(ref.node, 0) + 1
            total = len(job.gpus)
            for node, count in per_node.items():
                if node in touched:
                    twin.gpu_use[node].add(0, job.remaining_s, -count)
                    twin.cpu_use[node].add(0, job.remaining_s, -job.cpu * count / total)
                    twin.mem_use[node].add(0, job.remaining_s, -job.memory_gb * count / total)
            if job.tenant == tenant:
                twin.tenant_use[tenant].add(0, job.remaining_s, -total)
        return twin

    def best_placement(
        self,
        position: int,
        latest_start: int | None = None,
        *,
        by_start: bool = False,
        gpu_type: str | None = None,
        within: frozenset[int] | None = None,
    ) -> Placement | None:
        """The placement of job ``position`` that ends earliest (ties: tightest fit).

        Starting now needs exact free GPUs (NVLink-connected when asked);
        later starts need free GPU counts. None when nothing fits by
        ``latest_start`` (default: the horizon). ``by_start`` picks the
        earliest start instead of the earliest end; ``gpu_type`` allows only
        that type, ``within`` only those nodes.

        A job with priced soft preferences gets the placement whose first
        criterion plus the penalty (in seconds) of the preferences it drops
        is least, among the best placements that honour each combination of
        them (in its zone, on a preferred type, NVLink-shaped) and the best
        unrestricted one. ``by_start`` and an unpriced timeline ignore them.
        """
        job = self.instance.queue[position]
        horizon = self.instance.policy.horizon_s if latest_start is None else latest_start
        wanted = () if by_start or not self.priced else self._priced_preferences(position)
        if wanted:
            return self._cheapest(position, horizon, wanted, gpu_type, within)
        return self._best(position, job, horizon, by_start, gpu_type, within)

    def _priced_preferences(self, position: int) -> tuple[str, ...]:
        """The soft preferences of job ``position`` that dropping would cost something."""
        job = self.instance.queue[position]
        policy = self.instance.policy
        out: list[str] = []
        if job.zone is not None and policy.zone_penalty_s > 0:
            out.append("zone")
        if job.preferred_gpu_types and policy.gpu_type_penalty_s > 0:
            out.append("gpu_type")
        wants_link = job.prefer_nvlink and job.topology != "nvlink" and job.gpus > 1
        if wants_link and policy.nvlink_penalty_s > 0:
            out.append("nvlink")
        return tuple(out)

    def _cheapest(
        self,
        position: int,
        horizon: int,
        wanted: tuple[str, ...],
        gpu_type: str | None,
        within: frozenset[int] | None,
    ) -> Placement | None:
        """The least-cost placement over the restrictions that honour ``wanted``."""
        job = self.instance.queue[position]
        eligible = self.eligible(position)
        honour: list[frozenset[int]] = []
        if "zone" in wanted:
            honour.append(frozenset(n for n in eligible if self.instance.nodes[n].zone == job.zone))
        if "gpu_type" in wanted:
            liked = set(job.preferred_gpu_types)
            honour.append(
                frozenset(n for n in eligible if self.instance.nodes[n].gpu_type in liked)
            )
        restrictions: list[frozenset[int] | None] = []
        if len(honour) == 2:
            restrictions.append(honour[0] & honour[1])
        restrictions += [*honour, None]
        shapes = [nvlink_shaped(job), job] if "nvlink" in wanted else [job]
        shortest = 0 if self.prefer != "end" else self.instance.min_duration(position) or 0
        weight = self.instance.weights[position]
        best: tuple[float, ...] | None = None
        chosen: Placement | None = None
        for shape in shapes:
            for allowed in restrictions:
                nodes = _both(allowed, within)
                if nodes is not None and not nodes:
                    continue
                # Dropping preferences costs >= 0: nothing later than the best key wins.
                latest = horizon if best is None else min(horizon, int(best[0]) - shortest)
                if latest < 0:
                    continue
                placement = self._best(position, shape, latest, False, gpu_type, nodes)
                if placement is None:
                    continue
                per_node = dict(zip(placement.nodes, placement.counts, strict=True))
                masks = (
                    dict(zip(placement.nodes, placement.masks, strict=True))
                    if placement.masks
                    else None
                )
                names = preferences.dropped(self.instance, position, per_node, masks)
                penalty_s = preferences.price(self.instance, position, names) / weight
                plain = self._key(placement, False)
                key = (plain[0] + penalty_s, *plain[1:])
                if best is None or key < best:
                    best, chosen = key, placement
        return chosen

    def _best(
        self,
        position: int,
        job: QueuedJob,
        horizon: int,
        by_start: bool,
        gpu_type: str | None,
        within: frozenset[int] | None,
    ) -> Placement | None:
        """:meth:`best_placement` without soft preferences, for ``job`` shaped as given."""
        best: tuple[float, ...] | None = None
        chosen: Placement | None = None
        # Nodes by type, and for NVLink jobs by size too: whether a job fits one
        # node, or takes whole nodes, depends on the node's size.
        groups: dict[tuple[str, int], list[int]] = {}
        for node in self.eligible(position, None if job is self.instance.queue[position] else job):
            if within is not None and node not in within:
                continue
            node_type = self.instance.nodes[node].gpu_type
            size = self.topologies[node].size if job.topology == "nvlink" else 0
            if gpu_type is None or node_type == gpu_type:
                groups.setdefault((node_type, size), []).append(node)
        # Fastest types first, so their ends prune the search on slower ones.
        for (name, _), nodes in sorted(
            groups.items(), key=lambda item: self.instance.durations[position][item[0][0]]
        ):
            duration = self.instance.durations[position][name]
            latest = horizon
            if best is not None:
                # Nothing starting later than this can beat the best key found.
                latest = min(
                    horizon, int(best[0]) - (0 if by_start or self.prefer != "end" else duration)
                )
            if latest < 0:
                continue
            for placement in self._type_placements(job, duration, name, nodes, latest):
                key = self._key(placement, by_start)
                if best is None or key < best:
                    best, chosen = key, placement
        return chosen

    def _key(self, placement: Placement, by_start: bool) -> tuple[float, ...]:
        """How good a placement is under the timeline's preference (lower is better).

        ``end``: earliest end, then tightest fit. ``best-fit``: earliest start,
        then the fewest GPUs left free on the chosen nodes. ``frag-aware``:
        earliest start, then the least shrinking of the chosen nodes' largest
        free NVLink blocks, then the tightest fit.
        """
        leftover = 0
        shrink = 0  # how much the placement shrinks its nodes' largest free NVLink blocks
        if placement.start == 0:
            for n, c, mask in zip(placement.nodes, placement.counts, placement.masks, strict=True):
                topo = self.topologies[n]
                leftover += popcount(self.free_now[n]) - c
                shrink += topo.largest_block(self.free_now[n]) - topo.largest_block(
                    self.free_now[n] & ~mask
                )
        tail = (len(placement.nodes), placement.nodes[0])
        if by_start:
            return (placement.start, leftover, placement.end, *tail)
        if self.prefer == "best-fit":
            return (placement.start, leftover, placement.end, *tail)
        if self.prefer == "frag-aware":
            return (placement.start, shrink, leftover, placement.end, *tail)
        return (placement.end, leftover, *tail)

    def _type_placements(
        self, job: QueuedJob, duration: int, gpu_type: str, nodes: list[int], horizon: int
    ) -> list[Placement]:
        topo0 = self.topologies[nodes[0]]
        if single_node(job, topo0):
            return self._single_node(job, duration, gpu_type, nodes, horizon)
        if job.topology == "nvlink":
            return self._whole_nodes(job, duration, gpu_type, nodes, horizon)
        return self._spread(job, duration, gpu_type, nodes, horizon)

    def _single_node(
        self, job: QueuedJob, duration: int, gpu_type: str, nodes: list[int], horizon: int
    ) -> list[Placement]:
        out: list[Placement] = []
        nvlink = needs_nvlink(job)
        for node in nodes:
            if (
                popcount(self.free_now[node]) >= job.gpus
                and self.node_fit(node, 0, duration, job, 0) == 0
            ):
                mask = choose_gpus(self.topologies[node], self.free_now[node], job.gpus, nvlink)
                if mask is not None:
                    out.append(Placement(0, duration, gpu_type, (node,), (job.gpus,), (mask,)))
        if out:
            return out  # a start now ends no later than any later start on this type
        best_later: tuple[float, int] | None = None
        # Nodes by a cheap lower bound on when the job could start there; stop
        # once no node can beat the best start found.
        for bound, node in sorted((self._free_from(n, job.gpus), n) for n in nodes):
            if bound > horizon or (best_later is not None and bound >= best_later[0]):
                break
            # Not now: from the next moment something frees on this node.
            first = 1
            if self.wait_for_release and needs_nvlink(job) and not self.topologies[node].clique:
                # NVLink sets in the future are not tracked: wait until something here ends.
                release = self.first_end[node]
                if release == INF:
                    continue
                first = int(release)
            give_up = horizon if best_later is None else best_later[0] - 1
            t = self.node_fit(node, max(1, first), duration, job, give_up)
            if t <= horizon and (best_later is None or t < best_later[0]):
                best_later = (t, node)
        if not out and best_later is not None:
            t, node = best_later
            start = int(t)
            out.append(Placement(start, start + duration, gpu_type, (node,), (job.gpus,)))
        return out

    def _whole_nodes(
        self, job: QueuedJob, duration: int, gpu_type: str, nodes: list[int], horizon: int
    ) -> list[Placement]:
        """Multi-node nvlink gang: whole nodes of one rack with one shared start."""
        by_rack: dict[str, list[int]] = {}
        for node in nodes:
            by_rack.setdefault(self.instance.nodes[node].rack, []).append(node)
        out = []
        for rack_nodes in by_rack.values():
            size = self.topologies[rack_nodes[0]].size
            same = [n for n in rack_nodes if self.topologies[n].size == size]
            if job.gpus % size or len(same) < job.gpus // size:
                continue
            placement = self._gang(job, duration, gpu_type, same, job.gpus // size, size, horizon)
            if placement is not None:
                out.append(placement)
        return out

    def _gang(
        self,
        job: QueuedJob,
        duration: int,
        gpu_type: str,
        nodes: list[int],
        k: int,
        size: int,
        horizon: int,
    ) -> Placement | None:
        now = [
            n
            for n in nodes
            if self.free_now[n] == self.topologies[n].whole
            and self._node_fit(n, 0, duration, size, job) == 0
        ]
        if len(now) >= k and self._quota_fit(job, 0, duration) == 0:
            chosen = tuple(now[:k])
            return Placement(
                0, duration, gpu_type, chosen, (size,) * k, tuple(self.free_now[n] for n in chosen)
            )
        t = 1
        while t <= horizon:
            fits = sorted((self._node_fit(n, t, duration, size, job), n) for n in nodes)
            t_k = fits[k - 1][0]
            if t_k == INF:
                return None
            t_q = self._quota_fit(job, t_k, duration)
            if t_q == t_k == t:
                chosen = tuple(sorted(n for _, n in fits[:k]))
                return Placement(t, t + duration, gpu_type, chosen, (size,) * k)
            if t_q == INF:
                return None
            t = int(t_q)
        return None

    def _spread(
        self, job: QueuedJob, duration: int, gpu_type: str, nodes: list[int], horizon: int
    ) -> list[Placement]:
        """``rack`` or ``any`` job: GPUs from several nodes, fewest nodes first."""
        groups: list[list[int]]
        if job.topology == "rack":
            by_rack: dict[str, list[int]] = {}
            for node in nodes:
                by_rack.setdefault(self.instance.nodes[node].rack, []).append(node)
            groups = list(by_rack.values())
        else:
            groups = [nodes]
        out = []
        for group in groups:
            # The group's total use over time: a necessary test before the per-node one.
            deltas: dict[int, float] = {}
            for n in group:
                profile = self.gpu_use[n]
                previous = 0.0
                for time_k, level in zip(profile.times, profile.levels, strict=True):
                    deltas[time_k] = deltas.get(time_k, 0.0) + level - previous
                    previous = level
            total = Profile()
            running = 0.0
            total.times, total.levels = [], []
            for time_k in sorted(deltas):
                running += deltas[time_k]
                total.times.append(time_k)
                total.levels.append(running)
            capacity = sum(popcount(self.topologies[n].healthy) for n in group)
            # Room only grows where use drops: try now and those moments.
            times = {0, *self._quota_releases(job)}
            times.update(
                total.times[k]
                for k in range(1, len(total.times))
                if total.levels[k] < total.levels[k - 1]
            )
            for t in sorted(times):
                if t > horizon:
                    break
                if capacity - total.peak(t, t + duration) < job.gpus - EPS:
                    continue
                if self._quota_fit(job, t, duration) != t:
                    continue
                placement = self._spread_at(job, duration, gpu_type, group, t)
                if placement is not None:
                    out.append(placement)
                    break
        return out

    def _room(self, job: QueuedJob, node: int, t: int, duration: int) -> int:
        """GPUs of ``job`` that ``node`` can hold over [t, t+duration)."""
        topo = self.topologies[node]
        limit = popcount(topo.healthy)
        free = popcount(self.free_now[node]) if t == 0 else limit
        gpus = min(free, int(limit - self.gpu_use[node].peak(t, t + duration) + EPS))
        rec = self.instance.nodes[node]
        if job.cpu and gpus > 0:
            spare = rec.cpu - self.cpu_use[node].peak(t, t + duration)
            gpus = min(gpus, int(spare / (job.cpu / job.gpus) + EPS))
        if job.memory_gb and gpus > 0:
            spare = rec.memory_gb - self.mem_use[node].peak(t, t + duration)
            gpus = min(gpus, int(spare / (job.memory_gb / job.gpus) + EPS))
        return max(gpus, 0)

    def _spread_at(
        self, job: QueuedJob, duration: int, gpu_type: str, group: list[int], t: int
    ) -> Placement | None:
        """Tightest single node that holds the job, else the largest pieces first."""
        # Room right at t bounds the room over the whole window from above.
        at_t = []
        for node in group:
            limit = popcount(self.topologies[node].healthy)
            free = popcount(self.free_now[node]) if t == 0 else limit
            room = min(free, int(limit - self.gpu_use[node].level_at(t) + EPS))
            if room > 0:
                at_t.append((room, node))
        picks: list[tuple[int, int]] = []
        for _, node in sorted(r for r in at_t if r[0] >= job.gpus):
            if self._room(job, node, t, duration) >= job.gpus:
                picks = [(job.gpus, node)]
                break
        if not picks:
            need = job.gpus
            for _, node in sorted(at_t, key=lambda r: (-r[0], r[1])):
                take = min(self._room(job, node, t, duration), need)
                if take > 0:
                    picks.append((take, node))
                    need -= take
                if need == 0:
                    break
            if need > 0:
                return None
        picks.sort(key=lambda p: p[1])
        chosen = tuple(n for _, n in picks)
        counts = tuple(c for c, _ in picks)
        masks: tuple[int, ...] = ()
        if t == 0:
            found = [choose_gpus(self.topologies[n], self.free_now[n], c, False) for c, n in picks]
            if any(m is None for m in found):
                return None
            masks = tuple(m for m in found if m is not None)
        return Placement(t, t + duration, gpu_type, chosen, counts, masks)


def _both(a: frozenset[int] | None, b: frozenset[int] | None) -> frozenset[int] | None:
    """Nodes both restrictions allow (None: no restriction)."""
    if a is None:
        return b
    return a if b is None else a & b
