"""Gym environment throughput: steps per second on the 32-GPU synthetic cluster.

Run alone on an idle machine (needs ``gymnasium``)::

    .venv/bin/python bench/gym_steps.py                     # 20,000 steps, defaults
    .venv/bin/python bench/gym_steps.py --preferences end frag-aware --slots 16

A seeded agent picks uniformly among the legal actions (the mask), episode
after episode, until ``--steps`` steps. Prints the command, then steps/s of
``env.step`` alone (the figure the target is about) and with ``reset`` and the
agent's own sampling, the mix of picks and advances, and episodes/s.
``--auto-advance`` skips the steps where advancing is the only legal action:
fewer, heavier steps (a step may run several simulator rounds), about the
same episodes/s. ``--queue-order smith --work-conserving --auto-advance`` is
how ``whale-opt train`` sets the environment up.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time

import numpy as np

from whale_opt.gym import GpuClusterEnv, GymConfig


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--gpus", type=int, default=32)
    parser.add_argument("--family", default="hetero")
    parser.add_argument("--jobs", type=int, default=64, help="jobs per episode")
    parser.add_argument("--load", type=float, default=0.9)
    parser.add_argument("--slots", type=int, default=8, help="K, queue slots shown")
    parser.add_argument("--preferences", nargs="+", default=["end"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--auto-advance", action="store_true", help="advance without a step when that is all"
    )
    parser.add_argument("--queue-order", default="submit", choices=["submit", "smith"])
    parser.add_argument(
        "--work-conserving", action="store_true", help="no advance while a shown job can start"
    )
    args = parser.parse_args()

    env = GpuClusterEnv(
        GymConfig(
            gpus=args.gpus,
            family=args.family,
            n_jobs=args.jobs,
            load=args.load,
            queue_slots=args.slots,
            preferences=tuple(args.preferences),
            auto_advance=args.auto_advance,
            queue_order=args.queue_order,
            work_conserving=args.work_conserving,
        )
    )
    gpus = sum(node.gpu_count for node in env.cluster.nodes)
    print("$", shlex.join([".venv/bin/python", *sys.argv]))
    print(
        f"{gpus} GPUs on {len(env.cluster.nodes)} nodes, {args.jobs} jobs an episode,"
        f" K={args.slots}, C={env.width}, {env.action_space.n} actions"
    )
    rng = np.random.default_rng(args.seed)
    in_step = 0.0
    steps = advances = episodes = rounds = 0
    began = time.perf_counter()
    env.reset(seed=args.seed)
    while steps < args.steps:
        action = int(rng.choice(np.flatnonzero(env.action_masks())))
        tic = time.perf_counter()
        _, _, terminated, truncated, _ = env.step(action)
        in_step += time.perf_counter() - tic
        steps += 1
        advances += action == env.advance_action
        if terminated or truncated:
            episodes += 1
            rounds += env.loop.state.rounds if env.loop is not None else 0
            env.reset()
    total = time.perf_counter() - began
    print(f"{steps} steps in {episodes} episodes ({advances} advances, {steps - advances} picks)")
    print(f"env.step alone:          {steps / in_step:,.0f} steps/s")
    print(f"with reset and sampling: {steps / total:,.0f} steps/s")
    if episodes:
        print(
            f"finished episodes: {episodes / total:.1f}/s,"
            f" {rounds / episodes:.0f} simulator rounds and {steps / episodes:.0f} steps each"
        )


if __name__ == "__main__":
    main()
