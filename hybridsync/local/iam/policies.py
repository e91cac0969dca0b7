"""IAM, enforced locally: every AWS call a function makes is checked against the identity-based
policies of its execution role in the synthesized template, and a call no statement allows (or one
a statement denies) fails with AccessDeniedException, as in AWS. So a function that works on your
machine has the grants it needs in AWS too.

What is evaluated: the role's inline policies, `AWS::IAM::Policy` and customer-managed
`AWS::IAM::ManagedPolicy` resources attached to it (AWS-managed policies grant logging and network
interfaces only, nothing a function calls here); Allow and Deny, Action/NotAction,
Resource/NotResource with `*` and `?`, and the conditions the app's policies use (String*, Arn*,
Bool, each with IfExists; keys case-insensitive; a statement with any other condition never allows and
always denies, so unknown conditions err on the side of AWS refusing). A function's calls are checked
against its role only (bucket policies and SCPs are not evaluated; a customer key's policy is taken to
delegate to IAM, as the default key policy does); `resource_allows` evaluates a resource-based policy
(a topic's, a key's) for a service principal, as the local CloudWatch publishes through it.
The request's action and resources follow the service authorization reference: a transaction needs
the action of each item it writes, a Query on an index the index's ARN, an S3 list the bucket with
`s3:prefix`; a call on a resource under a customer-managed key also needs the KMS actions that
service asks of its caller (`kms_requested`).

Self-contained (no hybridsync imports): a function's worker loads this file by its path, as it
loads `dynamodb_faults.py`, beside the library its asset ships.
"""

from __future__ import annotations

import base64
import fnmatch
import json
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

AWS_MANAGED = ":iam::aws:policy/"
ITEM_ACTIONS = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
    "Get": "GetItem",
}
S3_ACTIONS = {
    "HeadObject": "GetObject",
    "ListObjectsV2": "ListBucket",
    "ListObjects": "ListBucket",
    "CreateMultipartUpload": "PutObject",
    "UploadPart": "PutObject",
    "CompleteMultipartUpload": "PutObject",
    "AbortMultipartUpload": "AbortMultipartUpload",
    "DeleteObjects": "DeleteObject",
    "HeadBucket": "ListBucket",
}
STRING_CONDITIONS = {"StringEquals", "StringLike", "StringNotEquals", "StringNotLike"}
# ARN operators compare as StringLike/StringEquals do (IAM reference, "ARN condition operators")
ARN_CONDITIONS = {"ArnEquals": "StringEquals", "ArnLike": "StringLike", "ArnNotEquals": "StringNotEquals",
                  "ArnNotLike": "StringNotLike"}  # fmt: skip
Request = tuple[str, str, dict[str, str]]  # (action, resource ARN, condition context)
# The KMS actions each service asks of the caller of an operation on a resource under a customer-
# managed key (the caller's own permissions; an AWS-managed key's policy allows its service's users):
KMS_ACTIONS: dict[tuple[str, str], tuple[str, ...]] = {
    # Secrets Manager, "Secret encryption and decryption", Permissions for the KMS key:
    # https://docs.aws.amazon.com/secretsmanager/latest/userguide/security-encryption.html#security-encryption-authz
    ("secretsmanager", "GetSecretValue"): ("kms:Decrypt",),
    ("secretsmanager", "PutSecretValue"): ("kms:GenerateDataKey", "kms:Decrypt"),
    ("secretsmanager", "UpdateSecret"): ("kms:GenerateDataKey", "kms:Decrypt"),
    # SQS, "Amazon SQS key management", producers need both, consumers kms:Decrypt:
    # https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-key-management.html#send-to-encrypted-queue
    ("sqs", "SendMessage"): ("kms:GenerateDataKey", "kms:Decrypt"),
    ("sqs", "SendMessageBatch"): ("kms:GenerateDataKey", "kms:Decrypt"),
    ("sqs", "ReceiveMessage"): ("kms:Decrypt",),
    # S3, "Using server-side encryption with AWS KMS keys (SSE-KMS)": an upload needs
    # kms:GenerateDataKey, a download kms:Decrypt (a HEAD reads no data):
    # https://docs.aws.amazon.com/AmazonS3/latest/userguide/UsingKMSEncryption.html
    # a multipart upload: GenerateDataKey to start it, Decrypt for its parts and to assemble them:
    # https://repost.aws/knowledge-center/s3-large-file-encryption-kms-key
    ("s3", "PutObject"): ("kms:GenerateDataKey",),
    ("s3", "GetObject"): ("kms:Decrypt",),
    ("s3", "CreateMultipartUpload"): ("kms:GenerateDataKey",),
    ("s3", "UploadPart"): ("kms:Decrypt",),
    ("s3", "CompleteMultipartUpload"): ("kms:Decrypt",),
    # DynamoDB: nothing of the caller for the table's items. The table's key is used through the grant
    # DynamoDB holds on it ("How Amazon DynamoDB uses AWS KMS", Using grants); only creating or
    # changing the table's encryption asks kms:CreateGrant/DescribeKey:
    # https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/encryption.howitworks.html
    # Its stream's records are another matter: a reader of a customer-key table's stream needs
    # kms:Decrypt (aws/aws-cdk#22796, fixed by #23400: grantStreamRead now grants it), as the deploy
    # truth's kms-actions rule says.
    ("dynamodbstreams", "GetRecords"): ("kms:Decrypt",),
}


