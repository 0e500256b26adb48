"""featurebudget service (FastAPI + Redis streams); docs/architecture.md describes it."""
