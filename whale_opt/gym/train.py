"""Training the ``learned`` policy: MaskablePPO on the environment, checkpoints, a curve.

:func:`train` builds one environment per training trace (synthetic traces of
the given seeds on one cluster, so training never sees the evaluation
seeds), trains sb3-contrib's ``MaskablePPO`` on them in this process, and
writes into ``out``:

- ``model.zip`` and ``model.json`` (its :class:`~whale_opt.policies.learned.Encoding`):
  what :class:`~whale_opt.policies.learned.LearnedPolicy` loads;
- ``checkpoints/step-<N>.zip`` (and ``.json``) every ``checkpoint_every`` steps;
- ``curve.csv``: each finished training episode's weighted JCT (hours) by step;
- ``train.json``: the settings, wall and CPU time, and steps per second.

Named clusters (:data:`CLUSTERS`): ``a100-4x8`` (4 servers x 8 A100 on
NVSwitch, the learned-scheduler prototype's) and ``hetero-64`` (the
synthetic heterogeneous family at 64 GPUs: H100, A100, V100, RTX, A10). Any
instance@1 file path works too (its jobs are dropped).

Needs the ``rl`` extra (torch, stable-baselines3, sb3-contrib).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from whale_opt.gym.config import GymConfig
from whale_opt.gym.env import GpuClusterEnv
from whale_opt.io import read_instance
from whale_opt.policies.learned import encoding_path
from whale_opt.problem_data import FieldError, Instance
from whale_opt.sim import TraceJob, synthetic_cluster, synthetic_trace


def a100_cluster() -> Instance:
    """4 servers x 8 A100-80G on NVSwitch (the A100 nodes of the 128-GPU hetero family)."""
    big = synthetic_cluster(128, family="hetero")
    nodes = tuple(node for node in big.nodes if node.gpu_type == "A100-80G")
    types = {"A100-80G": big.gpu_types["A100-80G"]}
    return big.replace(name="a100-4x8", nodes=nodes, gpu_types=types)


def hetero_cluster() -> Instance:
    """The synthetic heterogeneous family at 64 GPUs (8 nodes of five GPU types)."""
    return synthetic_cluster(64, family="hetero").replace(name="hetero-64")


CLUSTERS: dict[str, Callable[[], Instance]] = {
    "a100-4x8": a100_cluster,
    "hetero-64": hetero_cluster,
}


def load_cluster(name: str) -> Instance:
    """A named cluster (:data:`CLUSTERS`) or an instance@1 file's nodes.

    Raises :class:`~whale_opt.problem_data.FieldError` naming ``cluster``
    when ``name`` is neither (a bad file raises the reader's error).
    """
    if name in CLUSTERS:
        return CLUSTERS[name]()
    path = Path(name)
    if not path.is_file():
        known = ", ".join(CLUSTERS)
        raise FieldError("cluster", name, f"is neither a named cluster ({known}) nor a file")
    return read_instance(path).replace(running=(), queue=())


@dataclass(frozen=True)
class TrainConfig:
    """What :func:`train` does. Defaults: the settings bench/LEARNED.md reports.

    Parameters
    ----------
    cluster
        A name of :data:`CLUSTERS` or an instance@1 file.
    trace_seeds, n_jobs, load
        One synthetic trace per seed (``n_jobs`` jobs at offered ``load``).
    timesteps
        Environment steps to train (PPO rounds this up to whole rollouts).
    queue_slots, queue_order, work_conserving
        The environment's K, slot order, and whether the agent may hold GPUs
        back (:class:`~whale_opt.gym.GymConfig`).
    n_steps, batch_size, n_epochs, learning_rate, gamma, ent_coef, net_arch
        MaskablePPO's settings (``n_steps`` per environment per rollout).
    seed
        Seeds the network, PPO and the environments' episodes.
    checkpoint_every
        Steps between checkpoints (0: only the final model).
    """

    cluster: str = "a100-4x8"
    trace_seeds: tuple[int, ...] = (1, 2, 3, 4, 5)
    n_jobs: int = 128
    load: float = 1.2
    timesteps: int = 250_000
    queue_slots: int = 8
    queue_order: str = "smith"
    work_conserving: bool = True
    n_steps: int = 256
    batch_size: int = 256
    n_epochs: int = 5
    learning_rate: float = 3e-4
    gamma: float = 0.995
    ent_coef: float = 0.01
    net_arch: tuple[int, ...] = (128, 128)
    seed: int = 0
    checkpoint_every: int = 50_000

    def __post_init__(self) -> None:
        positive = ("n_jobs", "timesteps", "queue_slots", "n_steps", "batch_size", "n_epochs")
        for name in positive:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise FieldError(name, value, "must be an int >= 1")
        if not self.trace_seeds:
            raise FieldError("trace_seeds", self.trace_seeds, "must name at least one seed")
        for name in ("load", "learning_rate", "gamma"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or value <= 0:
                raise FieldError(name, value, "must be a number > 0")
        if self.checkpoint_every < 0:
            raise FieldError("checkpoint_every", self.checkpoint_every, "must be >= 0")

    def gym_config(self, cluster: Instance, trace: tuple[TraceJob, ...]) -> GymConfig:
        """The environment of one training trace: rewards in hours, real choices only."""
        return GymConfig(
            cluster=cluster,
            trace=trace,
            queue_slots=self.queue_slots,
            queue_order=self.queue_order,
            work_conserving=self.work_conserving,
            reward_scale=1 / 3600,
            auto_advance=True,
        )


@dataclass(frozen=True)
class TrainResult:
    """A finished training: where the model is, its curve, how long it took."""

    model: Path
    curve: pd.DataFrame
    timesteps: int
    wall_s: float

    @property
    def steps_per_s(self) -> float:
        """Environment steps per second of training (PPO updates included)."""
        return self.timesteps / max(self.wall_s, 1e-9)


def training_traces(cluster: Instance, config: TrainConfig) -> list[tuple[TraceJob, ...]]:
    """The synthetic traces of ``config.trace_seeds`` on ``cluster``."""
    return [
        synthetic_trace(config.n_jobs, cluster, load=config.load, seed=seed)
        for seed in config.trace_seeds
    ]


def train(
    config: TrainConfig, out: str | Path, *, progress: Callable[[int], None] | None = None
) -> TrainResult:
    """Train MaskablePPO per ``config``; write the model, checkpoints and curve to ``out``.

    ``progress(steps)`` is called as training goes (the CLI's progress bar).
    """
    import torch
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv

    torch.set_num_threads(1)  # a small network: threads only contend with the simulator

    out = Path(out)
    (out / "checkpoints").mkdir(parents=True, exist_ok=True)
    cluster = load_cluster(config.cluster)
    envs = [
        GpuClusterEnv(config.gym_config(cluster, trace))
        for trace in training_traces(cluster, config)
    ]
    vec = DummyVecEnv([lambda env=env: Monitor(env) for env in envs])  # type: ignore[misc]
    encoding = envs[0].encoding
    model = MaskablePPO(
        "MlpPolicy",
        vec,
        n_steps=config.n_steps,
        batch_size=config.batch_size,
        n_epochs=config.n_epochs,
        learning_rate=config.learning_rate,
        gamma=config.gamma,
        ent_coef=config.ent_coef,
        policy_kwargs={"net_arch": list(config.net_arch)},
        seed=config.seed,
        device="cpu",
        verbose=0,
    )
    recorder = _recorder(out, encoding.to_dict(), config.checkpoint_every, progress)
    began, cpu_began = time.perf_counter(), time.process_time()
    model.learn(total_timesteps=config.timesteps, callback=recorder)
    wall_s = time.perf_counter() - began
    cpu_s = time.process_time() - cpu_began  # on a shared machine, wall time says less
    path = out / "model.zip"
    save_checkpoint(model, path, encoding.to_dict())
    curve = pd.DataFrame(recorder.rows, columns=["step", "env", "weighted_jct_h"])
    curve.to_csv(out / "curve.csv", index=False)
    steps = int(model.num_timesteps)
    summary = {
        "config": {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(config).items()},
        "cluster": cluster.name,
        "timesteps": steps,
        "wall_s": wall_s,
        "cpu_s": cpu_s,
        "steps_per_s": steps / max(wall_s, 1e-9),
    }
    (out / "train.json").write_text(json.dumps(summary, indent=2) + "\n")
    return TrainResult(path, curve, steps, wall_s)


def save_checkpoint(model: Any, path: Path, encoding: dict[str, Any]) -> None:
    """``model`` at ``path`` and its encoding beside it (what the policy loads)."""
    model.save(path)
    encoding_path(path).write_text(json.dumps(encoding, indent=2) + "\n")


def _recorder(
    out: Path,
    encoding: dict[str, Any],
    every: int,
    progress: Callable[[int], None] | None,
) -> Any:
    """An sb3 callback: the curve's rows, periodic checkpoints, progress."""
    from stable_baselines3.common.callbacks import BaseCallback

    class Recorder(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.rows: list[tuple[int, int, float]] = []
            self.next_checkpoint = every

        def _on_step(self) -> bool:
            for index, info in enumerate(self.locals.get("infos", ())):
                episode = info.get("episode")
                if episode is not None:  # the return is minus the weighted JCT in hours
                    self.rows.append((self.num_timesteps, index, -float(episode["r"])))
            if every and self.num_timesteps >= self.next_checkpoint:
                path = out / "checkpoints" / f"step-{self.num_timesteps}.zip"
                save_checkpoint(self.model, path, encoding)
                self.next_checkpoint += every
            if progress is not None:
                progress(self.num_timesteps)
            return True

    return Recorder()


def plot_curve(
    curve: pd.DataFrame, path: Path, *, baselines: dict[str, float] | None = None
) -> Path:
    """The learning curve as a PNG: weighted JCT of training episodes by step
    (a rolling mean over the training traces), with ``baselines`` as lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    if len(curve):
        window = max(1, int(curve["env"].nunique()) * 4)
        ax.plot(curve["step"], curve["weighted_jct_h"], ".", alpha=0.25, label="episodes")
        smooth = curve["weighted_jct_h"].rolling(window, min_periods=1).mean()
        ax.plot(curve["step"], smooth, "-", label=f"rolling mean ({window})")
    for k, (name, value) in enumerate(sorted((baselines or {}).items())):
        ax.axhline(value, linestyle="--", color=f"C{k + 2}", label=name)
    ax.set_xlabel("environment steps")
    ax.set_ylabel("weighted JCT (h), training traces")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
