"""The local Lambda containers forked from the zygote (local/awslambda/zygote.py): each is a process
of its own with its function's environment, its asset's code first and its own init, as a fresh
interpreter is; a function the zygote cannot serve exactly starts the classic way; what the
preloaded libraries read from the environment while they are imported is what the zygote names."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from hybridsync.local.awslambda import zygote
from hybridsync.local.awslambda.functions import ZYGOTE, FunctionError, LocalFunction

PROBE = """
import os, sys, time
import mine

STARTED = time.time()  # the init, once per container


def handler(event, context):
    if event.get("sleep"):
        time.sleep(event["sleep"])
    import sqlalchemy
    return {
        "environment": dict(os.environ), "path0": sys.path[0], "cwd": os.getcwd(), "pid": os.getpid(),
        "ppid": os.getppid(), "started": STARTED, "mine": mine.VALUE, "tz": time.tzname[0],
        "sqlalchemy": getattr(sqlalchemy, "SHIPPED", sqlalchemy.__file__),
    }
"""


def asset(tmp_path: Path, *, shipped_sqlalchemy: bool = False) -> Path:
    folder = tmp_path / "asset"
    folder.mkdir(parents=True)
    (folder / "probe.py").write_text(PROBE)
    (folder / "mine.py").write_text("VALUE = 'the asset'\n")
    if shipped_sqlalchemy:  # a copy of a preloaded library in the asset: a fresh interpreter imports it
        (folder / "sqlalchemy").mkdir()
        (folder / "sqlalchemy" / "__init__.py").write_text("SHIPPED = 'the asset'\n")
    return folder


def function(folder: Path, **environment: str) -> LocalFunction:
    base = zygote.base_environment()
    return LocalFunction(
        name="Probe", asset=folder, handler="probe.handler", environment={**base, **environment},
        timeout_s=5, memory_mb=128,
    )  # fmt: skip


@pytest.fixture
def probe(tmp_path: Path):
    made: list[LocalFunction] = []

    def make(**kwargs: str) -> LocalFunction:
        made.append(function(asset(tmp_path / str(len(made))), **kwargs))
        return made[-1]

    yield make
    for each in made:
        each.close()


def test_a_forked_container_has_its_functions_environment_asset_and_init(probe):
    fn = probe(HYBRIDSYNC_MODEL="shop.model:MODEL", TZ="America/New_York")
    first, second = fn.invoke({}), fn.invoke({})
    assert first["ppid"] != os.getpid()  # forked by the zygote, not started by the app
    # its own, and nothing of the zygote's or ours but what an interpreter adds as it starts (PEP 538)
    assert first["environment"].items() >= fn.environment.items()
    assert first["environment"].keys() - fn.environment.keys() <= {"LC_CTYPE"}
    assert first["path0"] == first["cwd"] == str(fn.asset.resolve())
    assert (first["mine"], first["tz"]) == ("the asset", "EST")
    assert first["sqlalchemy"].startswith(sys.prefix)  # the preloaded library, as a fresh one imports it
    assert (second["pid"], second["started"]) == (first["pid"], first["started"])  # warm: one init


def test_a_container_started_fresh_answers_the_same(probe):
    forked, fresh = probe(), probe()
    fresh.forked = False
    a, b = forked.invoke({}), fresh.invoke({})
    assert a["ppid"] != os.getpid() and b["ppid"] == os.getpid()
    assert {k: v for k, v in a.items() if k not in ("pid", "ppid", "started", "path0", "cwd")} == {
        k: v for k, v in b.items() if k not in ("pid", "ppid", "started", "path0", "cwd")
    }


def test_a_function_setting_what_a_preloaded_library_reads_at_import_starts_fresh(probe):
    fn = probe(PSYCOPG_IMPL="binary")
    assert fn.invoke({})["ppid"] == os.getpid()
    plain = {k: v for k, v in fn.environment.items() if k != "PSYCOPG_IMPL"}
    for variable in zygote.READ_AT_IMPORT | {"PYTHONHASHSEED", "LANG", "LC_ALL"}:
        assert not ZYGOTE.takes({**plain, variable: "1"}, fn.asset), variable
    assert ZYGOTE.takes(plain | {"HYBRIDSYNC_MODEL": "m"}, fn.asset)


def test_an_asset_shipping_its_own_copy_of_a_preloaded_library_starts_fresh_and_imports_it(tmp_path):
    fn = function(asset(tmp_path, shipped_sqlalchemy=True))
    try:
        answer = fn.invoke({})
    finally:
        fn.close()
    assert (answer["ppid"], answer["sqlalchemy"]) == (os.getpid(), "the asset")


def test_a_forked_container_that_times_out_is_killed_and_the_next_one_is_cold(probe):
    fn = probe()
    fn.timeout_s = 1
    first = fn.invoke({})
    assert first["ppid"] != os.getpid()
    with pytest.raises(FunctionError) as timed_out:
        fn.invoke({"sleep": 3})
    assert timed_out.value.error_type == "Sandbox.Timedout"
    deadline = time.monotonic() + 5  # killed, then reaped by the zygote as its SIGCHLD comes
    while Path(f"/proc/{first['pid']}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{first['pid']}").exists()  # gone: not left running, nor a zombie
    assert fn.invoke({})["pid"] != first["pid"] and fn.stats.cold_starts == 2


def test_a_zygote_that_died_is_started_again(probe):
    fn = probe()
    fn.invoke({})
    ZYGOTE._process.kill()  # type: ignore[union-attr]
    ZYGOTE._process.wait()  # type: ignore[union-attr]
    fn.close()  # its containers end with it; the next invocation is a cold start
    answer = fn.invoke({})
    assert answer["ppid"] == ZYGOTE._process.pid != os.getpid()  # type: ignore[union-attr]


def test_what_the_preloaded_libraries_read_at_import_is_named():
    """Each preloaded module imported in a fresh interpreter with every read of the environment
    recorded: what they read is the zygote's base environment or READ_AT_IMPORT, whose setting sends
    a function to a fresh interpreter. A library upgrade that reads a new variable fails here."""
    code = f"""