# --- the role's statements, from the template ---------------------------------------------------


def role_statements(assembly: Any, function: Any) -> tuple[str, list[dict[str, Any]]]:
    """The execution role's name and every statement of its identity-based policies, resolved to
    local ARNs (`assembly` is a hybridsync.local.template.Assembly, `function` its Resource)."""
    role_ref = function.properties.get("Role")
    role_id = role_ref["Fn::GetAtt"][0] if isinstance(role_ref, dict) and "Fn::GetAtt" in role_ref else None
    template = assembly.templates[function.stack]["Resources"]
    if role_id is None or role_id not in template:
        return str(role_ref), []
    role = template[role_id]["Properties"]
    documents = [p["PolicyDocument"] for p in role.get("Policies", [])]
    attached = {json.dumps(arn, sort_keys=True) for arn in role.get("ManagedPolicyArns", [])}
    for logical_id, resource in template.items():
        properties = resource.get("Properties", {})
        if resource["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy") and (
            {"Ref": role_id} in properties.get("Roles", [])
            or json.dumps({"Ref": logical_id}, sort_keys=True) in attached
        ):
            documents.append(properties["PolicyDocument"])
    statements = []
    for document in documents:
        listed = document.get("Statement", [])
        statements += listed if isinstance(listed, list) else [listed]
    return role.get("RoleName") or role_id, assembly.resolve(function.stack, statements)


# --- what a request asks for --------------------------------------------------------------------


def requested(
    service: str,
    operation: str,
    params: dict[str, Any],
    region: str,
    account: str,
    keys: dict[str, str] | None = None,
) -> list[Request]:
    """The (action, resource, condition context) pairs AWS authorizes for one API call; `keys`:
    resource (ARN, or a secret's name) -> the customer-managed key it is under."""
    found = _requested(service, operation, params, region, account)
    return found + kms_requested(service, operation, found, params, keys or {})


def kms_requested(
    service: str, operation: str, found: list[Request], params: dict[str, Any], keys: dict[str, str]
) -> list[Request]:
    """The KMS actions the call needs on the keys of the resources it touches (KMS_ACTIONS)."""
    actions = KMS_ACTIONS.get((service, operation), ())
    if not actions or not keys:
        return []
    key = None
    if service == "secretsmanager":
        key = keys.get(str(params.get("SecretId", "")))
    elif service == "s3":
        key = keys.get(f"arn:aws:s3:::{params.get('Bucket', '')}")
    elif found:
        key = keys.get(found[0][1])
    return [(action, key, {}) for action in actions] if key else []


def _requested(
    service: str, operation: str, params: dict[str, Any], region: str, account: str
) -> list[Request]:
    if service in ("dynamodb", "dynamodbstreams"):
        return _dynamodb(operation, params, f"arn:aws:dynamodb:{region}:{account}:table/")
    if service == "s3":
        action = "s3:" + S3_ACTIONS.get(operation, operation)
        bucket = f"arn:aws:s3:::{params.get('Bucket', '*')}"
        if operation == "DeleteObjects":
            return [(action, f"{bucket}/{o['Key']}", {}) for o in params.get("Delete", {}).get("Objects", [])]
        if "Key" in params:
            return [(action, f"{bucket}/{params['Key']}", {})]
        return [
            (action, bucket, {"s3:prefix": params.get("Prefix", "")} if action == "s3:ListBucket" else {})
        ]
    if service == "sqs":
        url = params.get("QueueUrl")
        name = urlsplit(url).path.rstrip("/").rpartition("/")[2] if url else params.get("QueueName", "*")
        return [(f"sqs:{operation}", f"arn:aws:sqs:{region}:{account}:{name}", {})]
    if service == "sns":
        return [(f"sns:{operation}", params.get("TopicArn", "*"), {})]
    if service == "lambda":  # an event source mapping by its UUID; Invoke the function; List* on none
        if "UUID" in params:
            return [
                (
                    f"lambda:{operation}",
                    f"arn:aws:lambda:{region}:{account}:event-source-mapping:{params['UUID']}",
                    {},
                )
            ]
        if operation == "Invoke":
            name = str(params.get("FunctionName", "*"))
            arn = name if name.startswith("arn:") else f"arn:aws:lambda:{region}:{account}:function:{name}"
            return [("lambda:InvokeFunction", arn, {})]
        return [(f"lambda:{operation}", "*", {})]
    if service == "kinesis":
        return [(f"kinesis:{operation}", _kinesis(params, f"arn:aws:kinesis:{region}:{account}:stream/"), {})]
    if service == "secretsmanager":
        secret = params.get("SecretId", "*")
        return [(f"secretsmanager:{operation}", secret if secret.startswith("arn:") else "*", {})]
    return [(f"{service}:{operation}", "*", {})]


