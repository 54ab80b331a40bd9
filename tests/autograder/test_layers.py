"""autograder/'s layers import only those below them (docs/security.md, "Who may import
whom"): a module of one layer never imports a layer above it, at the top of the file or
inside a function; the jail's package imports nothing of ScaleGrade but itself and the
authors' library (served to the probe process), which imports nothing else."""

from __future__ import annotations

import ast
from pathlib import Path

AUTOGRADER = Path(__file__).resolve().parents[2] / "autograder"
LAYERS = ("checklib", "sandbox", "grading", "analysis", "semester", "integrations")


def _imports(path: Path) -> set[str]:
    """Every absolute module a file imports, anywhere in it."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
    return found


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "autograder" and parts[1] in LAYERS else None


def test_every_module_belongs_to_a_layer():
    loose = {p.name for p in AUTOGRADER.glob("*.py")} - {"__init__.py", "checktools.py"}
    assert not loose, f"modules outside the layers: {sorted(loose)}"
    assert {p.name for p in AUTOGRADER.iterdir() if (p / "__init__.py").is_file()} == set(LAYERS)


def test_imports_point_down():
    upward = []
    for layer in LAYERS:
        rank = LAYERS.index(layer)
        for path in sorted((AUTOGRADER / layer).rglob("*.py")):
            for module in _imports(path):
                other = _layer(module)
                if other is not None and LAYERS.index(other) > rank:
                    upward.append(f"{path.relative_to(AUTOGRADER)} imports {module}")
    assert not upward, "\n".join(upward)


def test_the_jail_and_the_library_import_nothing_else_of_scalegrade():
    ours = ("autograder", "generator", "contract", "costmodel", "scalegrade")
    for folder in ("sandbox/inside", "checklib"):
        for path in sorted((AUTOGRADER / folder).rglob("*.py")):
            bad = {
                m for m in _imports(path)
                if m.split(".")[0] in ours and not m.startswith("autograder.checklib")
            }  # fmt: skip
            assert not bad, f"{path.relative_to(AUTOGRADER)} imports {sorted(bad)}"
