"""The local app refuses what AWS refuses, on real function workers and the session's `cdk synth`
with one fact broken on purpose, and accepts the template as synthesized (or as fixed):

- an alarm's notification, when the topic's policy does not let cloudwatch.amazonaws.com publish
  (CDK's enforce_ssl policy alone replaces SNS's default one): nothing written, and the alarm's
  history reads as AWS's ("Failed to execute action ... is not authorized to perform: SNS:Publish");
- a VPC function's call to a service it has no route to (the Streams interface endpoint, which has
  no private DNS, without its URL in the function's environment): a connect timeout at once, naming
  the missing route, where AWS would wait out the SDK's timeouts;
- a read of a secret under a customer-managed key by a role without kms:Decrypt: the deploy's Users
  step fails with Secrets Manager's "Access to KMS is not allowed".
"""

from __future__ import annotations

import json
import time
import urllib.request
import uuid
from typing import Any

import pytest

from hybridsync.local.app import LocalApp
from hybridsync.local.awslambda.functions import FunctionError
from hybridsync.local.template import Assembly, Resource

pytestmark = pytest.mark.integration
KEY = "arn:aws:kms:us-east-1:123456789012:key/0b0b0b0b-1111-2222-3333-444444444444"
STREAMS_URL = "AWS_ENDPOINT_URL_DYNAMODB_STREAMS"


def one(assembly: Assembly, kind: str, construct: str) -> Resource:
    (found,) = [r for r in assembly.resources(kind) if r.construct == construct]
    return found


def role_policy(assembly: Assembly, function: Resource) -> dict[str, Any]:
    """The AWS::IAM::Policy of a function's execution role (CDK's default policy)."""
    role = function.properties["Role"]["Fn::GetAtt"][0]
    (policy,) = [p for p in assembly.resources("AWS::IAM::Policy") if {"Ref": role} in p.properties["Roles"]]
    return policy.properties["PolicyDocument"]


def under_the_key(assembly: Assembly) -> None:
    """Every secret under the customer-managed key (as `-c kms_key_arn=` makes them)."""
    for secret in assembly.resources("AWS::SecretsManager::Secret"):
        secret.properties["KmsKeyId"] = KEY


def started(assembly: Assembly, stack, tmp_path) -> LocalApp:
    app = LocalApp(assembly, **stack.endpoints(), state_dir=tmp_path, prefix=f"truth{uuid.uuid4().hex[:4]}")
    try:
        app.start(http_port=None, schedules=False, mappings=False)
    except BaseException:
        app.stop()
        raise
    return app


def canary(app: LocalApp) -> str:
    """An alarm with an ALARM action: the doctor's canary where the stacks have it."""
    with_actions = [a.name for a in app.alarms.alarms if a.actions.get("ALARM")]
    return next((n for n in with_actions if n.endswith("-DoctorCanary")), with_actions[0])


def set_state(app: LocalApp, alarm: str, state: str) -> list[dict[str, Any]]:
    """SetAlarmState through the local Lambda API's route, then the alarm's history (newest first)."""
    base = f"{app.lambda_api.endpoint}/hybridsync/alarms/{alarm}"
    body = json.dumps({"StateValue": state, "StateReason": "test: local truth"}).encode()
    with urllib.request.urlopen(urllib.request.Request(f"{base}/state", data=body, method="POST")) as answer:
        assert answer.status == 200
    with urllib.request.urlopen(f"{base}/history?HistoryItemType=Action") as answer:
        return json.loads(answer.read())["AlarmHistoryItems"]


def rebuild(app: LocalApp) -> tuple[Any, float]:
    """`aggregates rebuild` as the operations function runs it: its plan (a DynamoDB write, which
    also starts the function's container), then its unit, which reads the table's stream. The unit's
    answer and how long it took."""
    operations = app.functions["Operations"]
    spec = {"no_pause": True, "settle_s": 0}
    job = operations.invoke({"operation": "plan", "kind": "rebuild", "spec": spec})["job"]
    began = time.monotonic()
    try:
        return operations.invoke({"operation": "unit", "job": job, "unit": 0}), time.monotonic() - began
    except FunctionError as error:
        error.seconds = time.monotonic() - began  # type: ignore[attr-defined]
        raise


@pytest.fixture
def assembly(cloud_assembly):
    return Assembly.load(cloud_assembly)


