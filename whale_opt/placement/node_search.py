"""Local search over the node each one-node job runs on, and its place there.

Most queued jobs run on one node. Hold every other job where a decision put
it, and such a job's start depends only on the jobs before it in its node's
sequence: each starts at its earliest fit on the node (GPU count, CPU,
memory, free GPUs now) after them. A move (one job to another place in its
node's sequence or in another node's it may use; two jobs on two nodes
swapped) changes two nodes' schedules and is priced by re-timing those two
alone: 2,000-17,000 moves in a 5 s round at 1,000 GPUs (bench/EXACT.md), where
the order search (:mod:`whale_opt.placement.order_search`) re-runs the list
schedule from the moved job on for each one.

Held where the decision put them: jobs on several nodes (they tie nodes
together), jobs that may spread over nodes, shares of a GPU and CPU-only
jobs, jobs of tenants with a GPU quota (the quota ties every node
together), deferred jobs, and jobs that need or prefer NVLink on a node whose
GPUs are not all linked (there, which GPUs are free and when decides, which
counts do not see); such a job moves only between nodes whose GPUs are all
linked. Where such a held job is planned, it waits for a job there to end
(the release rule): a move that would leave nothing ending on that node by
its start is not made. Running jobs the decision preempts stay preempted.

:meth:`NodeSearch.decision` makes the result a decision by the placement
search's own rules: the held jobs where they were, then each node's jobs in
its order, each at its best placement on that node alone.
"""

from __future__ import annotations

import random

from whale_opt.decision import (
    Action,
    JobDecision,
    job_node_positions,
    job_nodes,
    objective,
    placement_price,
)
from whale_opt.patience import Patience
from whale_opt.placement.profile import INF
from whale_opt.placement.records import to_job_decision, to_placement
from whale_opt.placement.search import PlacementSearch
from whale_opt.placement.serial import complete
from whale_opt.placement.state import ClusterState, fit_on_node
from whale_opt.problem_data import Instance, tenant_quota
from whale_opt.rules import waits_for_release
from whale_opt.topology import needs_nvlink, single_node

SWAP_SHARE = 0.5  # of the moves to another node: two jobs swapped (else one job moved)
STALL_PER_JOB = 20  # tries per moving job in a row without a better decision: stalled
EPS_COST = 1e-6  # a move must lower the objective by more than this


