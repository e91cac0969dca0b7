"""Cold start of every function: its handler module's import + init against the bare libraries it
really needs, each in fresh interpreters, side by side in one run.

  handler   `import hybridsync.functions.<name>` (what the asset ships: the engine and the shop's
            model, which the function loads at import), then the per-container clients it uses
            built as the first invocation builds them (hybridsync.runtime.clients)
  baseline  the same libraries imported bare and the same clients built bare: Powertools' Logger
            and Metrics (and the HTTP resolver for the API), boto3 and a DynamoDB client, SQLAlchemy
            with the psycopg dialect and an engine (no connection is opened), Alembic. A function
            that talks to PostgreSQL also needs boto3: in AWS its credentials come from Secrets
            Manager (here DATABASE_URL stands in, so the handler side may skip that import).

The ratio is what hybridsync adds on top of the libraries (1.0 = nothing). Interpreter start-up
is not counted; runs alternate handler and baseline, and each figure is the median.

  local     the same write_back cold start in the local app's containers (local/awslambda/): forked
            from the zygote, which imported the libraries once, against a fresh interpreter: the
            container's CPU seconds to its first answer, and the wall time of that first invocation
            (`container_fork_vs_fresh_cpu_ratio`). A local figure: Lambda imports the libraries in
            every cold start, so it does not travel; the handler ratios above do.

Usage: python bench/cold_start.py [--quick | --smoke] [--runs N]   (--smoke: one run, no warm-up: seconds,
the same code path and JSON keys)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# What each function really needs at cold start (its clients and the libraries behind them).
NEEDS = {
    "write_back": ("powertools", "sql"),
    "aggregate": ("powertools", "dynamodb"),
    "api": ("powertools", "http", "sql", "dynamodb"),
    "sql_sync": ("powertools", "sql", "dynamodb"),
    "migrate": ("powertools", "sql", "alembic"),
    "sweep": ("powertools", "dynamodb", "s3"),
    "rotate": ("powertools", "dynamodb", "s3"),
    "operations": ("powertools", "sql", "dynamodb"),
    "users": ("powertools", "sql"),
}
BARE = {
    "powertools": "from aws_lambda_powertools import Logger, Metrics, Tracer; Logger(); Metrics(); Tracer()",
    "http": "from aws_lambda_powertools.event_handler import APIGatewayHttpResolver as R; R()",
    "sql": "import boto3, sqlalchemy; sqlalchemy.create_engine('postgresql+psycopg://u:p@127.0.0.1:1/d')",
    "dynamodb": "import boto3; boto3.client('dynamodb', endpoint_url='http://127.0.0.1:1')",
    "alembic": "import alembic.command, alembic.config",
    "s3": "import boto3; boto3.client('s3', endpoint_url='http://127.0.0.1:1')",
}
INIT = {  # after `import handler`: the clients the first invocation builds
    "sql": "from hybridsync.runtime import clients; clients.engine()",
    "dynamodb": "from hybridsync.runtime import clients; clients.dynamodb()",
    "s3": "from hybridsync.runtime import clients; clients.s3()",
}
ENV = {
    "AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "local",
    "AWS_SECRET_ACCESS_KEY": "local", "DYNAMODB_ENDPOINT": "http://127.0.0.1:1",
    "DATABASE_URL": "postgresql://u:p@127.0.0.1:1/d", "TABLE_MAIN": "main", "TABLE_CHUNKS": "chunks",
    "POWERTOOLS_SERVICE_NAME": "cold-start", "POWERTOOLS_METRICS_NAMESPACE": "hybridsync",
    "HYBRIDSYNC_MODEL": "shop.model:MODEL", "HYBRIDSYNC_ROUTES": "shop.routes", "BUCKET_BODIES": "bodies",
    "LAMBDA_TASK_ROOT": "/var/task",  # as in Lambda: tracing on (the X-Ray SDK imported, its patches made)
}  # fmt: skip
SHOP = ROOT / "examples" / "shop"
FUNCTIONS = ROOT / "hybridsync" / "functions"


def timed(code: str, cwd: Path) -> float:
    """Milliseconds `code` takes in a fresh interpreter (start-up excluded)."""
    probe = f"import time; t = time.perf_counter()\n{code}\nprint((time.perf_counter() - t) * 1000)"
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": f"{ROOT}{os.pathsep}{SHOP}", **ENV}
    out = subprocess.run([sys.executable, "-c", probe], cwd=cwd, env=env, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"probe failed in {cwd}:\n{out.stderr}")
    return float(out.stdout.strip().splitlines()[-1])


def measure(name: str, runs: int, warm: bool = True) -> tuple[float, float]:
    needs = NEEDS[name]
    handler = "\n".join([f"import hybridsync.functions.{name}", *(INIT[n] for n in needs if n in INIT)])
    if name in ("aggregate", "sweep", "write_back", "sql_sync", "rotate"):
        handler += (
            "\nfrom hybridsync.runtime import clients; clients.model()"  # what the first invocation loads
        )
    bare = "\n".join(BARE[n] for n in needs)
    folder = Path("/")  # nothing of the repository on the path but what PYTHONPATH names
    if warm:
        timed(handler, folder), timed(bare, folder)  # warm the bytecode caches: not a cold start's cost
    ours, theirs = [], []
    for _ in range(runs):
        ours.append(timed(handler, folder))
        theirs.append(timed(bare, folder))
    return statistics.median(ours), statistics.median(theirs)


PROBE = """
import time
{handler}