def test_the_local_app_refuses_a_publish_and_a_call_without_a_route_as_aws_would(assembly, stack, tmp_path):
    (topic_policy,) = assembly.resources("AWS::SNS::TopicPolicy")
    document = topic_policy.properties["PolicyDocument"]
    document["Statement"] = [s for s in document["Statement"] if s["Effect"] == "Deny"]  # enforce_ssl alone
    operations = one(assembly, "AWS::Lambda::Function", "Operations")
    operations.properties["Environment"]["Variables"].pop(STREAMS_URL, None)  # the endpoint's URL not given
    app = started(assembly, stack, tmp_path)
    try:
        alarm = canary(app)
        failed = set_state(app, alarm, "ALARM")[0]  # newest first (the start's OK action is older)
        topic = json.loads(failed["HistoryData"])["notificationResource"]
        error = (f"Resource: arn:aws:cloudwatch:us-east-1:123456789012:alarm:{alarm} is not authorized to "
                 f"perform: SNS:Publish on resource: {topic} because no resource-based policy allows the "
                 "SNS:Publish action")  # fmt: skip
        assert json.loads(failed["HistoryData"])["error"] == error
        # the summary as AWS's: cut at the API's 255 characters (aws-solutions/...#43 shows one cut so)
        assert f'Failed to execute action {topic}. Received error: "{error}"'.startswith(
            failed["HistorySummary"]
        )
        assert not list((tmp_path / "notifications").glob(f"*-{alarm}-ALARM.json"))  # nobody was told
        assert app.status()["alarms"][alarm]["history"][0]["HistorySummary"] == failed["HistorySummary"]

        with pytest.raises(FunctionError) as timed_out:
            rebuild(app)
        assert timed_out.value.seconds < 5  # at once: no connect timeout waited out, no retries
        assert timed_out.value.error_type == "ConnectTimeoutError"
        assert 'Connect timeout on endpoint URL: "https://streams.dynamodb.us-east-1.amazonaws.com"' in (
            timed_out.value.message
        )
        assert "cannot reach dynamodbstreams from its VPC: no gateway endpoint, no interface endpoint" in (
            timed_out.value.message
        )
    finally:
        app.stop()


def test_a_secret_under_a_customer_key_needs_kms_decrypt_of_its_reader(assembly, stack, tmp_path):
    """The deploy's Users step reads the roles' secrets: without kms:Decrypt on their key it fails, as
    the Users custom resource fails a deploy (Secrets Manager: "Access to KMS is not allowed")."""
    under_the_key(assembly)
    with pytest.raises(FunctionError) as refused:
        started(assembly, stack, tmp_path / "refused")
    assert "AccessDeniedException" in refused.value.message
    assert "Access to KMS is not allowed" in refused.value.message


def test_the_fixed_templates_publish_reach_and_decrypt(assembly, stack, tmp_path):
    """The synthesized topic policy and routes, and the key's reader given kms:Decrypt: the same
    three go through (the notification written, the stream read, the logins made)."""
    under_the_key(assembly)
    users = one(assembly, "AWS::Lambda::Function", "Users")
    role_policy(assembly, users)["Statement"].append(
        {"Effect": "Allow", "Action": "kms:Decrypt", "Resource": KEY}
    )
    app = started(assembly, stack, tmp_path)
    try:
        alarm = canary(app)
        published = set_state(app, alarm, "ALARM")[0]
        topic = json.loads(published["HistoryData"])["notificationResource"]
        assert published["HistorySummary"] == f"Successfully executed action {topic}"
        (told,) = (tmp_path / "notifications").glob(f"*-{alarm}-ALARM.json")
        assert json.loads(json.loads(told.read_text())["Message"])["NewStateReason"] == "test: local truth"
        assert rebuild(app)[0]["done"]
    finally:
        app.stop()


def test_a_dead_letter_queue_under_a_customer_key_needs_the_kms_actions_of_the_functions_role(
    assembly, stack, tmp_path
):
    """Lambda sends a failed asynchronous event to the dead-letter queue with the function's role: to
    a queue under a customer key without kms:GenerateDataKey and kms:Decrypt the event is lost and
    DeadLetterErrors counts it (issue 41's lost dead letters); with them, it arrives."""
    queue = one(assembly, "AWS::SQS::Queue", "ScheduledFailures")
    queue.properties["KmsMasterKeyId"] = KEY
    app = started(assembly, stack, tmp_path)
    try:
        sql_sync = app.functions["SqlSync"]
        sql_sync.reserved = 0  # every asynchronous event goes to the dead-letter queue, untried
        sqs, url = stack.client("sqs"), app.dead_letter_queues["SqlSync"]

        def depth() -> int:
            answer = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
            return int(answer["Attributes"]["ApproximateNumberOfMessages"])

        app.invoke_async(sql_sync, {"lost": True})
        errors = app.metrics.values(
            "AWS/Lambda", "DeadLetterErrors", {"FunctionName": "SqlSync"}, 0, time.time() + 1
        )
        assert (depth(), errors) == (0, [1.0])
        role_policy(assembly, one(assembly, "AWS::Lambda::Function", "SqlSync"))["Statement"].append(
            {"Effect": "Allow", "Action": ["kms:GenerateDataKey", "kms:Decrypt"], "Resource": KEY}
        )
        app.invoke_async(sql_sync, {"kept": True})
        assert depth() == 1
    finally:
        app.stop()


