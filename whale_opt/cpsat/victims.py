"""Which running jobs a neighbourhood decides to keep or preempt.

A neighbourhood that frees queued jobs may also free running jobs for them
to displace (:mod:`whale_opt.rules`): those that may be preempted now, that
a freed job may displace (a higher class rank, or a guarantee reclaimed) and
that run on a node the freed job could use. Their GPUs are free on the
neighbourhood's timeline; the model keeps each one as an optional interval
from now to its end, or preempts it at its price.

The incumbent's own preemptions stay as they are unless every job started
on the victim's GPUs is freed: then the model decides again. A victim still
preempted only for freed jobs must be justified by one of them again.

Only running jobs whose node and tenant are within capacity with all
running work present may be decided: the model's cumulatives hold at every
moment, while the checker tolerates overloads that running work alone makes.
"""

from __future__ import annotations

from collections import defaultdict

from whale_opt.cpsat.candidates import Victim
from whale_opt.decision import Action, JobDecision, preemption_cost
from whale_opt.problem_data import Instance, tenant_quota
from whale_opt.rules import held_by_tenant, may_displace, preemptible_now
from whale_opt.topology import NodeTopology, eligible_nodes, popcount

MAX_NEW_VICTIMS = 6  # running jobs a neighbourhood may newly preempt, cheapest per GPU first
EPS = 1e-9


def gpus_by_node(instance: Instance, running_position: int) -> dict[int, int]:
    """Node position -> mask of running job ``running_position``'s GPUs there."""
    masks: dict[int, int] = defaultdict(int)
    for gpu in instance.running[running_position].gpu_ids:
        ref = instance.parse_gpu(gpu)
        masks[ref.node] |= 1 << ref.index
    return dict(masks)


def decidable(instance: Instance, topologies: tuple[NodeTopology, ...]) -> set[int]:
    """Running positions whose nodes (GPUs, CPU, memory) and tenant quota hold all
    running work at once: the ones a model may keep or preempt exactly."""
    gpus: dict[int, int] = defaultdict(int)
    cpu: dict[int, float] = defaultdict(float)
    memory: dict[int, float] = defaultdict(float)
    held = held_by_tenant(instance)
    for r, job in enumerate(instance.running):
        for n, mask in gpus_by_node(instance, r).items():
            share = popcount(mask) / len(job.gpu_ids)
            gpus[n] += popcount(mask)
            cpu[n] += job.cpu * share
            memory[n] += job.memory_gb * share
    overloaded = {
        n
        for n in gpus
        if gpus[n] > popcount(topologies[n].healthy)
        or cpu[n] > instance.nodes[n].cpu + EPS
        or memory[n] > instance.nodes[n].memory_gb + EPS
    }
    out = set()
    for r, job in enumerate(instance.running):
        quota = tenant_quota(instance, job.tenant)
        if quota is not None and held[job.tenant] > quota:
            continue
        if not set(gpus_by_node(instance, r)) & overloaded:
            out.add(r)
    return out


def choose_victims(
    instance: Instance,
    incumbent: dict[int, JobDecision],
    free: set[int],
    preempted: frozenset[int],
    topologies: tuple[NodeTopology, ...],
    max_new: int | None = MAX_NEW_VICTIMS,
) -> tuple[list[Victim], frozenset[int], bool]:
    """The running jobs the model decides, the incumbent's preemptions it keeps
    fixed, and whether every running job a freed job could preempt is decided
    (``max_new``: at most that many new victims, cheapest per GPU first; None:
    all)."""
    if not instance.running or not instance.policy.allow_preemption:
        return [], preempted, True
    held = held_by_tenant(instance)
    ok = decidable(instance, topologies)
    users: dict[str, list[int]] = defaultdict(list)
    for k, item in incumbent.items():
        if item.action is Action.START:
            for gpu in item.gpu_ids:
                users[gpu].append(k)
    eligible_memo: dict[tuple[object, ...], frozenset[int]] = {}

    def eligible(k: int) -> frozenset[int]:
        job = instance.queue[k]
        shape = (instance.eligible_types[k], job.gpu_count, job.topology)
        if shape not in eligible_memo:
            eligible_memo[shape] = frozenset(eligible_nodes(instance, k, topologies))
        return eligible_memo[shape]

    def displacers(r: int, nodes: dict[int, int]) -> set[int]:
        victim = instance.running[r]
        return {
            k
            for k in free
            if may_displace(instance, victim, instance.queue[k], held) and eligible(k) & set(nodes)
        }

    victims: list[Victim] = []
    fixed: set[int] = set()
    for r in sorted(preempted):
        victim = instance.running[r]
        nodes = gpus_by_node(instance, r)
        on_it = {k for gpu in victim.gpu_ids for k in users.get(gpu, ())}
        if on_it <= free and r in ok:
            victims.append(Victim(r, nodes, victim.remaining_s, displacers(r, nodes), True))
        elif any(
            k not in free and may_displace(instance, victim, instance.queue[k], held) for k in on_it
        ):
            fixed.add(r)  # a fixed job started on its GPUs justifies it
        else:
            who = displacers(r, nodes)
            victims.append(Victim(r, nodes, victim.remaining_s, who, True, forced=True))
    cap = instance.policy.max_preemptions
    complete = not any(victim.forced for victim in victims)
    if cap is None or cap > len(fixed):
        fresh = []
        for r, victim in enumerate(instance.running):
            if r in preempted or not preemptible_now(instance, r):
                continue
            nodes = gpus_by_node(instance, r)
            who = displacers(r, nodes)
            if not who:
                continue
            if r not in ok:
                complete = False  # the model could not keep it exactly
                continue
            price = preemption_cost(instance, r) / len(victim.gpu_ids)
            fresh.append((price, r, Victim(r, nodes, victim.remaining_s, who)))
        fresh.sort(key=lambda entry: (entry[0], entry[1]))
        complete = complete and (max_new is None or len(fresh) <= max_new)
        victims += [entry[2] for entry in fresh[:max_new]]
    return victims, frozenset(fixed), complete
