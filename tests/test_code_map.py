"""docs/architecture.md's code map names every module under ``service/``, and every path it
names exists.

A row of the map's table names files and folders in its first cell. A module is in the map
when a row names its path, or when a row's first cell names a folder above it and the row
names the module's path below that folder in backticks (``models.py``, ``families/gbfs.py``).
A package's ``__init__.py`` is in the map when its folder is (named in a first cell, or in
backticks below one). ``service/__init__.py`` is the map's own package.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TICKED = re.compile(r"`([^`]+)`")


def rows(text: str) -> list[tuple[list[str], set[str]]]:
    """(paths of the first cell, every backticked name of the row) of the code map's rows."""
    section = text.split("## Code map", 1)[1].split("\n## ", 1)[0]
    out = []
    for line in section.splitlines():
        cells = line.split(" | ")
        if not line.startswith("| `") or len(cells) < 2:
            continue
        out.append((TICKED.findall(cells[0]), set(TICKED.findall(line))))
    return out


def unmapped(modules: list[str], table: list[tuple[list[str], set[str]]]) -> list[str]:
    """The modules (paths relative to the root) the table does not name."""
    missing = []
    for module in modules:
        if module == "service/__init__.py":
            continue
        target = module.removesuffix("__init__.py") if module.endswith("__init__.py") else module
        found = False
        for heads, named in table:
            if target in heads or target in named:
                found = True
            for head in heads:
                if head.endswith("/") and target.startswith(head) and target != head:
                    found = found or target[len(head):] in named
        if not found:
            missing.append(module)
    return missing


def service_modules() -> list[str]:
    return sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "service").rglob("*.py"))


def test_the_rule_finds_a_missing_module():
    table = rows("## Code map\n\n| a | b |\n| --- | --- |\n"
                 "| `service/x/` | `one.py`, `sub/` (`sub/two.py`) |\n| `service/y.py` | y |\n")
    modules = ["service/x/__init__.py", "service/x/one.py", "service/x/sub/__init__.py",
               "service/x/sub/two.py", "service/y.py", "service/x/three.py", "service/z.py"]
    assert unmapped(modules, table) == ["service/x/three.py", "service/z.py"]


def test_every_service_module_is_in_the_code_map():
    table = rows((ROOT / "docs" / "architecture.md").read_text(encoding="utf-8"))
    missing = unmapped(service_modules(), table)
    assert not missing, ("modules missing from docs/architecture.md's code map: "
                         + ", ".join(missing))


def test_every_path_the_code_map_names_exists():
    table = rows((ROOT / "docs" / "architecture.md").read_text(encoding="utf-8"))
    named = {head for heads, _ in table for head in heads}
    stale = sorted(path for path in named if not (ROOT / path).exists())
    assert not stale, f"the code map names paths that do not exist: {stale}"
