"""A whale_opt :class:`Decision` -> the ``scontrol`` commands that carry it out.

Pure: commands are argv tuples; :mod:`whale_opt.slurm.runner` runs them.
What works in Slurm 22.05 (each verified on a real one):

- start: ``scontrol update JobId=N NumNodes=K NodeList=a,b StartTime=now``
  pins the job (Slurm keeps it as ``ReqNodeList``), then ``scontrol release
  N`` lets Slurm start it on exactly those nodes (``StartTime=now`` also
  lifts the wait a requeued job would otherwise serve);
- exact indices (indexed layout): ``TresPerNode=gres:gpu:g2:1,gres:gpu:g5:1``.
  Slurm refuses to turn an untyped request (``gpu:2``) into a typed one, and
  turning one typed request into another *adds* the old types to the new
  ones; clearing the request first (``TresPerNode=``) and then setting it
  works in both cases. If a later step fails, the request is put back;
- preempt: ``scontrol requeuehold N`` stops the job and queues it again, held.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from whale_opt.decision import Action, Decision, JobDecision, job_nodes
from whale_opt.slurm import gres
from whale_opt.slurm.hostlist import join
from whale_opt.slurm.snapshot import Snapshot

Argv = tuple[str, ...]


@dataclass(frozen=True)
class JobCommands:
    """The commands for one job, run in order; ``undo`` runs if one fails.

    ``gpus`` is the placement whale_opt chose (``node/index`` ids) for a
    start, empty for a preemption.
    """

    job_id: str
    action: Action
    steps: tuple[Argv, ...]
    undo: tuple[Argv, ...] = ()
    gpus: tuple[str, ...] = ()


def scontrol_update(job_id: str, *fields: str) -> Argv:
    """``scontrol update JobId=N field...``."""
    return ("scontrol", "update", f"JobId={job_id}", *fields)


def _per_node(item: JobDecision) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {node: [] for node in job_nodes(item)}
    for gpu in item.gpu_ids:
        node, _, index = gpu.rpartition("/")
        out[node].append(int(index))
    return {node: sorted(indices) for node, indices in out.items()}


def start_commands(snapshot: Snapshot, item: JobDecision, gres_mode: str) -> JobCommands | str:
    """The commands that start ``item`` as decided, or why they cannot."""
    job = snapshot.jobs[item.id]
    per_node = _per_node(item)
    nodes = list(per_node)
    if len(nodes) != job.node_count:
        return f"whale_opt chose {len(nodes)} node(s), the job asks for {job.node_count}"
    counts = {len(indices) for indices in per_node.values()}
    if counts != {job.gpus_per_node}:
        return f"GPUs per node {sorted(counts)} differ from the {job.gpus_per_node} it asks"
    pin = scontrol_update(item.id, f"NumNodes={len(nodes)}", f"NodeList={join(nodes)}")
    steps: list[Argv] = [(*pin, "StartTime=now")]
    undo: list[Argv] = []
    if gres_mode == "indexed":
        index_sets = {tuple(indices) for indices in per_node.values()}
        whole = all(
            len(per_node[n]) == snapshot.instance.nodes[snapshot.instance.node_index[n]].gpu_count
            for n in nodes
        )
        untyped = all(e.type is None for e in gres.gpus(job.request) if e.count)
        if not (whole and untyped):  # gpu:8 on whole nodes needs no indices
            if len(index_sets) != 1:
                return "a multi-node job must get the same GPU indices on every node"
            (indices,) = index_sets
            if gres.requested_indices(job.request) != indices:
                steps[:0] = [
                    scontrol_update(item.id, "TresPerNode="),
                    scontrol_update(item.id, f"TresPerNode={gres.indexed_request(indices)}"),
                ]
                undo = [
                    scontrol_update(item.id, "TresPerNode="),
                    scontrol_update(item.id, f"TresPerNode={job.tres_per_node}"),
                ]
    steps.append(("scontrol", "release", item.id))
    return JobCommands(item.id, Action.START, tuple(steps), tuple(undo), item.gpu_ids)


def preempt_commands(job_id: str) -> JobCommands:
    """Stop a running job and queue it again, held: ``scontrol requeuehold``."""
    return JobCommands(job_id, Action.PREEMPT, (("scontrol", "requeuehold", job_id),))


def plan(
    snapshot: Snapshot, decision: Decision, gres_mode: str
) -> tuple[list[JobCommands], list[tuple[str, str]]]:
    """The commands of a round, preemptions first, and the starts refused (id, why)."""
    commands: list[JobCommands] = []
    refused: list[tuple[str, str]] = []
    in_flight = set(snapshot.in_flight)
    for item in decision.by_action(Action.PREEMPT):
        if item.id in in_flight:
            refused.append((item.id, "released but not started: not preempted"))
        else:
            commands.append(preempt_commands(item.id))
    for item in decision.by_action(Action.START):
        if item.id not in snapshot.jobs:
            refused.append((item.id, "not a job of this snapshot"))
            continue
        made = start_commands(snapshot, item, gres_mode)
        if isinstance(made, str):
            refused.append((item.id, made))
        else:
            commands.append(made)
    return commands, refused


def render(commands: Sequence[JobCommands]) -> list[str]:
    """The commands as shell lines (for ``--dry-run`` and logs)."""
    return [" ".join(step) for item in commands for step in item.steps]
