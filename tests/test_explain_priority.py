"""Explain under priority classes, guarantees, draining nodes and soft preferences."""

from __future__ import annotations

from whale_opt.decision import Action
from whale_opt.explain import REASON_KINDS, Change, Explanation, Reason, apply_change, explain
from whale_opt.problem_data import GpuType, Instance, Node, Policy, QueuedJob, RunningJob, Tenant
from whale_opt.solve import solve

TYPES = {"A": GpuType("A", 80, 1.0), "B": GpuType("B", 80, 2.0)}


def _node(node_id: str, gpu_type: str = "A", **fields: object) -> Node:
    return Node(node_id, gpu_type, 8, "nvswitch", rack="r0", **fields)  # type: ignore[arg-type]


def _held(node_id: str, count: int = 8) -> tuple[str, ...]:
    return tuple(f"{node_id}/{i}" for i in range(count))


def _cluster(*nodes: Node, **fields: object) -> Instance:
    return Instance(name="tiny", gpu_types=TYPES, nodes=nodes, **fields)  # type: ignore[arg-type]


def _one(instance: Instance, job_id: str) -> Explanation:
    (found,) = explain(instance, [job_id])
    for cf in found.counterfactuals:  # each verified one starts the job when re-solved
        action = solve(apply_change(instance, cf.instance_change)).job(job_id).action
        assert (action is Action.START) == cf.verified, cf.change
    return found


def _reason(found: Explanation, kind: str) -> Reason:
    assert kind in REASON_KINDS
    return next(r for r in found.reasons if r.kind == kind)


def test_outranked_by_a_higher_priority_class() -> None:
    inst = _cluster(
        _node("a0"),
        queue=(
            QueuedJob("train", 8, 100, weight=100.0),
            QueuedJob("serve", 8, 1000, priority_class="online"),
        ),
    )
    found = _one(inst, "train")
    outranked = _reason(found, "outranked")
    assert "higher priority class online" in outranked.message
    assert outranked.facts["by"][0]["job"] == "serve"
    assert outranked.facts["by"][0]["priority_class"] == "online"
    assert outranked.facts["priority_class"] == "training"


def test_same_class_rivals_are_named_without_a_class() -> None:
    inst = _cluster(
        _node("a0"),
        queue=(QueuedJob("lo", 8, 100, weight=1), QueuedJob("hi", 8, 100, weight=10)),
    )
    outranked = _reason(_one(inst, "lo"), "outranked")
    assert "priority class" not in outranked.message.split(":")[0]
    assert outranked.facts["by"][0]["effective_weight"] == 10


def test_a_free_draining_node_is_named() -> None:
    inst = _cluster(
        _node("a0", draining=True),
        _node("a1"),
        running=(RunningJob("r", _held("a1"), 900),),
        queue=(QueuedJob("j", 8, 100),),
    )
    found = _one(inst, "j")
    draining = _reason(found, "draining")
    assert draining.facts == {"could_start_s": 0, "nodes": ["a0"]}
    assert "draining" in draining.message
    assert found.reasons[0].kind == "busy"  # a1 is busy until 900 s


def test_every_fitting_node_draining_is_not_a_hardware_gap() -> None:
    inst = _cluster(
        _node("a0", draining=True),
        _node("b0", "B"),
        queue=(QueuedJob("j", 8, 100, gpu_types=("A",)),),
    )
    (found,) = explain(inst, ["j"], with_counterfactuals=False)
    assert found.action is Action.DEFERRED
    assert [r.kind for r in found.reasons] == ["draining"]
    assert found.reasons[0].facts == {"nodes": ["a0"]}


def _reclaim(policy: Policy, lender_started_at: int = -7200) -> Instance:
    return _cluster(
        _node("a0"),
        running=(
            RunningJob(
                "lent",
                _held("a0"),
                5000,
                tenant="b",
                started_at=lender_started_at,
                since_checkpoint_s=60,  # checkpointed recently: cheap to preempt
            ),
        ),
        queue=(QueuedJob("mine", 8, 100, tenant="a"),),
        tenants={"a": Tenant("a", guaranteed_gpus=8), "b": Tenant("b")},
        policy=policy,
    )


def test_guarantee_not_reclaimed_because_preemption_is_off() -> None:
    found = _one(_reclaim(Policy()), "mine")
    guarantee = _reason(found, "guarantee")
    assert guarantee.facts == {"tenant": "a", "guaranteed": 8, "held": 0, "borrowers": ["lent"]}
    assert "allow_preemption is off" in guarantee.message
    preempt = [
        cf
        for cf in found.counterfactuals
        if cf.instance_change == Change("preempt", value=("lent",))
    ]
    assert preempt and preempt[0].verified


