"""Where Spark runs: the cluster capability every kind satisfies, the registry of kinds, and each kind."""
