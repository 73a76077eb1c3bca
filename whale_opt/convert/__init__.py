"""Converters from public GPU-cluster traces to cluster instances and job traces.

One module per source (``openb``, ``philly``, ``pai``, ``gavel``); every
assumption they make is in :mod:`whale_opt.convert.assumptions` and
``docs/IMPORT.md``. Each reader returns its result and a small report of
counts (rows kept, skipped, adjusted).
"""

from whale_opt.convert.assumptions import DEFAULT_ASSUMPTIONS as DEFAULT_ASSUMPTIONS
from whale_opt.convert.assumptions import Assumptions as Assumptions
from whale_opt.convert.assumptions import GpuModel as GpuModel
from whale_opt.convert.assumptions import load_assumptions as load_assumptions
from whale_opt.convert.gavel import GavelThroughputs as GavelThroughputs
from whale_opt.convert.gavel import gavel_durations as gavel_durations
from whale_opt.convert.gavel import read_gavel as read_gavel
from whale_opt.convert.gavel import with_gavel_speeds as with_gavel_speeds
from whale_opt.convert.openb import OpenbNodeReport as OpenbNodeReport
from whale_opt.convert.openb import OpenbPodReport as OpenbPodReport
from whale_opt.convert.openb import read_openb_cluster as read_openb_cluster
from whale_opt.convert.openb import read_openb_trace as read_openb_trace
from whale_opt.convert.pai import PaiClusterReport as PaiClusterReport
from whale_opt.convert.pai import read_pai_cluster as read_pai_cluster
from whale_opt.convert.philly import PhillyClusterReport as PhillyClusterReport
from whale_opt.convert.philly import PhillyTraceReport as PhillyTraceReport
from whale_opt.convert.philly import read_philly_cluster as read_philly_cluster
from whale_opt.convert.philly import read_philly_trace as read_philly_trace
