"""One scheduling round as the agent builds it: its picks, their candidates, the decision.

:class:`PartialRound` lives in :mod:`whale_opt.policies.learned_encoding`, so that the
environment that trains the network and the ``learned`` policy that deploys
it build rounds with the same code (the layering lets ``gym`` import the
policies, never the reverse). It holds the round's instance (the
simulator's snapshot), one :class:`~whale_opt.placement.state.ClusterState`
per placement preference, the starts picked so far, and the queued jobs not
picked yet (``waiting``, in the encoding's queue order: the agent sees the
head of it). Candidates: job ``j``'s candidate ``c = type x P + p`` is the
best placement starting now on GPU type ``type`` under preference ``p``;
the tests compare the cache with a fresh search after every pick. The
decision is built by :func:`whale_opt.placement.serial.assemble`, like every
solver's, so it passes :func:`whale_opt.check.check`.
"""

from __future__ import annotations

from whale_opt.policies.learned_encoding import DEFERRED_REASON as DEFERRED_REASON
from whale_opt.policies.learned_encoding import PartialRound as PartialRound

SOLVER = "gym-agent"
