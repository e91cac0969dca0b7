"""The deploy truth: what the synthesized templates must hold to work in AWS and no local run can show
(resource and key policies, routes out of a VPC, customer keys, the CA a database presents, the order
of a deploy), checked on every synth. Each rule states a fact of AWS's and cites the page it comes
from; a project's app.py (what `cdk synth` runs: `synth_or_exit`) refuses templates that break one, naming the
resource, and the infra tier breaks each rule on purpose to see it refuse. The local app reads the same
facts (`network`) to refuse what AWS would refuse.

Rules work on the templates of one synth together (`Templates`), so a function in the pipeline stack is
judged with the endpoints of the database stack and the topic of the monitoring stack."""

from __future__ import annotations

import ast
import functools
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# --- AWS's facts, each with its page ------------------------------------------------------------

DOCS = "https://docs.aws.amazon.com"
PAGES = {
    # an alarm's SNS action, and the topic policy CloudWatch needs
    "topic": f"{DOCS}/AmazonCloudWatch/latest/monitoring/alarms-and-actions.html",
    "topic-key": "https://repost.aws/knowledge-center/cloudwatch-receive-sns-for-alarm-trigger",
    "metrics": f"{DOCS}/AmazonCloudWatch/latest/monitoring/aws-services-cloudwatch-metrics.html",
    "mapping-metrics": f"{DOCS}/lambda/latest/dg/monitoring-metrics-types.html#event-source-mapping-metrics",
    "streams-privatelink": f"{DOCS}/amazondynamodb/latest/developerguide/privatelink-streams.html",
    "dynamodb-privatelink": f"{DOCS}/amazondynamodb/latest/developerguide/"
    "privatelink-interface-endpoints.html",
    "s3-privatelink": f"{DOCS}/AmazonS3/latest/userguide/privatelink-interface-endpoints.html#private-dns",
    "lambda-vpc": f"{DOCS}/lambda/latest/dg/configuration-vpc-internet.html",
    "rotation-network": f"{DOCS}/secretsmanager/latest/userguide/rotation-network-rotation-lambda.html",
    "secret-key": f"{DOCS}/secretsmanager/latest/userguide/security-encryption.html"
    "#security-encryption-authz",
    "sqs-key": f"{DOCS}/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-key-management.html",
    "s3-key": f"{DOCS}/AmazonS3/latest/userguide/UsingKMSEncryption.html#require-sse-kms",
    "stream-key": f"{DOCS}/amazondynamodb/latest/developerguide/encryption.usagenotes.html",
    "rds-tls": f"{DOCS}/AmazonRDS/latest/UserGuide/UsingWithRDS.SSL.html",
    "rotation-order": f"{DOCS}/AWSCloudFormation/latest/UserGuide/"
    "aws-resource-secretsmanager-rotationschedule.html",
    # "An explicit deny in any of these policies overrides the allow" (IAM's policy evaluation logic)
    "deny": f"{DOCS}/IAM/latest/UserGuide/reference_policies_evaluation-logic.html",
    # a proxy's target group: "Currently, this property must be set to default"; a target's role:
    # READ_WRITE | READ_ONLY | UNKNOWN (RDS API, DBProxyTarget)
    "proxy-target-group": f"{DOCS}/AWSCloudFormation/latest/UserGuide/"
    "aws-resource-rds-dbproxytargetgroup.html",
    "proxy-target-role": f"{DOCS}/AmazonRDS/latest/APIReference/API_DBProxyTarget.html",
    # "To use a private hosted zone, you must set the following VPC attributes to true:
    # enableDnsHostnames and enableDnsSupport" (EC2 API, CreateVpcEndpoint PrivateDnsEnabled)
    "endpoint-vpc-dns": f"{DOCS}/AWSEC2/latest/APIReference/API_CreateVpcEndpoint.html",
    # "No more than two processes at most should be reading from the same streams shard at the
    # same time" (Change data capture for DynamoDB Streams: reading and processing a stream)
    "stream-readers": f"{DOCS}/amazondynamodb/latest/developerguide/Streams.html#Streams.Processing",
    "kinesis-key": f"{DOCS}/streams/latest/dev/permissions-user-key-KMS.html",
    # "You can register up to twenty consumers per stream to use enhanced fan-out" (on-demand
    # standard and provisioned streams, the two this app makes)
    "fan-out-consumers": f"{DOCS}/streams/latest/dev/enhanced-consumers.html",
    # a shard serves 5 GetRecords calls a second to all its shared-throughput readers together (Kinesis
    # quotas); Lambda polls each shard once a second per mapping (Lambda guide, "Polling and batching
    # streams"), so a sixth such mapping is throttled with the others
    "shared-readers": f"{DOCS}/streams/latest/dev/service-sizes-and-limits.html",
    # "MaximumBatchingWindowInSeconds ... Lambda waits up to this long to gather records" (default 0:
    # invoked as soon as a poll finds records), and "All schedule types on EventBridge Scheduler
    # invoke their targets with 60 second precision": under freshness=realtime no consumer waits
    "batching-window": f"{DOCS}/lambda/latest/dg/services-ddb-params.html",
    "schedule-precision": f"{DOCS}/scheduler/latest/UserGuide/schedule-types.html",
    # "For throttling errors (429) ... Lambda returns the event to the queue and attempts to run the
    # function again for up to 6 hours"
    "async-throttle": f"{DOCS}/lambda/latest/dg/invocation-async-error-handling.html",
}
STREAM_READERS = 2  # a DynamoDB stream's shard: more readers are throttled, and every one lags
FAN_OUT_CONSUMERS = 20  # enhanced fan-out consumers a Kinesis stream may register
SHARED_READERS = 5  # GetRecords calls a second a Kinesis shard serves, one a second per mapping

