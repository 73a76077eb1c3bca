"""The strategy for whole instances: a cluster, its running jobs and queue,
tenants (with quotas and guarantees) and a policy, features switched by keyword.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hypothesis import strategies as st

from whale_opt.problem_data import (
    DEFAULT_CLASS,
    DEFAULT_HORIZON_S,
    DEFAULT_PRIORITY_CLASSES,
    Instance,
    Policy,
    Tenant,
)
from whale_opt.testing.cluster import ZONE_NAMES, _rarely, gpu_types, nodes, priority_classes
from whale_opt.testing.jobs import _queued_job, _running_jobs
from whale_opt.testing.sharing import shared_queue, shared_running

TENANT_NAMES = ("nlp", "cv", "rl")
AGING_RATES = (0.5, 0.1, 2.0, 24.0)
MIN_RUNS_S = (0, 600, 3600, 50_000)
PENALTIES_S = (3600, 0, 600)
GPU_SECOND_PRICES = (0.5, 5.0)


def _feature(draw: st.DrawFn, forced: bool | None, one_in: int) -> bool:
    """``forced`` when given, else on about once in ``one_in`` draws (shrinks to off)."""
    return _rarely(draw, one_in) if forced is None else forced


@st.composite
def instances(
    draw: st.DrawFn,
    *,
    max_nodes: int = 6,
    max_queue: int = 8,
    max_running: int = 4,
    max_gpu_types: int = 3,
    min_queue: int = 0,
    with_failures: bool = True,
    with_quotas: bool = True,
    with_zones: bool = True,
    priority: bool | None = None,
    aging: bool | None = None,
    guarantees: bool | None = None,
    preemption: bool | None = None,
    draining: bool | None = None,
    preferences: bool | None = None,
    sharing: bool | None = None,
) -> Instance:
    """Valid one-round instances: cluster, running jobs, queue, tenants, policy.

    The last seven keywords switch a feature of priority and preemption on
    (``True``), off (``False``) or leave it to the draw (``None``, the
    default: on in about one instance of four or five, and off again when
    Hypothesis shrinks a failure unless the failure needs it).

    Parameters
    ----------
    max_nodes
        At most this many nodes (at least one).
    max_queue, min_queue
        Bounds on the number of queued jobs.
    max_running
        At most this many running jobs (fewer when the cluster is full).
    max_gpu_types
        At most this many GPU types.
    with_failures
        Whether some nodes are down and some GPUs failed.
    with_quotas
        Whether some tenants have GPU quotas (possibly already exceeded
        by their running jobs, which the rules allow).
    with_zones
        Whether nodes carry zones and some jobs prefer one.
    priority
        Priority classes (:func:`priority_classes`: the defaults, perhaps
        one redefined, and up to two custom ones), queued and running jobs
        spread over all of them. Off: every job is of the default class
        (``training``).
    aging
        ``policy.aging_per_hour`` > 0 (0.1 to 24): waiting jobs (submitted
        up to a day ago) weigh more.
    guarantees
        Tenants with ``guaranteed_gpus`` (at most their quota; at least one
        tenant has one, possibly 0).
    preemption
        ``policy.allow_preemption`` with ``min_run_s`` (0 to 50,000 s) and
        ``max_preemptions`` (none, or 0 to 3), running jobs that report
        ``since_checkpoint_s`` (mostly; at most their run time so far).
    draining
        Draining nodes (about one in three, at least one).
    preferences
        Soft preferences beyond the zone: about half the queued jobs (with
        ``True``, the first one always) prefer GPU types, an NVLink-connected
        placement, or both; ``gpu_type_penalty_s`` and ``nvlink_penalty_s``
        drawn (3600, 0 or 600); some GPU types priced per GPU-second
        (``gpu_second_prices``: 0.5 or 5).
    sharing
        GPU sharing: about half the one-GPU queued jobs (with ``True``, the
        first queued job always) ask a share of their GPU (``gpu_milli`` 100
        to 900), some jobs are CPU-only (``gpus`` 0),
        and running jobs share up to three free GPUs (and perhaps one runs
        CPU-only).

    Returns
    -------
    SearchStrategy[Instance]
        Instances that pass every check of
        :class:`~whale_opt.problem_data.Instance`.

    Examples
    --------
    >>> from hypothesis import given
    >>> @given(instances(max_nodes=3, max_queue=4))
    ... def test_something(instance): ...
    >>> @given(instances(preemption=True, priority=True, min_queue=1))
    ... def test_my_preemptions(instance): ...
    """
    has_priority = _feature(draw, priority, 4)
    has_aging = _feature(draw, aging, 5)
    has_guarantees = _feature(draw, guarantees, 4)
    allow_preemption = _feature(draw, preemption, 4)
    has_draining = _feature(draw, draining, 5)
    has_preferences = _feature(draw, preferences, 4)
    has_sharing = _feature(draw, sharing, 4)
    types = draw(gpu_types(max_types=max_gpu_types))
    zones = ZONE_NAMES if with_zones else ()
    cluster = draw(
        nodes(
            list(types),
            max_nodes=max_nodes,
            zones=zones,
            with_failures=with_failures,
            draining=has_draining,
        )
    )
    classes = draw(priority_classes()) if has_priority else dict(DEFAULT_PRIORITY_CLASSES)
    class_names = sorted(classes) if has_priority else [DEFAULT_CLASS]
    tenant_names = TENANT_NAMES[: draw(st.integers(1, len(TENANT_NAMES)))]
    running = draw(_running_jobs(cluster, tenant_names, max_running, class_names, allow_preemption))
    count = draw(st.integers(min_queue, max_queue))
    queue = tuple(
        draw(
            _queued_job(
                f"q{k}",
                types,
                cluster,
                tenant_names,
                zones,
                class_names,
                has_preferences,
                force_preference=bool(preferences) and k == 0,
            )
        )
        for k in range(count)
    )
    if has_sharing:
        queue = draw(shared_queue(queue, force=bool(sharing)))
        running = draw(shared_running(cluster, running, tenant_names))
    tenants: dict[str, Tenant] = {}
    if with_quotas:
        for name in tenant_names:
            if draw(st.booleans()):
                quota = draw(st.one_of(st.integers(0, 16), st.none()))
                tenants[name] = Tenant(name, quota)
    if has_guarantees:
        tenants = draw(_with_guarantees(tenants, tenant_names))
    horizon = draw(st.one_of(st.just(DEFAULT_HORIZON_S), st.integers(1, 5_000)))
    policy = Policy(
        horizon_s=horizon,
        zone_penalty_s=draw(st.sampled_from([3600, 0, 600])),
        allow_preemption=allow_preemption,
        gpu_type_penalty_s=draw(st.sampled_from(PENALTIES_S)) if has_preferences else 3600,
        nvlink_penalty_s=draw(st.sampled_from(PENALTIES_S)) if has_preferences else 3600,
        aging_per_hour=draw(st.sampled_from(AGING_RATES)) if has_aging else 0.0,
        min_run_s=draw(st.sampled_from(MIN_RUNS_S)) if allow_preemption else 0,
        max_preemptions=(
            draw(st.one_of(st.none(), st.integers(0, 3))) if allow_preemption else None
        ),
        gpu_second_prices=tuple(
            (name, draw(st.sampled_from(GPU_SECOND_PRICES)))
            for name in sorted(types)
            if has_preferences and draw(st.booleans())
        ),
    )
    return Instance(
        name="hypothesis",
        gpu_types=types,
        nodes=cluster,
        running=running,
        queue=queue,
        tenants=tenants,
        policy=policy,
        now=draw(st.integers(0, 10**9)),
        priority_classes=classes,
    )


@st.composite
def _with_guarantees(
    draw: st.DrawFn, tenants: Mapping[str, Tenant], names: Sequence[str]
) -> dict[str, Tenant]:
    """``tenants`` with guaranteed shares (at most the quota) for about half of
    ``names``, and at least one."""
    chosen = [name for name in names if draw(st.booleans())] or [names[0]]
    out = dict(tenants)
    for name in chosen:
        quota = out[name].gpu_quota if name in out else None
        guarantee = draw(st.integers(0, 16 if quota is None else quota))
        out[name] = Tenant(name, quota, guarantee)
    return out
