"""The synthesized app, running locally: every table, function, event source mapping, HTTP route and
schedule of `cdk.out`, against embedded (or given) DynamoDB and PostgreSQL. Nothing here lists the
app's parts a second time: all of it is read from the templates.

`LocalApp` is the sequence that provisions the emulated services, each in its room (moto's way: one
package per AWS service), on one explicit `Account` (local/account.py), and starts them; `stop()`
stops them in reverse."""

from __future__ import annotations

import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

from hybridsync.local.account import Account
from hybridsync.local.apigateway.service import HttpApis
from hybridsync.local.awslambda.event_sources import EventSources
from hybridsync.local.awslambda.responses import LambdaApi
from hybridsync.local.awslambda.service import LambdaFunctions
from hybridsync.local.cloudwatch.service import CloudWatch
from hybridsync.local.dynamodb import replication
from hybridsync.local.dynamodb.replication import RegionFault, Replicator
from hybridsync.local.dynamodb.sharding import ShardedStreams
from hybridsync.local.dynamodb.tables import Tables
from hybridsync.local.events.schedules import Schedules
from hybridsync.local.faults import FaultPlan, Faults
from hybridsync.local.iam.roles import Roles
from hybridsync.local.kinesis.streams import KinesisStreams
from hybridsync.local.names import name_things
from hybridsync.local.storage import Storage
from hybridsync.local.template import ACCOUNT, Assembly

# What the app answered for itself before its services had rooms (cli/, tests, the Lambda API read
# them): name -> the attribute of the app that holds it now (`_account`: the Account its services share).
DELEGATED = {
    **dict.fromkeys(("assembly", "state_dir", "prefix", "region", "dynamodb_endpoint", "services_endpoint",
                     "database_url", "faults", "iam", "retention_s", "metrics", "expiries", "checkpoints",
                     "tables", "table_names", "buckets", "queues", "logins", "functions", "lambda_api"),
                    "_account"),
    **dict.fromkeys(("sweepers",), "dynamodb"),
    **dict.fromkeys(("topologies", "streams_server", "sharded", "shard_count", "shard_lifetime_s",
                     "shard_records", "split"), "sharding"),
    **dict.fromkeys(("pumps",), "kinesis"),
    **dict.fromkeys(("dead_letter_queues", "failed_batches_bucket", "failed_batches_stored",
                     "failure_environment"), "storage"),
    **dict.fromkeys(("role", "network", "customer_keys", "keys_for", "may"), "roles"),
    **dict.fromkeys(("custom_resources", "python_functions", "function", "function_environment",
                     "operator_environment", "build_functions", "ensure_logins", "invoke_async",
                     "dead_letter_refusal"), "lambdas"),
    **dict.fromkeys(("pollers", "mapping_stats", "mapping_functions", "mapping_settings", "mapping_sources",
                     "switches"), "event_sources"),
    **dict.fromkeys(("alarms", "alarm_period_s", "topics", "localized", "freshness_values", "emitted",
                     "freshness"), "cloudwatch"),
    **dict.fromkeys(("http", "routes"), "http_apis"),
}  # fmt: skip


