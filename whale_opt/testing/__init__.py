"""Public Hypothesis strategies that build only valid whale_opt instances.

Use them to property-test your own policy, solver or integration against
the same rules the checker enforces::

    from hypothesis import given, settings
    from whale_opt.check import check
    from whale_opt.testing import instances

    @settings(max_examples=50, deadline=None)
    @given(instances())
    def test_my_policy_is_valid(instance):
        assert check(instance, MyPolicy().decide(instance)) == []

Every instance drawn here passes :class:`~whale_opt.problem_data.Instance`
validation and round-trips through instance@1 JSON. The strategies aim at
the corners where schedulers go wrong: every NVLink layout (NVSwitch,
DGX-1 hybrid cube-mesh, bridged pairs, PCIe only, explicit edge lists),
nodes of one GPU type but different sizes, down nodes and failed GPUs,
running jobs that fragment nodes, gang jobs larger than a node, CPU and
host memory that bind, tenant quotas (some already exceeded by running
work), zone preferences and horizons short enough to force deferral.

Now and then (each in roughly one instance of four or five, so most
instances look as before) they also carry the features of priority and
preemption: priority classes (the defaults, some redefined, and custom
ones of any weight factor, rank and preemptibility) with queued and running
jobs of several classes; aging; tenants with guaranteed shares (at most
their quota); a preemption policy (``min_run_s``, ``max_preemptions``) with
running jobs that report the work since their last checkpoint; draining
nodes; and soft preferences (``preferred_gpu_types``, ``prefer_nvlink``,
with their prices). Keywords of :func:`instances` force each on or off.
Instances stay small (a handful of nodes and jobs) so tests run fast.

:mod:`~whale_opt.testing.cluster` holds the cluster strategies,
:mod:`~whale_opt.testing.jobs` the running and queued jobs and
:mod:`~whale_opt.testing.instance` whole instances; import them from here.
"""

from whale_opt.testing.cluster import CLASS_WEIGHTS as CLASS_WEIGHTS
from whale_opt.testing.cluster import CUSTOM_CLASS_NAMES as CUSTOM_CLASS_NAMES
from whale_opt.testing.cluster import GPU_CATALOGUE as GPU_CATALOGUE
from whale_opt.testing.cluster import NODE_CPUS as NODE_CPUS
from whale_opt.testing.cluster import NODE_MEMORIES_GB as NODE_MEMORIES_GB
from whale_opt.testing.cluster import NODE_SIZES as NODE_SIZES
from whale_opt.testing.cluster import ZONE_NAMES as ZONE_NAMES
from whale_opt.testing.cluster import gpu_types as gpu_types
from whale_opt.testing.cluster import nodes as nodes
from whale_opt.testing.cluster import nvlink_layouts as nvlink_layouts
from whale_opt.testing.cluster import priority_classes as priority_classes
from whale_opt.testing.instance import AGING_RATES as AGING_RATES
from whale_opt.testing.instance import MIN_RUNS_S as MIN_RUNS_S
from whale_opt.testing.instance import PENALTIES_S as PENALTIES_S
from whale_opt.testing.instance import TENANT_NAMES as TENANT_NAMES
from whale_opt.testing.instance import instances as instances

__all__ = [
    "GPU_CATALOGUE",
    "gpu_types",
    "instances",
    "nodes",
    "nvlink_layouts",
    "priority_classes",
]
