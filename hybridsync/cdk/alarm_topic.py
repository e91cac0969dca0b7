"""Where the alarms go: the team's topic or the stack's own, whose policy (and key) let CloudWatch
publish."""

from __future__ import annotations

from aws_cdk import CfnOutput, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from cdk_nag import NagSuppressions

from hybridsync.cdk.data import customer_key
from hybridsync.truth import context


def alarm_topic(stack: Stack, given: str | None = None) -> sns.ITopic:
    """The team's topic (`given`; None: `-c alarm_topic_arn=`), or one of the stack's (`given` ""
    or unset); `-c alarm_email=` subscribes an address (it confirms by mail first, as SNS requires)."""
    given = context.read(stack, "alarm_topic_arn") if given is None else given
    if given:  # its policy is the team's: `hybridsync doctor --deployed` checks it
        topic: sns.ITopic = sns.Topic.from_topic_arn(stack, "AlarmTopic", given)
    else:
        key = _topic_key(stack)
        topic = sns.Topic(stack, "AlarmTopic", display_name=f"{context.names(stack)} alarms",
                          enforce_ssl=True, master_key=key)  # fmt: skip
        # A topic policy replaces SNS's default one: with only enforce_ssl's Deny nothing may
        # publish, CloudWatch included (CloudWatch guide, "Alarm actions": the topic's access
        # policy must let cloudwatch.amazonaws.com publish); scoped to this account's alarms.
        topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="AlarmsOfThisAccountPublish",
                principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
                actions=["sns:Publish"],
                resources=[topic.topic_arn],
                conditions={
                    "StringEquals": {"aws:SourceAccount": stack.account},
                    "ArnLike": {"aws:SourceArn": f"arn:{stack.partition}:cloudwatch:{stack.region}:"
                                                 f"{stack.account}:alarm:*"},
                },
            )
        )  # fmt: skip
        if key is None:
            NagSuppressions.add_resource_suppressions(
                topic,
                [{"id": "AwsSolutions-SNS2", "reason": "CloudWatch cannot publish to a topic encrypted "
                  "with the AWS-managed SNS key (`-c kms_key_arn=` encrypts it with yours); an alarm "
                  "message carries names and thresholds, no data."}],
            )  # fmt: skip
    if email := context.read(stack, "alarm_email"):
        topic.add_subscription(subscriptions.EmailSubscription(email))
    CfnOutput(stack, "AlarmTopicArn", value=topic.topic_arn)
    return topic


def _topic_key(stack: Stack) -> kms.Key | None:
    """With `-c kms_key_arn=`, the topic is encrypted with a key of this stack's whose policy lets
    CloudWatch use it (kms:Decrypt, kms:GenerateDataKey*: AWS knowledge center, "CloudWatch alarm
    does not publish to an encrypted SNS topic"); your key's policy is not the stack's to change,
    nor can a synth read it. None: the topic is not encrypted (CloudWatch cannot use AWS's own
    SNS key)."""
    if customer_key(stack) is None:
        return None
    dev = context.read(stack, "dev")
    key = kms.Key(stack, "AlarmTopicKey", enable_key_rotation=True,
                  description="the alarm topic's key: CloudWatch may use it to publish alarms",
                  removal_policy=RemovalPolicy.DESTROY if dev else RemovalPolicy.RETAIN)  # fmt: skip
    key.add_to_resource_policy(
        iam.PolicyStatement(
            principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
            actions=["kms:Decrypt", "kms:GenerateDataKey*"],
            resources=["*"],  # in a key policy, "*" is this key
        )
    )
    return key
