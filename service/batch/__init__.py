"""Batch models (anytime, GBFS, NVSD): ingestion, the fold into statistics and windows,
retrain jobs, versioned artifacts, serving."""
