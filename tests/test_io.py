"""The file boundary: bad files name file, JSON path and value; writes are atomic."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from whale_opt.check import check
from whale_opt.io import (
    InputError,
    decision_from_dict,
    decision_to_dict,
    instance_from_dict,
    instance_to_dict,
    read_decision,
    read_instance,
    write_decision,
    write_instance,
    write_json,
)
from whale_opt.problem_data import (
    DEFAULT_PRIORITY_CLASSES,
    GpuType,
    Instance,
    Node,
    Policy,
    PriorityClass,
    QueuedJob,
    RunningJob,
    Tenant,
)
from whale_opt.registry import get_policy

DATA = Path(__file__).resolve().parent / "data"
SMALL = Path(__file__).resolve().parent.parent / "instances" / "small" / "two-racks-mixed.json"
READERS = {"instance": read_instance, "decision": read_decision}


@dataclass(frozen=True)
class Expected:
    """One row of tests/data/README.md: what reading a bad file must report."""

    file: str
    reader: str
    path: str
    value: str | None
    message: str


def expected_errors() -> list[Expected]:
    """The bad-file table of tests/data/README.md (the single source of truth)."""
    rows = []
    for line in (DATA / "README.md").read_text("utf-8").splitlines():
        if line.startswith("| `bad-"):
            cells = [cell.strip().strip("`") for cell in line.strip().strip("|").split("|")]
            file, reader, path, value, message = cells
            rows.append(Expected(file, reader, path, None if value == "-" else value, message))
    return rows


BAD = expected_errors()


def test_readme_lists_every_bad_file_once() -> None:
    listed = [row.file for row in BAD]
    on_disk = sorted(path.name for path in DATA.glob("bad-*"))
    assert sorted(listed) == on_disk
    assert len(set(listed)) == len(listed)
    assert len(BAD) >= 20


@pytest.mark.parametrize("row", BAD, ids=[row.file for row in BAD])
def test_bad_file_names_file_path_and_value(row: Expected) -> None:
    source = DATA / row.file
    with pytest.raises(InputError) as caught:
        READERS[row.reader](source)
    error = caught.value
    text = str(error)
    assert error.source == str(source)
    assert error.path == row.path
    assert text.startswith(f"{source}: {row.path}: "), text
    assert row.message in error.message, text
    if row.value is not None:
        assert f"(got {row.value}" in error.message, text
    assert "\n" not in text


@pytest.mark.parametrize(
    "name",
    [
        "good-minimal.json",
        "good-one-job.json",
        "good-unservable-job.json",
        "good-every-feature.json",
    ],
)
def test_good_instances_read(name: str) -> None:
    instance = read_instance(DATA / name)
    assert instance.name == name.removesuffix(".json")


def test_good_decision_reads_and_is_valid_for_its_instance() -> None:
    instance = read_instance(DATA / "good-one-job.json")
    decision = read_decision(DATA / "good-decision.json")
    assert decision.instance == instance.name
    assert check(instance, decision) == []


def test_unservable_jobs_are_not_file_errors() -> None:
    """Too much GPU memory, a type on no node, too many GPUs: read fine, deferred."""
    instance = read_instance(DATA / "good-unservable-job.json")
    assert [job.id for job in instance.queue] == [
        "too-much-memory",
        "type-on-no-node",
        "too-many-gpus",
    ]
    assert instance.eligible_types[0] == ()
    assert instance.eligible_types[1] == ("H100-80G",)
    decision = get_policy("wspt").decide(instance)
    assert {item.action.value for item in decision.jobs} == {"deferred"}
    assert check(instance, decision) == []


def test_missing_file_names_it() -> None:
    source = DATA / "no-such-file.json"
    with pytest.raises(InputError, match=r"no-such-file\.json: \(file\): cannot read: No such"):
        read_instance(source)


def test_directory_is_not_readable_as_a_file() -> None:
    with pytest.raises(InputError, match=r": \(file\): cannot read: Is a directory"):
        read_instance(DATA)


def test_decision_reader_refuses_an_instance_file() -> None:
    source = DATA / "good-minimal.json"
    with pytest.raises(InputError) as caught:
        read_decision(source)
    assert caught.value.path == "format"
    assert '(got "whale-opt/instance@1"); expected "whale-opt/decision@1"' in str(caught.value)


def test_utf8_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    source = tmp_path / "bom.json"
    source.write_bytes(b"\xef\xbb\xbf" + (DATA / "good-minimal.json").read_bytes())
    assert read_instance(source).name == "good-minimal"


def _minimal() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((DATA / "good-minimal.json").read_text("utf-8"))
    return loaded


@pytest.mark.parametrize(
    ("change", "path", "message"),
    [
        (lambda raw: raw["nodes"][0].update(id=""), "nodes[0].id", 'must not be empty (got "")'),
        (
            lambda raw: raw["nodes"][0].update(id="a/1"),
            "nodes[0].id",
            'must match the pattern ^[^/]+$ (got "a/1")',
        ),
        (lambda raw: raw.update(gpu_types={}), "gpu_types", "must not be empty (got {})"),
        (
            lambda raw: raw["nodes"][0].update(gpus=8, nvlink={"edges": [[0, 1, 2]]}),
            "nodes[0].nvlink.edges[0]",
            "needs at most 2 items (got [0, 1, 2])",
        ),
        (
            lambda raw: raw["nodes"][0].update(gpus=65),
            "nodes[0].gpus",
            "must be <= 64 (got 65)",
        ),
        (
            lambda raw: raw["gpu_types"]["A100-80G"].update(memory_gb=0),
            "gpu_types.A100-80G.memory_gb",
            "must be > 0 (got 0)",
        ),
        (
            lambda raw: raw["nodes"][0].update(down="no"),
            "nodes[0].down",
            'must be a boolean (got "no")',
        ),
        (
            lambda raw: raw.update(policy={"horizon": 10}),
            "policy.horizon",
            'unknown field (got 10); did you mean "horizon_s"?',
        ),
        (
            lambda raw: raw.update(colour="blue"),
            "colour",
            'unknown field (got "blue"); allowed: format, gpu_types, name, nodes, now,',
        ),
        (lambda raw: raw.pop("nodes"), "nodes", "is required but missing"),
        (
            lambda raw: raw["nodes"][0].update(gpu_typ=raw["nodes"][0].pop("gpu_type")),
            "nodes[0].gpu_type",
            'is required but missing; is "gpu_typ" a typo of it?',
        ),
        (
            lambda raw: raw["nodes"][0].update(gpus=8.0),
            "nodes[0].gpus",
            "must be an integer >= 1 (got 8.0)",
        ),
    ],
)
def test_schema_messages_name_path_and_value(change: Any, path: str, message: str) -> None:
    raw = _minimal()
    change(raw)
    with pytest.raises(InputError) as caught:
        instance_from_dict(raw, "inline.json")
    assert caught.value.path == path
    assert message in caught.value.message, str(caught.value)


@pytest.mark.parametrize(
    ("change", "path", "message"),
    [
        (
            lambda raw: raw["queue"][0].update(preferred_gpu_types="A100-80G"),
            "queue[0].preferred_gpu_types",
            'must be an array (got "A100-80G")',
        ),
        (
            lambda raw: raw["queue"][0].update(prefer_nvlink="yes"),
            "queue[0].prefer_nvlink",
            'must be a boolean (got "yes")',
        ),
        (
            lambda raw: raw["queue"][0].update(priority_class=""),
            "queue[0].priority_class",
            'must not be empty (got "")',
        ),
        (
            lambda raw: raw.update(tenants={"nlp": {"guaranteed_gpus": -2}}),
            "tenants.nlp.guaranteed_gpus",
            "must be >= 0 (got -2)",
        ),
        (
            lambda raw: raw.update(priority_classes={"urgent": {"weight": "high"}}),
            "priority_classes.urgent.weight",
            'must be a number (got "high")',
        ),
        (
            lambda raw: raw.update(policy={"max_preemptions": 1.5}),
            "policy.max_preemptions",
            "must be an integer (got 1.5)",
        ),
        (
            lambda raw: raw.update(policy={"min_run": 60}),
            "policy.min_run",
            'unknown field (got 60); did you mean "min_run_s"?',
        ),
    ],
)
def test_new_field_messages_name_path_and_value(change: Any, path: str, message: str) -> None:
    raw: dict[str, Any] = json.loads((DATA / "good-one-job.json").read_text("utf-8"))
    change(raw)
    with pytest.raises(InputError) as caught:
        instance_from_dict(raw, "inline.json")
    assert caught.value.path == path
    assert message in caught.value.message, str(caught.value)


def test_long_values_are_cut_short() -> None:
    raw = _minimal()
    raw["name"] = ["x" * 500]
    with pytest.raises(InputError) as caught:
        instance_from_dict(raw, "inline.json")
    assert caught.value.path == "name"
    assert len(str(caught.value)) < 120
    assert caught.value.message.endswith("...)")


# -- round trips --------------------------------------------------------------


def test_instance_round_trip(tmp_path: Path) -> None:
    original = read_instance(SMALL)
    target = tmp_path / "copy.json"
    write_instance(target, original)
    again = read_instance(target)
    assert again == original
    assert instance_to_dict(again) == instance_to_dict(original)
    assert again.eligible_types == original.eligible_types
    assert again.durations == original.durations


def test_decision_round_trip(tmp_path: Path, small: Instance) -> None:
    decision = get_policy("wspt").decide(small)
    target = tmp_path / "decision.json"
    write_decision(target, decision)
    again = read_decision(target)
    # wall_s is written to 0.1 ms; everything else comes back exactly.
    assert again == replace(decision, wall_s=round(decision.wall_s, 4))
    assert check(small, again) == []
    # A second round trip is an exact fixpoint, file bytes included.
    second = tmp_path / "again.json"
    write_decision(second, again)
    assert read_decision(second) == again
    assert second.read_bytes() == target.read_bytes()


def every_field() -> Instance:
    """An instance built in Python with every optional field of priority and preemption."""
    types = {"A100-80G": GpuType("A100-80G", 80), "V100-32G": GpuType("V100-32G", 32, 0.5)}
    return Instance(
        "every-field",
        types,
        (
            Node("a0", "A100-80G", 8, "nvswitch", rack="r1", zone="east", draining=True),
            Node("v0", "V100-32G", 8, "hybrid-cube-mesh", rack="r2", zone="west"),
        ),
        running=(
            RunningJob(
                "r1",
                ("a0/0", "a0/1"),
                600,
                tenant="cv",
                started_at=-5000,
                checkpoint_s=90,
                since_checkpoint_s=1200,
                priority_class="spot",
            ),
            RunningJob("r2", ("v0/7",), 60, priority_class="online", since_checkpoint_s=0),
        ),
        queue=(
            QueuedJob(
                "q1",
                2,
                3600,
                tenant="nlp",
                topology="any",
                submitted_at=-7200,
                priority_class="urgent",
                zone="east",
                preferred_gpu_types=("V100-32G", "A100-80G"),
                prefer_nvlink=True,
            ),
            QueuedJob("q2", 1, 60, priority_class="best-effort"),
        ),
        tenants={
            "nlp": Tenant("nlp", 16, 8),
            "cv": Tenant("cv", None, 4),
            "rl": Tenant("rl", 4, 4),
        },
        policy=Policy(
            allow_preemption=True,
            min_run_s=1800,
            max_preemptions=0,
            aging_per_hour=0.25,
            zone_penalty_s=100,
            gpu_type_penalty_s=200,
            nvlink_penalty_s=0,
        ),
        priority_classes={
            **DEFAULT_PRIORITY_CLASSES,
            "urgent": PriorityClass("urgent", 4.0, 5, False),
            "spot": PriorityClass("spot", 0.05, -1, True),
            "online": PriorityClass("online", 20.0, 2, False),  # a default, redefined
        },
    )


@pytest.mark.parametrize("source", ["python", "file"])
def test_instance_with_every_new_field_round_trips(tmp_path: Path, source: str) -> None:
    original = (
        every_field() if source == "python" else read_instance(DATA / "good-every-feature.json")
    )
    target = tmp_path / "copy.json"
    write_instance(target, original)
    again = read_instance(target)
    assert again == original
    assert instance_to_dict(again) == instance_to_dict(original)
    assert again.weights == original.weights
    assert again.running_weights == original.running_weights
    second = tmp_path / "again.json"
    write_instance(second, again)
    assert second.read_bytes() == target.read_bytes()


def test_instance_without_the_default_classes_round_trips() -> None:
    only = Instance(
        "only-urgent",
        {"A100-80G": GpuType("A100-80G", 80)},
        (Node("a0", "A100-80G", 8),),
        queue=(QueuedJob("q1", 1, 60, priority_class="urgent"),),
        priority_classes={"urgent": PriorityClass("urgent", 2.0, 3)},
    )
    assert instance_from_dict(json.loads(json.dumps(instance_to_dict(only)))) == only


def test_every_new_field_reaches_the_file() -> None:
    raw = instance_to_dict(every_field())
    assert raw["nodes"][0]["draining"] is True and "draining" not in raw["nodes"][1]
    assert raw["running"][0]["since_checkpoint_s"] == 1200
    assert raw["running"][0]["priority_class"] == "spot"
    assert raw["queue"][0]["preferred_gpu_types"] == ["V100-32G", "A100-80G"]
    assert raw["queue"][0]["prefer_nvlink"] is True
    assert raw["tenants"] == {
        "nlp": {"gpu_quota": 16, "guaranteed_gpus": 8},
        "cv": {"guaranteed_gpus": 4},
        "rl": {"gpu_quota": 4, "guaranteed_gpus": 4},
    }
    # Only classes that differ from the defaults are written.
    assert sorted(raw["priority_classes"]) == ["online", "spot", "urgent"]
    assert raw["policy"]["max_preemptions"] == 0
    assert instance_from_dict(raw).policy.max_preemptions == 0


def test_decision_with_dropped_preferences_and_a_preemption_round_trips(tmp_path: Path) -> None:
    instance = read_instance(DATA / "good-every-feature.json")
    decision = read_decision(DATA / "good-decision-every-feature.json")
    assert check(instance, decision) == []
    assert decision.objective == 27279
    assert [name for name, _ in decision.job("q2").dropped] == ["zone", "gpu_type"]
    assert decision.job("r1").action.value == "preempt"
    target = tmp_path / "decision.json"
    write_decision(target, decision)
    again = read_decision(target)
    assert again == decision
    assert decision_to_dict(again)["jobs"][1]["dropped"][0]["preference"] == "zone"
    second = tmp_path / "again.json"
    write_decision(second, again)
    assert second.read_bytes() == target.read_bytes()


def test_decision_dict_round_trip(small: Instance) -> None:
    decision = get_policy("wspt").decide(small)
    raw = json.loads(json.dumps(decision_to_dict(decision)))
    assert decision_to_dict(decision_from_dict(raw)) == raw


# -- atomic writes ------------------------------------------------------------


def test_write_into_missing_directory_raises_and_leaves_nothing(tmp_path: Path) -> None:
    target = tmp_path / "missing" / "out.json"
    with pytest.raises(FileNotFoundError):
        write_json(target, {"a": 1})
    assert not target.parent.exists()
    assert list(tmp_path.iterdir()) == []


def test_failed_serialisation_keeps_existing_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "decision.json"
    target.write_text('{"old": true}\n', "utf-8")

    def broken_sync(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("disk full while writing")

    monkeypatch.setattr(os, "fsync", broken_sync)
    with pytest.raises(RuntimeError, match="disk full"):
        write_json(target, {"new": True})
    assert target.read_text("utf-8") == '{"old": true}\n'
    assert [path.name for path in tmp_path.iterdir()] == ["decision.json"]


def test_unserialisable_payload_keeps_existing_file(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    target.write_text("[1]\n", "utf-8")
    with pytest.raises(TypeError):
        write_json(target, {"bad": object()})
    assert target.read_text("utf-8") == "[1]\n"
    assert [path.name for path in tmp_path.iterdir()] == ["out.json"]


def test_written_file_has_ordinary_permissions(tmp_path: Path) -> None:
    """Not mkstemp's owner-only 0o600: others may read a decision (umask permitting)."""
    old = os.umask(0o022)
    try:
        write_json(tmp_path / "out.json", {"a": 1})
    finally:
        os.umask(old)
    assert (tmp_path / "out.json").stat().st_mode & 0o777 == 0o644


