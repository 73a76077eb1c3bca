"""Why jobs wait and what a change would do: reasons, verified counterfactuals, what-if.

:mod:`~whale_opt.explain.reasons` says why a queued job is not started,
:mod:`~whale_opt.explain.counterfactuals` tries the smallest changes that would
start it (each verified by re-solving) and :func:`explain` puts both together;
:mod:`~whale_opt.explain.whatif` re-solves after one change and compares.

The functions ``reasons`` and ``counterfactuals`` are not re-exported here:
they would hide the submodules of the same names.
"""

from whale_opt.explain.counterfactuals import Counterfactual as Counterfactual
from whale_opt.explain.counterfactuals import Explanation as Explanation
from whale_opt.explain.counterfactuals import explain as explain
from whale_opt.explain.reasons import REASON_KINDS as REASON_KINDS
from whale_opt.explain.reasons import Reason as Reason
from whale_opt.explain.whatif import CHANGE_KINDS as CHANGE_KINDS
from whale_opt.explain.whatif import Change as Change
from whale_opt.explain.whatif import Diff as Diff
from whale_opt.explain.whatif import JobChange as JobChange
from whale_opt.explain.whatif import apply_change as apply_change
from whale_opt.explain.whatif import diff as diff
from whale_opt.explain.whatif import dumps as dumps
from whale_opt.explain.whatif import read_jobs as read_jobs
from whale_opt.explain.whatif import whatif as whatif
