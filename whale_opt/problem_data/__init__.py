"""Immutable, validated records of one scheduling round, and their container.

Every record checks itself on construction and raises :class:`FieldError`
naming the field and the bad value; :class:`Instance` checks every
cross-reference once and precomputes the maps the solvers need, so solver
code never re-checks. Nothing here imports the rest of the package.

The records are in :mod:`~whale_opt.problem_data.records`, their validators
and :class:`FieldError` in :mod:`~whale_opt.problem_data.fields`, and
:class:`Instance` in :mod:`~whale_opt.problem_data.instance`; import them
from here.
"""

from whale_opt.problem_data.fields import FROM_POLICY as FROM_POLICY
from whale_opt.problem_data.fields import MAX_SECONDS as MAX_SECONDS
from whale_opt.problem_data.fields import FieldError as FieldError
from whale_opt.problem_data.instance import OVERDUE_LIFT as OVERDUE_LIFT
from whale_opt.problem_data.instance import SHARED as SHARED
from whale_opt.problem_data.instance import Instance as Instance
from whale_opt.problem_data.instance import class_rank as class_rank
from whale_opt.problem_data.instance import hardware_failure as hardware_failure
from whale_opt.problem_data.instance import tenant_guarantee as tenant_guarantee
from whale_opt.problem_data.instance import tenant_quota as tenant_quota
from whale_opt.problem_data.instance import waited_s as waited_s
from whale_opt.problem_data.records import DEFAULT_AGING_PER_HOUR as DEFAULT_AGING_PER_HOUR
from whale_opt.problem_data.records import (
    DEFAULT_BEST_EFFORT_MAX_WAIT_S as DEFAULT_BEST_EFFORT_MAX_WAIT_S,
)
from whale_opt.problem_data.records import DEFAULT_CLASS as DEFAULT_CLASS
from whale_opt.problem_data.records import DEFAULT_HORIZON_S as DEFAULT_HORIZON_S
from whale_opt.problem_data.records import DEFAULT_MAX_WAIT_S as DEFAULT_MAX_WAIT_S
from whale_opt.problem_data.records import DEFAULT_PRIORITY_CLASSES as DEFAULT_PRIORITY_CLASSES
from whale_opt.problem_data.records import MILLI as MILLI
from whale_opt.problem_data.records import NVLINK_LAYOUTS as NVLINK_LAYOUTS
from whale_opt.problem_data.records import TOPOLOGIES as TOPOLOGIES
from whale_opt.problem_data.records import GpuRef as GpuRef
from whale_opt.problem_data.records import GpuType as GpuType
from whale_opt.problem_data.records import Node as Node
from whale_opt.problem_data.records import Policy as Policy
from whale_opt.problem_data.records import PriorityClass as PriorityClass
from whale_opt.problem_data.records import QueuedJob as QueuedJob
from whale_opt.problem_data.records import RunningJob as RunningJob
from whale_opt.problem_data.records import Tenant as Tenant
