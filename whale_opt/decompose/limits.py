"""How a split round is sized and timed."""

DEFAULT_MAX_GPUS = 512
POOL_SHARE = 0.5  # of the time limit the pools get (the rest: split, merge, bound)
POOL_WAIT = 0.8  # of the time limit: pools not back by then fall back to the greedy
OVERDUE_SHARE = 0.25  # of its limit past its expected end: a pool still out is decided here too
