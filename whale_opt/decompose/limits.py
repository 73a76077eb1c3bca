"""How a split round is sized and timed."""

DEFAULT_MAX_GPUS = 512
# Of the time limit the pools get (the rest: split, merge, bound). 0.65 rather than
# 0.5: large split rounds ended at half their limit with hundreds of jobs left to a
# later round for want of time (bench/COST_MODEL.md).
POOL_SHARE = 0.65
POOL_WAIT = 0.8  # of the time limit: pools not back by then fall back to the greedy
OVERDUE_SHARE = 0.25  # of its limit past its expected end: a pool still out is decided here too
