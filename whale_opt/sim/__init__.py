"""Trace-driven simulation: replay jobs on a cluster through the round API, measure."""

from whale_opt.sim.config import Outage as Outage
from whale_opt.sim.config import SimConfig as SimConfig
from whale_opt.sim.engine import Changes as Changes
from whale_opt.sim.engine import DecisionError as DecisionError
from whale_opt.sim.engine import EventLoop as EventLoop
from whale_opt.sim.engine import PendingRound as PendingRound
from whale_opt.sim.keep import KeepRounds as KeepRounds
from whale_opt.sim.metrics import SimResult as SimResult
from whale_opt.sim.metrics import compare as compare
from whale_opt.sim.metrics import jain_index as jain_index
from whale_opt.sim.metrics import summarize as summarize
from whale_opt.sim.metrics import summary_table as summary_table
from whale_opt.sim.record import RunRecord as RunRecord
from whale_opt.sim.simulator import simulate as simulate
from whale_opt.sim.synthetic import synthetic_cluster as synthetic_cluster
from whale_opt.sim.synthetic import synthetic_trace as synthetic_trace
from whale_opt.sim.synthetic import tenant_cluster as tenant_cluster
from whale_opt.sim.synthetic import tenant_trace as tenant_trace
from whale_opt.sim.trace import TraceJob as TraceJob
from whale_opt.sim.trace import read_outages as read_outages
from whale_opt.sim.trace import read_trace as read_trace
from whale_opt.sim.trace import write_trace as write_trace
