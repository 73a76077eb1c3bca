"""The event log, snapshots and the scheduler codec: replay gives back the same state."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.exc import IntegrityError

from whale_opt.generate import generate
from whale_opt.io import decision_to_dict, instance_to_dict
from whale_opt.scheduler import Scheduler
from whale_opt.service import codec
from whale_opt.service.cluster import ClusterRuntime
from whale_opt.service.core import replay
from whale_opt.service.storage import Store, StoredAnswer, StoredCluster
from whale_opt.solve import solve


def _compare(a: Scheduler, b: Scheduler) -> None:
    """Every attribute equal, except the policy object and the template's initial jobs."""
    left, right = dict(vars(a)), dict(vars(b))
    for state in (left, right):
        state.pop("policy")
        template = state.pop("template")
        state["template"] = instance_to_dict(template.replace(queue=(), running=()))
    assert left.keys() == right.keys()
    for key in left:
        assert left[key] == right[key], key
        if isinstance(left[key], dict):
            assert list(left[key]) == list(right[key]), f"{key}: order differs"


def _events(raw: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """A day of a cluster: submissions, rounds, a checkpoint, a node down, a drain."""
    runtime = ClusterRuntime.from_create("c", _create_payload(raw))
    out: list[tuple[str, dict[str, Any]]] = []

    def do(kind: str, payload: dict[str, Any]) -> None:
        runtime.apply_event(kind, payload)
        out.append((kind, payload))

    for k in range(3):
        job = {"id": f"extra-{k}", "gpus": 2, "duration_s": 900, "submitted_at": 5 * k}
        do("submit", {"job": codec.plain(_queued(job)), "checkpoint_s": 30})
    decision = solve(runtime.scheduler.snapshot(100), "wspt")
    do("apply", {"now": 100, "decision": decision_to_dict(decision), "source": "decide"})
    first = next(iter(runtime.scheduler.running))
    do("checkpointed", {"job_id": first, "now": 400})
    node = runtime.scheduler.running[first].gpus[0].rpartition("/")[0]
    do("node", {"node_id": node, "down": True, "now": 500})
    do("drain", {"node_id": next(iter(runtime.scheduler.nodes)), "draining": True})
    do("finish", {"job_id": next(iter(runtime.scheduler.running))})
    decision = solve(runtime.scheduler.snapshot(900), "wspt")
    do("apply", {"now": 900, "decision": decision_to_dict(decision), "source": "apply"})
    return out


def _queued(spec: dict[str, Any]) -> Any:
    from whale_opt.service.work import probe_base, queue_items

    base = probe_base(generate("hetero", gpus=64, queued=0))
    return queue_items([spec], base, "job", single=True)[0]


def _create_payload(raw: dict[str, Any]) -> dict[str, Any]:
    from whale_opt.io import instance_from_dict

    scheduler = Scheduler(instance_from_dict(raw), "wspt", checkpoint_interval_s=600)
    return {"instance": raw, "settings": codec.settings_of(scheduler)}


@pytest.fixture(scope="module")
def raw() -> dict[str, Any]:
    return instance_to_dict(generate("hetero", gpus=64, queued=12, seed=1))


def test_codec_round_trip_is_exact(raw: dict[str, Any]) -> None:
    runtime = ClusterRuntime.from_create("c", _create_payload(raw))
    for kind, payload in _events(raw):
        runtime.apply_event(kind, payload)
    decoded = codec.decode(json.loads(json.dumps(codec.encode(runtime.scheduler))))
    _compare(runtime.scheduler, decoded)
    assert decoded.snapshot(1000) == runtime.scheduler.snapshot(1000)


def test_snapshot_plus_tail_equals_full_replay(raw: dict[str, Any]) -> None:
    events = _events(raw)
    log = [(0, "create", _create_payload(raw))]
    log += [(k, kind, payload) for k, (kind, payload) in enumerate(events, start=1)]
    full = replay(StoredCluster("c", None, None, log))
    cut = 4
    head = replay(StoredCluster("c", None, None, log[: cut + 1]))
    snap = json.loads(json.dumps(head.snapshot()))
    tail = replay(StoredCluster("c", cut, snap, log[cut + 1 :]))
    _compare(full.scheduler, tail.scheduler)
    assert (full.seq, full.clock) == (tail.seq, tail.clock) == (len(events), 900)
    assert full.latest == tail.latest and full.latest is not None


def test_an_event_number_is_taken_once_and_its_answer_with_it(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    store.create("c", {"instance": {}, "settings": {}}, None)
    answer = StoredAnswer("ops", "key-1", "f" * 64, 201, json.dumps({"seq": 1}))
    store.append("c", 1, "finish", {"job_id": "a"}, answer)
    other = StoredAnswer("ops", "key-2", "e" * 64, 201, "{}")
    with pytest.raises(IntegrityError):
        store.append("c", 1, "finish", {"job_id": "b"}, other)
    assert store.answer("ops", "key-2") is None  # rolled back with its event
    assert store.answer("ops", "key-1") == answer
    stored = store.load("c")
    assert stored is not None and [e[:2] for e in stored.events] == [(0, "create"), (1, "finish")]
    with pytest.raises(IntegrityError):
        store.create("c", {}, None)
    store.save_snapshot("c", 1, {"state": 1})
    after = store.load("c")
    assert after is not None and after.snapshot_seq == 1 and after.events == []
    store.delete("c", None)
    assert store.load("c") is None and store.names() == []
    store.close()