def test_write_replaces_existing_file_whole(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    target.write_text("x" * 10_000, "utf-8")
    write_json(target, {"a": 1})
    assert json.loads(target.read_text("utf-8")) == {"a": 1}
    assert [path.name for path in tmp_path.iterdir()] == ["out.json"]


def test_no_ceiling_and_class_ceilings_survive_a_write_and_read() -> None:
    from whale_opt.io import instance_from_dict, instance_to_dict
    from whale_opt.problem_data import PriorityClass

    base = read_instance(SMALL)
    classes = {
        **base.priority_classes,
        "best-effort": PriorityClass("best-effort", 0.1, 0, True, max_wait_s=None),
        "urgent": PriorityClass("urgent", 3.0, 5, False, max_wait_s=3600),
    }
    instance = base.replace(policy=replace(base.policy, max_wait_s=None), priority_classes=classes)
    again = instance_from_dict(instance_to_dict(instance))
    assert again.policy.max_wait_s is None
    assert again.priority_classes["best-effort"].max_wait_s is None
    assert again.priority_classes["urgent"].max_wait_s == 3600
    assert again == instance


def test_run_settings_travel_in_the_policy_block_and_nowhere_else(tmp_path: Path) -> None:
    from whale_opt.io import read_round
    from whale_opt.options import SolveOptions

    base = read_instance(SMALL)
    path = tmp_path / "round.json"
    write_instance(path, base, SolveOptions(time_limit_s=2.5, seed=7, report_bound=False))
    instance, options = read_round(path)
    assert instance == base
    assert options == SolveOptions(time_limit_s=2.5, seed=7, report_bound=False)
    assert read_round(SMALL)[1].report_bound is True
