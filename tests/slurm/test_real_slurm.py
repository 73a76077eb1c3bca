"""whale-opt slurm against a real Slurm 22.05: four emulated nodes, 8 fake GPUs each.

The main cluster (tests/slurm/local_slurm.py) uses the indexed GRES layout,
so whale_opt's exact GPU indices are enforced; a second, plain-layout one
checks nodes only (Slurm picks the indices there). Every job writes, per run, where
it runs (``SLURMD_NODENAME``, ``CUDA_VISIBLE_DEVICES``, ``SLURM_RESTART_COUNT``)
and when it starts and ends; the test asserts each run was where the
decision said, on the indices it said, and that no GPU was ever held by two
runs at once (also sampled from ``squeue --json`` every round).

Skipped without the Slurm binaries (``.ci/install-slurm``) or without root.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from whale_opt.problem_data import GpuType
from whale_opt.slurm import BridgeOptions, SlurmController, SlurmRunner
from whale_opt.slurm.gres import parse_gres, used_indices
from whale_opt.slurm.hostlist import expand

from .local_slurm import LocalSlurm, local_slurm, missing_binaries

SCRIPT = """#!/bin/sh
restart=${{SLURM_RESTART_COUNT:-0}}
echo "start $(date +%s.%N) $SLURMD_NODENAME ${{CUDA_VISIBLE_DEVICES:-none}} $restart"
trap 'echo "end $(date +%s.%N) $restart"; exit 0' TERM
if [ "${{SLURM_JOB_NUM_NODES:-1}}" -gt 1 ]; then
    srun sh -c 'echo "step $SLURMD_NODENAME ${{CUDA_VISIBLE_DEVICES:-none}} \
${{SLURM_RESTART_COUNT:-0}}"'
fi
if [ "$restart" -gt 0 ]; then sleep {again} & else sleep {first} & fi
wait
echo "end $(date +%s.%N) $restart"
"""


def require_slurm() -> None:
    """Skip, saying why, unless a real Slurm can run here."""
    missing = missing_binaries()
    if missing:
        pytest.skip(f"Slurm is not installed (no {', '.join(missing)}): run .ci/install-slurm")
    if os.geteuid() != 0:
        pytest.skip("the local Slurm runs its daemons as root (SlurmUser=root)")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSlurm]:
    """A running private Slurm (indexed layout); every daemon and job step is
    stopped by PID after."""
    require_slurm()
    with local_slurm(tmp_path_factory.mktemp("slurm"), mode="indexed") as started:
        yield started
    assert started.leftover_pids() == []


@dataclass
class Run:
    """One run of a job, as its script saw it."""

    node: str
    gpus: tuple[int, ...]
    start: float
    end: float | None = None
    steps: dict[str, tuple[int, ...]] = field(default_factory=dict)

    def gpus_by_node(self) -> dict[str, tuple[int, ...]]:
        """GPU indices per node: the batch step's node, then every srun step's."""
        return {self.node: self.gpus, **self.steps}


def _indices(text: str) -> tuple[int, ...]:
    return () if text == "none" else tuple(sorted(int(k) for k in text.split(",")))


def runs_of(out: Path) -> dict[int, Run]:
    """Each run (by restart count) of a job, from the lines its script wrote."""
    runs: dict[int, Run] = {}
    for line in out.read_text().splitlines() if out.exists() else []:
        kind, *fields = line.split()
        if kind == "start":
            runs[int(fields[3])] = Run(fields[1], _indices(fields[2]), float(fields[0]))
        elif kind == "end":
            runs[int(fields[1])].end = float(fields[0])
        elif kind == "step":
            runs[int(fields[2])].steps[fields[0]] = _indices(fields[1])
    return runs


class Driver:
    """Runs controller rounds; records what each round started and preempted."""

    def __init__(self, cluster: LocalSlurm) -> None:
        self.cluster = cluster
        options = BridgeOptions(
            gres_mode=cluster.mode,
            gpu_types={"a100": GpuType("a100", 80.0)},
            allow_preemption=True,
        )
        runner = SlurmRunner(timeout_s=10.0, env=cluster.env)
        self.controller = SlurmController(runner, options, solver="cpsat", time_limit_s=1.0)
        self.started: dict[str, list[tuple[str, ...]]] = defaultdict(list)
        self.preempted: list[str] = []
        self.names: dict[str, str] = {}

    def submit(
        self,
        name: str,
        gpus: int,
        *,
        nodes: int = 1,
        minutes: int = 1,
        first: int = 3,
        again: int = 2,
        comment: str = "",
    ) -> str:
        """sbatch one job (held by job_submit.lua); its output goes to out/<name>.out."""
        script = self.cluster.root / "jobs" / f"{name}.sh"
        script.parent.mkdir(exist_ok=True)
        script.write_text(SCRIPT.format(first=first, again=again))
        args = ["sbatch", "--parsable", "-J", name, "-N", str(nodes), f"--gres=gpu:{gpus}"]
        args += ["-t", str(minutes), "--open-mode=append", "-o", str(self.out(name))]
        if comment:
            args.append(f"--comment={comment}")
        job_id = self.cluster.run([*args, str(script)]).stdout.strip()
        self.names[job_id] = name
        return job_id

    def out(self, name: str) -> Path:
        """The output file of job ``name``."""
        return self.cluster.root / "out" / f"{name}.out"

    def jobs(self) -> dict[str, dict]:
        """squeue --json, by job id, with no GPU held twice right now."""
        records = json.loads(self.cluster.run(["squeue", "--json"]).stdout)["jobs"]
        owner: dict[str, str] = {}
        for record in records:
            if record["job_state"] not in ("RUNNING", "COMPLETING"):
                continue
            nodes = expand(record["nodes"])
            for node, detail in zip(nodes, record["gres_detail"], strict=False):
                for index in used_indices(parse_gres(detail)):
                    gpu = f"{node}/{index}"
                    assert gpu not in owner, (
                        f"{gpu} held by {owner.get(gpu)} and {record['job_id']}"
                    )
                    owner[gpu] = str(record["job_id"])
        return {str(record["job_id"]): record for record in records}

    def drive(self, done: Callable[[dict[str, dict]], bool], deadline_s: float) -> None:
        """Rounds every 0.5 s until ``done(jobs)`` holds."""
        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            report = self.controller.round()
            for item in report.commands:
                if item.job_id in report.started:
                    self.started[item.job_id].append(item.gpus)
            self.preempted.extend(report.preempted)
            if done(self.jobs()):
                return
            time.sleep(0.5)
        states = {self.names.get(k, k): v["job_state"] for k, v in self.jobs().items()}
        raise AssertionError(f"not done after {deadline_s} s: {states}")

    def check_runs(self, job_id: str) -> list[Run]:
        """Each run of ``job_id`` was on the nodes whale_opt chose and, in the
        indexed layout, on the GPU indices it chose."""
        name = self.names[job_id]
        runs = runs_of(self.out(name))
        chosen = self.started[job_id]
        assert len(runs) == len(chosen), (name, runs, chosen)
        for restart, gpus in enumerate(chosen):
            per_node: dict[str, tuple[int, ...]] = {}
            for gpu in gpus:
                node, _, index = gpu.rpartition("/")
                per_node[node] = (*per_node.get(node, ()), int(index))
            seen = runs[restart].gpus_by_node()
            assert list(seen) == list(per_node), (name, restart, seen, per_node)
            for node, indices in seen.items():
                assert len(indices) == len(per_node[node]), (name, restart, seen)
            if self.cluster.mode == "indexed":
                assert seen == per_node, (name, restart, seen, per_node)
        return [runs[k] for k in sorted(runs)]


def no_gpu_held_twice(driver: Driver) -> None:
    """Over time: no two runs had the same GPU index (as the jobs saw it) at once."""
    spans: dict[str, list[tuple[float, float, str]]] = defaultdict(list)
    for job_id in driver.started:
        name = driver.names[job_id]
        for restart, run in runs_of(driver.out(name)).items():
            assert run.end is not None, (name, restart)
            for node, indices in run.gpus_by_node().items():
                for index in indices:
                    spans[f"{node}/{index}"].append((run.start, run.end, f"{name}#{restart}"))
    for gpu, items in spans.items():
        items.sort()
        for (_, end_a, who_a), (start_b, _, who_b) in itertools.pairwise(items):
            assert end_a <= start_b, f"{gpu}: {who_a} ends at {end_a}, {who_b} starts {start_b}"


def test_whale_opt_places_a_mixed_batch_and_preempts(cluster: LocalSlurm) -> None:
    driver = Driver(cluster)
    sizes = [8, 8, 4, 4, 4, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1]
    batch = [
        driver.submit(f"b{k}-{gpus}gpu", gpus, minutes=1 + k % 3, first=2 + k % 3)
        for k, gpus in enumerate(sizes)
    ]
    batch.append(driver.submit("wide-2x8gpu", 8, nodes=2, minutes=2, first=3))  # 58 GPUs > 32
    kept = driver.submit("kept", 1)
    cluster.run(["scontrol", "hold", kept])  # an operator's hold: whale_opt leaves it
    driver.drive(lambda jobs: all(jobs[j]["job_state"] == "COMPLETED" for j in batch), 100)
    for job_id in batch:
        driver.check_runs(job_id)
    assert kept not in driver.started
    cluster.run(["scancel", kept])

    # Best-effort jobs fill the cluster; an online job then preempts one of them.
    fill = [
        driver.submit(f"fill{k}", 8, minutes=2, first=40, again=2, comment="class=best-effort")
        for k in range(4)
    ]
    driver.drive(lambda jobs: all(jobs[j]["job_state"] == "RUNNING" for j in fill), 40)
    online = driver.submit("online", 8, minutes=1, first=2, comment="class=online")
    driver.drive(lambda jobs: jobs[online]["job_state"] == "COMPLETED", 40)
    (victim,) = driver.preempted
    assert victim in fill
    driver.drive(lambda jobs: jobs[victim]["job_state"] == "COMPLETED", 40)
    cluster.run(["scancel", *[j for j in fill if j != victim]])
    driver.drive(lambda jobs: all(jobs[j]["job_state"] != "RUNNING" for j in fill), 20)

    runs = driver.check_runs(victim)
    assert len(runs) == 2  # preempted (requeuehold), then started again
    for job_id in [*batch, online]:
        driver.check_runs(job_id)
    no_gpu_held_twice(driver)
    assert driver.controller.mismatches == []


def test_a_controller_that_is_down_is_reported_in_bounded_time(cluster: LocalSlurm) -> None:
    controller = cluster.processes["slurmctld"]
    controller.terminate()
    controller.wait(timeout=10)
    loop = SlurmController(SlurmRunner(timeout_s=2.0, env=cluster.env))
    began = time.monotonic()
    assert loop.run(once=True) == 1
    assert time.monotonic() - began < 10


def test_plain_layout_places_on_the_chosen_nodes(tmp_path: Path) -> None:
    require_slurm()
    with local_slurm(tmp_path, mode="plain") as plain:
        driver = Driver(plain)
        sizes = [8, 4, 4, 2, 2, 1, 1, 8, 4]
        batch = [
            driver.submit(f"p{k}-{gpus}gpu", gpus, minutes=1 + k % 2, first=2 + k % 2)
            for k, gpus in enumerate(sizes)
        ]
        batch.append(driver.submit("wide-2x8gpu", 8, nodes=2, minutes=1, first=2))
        driver.drive(lambda jobs: all(jobs[j]["job_state"] == "COMPLETED" for j in batch), 60)
        for job_id in batch:
            driver.check_runs(job_id)
        no_gpu_held_twice(driver)
        assert driver.controller.mismatches == []
    assert plain.leftover_pids() == []
