"""Folding a batch model's log and running its retrains (the batch worker)."""
