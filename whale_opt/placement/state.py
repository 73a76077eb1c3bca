"""Cluster occupancy over time: the one owner of who holds what, now and later.

A :class:`ClusterState` holds, per node, the GPUs free right now (a bit
mask: exact ids) and GPU / CPU / memory usage profiles for the future
(counts: nothing is reserved by id past now), and per tenant a GPU usage
profile for quotas. Nothing outside reads or changes them but through its
methods: running jobs occupy the state when it is built (preempted ones
do not), :meth:`ClusterState.commit` records a queued job's placement, and
the fitting queries (:meth:`~ClusterState.node_fit`,
:meth:`~ClusterState.part_fit`, :meth:`~ClusterState.quota_fit`,
:meth:`~ClusterState.fits_now`, :meth:`~ClusterState.room`) say what fits
where and when. For searches over many nodes at once it keeps the GPU
profiles mirrored as arrays (:meth:`~ClusterState.free_index`, rows rebuilt
when read after a change) and the free GPU counts as an array; which nodes
a job could ever use is its :class:`~whale_opt.placement.eligibility.Eligibility`
(shared by copies: it never changes). Usage of tenants without a quota is
added to their profiles only when read (nothing fits against them).

Where a job goes is chosen by the state's
:class:`~whale_opt.placement.search.PlacementSearch` (its placement
preference and rules); :meth:`ClusterState.best_placement` asks it.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType

import numpy as np

from whale_opt.memo import MEMO_SIZE, IdentityMemo
from whale_opt.placement.eligibility import Eligibility, NodeGroup
from whale_opt.placement.index import FreeIndex
from whale_opt.placement.profile import EPS, INF, Profile
from whale_opt.placement.records import Placement
from whale_opt.placement.search import PlacementSearch
from whale_opt.problem_data import MILLI, Instance, Node, QueuedJob, RunningJob
from whale_opt.topology import NodeTopology, node_topologies, popcount

_DEFAULT_SEARCH = PlacementSearch()


class _Unused(Profile):
    """The usage of a node nothing uses: one object shared by every such node of a
    state (a large cluster's state is built every round), replaced by a profile of
    its own (:func:`_own`) before anything is added."""

    __slots__ = ()

    def add(self, start: float, end: float, amount: float) -> None:
        raise AssertionError("the shared empty profile is never changed: _own it first")


_UNUSED = _Unused()
_NO_SHARES: Mapping[int, tuple[int, int]] = MappingProxyType({})
# Healthy GPUs per node, per topologies tuple (an unchanged cluster's rounds share it).
_HEALTHY: IdentityMemo[tuple[int, ...]] = IdentityMemo(MEMO_SIZE)


def _own(profiles: list[Profile], node: int) -> Profile:
    """``profiles[node]``, first made a profile of its own if it was the shared empty one."""
    profile = profiles[node]
    if profile is _UNUSED:
        profile = profiles[node] = Profile()
    return profile


def _copies(profiles: list[Profile]) -> list[Profile]:
    """Independent copies (the shared empty profile stays shared)."""
    return [p if p is _UNUSED else p.copy() for p in profiles]


def fit_on_node(
    use: tuple[Profile, Profile, Profile],
    node: Node,
    limit: int,
    start: int,
    duration: int,
    gpus: float,
    job: QueuedJob,
    give_up: float = INF,
) -> float:
    """Earliest t >= start at which ``gpus`` of ``job`` (its share of CPU and memory
    with them) fit on ``node`` for ``duration``, given its GPU, CPU and memory
    usage ``use`` and its ``limit`` of healthy GPUs; inf if only after
    ``give_up``. Counts only: which GPUs are free now is not asked."""
    gpu_use, cpu_use, mem_use = use
    share = gpus / job.gpu_count if job.gpu_count > 1 else 1.0
    t: float = start
    while t <= give_up and t < INF:
        t0 = int(t)
        t = gpu_use.earliest(t0, duration, gpus, limit, give_up)
        if job.cpu and t < INF:
            t = cpu_use.earliest(int(t), duration, job.cpu * share, node.cpu, give_up)
        if job.memory_gb and t < INF:
            t = mem_use.earliest(int(t), duration, job.memory_gb * share, node.memory_gb, give_up)
        if t == t0:
            return t
    return INF


class ClusterState:
    """Free GPUs now and resource usage over time, node by node and tenant by tenant."""

    def __init__(
        self,
        instance: Instance,
        topologies: tuple[NodeTopology, ...] | None = None,
        preempted: frozenset[str] = frozenset(),
        *,
        search: PlacementSearch = _DEFAULT_SEARCH,
    ) -> None:
        # search: how best_placement chooses (preference, soft-preference pricing,
        # the release rule); the default is what policies and the checker use.
        self._instance = instance
        self._search = search
        self._topologies = topologies if topologies is not None else node_topologies(instance)
        self._free_now = [topo.healthy for topo in self._topologies]
        n = len(instance.nodes)
        self._gpu_use: list[Profile] = [_UNUSED] * n
        self._cpu_use: list[Profile] = [_UNUSED] * n
        self._mem_use: list[Profile] = [_UNUSED] * n
        self._host_drops: dict[int, np.ndarray] = {}  # node -> when its CPU or memory use drops
        self._tenant_use: dict[str, Profile] = {}
        # Usage of tenants without a quota, not yet added to their profiles (nothing
        # fits against those: they are built when read).
        self._tenant_later: dict[str, list[tuple[int, int, float]]] = {}
        self._eligibility = Eligibility(instance, self._topologies)
        self._first_free: dict[int, dict[float, float]] = {}  # by node, while unchanged
        self._first_end = np.full(n, INF)  # first end of any job on the node
        self._quota_memo: dict[tuple[str, float, int, int], float] = {}
        topologies = self._topologies
        healthy = _HEALTHY.get(topologies, lambda: tuple(popcount(t.healthy) for t in topologies))
        self._index = FreeIndex(healthy, self._gpu_use)
        # Shared GPUs, by node: GPU index -> (milli in use now, end of its last share)
        self._shares: dict[int, dict[int, tuple[int, int]]] = {}
        # Shares of a GPU and CPU-only jobs are held once the free counts exist.
        shared = self._hold_running([job for job in instance.running if job.id not in preempted])
        self._free_count = np.array(healthy, dtype=np.int64)
        for node, profile in enumerate(self._gpu_use):
            if profile is not _UNUSED:
                self._free_count[node] = popcount(self._free_now[node])
        for job in shared:
            self._hold_share_or_host(job)

    def _take_gpus(self, job: RunningJob) -> dict[int, int]:
        """Running ``job``'s GPUs taken off the free ones now; its GPU count per node."""
        per_node: dict[int, int] = {}
        for gpu in job.gpu_ids:
            ref = self._instance.parse_gpu(gpu)
            self._free_now[ref.node] &= ~(1 << ref.index)
            per_node[ref.node] = per_node.get(ref.node, 0) + 1
        return per_node

    def _hold_running(self, jobs: list[RunningJob]) -> list[RunningJob]:
        """What :meth:`_occupy` does for each job of ``jobs`` that holds whole GPUs,
        each profile built once (:meth:`Profile.until`: the same levels) rather
        than a step at a time; the others (shares and CPU-only jobs) returned."""
        others = []
        gpu_use: dict[int, list[tuple[int, float]]] = defaultdict(list)
        cpu_use: dict[int, list[tuple[int, float]]] = defaultdict(list)
        mem_use: dict[int, list[tuple[int, float]]] = defaultdict(list)
        tenant_use: dict[str, list[tuple[int, float]]] = defaultdict(list)
        for job in jobs:
            if job.shares or job.node is not None:
                others.append(job)
                continue
            end = job.remaining_s
            per_node = self._take_gpus(job)
            gpus = sum(per_node.values())
            for node, count in per_node.items():
                part = count / gpus
                gpu_use[node].append((end, count))
                cpu_use[node].append((end, job.cpu * part))
                mem_use[node].append((end, job.memory_gb * part))
                if 0 < end < self._first_end[node]:
                    self._first_end[node] = end
            tenant_use[job.tenant].append((end, gpus))
        for use, profiles in (
            (gpu_use, self._gpu_use),
            (cpu_use, self._cpu_use),
            (mem_use, self._mem_use),
        ):
            for node, usage in use.items():
                profiles[node] = Profile.until(usage)
        for node in gpu_use:
            self._index.touch(node)
        for tenant, usage in tenant_use.items():
            quota = self._instance.tenants.get(tenant)
            if quota is None or quota.gpu_quota is None:
                self._tenant_later.setdefault(tenant, []).extend((0, e, a) for e, a in usage)
            else:
                self._tenant_use[tenant] = Profile.until(usage)
        return others

    def _hold_share_or_host(self, job: RunningJob) -> None:
        """A running share of one GPU, or a running CPU-only job, held until it ends."""
        if job.node is not None:
            node = self._instance.node_index[job.node]
            self._occupy(job.tenant, {node: 0}, 0, job.cpu, job.memory_gb, 0, job.remaining_s)
            return
        ref = self._instance.parse_gpu(job.gpu_ids[0])
        self._take_share(
            ref.node, ref.index, job.gpu_milli, job.remaining_s, job.tenant, job.cpu, job.memory_gb
        )

    def copy(self) -> ClusterState:
        """An independent copy (topologies, search and eligibility shared: they never change)."""
        twin = object.__new__(ClusterState)
        twin._instance = self._instance
        twin._search = self._search
        twin._topologies = self._topologies
        twin._free_now = list(self._free_now)
        twin._gpu_use = _copies(self._gpu_use)
        twin._cpu_use = _copies(self._cpu_use)
        twin._mem_use = _copies(self._mem_use)
        twin._host_drops = dict(self._host_drops)
        twin._tenant_use = {name: p.copy() for name, p in self._tenant_use.items()}
        twin._tenant_later = {name: list(later) for name, later in self._tenant_later.items()}
        twin._eligibility = self._eligibility
        twin._first_free = {node: dict(cache) for node, cache in self._first_free.items()}
        twin._first_end = self._first_end.copy()
        twin._quota_memo = {}
        twin._index = self._index.copy(twin._gpu_use)
        twin._free_count = self._free_count.copy()
        twin._shares = {node: dict(shares) for node, shares in self._shares.items()}
        return twin

    # -- reading -------------------------------------------------------------

    @property
    def instance(self) -> Instance:
        """The round this state is of."""
        return self._instance

    @property
    def topologies(self) -> tuple[NodeTopology, ...]:
        """Every node's NVLink structure and healthy GPUs, by node position."""
        return self._topologies

    def topology(self, node: int) -> NodeTopology:
        """Node ``node``'s NVLink structure and healthy GPUs."""
        return self._topologies[node]

    def healthy_count(self, node: int) -> int:
        """GPUs of ``node`` that can run work (failed ones left out)."""
        return popcount(self._topologies[node].healthy)

    def free_mask(self, node: int) -> int:
        """The GPUs of ``node`` free right now, as a bit mask (never failed ones)."""
        return self._free_now[node]

    def shares_now(self, node: int) -> Mapping[int, tuple[int, int]]:
        """The shared GPUs of ``node``: index -> (milli in use now, end of its last
        share); a shared GPU is not free, and counts whole until that end (read only)."""
        return self._shares.get(node, _NO_SHARES)

    def free_count(self, node: int) -> int:
        """How many GPUs of ``node`` are free right now."""
        return popcount(self._free_now[node])

    def free_counts(self) -> np.ndarray:
        """How many GPUs of each node are free right now (read only)."""
        return self._free_count

    def total_free(self) -> int:
        """GPUs free right now on the whole cluster."""
        return sum(popcount(mask) for mask in self._free_now)

    def first_end_at(self, node: int) -> float:
        """The first end of any job on ``node`` (inf when none runs or is placed there)."""
        return float(self._first_end[node])

    def first_ends(self) -> np.ndarray:
        """:meth:`first_end_at` of every node (read only)."""
        return self._first_end

    def free_index(self) -> FreeIndex:
        """Free GPU intervals of every node over time, as arrays (see
        :class:`~whale_opt.placement.index.FreeIndex`; read only)."""
        return self._index

    def gpu_peak(self, node: int, start: int, end: int) -> float:
        """Most GPUs in use on ``node`` at once on [start, end)."""
        return self._gpu_use[node].peak(start, end)

    def gpu_profile(self, node: int) -> Profile:
        """GPUs in use on ``node`` over time (a copy)."""
        return self._gpu_use[node].copy()

    def cpu_profile(self, node: int) -> Profile:
        """CPU cores in use on ``node`` over time (a copy)."""
        return self._cpu_use[node].copy()

    def mem_profile(self, node: int) -> Profile:
        """Host memory (GB) in use on ``node`` over time (a copy)."""
        return self._mem_use[node].copy()

    def tenant_profile(self, tenant: str) -> Profile:
        """GPUs ``tenant`` uses over time (a copy)."""
        return self._tenant(tenant).copy()

    def group_use(self, nodes: Iterable[int]) -> Profile:
        """GPUs in use over time on ``nodes`` together."""
        deltas: dict[int, float] = {}
        for n in nodes:
            profile = self._gpu_use[n]
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
        return total

    def eligible(self, position: int, shaped: QueuedJob | None = None) -> tuple[int, ...]:
        """Nodes that could ever hold (part of) queued job ``position``, or of
        ``shaped``, the job with another topology (an NVLink-shaped try)."""
        return self._eligibility.eligible(position, shaped)

    def node_groups(
        self,
        position: int,
        shaped: QueuedJob | None = None,
        gpu_type: str | None = None,
        within: frozenset[int] | None = None,
    ) -> list[NodeGroup]:
        """:meth:`eligible` nodes in the groups a search scans (see
        :meth:`whale_opt.placement.eligibility.Eligibility.node_groups`)."""
        return self._eligibility.node_groups(position, shaped, gpu_type, within)

    # -- changing ------------------------------------------------------------

    def commit(self, position: int, placement: Placement) -> None:
        """Record ``placement`` of queued job ``position``: a start takes its exact
        GPUs now, and every placement its counts, CPU and memory until its end."""
        job = self._instance.queue[position]
        if job.shares and placement.start == 0:
            index = placement.masks[0].bit_length() - 1
            self._take_share(
                placement.nodes[0],
                index,
                job.gpu_milli,
                placement.end,
                job.tenant,
                job.cpu,
                job.memory_gb,
            )
            return
        for node, mask in zip(placement.nodes, placement.masks, strict=False):
            self.take_now(node, mask)
        # A planned share counts as its fraction of a GPU (no GPU is reserved by id).
        amount = job.gpu_milli / MILLI
        self._occupy(
            job.tenant,
            {n: c * amount for n, c in zip(placement.nodes, placement.counts, strict=True)},
            job.gpu_amount,
            job.cpu,
            job.memory_gb,
            placement.start,
            placement.end,
        )

    def _take_share(
        self,
        node: int,
        index: int,
        milli: int,
        end: int,
        tenant: str,
        cpu: float,
        memory_gb: float,
    ) -> None:
        """A share of GPU ``index`` of ``node`` from now until ``end``: the GPU is no
        longer free now, and counts whole until its last share ends."""
        shares = self._shares.setdefault(node, {})
        used, last = shares.get(index, (0, 0))
        shares[index] = (used + milli, max(last, end))
        self.take_now(node, 1 << index)
        if end > last:
            _own(self._gpu_use, node).add(last, end, 1)
        self._occupy(tenant, {node: 0}, milli / MILLI, cpu, memory_gb, 0, end)

    def take_now(self, node: int, mask: int) -> None:
        """Mark the GPUs ``mask`` of ``node`` busy right now, and nothing over time
        (work whose usage this state leaves out, e.g. a kept victim)."""
        self._free_now[node] &= ~mask
        self._free_count[node] = popcount(self._free_now[node])

    def _occupy(
        self,
        tenant: str,
        per_node: Mapping[int, float],
        total: float,
        cpu: float,
        memory_gb: float,
        start: int,
        end: int,
    ) -> None:
        """``per_node`` GPUs (``total`` in all, for the tenant's quota) with CPU and
        memory in proportion, on [start, end); a node given 0 GPUs (a CPU-only
        job, a share counted by :meth:`_take_share`) takes all of them."""
        gpus = sum(per_node.values())
        for node, count in per_node.items():
            _own(self._gpu_use, node).add(start, end, count)
            self._index.touch(node)
            self._first_free.pop(node, None)
            if 0 < end < self._first_end[node]:
                self._first_end[node] = end
            part = count / gpus if gpus else 1.0
            _own(self._cpu_use, node).add(start, end, cpu * part)
            _own(self._mem_use, node).add(start, end, memory_gb * part)
            self._host_drops.pop(node, None)
        quota = self._instance.tenants.get(tenant)
        if quota is None or quota.gpu_quota is None:
            self._tenant_later.setdefault(tenant, []).append((start, end, total))
        else:
            self._tenant(tenant).add(start, end, total)
        self._quota_memo.clear()

    def _tenant(self, tenant: str) -> Profile:
        """The (live) GPU usage profile of ``tenant``."""
        if tenant not in self._tenant_use:
            self._tenant_use[tenant] = Profile()
        profile = self._tenant_use[tenant]
        for start, end, total in self._tenant_later.pop(tenant, ()):
            profile.add(start, end, total)
        return profile

    # -- fitting -------------------------------------------------------------

    def part_fit(
        self,
        node: int,
        start: int,
        duration: int,
        gpus: float,
        job: QueuedJob,
        give_up: float = INF,
    ) -> float:
        """Earliest t >= start at which ``gpus`` of ``job`` (its share of CPU and
        memory with them) fit on ``node`` for ``duration``; inf if only after
        ``give_up``. Counts only: which GPUs are free now is not asked."""
        return fit_on_node(
            (self._gpu_use[node], self._cpu_use[node], self._mem_use[node]),
            self._instance.nodes[node],
            popcount(self._topologies[node].healthy),
            start,
            duration,
            gpus,
            job,
            give_up,
        )

    def quota_fit(self, job: QueuedJob, start: float, duration: int, give_up: float = INF) -> float:
        """Earliest t >= start at which ``job`` fits in its tenant's GPU quota for
        ``duration`` (``start`` itself when it has none or needs no GPU); inf if only
        after ``give_up``."""
        quota = self._instance.tenants.get(job.tenant)
        if quota is None or quota.gpu_quota is None or start == INF or job.cpu_only:
            return start  # a CPU-only job holds no GPU: even a tenant over quota may run it
        # Many nodes ask the same question of the tenant's profile: remember answers
        # until the next commit changes it.
        key = (job.tenant, job.gpu_amount, duration, int(start))
        found = self._quota_memo.get(key)
        if found is None:
            found = self._tenant(job.tenant).earliest(
                int(start), duration, job.gpu_amount, quota.gpu_quota
            )
            self._quota_memo[key] = found
        return found if found <= give_up else INF

    def free_from(self, node: int, gpus: float) -> float:
        """First t >= 1 when ``node`` has ``gpus`` GPUs unused (cached until it changes):
        a cheap lower bound on when a job of ``gpus`` could start there later."""
        cache = self._first_free.setdefault(node, {})
        if gpus not in cache:
            profile = self._gpu_use[node]
            room = popcount(self._topologies[node].healthy) - gpus + EPS
            found = INF
            for k in range(bisect.bisect_right(profile.times, 1) - 1, len(profile.times)):
                if profile.levels[k] <= room:
                    found = max(1, profile.times[k])
                    break
            cache[gpus] = found
        return cache[gpus]

    def quota_releases(self, job: QueuedJob) -> list[int]:
        """Moments when the job's tenant's GPU use drops (quota frees up)."""
        quota = self._instance.tenants.get(job.tenant)
        if quota is None or quota.gpu_quota is None:
            return []
        return self._tenant(job.tenant).drops()

    def host_releases(self, job: QueuedJob, nodes: Iterable[int]) -> list[np.ndarray]:
        """Moments when CPU or host memory use drops on ``nodes`` (a GPU may be free
        before the CPU beside it is), for a job that asks for either: one sorted
        array per node (none for a job that asks neither)."""
        if not (job.cpu > 0 or job.memory_gb > 0):
            return []
        drops = self._host_drops
        return [drops[n] if n in drops else self._keep_drops(n) for n in nodes]

    def _keep_drops(self, node: int) -> np.ndarray:
        """When ``node``'s CPU or memory use drops, kept until its use changes."""
        moments = {*self._cpu_use[node].drops(), *self._mem_use[node].drops()}
        drops = np.array(sorted(moments), dtype=np.int64)
        self._host_drops[node] = drops
        return drops

    def node_fit(
        self, node: int, start: int, duration: int, job: QueuedJob, give_up: float = INF
    ) -> float:
        """Earliest t >= start where the whole job fits on ``node`` and in its quota."""
        t: float = start
        while t <= give_up and t < INF:
            t0 = t
            t = self.part_fit(node, int(t), duration, job.gpu_amount, job, give_up)
            t = self.quota_fit(job, t, duration, give_up)
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
        ``released`` running jobs (still on this state) are gone. Which GPUs
        are free now is the caller's business."""
        state = self._releasing(released, per_node, job.tenant) if released else self
        return all(
            state.part_fit(node, 0, duration, count, job, 0) == 0
            for node, count in per_node.items()
        ) and (state.quota_fit(job, 0, duration, 0) == 0)

    def _releasing(
        self, released: Sequence[RunningJob], nodes: Iterable[int], tenant: str
    ) -> ClusterState:
        """A twin for :meth:`fits_now`: ``released`` jobs' usage taken off ``nodes``
        and ``tenant``'s profile (other profiles shared with this state: read only)."""
        twin = object.__new__(ClusterState)
        twin._instance = self._instance
        twin._topologies = self._topologies
        twin._gpu_use, twin._cpu_use, twin._mem_use = (
            list(self._gpu_use),
            list(self._cpu_use),
            list(self._mem_use),
        )
        twin._host_drops = {}
        touched = set(nodes)
        for node in touched:
            for profiles in (twin._gpu_use, twin._cpu_use, twin._mem_use):
                profiles[node] = profiles[node].copy()
        twin._tenant_use = dict(self._tenant_use)
        twin._tenant_later = {}  # the twin reads only ``tenant``'s, up to date
        twin._tenant_use[tenant] = self._tenant(tenant).copy()
        twin._quota_memo = {}
        for job in released:
            per_node: dict[int, int] = {}
            for gpu in job.gpu_ids:
                ref = self._instance.parse_gpu(gpu)
                per_node[ref.node] = per_node.get(ref.node, 0) + 1
            total = len(job.gpu_ids)
            for node, count in per_node.items():
                if node in touched:
                    twin._gpu_use[node].add(0, job.remaining_s, -count)
                    twin._cpu_use[node].add(0, job.remaining_s, -job.cpu * count / total)
                    twin._mem_use[node].add(0, job.remaining_s, -job.memory_gb * count / total)
            if job.tenant == tenant:
                twin._tenant_use[tenant].add(0, job.remaining_s, -total)
        return twin

    def room(self, job: QueuedJob, node: int, t: int, duration: int) -> int:
        """GPUs of ``job`` (with their share of CPU and memory) that ``node`` can hold
        over [t, t+duration): free ones when t is now, unused ones later."""
        limit = popcount(self._topologies[node].healthy)
        free = popcount(self._free_now[node]) if t == 0 else limit
        gpus = min(free, int(limit - self._gpu_use[node].peak(t, t + duration) + EPS))
        rec = self._instance.nodes[node]
        if job.cpu and gpus > 0:
            spare = rec.cpu - self._cpu_use[node].peak(t, t + duration)
            gpus = min(gpus, int(spare / (job.cpu / job.gpu_count) + EPS))
        if job.memory_gb and gpus > 0:
            spare = rec.memory_gb - self._mem_use[node].peak(t, t + duration)
            gpus = min(gpus, int(spare / (job.memory_gb / job.gpu_count) + EPS))
        return max(gpus, 0)

    def room_at(self, node: int, t: int) -> int:
        """GPUs ``node`` has room for at the moment ``t`` (an upper bound on
        :meth:`room` over any window from ``t``)."""
        limit = popcount(self._topologies[node].healthy)
        free = popcount(self._free_now[node]) if t == 0 else limit
        return min(free, int(limit - self._gpu_use[node].level_at(t) + EPS))

    # -- searching -----------------------------------------------------------

    def best_placement(
        self,
        position: int,
        latest_start: int | None = None,
        *,
        by_start: bool = False,
        gpu_type: str | None = None,
        within: frozenset[int] | None = None,
    ) -> Placement | None:
        """The best placement of queued job ``position`` on this state, by its search
        (see :meth:`whale_opt.placement.search.PlacementSearch.best_placement`)."""
        return self._search.best_placement(
            self, position, latest_start, by_start=by_start, gpu_type=gpu_type, within=within
        )
