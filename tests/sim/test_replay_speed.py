"""A replay's fast path decides as the round API does, round for round.

:class:`~whale_opt.sim.simulator.Simulator` solves split rounds on one
executor for the whole run (in its own process for a heuristic), and the
split itself reuses what does not change between rounds
(:mod:`whale_opt.decompose`). The same replay driven through
``scheduler.propose`` (local processes made per round, as a scheduler that
embeds the round API runs it) must leave the very same record.
"""

from __future__ import annotations

from typing import Any

import pytest

from whale_opt.problem_data import Instance
from whale_opt.sim import SimConfig, synthetic_cluster, synthetic_trace
from whale_opt.sim.engine import EventLoop
from whale_opt.sim.simulator import Simulator
from whale_opt.solve import SPLIT_ABOVE_GPUS

WALL_COLUMNS = ("round_wall_s", "solver_wall_s")


@pytest.fixture(scope="module")
def large() -> Instance:
    """A cluster past the split threshold: every round is cut into pools."""
    cluster = synthetic_cluster(2400, family="hetero", seed=2)
    assert sum(node.gpu_count for node in cluster.nodes) > SPLIT_ABOVE_GPUS
    return cluster


def _without_walls(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in row.items() if k not in WALL_COLUMNS} for row in rows]


@pytest.mark.parametrize("policy", ["wspt", "fifo"])
def test_a_split_replay_leaves_the_record_of_the_round_api(large: Instance, policy: str) -> None:
    trace = synthetic_trace(40, large, load=1.5, seed=3, median_duration_s=3600)
    config = SimConfig(policy=policy, check_decisions=True)  # every round checked
    fast = Simulator(trace, large, config)
    fast.run()
    slow = EventLoop(trace, large, config)
    while (pending := slow.advance()) is not None:
        slow.apply(slow.scheduler.propose(pending.now, pending.instance))
    assert fast.loop.record.segments == slow.record.segments
    assert _without_walls(fast.loop.record.rounds) == _without_walls(slow.record.rounds)
    assert len(fast.loop.record.rounds) > 40  # arrival and completion rounds
    assert sum(row["started"] for row in fast.loop.record.rounds) >= 40
