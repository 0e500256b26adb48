"""Statistics computed outside the log (from files, on a cluster) and published as a fold state."""