def handler(event, context):
    return time.process_time()  # the container's CPU seconds so far: its whole cold start
"""


def containers(runs: int) -> dict[str, float]:
    """write_back's cold start in a local container, forked against fresh, alternating."""
    from hybridsync.local.awslambda.functions import ZYGOTE, LocalFunction
    from hybridsync.local.awslambda.zygote import base_environment

    needs = [INIT[n] for n in NEEDS["write_back"] if n in INIT]
    code = "\n".join(["import hybridsync.functions.write_back", *needs])
    base = base_environment()
    cpu: dict[bool, list[float]] = {True: [], False: []}
    wall: dict[bool, list[float]] = {True: [], False: []}
    with tempfile.TemporaryDirectory() as scratch:
        asset = Path(scratch)  # the asset: the engine and the shop's model, as the synthesized one ships
        (asset / "probe.py").write_text(PROBE.format(handler=code))
        (asset / "hybridsync").symlink_to(ROOT / "hybridsync")
        (asset / "shop").symlink_to(SHOP / "shop")
        ZYGOTE.takes(base, asset)  # the zygote started: a cost of the app's start, not of a cold start
        for _ in range(runs):
            for forked in (True, False):
                fn = LocalFunction(name="WriteBack", asset=asset, handler="probe.handler", timeout_s=30,
                                   environment={**base, **ENV}, memory_mb=1024, forked=forked)  # fmt: skip
                started = time.perf_counter()
                cpu[forked].append(fn.invoke({}))
                wall[forked].append(time.perf_counter() - started)
                fn.close()
    figures = {f"container_{k}_{way}": round(statistics.median(values[forked]), 3)
               for k, values in (("cpu_s", cpu), ("wall_s", wall))
               for way, forked in (("forked", True), ("fresh", False))}  # fmt: skip
    figures["container_fork_vs_fresh_cpu_ratio"] = round(
        figures["container_cpu_s_forked"] / figures["container_cpu_s_fresh"], 3
    )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="example: python bench/cold_start.py --quick",
    )
    parser.add_argument("--quick", action="store_true", help="5 runs per function (default 11)")
    parser.add_argument("--smoke", action="store_true", help="one run per function, no warm-up: seconds")
    parser.add_argument("--runs", type=int, help="runs per function")
    parser.add_argument("--no-tracing", action="store_true", help="as deployed with -c tracing=false")
    args = parser.parse_args()
    runs = args.runs or (1 if args.smoke else 5 if args.quick else 11)
    if args.no_tracing:
        ENV["POWERTOOLS_TRACE_DISABLED"] = "true"
    functions = sorted(p.stem for p in FUNCTIONS.glob("*.py") if p.stem != "__init__")
    missing = set(functions) ^ set(NEEDS)
    if missing:
        raise SystemExit(f"NEEDS must name every function, and only those: {sorted(missing)}")
    print(f"cold start, median of {runs} fresh interpreters each (module import + client init)")
    print(f"{'function':<11} {'handler ms':>10} {'bare libs ms':>12} {'ratio':>6}   needs")
    result: dict[str, float] = {}
    for name in functions:
        ours, theirs = measure(name, runs, warm=not args.smoke)
        ratio = ours / theirs
        result[f"{name}_ms"], result[f"{name}_baseline_ms"] = round(ours, 1), round(theirs, 1)
        result[f"{name}_ratio"] = round(ratio, 3)
        needs = " + ".join(NEEDS[name])
        print(f"{name:<11} {ours:>10.0f} {theirs:>12.0f} {ratio:>6.2f}   {needs}", flush=True)
    result["max_ratio"] = max(v for k, v in result.items() if k.endswith("_ratio"))
    local = containers(runs)
    print(f"\nlocal containers, write_back, median of {runs}: forked from the zygote "
          f"{local['container_cpu_s_forked']:.2f} CPU-s ({local['container_wall_s_forked']:.2f} s), fresh "
          f"{local['container_cpu_s_fresh']:.2f} CPU-s ({local['container_wall_s_fresh']:.2f} s): "
          f"{local['container_fork_vs_fresh_cpu_ratio']:.2f}x")  # fmt: skip
    print(json.dumps(result | local))


if __name__ == "__main__":
    main()
