"""Stream readers: how many processes may read a DynamoDB stream's shard, and a Kinesis stream's."""

from __future__ import annotations

from hybridsync.truth.facts import FAN_OUT_CONSUMERS, PAGES, SHARED_READERS, STREAM_READERS
from hybridsync.truth.findings import Finding
from hybridsync.truth.templates import Id, Templates


def reader_rules(templates: Templates) -> list[Finding]:
    """At most two processes should read a DynamoDB stream's shard at once: each stream mapping is
    one (Lambda polls every shard for it), and a third is throttled with the others, so every
    consumer's lag grows. A table whose stream feeds more than two enabled mappings is refused."""
    tables = ("AWS::DynamoDB::Table", "AWS::DynamoDB::GlobalTable")
    readers: dict[Id, list[str]] = {}
    for ident, mapping in templates.resources("AWS::Lambda::EventSourceMapping"):
        properties = mapping["Properties"]
        source = templates.target(ident[0], properties.get("EventSourceArn"))
        enabled = properties.get("Enabled") is not False  # a paused mapping reads nothing
        if source and enabled and (templates.get(source) or {}).get("Type") in tables:
            readers.setdefault(source, []).append(f"{ident[0]}/{ident[1]}")
    return [
        Finding(
            "stream-readers",
            f"{table[0]}/{table[1]}",
            f"its stream has {len(mappings)} readers ({', '.join(sorted(mappings))}), past the "
            f"{STREAM_READERS} AWS advises per shard: all are throttled and each falls behind; fold the "
            "new processing into a reader that is there, or read the table's changes from Kinesis Data "
            "Streams for DynamoDB, which has room for more: `-c change_source=kinesis` (or the table's "
            '`change_source="kinesis"`), and map your consumer on `data.kinesis_streams[<table>]`',
            PAGES["stream-readers"],
        )
        for table, mappings in sorted(readers.items())
        if len(mappings) > STREAM_READERS
    ]


def kinesis_reader_rules(templates: Templates) -> list[Finding]:
    """A Kinesis stream registers at most 20 enhanced fan-out consumers, and its shards serve at most
    five shared-throughput (standard iterator) mappings, each polling every shard once a second."""
    findings = []
    consumers: dict[Id, list[str]] = {}
    for ident, consumer in templates.resources("AWS::Kinesis::StreamConsumer"):
        stream = templates.target(ident[0], consumer["Properties"].get("StreamARN"))
        if stream:
            consumers.setdefault(stream, []).append(f"{ident[0]}/{ident[1]}")
    shared: dict[Id, list[str]] = {}
    for ident, mapping in templates.resources("AWS::Lambda::EventSourceMapping"):
        properties = mapping["Properties"]
        source = templates.target(ident[0], properties.get("EventSourceArn"))
        kind = (templates.get(source) or {}).get("Type") if source else None
        if kind == "AWS::Kinesis::Stream" and properties.get("Enabled") is not False:
            shared.setdefault(source, []).append(f"{ident[0]}/{ident[1]}")  # type: ignore[arg-type]
    for stream, named in sorted(consumers.items()):
        if len(named) > FAN_OUT_CONSUMERS:
            findings.append(Finding(
                "kinesis-fan-out", f"{stream[0]}/{stream[1]}",
                f"registers {len(named)} enhanced fan-out consumers, past the {FAN_OUT_CONSUMERS} a "
                "stream may have: the deploy fails on the next one; share a consumer's function, or read "
                "through the shared throughput", PAGES["fan-out-consumers"]))  # fmt: skip
    for stream, named in sorted(shared.items()):
        if len(named) > SHARED_READERS:
            findings.append(Finding(
                "kinesis-shared-readers", f"{stream[0]}/{stream[1]}",
                f"has {len(named)} shared-throughput mappings ({', '.join(sorted(named))}), past the "
                f"{SHARED_READERS} GetRecords calls a second a shard serves: all are throttled and fall "
                "behind; give them enhanced fan-out consumers (`-c kinesis_fan_out=true`, "
                "KinesisConsumerEventSource)", PAGES["shared-readers"]))  # fmt: skip
    return findings
