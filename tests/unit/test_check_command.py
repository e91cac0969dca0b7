"""`hybridsync check ASSEMBLY_DIR` as a user meets it: its help says what it does with an example; a
folder that is no assembly gets one sentence and exit 2, never a traceback; a finding is one line
naming its rule, exit 1; a nested assembly (a CDK Stage's) is checked too. The rules themselves are
held by tests/infra (test_check.py mutates every one)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hybridsync.cli import main

# A topic an alarm notifies, whose policy lets nobody publish: the alarm-topic-policy rule's finding
BROKEN = {
    "Resources": {
        "Topic": {"Type": "AWS::SNS::Topic", "Properties": {}},
        "TopicPolicy": {
            "Type": "AWS::SNS::TopicPolicy",
            "Properties": {
                "Topics": [{"Ref": "Topic"}],
                "PolicyDocument": {"Statement": [{"Effect": "Deny", "Principal": "*", "Action": "sns:Publish",
                                                  "Resource": {"Ref": "Topic"},
                                                  "Condition": {"Bool": {"aws:SecureTransport": "false"}}}]},
            },
        },
        "Alarm": {"Type": "AWS::CloudWatch::Alarm", "Properties": {
            "Namespace": "AWS/SQS", "MetricName": "ApproximateNumberOfMessagesVisible",
            "Dimensions": [{"Name": "QueueName", "Value": "q"}], "AlarmActions": [{"Ref": "Topic"}]}},
    }
}  # fmt: skip


def test_help_says_what_it_does_with_an_example(capsys):
    with pytest.raises(SystemExit) as done:
        main(["check", "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert "ASSEMBLY_DIR" in out and "deploy rules" in out and "example: hybridsync check cdk.out" in out


@pytest.mark.parametrize("what", ["missing", "file", "empty", "not json"])
def test_no_assembly_is_one_sentence_and_exit_2(what, tmp_path, capsys):
    target = tmp_path / "cdk.out"
    if what == "file":
        target.write_text("{}")
    elif what == "empty":
        target.mkdir()
    elif what == "not json":
        target.mkdir()
        (target / "App.template.json").write_text("{not json")
    assert main(["check", str(target)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("hybridsync check: ") and err.count("\n") == 1
    assert "Traceback" not in err


def test_a_missing_folder_from_the_shell_has_no_traceback(tmp_path):
    result = subprocess.run([sys.executable, "-m", "hybridsync.cli", "check", str(tmp_path / "nope")],
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert (
        result.stderr.strip() == f"hybridsync check: no folder {tmp_path / 'nope'}: give the folder "
        "`npx cdk synth` writes (cdk.out, or its --output)"
    )


def write(directory: Path, template: dict) -> Path:
    directory.mkdir(parents=True)
    (directory / "App-monitoring.template.json").write_text(json.dumps(template))
    return directory


def test_a_finding_is_one_line_naming_its_rule_and_exit_1(tmp_path, capsys):
    assert main(["check", str(write(tmp_path / "cdk.out", BROKEN))]) == 1
    out, err = capsys.readouterr()
    (line,) = out.splitlines()
    assert line.startswith("[alarm-topic-policy] App-monitoring/Topic: ") and line.endswith(".html)")
    assert "1 finding(s) in 1 stack(s)" in err
    assert main(["check", str(tmp_path / "cdk.out"), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False and [f["rule"] for f in report["findings"]] == ["alarm-topic-policy"]


def test_a_nested_assembly_is_checked_on_its_own(tmp_path, capsys):
    root = tmp_path / "cdk.out"
    root.mkdir()
    (root / "manifest.json").write_text("{}")
    write(root / "assembly-Prod", BROKEN)
    assert main(["check", str(root)]) == 1
    assert capsys.readouterr().out.startswith("[alarm-topic-policy] assembly-Prod:App-monitoring/Topic: ")


def test_a_deny_negating_the_source_spares_cloudwatch_only_when_it_names_the_stacks_own_account():
    from hybridsync import truth

    def deny(account: object) -> list:
        statement = {"Effect": "Deny", "Principal": "*", "Action": "sns:Publish", "Resource": "*",
                     "Condition": {"StringNotEquals": {"aws:SourceAccount": account}}}  # fmt: skip
        return truth.denials([("monitoring", statement)], "sns:Publish", "cloudwatch.amazonaws.com")

    assert deny({"Ref": "AWS::AccountId"}) == []
    assert len(deny("111122223333")) == 1  # another account: CloudWatch's own calls are denied
