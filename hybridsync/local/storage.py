"""SQS and S3 on moto server: the templates' queues (the functions' dead-letter queues among them)
and buckets (the mappings' on-failure bucket), and what they hold."""

from __future__ import annotations

from hybridsync.local import create_bucket
from hybridsync.local.account import Account
from hybridsync.local.template import Assembly


class Storage:
    """The app's queues and buckets."""

    def __init__(self, account: Account) -> None:
        self.account = account
        self.sqs = account.client("sqs")
        self.dead_letter_queues: dict[str, str] = {}  # function -> where its failed async events go
        self.dead_letter_arns: dict[str, str] = {}  # function -> that queue's ARN
        self.failed_batches_bucket: str | None = None  # the stream mappings' on-failure bucket
        self._stores: tuple[dict[str, int], int] | None = None  # the last sample()

    def provision(self, account: Account, assembly: Assembly) -> None:
        self.create_queues(account, assembly)
        self.create_buckets(account)

    def create_queues(self, account: Account, assembly: Assembly) -> None:
        sqs = self.sqs
        arns = {}
        for queue in assembly.resources("AWS::SQS::Queue"):
            name = assembly.resolve(queue.stack, {"Fn::GetAtt": [queue.logical_id, "QueueName"]})
            url = sqs.create_queue(QueueName=name)["QueueUrl"]
            assembly.set(queue, Ref=url)
            account.queues[name] = url
            arns[assembly.resolve(queue.stack, {"Fn::GetAtt": [queue.logical_id, "Arn"]})] = url
        for function in account.python_functions():
            config = assembly.resolve(function.stack, function.properties.get("DeadLetterConfig", {}))
            if config.get("TargetArn"):
                self.dead_letter_queues[function.construct] = arns[config["TargetArn"]]
                self.dead_letter_arns[function.construct] = config["TargetArn"]

    def create_buckets(self, account: Account) -> None:
        s3 = account.client("s3")
        for name in set(account.buckets.values()):
            create_bucket(s3, name)  # in the account's Region, kept if it exists

    def failed_batches_stored(self) -> int:
        """The failed batches the mappings stored in the failure bucket (not redriven yet)."""
        if not self.failed_batches_bucket:
            return 0
        s3 = self.account.client("s3")
        return s3.list_objects_v2(Bucket=self.failed_batches_bucket, Prefix="aws/lambda/").get("KeyCount", 0)

    def failure_environment(self) -> dict[str, str]:
        """Where `hybridsync failed-batches` finds the mappings' failed batches."""
        return {"FAILED_BATCHES_BUCKET": self.failed_batches_bucket} if self.failed_batches_bucket else {}

    def sample(self) -> tuple[dict[str, int], int]:
        """Each queue's depth (CloudWatch's ApproximateNumberOfMessagesVisible is the API's
        ApproximateNumberOfMessages) and the failed batches stored: read once a second by the alarms'
        clock, and what `status()` shows."""
        visible = "ApproximateNumberOfMessages"
        depths = {
            name: int(
                self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=[visible])["Attributes"][visible]
            )
            for name, url in self.account.queues.items()
        }
        self._stores = (depths, self.failed_batches_stored())
        return self._stores

    def stores(self) -> tuple[dict[str, int], int]:
        """The last sample, or one now."""
        return self._stores or self.sample()
