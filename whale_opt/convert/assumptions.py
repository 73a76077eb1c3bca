"""Every assumption the converters make, in one place, overridable from TOML.

The public traces name GPU models (``T4``, ``V100M32``, ``G2``...) but not
what we need to place jobs on them: GPU memory, relative speed, NVLink
layout. They give QoS classes, not weights, and no racks. The defaults below
fill those gaps; ``docs/IMPORT.md`` is the same table in words, with reasons.
A TOML file overrides any entry::

    rack_size = 16

    [gpu_models.G2]          # a source GPU model (key as the trace spells it)
    type = "G2-32G"          # our GPU type name in the cluster file
    memory_gb = 32
    speed = 0.5              # relative to A100-80G = 1.0 (whale_opt.generate.GPU_TYPES)
    nvlink = "nvswitch"      # layout of a node with `gpus` GPUs
    gpus = 8                 # other counts get "pcie"; 0: any count
    gavel = "v100"           # Gavel worker type whose measurements it uses (optional)

    [qos]
    LS = 4
    BE = 1
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from whale_opt.io import InputError
from whale_opt.problem_data import NVLINK_LAYOUTS, FieldError, GpuType

GAVEL_WORKERS = ("k80", "p100", "v100")


@dataclass(frozen=True)
class GpuModel:
    """What we assume of one source GPU model.

    ``nvlink`` is the layout of a node with exactly ``gpus`` GPUs (``gpus``
    0: any count); a node with another count is assumed ``pcie``. ``gavel``
    names the Gavel worker type whose throughputs stand for this model
    (empty: none measured, speeds are extrapolated from ``speed``).
    """

    type: str
    memory_gb: float
    speed: float
    nvlink: str = "pcie"
    gpus: int = 0
    gavel: str = ""

    def __post_init__(self) -> None:
        GpuType(self.type, self.memory_gb, self.speed)  # the same rules as a cluster file
        if self.nvlink not in NVLINK_LAYOUTS:
            raise FieldError("nvlink", self.nvlink, f"must be one of {', '.join(NVLINK_LAYOUTS)}")
        if not (isinstance(self.gpus, int) and self.gpus >= 0):
            raise FieldError("gpus", self.gpus, "must be an integer >= 0")
        if self.nvlink == "hybrid-cube-mesh" and self.gpus != 8:
            raise FieldError("gpus", self.gpus, "hybrid-cube-mesh needs gpus = 8")
        if self.gavel and self.gavel not in GAVEL_WORKERS:
            raise FieldError("gavel", self.gavel, f"must be one of {', '.join(GAVEL_WORKERS)}")

    @property
    def gpu_type(self) -> GpuType:
        """Our GPU type record for this model."""
        return GpuType(self.type, self.memory_gb, self.speed)

    def layout(self, count: int) -> str:
        """The NVLink layout of a node of this model with ``count`` GPUs."""
        return self.nvlink if self.gpus in (0, count) else "pcie"


def _models(**specs: tuple[Any, ...]) -> dict[str, GpuModel]:
    return {name: GpuModel(*spec) for name, spec in specs.items()}


# The one table of defaults (docs/IMPORT.md explains each row).
# name: (type, memory_gb, speed, nvlink, gpus, gavel)
DEFAULT_GPU_MODELS = _models(
    # Alibaba openb (v2023) and PAI (v2020) model names
    T4=("T4-16G", 16, 0.2, "pcie", 0, ""),
    P100=("P100-16G", 16, 0.27, "pcie", 0, "p100"),
    V100M16=("V100-16G", 16, 0.45, "hybrid-cube-mesh", 8, "v100"),
    V100M32=("V100-32G", 32, 0.45, "hybrid-cube-mesh", 8, "v100"),
    V100=("V100-16G", 16, 0.45, "hybrid-cube-mesh", 8, "v100"),
    A10=("A10-24G", 24, 0.35, "pcie", 0, ""),
    G2=("G2-32G", 32, 0.45, "pcie", 0, ""),
    G3=("G3-80G", 80, 1.0, "nvswitch", 8, ""),
    MISC=("MISC-16G", 16, 0.3, "pcie", 0, ""),
    # Philly: the machine list gives only the memory of one GPU
    **{
        "philly-12GB": ("K80-12G", 12, 0.07, "pcie", 0, "k80"),
        "philly-24GB": ("P40-24G", 24, 0.27, "pcie", 0, "p100"),
    },
)
DEFAULT_QOS_WEIGHTS = {"LS": 4.0, "Guaranteed": 2.0, "Burstable": 1.0, "BE": 1.0}
DEFAULT_RACK_SIZE = 16


@dataclass(frozen=True)
class Assumptions:
    """GPU models, QoS weights and rack size: what the converters assume."""

    gpu_models: Mapping[str, GpuModel] = field(
        default_factory=lambda: MappingProxyType(dict(DEFAULT_GPU_MODELS))
    )
    qos_weights: Mapping[str, float] = field(
        default_factory=lambda: MappingProxyType(dict(DEFAULT_QOS_WEIGHTS))
    )
    rack_size: int = DEFAULT_RACK_SIZE

    def __post_init__(self) -> None:
        object.__setattr__(self, "gpu_models", MappingProxyType(dict(self.gpu_models)))
        object.__setattr__(self, "qos_weights", MappingProxyType(dict(self.qos_weights)))
        for name, weight in self.qos_weights.items():
            if isinstance(weight, bool) or not isinstance(weight, int | float) or weight <= 0:
                raise FieldError(f"qos.{name}", weight, "must be a number > 0")
        if isinstance(self.rack_size, bool) or not (
            isinstance(self.rack_size, int) and self.rack_size >= 1
        ):
            raise FieldError("rack_size", self.rack_size, "must be an integer >= 1")

    def model(self, name: str) -> GpuModel:
        """The assumptions for source GPU model ``name`` (KeyError if none)."""
        return self.gpu_models[name]

    def gavel_workers(self) -> dict[str, str]:
        """Our GPU type name -> Gavel worker type, for models that have one."""
        return {m.type: m.gavel for m in self.gpu_models.values() if m.gavel}


DEFAULT_ASSUMPTIONS = Assumptions()
_MODEL_KEYS = {spec.name for spec in fields(GpuModel)}


def load_assumptions(path: str | Path, base: Assumptions = DEFAULT_ASSUMPTIONS) -> Assumptions:
    """``base`` with the entries of TOML file ``path`` overriding it.

    A ``[gpu_models.<name>]`` table changes the given keys of a known model
    or, with at least ``type``, ``memory_gb`` and ``speed``, adds a model.
    Any problem is an :class:`~whale_opt.io.InputError` naming the key.
    """
    source = str(path)
    try:
        raw = tomllib.loads(Path(path).read_text("utf-8"))
    except OSError as exc:
        raise InputError(source, "(file)", f"cannot read: {exc.strerror or exc}") from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(source, "(file)", f"malformed TOML: {exc}") from exc
    unknown = set(raw) - {"gpu_models", "qos", "rack_size"}
    if unknown:
        raise InputError(
            source, sorted(unknown)[0], "unknown key; use gpu_models, qos or rack_size"
        )
    models = dict(base.gpu_models)
    for name, spec in raw.get("gpu_models", {}).items():
        models[name] = _model(source, name, spec, models.get(name))
    try:
        return replace(
            base,
            gpu_models=models,
            qos_weights={**base.qos_weights, **raw.get("qos", {})},
            rack_size=raw.get("rack_size", base.rack_size),
        )
    except FieldError as exc:
        raise InputError(source, exc.path, f"{exc.message} (got {exc.value!r})") from exc


def _model(source: str, name: str, spec: Any, known: GpuModel | None) -> GpuModel:
    where = f"gpu_models.{name}"
    if not isinstance(spec, dict):
        raise InputError(source, where, f"must be a table (got {spec!r})")
    for key in spec:
        if key not in _MODEL_KEYS:
            raise InputError(
                source, f"{where}.{key}", f"unknown key; use {', '.join(sorted(_MODEL_KEYS))}"
            )
    try:
        if known is not None:
            return replace(known, **spec)
        return GpuModel(**spec)
    except TypeError as exc:
        raise InputError(source, where, "a new model needs type, memory_gb and speed") from exc
    except FieldError as exc:
        raise InputError(
            source, f"{where}.{exc.path}", f"{exc.message} (got {exc.value!r})"
        ) from exc
