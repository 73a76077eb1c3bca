"""The file boundary: instance@1 and decision@1 JSON, read and written.

Reading goes raw JSON -> JSON Schema -> records (which check themselves) ->
:class:`~whale_opt.problem_data.Instance` (which checks cross-references).
Every failure becomes one :class:`InputError` naming the file, the JSON path
and the bad value. Writing is atomic: a file is either whole or untouched.

:mod:`~whale_opt.io.files` holds the errors, schemas and JSON reading and
writing, :mod:`~whale_opt.io.instance` the instance@1 format and
:mod:`~whale_opt.io.decision` the decision@1 format; import them from here.
"""

from whale_opt.io.decision import decision_from_dict as decision_from_dict
from whale_opt.io.decision import decision_to_dict as decision_to_dict
from whale_opt.io.decision import read_decision as read_decision
from whale_opt.io.decision import write_decision as write_decision
from whale_opt.io.files import DECISION_FORMAT as DECISION_FORMAT
from whale_opt.io.files import INSTANCE_FORMAT as INSTANCE_FORMAT
from whale_opt.io.files import INT64_MAX as INT64_MAX
from whale_opt.io.files import SCHEMAS as SCHEMAS
from whale_opt.io.files import InputError as InputError
from whale_opt.io.files import load_json as load_json
from whale_opt.io.files import parse_json as parse_json
from whale_opt.io.files import schema as schema
from whale_opt.io.files import write_json as write_json
from whale_opt.io.files import write_text as write_text
from whale_opt.io.instance import instance_from_dict as instance_from_dict
from whale_opt.io.instance import instance_to_dict as instance_to_dict
from whale_opt.io.instance import options_from_dict as options_from_dict
from whale_opt.io.instance import read_instance as read_instance
from whale_opt.io.instance import read_queue as read_queue
from whale_opt.io.instance import read_round as read_round
from whale_opt.io.instance import write_instance as write_instance
