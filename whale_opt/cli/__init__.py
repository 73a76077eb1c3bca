"""The ``whale-opt`` command line: a thin skin over the library.

Every command is a library call a user could make from Python. Bad input
prints one line naming the file, the JSON path and the value, and exits 2.
The group and the round commands live in :mod:`whale_opt.cli.app`; the
simulator's and the importers' commands register themselves on it.
"""

from whale_opt.cli import explain as explain  # registers ``explain`` and ``whatif``
from whale_opt.cli import imports as imports  # registers ``import``
from whale_opt.cli import pack as pack  # registers ``pack``
from whale_opt.cli import serve as serve  # registers ``serve``
from whale_opt.cli import simulate as simulate  # registers ``simulate``
from whale_opt.cli import slurm as slurm  # registers ``slurm``
from whale_opt.cli import train as train  # registers ``train``
from whale_opt.cli.app import main as main
from whale_opt.cli.app import render_table as render_table
