"""The CP-SAT model on rounds with CPU-only jobs and shares of a GPU."""

from __future__ import annotations

from whale_opt.problem_data import GpuType, Instance, Node, Policy, QueuedJob, RunningJob

from .builders import solve_model


def test_cpu_only_jobs_stay_within_a_nodes_cpu_in_the_model() -> None:
    # Every node has 16 cores; r0 holds one of n2's for a second. A 16-core CPU-only
    # job fits n0 or n1 now, never n2: the model must keep n2's CPU in its rules
    # although no GPU is asked there.
    nodes = tuple(Node(f"n{k}", "A100", 8, "nvswitch", cpu=16, memory_gb=1024) for k in range(3))
    instance = Instance(
        "cpu-only",
        {"A100": GpuType("A100", 80)},
        nodes,
        (RunningJob("r0", ("n2/0",), 1, cpu=1),),
        (QueuedJob("q0", 0, duration_s=1, cpu=1), QueuedJob("q1", 0, duration_s=1, cpu=16)),
        policy=Policy(aging_per_hour=0),
    )
    decision = solve_model(instance)  # checks the decision against the checker
    assert decision.job("q1").nodes != ("n2",)
