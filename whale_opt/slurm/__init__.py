"""The Slurm bridge: whale_opt as the placement brain of a real Slurm cluster.

Jobs arrive held (:data:`JOB_SUBMIT_LUA`, a ``job_submit`` plugin); each
round :class:`SlurmController` reads ``squeue --json`` and ``sinfo --json``,
builds an :class:`~whale_opt.problem_data.Instance`
(:func:`build_snapshot`), decides with whale_opt, and pins and releases the
jobs it starts (:func:`plan`), preempting with ``scontrol requeuehold``.
The parsing and planning are pure; :class:`SlurmRunner` runs the commands,
each with a timeout. See docs/SLURM.md.
"""

from pathlib import Path

from whale_opt.slurm.commands import JobCommands as JobCommands
from whale_opt.slurm.commands import plan as plan
from whale_opt.slurm.commands import render as render
from whale_opt.slurm.controller import RoundReport as RoundReport
from whale_opt.slurm.controller import SlurmController as SlurmController
from whale_opt.slurm.options import GRES_MODES as GRES_MODES
from whale_opt.slurm.options import BridgeOptions as BridgeOptions
from whale_opt.slurm.records import SlurmDataError as SlurmDataError
from whale_opt.slurm.records import SlurmJob as SlurmJob
from whale_opt.slurm.records import SlurmNode as SlurmNode
from whale_opt.slurm.records import parse_jobs as parse_jobs
from whale_opt.slurm.records import parse_nodes as parse_nodes
from whale_opt.slurm.runner import SlurmRunner as SlurmRunner
from whale_opt.slurm.runner import SlurmUnavailable as SlurmUnavailable
from whale_opt.slurm.snapshot import Snapshot as Snapshot
from whale_opt.slurm.snapshot import build_snapshot as build_snapshot

JOB_SUBMIT_LUA = Path(__file__).with_name("job_submit.lua")
"""The ``job_submit.lua`` that holds every GPU job at submit (package data)."""
