"""The import graph of our packages, read from their source with ``ast`` (every ``import`` and
``from ... import``, at module level or inside a function), and the room of a ``tecb_eval`` module
(its first subpackage): what the tests of the house's shape and of the training rooms read."""

from __future__ import annotations

import ast
from pathlib import Path


def modules(root: Path, package: str) -> dict[str, Path]:
    found = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imported_from(name: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The module a ``from ... import`` in module ``name`` imports from, relative levels resolved."""
    if not node.level:
        return node.module or ""
    anchor = name.split(".") if is_package else name.split(".")[:-1]
    anchor = anchor[: len(anchor) - (node.level - 1)]
    return ".".join(anchor + ([node.module] if node.module else []))


def import_graph(root: Path, packages: tuple[str, ...]) -> dict[str, set[str]]:
    """module -> the modules of ``packages`` it imports (a ``from X import name`` counts as X.name
    where that is a module, else as X)."""
    known: dict[str, Path] = {}
    for package in packages:
        known.update(modules(root, package))
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        is_package = path.name == "__init__.py"
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = imported_from(name, is_package, node)
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
            for target in targets:
                while target and target not in known:  # `import a.b.c` of a module or its attribute
                    target = target.rpartition(".")[0]
                if target and target != name:
                    deps.add(target)
        graph[name] = deps
    return graph


def room(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "tecb_eval" and len(parts) > 1 else None
