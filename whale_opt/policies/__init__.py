"""The heuristic policies, one file each, behind one Protocol.

Names -> factories (these and CP-SAT, and a user's own) live in
:mod:`whale_opt.registry`.
"""

from __future__ import annotations

from whale_opt.policies.best_fit import BestFitPolicy as BestFitPolicy
from whale_opt.policies.fifo import FifoPolicy as FifoPolicy
from whale_opt.policies.frag_aware import FragAwarePolicy as FragAwarePolicy
from whale_opt.policies.hybrid import HybridPolicy as HybridPolicy
from whale_opt.policies.las import LasPolicy as LasPolicy
from whale_opt.policies.ordered import OrderedPolicy as OrderedPolicy
from whale_opt.policies.protocol import SchedulingPolicy as SchedulingPolicy
from whale_opt.policies.sjf import SjfPolicy as SjfPolicy
from whale_opt.policies.wspt import WsptPolicy as WsptPolicy
