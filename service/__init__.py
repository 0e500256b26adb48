"""featurebudget service (FastAPI + Redis streams); see DESIGN.md section 3."""
