"""The solver-agnostic checker (:func:`check`) and what it reports (:class:`Violation`).

:mod:`~whale_opt.check.checker` holds the rules, :mod:`~whale_opt.check.coverage`
which action each job may have; import from here.
"""

from whale_opt.check.checker import TOLERANCE as TOLERANCE
from whale_opt.check.checker import Violation as Violation
from whale_opt.check.checker import check as check