# Published metrics an alarm may watch: namespace -> metric -> the dimension sets AWS publishes it with.
_LAMBDA = [("FunctionName",), ("FunctionName", "Resource"), ("FunctionName", "ExecutedVersion")]
_MAPPING = [("EventSourceMappingUUID",)]  # Lambda's "Event source mapping metrics" (MetricsConfig)
_PROXY_1_2 = [("ProxyName",), ("EndpointName", "ProxyName")]
_TABLE = [("TableName",), ("GlobalSecondaryIndexName", "TableName")]
PUBLISHED: dict[str, dict[str, list[tuple[str, ...]]]] = {
    # Lambda: "Types of metrics for Lambda functions" (lambda/latest/dg/monitoring-metrics-types.html)
    "AWS/Lambda": {
        **{
            m: _LAMBDA
            for m in (
                "Invocations",
                "Errors",
                "Throttles",
                "Duration",
                "DeadLetterErrors",
                "DestinationDeliveryFailures",
                "IteratorAge",
                "ConcurrentExecutions",
            )
        },
        **{
            m: _MAPPING
            for m in (
                "PolledEventCount",
                "FilteredOutEventCount",
                "InvokedEventCount",
                "FailedInvokeEventCount",
                "DroppedEventCount",
                "DeletedEventCount",
                "OnFailureDestinationDeliveredEventCount",
            )
        },
    },
    # SQS: "Available CloudWatch metrics for Amazon SQS"
    "AWS/SQS": {
        m: [("QueueName",)]
        for m in (
            "ApproximateNumberOfMessagesVisible",
            "ApproximateAgeOfOldestMessage",
            "NumberOfMessagesSent",
        )
    },
    # API Gateway: "Monitor CloudWatch metrics for HTTP APIs"
    "AWS/ApiGateway": {
        m: [("ApiId",), ("ApiId", "Stage"), ("ApiId", "Route", "Stage")]
        for m in ("4xx", "5xx", "Count", "Latency", "IntegrationLatency", "DataProcessed")
    },
    # RDS Proxy: "Monitoring RDS Proxy metrics with Amazon CloudWatch" (dimension sets 1-4, per metric);
    # Aurora Serverless v2: "Important Amazon CloudWatch metrics for Aurora Serverless v2"
    "AWS/RDS": {
        "AvailabilityPercentage": [("ProxyName", "TargetGroup", "TargetRole")],
        "ClientConnections": _PROXY_1_2,
        "ClientConnectionsSetupFailedAuth": _PROXY_1_2,
        "DatabaseConnectionsBorrowLatency": _PROXY_1_2,
        "DatabaseConnections": [
            ("ProxyName",),
            ("ProxyName", "Target", "TargetGroup"),
            ("ProxyName", "TargetGroup", "TargetRole"),
        ],
        "ACUUtilization": [("DBClusterIdentifier",)],
        "ServerlessDatabaseCapacity": [("DBClusterIdentifier",)],
    },
    # DynamoDB: "DynamoDB Metrics and dimensions"
    "AWS/DynamoDB": {
        "ReadThrottleEvents": _TABLE,
        "WriteThrottleEvents": _TABLE,
        "ConsumedReadCapacityUnits": _TABLE,
        "ConsumedWriteCapacityUnits": _TABLE,
        "SystemErrors": [("Operation", "TableName")],
        # its SampleCount is "the number of successful requests"
        "SuccessfulRequestLatency": [("Operation", "TableName")],
    },
    # Kinesis: "Monitoring the Amazon Kinesis Data Streams service with Amazon CloudWatch", basic
    # stream-level metrics (streams/latest/dev/monitoring-with-cloudwatch.html)
    "AWS/Kinesis": {
        m: [("StreamName",)]
        for m in (
            "IncomingRecords",
            "IncomingBytes",
            "WriteProvisionedThroughputExceeded",
            "ReadProvisionedThroughputExceeded",
            "GetRecords.IteratorAgeMilliseconds",
        )
    },
}
SECRET_TYPES = ("AWS::SecretsManager::Secret", "AWS::SecretsManager::SecretTargetAttachment")
# Dimensions whose values AWS names: DynamoDB's metrics page (`Operation` is the API operation); RDS
# Proxy's `TargetGroup` is its one target group, `default` (AWS::RDS::DBProxyTargetGroup
# TargetGroupName: "must be set to default"), and `TargetRole` a target's role (DBProxyTarget Role)
PUBLISHED_VALUES: dict[tuple[str, str], set[str]] = {
    ("AWS/DynamoDB", "Operation"): {
        "PutItem", "DeleteItem", "UpdateItem", "GetItem", "BatchGetItem", "Scan", "Query", "BatchWriteItem",
        "TransactWriteItems", "TransactGetItems", "ExecuteTransaction", "BatchExecuteStatement",
        "ExecuteStatement",
    },
    ("AWS/RDS", "TargetGroup"): {"default"},
    ("AWS/RDS", "TargetRole"): {"READ_WRITE", "READ_ONLY"},
}  # fmt: skip
VALUE_PAGES = {
    ("AWS/RDS", "TargetGroup"): "proxy-target-group",
    ("AWS/RDS", "TargetRole"): "proxy-target-role",
}
CANARY = "DoctorCanary"  # the alarm `hybridsync doctor` drives: its metric is never emitted, on purpose

# Interface endpoints of services that have no private DNS: the client must be given the endpoint's
# own name (DynamoDB's and Streams' PrivateLink pages: "not supported: private and hybrid DNS").
NO_PRIVATE_DNS = {"dynamodb": "dynamodb-privatelink", "dynamodbstreams": "streams-privatelink"}
ENDPOINT_VARIABLE = {
    "dynamodb": "AWS_ENDPOINT_URL_DYNAMODB",
    "dynamodbstreams": "AWS_ENDPOINT_URL_DYNAMODB_STREAMS",
    "s3": "AWS_ENDPOINT_URL_S3",
}  # botocore's service-specific endpoints
# endpoint service name -> botocore's
_ENDPOINT_SERVICES = {"dynamodb-streams": "dynamodbstreams", "kinesis-streams": "kinesis"}
# What a function's role lets Lambda do for it, outside its VPC (Lambda's "Giving Lambda functions
# access to resources in an Amazon VPC": the service, not the function, writes logs, traces and
# network interfaces; a mapping's poller reads the stream and writes the on-failure destination);
# KMS is called by the service holding the key (Secrets Manager, SQS, S3, DynamoDB), never by the code.
PLATFORM_PREFIXES = ("logs:", "xray:", "ec2:", "kms:", "rds-db:")
STREAM_READ = {
    "dynamodb:GetRecords",
    "dynamodb:GetShardIterator",
    "dynamodb:DescribeStream",
    "dynamodb:ListStreams",
    # a Kinesis stream, directly or through an enhanced fan-out consumer (Lambda guide, "Process
    # Amazon Kinesis Data Streams records with Lambda")
    "kinesis:DescribeStream",
    "kinesis:DescribeStreamSummary",
    "kinesis:ListShards",
    "kinesis:GetRecords",
    "kinesis:GetShardIterator",
    "kinesis:SubscribeToShard",
    "kinesis:DescribeStreamConsumer",
}
SERVICE_OF_PREFIX = {"states": "stepfunctions", "monitoring": "cloudwatch"}


@dataclass(frozen=True)
class Finding:
    rule: str
    resource: str  # <stack>/<logical id>
    message: str
    source: str  # the AWS page the fact comes from

    def __str__(self) -> str:
        return f"[{self.rule}] {self.resource}: {self.message} ({self.source})"


class DeployTruthError(ValueError):
    """A synthesized template breaks a fact of AWS's: it would fail in AWS."""

    def __init__(self, findings: list[Finding]):
        super().__init__(
            f"{len(findings)} finding(s) against AWS's documented behaviour:\n"
            + "\n".join(f"  {f}" for f in findings)
        )
        self.findings = findings


# --- the templates of one synth -----------------------------------------------------------------

Id = tuple[str, str]  # (stack, logical id)


