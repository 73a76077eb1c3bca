"""Large rounds split into pools solved apart (in parallel), then merged.

:func:`whale_opt.solve.solve` splits a round when the cluster is large or
its queue too long for the time limit (see there). Pools are whole racks of
one GPU type, each at most ``max_gpus`` GPUs. Every queued job goes to one
pool it can run in (highest priority first, to the least loaded pool
relative to its speed-weighted capacity; an ``any`` gang no pool can hold
goes to none, and the merge places it on the whole cluster); running jobs
stay where they run.
Each pool is an ordinary instance, solved by any policy; the merged decision
is valid for the whole cluster because pools share no GPU. Pools carry the
priority classes, guaranteed shares shifted so that every tenant is above or
below its guarantee exactly as on the whole cluster, a share of
``max_preemptions``, and running jobs that span pools become unpreemptible
there. A tenant's quota is split over the pools in proportion to what its
jobs ask in each; at merge time the preemption rules are checked on the
whole decision (a preemption that breaks one is undone, with the starts and
plans on the victim's nodes while it runs), the tenant's jobs against the
whole quota in start order, and the jobs taken out are list-scheduled again
on the whole cluster.

The merged decision's bound is the analytic bound of the whole instance
(the trivial one when that would not fit the time limit), so the gap stays
honest about what the split may cost.

A pool whose solve is lost (its worker died, or it raised) or has not
answered by :data:`POOL_WAIT` of the time limit (earlier when the merge is
expected to need more than the rest: :func:`~whale_opt.decompose.split.pools_due_s`)
is decided here by the WSPT greedy instead; the others keep their solver's
decision. That greedy is made while the other pools run: at once for a pool
that failed, and for a pool still out once its answer is overdue (its limit,
a worker's overhead and :data:`OVERDUE_SHARE` of its limit after the time a
free worker was expected to take it), each within its share of the time left (where the pool's whole
list schedule would not fit that, its head is decided and the rest deferred
to the next round), so a round whose workers die or hang ends near
:data:`POOL_WAIT` of its limit, not that many greedies later. The decision then
says so: status ``greedy-fallback``, and in its stats ``pools``,
``pools_fallback`` and one ``fallback_pool_<k>`` per such pool (``k`` its
position in :func:`pools`, the value its queued jobs); a warning names the
pool's nodes and what went wrong.

Rounds of a replay or a live scheduler mostly see the same nodes: the cut
into node sets and which pools each job shape may use are kept from the
last round while its node records are the same objects.

The package: :mod:`~whale_opt.decompose.cut` (pools and the jobs assigned to
them), :mod:`~whale_opt.decompose.sub` (a pool as an instance),
:mod:`~whale_opt.decompose.split` (solving the pools), :mod:`~whale_opt.decompose.merge`
(one decision again) and :mod:`~whale_opt.decompose.limits`.
"""

from whale_opt.decompose.cut import Pool, pools
from whale_opt.decompose.limits import DEFAULT_MAX_GPUS, OVERDUE_SHARE, POOL_SHARE, POOL_WAIT
from whale_opt.decompose.merge import merge
from whale_opt.decompose.split import PoolSolve, solve_split, split_pays
from whale_opt.decompose.sub import (
    pool_tenants,
    preemption_shares,
    quota_shares,
    running_gpus_by_pool,
    sub_instance,
)

__all__ = [
    "DEFAULT_MAX_GPUS",
    "OVERDUE_SHARE",
    "POOL_SHARE",
    "POOL_WAIT",
    "Pool",
    "PoolSolve",
    "merge",
    "pool_tenants",
    "pools",
    "preemption_shares",
    "quota_shares",
    "running_gpus_by_pool",
    "solve_split",
    "split_pays",
    "sub_instance",
]
