"""The CP-SAT rules of preemption in a neighbourhood model (:mod:`whale_opt.rules`):
a victim's GPUs go only to work when it is preempted, a preemption is
justified by a job that may displace it starting now on one of its GPUs,
and at most ``policy.max_preemptions`` preemptions a round."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Protocol

from ortools.sat.python import cp_model

from whale_opt.cpsat.candidates import FreeJob, Neighbourhood
from whale_opt.cpsat.shares import ShareGpus
from whale_opt.cpsat.variables import JobVars, Variables
from whale_opt.topology import bits, popcount


class Constraints(Protocol):
    """What these rules read of :class:`whale_opt.cpsat.constraints.Constraints`."""

    model: cp_model.CpModel
    hood: Neighbourhood
    vars: Variables
    takers: dict[tuple[int, int], list[cp_model.IntVar]]
    shares: ShareGpus

    def pairs(self) -> Iterator[tuple[FreeJob, JobVars]]: ...


def add_preemption_rules(c: Constraints) -> None:
    """Every preemption family, in order."""
    _victims_gpus_free_only_when_preempted(c)
    _preemptions_justified(c)
    _preemption_cap(c)


def _victims_gpus_free_only_when_preempted(c: Constraints) -> None:
    """An exact set that takes a victim's GPU needs the victim preempted; a forced
    victim stays preempted."""
    for victim, w in zip(c.hood.victims, c.vars.victims, strict=True):
        if victim.forced:
            c.model.add(w.kept == 0)
            continue
        for n, mask in victim.gpus.items():
            for index in bits(mask):
                shares = [lit for lit, _, _ in c.shares.takers.get((n, index), ())]
                for lit in [*c.takers.get((n, index), ()), *shares]:
                    c.model.add_implication(lit, w.kept.Not())


def _preemptions_justified(c: Constraints) -> None:
    """A preempted victim has a job that may displace it start now on one of its GPUs:
    by an exact set that takes one, or by a count the decoder serves from them first."""
    m = c.model
    victims = c.hood.victims
    count_users: dict[tuple[int, int], list[cp_model.IntVar]] = defaultdict(list)
    by_victim: dict[int, list[cp_model.IntVar]] = defaultdict(list)
    for item, v in c.pairs():
        job = c.hood.instance.queue[item.position]
        per_node: dict[int, list[cp_model.IntVar]] = defaultdict(list)
        for (index, n), lit in v.by_mask.items():
            overlap = [
                mask_lit
                for mask, mask_lit in zip(item.now_masks[n], v.mask[n], strict=True)
                if mask & victims[index].gpus[n]
            ]
            if overlap:
                m.add_bool_or(overlap).only_enforce_if(lit)
            else:
                m.add(lit == 0)
            by_victim[index].append(lit)
        for (index, n), lit in v.by_count.items():
            m.add_implication(lit, v.on_node[n])
            m.add_implication(lit, v.now)
            if n in v.mask:
                m.add(sum(v.mask[n]) == 0).only_enforce_if(lit)
            count_users[(index, n)].append(lit)
            per_node[n].append(lit)
            by_victim[index].append(lit)
        for n, lits in per_node.items():
            if len(lits) > 1:
                size = v.count.get(n, item.node_size or job.gpu_count)
                m.add(sum(lits) <= size)
    for (index, n), lits in count_users.items():
        mask = victims[index].gpus[n]
        taken = [lit for i in bits(mask) for lit in c.takers.get((n, i), ())]
        for i in bits(mask):  # a GPU a freed share takes is taken, however many share it
            shares = [lit for lit, _, _ in c.shares.takers.get((n, i), ())]
            if shares:
                opened = m.new_bool_var("")
                m.add_max_equality(opened, shares)
                taken.append(opened)
        m.add(sum(lits) + sum(taken) <= popcount(mask))
    for index, w in enumerate(c.vars.victims):
        if by_victim[index]:
            m.add_bool_or(by_victim[index]).only_enforce_if(w.kept.Not())
        else:
            m.add(w.kept == 1)


def _preemption_cap(c: Constraints) -> None:
    """At most ``policy.max_preemptions`` preemptions, the fixed ones included."""
    cap = c.hood.instance.policy.max_preemptions
    if cap is None or not c.vars.victims:
        return
    left = cap - len(c.hood.preempted)
    c.model.add(sum(1 - w.kept for w in c.vars.victims) <= left)