class Templates:
    """Every stack's template of one synth; references across stacks (`Fn::ImportValue` of CDK's
    exports) resolve to the resource they name."""

    def __init__(self, templates: dict[str, dict[str, Any]]):
        self.templates = templates
        self.exports: dict[str, tuple[str, Any]] = {}
        for stack, template in templates.items():
            for output in template.get("Outputs", {}).values():
                name = output.get("Export", {}).get("Name")
                if isinstance(name, str):
                    self.exports[name] = (stack, output["Value"])

    @classmethod
    def load(cls, directory: Path) -> Templates:
        """A cloud assembly folder (`cdk.out`)."""
        return cls(
            {
                p.name.removesuffix(".template.json"): json.loads(p.read_text())
                for p in sorted(Path(directory).glob("*.template.json"))
            }
        )

    def resources(self, *kinds: str) -> Iterator[tuple[Id, dict[str, Any]]]:
        for stack, template in self.templates.items():
            for logical, resource in template.get("Resources", {}).items():
                if resource.get("Type") in kinds:
                    yield (stack, logical), resource

    def get(self, ident: Id) -> dict[str, Any] | None:
        return self.templates.get(ident[0], {}).get("Resources", {}).get(ident[1])

    def target(self, stack: str, value: Any) -> Id | None:
        """The resource a Ref, a GetAtt or an import of either names (None: a literal, or no resource)."""
        if isinstance(value, dict):
            if "Ref" in value and not str(value["Ref"]).startswith("AWS::"):
                return (stack, value["Ref"])
            if "Fn::GetAtt" in value:
                return (stack, value["Fn::GetAtt"][0])
            if "Fn::ImportValue" in value and value["Fn::ImportValue"] in self.exports:
                stack, exported = self.exports[value["Fn::ImportValue"]]  # a Join of a list attribute, too
                return self.target(stack, exported) or next(iter(self.mentions(stack, exported)), None)
        return None

    def mentions(self, stack: str, value: Any) -> set[Id]:
        """Every resource a value refers to, however deep (a Join of an ARN and a path included)."""
        found: set[Id] = set()
        if isinstance(value, dict):
            if (hit := self.target(stack, value)) is not None:
                found.add(hit)
            else:
                for item in value.values():
                    found |= self.mentions(stack, item)
        elif isinstance(value, list):
            for item in value:
                found |= self.mentions(stack, item)
        return found

    def text(self, stack: str, value: Any) -> str:
        """A value as text, references kept as `<stack/logical>` and the region as `<region>`."""
        if isinstance(value, str):
            return value
        if isinstance(value, dict):
            if "Fn::Join" in value:
                separator, parts = value["Fn::Join"]
                return separator.join(self.text(stack, p) for p in parts)
            if value.get("Ref") == "AWS::Region":
                return "<region>"
            if (hit := self.target(stack, value)) is not None:
                return f"<{hit[0]}/{hit[1]}>"
        return json.dumps(value)

    def policy_statements(self, role: Id) -> list[tuple[str, dict[str, Any]]]:
        """(stack, statement) of every identity-based policy of a role: inline and attached."""
        found = []
        resource = self.get(role) or {}
        for policy in resource.get("Properties", {}).get("Policies", []):
            found += [(role[0], s) for s in _listed(policy["PolicyDocument"].get("Statement"))]
        for ident, policy in self.resources("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            roles = {self.target(ident[0], r) for r in policy["Properties"].get("Roles", [])}
            if role in roles:
                found += [(ident[0], s) for s in _listed(policy["Properties"]["PolicyDocument"]["Statement"])]
        return found

    def role_of(self, function: Id) -> Id | None:
        resource = self.get(function) or {}
        return self.target(function[0], resource.get("Properties", {}).get("Role"))

    def function_of(self, stack: str, value: Any) -> Id | None:
        """The function a value names: the function itself, or an alias of it (whole, or its name
        cut out of the alias's ARN, as CDK writes a mapping's `FunctionName`)."""
        ident = self.target(stack, value) or next(iter(self.mentions(stack, value)), None)
        resource = self.get(ident) if ident else None
        if resource and resource["Type"] == "AWS::Lambda::Alias":
            return self.target(ident[0], resource["Properties"]["FunctionName"])  # type: ignore[index]
        return ident


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [] if value is None else [value]


def _allows(statements: list[tuple[str, dict[str, Any]]], action: str) -> bool:
    """Whether an Allow statement grants `action` (wildcards honoured)."""
    return any(
        statement.get("Effect") == "Allow"
        and any(re.fullmatch(a.replace("*", ".*"), action, re.I) for a in _listed(statement.get("Action")))
        for _, statement in statements
    )


def _names_action(statement: dict[str, Any], action: str) -> bool:
    """Whether a statement is about `action`: its Action matches it, or its NotAction does not."""

    def matches(patterns: Any) -> bool:
        return any(
            re.fullmatch(re.escape(str(p)).replace(r"\*", ".*").replace(r"\?", "."), action, re.I)
            for p in _listed(patterns)
        )

    if "NotAction" in statement:
        return not matches(statement["NotAction"])
    return matches(statement.get("Action"))


# Conditions a Deny may carry that the callers these rules judge never meet: every AWS SDK and
# service principal calls over TLS (`aws:SecureTransport` true: CDK's `enforce_ssl`), and a Deny of
# *other* accounts' or sources' calls (the negated operators on aws:SourceAccount / aws:SourceArn,
# the confused-deputy guard) leaves the stacks' own alarms alone.
_NEGATED = ("StringNotEquals", "StringNotLike", "ArnNotEquals", "ArnNotLike")
_ACCOUNT_KEYS = {"aws:sourceaccount", "aws:sourceowner"}  # CloudWatch sends both to SNS


def _condition_spares(condition: Any) -> bool:
    """Whether a Deny's condition can be shown never to hold for the stacks' own calls (any other
    condition may hold: the Deny counts)."""
    if not isinstance(condition, dict) or not condition:
        return False
    for operator, keys in condition.items():
        if not isinstance(keys, dict):
            return False
        for key, value in keys.items():
            secure = operator == "Bool" and key.lower() == "aws:securetransport"
            if secure and [str(v).lower() for v in _listed(value)] == ["false"]:
                return True
            # a negated test of the source spares the stacks' own calls only when it names their own
            # account: with any other value, or a key the call lacks, it holds ("the condition is
            # true" when the key is absent: IAM condition operators)
            own = all(v == {"Ref": "AWS::AccountId"} for v in _listed(value))
            if operator in _NEGATED and key.lower() in _ACCOUNT_KEYS and own:
                return True
    return False


def _principal_covers(statement: dict[str, Any], service: str | None) -> bool:
    """Whether a resource policy's statement applies to `service`'s principal (None: an identity
    policy's statement, which has none and applies to its role)."""
    if service is not None and "NotPrincipal" in statement:  # every principal it does not name
        excluded = statement["NotPrincipal"]
        return excluded != "*" and not (
            isinstance(excluded, dict) and service in _listed(excluded.get("Service"))
        )
    if service is None or "Principal" not in statement:
        return "NotPrincipal" not in statement
    principal = statement["Principal"]
    if principal == "*":
        return True
    if not isinstance(principal, dict):
        return False
    return "*" in _listed(principal.get("AWS")) or service in _listed(principal.get("Service"))


def denials(
    statements: list[tuple[str, dict[str, Any]]],
    action: str,
    service: str | None = None,
    covers: Any = lambda _stack, _resource: True,
) -> list[dict[str, Any]]:
    """The Deny statements that may refuse `action` (to `service`'s principal, on a resource
    `covers(stack, Resource)` says they name): an explicit deny overrides every allow (IAM's policy
    evaluation logic), and a condition counts unless it can be shown never to hold."""
    return [
        statement
        for stack, statement in statements
        if statement.get("Effect") == "Deny"
        and _names_action(statement, action)
        and _principal_covers(statement, service)
        and ("Resource" not in statement or covers(stack, statement["Resource"]))
        and not _condition_spares(statement.get("Condition"))
    ]  # fmt: skip


# --- routes out of a VPC -------------------------------------------------------------------------


@dataclass(frozen=True)
class Network:
    """What a VPC-attached function needs to reach (botocore service -> why) and reaches (-> how)."""

    function: str
    needed: dict[str, str]
    reachable: dict[str, str]

    @property
    def unreachable(self) -> dict[str, str]:
        return {s: why for s, why in self.needed.items() if s not in self.reachable}


def _service_of(action: str) -> str:
    prefix = action.split(":", 1)[0].lower()
    if action in STREAM_READ and prefix == "dynamodb":
        return "dynamodbstreams"
    return SERVICE_OF_PREFIX.get(prefix, prefix)


def needed_services(templates: Templates, function: Id) -> dict[str, str]:
    """The services a function's code calls, by its role: every action it is granted, less what
    Lambda does with that role outside the VPC (logs, traces, network interfaces, the customer key;
    the stream its mapping reads and the destination it writes failed batches to; its dead-letter
    queue)."""
    role = templates.role_of(function)
    if role is None:
        return {}
    platform: set[Id] = set()  # resources only Lambda touches with this role
    mapped = False
    for ident, mapping in templates.resources("AWS::Lambda::EventSourceMapping"):
        if templates.function_of(ident[0], mapping["Properties"]["FunctionName"]) == function:
            mapped = True
            destination = mapping["Properties"].get("DestinationConfig", {}).get("OnFailure", {})
            platform |= templates.mentions(ident[0], destination.get("Destination"))
    properties = (templates.get(function) or {}).get("Properties", {})
    platform |= templates.mentions(function[0], properties.get("DeadLetterConfig", {}).get("TargetArn"))
    needed: dict[str, str] = {}
    for stack, statement in templates.policy_statements(role):
        if statement.get("Effect") != "Allow":
            continue
        touched = templates.mentions(stack, statement.get("Resource"))
        for action in _listed(statement.get("Action")):
            if action.lower().startswith(PLATFORM_PREFIXES) or (mapped and action in STREAM_READ):
                continue
            if touched and touched <= platform:
                continue
            needed.setdefault(_service_of(action), f"{action} in its role")
    return needed


def _endpoint_service(templates: Templates, stack: str, endpoint: dict[str, Any]) -> str:
    name = templates.text(stack, endpoint["Properties"]["ServiceName"]).rsplit(".", 1)[-1]
    return _ENDPOINT_SERVICES.get(name, name)


def _admits(templates: Templates, group: Id, sources: set[Id], vpc: Any) -> bool:
    """Whether a security group lets HTTPS in from one of `sources` or from its whole VPC."""
    rules: list[tuple[str, dict[str, Any]]] = []
    resource = templates.get(group) or {}
    rules += [(group[0], r) for r in resource.get("Properties", {}).get("SecurityGroupIngress", [])]
    for ident, ingress in templates.resources("AWS::EC2::SecurityGroupIngress"):
        if templates.target(ident[0], ingress["Properties"].get("GroupId")) == group:
            rules.append((ident[0], ingress["Properties"]))
    for stack, rule in rules:
        ports = range(int(rule.get("FromPort", -1)), int(rule.get("ToPort", -1)) + 1)
        if rule.get("IpProtocol") not in ("tcp", "-1") or (
            rule.get("IpProtocol") == "tcp" and 443 not in ports
        ):
            continue
        if templates.target(stack, rule.get("SourceSecurityGroupId")) in sources:
            return True
        cidr = rule.get("CidrIp")
        if cidr == "0.0.0.0/0" or (isinstance(cidr, dict) and templates.mentions(stack, cidr) & vpc):
            return True
    return False


def _vpc_of(templates: Templates, stack: str, groups: list[Any]) -> tuple[set[Id], str | None]:
    """The VPC of security groups: the resources naming it, or its literal id."""
    for group in groups:
        ident = templates.target(stack, group)
        resource = templates.get(ident) if ident else None
        if resource:
            vpc = resource["Properties"].get("VpcId")
            return templates.mentions(ident[0], vpc), vpc if isinstance(vpc, str) else None  # type: ignore[index]
    return set(), None


def reach(
    templates: Templates, stack: str, groups: list[Any], subnets: list[Any], environment: dict[str, Any]
) -> dict[str, str]:
    """The services callers in `groups` and `subnets` reach: through a gateway endpoint on their
    subnets' route tables, through an interface endpoint whose security group admits them (by private
    DNS where the service has it, else by the endpoint's own name given to the client in
    `environment`), or through the team's own routes where the stacks say they are the team's."""
    sources = {g for g in (templates.target(stack, x) for x in groups) if g}
    vpc, vpc_id = _vpc_of(templates, stack, groups)
    for ident in sources:
        given = (templates.get(ident) or {}).get("Metadata", {}).get("hybridsync:routes")
        if given:
            return {"*": given}
    subnet_ids = {s for s in (templates.target(stack, x) for x in subnets) if s}
    tables: dict[Id, set[Id | None]] = {s: set() for s in subnet_ids}  # each subnet's route tables
    for ident, a in templates.resources("AWS::EC2::SubnetRouteTableAssociation"):
        subnet = templates.target(ident[0], a["Properties"]["SubnetId"])
        if subnet in tables:
            tables[subnet].add(templates.target(ident[0], a["Properties"]["RouteTableId"]))
    reached: dict[str, str] = {}
    for ident, endpoint in templates.resources("AWS::EC2::VPCEndpoint"):
        properties = endpoint["Properties"]
        same = templates.mentions(ident[0], properties.get("VpcId")) & vpc or (
            vpc_id is not None and properties.get("VpcId") == vpc_id
        )
        if not same:
            continue
        service, where = _endpoint_service(templates, ident[0], endpoint), f"{ident[0]}/{ident[1]}"
        if properties.get("VpcEndpointType") == "Gateway":
            # a gateway endpoint is a route: only a subnet whose route table has it reaches the
            # service, and Lambda may run a function in any of the subnets it is given, so every one
            # of them must have it, or the calls from the others time out
            routes = {templates.target(ident[0], r) for r in properties.get("RouteTableIds", [])}
            if tables and all(found & routes for found in tables.values()):
                reached[service] = f"gateway endpoint {where}"
            continue
        admitted = any(
            _admits(templates, g, sources, vpc)
            for g in (templates.target(ident[0], x) for x in properties.get("SecurityGroupIds", []))
            if g
        )
        if not admitted:
            continue
        variable = ENDPOINT_VARIABLE.get(service)
        if variable and (ident in templates.mentions(stack, environment.get(variable))):
            reached[service] = f"interface endpoint {where} at ${variable}"
        elif properties.get("PrivateDnsEnabled") and service not in NO_PRIVATE_DNS:
            reached[service] = f"interface endpoint {where} (private DNS)"
    return reached


def network(templates: Templates, stack: str, logical_id: str) -> Network | None:
    """What a function reaches from its VPC (None: it is not in one, and reaches every public endpoint)."""
    function = (stack, logical_id)
    properties = (templates.get(function) or {}).get("Properties", {})
    config = properties.get("VpcConfig")
    if not config:
        return None
    environment = properties.get("Environment", {}).get("Variables", {})
    reached = reach(
        templates, stack, config.get("SecurityGroupIds", []), config.get("SubnetIds", []), environment
    )
    needed = needed_services(templates, function)
    if "*" in reached:  # the team's routes: every service, those it needs named
        reached = {service: reached["*"] for service in needed} | {"*": reached["*"]}
    return Network(f"{stack}/{logical_id}", needed, reached)


# --- the rules ----------------------------------------------------------------------------------


def _alarm_actions(templates: Templates) -> Iterator[tuple[Id, Id | None, Any]]:
    for ident, alarm in templates.resources("AWS::CloudWatch::Alarm"):
        properties = alarm["Properties"]
        for action in _listed(properties.get("AlarmActions")) + _listed(properties.get("OKActions")):
            yield ident, templates.target(ident[0], action), action


def _names(templates: Templates, stack: str, named: Any, *, resource: Id) -> bool:
    """Whether a statement's Resource may name `resource`: `*`, a reference to it, or a literal
    pattern (an ARN this module cannot resolve is taken to name it)."""
    items = _listed(named)
    if "*" in items or resource in templates.mentions(stack, named):
        return True
    return any(isinstance(item, str) for item in items)


def _shown(statements: list[dict[str, Any]]) -> str:
    return "; ".join(
        f"Sid {s['Sid']}" if s.get("Sid") else json.dumps(s.get("Condition") or s.get("Action"))[:80]
        for s in statements
    )


def _principal_services(statement: dict[str, Any]) -> set[str]:
    principal = statement.get("Principal", {})
    return set(_listed(principal.get("Service"))) if isinstance(principal, dict) else set()


def topic_rules(templates: Templates) -> list[Finding]:
    """Every alarm action reaches its topic: a topic policy replaces SNS's default one, so it must let
    CloudWatch publish; an encrypted topic's key lets CloudWatch use it, and is never AWS's own; and
    no Deny in either takes it back (an explicit deny overrides every allow)."""
    findings, seen = [], set()
    for _, topic, _ in _alarm_actions(templates):
        if topic is None or topic in seen:
            continue  # a topic of yours (`alarm_topic_arn`): `hybridsync doctor --deployed` checks it
        seen.add(topic)
        where = f"{topic[0]}/{topic[1]}"
        for ident, policy in templates.resources("AWS::SNS::TopicPolicy"):
            if topic not in templates.mentions(ident[0], policy["Properties"]["Topics"]):
                continue
            statements = [(ident[0], s) for s in _listed(policy["Properties"]["PolicyDocument"]["Statement"])]
            publishers = [s for _, s in statements if "cloudwatch.amazonaws.com" in _principal_services(s)]
            if denied := denials(
                statements,
                "sns:Publish",
                "cloudwatch.amazonaws.com",
                functools.partial(_names, templates, resource=topic),
            ):
                findings.append(
                    Finding(
                        "alarm-topic-policy",
                        where,
                        f"its topic policy denies cloudwatch.amazonaws.com sns:Publish ({_shown(denied)}), "
                        "which no Allow overrides: an alarm may fail to notify",
                        PAGES["deny"],
                    )
                )
            if not _allows([(ident[0], s) for s in publishers], "sns:Publish"):
                findings.append(
                    Finding(
                        "alarm-topic-policy",
                        where,
                        "its topic policy lets no cloudwatch.amazonaws.com sns:Publish: no alarm can notify",
                        PAGES["topic"],
                    )
                )
            elif not all(s.get("Condition") for s in publishers):
                findings.append(
                    Finding(
                        "alarm-topic-policy",
                        where,
                        "CloudWatch may publish without an "
                        "aws:SourceAccount or aws:SourceArn condition (confused deputy)",
                        PAGES["topic"],
                    )
                )
        key = (templates.get(topic) or {}).get("Properties", {}).get("KmsMasterKeyId")
        if key is None:
            continue
        key_id = templates.target(topic[0], key)
        resource = templates.get(key_id) if key_id else None
        if resource is None or resource["Type"] != "AWS::KMS::Key":
            shown = templates.text(topic[0], key)
            reason = (
                "the AWS-managed SNS key, which CloudWatch cannot use"
                if "alias/aws/" in shown
                else f"key {shown}, whose policy is not in the templates (CloudWatch's use of it "
                "cannot be shown)"
            )
            findings.append(Finding("alarm-topic-key", where, f"encrypted with {reason}", PAGES["topic-key"]))
            continue
        statements = [(key_id[0], s) for s in _listed(resource["Properties"]["KeyPolicy"]["Statement"])]  # type: ignore[index]
        cloudwatch = [(st, s) for st, s in statements if "cloudwatch.amazonaws.com" in _principal_services(s)]
        for needed in ("kms:Decrypt", "kms:GenerateDataKey"):
            if denied := denials(statements, needed, "cloudwatch.amazonaws.com"):  # a key policy: its key
                findings.append(
                    Finding(
                        "alarm-topic-key",
                        where,
                        f"its key's policy denies cloudwatch.amazonaws.com {needed} ({_shown(denied)})",
                        PAGES["deny"],
                    )
                )
            elif not _allows(cloudwatch, needed):
                findings.append(
                    Finding(
                        "alarm-topic-key",
                        where,
                        f"its key's policy does not let cloudwatch.amazonaws.com {needed}",
                        PAGES["topic-key"],
                    )
                )
    return findings


@functools.cache
def engine_metrics() -> frozenset[str]:
    """The metric names the engine's functions emit (Powertools `add_metric` in the shipped modules:
    a literal name, a module constant, or the keys of a dict whose items it emits)."""
    names: set[str] = set()
    root = Path(__file__).resolve().parents[1]
    for path in root.rglob("*.py"):
        if {"local", "cdk", "cli", "testing", "workloads"} & set(path.relative_to(root).parts):
            continue
        tree = ast.parse(path.read_text())
        constants = {
            t.id: n.value.value
            for n in tree.body
            if isinstance(n, ast.Assign)
            and isinstance(n.value, ast.Constant)
            and isinstance(n.value.value, str)
            for t in n.targets
            if isinstance(t, ast.Name)
        }
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_metric" and node.args
            ):
                continue
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                names.add(first.value)
            elif isinstance(first, ast.IfExp):
                names |= {b.value for b in (first.body, first.orelse) if isinstance(b, ast.Constant)}
            elif isinstance(first, ast.Name) and first.id in constants:
                names.add(constants[first.id])
            elif isinstance(first, ast.Name):  # `for name, n in emitted.items()`: that dict's keys
                names |= _keys_iterated_as(tree, first.id)
    return frozenset(names)


