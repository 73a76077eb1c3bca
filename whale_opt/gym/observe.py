"""The observation: a fixed-size float vector of nodes, the head of the queue, and totals.

:class:`~whale_opt.policies.learned_encoding.Layout` (shared with the ``learned``
policy) fixes the vector's shape for one :class:`~whale_opt.policies.learned_encoding.Encoding`
and builds it. In order (GPU counts are divided by ``scale``, the cluster's
largest node; times are in hours):

- ``max_nodes`` node rows of ``T + 3`` (T GPU types, cluster order; rows past
  the cluster's nodes are zeros): the node's free GPUs in its type's column,
  its largest free NVLink-connected block, its healthy GPUs, and 1 when it
  takes new work (not down, not draining);
- K queue slots of ``6 + 2T + P`` (P priority classes; an empty slot is
  zeros): 1 (a job is there), its GPUs, its shortest estimated duration,
  its wait so far, its weight, 1 when it needs NVLink-connected GPUs; then
  which GPU types it may use (T), its estimated duration on each (T, 0
  where it may not), and its class (one-hot, P);
- 4 totals: queued jobs not shown, running jobs, jobs picked this round, and
  the share of healthy GPUs free now.

Flags, shares and node rows lie in [0, 1]; the other features are capped at
:data:`~whale_opt.policies.learned_encoding.CAP` so the space is bounded. Node rows
change only where a pick took GPUs (``Layout.update_nodes``); a queued
job's row is fixed for the round (``Layout.job_row``).
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from whale_opt.policies.learned_encoding import Layout as Layout


def observation_space(layout: Layout) -> spaces.Box:
    """The observation space: ``layout.size`` float32 features in [0, ``layout.high``]."""
    return spaces.Box(np.zeros(layout.size, dtype=np.float32), layout.high, dtype=np.float32)
