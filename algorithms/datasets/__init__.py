"""Synthetic data generators of the papers (seeded, streamed in chunks)."""