def _keys_iterated_as(tree: ast.AST, name: str) -> set[str]:
    """The string keys of the dict literal a loop `for name, ... in <dict>.items()` walks."""
    assigned = [n for n in ast.walk(tree) if isinstance(n, ast.Assign) and isinstance(n.value, ast.Dict)]
    dicts = {t.id: n.value for n in assigned for t in n.targets if isinstance(t, ast.Name)}
    found: set[str] = set()
    for loop in (n for n in ast.walk(tree) if isinstance(n, ast.For)):
        targets = loop.target.elts if isinstance(loop.target, ast.Tuple) else [loop.target]
        walked = loop.iter
        if not (any(isinstance(t, ast.Name) and t.id == name for t in targets[:1])
                and isinstance(walked, ast.Call) and isinstance(walked.func, ast.Attribute)
                and walked.func.attr == "items" and isinstance(walked.func.value, ast.Name)):  # fmt: skip
            continue
        literal = dicts.get(walked.func.value.id)
        if literal is not None:
            found |= {
                k.value for k in literal.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)
            }
    return found


def _counts_events(templates: Templates, stack: str, mapping: Any) -> bool:
    """Whether the event source mapping a dimension names publishes its event counts."""
    ident = templates.target(stack, mapping)
    resource = templates.get(ident) if ident else None
    if resource is None:
        return True  # a mapping of yours, by its literal UUID: not in the templates to judge
    return "EventCount" in resource["Properties"].get("MetricsConfig", {}).get("Metrics", [])


