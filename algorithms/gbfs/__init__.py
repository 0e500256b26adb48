"""Gradient boosted feature selection (seed 003): histogram trees with a feature penalty."""

from algorithms.gbfs.estimator import GBFS

__all__ = ["GBFS"]
