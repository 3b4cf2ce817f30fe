"""What `make demo` installs, read from the Makefile and the installed package's metadata: the
extras the demo's install names, the distributions they bring (the closure of their requirements),
and which distribution each imported top-level module belongs to."""

from __future__ import annotations

import re
import subprocess
import tomllib
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[1]


def make_dry_run(target: str, venv: Path) -> list[str]:
    """The commands ``make TARGET`` would run for a new virtual environment at ``venv`` (make -n)."""
    done = subprocess.run(["make", "-n", "-B", target, f"VENV={venv}"], cwd=REPO, capture_output=True, text=True,
                          timeout=60, check=True)
    return done.stdout.splitlines()


def installed_extras(commands: list[str]) -> set[str]:
    """The extras of tecb that these commands pip-install (``-e '.[a,b]'``)."""
    extras: set[str] = set()
    for line in commands:
        if "pip install" in line:
            for group in re.findall(r"\.\[([\w,-]+)\]", line):
                extras.update(group.split(","))
    return extras


def closure(extras: set[str]) -> set[str]:
    """Canonical names of the distributions tecb's requirements (pyproject.toml, with these extras)
    bring, as pip resolves them: markers evaluated for this interpreter, each requirement's own
    extras followed through the installed metadata."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    direct = list(project["dependencies"])
    for extra in extras:
        direct += project["optional-dependencies"][extra]
    seen: set[tuple[str, frozenset]] = set()
    todo = [(req.name, frozenset(req.extras)) for req in map(Requirement, direct)]
    while todo:
        name, wanted = todo.pop()
        key = (canonicalize_name(name), wanted)
        if key in seen:
            continue
        seen.add(key)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue  # a requirement whose marker is false here, or an optional one not installed
        for text in requires:
            req = Requirement(text)
            environments = [{"extra": e} for e in wanted] or [{"extra": ""}]
            if req.marker is None or any(req.marker.evaluate(env) for env in environments):
                todo.append((req.name, frozenset(req.extras)))
    return {name for name, _ in seen} | {"tecb"}


def distributions_of(modules: set[str]) -> dict[str, set[str]]:
    """Top-level module -> canonical names of the installed distributions that provide it (modules of
    the standard library and of the source tree provide none)."""
    owners = metadata.packages_distributions()
    return {m: {canonicalize_name(d) for d in owners.get(m, ())} for m in modules}
