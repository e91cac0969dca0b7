"""What `hybridsync up` refuses before it starts anything: a state folder another live app runs
from, and a workload the project does not name."""

from __future__ import annotations

import subprocess
import sys

import pytest

from hybridsync import cli
from hybridsync.local import running, template
from hybridsync.model import config


@pytest.fixture
def nothing_starts(monkeypatch):
    """`up` fails the test if it gets as far as synthesizing (the first thing it starts)."""

    def synth(*_: object, **__: object) -> None:
        raise AssertionError("hybridsync up went on to start the app")

    monkeypatch.setattr(template, "synth_if_stale", synth)


@pytest.fixture
def other_app():
    """A live process that is not this one, standing for a running `hybridsync up`."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield process.pid
    process.kill()
    process.wait()


def test_a_second_up_on_a_running_apps_state_folder_is_refused_naming_its_pid(
    tmp_path, other_app, nothing_starts
):
    state = tmp_path / ".local"
    state.mkdir()
    (state / running.PID_FILE).write_text(f"{other_app} {running.started(other_app)}\n")
    (state / "env").write_text("export DATABASE_URL=the-first-apps\n")
    with pytest.raises(SystemExit) as refused:
        cli.main(["up", "--once", "--state-dir", str(state)])
    assert str(refused.value) == (
        f"hybridsync up: an app is already running from {state} (pid {other_app}): stop it first "
        "(Ctrl-C in its shell), or give this one another --state-dir"
    )
    assert (state / "env").read_text() == "export DATABASE_URL=the-first-apps\n"  # left as it was
    assert sorted(p.name for p in state.iterdir()) == ["env", running.PID_FILE]


def test_a_stale_pid_file_is_taken_over_and_removed_at_the_end(tmp_path):
    state = tmp_path / ".local"
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    state.mkdir()
    (state / running.PID_FILE).write_text(f"{ended.pid} 1\n")  # a killed app's
    with running.hold(state):
        pid, start = (state / running.PID_FILE).read_text().split()
        assert int(pid) != ended.pid and running.alive(int(pid), start)
    assert not (state / running.PID_FILE).exists()


def test_a_pid_given_to_another_process_since_is_stale(tmp_path, other_app):
    state = tmp_path / ".local"
    state.mkdir()
    (state / running.PID_FILE).write_text(f"{other_app} 1\n")  # that pid, started at another time
    assert running.owner(state) is None
    with running.hold(state):
        pid = int((state / running.PID_FILE).read_text().split()[0])
        with pytest.raises(running.AlreadyRunning, match=rf"from \.local \(pid {pid}\)"):
            running.hold(state, ".local").__enter__()  # while held, a second is refused


def test_demo_in_a_project_without_one_is_refused_before_anything_starts(
    tmp_path, monkeypatch, nothing_starts
):
    monkeypatch.setattr(config, "hooks", lambda name: [])
    with pytest.raises(
        SystemExit, match=r'--demo: name a function in pyproject.toml .*demo = "myapp.demo:run"'
    ):
        cli.main(["up", "--demo", "--once", "--state-dir", str(tmp_path / ".local")])
    assert not (tmp_path / ".local" / running.PID_FILE).exists()