def test_a_topic_under_a_key_of_the_templates_is_judged_by_that_keys_policy(assembly, stack, tmp_path):
    """What the local CloudWatch reads of the templates: the topic's key by `Fn::GetAtt` to an
    AWS::KMS::Key (or its alias), and that key's policy; the customer keys of secrets, queues and
    buckets, each by the ARN the local IAM sees."""
    from hybridsync.local.cloudwatch.alarms import KEY_REFUSED, refusal

    monitoring = next(name for name in assembly.templates if name.endswith("-monitoring"))
    resources = assembly.templates[monitoring]["Resources"]
    root = {"AWS": "arn:aws:iam::123456789012:root"}
    statements = [{"Effect": "Allow", "Principal": root, "Action": "kms:*", "Resource": "*"}]
    resources["TopicKey"] = {"Type": "AWS::KMS::Key", "Properties": {"KeyPolicy": {"Statement": statements}}}
    alias = {"AliasName": "alias/alarms", "TargetKeyId": {"Ref": "TopicKey"}}
    resources["TopicKeyAlias"] = {"Type": "AWS::KMS::Alias", "Properties": alias}
    (topic,) = assembly.resources("AWS::SNS::Topic")
    topic.properties["KmsMasterKeyId"] = {"Fn::GetAtt": ["TopicKey", "Arn"]}
    bodies = one(assembly, "AWS::S3::Bucket", "BodiesBucket")
    bodies.properties["BucketEncryption"] = {"ServerSideEncryptionConfiguration": [
        {"ServerSideEncryptionByDefault": {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": KEY}}]}  # fmt: skip
    one(assembly, "AWS::SQS::Queue", "ScheduledFailures").properties["KmsMasterKeyId"] = KEY
    under_the_key(assembly)
    app = LocalApp(assembly, **stack.endpoints(), state_dir=tmp_path, prefix=f"truth{uuid.uuid4().hex[:4]}")
    try:
        (judged,) = app.topics().values()
        assert judged.key and judged.key.startswith("arn:aws:kms:us-east-1:123456789012:key/")
        assert judged.key_policy == statements  # the account's root only: no statement names CloudWatch
        alarm = f"arn:aws:cloudwatch:us-east-1:123456789012:alarm:{app.prefix}-DoctorCanary"
        assert refusal(judged, judged.arn, alarm, "123456789012")[0] == KEY_REFUSED  # type: ignore[index]
        statements.append({"Effect": "Allow", "Principal": {"Service": "cloudwatch.amazonaws.com"},
                           "Action": ["kms:Decrypt", "kms:GenerateDataKey*"], "Resource": "*"})  # fmt: skip
        assert refusal(app.topics()[judged.arn], judged.arn, alarm, "123456789012") is None
        topic.properties["KmsMasterKeyId"] = "alias/alarms"
        assert app.topics()[judged.arn].key_policy == statements
        keys = app.customer_keys()
        assert keys[f"arn:aws:s3:::{app.buckets['BodiesBucket']}"] == KEY
        assert keys[f"arn:aws:sqs:us-east-1:123456789012:{app.prefix}-ScheduledFailures"] == KEY
        assert keys[app.logins.by_user["hybridsync_writer"]] == KEY
    finally:
        app.stop()


def test_a_pinned_stacks_literal_account_and_region_mean_the_local_apps(assembly, stack, tmp_path):
    """`-c kms_key_arn=` pins the stacks to the key's account and region, so the topic policy names
    them literally (`arn:aws:cloudwatch:eu-west-1:111122223333:alarm:*`): locally they mean the local
    app's own, as deployed they mean the stack's, and CloudWatch may publish in both."""
    from hybridsync.local.cloudwatch.alarms import refusal

    (policy,) = assembly.resources("AWS::SNS::TopicPolicy")
    alarms = "arn:aws:cloudwatch:eu-west-1:111122223333:alarm:*"
    conditions = {"StringEquals": {"aws:SourceAccount": "111122223333"}, "ArnLike": {"aws:SourceArn": alarms}}
    allow = {"Effect": "Allow", "Principal": {"Service": "cloudwatch.amazonaws.com"}, "Action": "sns:Publish",
             "Resource": {"Ref": policy.properties["Topics"][0]["Ref"]}, "Condition": conditions}  # fmt: skip
    policy.properties["PolicyDocument"]["Statement"] = [allow]
    pinned = tmp_path / "cdk.out"
    pinned.mkdir()
    environment = {"environment": "aws://111122223333/eu-west-1", "type": "aws:cloudformation:stack"}
    (pinned / "manifest.json").write_text(json.dumps({"artifacts": {policy.stack: environment}}))
    app = LocalApp(Assembly(pinned, assembly.templates), **stack.endpoints(), state_dir=tmp_path,
                   prefix=f"truth{uuid.uuid4().hex[:4]}")  # fmt: skip
    try:
        (topic,) = app.topics().values()
        alarm = f"arn:aws:cloudwatch:us-east-1:123456789012:alarm:{app.prefix}-DoctorCanary"
        assert refusal(topic, topic.arn, alarm, "123456789012") is None
        elsewhere = f"arn:aws:cloudwatch:us-east-1:999999999999:alarm:{app.prefix}-DoctorCanary"
        assert refusal(topic, topic.arn, elsewhere, "999999999999") is not None
    finally:
        app.stop()
