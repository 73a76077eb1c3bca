"""Record the ``squeue --json`` / ``sinfo --json`` fixtures from a real Slurm.

Run as ``.venv/bin/python -m tests.slurm.record_fixtures`` (needs the
Debian Slurm packages: ``.ci/install-slurm``). It starts a private
4-node cluster per GRES layout, builds a known state with ``sbatch`` and
``scontrol`` (what the bridge does), and writes
``data/<layout>.squeue.json``, ``data/<layout>.sinfo.json`` and the time of
the read into ``data/manifest.json``. The unit tests read these files.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from .local_slurm import LocalSlurm, local_slurm

DATA = Path(__file__).resolve().parent / "data"
LONG = "sleep 600"


def _sbatch(cluster: LocalSlurm, *args: str, script: str = LONG) -> str:
    out = cluster.root / "out" / "%j.out"
    done = cluster.run(["sbatch", "--parsable", "-o", str(out), *args, "--wrap", script])
    return done.stdout.strip().split(";")[0]


def _scontrol(cluster: LocalSlurm, *args: str) -> None:
    cluster.run(["scontrol", *args])


def _start(cluster: LocalSlurm, job: str, nodes: str, count: int = 1, gres: str = "") -> None:
    if gres:
        _scontrol(cluster, "update", f"JobId={job}", "TresPerNode=")
        _scontrol(cluster, "update", f"JobId={job}", f"TresPerNode={gres}")
    pin = [f"NumNodes={count}", f"NodeList={nodes}", "StartTime=now"]
    _scontrol(cluster, "update", f"JobId={job}", *pin)
    _scontrol(cluster, "release", job)


def _wait_state(cluster: LocalSlurm, job: str, states: set[str], deadline_s: float = 20) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        for record in json.loads(cluster.run(["squeue", "--json"]).stdout)["jobs"]:
            if str(record["job_id"]) == job and record["job_state"] in states:
                return
        time.sleep(0.3)
    raise TimeoutError(f"job {job} never reached {states}")


def indexed_state(cluster: LocalSlurm) -> None:
    """Running, in-flight, requeued-held, held, skipped jobs; n2 drained."""
    done = _sbatch(cluster, "--gres=gpu:1", "-J", "done", script="true")
    _start(cluster, done, "n2", gres="gres:gpu:g7:1")
    run_a = _sbatch(cluster, "--gres=gpu:2", "-t", "20", "-J", "run_a")
    _start(cluster, run_a, "n1", gres="gres:gpu:g2:1,gres:gpu:g5:1")
    big = _sbatch(cluster, "-N", "2", "--gres=gpu:8", "-t", "60", "-J", "big")
    _start(cluster, big, "n3,n4", count=2)
    victim = _sbatch(cluster, "--gres=gpu:1", "-J", "victim")
    _start(cluster, victim, "n2", gres="gres:gpu:g0:1")
    _sbatch(cluster, "-c", "2", "-w", "n2", "-J", "cpu_only", script=LONG)
    for job in (done, run_a, big, victim):
        _wait_state(cluster, job, {"RUNNING", "COMPLETED"})
    _wait_state(cluster, done, {"COMPLETED"})
    _scontrol(cluster, "requeuehold", victim)
    in_flight = _sbatch(cluster, "--gres=gpu:1", "-J", "in_flight")
    _start(cluster, in_flight, "n1", gres="gres:gpu:g2:1")  # g2 is busy: stays pending
    _sbatch(cluster, "--gres=gpu:4", "-t", "30", "-J", "held4")
    _sbatch(cluster, "--gres=gpu:1", "-C", "a100", "-J", "held1_a100")
    _sbatch(cluster, "-N", "2", "--gres=gpu:8", "-t", "120", "-J", "held16")
    _sbatch(cluster, "--gres=gpu:1", "-d", f"afterok:{run_a}", "-J", "dep")
    _sbatch(cluster, "--gpus=2", "-J", "per_job")
    _sbatch(cluster, "--gres=gpu:1", "--array=1-3", "-J", "array")
    _scontrol(cluster, "update", "NodeName=n2", "State=DRAIN", "Reason=fixture")
    time.sleep(1.0)


def plain_state(cluster: LocalSlurm) -> None:
    """Two jobs sharing n1, one across n2+n3, one in flight; n4 down."""
    three = _sbatch(cluster, "--gres=gpu:3", "-t", "10", "-J", "three")
    _start(cluster, three, "n1")
    two = _sbatch(cluster, "--gres=gpu:a100:2", "-J", "two")
    _start(cluster, two, "n1")
    wide = _sbatch(cluster, "-N", "2", "--gres=gpu:8", "-J", "wide")
    _start(cluster, wide, "n2,n3", count=2)
    for job in (three, two, wide):
        _wait_state(cluster, job, {"RUNNING"})
    in_flight = _sbatch(cluster, "--gres=gpu:4", "-J", "in_flight")
    _start(cluster, in_flight, "n1")  # 3 free on n1: stays pending
    _sbatch(cluster, "--gres=gpu:a100:1", "-t", "5", "-J", "typed1")
    _sbatch(cluster, "--gres=gpu:8", "-t", "60", "-J", "whole")
    _sbatch(cluster, "--gres=gpu:2", "-J", "untimed")
    _scontrol(cluster, "update", "NodeName=n4", "State=DOWN", "Reason=fixture")
    time.sleep(1.0)


def record(mode: str, manifest: dict[str, object]) -> None:
    """Start a cluster in ``mode``, build its state, write its two documents."""
    with (
        tempfile.TemporaryDirectory(prefix="wsrec-") as scratch,
        local_slurm(Path(scratch), mode=mode) as cluster,
    ):
        (indexed_state if mode == "indexed" else plain_state)(cluster)
        now = int(time.time())
        for command in ("squeue", "sinfo"):
            document = json.loads(cluster.run([command, "--json"]).stdout)
            (DATA / f"{mode}.{command}.json").write_text(json.dumps(document, indent=1) + "\n")
    manifest[mode] = {"now": now, "slurm": document["meta"]["Slurm"]["release"]}


def main() -> None:
    """Record both layouts."""
    manifest: dict[str, object] = {}
    for mode in ("indexed", "plain"):
        record(mode, manifest)
    (DATA / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")


if __name__ == "__main__":
    main()