class NodeSearch:
    """The one-node jobs of a decision, as a sequence per node, improved by moves.

    Parameters
    ----------
    instance
        The round.
    jobs
        A complete, valid decision's job items (the start of the search).
    prefer
        The placement preference :meth:`decision` places with.
    """

    def __init__(self, instance: Instance, jobs: list[JobDecision], prefer: str = "end") -> None:
        self.instance = instance
        index = instance.queue_index
        preempted = frozenset(item.id for item in jobs if item.action is Action.PREEMPT)
        running = instance.running_index
        self.preempted = frozenset(running[job_id] for job_id in preempted)
        # The base: running jobs kept and held jobs, where the decision has them.
        self.base = ClusterState(instance, preempted=preempted, search=PlacementSearch(prefer))
        self.held: dict[int, JobDecision] = {}
        placed: list[tuple[int, int, int]] = []  # (node, start, position) of moving jobs
        for item in jobs:
            k = index.get(item.id)
            if k is None:
                continue
            node = self._moving_node(k, item)
            if node is None:
                self._keep(k, item)
            else:
                placed.append((node, item.start_s or 0, k))
        self.node_of = {k: node for node, _, k in placed}
        self.sequence: list[list[int]] = [[] for _ in instance.nodes]
        for node, _, k in sorted(placed):
            self.sequence[node].append(k)
        self.choices = {
            k: [n for n in self.base.eligible(k) if self._may_use(k, n)] for k in self.node_of
        }
        self._prices: dict[tuple[int, int], float] = {}
        self.release_by = self._releases()
        self.starts: dict[int, int] = {}  # by moving job, its start in its node's sequence
        self.cost = [
            self.node_cost(n, sequence, self.starts) for n, sequence in enumerate(self.sequence)
        ]
        items = {index[item.id]: item for item in jobs if item.id in index}
        for n, cost in enumerate(self.cost):
            if cost == INF:  # timed again in order, one would start past the horizon
                self._hold(n, items)  # (or leave a held job's release behind)
        self.tried = 0
        self.moved = 0
        self.stalled = False

    def _releases(self) -> dict[int, int]:
        """By node, the earliest start of a held job planned there under the release
        rule (:func:`whale_opt.rules.waits_for_release`): something on the node must
        end by then, maybe a job the search would move or re-time."""
        instance = self.instance
        out: dict[int, int] = {}
        for k, item in self.held.items():
            if item.action is not Action.PLANNED or item.start_s is None:
                continue
            nodes = job_node_positions(instance, item)
            if waits_for_release(instance, instance.queue[k], nodes):
                out[nodes[0]] = min(out.get(nodes[0], item.start_s), item.start_s)
        return out

    def _keep(self, k: int, item: JobDecision) -> None:
        """Hold job ``k`` where its decision ``item`` has it (in the base)."""
        self.held[k] = item
        placement = to_placement(self.instance, k, item)
        if placement is not None:
            self.base.commit(k, placement)

    def _hold(self, node: int, items: dict[int, JobDecision]) -> None:
        """Hold the jobs of ``node``'s sequence where their decision has them."""
        for k in self.sequence[node]:
            del self.node_of[k], self.choices[k]
            self._keep(k, items[k])
        self.sequence[node], self.cost[node] = [], 0.0

    def _moving_node(self, position: int, item: JobDecision) -> int | None:
        """The node ``item`` holds job ``position`` on when the search may move it."""
        job = self.instance.queue[position]
        nodes = job_nodes(item)
        if item.action not in (Action.START, Action.PLANNED) or len(nodes) != 1:
            return None
        if job.shares or job.cpu_only or tenant_quota(self.instance, job.tenant) is not None:
            return None
        node = self.instance.node_index[nodes[0]]
        return node if self._may_use(position, node) else None

    def _may_use(self, position: int, node: int) -> bool:
        """Whether job ``position`` runs on ``node`` alone and its GPU counts say all."""
        job = self.instance.queue[position]
        topology = self.base.topology(node)
        if not single_node(job, topology) and job.gpu_count > self.base.healthy_count(node):
            return False
        linked = needs_nvlink(job) or (job.prefer_nvlink and job.gpu_count > 1)
        return topology.clique or not linked

    def _price(self, position: int, node: int) -> float:
        """The soft-preference and GPU-second price of job ``position`` on ``node``."""
        key = (position, node)
        price = self._prices.get(key)
        if price is None:
            gpus = self.instance.queue[position].gpu_count
            price = self._prices[key] = placement_price(self.instance, position, {node: gpus})
        return price

    def node_cost(
        self, node: int, sequence: list[int], starts: dict[int, int] | None = None
    ) -> float:
        """What ``sequence`` on ``node`` adds to the objective, each job at its earliest
        fit after the ones before it (inf when one fits only past the horizon, or
        when nothing on the node would end by the start of a held job planned
        there under the release rule)."""
        instance = self.instance
        base = self.base
        if not sequence:
            return INF if base.first_end_at(node) > self.release_by.get(node, INF) else 0.0
        queue = instance.queue
        record = instance.nodes[node]
        host = any(queue[k].cpu or queue[k].memory_gb for k in sequence)
        gpu = base.gpu_profile(node).scratch()
        cpu = base.cpu_profile(node).scratch() if host else base.cpu_profile(node)
        mem = base.mem_profile(node).scratch() if host else base.mem_profile(node)
        use = (gpu, cpu, mem)
        limit = base.healthy_count(node)
        horizon = instance.policy.horizon_s
        total = 0.0
        first_end = base.first_end_at(node)
        for k in sequence:
            job = queue[k]
            duration = instance.durations[k][record.gpu_type]
            gpus = job.gpu_count
            # At 0 the count is the free GPUs' (a GPU a share holds counts whole), and
            # on a node whose GPUs are all linked, or for a job that needs no link,
            # any free ones will do: the count says all.
            t = fit_on_node(use, record, limit, 0, duration, gpus, job, horizon)
            if t == INF:
                return INF
            start = int(t)
            gpu.add(start, start + duration, gpus)
            if job.cpu:
                cpu.add(start, start + duration, job.cpu)
            if job.memory_gb:
                mem.add(start, start + duration, job.memory_gb)
            total += instance.weights[k] * (start + duration) + self._price(k, node)
            if starts is not None:
                starts[k] = start
            if start + duration > 0:
                first_end = min(first_end, start + duration)
        if first_end > self.release_by.get(node, INF):
            return INF
        return total

    def improve(
        self,
        deadline: float,
        seed: int = 0,
        patience: Patience | None = None,
        moves: int | None = None,
    ) -> float:
        """Moves until ``deadline`` (or ``moves`` tried, or ``patience`` out); each one
        kept when it lowers the objective. Returns how much it went down.

        A move draws a job and a node it may use. On another node the job goes
        where it would start at about the same time (before the first job there
        that starts later), or swaps with a job drawn there (:data:`SWAP_SHARE`
        of these moves); on its own node, to a place drawn. Measured on
        1,024-GPU rounds (10,000 moves, four rounds): the same-time place gained
        0.58% where a drawn one gained 0.51%; the best of eight places, or
        favouring the latest-ending jobs, paid less per second."""
        patience = Patience() if patience is None else patience
        rng = random.Random(seed)
        jobs = sorted(self.node_of)
        gained = 0.0
        # Tries in a row without a better decision after which the search has stalled.
        stall = STALL_PER_JOB * len(jobs)
        fruitless = 0
        while jobs and not patience.over(deadline) and (moves is None or self.tried < moves):
            if moves is None and fruitless >= stall:
                self.stalled = True
                break
            self.tried += 1
            fruitless += 1
            k = jobs[rng.randrange(len(jobs))]
            a = self.node_of[k]
            b = self.choices[k][rng.randrange(len(self.choices[k]))]
            if b != a and self.sequence[b] and rng.random() < SWAP_SHARE:
                delta = self._swap(k, a, b, rng)
            else:
                delta = self._insert(k, a, b, rng)
            if delta < 0:
                gained -= delta
                self.moved += 1
                fruitless = 0
                patience.improved_by(-delta)
        return gained

    def _insert(self, k: int, a: int, b: int, rng: random.Random) -> float:
        """Job ``k`` from node ``a`` to a place in ``b``'s sequence (see :meth:`improve`),
        done when that lowers the objective; the change (0 when not done)."""
        here = [x for x in self.sequence[a] if x != k]
        there = list(here if b == a else self.sequence[b])
        if b != a:  # at about the same time there: before the first job starting later
            start = self.starts[k]
            place = next((i for i, x in enumerate(there) if self.starts[x] > start), len(there))
        else:
            place = rng.randrange(len(there) + 1)
        there.insert(place, k)
        changes = [(a, there)] if b == a else [(a, here), (b, there)]
        return self._change(changes, {k: b}, only_better=True) or 0.0

    def _swap(self, k: int, a: int, b: int, rng: random.Random) -> float:
        """Job ``k`` on node ``a`` and a job drawn on ``b`` trade places, done when that
        lowers the objective; the change (0 when not done)."""
        other = self.sequence[b][rng.randrange(len(self.sequence[b]))]
        if a not in self.choices[other]:
            return 0.0
        here = [other if x == k else x for x in self.sequence[a]]
        there = [k if x == other else x for x in self.sequence[b]]
        return self._change([(a, here), (b, there)], {k: b, other: a}, only_better=True) or 0.0

    def relocate(self, k: int, node: int, place: int) -> float | None:
        """Job ``k`` to index ``place`` of ``node``'s sequence whatever it costs (None,
        and nothing changed, when a job there would then fit only past the
        horizon); the change of the objective."""
        a = self.node_of[k]
        here = [x for x in self.sequence[a] if x != k]
        there = list(here if node == a else self.sequence[node])
        there.insert(min(place, len(there)), k)
        changes = [(a, there)] if node == a else [(a, here), (node, there)]
        return self._change(changes, {k: node}, only_better=False)

    def _change(
        self, changes: list[tuple[int, list[int]]], moved: dict[int, int], only_better: bool
    ) -> float | None:
        """Nodes' new sequences, each re-timed: kept (with the moved jobs' nodes) unless
        a job would then fit only past the horizon, or, ``only_better``, the
        objective would not go down; the change when kept, else None."""
        starts: dict[int, int] = {}
        costs = [self.node_cost(node, sequence, starts) for node, sequence in changes]
        if INF in costs:
            return None
        delta = sum(costs) - sum(self.cost[node] for node, _ in changes)
        if only_better and delta >= -EPS_COST:
            return None
        for (node, sequence), cost in zip(changes, costs, strict=True):
            self.sequence[node], self.cost[node] = sequence, cost
        self.node_of.update(moved)
        self.starts.update(starts)
        return delta

    def decision(self) -> tuple[list[JobDecision], float] | None:
        """The searched sequences as a complete decision, and its objective: the
        held jobs where they were, then each node's jobs in order, each at its
        best placement on that node alone (None if one finds none)."""
        instance = self.instance
        state = self.base.copy()
        decided = dict(self.held)
        for node, sequence in enumerate(self.sequence):
            within = frozenset((node,))
            for k in sequence:
                placement = state.best_placement(k, within=within)
                if placement is None:
                    return None
                state.commit(k, placement)
                decided[k] = to_job_decision(instance, k, placement)
        jobs = complete(instance, decided, self.preempted)
        return jobs, objective(instance, jobs)


def improve_nodes(
    instance: Instance,
    jobs: list[JobDecision],
    value: float,
    deadline: float,
    seed: int = 0,
    patience: Patience | None = None,
    moves: int | None = None,
    prefer: str = "end",
) -> tuple[list[JobDecision], float, NodeSearch]:
    """``jobs`` (of objective ``value``) improved by a :class:`NodeSearch` until
    ``deadline``; the searched decision when it costs less, else ``jobs``."""
    search = NodeSearch(instance, jobs, prefer)
    if search.improve(deadline, seed, patience, moves) > 0:
        found = search.decision()
        if found is not None and found[1] < value - 1e-9 * max(1.0, value):
            return found[0], found[1], search
    return jobs, value, search
