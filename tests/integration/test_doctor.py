"""`hybridsync doctor` on the local app of the session's synth: it passes on a healthy app, and fails,
naming the check, when one thing is broken on purpose (a mapping disabled by hand while the template
says enabled; a secret a function reads, scheduled for deletion)."""

from __future__ import annotations

import contextlib
import io
import json
import uuid

import boto3
import pytest

from hybridsync.cli import main
from hybridsync.local.app import LocalApp
from hybridsync.local.template import Assembly


@pytest.fixture(scope="module")
def app(cloud_assembly, stack, tmp_path_factory):
    """The app on the session's services, its env file written as `hybridsync up` writes it."""
    state, prefix = tmp_path_factory.mktemp("doctor"), f"dr{uuid.uuid4().hex[:4]}"
    running = LocalApp(Assembly.load(cloud_assembly), **stack.endpoints(), state_dir=state, prefix=prefix)
    running.start(http_port=None, schedules=False)
    (state / "env").write_text(
        "".join(f"export {k}={v!r}\n" for k, v in running.operator_environment().items())
    )
    yield running
    running.stop()


def doctor(app, cloud_assembly) -> tuple[int, dict]:
    out = io.StringIO()
    args = ["doctor", "--json", "--state-dir", str(app.state_dir), "--assembly", str(cloud_assembly),
            "--prefix", app.prefix, "--canary-wait", "10"]  # fmt: skip
    with contextlib.redirect_stdout(out):
        code = main(args)
    return code, json.loads(out.getvalue())


def failed(report: dict) -> list[dict]:
    return [c for c in report["checks"] if not c["ok"]]


def lambda_api(app):
    return boto3.client("lambda", endpoint_url=app.lambda_api.endpoint, region_name="us-east-1",
                        aws_access_key_id="x", aws_secret_access_key="x")  # fmt: skip


def test_doctor_passes_on_the_local_app_and_covers_every_check(app, cloud_assembly):
    code, report = doctor(app, cloud_assembly)
    assert (code, failed(report)) == (0, []), json.dumps(failed(report), indent=1)
    kinds = {c["kind"] for c in report["checks"]}
    assert kinds >= {"network", "secret", "database", "proxy", "mapping", "alarm", "canary"}
    (proxy,) = [c for c in report["checks"] if c["kind"] == "proxy"]
    assert "not emulated locally" in proxy["message"]  # said, not skipped
    (canary,) = [c for c in report["checks"] if c["kind"] == "canary"]
    assert "Successfully executed action" in canary["message"]
    # every VPC function answered from inside: a login each, as its own role
    logins = {c["subject"].split("/")[1]: c["message"] for c in report["checks"] if c["kind"] == "database"}
    assert "logged in as hybridsync_writer" in logins["WriteBack"] and "hybridsync_reader" in logins["Api"]


def test_a_mapping_disabled_by_hand_fails_naming_it(app, cloud_assembly):
    client = lambda_api(app)
    (mapping,) = client.list_event_source_mappings(FunctionName="WriteBack")["EventSourceMappings"]
    client.update_event_source_mapping(UUID=mapping["UUID"], Enabled=False)
    try:
        code, report = doctor(app, cloud_assembly)
    finally:
        client.update_event_source_mapping(UUID=mapping["UUID"], Enabled=True)
    (check,) = failed(report)
    assert code == 1 and check["kind"] == "mapping" and "WriteBack" in check["subject"]
    assert check["message"].startswith(("Disabled, but the template says Enabled", "Disabling"))


def test_a_secret_a_function_cannot_read_fails_naming_the_function_and_the_secret(app, cloud_assembly):
    secrets = boto3.client("secretsmanager", endpoint_url=app.services_endpoint, region_name="us-east-1",
                           aws_access_key_id="x", aws_secret_access_key="x")  # fmt: skip
    reader = app.logins.by_user["hybridsync_reader"]  # the Api's login (its stand-in for IAM, locally)
    secrets.delete_secret(SecretId=reader, RecoveryWindowInDays=7)
    try:
        code, report = doctor(app, cloud_assembly)
    finally:
        secrets.restore_secret(SecretId=reader)
    broken = {(c["kind"], c["subject"].split("/")[1]) for c in failed(report)}
    assert code == 1 and ("secret", "Api") in broken, json.dumps(failed(report), indent=1)
    (check,) = [c for c in failed(report) if c["kind"] == "secret" and c["subject"].endswith("/Api")]
    assert "DB_SECRET_ARN" in check["message"] and "marked deleted" in check["message"]
    assert check["fix"].startswith("the secret is scheduled for deletion: aws secretsmanager restore-secret")
