"""The app's Lambda functions: each one's worker processes (awslambda/functions.py) with the
environment its template gives it, the custom resources a deploy runs once, and asynchronous
invocations as Lambda runs them (retries, then the dead-letter queue)."""

from __future__ import annotations

import json
import logging
import os
import uuid
from typing import Any

from hybridsync.local.account import Account
from hybridsync.local.awslambda.functions import FunctionError, LocalFunction
from hybridsync.local.iam import policies
from hybridsync.local.iam.roles import Roles
from hybridsync.local.storage import Storage
from hybridsync.local.template import ACCOUNT, Assembly, Resource, TemplateError

log = logging.getLogger(__name__)
ASYNC_RETRIES = 2  # Lambda's default for asynchronous invocations (MaximumRetryAttempts)
DEPLOYED_ENDPOINTS = "AWS_ENDPOINT_URL_"  # botocore's per-service endpoints: deployed VPC endpoint names


class LambdaFunctions:
    """The app's own functions (construct id -> its local function)."""

    def __init__(self, account: Account, roles: Roles, storage: Storage) -> None:
        self.account, self.roles, self.storage = account, roles, storage
        self.functions: dict[str, LocalFunction] = account.functions
        self.custom_resources: list[str] = []  # those run at start, as a deploy runs them

    def provision(self, account: Account, assembly: Assembly) -> None:
        """Each function's workers (started on first use) with its environment."""
        self.build_functions()

    def python_functions(self) -> list[Resource]:
        """The app's own functions: Python handlers shipped as assets (not CDK's framework ones)."""
        return self.account.python_functions()

    def ensure_logins(self) -> None:
        """The database's logins with their secrets' passwords (the Users resource), for a function
        run on its own (`hybridsync invoke`)."""
        self.run_custom_resources(only={"DatabaseUsers"})

    def function_environment(self, function: Resource) -> dict[str, str]:
        # a deployed interface endpoint's name (AWS_ENDPOINT_URL_DYNAMODB_STREAMS, from its DnsEntries)
        # means nothing here: the local endpoints below stand for it
        template = function.properties.get("Environment", {}).get("Variables", {})
        kept = {k: v for k, v in template.items() if not k.startswith(DEPLOYED_ENDPOINTS)}
        variables = self.account.assembly.resolve(function.stack, kept)
        env = {k: str(v) for k, v in variables.items() if v is not None}
        env = self.account.logins.environment(env)  # its login's secret, on the local server
        deployed = env.get("TIMESERIES_PREFIX")
        if deployed:  # tables a function creates are named like the app's own
            env["TIMESERIES_PREFIX"] = self.account.prefix
        if self.account.faults:
            env |= self.account.faults.plan.worker_environment()
        if self.account.retention_s is not None:  # the aggregation's bookkeeping lives as long as the records
            env["STREAM_RETENTION_S"] = str(int(self.account.retention_s))
        if self.account.iam:
            role, statements = self.roles.role(function)
            if deployed:  # its grants name those tables by the deployed prefix: the same rename
                statements = json.loads(
                    json.dumps(statements).replace(f":table/{deployed}-", f":table/{self.account.prefix}-")
                )
            policy = {
                "role": role,
                "function": function.construct,
                "region": self.account.region,
                "account": ACCOUNT,
                "statements": statements,
                "keys": self.roles.keys_for(function),
            }
            env["HYBRIDSYNC_IAM"] = json.dumps(policy)
        if (route := self.roles.network(function)) is not None:  # local/vpc/network.py: its VPC's routes
            env["HYBRIDSYNC_NETWORK"] = json.dumps(route)
        return env | {
            "PATH": os.environ.get("PATH", ""),
            "HOME": os.environ.get("HOME", "/tmp"),
            "AWS_REGION": self.account.region,
            "AWS_DEFAULT_REGION": self.account.region,
            "AWS_ACCESS_KEY_ID": "local",
            "AWS_SECRET_ACCESS_KEY": "local",
            "AWS_LAMBDA_FUNCTION_NAME": function.construct,
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(function.properties.get("MemorySize", 128)),
            "DYNAMODB_ENDPOINT": self.account.dynamodb_endpoint,
            "AWS_ENDPOINT": self.account.services_endpoint,
            "AWS_ENDPOINT_URL_SECRETS_MANAGER": self.account.services_endpoint,
            **({"LAMBDA_ENDPOINT": self.account.lambda_api.endpoint} if self.account.lambda_api else {}),
            "POWERTOOLS_METRICS_DISABLED": os.environ.get("POWERTOOLS_METRICS_DISABLED", "false"),
        }

    def operator_environment(self) -> dict[str, str]:
        """What the operators' commands need to reach the app as they reach a deployed stack: its
        Lambda API, and the functions the stack outputs name (operations, aggregate)."""
        env = {"LAMBDA_ENDPOINT": self.account.lambda_api.endpoint} if self.account.lambda_api else {}
        for variable, construct in (
            ("OPERATIONS_FUNCTION", "Operations"),
            ("AGGREGATE_FUNCTION", "Aggregate"),
            ("MIGRATE_FUNCTION", "Migrate"),
        ):
            if construct in self.functions:
                env[variable] = construct
        return env

    def build_functions(self) -> dict[str, LocalFunction]:
        logs = self.account.state_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        for function in self.account.python_functions():
            reserved = function.properties.get("ReservedConcurrentExecutions")
            log_file = (logs / f"{function.construct}.log").open("a")
            self.account.logs.append(log_file)
            self.functions[function.construct] = LocalFunction(
                name=function.construct,
                asset=self.account.assembly.directory / function.metadata["aws:asset:path"],
                handler=function.properties["Handler"],
                environment=self.function_environment(function),
                timeout_s=float(function.properties.get("Timeout", 3)),
                memory_mb=int(function.properties.get("MemorySize", 128)),
                log=log_file,
                reserved=reserved if reserved is None else int(reserved),
                metric=self._lambda_metric(function.construct),
            )
        return self.functions

    def _lambda_metric(self, function: str) -> Any:
        """What Lambda counts of a function, into the local metrics (dimension FunctionName)."""
        return lambda name, value: self.account.metrics.put(
            "AWS/Lambda", name, {"FunctionName": function}, value
        )

    def function(self, name: str) -> LocalFunction:
        """By construct id, any case, with or without underscores (`write_back` = `WriteBack`)."""
        wanted = name.replace("_", "").replace("-", "").lower()
        for function_name, function in self.functions.items():
            if function_name.lower() == wanted:
                return function
        raise TemplateError(f"no function {name!r}; the app has {', '.join(sorted(self.functions))}")

    def run_custom_resources(self, only: set[str] | None = None) -> list[str]:
        """What a deploy runs once (the database's logins, the schema migration, today's time-series
        tables): each custom resource's Create event (or those of `only`), through CDK's provider
        framework to the app's function it serves. A failure stops the start, as it fails a deploy."""
        ran = []
        for resource in self.account.assembly.resources("AWS::CloudFormation::CustomResource"):
            if only is not None and resource.construct not in only:
                continue
            framework_id = resource.properties["ServiceToken"]["Fn::GetAtt"][0]
            framework = self.account.assembly.templates[resource.stack]["Resources"][framework_id][
                "Properties"
            ]
            served = framework.get("Environment", {}).get("Variables", {}).get("USER_ON_EVENT_FUNCTION_ARN")
            if served is None:
                continue  # a provider of CDK's own, not one of the app's functions
            function = self.functions[self.account.assembly.function_of(resource.stack, served).construct]
            properties = self.account.assembly.resolve(resource.stack, resource.properties)
            stack_id = f"arn:aws:cloudformation:{self.account.region}:{ACCOUNT}:stack/{resource.stack}"
            function.invoke(
                {
                    "RequestType": "Create",
                    "RequestId": str(uuid.uuid4()),
                    "StackId": stack_id,
                    "LogicalResourceId": resource.logical_id,
                    "ResourceType": resource.type,
                    "ResourceProperties": properties,
                }
            )
            ran.append(resource.construct)
        return ran

    def invoke_async(self, function: LocalFunction, event: Any) -> None:
        """An asynchronous invocation as Lambda runs it: retried twice when it fails, then its event
        goes to the function's dead-letter queue; with reserved concurrency 0 it goes there at once,
        untried (Lambda developer guide, "Capturing records of asynchronous invocations")."""
        error, failures = None, 0
        while failures <= ASYNC_RETRIES:
            if function.reserved == 0:
                error = function.throttled()
                break
            try:
                function.invoke(event)
                return
            except FunctionError as failed:
                if self.account.stopping.is_set():
                    return  # the app stopped under a running invocation: nothing to retry
                error = failed
                if failed.error_type != "TooManyRequestsException":
                    failures += 1
                elif self.account.stopping.wait(1.0):  # throttled: Lambda keeps the event and tries again
                    return
        log.warning("%s: asynchronous invocation failed: %s", function.name, error)
        queue = self.storage.dead_letter_queues.get(function.name)
        if queue is None or error is None:
            return
        if refused := self.dead_letter_refusal(function.name):  # Lambda counts it and the event is lost
            log.error("%s: dead-letter queue: %s", function.name, refused)
            function.metric("DeadLetterErrors", 1)
            return
        try:
            self.storage.sqs.send_message(
                QueueUrl=queue,
                MessageBody=json.dumps(event),
                MessageAttributes={
                    "RequestID": {"DataType": "String", "StringValue": str(uuid.uuid4())},
                    "ErrorCode": {
                        "DataType": "String",
                        "StringValue": "200" if function.reserved != 0 else "429",
                    },
                    "ErrorMessage": {"DataType": "String", "StringValue": str(error)[:1000]},
                },
            )
        except Exception:  # Lambda counts it and the event is lost
            log.exception("%s: dead-letter queue", function.name)
            function.metric("DeadLetterErrors", 1)

    def dead_letter_refusal(self, name: str) -> str | None:
        """Why Lambda cannot send a function's failed event to its dead-letter queue, or None. Lambda
        sends it with the function's execution role ("the function's execution role needs
        sqs:SendMessage", Lambda developer guide, invocation-async-retain-records.html#invocation-dlq),
        and to a queue under a customer key that producer needs kms:GenerateDataKey and kms:Decrypt
        too (SQS key management, sqs-key-management.html#send-to-encrypted-queue)."""
        arn = self.storage.dead_letter_arns.get(name)
        function = next((f for f in self.account.python_functions() if f.construct == name), None)
        if not self.account.iam or arn is None or function is None:
            return None
        statements = self.roles.role(function)[1]
        key = self.roles.keys_for(function).get(arn)
        needed = [("sqs:SendMessage", arn)] + (
            [("kms:GenerateDataKey", key), ("kms:Decrypt", key)] if key else []
        )
        for action, resource in needed:
            if not policies.allowed(statements, action, resource, {}):
                return f"the execution role may not {action} on {resource}"
        return None

    def close(self) -> None:
        for function in self.functions.values():
            function.close()
