"""The shop's workloads: the demo (`./scripts/up --demo`), its seed (`up --seed`) and the chaos run
(`bench/chaos.py`). A package apart from `shop`, so they are never shipped to Lambda."""
