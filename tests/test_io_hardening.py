"""No traceback on any input: what the standard JSON reader silently accepts or
cannot survive is a bad file, named with its JSON path and value, exit code 2."""

from __future__ import annotations

import copy
import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from whale_opt.check import check
from whale_opt.cli import main
from whale_opt.io import (
    InputError,
    instance_from_dict,
    load_json,
    options_from_dict,
    read_decision,
    read_instance,
)
from whale_opt.io.files import INT64_MAX, INT64_MIN, MAX_DEPTH
from whale_opt.problem_data import MAX_SECONDS
from whale_opt.solve import solve

DATA = Path(__file__).resolve().parent / "data"
GOOD = (DATA / "good-one-job.json").read_text("utf-8")


def _write(tmp_path: Path, text: str, name: str = "bad.json") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _nested(depth: int) -> str:
    """good-one-job.json with its queued job's ``gpu_types`` nested ``depth`` deep."""
    return GOOD.replace(
        '"duration_s": 3600', '"duration_s": 3600, "gpu_types": ' + "[" * depth + "]" * depth
    )


# Each bad text: the JSON path and the text the message must hold.
CASES = {
    "duplicate key": (
        GOOD.replace('"remaining_s": 600', '"remaining_s": 600, "remaining_s": 60'),
        "running[0].remaining_s",
        "duplicate key: given more than once in one object (got 600, then 60)",
    ),
    "duplicate key in a nested object": (
        GOOD.replace('{"memory_gb": 80}', '{"memory_gb": 80, "memory_gb": 80}'),
        "gpu_types.A100-80G.memory_gb",
        "(got 80, then 80)",
    ),
    "integer beyond 64 bits": (
        GOOD.replace('"duration_s": 3600', '"duration_s": 9223372036854775808'),
        "queue[0].duration_s",
        f"integer out of the 64-bit range {INT64_MIN}..{INT64_MAX} (got 9223372036854775808)",
    ),
    "integer of 5,000 digits": (
        GOOD.replace('"remaining_s": 600', '"remaining_s": -' + "7" * 5000),
        "running[0].remaining_s",
        "(got -77777777777777777...777777777777777777, 5001 characters)",
    ),
    "NaN": (
        GOOD.replace('"remaining_s": 600', '"remaining_s": 600, "cpu": NaN'),
        "running[0].cpu",
        "NaN and Infinity are not JSON (got NaN)",
    ),
    "-Infinity": (
        GOOD.replace('"gpus": 2,', '"gpus": 2, "weight": -Infinity,'),
        "queue[0].weight",
        "(got -Infinity)",
    ),
    "float overflow": (
        GOOD.replace('{"memory_gb": 80}', '{"memory_gb": 1e400}'),
        "gpu_types.A100-80G.memory_gb",
        "number too large for a 64-bit float (got 1e400)",
    ),
    "nesting just too deep": (
        _nested(MAX_DEPTH),
        "queue[0].gpu_types" + "[0]" * (MAX_DEPTH - 3),
        f"nested deeper than {MAX_DEPTH} levels",
    ),
    "nesting past the recursion limit": (
        "[" * 100_000 + "]" * 100_000,
        "[0]" * MAX_DEPTH,
        f'nested deeper than {MAX_DEPTH} levels (got "[[[[[[[[[[[[[[[[[[[[")',
    ),
    "an unclosed flood of brackets": (
        '{\n "a": "[[[{{",\n "b": ' + "{" * 200_000,
        "line 3 column 70",  # its objects have no keys: no path, a place
        f"nested deeper than {MAX_DEPTH} levels",
    ),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_the_reader_refuses_it_naming_file_path_and_value(tmp_path: Path, case: str) -> None:
    text, path, message = CASES[case]
    source = _write(tmp_path, text)
    with pytest.raises(InputError) as caught:
        load_json(source)
    error = caught.value
    assert (error.source, error.path) == (str(source), path)
    assert message in error.message, str(error)
    assert "\n" not in str(error)


def test_a_deep_key_path_decodes_escapes(tmp_path: Path) -> None:
    text = '{"q\\u0041": ' + "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5) + "}"
    with pytest.raises(InputError) as caught:
        load_json(_write(tmp_path, text))
    assert caught.value.path.startswith("qA[0][0]")