def _metric_stats(properties: dict[str, Any]) -> Iterator[dict[str, Any]]:
    if "MetricName" in properties:
        yield properties
    for query in properties.get("Metrics", []):
        if "MetricStat" in query:
            yield query["MetricStat"]["Metric"]


def _engine_services(templates: Templates) -> set[tuple[str, str]]:
    """(namespace, service) of every function the templates hold (Powertools' variables)."""
    found = set()
    for _, function in templates.resources("AWS::Lambda::Function"):
        variables = function["Properties"].get("Environment", {}).get("Variables", {})
        if "POWERTOOLS_METRICS_NAMESPACE" in variables:
            found.add((variables["POWERTOOLS_METRICS_NAMESPACE"], variables.get("POWERTOOLS_SERVICE_NAME")))
    return found


# A dimension whose value names a resource of the stacks: the resource's type, and what of it the
# value must be (`Ref`, or an attribute): each service's metrics page names the dimension's value (a
# queue's name, not its URL, which is an SQS queue's Ref; a table's name; a proxy's name...)
NAMED_BY: dict[tuple[str, str], tuple[tuple[str, ...], str]] = {
    ("AWS/Lambda", "FunctionName"): (("AWS::Lambda::Function",), "Ref"),
    ("AWS/Lambda", "EventSourceMappingUUID"): (("AWS::Lambda::EventSourceMapping",), "Ref"),
    ("AWS/SQS", "QueueName"): (("AWS::SQS::Queue",), "QueueName"),
    ("AWS/ApiGateway", "ApiId"): (("AWS::ApiGatewayV2::Api",), "Ref"),
    ("AWS/RDS", "ProxyName"): (("AWS::RDS::DBProxy",), "Ref"),
    ("AWS/RDS", "DBClusterIdentifier"): (("AWS::RDS::DBCluster",), "Ref"),
    ("AWS/DynamoDB", "TableName"): (("AWS::DynamoDB::Table", "AWS::DynamoDB::GlobalTable"), "Ref"),
    ("AWS/Kinesis", "StreamName"): (("AWS::Kinesis::Stream",), "Ref"),
}


def _reference(templates: Templates, stack: str, value: Any) -> tuple[Id, str] | None:
    """The resource a value is a reference to, and how (`Ref`, or the attribute a GetAtt reads),
    through CDK's exports (None: a literal)."""
    if not isinstance(value, dict):
        return None
    if "Ref" in value and not str(value["Ref"]).startswith("AWS::"):
        return (stack, value["Ref"]), "Ref"
    if "Fn::GetAtt" in value:
        logical, attribute = value["Fn::GetAtt"]
        return (stack, logical), attribute
    if "Fn::ImportValue" in value and value["Fn::ImportValue"] in templates.exports:
        return _reference(templates, *templates.exports[value["Fn::ImportValue"]])
    return None


def _wrong_references(templates: Templates, stack: str, namespace: str, dimensions: dict[str, Any]) -> str:
    """What is wrong with the dimensions that name a resource of the stacks (empty: nothing): a
    resource of another type, a reference to something else of it than the metric's name or id, or
    a global secondary index its table does not have."""
    wrong = []
    for dimension, value in sorted(dimensions.items()):
        expected = NAMED_BY.get((namespace, dimension))
        found = _reference(templates, stack, value)
        resource = templates.get(found[0]) if found else None
        if expected is None or found is None or resource is None:
            continue
        kinds, how = expected
        if resource["Type"] not in kinds or found[1] != how:
            named = f"{found[0][0]}/{found[0][1]} ({resource['Type']})"
            wrong.append(f"{dimension} is the {found[1]} of {named}; AWS publishes it with the {how} of "
                         f"an {' or '.join(kinds)}")  # fmt: skip
        elif dimension == "TableName" and isinstance(
            index := dimensions.get("GlobalSecondaryIndexName"), str
        ):
            indexes = {
                i.get("IndexName") for i in resource.get("Properties", {}).get("GlobalSecondaryIndexes", [])
            }
            if index not in indexes:
                wrong.append(
                    f"GlobalSecondaryIndexName={index}: {found[0][0]}/{found[0][1]} has no such index"
                )
    return "; ".join(wrong)


