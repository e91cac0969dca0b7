"""The shop: hybridsync's example app (its model, routes, write and read paths, workloads)."""
