"""Workloads: models the bridge is measured and checked on (the benchmark suite builds on these)."""
