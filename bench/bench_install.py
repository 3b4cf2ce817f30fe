"""How large each of tecb's extras is: the distributions it adds to the core install (the package's
own requirements, torch included) and the MiB they take on disk, read from the installed
distributions' RECORD files (printed, not a test). Run it with the interpreter of a `make test`
environment, which holds every extra:

    .venv/bin/python bench/bench_install.py

The install times and the whole environment's size (`du -sh`) are measured by hand, with the
commands docs/development.md gives.
"""

from __future__ import annotations

import sys
import tomllib
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from leanenv import closure  # noqa: E402


def size_mib(names: set[str]) -> float:
    total = 0
    for dist in metadata.distributions():
        if dist.metadata["Name"] and _canonical(dist.metadata["Name"]) in names:
            for file in dist.files or ():
                path = Path(dist.locate_file(file))
                if path.is_file():
                    total += path.stat().st_size
    return total / 2**20


def _canonical(name: str) -> str:
    from packaging.utils import canonicalize_name

    return canonicalize_name(name)


def main() -> int:
    extras = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    core = closure(set())
    print(f"core (the package's own requirements): {len(core)} distributions, {size_mib(core):,.0f} MiB")
    for extra in sorted(extras):
        added = closure({extra}) - core
        missing = {n for n in added if _installed(n) is None}
        note = f" ({len(missing)} not installed here: {', '.join(sorted(missing))})" if missing else ""
        print(f"[{extra}]: +{len(added)} distributions, +{size_mib(added):,.0f} MiB{note}")
    return 0


def _installed(name: str):
    try:
        return metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return None


if __name__ == "__main__":
    sys.exit(main())
