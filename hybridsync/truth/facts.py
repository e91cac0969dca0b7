"""AWS's facts the deploy truth judges templates by, each with the page it comes from: pages,
the metrics AWS publishes, the services that lack private DNS, what Lambda does for a function."""

from __future__ import annotations

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
    # a global table's StreamSpecification: "must be specified when you have more than one replica"
    # (multi-Region eventual consistency); its StreamArn: the stream of the stack's own replica
    "replica-stream": f"{DOCS}/AWSCloudFormation/latest/UserGuide/"
    "aws-properties-dynamodb-globaltable-streamspecification.html",
    # "Each global table produces an independent stream based on all its write operations, wherever
    # they started from" (global tables' checklist and FAQ)
    "replica-consumer": f"{DOCS}/amazondynamodb/latest/developerguide/"
    "bp-global-table-design.prescriptive-guidance.checklist-and-faq.html",
    # a secondary cluster takes the primary's logins ("Cannot specify user name for cross region
    # replication cluster", CreateDBCluster's InvalidParameterCombination), its engine version, and
    # when encrypted a KmsKeyId "valid in the destination AWS Region" (CreateDBCluster's KmsKeyId)
    "aurora-secondary": f"{DOCS}/AmazonRDS/latest/AuroraUserGuide/aurora-global-database-attaching.html",
    # "For throttling errors (429) ... Lambda returns the event to the queue and attempts to run the
    # function again for up to 6 hours"
    "async-throttle": f"{DOCS}/lambda/latest/dg/invocation-async-error-handling.html",
}
STANDBY = "hybridsync:standby"  # a standby stack's template metadata: the Region it waits in
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
        # global tables (version 2019.11.21): "the elapsed time between when an item is written to a
        # replica table, and when that item appears in another replica", per receiving Region
        "ReplicationLatency": [("ReceivingRegion", "TableName")],
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
ENDPOINT_SERVICES = {"dynamodb-streams": "dynamodbstreams", "kinesis-streams": "kinesis"}
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