def test_guarantee_not_reclaimed_because_the_borrower_just_started() -> None:
    policy = Policy(allow_preemption=True, min_run_s=3600)
    (found,) = explain(
        _reclaim(policy, lender_started_at=-60), ["mine"], with_counterfactuals=False
    )
    assert "may be preempted now" in _reason(found, "guarantee").message
    # Once the borrower has run long enough, the round reclaims the GPUs itself.
    assert solve(_reclaim(policy)).job("mine").action is Action.START


def test_dropped_gpu_type_preference_is_explained_for_a_started_job() -> None:
    inst = _cluster(
        _node("a0"),
        _node("b0", "B"),
        running=(RunningJob("r", _held("a0"), 9000),),
        queue=(QueuedJob("j", 8, 100, preferred_gpu_types=("A",)),),
    )
    (found,) = explain(inst, ["j"])
    assert found.action is Action.START
    paid = _reason(found, "preference")
    assert paid.facts["dropped"] == ["gpu_type"] and paid.facts["penalty"] == 3600
    assert "not a preferred A" in paid.message


def test_waiting_for_a_preferred_gpu_type_is_a_preference_not_faster_later() -> None:
    # Now on B it would end at 50 s but pay 3600 for the type; on A it ends at 500 s.
    inst = _cluster(
        _node("a0"),
        _node("b0", "B"),
        running=(RunningJob("r", _held("a0"), 400),),
        queue=(QueuedJob("j", 8, 100, preferred_gpu_types=("A",)),),
    )
    found = _one(inst, "j")
    assert found.action is Action.PLANNED and found.start_s == 400
    # It said "could start at 0 s on b0 ending 50 s, but waiting for a0 ends sooner, at 500 s".
    assert "faster-later" not in [r.kind for r in found.reasons]
    paid = _reason(found, "preference")
    assert paid.facts["would_drop"] == ["gpu_type"] and paid.facts["nodes"] == ["b0"]
    assert paid.facts["could_start_s"] == 0 and paid.facts["penalty"] == 3600


def _preempting() -> Instance:
    """An online job preempts a best-effort one on a0; a training job waits for it."""
    return _cluster(
        _node("a0"),
        running=(RunningJob("spot", _held("a0"), 10_000, priority_class="best-effort"),),
        queue=(
            QueuedJob("serve", 8, 100, priority_class="online"),
            QueuedJob("train", 8, 100),
        ),
        policy=Policy(allow_preemption=True),
    )


def test_a_job_the_round_preempts_holds_nothing() -> None:
    inst = _preempting()
    decision = solve(inst)
    assert decision.job("spot").action is Action.PREEMPT
    found = _one(inst, "train")
    # It said "busy until 10000 s: held by spot", and offered to preempt spot again.
    assert [r.kind for r in found.reasons] == ["outranked"]
    assert _reason(found, "outranked").facts["by"][0]["job"] == "serve"
    assert all(cf.instance_change.kind != "preempt" for cf in found.counterfactuals)


def test_waiting_after_a_preemption_requeues_the_preempted_job() -> None:
    inst = _preempting()
    found = _one(inst, "train")  # it raised: spot and serve held a0's GPUs at once
    (wait,) = [cf for cf in found.counterfactuals if cf.instance_change.kind == "wait"]
    assert wait.verified
    jobs = {job.id: job for job in wait.instance_change.jobs}
    assert isinstance(jobs["spot"], QueuedJob) and isinstance(jobs["serve"], RunningJob)
    after = apply_change(inst, wait.instance_change)
    assert after.running == ()  # serve is done by then; spot waits with its work left
    assert [(q.id, q.duration_s) for q in after.queue] == [("train", 100), ("spot", 10_000)]


def test_waiting_carries_a_started_job_as_it_would_run() -> None:
    inst = _cluster(
        _node("a0"),
        queue=(QueuedJob("first", 8, 100, weight=10, preemptible=False), QueuedJob("j", 8, 100)),
    )
    found = _one(inst, "j")
    (wait,) = [cf for cf in found.counterfactuals if cf.instance_change.kind == "wait"]
    (carried,) = wait.instance_change.jobs
    assert carried.id == "first" and carried.preemptible is False  # it was made preemptible
