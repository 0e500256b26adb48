"""The compatibility aliases have a removal version (docs/changelog.md), and the test fails
once the package version (pyproject.toml) reaches it: the alias and its row are removed in
that release.

Every mention of a name "kept for one release" (or "accepted for one release") in
``service/`` and ``docs/`` must be one the changelog's table names by its module.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHANGELOG = ROOT / "docs" / "changelog.md"
ROW = re.compile(r"^\| (?P<what>.+?) \| (?P<instead>.+?) \| (?P<where>.+?) \| "
                 r"(?P<removed>\d+\.\d+\.\d+) \|$", re.MULTILINE)


def version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def package_version() -> tuple[int, ...]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return version(re.match(r"\d+(\.\d+)*", project["version"]).group())


def deprecations(text: str) -> list[dict[str, str]]:
    return [m.groupdict() for m in ROW.finditer(text)]


def mentions() -> set[str]:
    """The files of service/ and docs/ that say a name is kept for one release."""
    found = set()
    for path in [*ROOT.glob("service/**/*.py"), *ROOT.glob("docs/*.md")]:
        if path != CHANGELOG and "for one release" in path.read_text(encoding="utf-8"):
            found.add(path.relative_to(ROOT).as_posix())
    return found


def test_the_table_is_read():
    rows = deprecations(CHANGELOG.read_text())
    assert len(rows) >= 2 and {"max_cost"} <= {row["instead"].strip("`") for row in rows}
    assert deprecations("| `a` | `b` | `m.py` | 1.2.3 |\n| not a row |") == [
        {"what": "`a`", "instead": "`b`", "where": "`m.py`", "removed": "1.2.3"}]


def test_no_alias_outlives_its_removal_version():
    current = package_version()
    late = [f"{row['what'][:60]}... (removed in {row['removed']})"
            for row in deprecations(CHANGELOG.read_text()) if current >= version(row["removed"])]
    assert not late, (f"the package is version {'.'.join(map(str, current))}: remove "
                      + "; ".join(late) + " and its row in docs/changelog.md")


def test_every_one_release_alias_has_a_row():
    where = " ".join(row["where"] for row in deprecations(CHANGELOG.read_text()))
    unlisted = sorted(path for path in mentions() if path not in where)
    assert not unlisted, f"kept 'for one release' without a row in docs/changelog.md: {unlisted}"
