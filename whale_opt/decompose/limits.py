"""How a split round is sized and timed."""

DEFAULT_MAX_GPUS = 512
# Of the time limit the pools get (the rest: split, merge, bound): POOL_SHARE, but
# never leaving less than AFTER_POOLS_S after them, nor less than MIN_POOL_SHARE.
# 0.65 rather than 0.5: large split rounds ended at half a 2 or 5 s limit with
# hundreds of jobs left to a later round for want of time; at 1 s, where each
# pool's own fixed work weighs more, 0.65 took rounds past their limit
# (bench/COST_MODEL.md).
POOL_SHARE = 0.65
MIN_POOL_SHARE = 0.5
AFTER_POOLS_S = 0.5
POOL_WAIT = 0.8  # of the time limit: pools not back by then fall back to the greedy
OVERDUE_SHARE = 0.25  # of its limit past its expected end: a pool still out is decided here too
