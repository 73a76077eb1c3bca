"""The CP-SAT round model: variables, constraints, objective, and the policy."""

from whale_opt.cpsat.model import CpSatPolicy as CpSatPolicy
from whale_opt.cpsat.model import load_preset as load_preset
