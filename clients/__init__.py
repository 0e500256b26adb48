"""Python clients for the featurebudget service."""
