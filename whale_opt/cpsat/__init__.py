"""The CP-SAT round solver: presets, the neighbourhood model, the LNS loop, the policy."""

from whale_opt.cpsat.cpmodel import HoodResult as HoodResult
from whale_opt.cpsat.cpmodel import NeighbourhoodModel as NeighbourhoodModel
from whale_opt.cpsat.cpmodel import solve_neighbourhood as solve_neighbourhood
from whale_opt.cpsat.lns import large_neighbourhood_search as large_neighbourhood_search
from whale_opt.cpsat.model import CpSatPolicy as CpSatPolicy
from whale_opt.cpsat.presets import Preset as Preset
from whale_opt.cpsat.presets import load_preset as load_preset
from whale_opt.cpsat.presets import preset_names as preset_names
