"""Which part of harnessrl may import which: the rules that keep parts readable and cheap to load.

Read from the source (every import, function-level and TYPE_CHECKING ones included), so a lazy import
cannot hide an edge. Publishing is the seam between training and inference (``harnessrl.weights``); the
dashboard is composed onto the gateway by ``cli.py``/``stack.py``; the terminal, export and judge read
rollouts through ``harnessrl.inspection``, never through the dashboard's package.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

import harnessrl

ROOT = Path(harnessrl.__file__).parent

#: (importer, imported): no module under the first may import anything under the second.
FORBIDDEN = [
    ("engines", "training"),
    ("training", "engines"),
    ("gateway", "ui"),
    ("gateway", "training"),
    ("gateway", "controller"),
    ("export", "ui"),
    ("rewards", "ui"),
    ("inspection", "ui"),
    ("weights", "training"),
    ("weights", "engines"),
    ("store", "gateway"),
    ("gateway", "production"),
    ("gateway", "sft"),
    ("store", "production"),
    ("store", "rewards"),
]


def _part(module: str) -> str:
    """``harnessrl.gateway.app`` -> ``gateway``; ``harnessrl.types`` -> ``types``."""
    return module.split(".")[1] if module.count(".") else module


@cache
def _imports() -> dict[Path, set[str]]:
    out: dict[Path, set[str]] = {}
    for path in ROOT.rglob("*.py"):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("harnessrl."):
                names.add(node.module)
                names |= {f"{node.module}.{a.name}" for a in node.names}  # from harnessrl import training
            elif isinstance(node, ast.ImportFrom) and node.module == "harnessrl":
                names |= {f"harnessrl.{a.name}" for a in node.names}
            elif isinstance(node, ast.Import):
                names |= {a.name for a in node.names if a.name.startswith("harnessrl.")}
        out[path] = names
    return out


def _owner(path: Path) -> str:
    rel = path.relative_to(ROOT)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


@pytest.mark.parametrize(("importer", "imported"), FORBIDDEN, ids=[f"{a}-x-{b}" for a, b in FORBIDDEN])
def test_no_import_across_a_forbidden_edge(importer: str, imported: str) -> None:
    graph = _imports()
    files = [p for p in graph if _owner(p) == importer]
    assert files, f"no module under harnessrl/{importer}: the rule names a part that moved"
    bad = sorted(f"{p.relative_to(ROOT.parent)} imports {m}" for p in files for m in graph[p]
                 if _part(m) == imported)
    assert not bad, "\n".join(bad)


def test_the_reader_sees_the_edges_it_checks() -> None:
    """The scan itself: it must see a known edge, or every rule above passes vacuously."""
    graph = _imports()
    assert "harnessrl.weights.publish" in graph[ROOT / "engines" / "vllm_publish.py"]
    assert any(_part(m) == "inspection" for m in graph[ROOT / "entrypoints" / "show.py"])
