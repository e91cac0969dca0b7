"""Local names and ARNs of everything the templates make, before anything is created, so every
reference resolves (Ref, Fn::GetAtt): each resource named as its service names it."""

from __future__ import annotations

import uuid

from hybridsync.local.account import Account
from hybridsync.local.dynamodb.tables import table_name
from hybridsync.local.postgres.logins import Logins
from hybridsync.local.template import Assembly


def name_things(account: Account, a: Assembly) -> None:
    """Local names and ARNs of everything, before anything is created (references resolve)."""
    for proxy in a.resources("AWS::RDS::DBProxy"):  # what its grants name (the proxy is not emulated)
        arn = f"arn:aws:rds:{account.region}:{account.id}:db-proxy:prx-{proxy.construct.lower()}"
        a.set(proxy, DBProxyArn=arn, Endpoint="127.0.0.1")
    secrets = account.client("secretsmanager")
    account.logins = Logins(a, secrets, account.database_url, account.prefix)
    for table in account.table_resources():
        name = table_name(account.prefix, table)
        account.tables[table.construct] = name
        account.table_names[name.removeprefix(f"{account.prefix}-")] = name
        a.set(table, Ref=name, Arn=f"arn:aws:dynamodb:{account.region}:{account.id}:table/{name}")
    for stream in a.resources("AWS::Kinesis::Stream"):
        name = (
            a.resolve(stream.stack, stream.properties.get("Name")) or f"{account.prefix}-{stream.construct}"
        )
        a.set(stream, Ref=name, Arn=f"arn:aws:kinesis:{account.region}:{account.id}:stream/{name}")
    for consumer in a.resources("AWS::Kinesis::StreamConsumer"):  # as moto names it (AWS adds `:<time>`)
        name = a.resolve(consumer.stack, consumer.properties["ConsumerName"])
        arn = f"{a.resolve(consumer.stack, consumer.properties['StreamARN'])}/consumer/{name}"
        a.set(consumer, Ref=arn, ConsumerARN=arn, ConsumerName=name)
    for queue in a.resources("AWS::SQS::Queue"):
        name = f"{account.prefix}-{queue.construct}"
        a.set(
            queue,
            QueueName=name,
            Arn=f"arn:aws:sqs:{account.region}:{account.id}:{name}",
            Ref=f"{account.services_endpoint}/{account.id}/{name}",
        )
    for bucket in a.resources("AWS::S3::Bucket"):
        name = f"{account.prefix}-{bucket.construct}".lower()  # bucket names are lower case
        account.buckets[bucket.construct] = name
        a.set(bucket, Ref=name, Arn=f"arn:aws:s3:::{name}")
    for integration in a.resources("AWS::ApiGatewayV2::Integration"):
        a.set(integration, Ref=integration.logical_id)
    for function in account.python_functions():
        a.set(
            function,
            Ref=function.construct,
            Arn=f"arn:aws:lambda:{account.region}:{account.id}:function:{function.construct}",
        )
    for alias in a.resources("AWS::Lambda::Alias"):  # Ref: the alias's ARN, `<function ARN>:live`
        function = a.resolve(alias.stack, alias.properties["FunctionName"])
        qualified = (
            f"arn:aws:lambda:{account.region}:{account.id}:function:{function}:{alias.properties['Name']}"
        )
        a.set(alias, Ref=qualified, Arn=qualified)
    for api in a.resources("AWS::ApiGatewayV2::Api"):
        a.set(api, Ref=api.logical_id)
    for topic in a.resources("AWS::SNS::Topic"):
        a.set(topic, Ref=f"arn:aws:sns:{account.region}:{account.id}:{account.prefix}-{topic.construct}")
    for key in a.resources("AWS::KMS::Key"):  # a key the templates make (its policy is theirs too)
        key_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{account.prefix}/{key.stack}/{key.logical_id}"))
        a.set(key, Ref=key_id, Arn=f"arn:aws:kms:{account.region}:{account.id}:key/{key_id}", KeyId=key_id)
    for alias in a.resources("AWS::KMS::Alias"):
        a.set(alias, Ref=alias.properties["AliasName"])
