"""The batch families: one adapter each (``base.BatchFamily``), in one registry.

``FAMILIES`` maps a family's name to its adapter; the API's and the CLI's batch
algorithms (``service.schemas``, read from it when used, never at import) and every
family-specific step of the service (params, fit, fold state, artifact, sizes, pages) come
from it. A new family is its algorithm package, one
adapter file here, one line below, a case of the check suite and its docs
(docs/architecture.md, "Adding a batch family").
"""

from __future__ import annotations

from service.batch.families.anytime import AnytimeFamily
from service.batch.families.auto import AutoFamily
from service.batch.families.base import STATISTICS, WINDOW, BatchFamily, StatisticsFamily
from service.batch.families.gbfs import GBFSFamily
from service.batch.families.nvsd import NVSDFamily

FAMILIES: dict[str, BatchFamily] = {
    family.name: family for family in (AnytimeFamily(), GBFSFamily(), NVSDFamily(), AutoFamily())
}


def family_of(name: str) -> BatchFamily:
    """The adapter of the family ``name`` (KeyError naming the known ones). O(1)."""
    try:
        return FAMILIES[name]
    except KeyError:
        raise KeyError(f"unknown batch family {name!r}; known: {sorted(FAMILIES)}") from None


def family_of_algorithm(algorithm: str) -> str | None:
    """The family whose adapter serves ``algorithm``, or None (an online learner or
    unknown). O(families)."""
    return next((family.name for family in FAMILIES.values()
                 if algorithm in family.algorithms), None)


def algorithm_families() -> dict[str, str]:
    """Every batch algorithm of the API -> its family, in registry order. O(algorithms)."""
    return {algorithm: family.name for family in FAMILIES.values()
            for algorithm in family.algorithms}


__all__ = ["FAMILIES", "STATISTICS", "WINDOW", "BatchFamily", "StatisticsFamily",
           "algorithm_families", "family_of", "family_of_algorithm"]
