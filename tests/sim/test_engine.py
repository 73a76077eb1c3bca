"""The event loop driven by hand (advance / apply), policy objects in simulate, and
the shape of sim/: the metrics read a record and no module of sim/ imports in a cycle."""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from whale_opt.decision import Action, Decision
from whale_opt.options import DEFAULT_OPTIONS, SolveOptions
from whale_opt.policies import WsptPolicy
from whale_opt.problem_data import Instance
from whale_opt.sim import (
    DecisionError,
    EventLoop,
    KeepRounds,
    Outage,
    SimConfig,
    SimResult,
    TraceJob,
    simulate,
    synthetic_trace,
)
from whale_opt.sim.metrics import build_result

from .invariants import CHECKPOINT, assert_invariants, with_actuals

SIM = Path(__file__).resolve().parents[2] / "whale_opt" / "sim"


@pytest.fixture(scope="module")
def jobs(cluster: Instance) -> tuple[TraceJob, ...]:
    """40 jobs, tenant cv's best-effort (preemptible for training), actual durations known."""
    drawn = with_actuals(synthetic_trace(40, cluster, load=1.2, seed=7), seed=7)
    return tuple(
        replace(job, priority_class="best-effort", checkpoint_s=120) if job.tenant == "cv" else job
        for job in drawn
    )


@pytest.fixture(scope="module")
def preemptive(cluster: Instance) -> Instance:
    return cluster.replace(policy=replace(cluster.policy, allow_preemption=True))


@pytest.fixture(scope="module")
def config() -> SimConfig:
    """Rounds on events and a period, a node failure, a GPU failure and a drain."""
    outages = (
        Outage("a01", 6_000, 4_000),
        Outage("v01", 9_000, 2_000, gpu=2),
        Outage("h01", 12_000, 3_000, kind="drain"),
    )
    return SimConfig(
        round_period_s=900,
        checkpoint_interval_s=CHECKPOINT,
        outages=outages,
        check_decisions=True,
    )


def without_wall(result: SimResult) -> tuple[dict[str, object], list[pd.DataFrame]]:
    """The run's figures and tables, less what measures the host's wall clock."""
    summary = {key: value for key, value in result.summary.items() if "wall" not in key}
    rounds = result.rounds.drop(columns=["round_wall_s", "solver_wall_s"])
    return summary, [result.jobs, rounds, result.segments, result.groups]


def test_driving_the_loop_by_hand_is_simulate(
    jobs: tuple[TraceJob, ...], preemptive: Instance, config: SimConfig
) -> None:
    expected = simulate(jobs, preemptive, config)
    assert expected.summary["preemptions"] > 0 and expected.summary["failure_requeues"] > 0
    loop = EventLoop(jobs, preemptive, config)
    rounds = 0
    while (pending := loop.advance()) is not None:
        assert pending.now == loop.now and pending.instance.now == pending.now
        loop.apply(loop.scheduler.propose(pending.now, pending.instance))
        rounds += 1
    got = build_result(loop.record, 0.0)
    assert rounds == len(got.rounds) == expected.summary["rounds"]
    (got_summary, got_tables), (want_summary, want_tables) = (
        without_wall(got),
        without_wall(expected),
    )
    assert got_summary == pytest.approx(want_summary, nan_ok=True)
    for got_table, want_table in zip(got_tables, want_tables, strict=True):
        pd.testing.assert_frame_equal(got_table, want_table)
    assert_invariants(got, jobs, preemptive)


def test_pending_rounds_say_what_changed(
    jobs: tuple[TraceJob, ...], preemptive: Instance, config: SimConfig
) -> None:
    loop = EventLoop(jobs, preemptive, config)
    arrived: list[str] = []
    hardware: list[str] = []
    while (pending := loop.advance()) is not None:
        arrived += pending.changes.arrived
        hardware += pending.changes.hardware
        assert set(pending.changes.arrived) <= {job.id for job in pending.instance.queue}
        loop.apply(loop.scheduler.propose(pending.now, pending.instance))
    assert sorted(arrived) == sorted(job.id for job in jobs)
    # Each outage shows twice: when it begins and when it ends.
    assert sorted(hardware) == sorted(["a01", "a01", "v01/2", "v01/2", "h01", "h01"])


def test_advance_after_the_end_returns_none(cluster: Instance) -> None:
    loop = EventLoop(synthetic_trace(5, cluster, seed=1), cluster, SimConfig())
    while (pending := loop.advance()) is not None:
        loop.apply(loop.scheduler.propose(pending.now, pending.instance))
    assert loop.done and loop.completed == 5
    segments = len(loop.record.segments)
    assert loop.advance() is None and loop.advance() is None
    assert len(loop.record.segments) == segments  # the end is recorded once
    with pytest.raises(RuntimeError, match="no round is pending"):
        loop.apply(loop.scheduler.propose(loop.now))


def test_a_round_waits_for_its_decision(cluster: Instance) -> None:
    loop = EventLoop(synthetic_trace(5, cluster, seed=1), cluster, SimConfig())
    pending = loop.advance()
    assert pending is not None
    with pytest.raises(RuntimeError, match="waits for apply"):
        loop.advance()