def test_brackets_inside_strings_do_not_count_as_nesting(tmp_path: Path) -> None:
    deep_looking = "[" * 500 + '\\"{' * 100
    text = json.dumps({"name": deep_looking, "list": [[[[1]]]]})
    assert load_json(_write(tmp_path, text)) == {"name": deep_looking, "list": [[[[1]]]]}


def test_what_stays_valid_reads_as_before(tmp_path: Path) -> None:
    text = json.dumps(
        {
            "max": INT64_MAX,
            "min": INT64_MIN,
            "big": 1.5e300,
            "tiny": 1e-400,  # underflows to 0.0: finite, so fine
            "deep": _deep(MAX_DEPTH - 1),
            "same keys, different objects": [{"a": 1}, {"a": 2}],
        }
    )
    loaded = load_json(_write(tmp_path, text))
    assert loaded == json.loads(text)
    assert isinstance(loaded["max"], int) and loaded["tiny"] == 0.0


def _deep(depth: int) -> object:
    value: object = []
    for _ in range(depth - 1):
        value = [value]
    return value


def test_instance_and_decision_readers_refuse_them_too(tmp_path: Path) -> None:
    text = GOOD.replace('"remaining_s": 600', '"remaining_s": 600, "remaining_s": 60')
    with pytest.raises(InputError, match=r"running\[0\]\.remaining_s: duplicate key"):
        read_instance(_write(tmp_path, text))
    decision = (
        (DATA / "good-decision.json").read_text("utf-8").replace('"gap"', '"objective": 1, "gap"')
    )
    with pytest.raises(InputError, match=r": objective: duplicate key"):
        read_decision(_write(tmp_path, decision, "decision.json"))


# -- the command line ---------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_solve_exits_2_with_one_line_and_writes_nothing(tmp_path: Path, case: str) -> None:
    text, path, message = CASES[case]
    source = _write(tmp_path, text)
    output = tmp_path / "out.json"
    result = CliRunner().invoke(main, ["solve", str(source), "-o", str(output)])
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit)  # not an uncaught exception
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: {source}: {path}: "), line
    assert message in line
    assert "Traceback" not in result.output
    assert not output.exists()
    assert list(tmp_path.iterdir()) == [source]


def test_check_exits_2_on_a_bad_decision(tmp_path: Path) -> None:
    decision = (
        (DATA / "good-decision.json").read_text("utf-8").replace('"bound": 3600', '"bound": NaN')
    )
    source = _write(tmp_path, decision)
    result = CliRunner().invoke(main, ["check", str(DATA / "good-one-job.json"), str(source)])
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [
        f"error: {source}: bound: is not a JSON number: NaN and Infinity are not JSON (got NaN)"
    ]


# -- ranges ---------------------------------------------------------------------------

EVERY = json.loads((DATA / "good-every-feature.json").read_text("utf-8"))
MAX_AMOUNT = 10**9  # the schema's largest CPU, memory, weight, aging rate and price
FIELD_LIMITS = {  # a JSON path into good-every-feature.json -> its largest value
    "gpu_types.A100-80G.memory_gb": MAX_AMOUNT,
    "gpu_types.A100-80G.speed": 1000,
    "nodes[0].cpu": MAX_AMOUNT,
    "nodes[0].memory_gb": MAX_AMOUNT,
    "running[0].remaining_s": MAX_SECONDS,
    "running[0].checkpoint_s": MAX_SECONDS,
    "running[0].weight": MAX_AMOUNT,
    "queue[0].duration_s": MAX_SECONDS,
    "queue[0].weight": MAX_AMOUNT,
    "queue[0].cpu": MAX_AMOUNT,
    "queue[0].min_gpu_memory_gb": MAX_AMOUNT,
    "priority_classes.urgent.weight": MAX_AMOUNT,
    "policy.horizon_s": MAX_SECONDS,
    "policy.time_limit_s": MAX_SECONDS,
    "policy.aging_per_hour": MAX_AMOUNT,
    "policy.zone_penalty_s": MAX_SECONDS,
    "policy.min_run_s": MAX_SECONDS,
}


