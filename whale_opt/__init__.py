"""whale_opt: a placement engine for GPU clusters that run AI work."""

from whale_opt.check import Violation as Violation
from whale_opt.check import check as check
from whale_opt.decision import Action as Action
from whale_opt.decision import Decision as Decision
from whale_opt.decision import JobDecision as JobDecision
from whale_opt.decision import Status as Status
from whale_opt.decision import objective as objective
from whale_opt.io import InputError as InputError
from whale_opt.io import read_decision as read_decision
from whale_opt.io import read_instance as read_instance
from whale_opt.io import write_decision as write_decision
from whale_opt.io import write_instance as write_instance
from whale_opt.problem_data import GpuType as GpuType
from whale_opt.problem_data import Instance as Instance
from whale_opt.problem_data import Node as Node
from whale_opt.problem_data import Policy as Policy
from whale_opt.problem_data import QueuedJob as QueuedJob
from whale_opt.problem_data import RunningJob as RunningJob
from whale_opt.problem_data import Tenant as Tenant
from whale_opt.registry import REGISTRY as REGISTRY
from whale_opt.registry import get_policy as get_policy

__version__ = "0.1.0"
