"""The gateway's structure: no import circle inside ``harnessrl/gateway``, and the API translation modules
know nothing of budgets, pausing or the store (each can be read alone)."""

from __future__ import annotations

import ast
from pathlib import Path

import harnessrl.gateway

ROOT = Path(harnessrl.gateway.__file__).parent
PKG = "harnessrl.gateway"


def _module(path: Path) -> str:
    parts = path.with_suffix("").relative_to(ROOT.parent).parts
    name = "harnessrl." + ".".join(parts)
    return name.removesuffix(".__init__")


def _modules() -> dict[str, Path]:
    return {_module(p): p for p in ROOT.rglob("*.py")}


def _imports() -> dict[str, set[str]]:
    """Module -> the gateway modules it imports (TYPE_CHECKING and function-level imports included)."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PKG):
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names if a.name.startswith(PKG)]
            deps |= {t for t in targets if t in modules and t != name}
        graph[name] = deps
    return graph


def test_no_import_circle_inside_the_gateway():
    graph = _imports()
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for dep in sorted(graph[node]):
            if state.get(dep) == 1:
                cycles.append(path[path.index(dep):] + [dep])
            elif dep not in state:
                visit(dep, [*path, dep])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)


def test_api_modules_know_nothing_of_budgets_pause_or_store():
    graph, modules = _imports(), _modules()
    forbidden = {f"{PKG}.{m}" for m in ("pause_gate", "recorder", "rollout_registry", "call", "app", "admin", "pool",
                                        "engine_hop", "config", "dialect")}
    apis = [name for name in graph if name.startswith(f"{PKG}.apis")]
    assert len(apis) >= 4
    for name in apis:
        assert not graph[name] & forbidden, f"{name} imports {graph[name] & forbidden}"
        assert "harnessrl.store" not in modules[name].read_text()


def test_the_gateway_knows_no_judge_and_no_production():
    """Features plug in (``plugins.py``); of the rewards the gateway knows only the names its reward route
    refuses (``rewards/posted.py``), never the judges."""
    bad = []
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            mods = [node.module] if isinstance(node, ast.ImportFrom) and node.module else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            bad += [f"{name} imports {m}" for m in mods
                    if m.startswith(("harnessrl.rewards.judge", "harnessrl.production", "harnessrl.sft"))]
    assert not bad, "\n".join(bad)
