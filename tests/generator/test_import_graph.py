"""generator/'s modules import one another only downwards: their import graph, every
import counted (at the top, in a function, under ``TYPE_CHECKING``), has no cycle."""

from __future__ import annotations

import ast
from pathlib import Path

import generator

PACKAGE = Path(generator.__file__).parent


def _imported(tree: ast.AST, modules: set[str]) -> set[str]:
    """The modules of the package that ``tree`` imports, anywhere in it."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = "generator" if node.level else (node.module or "")
            if node.level and node.module:
                base = f"generator.{node.module}"
            # `from generator import otter` names a module; `from generator.x import y`
            # imports x
            names = [f"{base}.{a.name}" for a in node.names] + [base]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "generator" and len(parts) > 1 and parts[1] in modules:
                found.add(parts[1])
    return found


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports (``__init__`` left out)."""
    files = {p.stem: p for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    return {
        name: _imported(ast.parse(path.read_text(encoding="utf-8")), set(files)) - {name}
        for name, path in files.items()
    }


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` (its modules in order, the first again at the end), if any."""
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> list[str] | None:
        if node in path:
            return path[path.index(node) :] + [node]
        if node in done:
            return None
        for nxt in sorted(graph.get(node, ())):
            if cycle := visit(nxt, [*path, node]):
                return cycle
        done.add(node)
        return None

    for start in sorted(graph):
        if cycle := visit(start, []):
            return cycle
    return None


def test_the_graph_sees_imports_at_the_top_and_in_functions():
    tree = ast.parse(
        "from generator.variant import Variant\n"
        "from generator import otter as public_checks\n"
        "def f():\n    from generator.leaks import leaked\n"
        "import generator.sheets\n"
    )
    modules = {"variant", "otter", "leaks", "sheets", "notebook"}
    assert _imported(tree, modules) == {"variant", "otter", "leaks", "sheets"}
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_generator_imports_point_only_down():
    graph = import_graph()
    assert {"variant", "otter"} <= graph["notebook"]  # the graph is the real one
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle in generator/: " + " -> ".join(cycle or [])
