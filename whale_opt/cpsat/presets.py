"""CP-SAT presets: named parameter sets and how a round spends its time.

The presets are TOML files shipped inside the package
(``whale_opt/cpsat/presets/<name>.toml``) and read through
:mod:`importlib.resources`, so a plain (non-editable) install has them too.
Each has a ``[parameters]`` table (CP-SAT solver parameters, over
:data:`DEFAULT_PARAMETERS`) and a ``[round]`` table (the :class:`Preset`
knobs). A top-level ``base = "<name>"`` starts from that preset: its tables
are taken, then overridden key by key.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, fields
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

from whale_opt.problem_data import FieldError

DEFAULT_PARAMETERS: dict[str, Any] = {"num_workers": 1, "cp_model_probing_level": 0}
DEFAULT_PRESET = "default"
SUFFIX = ".toml"


@dataclass(frozen=True)
class Preset:
    """A named configuration: CP-SAT parameters and how the round spends its time.

    ``search_share``: fraction of the time after the greedy given to the
    order search (``small_search_share`` on a queue of at most
    ``exact_jobs``: there a list schedule is cheap, the order search gains
    most per second and the node search soon stalls), ``node_share`` of the
    time left after it to the node search
    (:mod:`whale_opt.placement.node_search`; 0: none; it ends sooner once it
    stalls) and the rest to CP-SAT LNS; ``hood_size``: jobs freed
    per neighbourhood at first (adapted as it goes); ``nodes_per_job``:
    candidate nodes per freed job; ``deterministic``: fixed move and round
    counts and CP-SAT deterministic time, so reruns are identical
    (``search_moves``, ``node_moves``, ``lns_rounds``, ``lns_deterministic_s``);
    ``round_limit_s``: wall seconds one neighbourhood's CP-SAT call may take
    at most. ``exact_jobs``: rounds of at most this many queued jobs are
    first solved as one exact model (:func:`whale_opt.cpsat.lns.exact_round`),
    given ``exact_share`` of the time left when the queue is larger than
    ``hood_size`` (all of it otherwise; ``exact_deterministic_s`` of CP-SAT
    deterministic time with a deterministic preset); 0 turns it off. A model
    that is not proven in that time leaves the rest to the other searches.
    ``patience_share``: the round ends once its search has gone this share of
    the time limit (at least half of ``round_limit_s``) without progress
    (:mod:`whale_opt.patience`); 0: never (a deterministic preset must keep
    it 0: the wall clock would decide); ``patience_gain``: a better decision is
    progress only once it is this share of the objective below the last that
    was (0: any better one).
    """

    name: str
    parameters: dict[str, Any]
    search_share: float = 0.3
    small_search_share: float = 0.8
    hood_size: int = 24
    nodes_per_job: int = 6
    deterministic: bool = False
    search_moves: int = 200
    node_share: float = 1.0
    node_moves: int = 3000
    lns_rounds: int = 20
    lns_deterministic_s: float = 0.2
    round_limit_s: float = 0.5
    exact_jobs: int = 64
    exact_share: float = 0.5
    exact_deterministic_s: float = 2.0
    patience_share: float = 0.0
    patience_gain: float = 0.0

    def __post_init__(self) -> None:
        if self.deterministic and self.patience_share:  # a packaged file is wrong: a bug
            raise ValueError(f"preset {self.name!r}: deterministic with a patience")


ROUND_KEYS = frozenset(f.name for f in fields(Preset)) - {"name", "parameters"}
"""The keys a preset's ``[round]`` table may set."""


def _folder() -> Traversable:
    """The packaged folder of preset files."""
    return resources.files("whale_opt.cpsat").joinpath("presets")


def preset_names() -> tuple[str, ...]:
    """The names of the shipped presets, sorted."""
    return tuple(
        sorted(
            entry.name.removesuffix(SUFFIX)
            for entry in _folder().iterdir()
            if entry.name.endswith(SUFFIX) and entry.is_file()
        )
    )


def load_preset(name: str | None) -> Preset:
    """The shipped preset ``name`` (None: ``default``).

    Raises
    ------
    FieldError
        ``name`` is not a shipped preset; the message lists the known ones.
    """
    name = name or DEFAULT_PRESET
    entry = _folder().joinpath(f"{name}{SUFFIX}")
    # A name is a file name, never a path: "../x" or "a/b" must not reach the folder.
    if "/" in name or "\\" in name or name.startswith(".") or not entry.is_file():
        known = ", ".join(preset_names())
        raise FieldError("preset", name, f"unknown CP-SAT preset; choose from {known}")
    parameters, knobs = _tables(name, entry, ())
    return Preset(name, {**DEFAULT_PARAMETERS, **parameters}, **knobs)


def _tables(
    name: str, entry: Traversable, seen: tuple[str, ...]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Preset ``name``'s ``[parameters]`` and ``[round]`` tables, its base's first."""
    # A packaged file that is wrong is a bug, not bad input: ValueError.
    if name in seen:
        raise ValueError(f"preset {name!r}: its bases loop ({' -> '.join((*seen, name))})")
    loaded = tomllib.loads(entry.read_text("utf-8"))
    unknown = set(loaded) - {"base", "parameters", "round"}
    if unknown:
        raise ValueError(f"preset {name!r}: unknown keys {sorted(unknown)}")
    knobs = loaded.get("round", {})
    unknown = set(knobs) - ROUND_KEYS
    if unknown:
        raise ValueError(f"preset {name!r}: unknown [round] keys {sorted(unknown)}")
    parameters: dict[str, Any] = {}
    base_knobs: dict[str, Any] = {}
    if "base" in loaded:
        base = loaded["base"]
        base_entry = _folder().joinpath(f"{base}{SUFFIX}")
        if not base_entry.is_file():
            raise ValueError(f"preset {name!r}: base {base!r} is not a shipped preset")
        parameters, base_knobs = _tables(base, base_entry, (*seen, name))
    return {**parameters, **loaded.get("parameters", {})}, {**base_knobs, **knobs}
