"""The import contract: the layers of DESIGN.md, and no cycles.

Every import counts, at module top or inside a function (a lazy import hides a
cycle; it does not remove it). An upper layer may import a lower one and a
module of its own layer, never one above; modules import each other in no
cycle. ``bench/`` and ``tests/`` sit above everything.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

PACKAGE = Path(__file__).resolve().parents[1] / "whale_opt"

# Top to bottom. A name is a module or a subpackage of whale_opt.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("cli",),
    ("service", "slurm", "gym", "pack", "sim", "explain", "convert"),
    ("scheduler",),
    ("solve",),
    ("decompose", "budget", "registry", "executors"),
    ("cpsat", "policies"),
    ("bounds",),
    ("placement",),
    ("check", "testing"),
    ("io", "decision", "rules", "preferences", "generate"),
    ("topology",),
    ("problem_data", "options"),
    ("memo", "patience"),
)
ROOT = ("__init__",)  # the package's public API may re-export from any layer


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every whale_opt module ``path`` imports, at any depth of its code."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    return imports_in(path.read_text(), package)


def imports_in(code: str, package: str) -> set[str]:
    """The whale_opt modules ``code`` (a module of ``package``) imports, anywhere in it."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("whale_opt"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            if not target.startswith("whale_opt"):
                continue
            found.add(target)
            # ``from whale_opt.x import y``: y may itself be a module.
            for alias in node.names:
                candidate = f"{target}.{alias.name}"
                if _exists(candidate):
                    found.add(candidate)
    return found


def _exists(module: str) -> bool:
    rel = Path(*module.split("."))
    base = PACKAGE.parent / rel
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def import_graph() -> nx.DiGraph:
    """Modules of whale_opt and who imports whom."""
    graph = nx.DiGraph()
    for path in sorted(PACKAGE.rglob("*.py")):
        source = _module_name(path)
        graph.add_node(source)
        for target in _imports(path):
            if target != source:
                graph.add_edge(source, target)
    return graph


def layer_of(module: str) -> int | None:
    """The layer index of ``module`` (0 is the top), None for the package root."""
    parts = module.split(".")
    if len(parts) == 1:
        return None
    for index, names in enumerate(LAYERS):
        if parts[1] in names:
            return index
    raise AssertionError(f"{module} is in no layer of the contract: add it to LAYERS")


def test_every_module_has_a_layer() -> None:
    for module in import_graph():
        layer_of(module)


def test_no_module_imports_a_layer_above_its_own() -> None:
    upward = []
    for source, target in import_graph().edges:
        low, high = layer_of(source), layer_of(target)
        if low is None or high is None:
            continue
        if high < low:
            upward.append(f"{source} -> {target}")
    assert upward == []


def test_no_import_cycles_between_modules() -> None:
    graph = import_graph()
    # A package's __init__ re-exporting its own modules is not a cycle of logic.
    for node in list(graph):
        for target in list(graph.successors(node)):
            if target.startswith(node + ".") or node.startswith(target + "."):
                graph.remove_edge(node, target)
    cycles = [c for c in nx.simple_cycles(graph) if len(c) > 1]
    assert cycles == []


def test_the_contract_sees_imports_inside_functions_and_relative_ones() -> None:
    code = (
        "import os\n"
        "def f():\n"
        "    from whale_opt.cli import main\n"
        "    from . import state\n"
        "    from ..solve import solve\n"
        "    return main, state, solve\n"
    )
    found = imports_in(code, "whale_opt.placement")
    assert {"whale_opt.cli", "whale_opt.placement.state", "whale_opt.solve"} <= found
    assert "os" not in found


def test_an_upward_import_is_caught() -> None:
    graph = import_graph()
    graph.add_edge("whale_opt.placement.state", "whale_opt.solve")
    assert any(
        (layer_of(b) or 0) < (layer_of(a) or 0) for a, b in graph.edges if layer_of(a) is not None
    )