import json, os, sys
read = set()
class Recording(type(os.environ)):
    def __getitem__(self, key):
        read.add(key)
        return super().__getitem__(key)
    def __contains__(self, key):
        read.add(key)
        return super().__contains__(key)
    def __iter__(self):
        read.add("*")
        return super().__iter__()
os.environ.__class__ = Recording
for name in {zygote.PRELOAD!r}:
    __import__(name)
print(json.dumps(sorted(read)))
"""
    base = zygote.base_environment()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=base, check=True)
    read = set(json.loads(done.stdout))
    assert read, "nothing recorded: the recording itself is broken"
    assert read - zygote.READ_AT_IMPORT - set(zygote.BASE_ENVIRONMENT) == set()


def test_an_asset_named_relative_to_the_apps_folder_is_found(tmp_path, monkeypatch):
    """`up` names assets relative to the project (cdk.out/asset.*); the zygote runs elsewhere."""
    asset(tmp_path)
    monkeypatch.chdir(tmp_path)
    fn = function(Path("asset"))
    try:
        answer = fn.invoke({})
    finally:
        fn.close()
    assert answer["ppid"] != os.getpid() and answer["cwd"] == str(tmp_path / "asset")


def test_a_large_environment_and_many_cold_starts_at_once_are_all_forked(probe):
    """A role's statements make a large environment (HYBRIDSYNC_IAM is a JSON policy): the request
    is framed, not cut at a socket buffer; concurrent cold starts each get their own container."""
    fn = probe(LARGE="x" * 300_000)
    fn.max_containers = 8
    answers: list[dict] = []
    threads = [threading.Thread(target=lambda: answers.append(fn.invoke({"sleep": 0.5}))) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({a["pid"] for a in answers}) == 8 and {a["ppid"] for a in answers} == {ZYGOTE._process.pid}  # type: ignore[union-attr]
    assert all(len(a["environment"]["LARGE"]) == 300_000 for a in answers)


def test_a_zygote_that_cannot_fork_leaves_the_container_to_a_fresh_interpreter(probe, monkeypatch):
    def broken(*args, **kwargs):
        raise OSError("the local Lambda zygote ended")

    monkeypatch.setattr(ZYGOTE, "spawn", broken)
    assert probe().invoke({})["ppid"] == os.getpid()
