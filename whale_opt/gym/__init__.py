"""A Gymnasium environment over the simulator: learned schedulers beside the solver.

Importing this package registers :data:`ENV_ID` (``whale_opt/GpuCluster-v0``)
with Gymnasium, so ``gymnasium.make("whale_opt/GpuCluster-v0", n_jobs=32)``
builds a :class:`GpuClusterEnv` (keywords: the fields of :class:`GymConfig`).
``gymnasium.make("whale_opt.gym:whale_opt/GpuCluster-v0")`` imports it first.
Needs the optional ``gymnasium`` (``pip install 'whale-opt[rl]'``).

Training with sb3-contrib's MaskablePPO is :mod:`whale_opt.gym.train` (the
``whale-opt train`` command); the trained network is deployed by the
``learned`` policy, :mod:`whale_opt.policies.learned`, which shares the
environment's round building and observation.
"""

try:
    import gymnasium
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("whale_opt.gym needs gymnasium: pip install 'whale-opt[rl]'") from exc

from whale_opt.gym.config import GymConfig as GymConfig
from whale_opt.gym.env import ENV_ID as ENV_ID
from whale_opt.gym.env import GpuClusterEnv as GpuClusterEnv

if ENV_ID not in gymnasium.registry:
    gymnasium.register(id=ENV_ID, entry_point="whale_opt.gym.env:GpuClusterEnv")