def _set(doc: Any, path: str, value: object) -> Any:
    """A copy of ``doc`` with the value at ``path`` (``a.b[0].c``) set."""
    doc = copy.deepcopy(doc)
    keys = [int(k) if k.isdigit() else k for k in re.findall(r"[^.\[\]]+", path)]
    node = doc
    for key in keys[:-1]:
        node = node[key]
    node[keys[-1]] = value
    return doc


@pytest.mark.parametrize("path", FIELD_LIMITS)
def test_a_value_past_its_range_exits_2_naming_it(tmp_path: Path, path: str) -> None:
    past = FIELD_LIMITS[path] * 2 if not path.endswith("time_limit_s") else 2e9
    source = _write(tmp_path, json.dumps(_set(EVERY, path, past)))
    result = CliRunner().invoke(main, ["solve", str(source), "--solver", "wspt"])
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"error: {source}: {path}: must be "), line
    assert f"<= {FIELD_LIMITS[path]} (got {past!r})" in line


@pytest.mark.parametrize("solver", ["cpsat", "wspt", "frag-aware", "las"])
def test_values_at_their_range_are_solved_and_checked(
    solver: str, caplog: pytest.LogCaptureFixture
) -> None:
    """At the limits (past the 2**62 CP-SAT took before, nothing crashes the
    model: a node's CPU or memory, the durations, the horizon, the seed)."""
    doc = EVERY
    for path, limit in FIELD_LIMITS.items():
        if "weight" not in path and "aging" not in path and "speed" not in path:
            doc = _set(doc, path, limit)
    doc = _set(doc, "policy.seed", 2**62)
    instance, options = instance_from_dict(doc), options_from_dict(doc)
    assert options.seed == 2**62
    with caplog.at_level(logging.WARNING, logger="whale_opt"):
        decision = solve(instance, solver, options, time_limit_s=1.0)
    assert check(instance, decision) == []
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


def _numeric_paths(node: Any, prefix: str = "") -> list[str]:
    """The JSON paths of every number in ``node`` (``a.b[0].c``)."""
    if isinstance(node, dict):
        return [p for k, v in node.items() for p in _numeric_paths(v, f"{prefix}.{k}".lstrip("."))]
    if isinstance(node, list):
        return [p for i, v in enumerate(node) for p in _numeric_paths(v, f"{prefix}[{i}]")]
    return [prefix] if isinstance(node, int | float) and not isinstance(node, bool) else []


EXTREMES = [-(2**62), -MAX_SECONDS, -1, 0, 1, 1e-9, 0.001, 1000, MAX_SECONDS, 2**62, 1e300]


@settings(max_examples=80, deadline=None)
@given(
    changes=st.lists(
        st.tuples(st.sampled_from(_numeric_paths(EVERY)), st.sampled_from(EXTREMES)),
        min_size=1,
        max_size=3,
    )
)
def test_any_number_at_an_extreme_is_refused_or_solved_and_checked(
    changes: list[tuple[str, float]],
) -> None:
    """Found by mutating files: a CPU of 2**62, a weight of 1e300, a gang of 2**62
    GPUs once raised through a solver. Now each such file is a bad file or a round
    every solver decides validly, with no error logged."""
    doc = EVERY
    for path, value in changes:
        doc = _set(doc, path, value)
    try:
        instance = instance_from_dict(doc)
    except InputError:
        return
    errors = _ErrorLog()
    logging.getLogger("whale_opt").addHandler(errors)
    try:
        for solver in ("wspt", "cpsat"):
            decision = solve(instance, solver, time_limit_s=0.3)
            assert check(instance, decision) == []
    finally:
        logging.getLogger("whale_opt").removeHandler(errors)
    assert errors.messages == []


class _ErrorLog(logging.Handler):
    """The messages of error records (Hypothesis examples cannot share caplog)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())