def test_a_quiet_stretch_costs_no_periodic_rounds(cluster: Instance) -> None:
    """One job running a million periods: its replay pops a handful of events,
    not one per period (before, a trace job of 10**20 s never ended)."""
    long_job = TraceJob("long", submit_s=0, gpus=1, duration_s=300 * 10**6)
    short_job = TraceJob("short", submit_s=1_000, gpus=1, duration_s=100)
    loop = EventLoop((long_job, short_job), cluster, SimConfig(round_period_s=300))
    rounds = []
    while (pending := loop.advance()) is not None:
        rounds.append((pending.now, pending.trigger))
        loop.apply(loop.scheduler.propose(pending.now, pending.instance))
    assert loop.completed == 2
    # "long" runs on a GPU twice the reference speed: it ends at 150,000,000 s.
    assert rounds == [(0, "period"), (1_000, "event"), (1_050, "event"), (150 * 10**6, "period")]
    assert loop.seq < 20  # events pushed, periodic rounds included


def on_failed_gpu(decision: Decision, instance: Instance) -> Decision:
    """``decision`` with its first started job moved onto the cluster's failed GPU."""
    failed = next(node.gpu_id(i) for node in instance.nodes for i in node.failed_gpus)
    first = decision.by_action(Action.START)[0]
    return decision.with_changes(
        jobs=tuple(
            replace(item, gpu_ids=(failed, *item.gpu_ids[1:])) if item.id == first.id else item
            for item in decision.jobs
        )
    )


def test_a_decision_that_breaks_the_rules_raises_and_changes_nothing(cluster: Instance) -> None:
    loop = EventLoop(synthetic_trace(5, cluster, seed=1), cluster, SimConfig(check_decisions=True))
    pending = loop.advance()
    assert pending is not None
    good = loop.scheduler.propose(pending.now, pending.instance)
    with pytest.raises(DecisionError) as raised:
        loop.apply(on_failed_gpu(good, pending.instance))
    assert raised.value.at == pending.now
    assert {v.kind for v in raised.value.violations} >= {"failed-hardware"}
    assert not loop.record.rounds and not loop.scheduler.running  # nothing applied
    loop.apply(good)  # the round still waits; a valid decision goes through
    assert len(loop.record.rounds) == 1 and loop.scheduler.running


class Recording:
    """WSPT under its own name, counting its rounds; ``broken`` places on failed GPUs."""

    def __init__(self, *, broken: bool = False) -> None:
        self.name = "recording-wspt"
        self.broken = broken
        self.calls = 0

    def decide(self, instance: Instance, options: SolveOptions = DEFAULT_OPTIONS) -> Decision:
        self.calls += 1
        decision = WsptPolicy().decide(instance, options)
        if self.broken and decision.by_action(Action.START):
            return on_failed_gpu(decision, instance)
        return decision


def test_simulate_takes_a_policy_object(
    jobs: tuple[TraceJob, ...], preemptive: Instance, config: SimConfig
) -> None:
    policy = Recording()
    result = simulate(jobs, preemptive, config, policy=policy)
    assert result.policy == result.summary["policy"] == "recording-wspt"
    assert policy.calls == result.summary["rounds"] > 0
    assert_invariants(result, jobs, preemptive)


def test_keeping_a_replays_rounds_changes_none_of_its_decisions(
    jobs: tuple[TraceJob, ...], preemptive: Instance, config: SimConfig
) -> None:
    every, busy = KeepRounds(WsptPolicy()), KeepRounds(WsptPolicy(), least=2)
    kept = simulate(jobs, preemptive, config, policy=every)
    simulate(jobs, preemptive, config, policy=busy)
    plain = simulate(jobs, preemptive, config, policy=WsptPolicy())
    assert kept.policy == "wspt"
    pd.testing.assert_frame_equal(kept.jobs, plain.jobs)
    assert len(every.rounds) == kept.summary["rounds"]
    assert [r.now for r in every.rounds] == sorted(r.now for r in every.rounds)
    assert busy.rounds == [r for r in every.rounds if len(r.queue) >= 2]
    assert 0 < len(busy.rounds) < len(every.rounds)


def test_a_policy_objects_decisions_go_through_the_checker(cluster: Instance) -> None:
    trace = synthetic_trace(5, cluster, seed=1)
    with pytest.raises(DecisionError, match="failed hardware"):
        simulate(trace, cluster, SimConfig(check_decisions=True), policy=Recording(broken=True))


def test_a_policy_without_the_shape_is_refused(cluster: Instance) -> None:
    with pytest.raises(TypeError, match="decide"):
        simulate(synthetic_trace(5, cluster, seed=1), cluster, policy="wspt")  # type: ignore[arg-type]


def sim_imports(path: Path) -> set[str]:
    """The sim/ modules ``path`` imports, wherever the import sits (TYPE_CHECKING too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        found |= {name.split(".")[2] for name in names if name.startswith("whale_opt.sim.")}
    return found


def test_sim_has_no_import_cycle() -> None:
    graph = {path.stem: sim_imports(path) for path in SIM.glob("*.py") if path.stem != "__init__"}
    assert not graph["metrics"] & {"simulator", "engine"}
    assert not graph["record"] & {"simulator", "engine", "metrics"}
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module not in path, f"import cycle: {' -> '.join((*path, module))}"
        if module not in done:
            for imported in graph.get(module, ()):
                visit(imported, (*path, module))
            done.add(module)

    for module in graph:
        visit(module, ())
