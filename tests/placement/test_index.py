"""FreeIndex and the pruned search: the same answers as a scan of every node.

The index answers for many nodes at once what each node's GPU usage profile
says; the search (:mod:`whale_opt.placement.fitting`) fits exactly only the
nodes whose bound can still win. Both are checked here against the plain
definitions, node by node, on generated rounds part way through a list
schedule (so profiles hold running, started and planned work).
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from whale_opt.placement import fitting
from whale_opt.placement.index import FreeIndex
from whale_opt.placement.occupancy import NodeGroup
from whale_opt.placement.profile import EPS, INF, Profile
from whale_opt.placement.serial import place_in_order
from whale_opt.placement.state import ClusterState
from whale_opt.policies.wspt import wspt_order
from whale_opt.problem_data import Instance
from whale_opt.testing import instances
from whale_opt.topology import choose_gpus, needs_nvlink, single_node

FAST = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))


def half_scheduled(instance: Instance, part: float) -> ClusterState:
    """``instance``'s state after the first ``part`` of its WSPT list schedule."""
    state = ClusterState(instance)
    order = wspt_order(instance)
    place_in_order(instance, order[: int(len(order) * part)], state, {})
    return state


def intervals(profile: Profile, limit: int, gpus: int) -> list[tuple[float, float]]:
    """The maximal [a, b) on which ``gpus`` of ``limit`` GPUs are unused."""
    out: list[tuple[float, float]] = []
    ends = [*profile.times[1:], INF]
    for start, end, level in zip(profile.times, ends, profile.levels, strict=True):
        if level <= limit - gpus + EPS:
            if out and out[-1][1] == start:
                out[-1] = (out[-1][0], end)
            else:
                out.append((start, end))
    return out


@FAST
@given(instances(max_nodes=6, max_queue=10), st.floats(0, 1), st.integers(1, 5000))
def test_the_index_answers_what_each_profile_says(
    instance: Instance, part: float, duration: int
) -> None:
    state = half_scheduled(instance, part)
    index = state.free_index()
    nodes = np.arange(len(instance.nodes))
    limits = [state.healthy_count(n) for n in nodes]
    profiles = [state.gpu_profile(n) for n in nodes]
    for gpus in range(1, index.depth + 2):
        first = np.array([1 + 37 * n for n in nodes], dtype=float)
        earliest = index.earliest(nodes, gpus, duration, first)
        both, unused = index.earliest_and_unused(nodes, gpus, duration, first)
        assert both.tolist() == earliest.tolist()
        for n in nodes:
            expected = profiles[n].earliest(int(first[n]), duration, gpus, limits[n])
            assert earliest[n] == expected
            free = [max(a, 1) for a, b in intervals(profiles[n], limits[n], gpus) if b > 1]
            assert unused[n] == min(free, default=INF)
    times = np.array(sorted({0, 1, *(t for p in profiles for t in p.times)}), dtype=float)
    for most in (1, 2, 4, 8):
        room = index.window_room(nodes, most, duration, times)
        for k, t in enumerate(times):
            each = [
                min(most, max(0, int(limits[n] - profiles[n].peak(int(t), int(t) + duration))))
                for n in nodes
            ]
            assert room[k] == sum(each)
    # A drop on one node counts even when another node's rise hides it in the total.
    drops = {
        p.times[k]
        for p in profiles
        for k in range(1, len(p.times))
        if p.levels[k] < p.levels[k - 1]
    }
    assert index.drops(nodes).tolist() == sorted(drops)
    for t in (0, 1, int(times[-1])):
        assert index.room_at(nodes, t, state.free_counts()).tolist() == [
            state.room_at(n, t) for n in nodes
        ]


def test_a_drop_hidden_by_a_rise_elsewhere_is_still_a_drop() -> None:
    a, b = Profile(), Profile()
    a.add(0, 100, 4)  # node a: 4 GPUs busy until 100
    b.add(100, 300, 4)  # node b: 4 GPUs busy from 100: the total does not drop at 100
    index = FreeIndex([8, 8], [a, b])
    assert index.drops(np.array([0, 1])).tolist() == [100.0, 300.0]


def every_node(
    state: ClusterState, position: int, group: NodeGroup, horizon: int
) -> tuple[int, int] | None:
    """(start, node) of the single-node placement a scan of every node would choose:
    now on the tightest node, else the earliest start, ties to the node whose GPUs
    are first unused, then the lowest node."""
    instance = state.instance
    job = instance.queue[position]
    duration = instance.durations[position][group.gpu_type]
    nvlink = needs_nvlink(job)
    now = [
        (state.free_count(n), n)
        for n in group.nodes
        if state.free_count(n) >= job.gpu_count
        and state.node_fit(n, 0, duration, job, 0) == 0
        and choose_gpus(state.topology(n), state.free_mask(n), job.gpu_count, nvlink) is not None
    ]
    if now:
        return 0, min(now)[1]
    later = []
    for n in group.nodes:
        first = 1
        if nvlink and not state.topology(n).clique:
            if state.first_end_at(n) == INF:
                continue
            first = max(1, int(state.first_end_at(n)))
        t = state.node_fit(n, first, duration, job, horizon)
        if t <= horizon:
            later.append((t, state.free_from(n, job.gpu_count), n))
    return (int(min(later)[0]), min(later)[2]) if later else None


@FAST
@given(
    instances(max_nodes=6, max_queue=10),
    st.floats(0, 1),
    st.integers(0, 20_000),
    st.sampled_from([0, 100]),
)
def test_the_pruned_single_node_search_picks_what_a_scan_of_every_node_picks(
    instance: Instance, part: float, horizon: int, few: int
) -> None:
    # few: groups of up to this many nodes, rounds of up to this many jobs, loop over
    # the nodes (0: always the arrays).
    saved = fitting.FEW, fitting.SHORT
    fitting.FEW = fitting.SHORT = few
    try:
        scan_agrees(instance, part, horizon)
    finally:
        fitting.FEW, fitting.SHORT = saved


def scan_agrees(instance: Instance, part: float, horizon: int) -> None:
    """Every single-node search part way through the list schedule agrees with the scan."""
    state = half_scheduled(instance, part)
    for position in range(len(instance.queue)):
        for group in state.node_groups(position):
            job = instance.queue[position]
            # The search sends CPU-only jobs and shares of a GPU elsewhere (sharing.py).
            if job.cpu_only or job.shares or not single_node(job, state.topology(group.nodes[0])):
                continue
            duration = instance.durations[position][group.gpu_type]
            found = fitting.single_node(
                state,
                job,
                duration,
                group,
                horizon,
                every_start_now=False,
                wait_for_release=True,
            )
            got = (found[0].start, found[0].nodes[0]) if found else None
            assert got == every_node(state, position, group, horizon)
