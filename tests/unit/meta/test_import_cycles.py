"""No import cycle in harnessrl: neither between modules nor between its top-level parts (packages and
top-level modules), so each layer can be read, loaded and tested without the ones above it.

Read from the source: every import counts, those inside functions and under ``TYPE_CHECKING`` included,
because a lazy import hides a cycle from the interpreter, not from a reader. ``from pkg import mod`` imports
``pkg`` (its ``__init__``) as well as ``pkg.mod``: a module that imports its own package that way closes a cycle
with the ``__init__`` that imports it (issue 54). A part is what sits directly under ``harnessrl/`` (``gateway``,
``stack``, ``drivers``, ``types.py``...). The layers, bottom up: docs/architecture.md.

``KNOWN_*_BACK_EDGES`` would list an import allowed to close a cycle, with its reason; both are empty (the
layout move of issue 33 removed the last ones), and the test fails on an entry whose import is gone.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import networkx as nx

import harnessrl

ROOT = Path(harnessrl.__file__).parent

#: (importer, imported) modules whose import closes a module cycle, each with why and who removes it. Empty:
#: a new entry needs a reason a reviewer accepts; the other tests here fail on any cycle not listed.
KNOWN_MODULE_BACK_EDGES: dict[tuple[str, str], str] = {}

#: (importer, imported) parts whose import closes a cycle between parts. Empty, as above.
KNOWN_PART_BACK_EDGES: dict[tuple[str, str], str] = {}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in ROOT.rglob("*.py")}


def _resolve(name: str) -> str | None:
    """The harnessrl module an imported name lives in (``harnessrl.store.Store`` -> ``harnessrl.store``)."""
    modules = _modules()
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


@cache
def module_graph() -> nx.DiGraph:
    graph = nx.DiGraph()
    for name, path in _modules().items():
        graph.add_node(name)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from . import x, from ..a import b
                    anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                    base = f"{anchor}.{base}" if base else anchor
                # ``base`` runs first, its ``__init__`` included, even when the names are its submodules
                targets = [base, *(f"{base}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for target in targets:
                if target.split(".")[0] == "harnessrl" and (module := _resolve(target)) and module != name:
                    graph.add_edge(name, module)
    return graph


def part(module: str) -> str:
    """``harnessrl.gateway.app`` -> ``gateway``; ``harnessrl.types`` -> ``types``; ``harnessrl`` -> ``harnessrl``."""
    return module.split(".")[1] if "." in module else module


@cache
def part_graph() -> nx.DiGraph:
    graph = nx.DiGraph()
    for a, b in module_graph().edges:
        if part(a) != part(b) and "harnessrl" not in (part(a), part(b)):  # the package root re-exports nothing
            graph.add_edge(part(a), part(b))
            graph.edges[part(a), part(b)].setdefault("via", []).append(f"{a} -> {b}")
    return graph


def _cycles(graph: nx.DiGraph, allowed: dict[tuple[str, str], str]) -> list[str]:
    """Each strongly connected group left once the allowed edges are cut, with the imports inside it."""
    cut = graph.copy()
    cut.remove_edges_from([e for e in allowed if cut.has_edge(*e)])
    out = []
    for group in nx.strongly_connected_components(cut):
        if len(group) > 1:
            edges = [f"  {a} -> {b}" + (f"  ({', '.join(cut.edges[a, b]['via'][:3])})" if "via" in cut.edges[a, b]
                                         else "") for a, b in cut.edges if a in group and b in group]
            out.append(" / ".join(sorted(group)) + "\n" + "\n".join(sorted(edges)))
    return out


def test_no_import_cycle_between_modules() -> None:
    cycles = _cycles(module_graph(), KNOWN_MODULE_BACK_EDGES)
    assert not cycles, "import cycles between modules:\n" + "\n".join(cycles)


def test_no_import_cycle_between_parts() -> None:
    cycles = _cycles(part_graph(), KNOWN_PART_BACK_EDGES)
    assert not cycles, "import cycles between harnessrl's parts:\n" + "\n".join(cycles)


def test_every_known_back_edge_still_exists() -> None:
    """An entry whose import is gone is deleted, so the list only ever shrinks to empty."""
    gone = [e for e in KNOWN_MODULE_BACK_EDGES if not module_graph().has_edge(*e)]
    gone += [e for e in KNOWN_PART_BACK_EDGES if not part_graph().has_edge(*e)]
    assert not gone, f"no longer imported, delete from the known back edges: {gone}"


def test_the_controller_is_handed_its_batches() -> None:
    """rft and distillation reach the controller as a batch builder (sft/batches.py), not as an import."""
    assert not [m for m in module_graph().successors("harnessrl.controller") if part(m) == "sft"]


def test_only_the_cli_imports_the_commands() -> None:
    """The entrypoint layer is the top: nothing below it reaches up into a command."""
    importers = {a for a, b in module_graph().edges if part(b) == "entrypoints" and part(a) != "entrypoints"}
    assert importers == {"harnessrl.cli"}


def test_the_reader_sees_every_kind_of_import() -> None:
    """Module level, inside a function, under TYPE_CHECKING, relative: or every check above passes vacuously."""
    graph = module_graph()
    assert graph.has_edge("harnessrl.cli", "harnessrl.entrypoints.train")  # module level, a submodule by name
    assert graph.has_edge("harnessrl.entrypoints.train", "harnessrl.drivers.rl")  # inside a function
    assert graph.has_edge("harnessrl.controller", "harnessrl.store.judge_calls")  # under TYPE_CHECKING
    assert graph.has_edge("harnessrl.cli", "harnessrl.entrypoints")  # ``from pkg import mod`` runs pkg's __init__
    a_cycle = nx.DiGraph([("x", "y"), ("y", "x"), ("y", "z")])
    assert _cycles(a_cycle, {}) and not _cycles(a_cycle, {("y", "x"): "test"})
