"""Gradient boosted feature selection (Xu et al., KDD 2014): trees with a feature penalty."""

from algorithms.gbfs.estimator import GBFS

__all__ = ["GBFS"]
