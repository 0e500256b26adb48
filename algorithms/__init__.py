"""featurebudget numerics: online learners, anytime sequencing, GBFS, NVSD (no I/O)."""