def _dynamodb(operation: str, params: dict[str, Any], tables: str) -> list[Request]:
    if operation in ("BatchGetItem", "BatchWriteItem"):
        return [(f"dynamodb:{operation}", tables + name, {}) for name in params.get("RequestItems", {})]
    if operation in ("TransactWriteItems", "TransactGetItems"):
        return [
            (f"dynamodb:{ITEM_ACTIONS[kind]}", tables + item[kind]["TableName"], {})
            for item in params.get("TransactItems", [])
            for kind in item
        ]
    if "StreamArn" in params:
        return [(f"dynamodb:{operation}", params["StreamArn"], {})]
    if operation == "GetRecords":  # authorized on the stream, which DynamoDB Local's iterators begin with
        stream = str(params.get("ShardIterator", "")).split("|", 1)[0]
        return [(f"dynamodb:{operation}", stream if stream.startswith("arn:") else "*", {})]
    # the Service Authorization Reference's resource types: ExportTableToPointInTime on the table,
    # DescribeExport on the export (`table/<name>/export/<id>`), ListExports on none ("*")
    if operation == "ExportTableToPointInTime":  # of a table, named by its ARN
        return [(f"dynamodb:{operation}", params["TableArn"], {})]
    if "ExportArn" in params:  # DescribeExport: the export's own ARN, under its table's
        return [(f"dynamodb:{operation}", params["ExportArn"], {})]
    if "TableName" not in params:  # ListTables, DescribeLimits, ...
        return [(f"dynamodb:{operation}", "*", {})]
    resource = tables + params["TableName"]
    if params.get("IndexName"):
        resource += f"/index/{params['IndexName']}"
    return [(f"dynamodb:{operation}", resource, {})]


def _kinesis(params: dict[str, Any], streams: str) -> str:
    """The stream (or consumer) a Kinesis request acts on; GetRecords on its iterator's stream (moto's
    iterators are base64 of `<stream name>:<shard>:<sequence number>`)."""
    if arn := params.get("ConsumerARN") or params.get("StreamARN"):
        return str(arn)
    if name := params.get("StreamName"):
        return streams + str(name)
    try:
        return streams + base64.b64decode(str(params["ShardIterator"])).decode().split(":")[0]
    except (KeyError, ValueError):
        return "*"


# --- evaluation ---------------------------------------------------------------------------------


def _listed(value: Any) -> list[str]:
    return value if isinstance(value, list) else [value]


def _matches(patterns: Iterable[str], value: str, *, case: bool = True) -> bool:
    patterns = [p for p in patterns if isinstance(p, str)]  # an ARN nothing local stands for: no match
    if not case:
        value, patterns = value.lower(), [p.lower() for p in patterns]
    return any(fnmatch.fnmatchcase(value, pattern) for pattern in patterns)


def _conditions_hold(condition: dict[str, Any], context: dict[str, str]) -> bool | None:
    """Whether the statement's conditions hold; None when one cannot be evaluated here. Condition
    keys are case-insensitive (IAM reference, "Condition element"): `AWS:SourceOwner` is
    `aws:SourceOwner`; `...IfExists` holds when the key is absent."""
    known = {k.lower(): v for k, v in context.items()}
    for written, tests in condition.items():
        operator = written.removesuffix("IfExists")
        operator = ARN_CONDITIONS.get(operator, operator)
        if operator not in STRING_CONDITIONS and operator != "Bool":
            return None
        for key, expected in tests.items():
            if key.lower() not in known:
                if written.endswith("IfExists"):
                    continue
                return None
            value, wanted = known[key.lower()], [str(e) for e in _listed(expected)]
            if operator == "Bool":
                hit = value.lower() in [w.lower() for w in wanted]
            elif operator.endswith("Like"):
                hit = _matches(wanted, value)
            else:
                hit = value in wanted
            if hit == ("Not" in operator):
                return False
    return True


