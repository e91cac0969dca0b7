"""What the production posture costs a connection, side by side in one run on one embedded PostgreSQL:
a role's login with `verify-full` TLS through the local TLS front (as every local client connects,
and as functions reach RDS Proxy) against the same login on the server's Unix socket without TLS.

  connect     a new connection: TLS handshake, certificate and name verified, SCRAM login
  round trip  `SELECT 1` on an open connection
  rows        10,000 rows inserted in batches of 500 (bytes through the TLS front)
  iam token   `rds.generate_db_auth_token` (SigV4 signing, no network): what an IAM login adds to
              each new connection in AWS before the handshake

The TLS ratios measure the local front (a Python relay), not RDS Proxy: they do not travel. The IAM
token is CPU-bound signing: its milliseconds travel between machines of a kind.

Usage: python bench/posture.py [--quick | --smoke]   (--smoke: a few of each: seconds, the same keys)
"""

from __future__ import annotations

import argparse
import json
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import boto3  # noqa: E402
import psycopg  # noqa: E402
import sqlalchemy as sa  # noqa: E402

from hybridsync import local  # noqa: E402
from hybridsync.sql import roles  # noqa: E402


def timed(action: Callable[[], object], repeat: int) -> float:
    """Median seconds of `repeat` runs of `action`."""
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog="example: python bench/posture.py --quick")  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="fewer samples (default: 200 connects)")
    parser.add_argument("--smoke", action="store_true", help="a few of each: seconds")
    args = parser.parse_args()
    samples = {"smoke": (5, 50, 1000), "quick": (50, 2000, 10_000), "full": (200, 10_000, 10_000)}
    connects, trips, rows = samples["smoke" if args.smoke else "quick" if args.quick else "full"]
    with tempfile.TemporaryDirectory(prefix="posture-") as folder:
        url, stop = local.start_postgres(Path(folder) / "postgres")
        try:
            figures = measure(url, connects, trips, rows)
        finally:
            stop()
    f = figures
    print(f"connect     verify-full {f['tls_connect_ms']:.2f} ms, socket {f['socket_connect_ms']:.2f} ms"
          f"  ({f['connect_ratio']:.2f}x)")  # fmt: skip
    print(f"round trip  verify-full {f['tls_roundtrip_us']:.0f} us, socket {f['socket_roundtrip_us']:.0f} us"
          f"  ({f['roundtrip_ratio']:.2f}x)")  # fmt: skip
    print(f"rows        verify-full {f['tls_rows_per_s']:,.0f}/s, socket {f['socket_rows_per_s']:,.0f}/s"
          f"  ({f['rows_ratio']:.2f}x)")  # fmt: skip
    print(
        f"iam token   {f['iam_token_ms']:.3f} ms ({f['iam_token_vs_connect']:.2f} of a verify-full connect)"
    )
    print(json.dumps(figures))


def measure(admin_url: str, connects: int, trips: int, rows: int) -> dict[str, float]:
    password = secrets.token_urlsafe(24)
    admin = sa.create_engine(admin_url.replace("postgresql://", "postgresql+psycopg://"))
    with admin.begin() as conn:
        roles.create_users(conn, {role: password for role in roles.ROLES})
        conn.exec_driver_sql("CREATE TABLE IF NOT EXISTS posture (id int PRIMARY KEY, body text)")
        conn.exec_driver_sql(f"GRANT SELECT, INSERT, DELETE ON posture TO {roles.user('writer')}")
        socket = conn.exec_driver_sql("SHOW unix_socket_directories").scalar_one().split(",")[0]
        port = conn.exec_driver_sql("SHOW port").scalar_one()
    admin.dispose()
    tls_url = sa.make_url(admin_url)
    tls = {"host": tls_url.host, "port": tls_url.port, "dbname": tls_url.database, **tls_url.query}
    plain = {"host": socket, "port": port, "dbname": tls_url.database}
    login = {"user": roles.user("writer"), "password": password}
    figures: dict[str, float] = {}
    body = "x" * 200
    for name, where in (("tls", tls), ("socket", plain)):
        connect = lambda w=where: psycopg.connect(**w, **login).close()  # noqa: E731
        figures[f"{name}_connect_ms"] = timed(connect, connects) * 1e3
        with psycopg.connect(**where, **login, autocommit=True) as conn:
            figures[f"{name}_roundtrip_us"] = (
                timed(lambda c=conn: c.execute("SELECT 1").fetchone(), trips) * 1e6
            )
            conn.execute("DELETE FROM posture")
            start = time.perf_counter()
            with conn.cursor() as cursor:
                for first in range(0, rows, 500):
                    batch = [(i, body) for i in range(first, min(first + 500, rows))]
                    cursor.executemany("INSERT INTO posture (id, body) VALUES (%s, %s)", batch)
            figures[f"{name}_rows_per_s"] = rows / (time.perf_counter() - start)
    rds = boto3.client(
        "rds", region_name="eu-west-1", aws_access_key_id="local", aws_secret_access_key="local"
    )
    token = timed(lambda: rds.generate_db_auth_token("proxy.example", 5432, roles.user("writer")), connects)
    figures["iam_token_ms"] = token * 1e3
    figures["connect_ratio"] = figures["tls_connect_ms"] / figures["socket_connect_ms"]
    figures["roundtrip_ratio"] = figures["tls_roundtrip_us"] / figures["socket_roundtrip_us"]
    figures["rows_ratio"] = figures["tls_rows_per_s"] / figures["socket_rows_per_s"]
    figures["iam_token_vs_connect"] = figures["iam_token_ms"] / figures["tls_connect_ms"]
    return {k: round(v, 3) for k, v in figures.items()}


if __name__ == "__main__":
    main()
