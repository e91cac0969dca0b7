"""The app's event source mappings: every stream mapping of the templates, checked as
CreateEventSourceMapping checks it, then its pollers (awslambda/mappings.py) on a DynamoDB stream
(DynamoDB Local's shard, or the sharded streams of dynamodb/sharding.py) or a Kinesis stream
(kinesis/streams.py); and what `status` shows of each."""

from __future__ import annotations

import logging
from typing import Any

from hybridsync.local.account import Account
from hybridsync.local.awslambda import mappings
from hybridsync.local.awslambda.mappings import MappingStats, Settings, ShardPoller, ShardReader
from hybridsync.local.awslambda.responses import Switch
from hybridsync.local.awslambda.service import LambdaFunctions
from hybridsync.local.dynamodb.sharding import ShardedStreams
from hybridsync.local.kinesis import models as kds
from hybridsync.local.kinesis.streams import KinesisStreams
from hybridsync.local.storage import Storage
from hybridsync.local.template import Assembly, Resource, TemplateError
from hybridsync.streams import filters

log = logging.getLogger(__name__)
STREAM_READ = (
    "GetRecords",
    "GetShardIterator",
    "DescribeStream",
    "ListStreams",
)  # what a stream mapping needs


class EventSources:
    """The stream mappings, by name (`<function>:<id>`)."""

    def __init__(self, account: Account, lambdas: LambdaFunctions, kinesis: KinesisStreams,
                 sharded: ShardedStreams, storage: Storage) -> None:  # fmt: skip
        self.account, self.lambdas, self.kinesis, self.sharded = account, lambdas, kinesis, sharded
        self.storage = storage
        self.pollers: list[ShardPoller] = sharded.pollers
        self.mapping_stats: dict[str, MappingStats] = {}
        self.mapping_functions: dict[str, str] = {}
        self.mapping_settings: dict[str, Settings] = {}
        self.mapping_sources: dict[str, str] = {}  # mapping -> its stream ARN
        self.switches: dict[str, Switch] = {}  # mapping -> enabled or not (the local Lambda API)
        self.paused: set[str] = set()  # functions (construct ids) whose mappings are created disabled

    def provision(self, account: Account, assembly: Assembly) -> None:
        """Every stream mapping, checked as CreateEventSourceMapping checks it (a refusal fails the
        start as it would fail a deploy; recorded: api_errors): a filter Lambda refuses, a second
        mapping of one function on one stream, a stream that does not exist."""
        streams = account.client("dynamodbstreams")
        readers: dict[tuple[str, str], ShardReader] = {}
        mapped: dict[tuple[str, str], str] = {}  # (stream, function) -> the mapping
        for mapping in assembly.resources("AWS::Lambda::EventSourceMapping"):
            self._create(assembly, mapping, streams, readers, mapped)

    def start(self) -> None:
        for poller in self.pollers:  # every poller registered first: each shard's reader starts early enough
            self.account.spawn(poller.run, self.account.stopping, name=f"poller-{poller.settings.name}")

    def _create(self, assembly: Assembly, mapping: Resource, streams: Any,
                readers: dict[tuple[str, str], ShardReader],
                mapped: dict[tuple[str, str], str]) -> None:  # fmt: skip
        function = assembly.function_of(mapping.stack, mapping.properties["FunctionName"])
        stream_arn = assembly.resolve(mapping.stack, mapping.properties["EventSourceArn"])
        kinesis = ":kinesis:" in str(stream_arn)
        if not stream_arn or (":table/" not in stream_arn and not kinesis):
            log.warning("%s: only DynamoDB stream and Kinesis mappings run locally", mapping.path)
            return
        name = f"{function.construct}:{mapping.logical_id[-8:]}"
        assert self.account.lambda_api is not None
        mapping_id = self.account.lambda_api.uuid_of(name)
        assembly.set(mapping, Ref=mapping_id)  # the alarms' EventSourceMappingUUID
        try:
            settings = Settings.from_properties(name, mapping.properties)
        except filters.InvalidPattern as refused:
            raise TemplateError(f"{mapping.path}: InvalidParameterValueException: {refused}") from None
        if (stream_arn, function.construct) in mapped:
            raise TemplateError(
                f'{mapping.path}: ResourceConflictException: The event source arn (" {stream_arn} ") and '
                f'function (" {function.construct} ") provided mapping already exists '
                f"({mapped[(stream_arn, function.construct)]})"
            )
        mapped[(stream_arn, function.construct)] = mapping.path
        shards = self._shards(mapping, stream_arn, kinesis, streams)
        destination = assembly.resolve(
            mapping.stack, mapping.properties.get("DestinationConfig", {}).get("OnFailure", {})
        ).get("Destination")
        self._check_role(mapping, function, stream_arn, kinesis, destination, mapping_id)
        plan = self._plan(assembly, mapping, function, name, settings, stream_arn, destination, mapping_id)
        if kinesis:
            role_name = self.lambdas.roles.role(function)[0]
            self.pollers.extend(
                self.kinesis.plan(plan, stream_arn, [s["ShardId"] for s in shards], role_name)
            )
            return
        if self.sharded.sharded:
            self.sharded.plan(mapping.path, plan, streams, self.lambdas.functions[function.construct])
            return
        for shard in shards:
            reader = readers.get((stream_arn, shard["ShardId"])) or readers.setdefault(
                (stream_arn, shard["ShardId"]),
                ShardReader(streams, stream_arn, shard["ShardId"], self.account.expiries.mark),
            )  # one reader per shard, shared by its mappings
            self.pollers.append(ShardPoller(streams=reader, shard=shard["ShardId"], **plan))

    def _shards(
        self, mapping: Resource, stream_arn: str, kinesis: bool, streams: Any
    ) -> list[dict[str, Any]]:
        """The stream's shards, as the mapping's creation finds them (none: the stream does not exist)."""
        client = self.kinesis.client
        try:
            if kinesis:
                listed = client.list_shards(StreamName=kds.stream_name(stream_arn))["Shards"]
                if "/consumer/" in stream_arn:
                    client.describe_stream_consumer(ConsumerARN=stream_arn)
                return [{"ShardId": shard["ShardId"]} for shard in listed]
            return list(streams.describe_stream(StreamArn=stream_arn)["StreamDescription"]["Shards"])
        except (
            streams.exceptions.ResourceNotFoundException,
            client.exceptions.ResourceNotFoundException,
        ):
            raise TemplateError(
                f"{mapping.path}: InvalidParameterValueException: Stream not found: {stream_arn}"
            ) from None

    def _check_role(self, mapping: Resource, function: Resource, stream_arn: str, kinesis: bool,
                    destination: str | None, mapping_id: str) -> None:  # fmt: skip
        """The mapping reads the stream and sends failure records with the function's role."""
        may = self.lambdas.roles.may
        needed = [(f"dynamodb:{action}", stream_arn) for action in STREAM_READ]
        listed = "GetRecords, GetShardIterator, DescribeStream, and ListStreams"
        if kinesis:  # Lambda: services-kinesis-create.html; SubscribeToShard on a fan-out consumer
            needed = [(f"kinesis:{action}", kds.stream_of(stream_arn)) for action in kds.KINESIS_READ]
            needed += [(f"kinesis:{a}", stream_arn) for a in kds.EFO_READ if "/consumer/" in stream_arn]
            listed = ", ".join(action.partition(":")[2] for action, _ in needed[:-1]) + (
                f", and {needed[-1][0].partition(':')[2]}")  # fmt: skip
        for action, resource in needed:
            if not may(function, action, resource):
                raise TemplateError(
                    f"{mapping.path}: InvalidParameterValueException: Cannot access stream "
                    f"{stream_arn}. Please ensure the role can perform the {listed} "
                    "Actions on your stream in IAM."
                )
        send = {"sqs": "sqs:SendMessage", "sns": "sns:Publish", "s3": "s3:PutObject"}
        if destination and not may(
            function,
            send[destination.split(":")[2]],
            # an S3 destination: the objects Lambda writes, `aws/lambda/<mapping>/...`
            destination + (f"/aws/lambda/{mapping_id}/" if ":s3:" in destination else ""),
        ):
            raise TemplateError(
                f"{mapping.path}: InvalidParameterValueException: The function execution role "
                f"does not have permissions to call {send[destination.split(':')[2]]} on {destination}"
            )

    def _plan(self, assembly: Assembly, mapping: Resource, function: Resource, name: str, settings: Settings,
              stream_arn: str, destination: str | None, mapping_id: str) -> dict[str, Any]:  # fmt: skip
        """What each of the mapping's pollers is made of."""
        stats = self.mapping_stats.setdefault(name, MappingStats())
        self.mapping_functions[name], self.mapping_settings[name] = function.construct, settings
        self.mapping_sources[name] = stream_arn
        invoke = self.lambdas.functions[function.construct].invoke
        if self.account.faults:
            invoke = self.account.faults.wrap(function.construct, invoke)
        declared = mapping.properties.get("Enabled", True) is not False
        enabled = declared and function.construct not in self.paused
        return {
            "settings": settings,
            "invoke": invoke,
            "stream_arn": stream_arn,
            "checkpoints": self.account.checkpoints,
            "on_failure": self._destination(destination, mapping_id),
            "function_arn": assembly.resolve(function.stack, {"Fn::GetAtt": [function.logical_id, "Arn"]}),
            "stats": stats,
            # Enabled: false (pipeline_enabled=false) creates it disabled, its position kept
            "switch": self.switches.setdefault(name, Switch(enabled=enabled)),
            "metric": self._mapping_metric(function.construct, mapping_id),
        }

    def _mapping_metric(self, function: str, mapping_id: str) -> Any:
        """What Lambda counts of a mapping: per function (IteratorAge, DestinationDeliveryFailures)
        or per mapping (its event counts, MetricsConfig EventCount)."""
        per_function = {"IteratorAge", "DestinationDeliveryFailures"}

        def put(name: str, value: float) -> None:
            dimensions = (
                {"FunctionName": function} if name in per_function else {"EventSourceMappingUUID": mapping_id}
            )
            self.account.metrics.put("AWS/Lambda", name, dimensions, value)

        return put

    def _destination(self, arn: str | None, mapping_id: str) -> Any:
        if not arn:
            return None
        if ":s3:" in arn:
            self.storage.failed_batches_bucket = arn.split(":")[-1]
        try:
            return mappings.destination(arn, self.account.client, mapping_id)
        except (ValueError, self.storage.sqs.exceptions.QueueDoesNotExist) as error:
            raise TemplateError(f"failure destination {arn}: {error}") from None

    # --- what `status` shows -----------------------------------------------------------------

    def lag(self, name: str, stats: MappingStats) -> int:
        """A mapping's records not delivered yet (a Kinesis mapping's: kinesis/streams.py)."""
        if name not in self.kinesis.mappings:
            return self.sharded.backlog(name) if self.sharded.sharded else stats.lag_records
        return self.kinesis.lag(name, self.mapping_sources[name], self.pollers)

    def read_through(self, name: str) -> float:
        """The wall time before which every record written to a mapping's stream has been read,
        so its lag counts them (0 before the first read): a lag of 0 alone may predate a write."""
        if self.sharded.sharded and name not in self.kinesis.mappings:
            times = self.sharded.read_through(name)
        else:
            times = [p.read_through for p in self.pollers if p.settings.name == name]
        return min(times, default=0.0)

    def status(self) -> dict[str, Any]:
        return {
            name: {
                "function": self.mapping_functions[name],
                "position": s.position,
                "delivered": s.delivered,
                "filtered": s.filtered,
                "batches": s.batches,
                "retries": s.retries,
                "lag_records": self.lag(name, s),
                "read_through": self.read_through(name),
                "lag_s": round(s.lag_s, 3),
                "sent_to_failure_queue": s.sent_to_failure_queue,
                "last_error": s.last_error,
                "blocked": s.blocked,
                "trimmed": s.trimmed,
                "state": self.switches[name].state if name in self.switches else "Enabled",
            }
            for name, s in self.mapping_stats.items()
        }