class LocalApp:
    """Build with `LocalApp(assembly, endpoints...)`, then `start()` / `stop()`."""

    def __init__(
        self,
        assembly: Assembly,
        *,
        dynamodb_endpoint: str,
        services_endpoint: str,
        database_url: str,
        state_dir: Path,
        prefix: str = "hybridsync",
        region: str | None = None,  # the assembly's (its stacks' Region, else us-east-1)
        faults: FaultPlan | None = None,
        iam: bool = True,
        shards: int = 1,
        shard_lifetime_s: float | None = None,
        shard_records: int | None = None,
        retention_s: float | None = None,
        alarm_period_s: int | None = None,
        regions: list[str] | None = None,
        replication_lag_s: float | None = None,
        region_faults: list[RegionFault] | None = None,
        replicator: Replicator | None = None,  # a running twin this app runs in as home: a failover's
    ):
        # Streams as production has them (dynamodb/sharding.py): N shards, rollover, trimming; else
        # DynamoDB Local's own single shard per table, read directly.
        if shards < 1 or (shard_lifetime_s is not None and shard_lifetime_s <= 0) or (shard_records or 1) < 1:
            raise ValueError("shards must be at least 1, and a shard's lifetime and records positive")
        if retention_s is not None and retention_s <= 0:
            raise ValueError("the retention must be positive")
        region = region or assembly.region
        self._account = account = Account(
            assembly, state_dir, prefix, region, dynamodb_endpoint, services_endpoint, database_url,
            faults=Faults(faults) if faults and faults.active else None, iam=iam, retention_s=retention_s,
        )  # fmt: skip
        self.account = ACCOUNT  # the account's id (the Lambda API's ARNs)
        self.client = account.client("dynamodb")
        self.dynamodb = Tables(account)
        self.kinesis = KinesisStreams(account, self.dynamodb)
        self._kinesis = self.kinesis.client
        self.storage = Storage(account)
        self.sharding = ShardedStreams(
            account, self.dynamodb, shards, shard_lifetime_s, shard_records, pollers=[]
        )
        self.cloudwatch = CloudWatch(account, self.storage, alarm_period_s)
        name_things(account, assembly)  # before anything is created: references resolve
        assert account.logins is not None
        self.roles = account.roles = Roles(account, account.logins)
        self.lambdas = LambdaFunctions(account, self.roles, self.storage)
        self.event_sources = EventSources(account, self.lambdas, self.kinesis, self.sharding, self.storage)
        self.http_apis = HttpApis(account)
        self.schedules = Schedules(account, self.lambdas)
        # the global tables' other Regions (dynamodb/replication.py): `regions`, home first
        self.replicator, self.owns_replicator = replicator, replicator is None  # closed with the app
        self.regions = regions
        self.replication_lag_s = replication.LAG_S if replication_lag_s is None else replication_lag_s
        self.region_faults = region_faults or []
        if regions:  # refused before anything starts
            replication.replicated_tables(account, regions, self.region_faults)
        elif region_faults:
            raise ValueError("Region faults need the Regions: --regions HOME,REGION")

    def aws(self, service: str) -> Any:
        """A client of one of the app's services (DynamoDB Local's, or moto server's)."""
        return self._account.client(service)

    def __getattr__(self, name: str) -> Any:
        holder = DELEGATED.get(name)
        if holder is None or name == holder:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(getattr(self, holder), name)

    # --- starting -----------------------------------------------------------------------------

    def start(self, *, http_port: int | None = 0, schedules: bool | Collection[str] = True,
              mappings: bool = True, paused: Collection[str] = (),
              lambda_port: int = 0) -> None:  # fmt: skip
        """Provision and run the app. `schedules`: every EventBridge schedule, none, or only those
        that invoke these functions (construct ids: `{"SqlSync"}` runs the outbox drain alone).
        `paused`: functions (construct ids) whose mappings are created disabled. `lambda_port`: its
        Lambda API's (a port of its own by default)."""
        account, assembly = self._account, self._account.assembly
        self.event_sources.paused = set(paused)
        self.dynamodb.provision(account, assembly)
        if self.regions:
            self.replicator = replication.twin(
                account, self.regions, lag_s=self.replication_lag_s, faults=self.region_faults
            )
        self.kinesis.provision(account, assembly)
        self.storage.provision(account, assembly)
        # before the functions: the operations function calls it
        account.lambda_api = LambdaApi(self, lambda_port)
        self.lambdas.provision(account, assembly)
        if mappings:  # refused before anything runs, as a deploy would fail
            self.event_sources.provision(account, assembly)
        self.lambdas.custom_resources = self.lambdas.run_custom_resources()
        self.cloudwatch.provision(account, assembly)
        if self.replicator is not None:
            self.cloudwatch.measure_replication(self.replicator)
        self.cloudwatch.start()
        self.event_sources.start()
        self.sharding.serve()
        self.dynamodb.start()
        self.kinesis.start()
        self.sharding.start()
        if http_port is not None:
            self.http_apis.start(http_port)
        if schedules:
            self.schedules.start(None if schedules is True else set(schedules))
        if self.replicator is not None:  # the Region faults' clock starts with the running app
            self.replicator.inject(self.region_faults)

    # --- status and stopping ------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        queues, stored = self.storage.stores()
        http = self.http_apis.http
        return {
            "at": time.time(),
            "http": f"http://127.0.0.1:{http.server_address[1]}" if http else None,
            "mappings": self.event_sources.status(),
            "functions": {name: vars(f.stats) for name, f in self.functions.items()},
            "alarms": self.alarms.status() if self.alarms else {},
            "freshness": self.freshness(),
            "failure_queues": queues,
            "failed_batches": stored,
            "outbox": self.cloudwatch.outbox(),
            "faults_injected": dict(self.faults.counts) if self.faults else {},
            # items whose keys fit no entity of the model, in the last hour: a writer outside it
            "unplaced": int(self.metrics.total("WriteBackUnplaced")),
            "streams": {
                arn.split(":table/")[1].split("/")[0]: topology.figures()
                for arn, topology in self.topologies.items()
            },
            "kinesis_destinations": {
                pump.table: {"stream": arn, "put": pump.put, "waiting": pump.waiting}
                for arn, pump in self.pumps.items()
            },
            "replication": self.replicator.figures() if self.replicator else None,
        }

    def stop(self) -> None:
        """Stop polling (each poller delivers what it has read first), then the rest."""
        account = self._account
        account.stopping.set()
        if self.replicator is not None and self.owns_replicator:
            self.replicator.close()
        self.http_apis.close()
        for thread in account.threads:
            thread.join(timeout=30)
        self.sharding.close()
        if account.lambda_api is not None:
            account.lambda_api.close()
        self.lambdas.close()
        for log_file in account.logs:
            log_file.close()