def _applies(statement: dict[str, Any], action: str, resource: str, context: dict[str, str]) -> bool | None:
    if "Action" in statement and not _matches(_listed(statement["Action"]), action, case=False):
        return False
    if "NotAction" in statement and _matches(_listed(statement["NotAction"]), action, case=False):
        return False
    if "Resource" in statement and not _matches(_listed(statement["Resource"]), resource):
        return False
    if "NotResource" in statement and _matches(_listed(statement["NotResource"]), resource):
        return False
    return _conditions_hold(statement["Condition"], context) if statement.get("Condition") else True


def allowed(statements: list[dict[str, Any]], action: str, resource: str, context: dict[str, str]) -> bool:
    """An explicit Deny wins, then any Allow; otherwise the request is implicitly denied."""
    allow = False
    for statement in statements:
        applies = _applies(statement, action, resource, context)
        if statement.get("Effect") == "Deny" and applies is not False:
            return False
        allow = allow or (statement.get("Effect") == "Allow" and applies is True)
    return allow


def denial(role: str, function: str, account: str, action: str, resource: str) -> str:
    """AWS's message for an identity-based denial."""
    return (
        f"User: arn:aws:sts::{account}:assumed-role/{role}/{function} is not authorized to perform: "
        f"{action} on resource: {resource} because no identity-based policy allows the {action} action"
    )


def _principal_is(statement: dict[str, Any], service: str) -> bool:
    """Whether a resource policy's statement names the service principal: `*`, `{"AWS": "*"}` (every
    principal) or `{"Service": [...]}` listing it; an account or role names no service."""

    def names(principal: Any) -> bool:
        if principal == "*":
            return True
        if not isinstance(principal, dict):
            return False
        return "*" in _listed(principal.get("AWS", [])) or service in _listed(principal.get("Service", []))

    if "NotPrincipal" in statement:
        return not names(statement["NotPrincipal"])
    return names(statement.get("Principal"))


def resource_allows(
    statements: list[dict[str, Any]], service: str, action: str, resource: str, context: dict[str, str]
) -> tuple[bool, str]:
    """A resource-based policy's answer to a service principal's request (a topic policy, a key
    policy: nothing in IAM speaks for a service principal): (allowed, why not: "explicit deny" or
    "no allow")."""
    allow = False
    for statement in statements:
        if not _principal_is(statement, service):
            continue
        applies = _applies(statement, action, resource, context)
        if statement.get("Effect") == "Deny" and applies is not False:
            return False, "explicit deny"
        allow = allow or (statement.get("Effect") == "Allow" and applies is True)
    return allow, "" if allow else "no allow"


# --- in a function's worker ---------------------------------------------------------------------


def kms_denial(service: str, message: str) -> dict[str, str]:
    """The error a service answers when its caller may not use the resource's key: Secrets Manager
    says only "Access to KMS is not allowed" (seen in aws-samples/aws-secrets-manager-rotation-lambdas#53,
    awsdocs/aws-kms-developer-guide#36); SQS relays KMS's denial as KMS.AccessDeniedException (the
    KmsAccessDenied error of its API reference, in its query-compatible code); S3 as AccessDenied."""
    if service == "secretsmanager":
        return {"Code": "AccessDeniedException", "Message": "Access to KMS is not allowed"}
    if service == "sqs":
        kms = "(Service: AWSKMS; Status Code: 400; Error Code: AccessDeniedException)"
        return {"Code": "KMS.AccessDeniedException", "Message": f"{message} {kms}"}
    return {"Code": "AccessDenied", "Message": message}


def install(events: Any, spec: str) -> None:
    """Check every call of the clients a session makes against the role in `spec` (JSON: role,
    function, region, account, statements, and `keys`: resource -> its customer-managed key), raising
    AccessDeniedException as AWS answers it."""
    from botocore.exceptions import ClientError

    policy = json.loads(spec)
    keys = policy.get("keys") or {}

    def check(params: dict[str, Any], model: Any, **_: Any) -> None:
        service = model.service_model.service_name
        for action, resource, context in requested(
            service, model.name, params, policy["region"], policy["account"], keys
        ):
            if not allowed(policy["statements"], action, resource, context):
                message = denial(policy["role"], policy["function"], policy["account"], action, resource)
                if action.startswith("kms:"):
                    error = kms_denial(service, message)
                else:
                    error = {
                        "Code": "AccessDeniedException" if service.startswith("dynamodb") else "AccessDenied",
                        "Message": message,
                    }
                raise ClientError({"Error": error, "ResponseMetadata": {"HTTPStatusCode": 400}}, model.name)

    events.register("before-parameter-build", check)
