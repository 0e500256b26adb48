"""Evaluation metrics shared by the algorithm families."""