def metric_rules(templates: Templates) -> list[Finding]:
    """Every alarm watches a metric stream that exists: a namespace, metric and dimension set AWS
    publishes, or a metric one of the engine's functions emits with the dimensions it emits it with."""
    findings = []
    services = _engine_services(templates)
    for ident, alarm in templates.resources("AWS::CloudWatch::Alarm"):
        properties, where = alarm["Properties"], f"{ident[0]}/{ident[1]}"
        for metric in _metric_stats(properties):
            namespace, name = metric.get("Namespace", ""), metric.get("MetricName", "")
            dimensions = {d["Name"]: d["Value"] for d in metric.get("Dimensions", [])}
            names = tuple(sorted(dimensions))
            if namespace.startswith("AWS/"):
                sets = PUBLISHED.get(namespace, {}).get(name)
                if sets is None:
                    message = f"{namespace} {name} is not a metric this app's table knows AWS to publish"
                elif names not in [tuple(sorted(s)) for s in sets]:
                    shown = " | ".join(", ".join(s) for s in sets)
                    message = (
                        f"{namespace} {name} is published with [{shown}], never with [{', '.join(names)}]"
                    )
                elif "EventSourceMappingUUID" in dimensions and not _counts_events(
                    templates, ident[0], dimensions["EventSourceMappingUUID"]
                ):
                    message = (
                        f"{namespace} {name}: its mapping has no MetricsConfig EventCount, without which "
                        "Lambda publishes no metric of the mapping"
                    )
                    findings.append(Finding("alarm-metric", where, message, PAGES["mapping-metrics"]))
                    continue
                elif wrong_reference := _wrong_references(templates, ident[0], namespace, dimensions):
                    message = f"{namespace} {name}: {wrong_reference}"
                elif wrong := sorted(
                    (d, v)
                    for d, v in dimensions.items()
                    if isinstance(v, str) and v not in PUBLISHED_VALUES.get((namespace, d), {v})
                ):
                    shown = ", ".join(
                        f"{d}={v} (AWS's values: {', '.join(sorted(PUBLISHED_VALUES[(namespace, d)]))})"
                        for d, v in wrong
                    )
                    pages = [VALUE_PAGES[(namespace, d)] for d, _ in wrong if (namespace, d) in VALUE_PAGES]
                    message = f"{namespace} {name} is never published with {shown}"
                    findings.append(Finding("alarm-metric", where, message, PAGES[(pages or ["metrics"])[0]]))
                    continue
                else:
                    continue
                findings.append(Finding("alarm-metric", where, message, PAGES["metrics"]))
                continue
            service = dimensions.get("service")
            if name == CANARY and ident[1].startswith(CANARY):
                continue
            emitted = name in engine_metrics() and names == ("service",) and (namespace, service) in services
            if not emitted:
                findings.append(
                    Finding(
                        "alarm-metric",
                        where,
                        f"{namespace} {name} {dimensions}: no function "
                        "of the engine emits it so (namespace, `service` dimension)",
                        PAGES["metrics"],
                    )
                )
    return findings


def network_rules(templates: Templates) -> list[Finding]:
    """Every VPC-attached function and rotation reaches every service it calls (a gateway endpoint
    from every one of its subnets); an interface endpoint has private DNS only where its service
    supports it, and in a VPC of the templates whose DNS attributes let it answer. Routes the stacks
    say are the team's (`hybridsync:routes`, `-c existing_db_endpoints=false`) reach everything: no
    template shows them, so `hybridsync doctor --deployed` checks them instead."""
    findings = []
    for ident, endpoint in templates.resources("AWS::EC2::VPCEndpoint"):
        service = _endpoint_service(templates, ident[0], endpoint)
        if endpoint["Properties"].get("VpcEndpointType") == "Interface" and endpoint["Properties"].get(
            "PrivateDnsEnabled", False
        ):
            for vpc in templates.mentions(ident[0], endpoint["Properties"].get("VpcId")):
                attributes = (templates.get(vpc) or {}).get("Properties", {})
                if (templates.get(vpc) or {}).get("Type") != "AWS::EC2::VPC":
                    continue
                # AWS::EC2::VPC's defaults: EnableDnsSupport true, EnableDnsHostnames false
                off = [name for name, default in (("EnableDnsSupport", True), ("EnableDnsHostnames", False))
                       if str(attributes.get(name, default)).lower() != "true"]  # fmt: skip
                if off:
                    findings.append(
                        Finding(
                            "vpc-endpoint-dns",
                            f"{ident[0]}/{ident[1]}",
                            f"an interface endpoint with private DNS in VPC {vpc[0]}/{vpc[1]}, whose "
                            f"{' and '.join(off)} is not true: AWS requires both for private DNS",
                            PAGES["endpoint-vpc-dns"],
                        )
                    )
            if service in NO_PRIVATE_DNS:
                findings.append(
                    Finding(
                        "vpc-endpoint-dns",
                        f"{ident[0]}/{ident[1]}",
                        f"an interface endpoint "
                        f"of {service} with private DNS: {service} does not support it (the deploy "
                        "fails); give clients the endpoint's name instead",
                        PAGES[NO_PRIVATE_DNS[service]],
                    )
                )
            only_inbound = (
                endpoint["Properties"]
                .get("DnsOptions", {})
                .get("PrivateDnsOnlyForInboundResolverEndpoint", "OnlyInboundResolver")
            )
            gateway = any(  # inbound-only DNS sends the VPC's own calls to an S3 gateway endpoint
                e["Properties"].get("VpcEndpointType") == "Gateway"
                and _endpoint_service(templates, other[0], e) == "s3"
                and json.dumps(e["Properties"].get("VpcId"))
                == json.dumps(endpoint["Properties"].get("VpcId"))
                for other, e in templates.resources("AWS::EC2::VPCEndpoint")
            )
            if service == "s3" and only_inbound != "AllResolvers" and not gateway:
                findings.append(
                    Finding(
                        "vpc-endpoint-dns",
                        f"{ident[0]}/{ident[1]}",
                        "an S3 interface endpoint "
                        "with private DNS only for inbound resolvers needs a gateway endpoint in "
                        "its VPC; set PrivateDnsOnlyForInboundResolverEndpoint AllResolvers",
                        PAGES["s3-privatelink"],
                    )
                )
    for ident, _ in templates.resources("AWS::Lambda::Function"):
        found = network(templates, *ident)
        for service, why in (found.unreachable if found else {}).items():
            findings.append(
                Finding(
                    "vpc-route",
                    found.function,
                    f"calls {service} ({why}) but has no route to it "  # type: ignore[union-attr]
                    "from its VPC: no gateway endpoint on every one of its subnets' route tables, no "
                    "interface endpoint admitting its "
                    "security group (with private DNS, or its name given to the client), no NAT",
                    PAGES["lambda-vpc"],
                )
            )
    for ident, schedule in templates.resources("AWS::SecretsManager::RotationSchedule"):
        hosted = schedule["Properties"].get("HostedRotationLambda") or {}
        groups = hosted.get("VpcSecurityGroupIds")
        if not groups:
            continue
        reached = reach(templates, ident[0], [groups], [], {})
        if "secretsmanager" not in reached and "*" not in reached:
            findings.append(
                Finding(
                    "vpc-route",
                    f"{ident[0]}/{ident[1]}",
                    "its rotation function runs in the VPC "
                    "and cannot reach Secrets Manager: no endpoint admits its security group",
                    PAGES["rotation-network"],
                )
            )
    return findings


def _key_of(templates: Templates, ident: Id, resource: dict[str, Any]) -> Any:
    """The customer-managed key a resource is encrypted with (None: none, or AWS's own)."""
    properties = resource.get("Properties", {})
    kind = resource["Type"]
    if kind == "AWS::SecretsManager::Secret":
        key = properties.get("KmsKeyId")
    elif kind == "AWS::SQS::Queue":
        key = properties.get("KmsMasterKeyId")
    elif kind == "AWS::S3::Bucket":
        rules = properties.get("BucketEncryption", {}).get("ServerSideEncryptionConfiguration", [])
        key = next((r["ServerSideEncryptionByDefault"].get("KMSMasterKeyID") for r in rules), None)
    elif kind == "AWS::Kinesis::Stream":
        key = properties.get("StreamEncryption", {}).get("KeyId")
    elif kind in ("AWS::DynamoDB::GlobalTable", "AWS::DynamoDB::Table"):
        replicas = properties.get("Replicas", [{}])
        key = (replicas[0].get("SSESpecification") or properties.get("SSESpecification") or {}).get(
            "KMSMasterKeyId"
        )
    else:
        return None
    return None if key is None or "alias/aws/" in json.dumps(key) else key


# (resource type, an action on it) -> the KMS actions its caller needs, and the page that says so
KMS_NEEDS: dict[tuple[str, str], tuple[tuple[str, ...], str]] = {
    ("AWS::SecretsManager::Secret", "secretsmanager:GetSecretValue"): (("kms:Decrypt",), "secret-key"),
    ("AWS::SQS::Queue", "sqs:SendMessage"): (("kms:GenerateDataKey", "kms:Decrypt"), "sqs-key"),
    ("AWS::SQS::Queue", "sqs:ReceiveMessage"): (("kms:Decrypt",), "sqs-key"),
    ("AWS::S3::Bucket", "s3:PutObject"): (("kms:GenerateDataKey",), "s3-key"),
    ("AWS::S3::Bucket", "s3:GetObject"): (("kms:Decrypt",), "s3-key"),
    ("AWS::DynamoDB::GlobalTable", "dynamodb:GetRecords"): (("kms:Decrypt",), "stream-key"),
    ("AWS::Kinesis::Stream", "kinesis:GetRecords"): (("kms:Decrypt",), "kinesis-key"),
}


def _on_key(templates: Templates, key_text: str, key: set[Id], stack: str, named: Any) -> bool:
    """Whether a statement's Resource names a key: `*`, its ARN, or a reference to it."""
    named_key = templates.mentions(stack, named) & key
    return bool(key_text in json.dumps(named) or "*" in _listed(named) or named_key)


def _secrets_of(templates: Templates, stack: str, value: Any) -> set[Id]:
    """The secrets a value names, through a target attachment (RDS's secret of a cluster)."""
    found = set()
    for ident in templates.mentions(stack, value):
        resource = templates.get(ident) or {}
        if resource.get("Type") == "AWS::SecretsManager::SecretTargetAttachment":
            found |= templates.mentions(ident[0], resource["Properties"]["SecretId"])
        else:
            found.add(ident)
    return found


def kms_rules(templates: Templates) -> list[Finding]:
    """Every principal that uses a customer-key resource may use the key as AWS requires: each role
    for what it reads and writes (its dead-letter queue and its mapping's failure destination
    included), a proxy for its secrets, a rotation for the secret it rotates."""
    findings = []
    users: list[tuple[str, Id, list[tuple[str, dict[str, Any]]], list[tuple[str, Id]]]] = []
    for ident, function in templates.resources("AWS::Lambda::Function"):
        role = templates.role_of(ident)
        if role is None:
            continue
        statements = templates.policy_statements(role)
        touched = [
            (action, r)
            for stack, s in statements
            if s.get("Effect") == "Allow"
            for action in _listed(s.get("Action"))
            for r in _secrets_of(templates, stack, s.get("Resource"))
        ]
        queue = templates.target(
            ident[0], function["Properties"].get("DeadLetterConfig", {}).get("TargetArn")
        )
        if queue:
            touched.append(("sqs:SendMessage", queue))
        for m_ident, mapping in templates.resources("AWS::Lambda::EventSourceMapping"):
            if templates.function_of(m_ident[0], mapping["Properties"]["FunctionName"]) == ident:
                destination = mapping["Properties"].get("DestinationConfig", {}).get("OnFailure", {})
                touched += [
                    ("s3:PutObject", d)
                    for d in templates.mentions(m_ident[0], destination.get("Destination"))
                ]
        users.append((f"{ident[0]}/{ident[1]}", role, statements, touched))
    for ident, proxy in templates.resources("AWS::RDS::DBProxy"):
        role = templates.target(ident[0], proxy["Properties"]["RoleArn"])
        secrets = [
            ("secretsmanager:GetSecretValue", s)
            for auth in proxy["Properties"]["Auth"]
            for s in _secrets_of(templates, ident[0], auth.get("SecretArn"))
        ]
        if role:
            users.append((f"{ident[0]}/{ident[1]}", role, templates.policy_statements(role), secrets))
    for who, _, statements, touched in users:
        for action, resource_id in sorted(set(touched)):
            resource = templates.get(resource_id)
            if resource is None:
                continue
            needs = KMS_NEEDS.get((resource["Type"], action))
            key = _key_of(templates, resource_id, resource)
            if needs is None or key is None:
                continue
            key_text = templates.text(resource_id[0], key)
            on_key = functools.partial(_on_key, templates, key_text, templates.mentions(resource_id[0], key))
            for kms in needs[0]:
                granted = any(
                    s.get("Effect") == "Allow"
                    and any(re.fullmatch(a.replace("*", ".*"), kms, re.I) for a in _listed(s.get("Action")))
                    and on_key(st, s.get("Resource"))
                    for st, s in statements
                )
                if denied := denials(statements, kms, covers=on_key):
                    findings.append(
                        Finding(
                            "kms-actions",
                            who,
                            f"{action} on {resource_id[0]}/{resource_id[1]} (under {key_text}) needs {kms} "
                            f"on that key, which its role denies ({_shown(denied)}): an explicit deny "
                            "overrides every allow",
                            PAGES["deny"],
                        )
                    )
                elif not granted:
                    findings.append(
                        Finding(
                            "kms-actions",
                            who,
                            f"{action} on {resource_id[0]}/{resource_id[1]} "
                            f"(under {key_text}) needs {kms} on that key, which its role lacks",
                            PAGES[needs[1]],
                        )
                    )
    for ident, schedule in templates.resources("AWS::SecretsManager::RotationSchedule"):
        hosted = schedule["Properties"].get("HostedRotationLambda")
        secret = next(iter(_secrets_of(templates, ident[0], schedule["Properties"]["SecretId"])), None)
        resource = templates.get(secret) if secret else None
        if (
            hosted is not None
            and resource
            and _key_of(templates, secret, resource)
            and not hosted.get("KmsKeyArn")
        ):  # type: ignore[arg-type]
            findings.append(
                Finding(
                    "kms-actions",
                    f"{ident[0]}/{ident[1]}",
                    "rotates a secret under a customer "
                    "key without naming it (HostedRotationLambda KmsKeyArn): the rotation cannot "
                    "decrypt it",
                    PAGES["secret-key"],
                )
            )
    return findings


def trust_rules(templates: Templates) -> list[Finding]:
    """Each database connection trusts the CA its server presents: RDS Proxy's certificates chain to
    Amazon Root CA (certifi's roots, the default); an instance's or cluster's to the RDS CA, which a
    direct connection must be given (`-c db_root_certificates=`)."""
    findings = []
    for ident, function in templates.resources("AWS::Lambda::Function"):
        variables = function["Properties"].get("Environment", {}).get("Variables", {})
        if "DB_ROLE" not in variables:
            continue
        through_proxy = variables.get("DB_IAM_AUTH") == "true" and any(
            (templates.get(t) or {}).get("Type") == "AWS::RDS::DBProxy"
            for t in templates.mentions(ident[0], variables.get("DB_HOST"))
        )
        if not through_proxy and not variables.get("DB_SSLROOTCERT"):
            findings.append(
                Finding(
                    "database-trust",
                    f"{ident[0]}/{ident[1]}",
                    "connects straight to the "
                    "database with verify-full against certifi's roots, which hold no RDS CA: "
                    "ship the RDS bundle (-c db_root_certificates=) or connect through the proxy",
                    PAGES["rds-tls"],
                )
            )
    return findings


def order_rules(templates: Templates) -> list[Finding]:
    """A login's password is rotated only once the login exists: a schedule rotates at once when it
    is created, so the schedule of a secret whose login a deploy step makes (a custom resource whose
    properties name the secret: the Users step) must be in that step's stack and depend on it; and
    the schedule of a secret attached to a cluster (the admin's, whose login comes with it) must
    depend on an instance of it, in its stack: a cluster answers no connection before its writer
    instance is up, and CloudFormation makes the schedule beside the cluster: Secrets Manager
    rotates a secret at once when its schedule is made (RotationSchedule's RotateImmediatelyOnUpdate,
    true by default), and a cluster takes no login before it has an instance."""
    findings = []
    steps: dict[Id, set[Id]] = {}  # a deploy step -> the secrets whose logins it makes
    for ident, step in templates.resources("AWS::CloudFormation::CustomResource"):
        named = _secrets_of(templates, ident[0], step.get("Properties", {}))
        if named := {n for n in named if (templates.get(n) or {}).get("Type") in SECRET_TYPES}:
            steps[ident] = named
    for ident, schedule in templates.resources("AWS::SecretsManager::RotationSchedule"):
        secrets = _secrets_of(templates, ident[0], schedule["Properties"]["SecretId"])
        after = {(ident[0], d) for d in _listed(schedule.get("DependsOn"))}
        instances = _instances_of(templates, ident[0], schedule["Properties"]["SecretId"], secrets)
        if instances and not any(i[0] != ident[0] or i in _depends_on(templates, ident) for i in instances):
            findings.append(
                Finding(
                    "rotation-order",
                    f"{ident[0]}/{ident[1]}",
                    "may rotate before "
                    f"{', '.join(sorted(f'{i[0]}/{i[1]}' for i in instances))} takes logins (a schedule "
                    "rotates at once when created, and a cluster without its instance answers no "
                    "connection): the first rotation fails; make the schedule depend on the writer instance",
                    PAGES["rotation-order"],
                )
            )
        for step, named in steps.items():
            if secrets & named and step not in after:
                findings.append(
                    Finding(
                        "rotation-order",
                        f"{ident[0]}/{ident[1]}",
                        f"may rotate before {step[0]}/{step[1]} makes its login (a schedule rotates at "
                        "once when created): the first rotation fails and leaves an AWSPENDING version; "
                        "schedule it in that stack, after that step",
                        PAGES["rotation-order"],
                    )
                )
    return findings


def _instances_of(templates: Templates, stack: str, secret_id: Any, secrets: set[Id]) -> set[Id]:
    """The DB instances whose logins a rotated secret holds: through its target attachment, the
    instance it names, or the instances of the cluster it names."""
    attachments = {a for a in templates.mentions(stack, secret_id)
                   if (templates.get(a) or {}).get("Type") == SECRET_TYPES[1]}  # fmt: skip
    for ident, attachment in templates.resources(SECRET_TYPES[1]):
        if templates.mentions(ident[0], attachment["Properties"]["SecretId"]) & secrets:
            attachments.add(ident)
    targets = {
        t
        for a in attachments
        for t in templates.mentions(a[0], (templates.get(a) or {}).get("Properties", {}).get("TargetId"))
    }
    found = {t for t in targets if (templates.get(t) or {}).get("Type") == "AWS::RDS::DBInstance"}
    for ident, instance in templates.resources("AWS::RDS::DBInstance"):
        if templates.mentions(ident[0], instance["Properties"].get("DBClusterIdentifier")) & targets:
            found.add(ident)
    return found


def _depends_on(templates: Templates, resource: Id) -> set[Id]:
    """Every resource of its stack CloudFormation creates before `resource`: its DependsOn and its
    references, followed through."""
    seen: set[Id] = set()
    todo = [resource]
    while todo:
        current = templates.get(todo.pop()) or {}
        stack = resource[0]
        direct = {(stack, d) for d in _listed(current.get("DependsOn"))}
        direct |= {m for m in templates.mentions(stack, current.get("Properties", {})) if m[0] == stack}
        todo += list(direct - seen)
        seen |= direct
    return seen


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


RATE = re.compile(r"rate\((\d+) (minute|minutes|hour|hours|day|days)\)")


def freshness_rules(templates: Templates) -> list[Finding]:
    """What `-c freshness=realtime` promises (a change on the other side within a second) holds in
    the templates: no stream mapping of an engine consumer waits to fill a batch (a batching
    window delays every change by up to its length), and the outbox drain a schedule starts polls
    until the next run (OUTBOX_POLL_MS, a timeout past the schedule's period): a drain that runs
    once a minute makes a PostgreSQL change wait up to that minute."""
    findings = []

    def realtime(function: Id | None) -> dict[str, Any] | None:
        properties = (templates.get(function) or {}).get("Properties", {}) if function else {}
        variables = properties.get("Environment", {}).get("Variables", {})
        return properties if variables.get("HYBRIDSYNC_FRESHNESS") == "realtime" else None

    for ident, mapping in templates.resources("AWS::Lambda::EventSourceMapping"):
        properties = mapping["Properties"]
        window = int(properties.get("MaximumBatchingWindowInSeconds") or 0)
        if window and realtime(templates.function_of(ident[0], properties.get("FunctionName"))):
            findings.append(Finding(
                "freshness", f"{ident[0]}/{ident[1]}",
                f"waits up to {window} s to fill a batch, under freshness=realtime (a change seen "
                "within a second): drop the window (`-c stream_batching_window_s` / "
                "`aggregate_batching_window_s` unset) or choose `-c freshness=economy`",
                PAGES["batching-window"]))  # fmt: skip
    for ident, rule in templates.resources("AWS::Events::Rule"):
        matched = RATE.fullmatch(rule.get("Properties", {}).get("ScheduleExpression", ""))
        for target in rule.get("Properties", {}).get("Targets", []):
            function = templates.function_of(ident[0], target.get("Arn"))
            properties = realtime(function)
            if (
                not matched
                or properties is None
                or not properties.get("Handler", "").endswith("sql_sync.handler")
            ):
                continue
            unit = {"minute": 60, "hour": 3600, "day": 86400}[matched[2].rstrip("s")]
            period = int(matched[1]) * unit
            polls = "OUTBOX_POLL_MS" in properties.get("Environment", {}).get("Variables", {})
            if properties.get("ReservedConcurrentExecutions") == 1:  # 0 or none: not held to one
                findings.append(Finding(
                    "freshness", f"{function[0]}/{function[1]}",  # type: ignore[index]
                    "reserves one concurrent run, under freshness=realtime: the next run is throttled "
                    "while the running one polls, so it cannot take over (leave "
                    "`sql_sync_reserved_concurrency` unset: 2)", PAGES["async-throttle"]))  # fmt: skip
            if not polls or int(properties.get("Timeout", 3)) <= period:
                findings.append(Finding(
                    "freshness", f"{function[0]}/{function[1]}",  # type: ignore[index]
                    f"the outbox drain runs every {period} s and does not poll until the next run "
                    "(OUTBOX_POLL_MS and a timeout past the period), under freshness=realtime: "
                    f"a PostgreSQL change may wait {period} s", PAGES["schedule-precision"]))  # fmt: skip
    return findings


RULES = (topic_rules, metric_rules, network_rules, kms_rules, trust_rules, order_rules, reader_rules,
         kinesis_reader_rules, freshness_rules)  # fmt: skip


def check(templates: Templates) -> list[Finding]:
    """Every finding of every rule."""
    return [finding for rule in RULES for finding in rule(templates)]


def enforce(templates: Templates) -> None:
    """Raise DeployTruthError with every finding, if any."""
    if findings := check(templates):
        raise DeployTruthError(findings)
