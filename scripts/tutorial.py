"""The tutorial's runner: runs the steps of docs/tutorial/*.md in an empty folder, as a reader would,
and checks that each page shows what its commands print (or, with --write, writes it there).

A step is a fenced block after a marker (an HTML comment: the site does not show it):

    <!-- tutorial: run -->          console: each `$ command` runs in the reader's shell (its
                                    folder, and what `source` set, carry on to the next); what it
                                    printed follows it. exit=N: the exit status it must end with
                                    (default 0). until="TEXT": run it again, every 2 s for up to
                                    timeout=S (default 120), until TEXT is in what it prints (each
                                    of "A && B": both), as a
                                    reader does while the pipeline catches up. any-order: its lines
                                    in any order (two consumers read a record at once). any-numbers: its
                                    counts depend on timing (compared with every number masked)
    <!-- tutorial: start -->        console: one long-running command (`hybridsync up`), left
                                    running in its terminal; what it printed once it serves
    <!-- tutorial: stop -->         console: `^C` to it, then what it printed from then on
    <!-- tutorial: file PATH -->    the code block written to PATH; `append` adds it at the end,
                                    `before="TEXT"` / `after="TEXT"` inserts it before / after the
                                    line starting with TEXT, `replace="TEXT"` puts it in its place

The reader has two terminals, each with its folder and variables; terminal=N on a marker moves to
terminal N for that block and the ones after it (the first is where the tutorial starts).

Outputs are compared by shape: the same lines once what differs from run to run (times, ports,
ids, versions, durations, temporary folders) is masked; the other numbers (amounts, counts,
settings) must be the page's. The commands run with this Python's folder first on PATH (the
reader's `pip install`), a clean shell otherwise (no AWS_, CDK_, TABLE_, HYBRIDSYNC_ or database
variables), COLUMNS=100, and npm preferring its cache."""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from hybridsync.local.process import UpProcess  # the one import of a test helper: it may move

ROOT = Path(__file__).resolve().parents[1]
PAGES = ROOT / "docs" / "tutorial"

MARKER = re.compile(r"^<!-- tutorial: (?P<directive>.*?) -->\n```(?P<lang>[\w-]*)\n(?P<body>.*?)^```$",
                    re.MULTILINE | re.DOTALL)  # fmt: skip
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
OURS = ("AWS_", "CDK_", "TABLE_", "HYBRIDSYNC_", "DATABASE_URL", "DYNAMODB_", "LAMBDA_", "API_URL",
        "PYTEST_")  # fmt: skip


@dataclass
class Block:
    """One marked block of a page: where it is, what it asks, what it holds."""

    page: Path
    start: int  # offset of its body in the page's text
    end: int
    kind: str
    options: dict[str, str]
    lang: str
    body: str

    @property
    def line(self) -> int:
        return self.page.read_text()[: self.start].count("\n") + 1

    def commands(self) -> list[tuple[str, str]]:
        """The `$ ` commands of a console block (a line ending in `\\` goes on) with what the page
        shows each print; a stop block's `^C` counts as its command."""
        found: list[tuple[str, list[str]]] = []
        lines = self.body.rstrip("\n").split("\n")
        n = 0
        while n < len(lines):
            line = lines[n]
            if line.startswith("$ ") or (self.kind == "stop" and line == "^C" and not found):
                typed = [line]
                while typed[-1].endswith("\\") and n + 1 < len(lines):
                    n += 1
                    typed.append(lines[n])
                found.append(("\n".join(typed), []))
            elif found:
                found[-1][1].append(line)
            n += 1
        return [(typed, "\n".join(out)) for typed, out in found]


@dataclass
class Step:
    block: Block
    typed: str  # as the page shows it, `$ ` included
    shown: str  # what the page shows it printed
    printed: str = ""  # what it printed this time
    status: int = 0

    @property
    def command(self) -> str:
        return "\n".join(line.removeprefix("$ ") for line in self.typed.split("\n"))


@dataclass
class Run:
    folder: Path  # where the reader started: the project is a folder in it
    steps: list[Step] = field(default_factory=list)

    def output(self, command: str, nth: int = 0) -> str:
        """What the nth step whose command is `command` printed."""
        return [s.printed for s in self.steps if s.command == command][nth]

    def differences(self) -> list[str]:
        """Each step whose output differs in shape from the page's, as a diff."""
        found = []
        for step in self.steps:
            vary = "any-numbers" in step.block.options
            page, now = shape(step.shown, self.folder, vary), shape(step.printed, self.folder, vary)
            if "any-order" in step.block.options:  # lines of concurrent work: the same lines, in any order
                page, now = sorted(page), sorted(now)
            if page != now:
                where = f"{step.block.page.relative_to(ROOT)}:{step.block.line}"
                diff = difflib.unified_diff(
                    page, now, f"{where} (the page)", f"{step.typed} (now)", lineterm=""
                )
                found.append("\n".join(diff))
        return found


def blocks(pages: list[Path]) -> list[Block]:
    """The marked blocks of the pages, in order."""
    found = []
    for page in pages:
        for match in MARKER.finditer(page.read_text()):
            words = shlex.split(match["directive"])
            options = dict(w.split("=", 1) if "=" in w else (w, "") for w in words[1:])
            found.append(Block(page, match.start("body"), match.end("body"), words[0], options, match["lang"],
                               match["body"]))  # fmt: skip
    return found


# --- shapes --------------------------------------------------------------------------------------

MASKS = [  # what differs from run to run, whatever the command
    (re.compile(r"(?<![\w:/.>])(/[\w.+-]+)+?/(?=invoicing\b)"), "<folder>/"),  # a run's folder
    (re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d([.,]\d+)?)?(Z|[+-]\d\d(:?\d\d)?)?"), "<time>"),
    (re.compile(r"\b\d{8}T\d{6,12}\b"), "<time>"),
    (re.compile(r"\b[A-Z][a-z]{2}, \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d GMT\b"), "<time>"),
    (re.compile(r"(?<=_image=)[0-9a-f]{12}\b"), "<digest>"),  # a stream image's digest (hybridsync trace)
    (re.compile(r"(?<=\basset\.)[0-9a-f]{12}(?=\.\.\.)"), "<hex>"),  # an asset's hash, even all digits
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<uuid>"),
    (re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{8,}\b"), "<hex>"),  # assets, request ids
    (re.compile(r"\b[A-Za-z0-9_-]{20,}={0,2}(?=@)"), "<secret>"),
    (re.compile(r"(?<=127\.0\.0\.1:)\d+"), "<port>"),
    (re.compile(r"\b1\d{12}\b"), "<version>"),  # a version: the time of a write, in milliseconds
    (re.compile(r"\b\d+(\.\d+)?m?s(?= ago\b)|(?<=\bin )\d+(\.\d+)?m?s\b"), "<duration>"),
    (re.compile(r"([─━═┄┈╌-])\1+"), r"\1"),  # rules as wide as what they frame
    (re.compile(r"[ \t]+"), " "),
]
NUMBERS = (re.compile(r"\d+(\.\d+)?"), "<n>")  # a block marked `any-numbers`: counts that depend on timing


def shape(text: str, folder: Path | None = None, any_numbers: bool = False) -> list[str]:
    """The lines of an output with what differs from run to run masked (every number too, with
    `any_numbers`)."""
    if folder is not None:
        text = text.replace(f"{folder}/", "<folder>/")
    masks = [*MASKS[:-2], NUMBERS, *MASKS[-2:]] if any_numbers else MASKS
    lines = []
    for line in text.split("\n"):
        for pattern, mask in masks:
            line = pattern.sub(mask, line)
        lines.append(line.strip())
    while lines and not lines[-1]:
        lines.pop()
    return lines


# --- running ---------------------------------------------------------------------------------------


@dataclass
class Shell:
    cwd: Path
    env: dict[str, str]


class Reader:
    """The reader's two terminals (a folder and what `source` set in each), and the app that one of
    them runs."""

    def __init__(self, folder: Path, log: bool = True):
        self.log = log
        env = {k: v for k, v in os.environ.items() if not k.startswith(OURS)}
        path = [str(Path(sys.executable).parent), env.get("PATH", "")]
        node = shutil.which("node")
        major = subprocess.run([node, "--version"], capture_output=True, text=True).stdout if node else ""
        env |= {
            "PATH": os.pathsep.join(path),
            "COLUMNS": "100",
            "NO_COLOR": "1",
            "TERM": "dumb",
            "npm_config_prefer_offline": "true",  # the pinned CDK CLI from npm's cache when it has it
            "npm_config_update_notifier": "false",
            # jsii's and the AWS SDK's banners about this machine's Node.js, not the project's output
            "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": major.strip().lstrip("v").split(".")[0],
            "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1",
            "AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED": "true",
            # the project's `python -m pytest` keeps its temporary folders in the run's folder: a
            # pytest choosing its own resets /tmp/pytest-of-<user> to 0700, which an enclosing
            # pytest's embedded PostgreSQL servers (run as another user) must enter
            "PYTEST_ADDOPTS": f"--basetemp={folder / '.pytest'} -p no:cacheprovider",
        }
        self.terminals = {n: Shell(folder, dict(env)) for n in (1, 2)}
        self.here = self.terminals[1]
        self.up: UpProcess | None = None
        self.up_offset = 0

    @property
    def cwd(self) -> Path:
        return self.here.cwd

    @property
    def env(self) -> dict[str, str]:
        return self.here.env

    def say(self, text: str) -> None:
        if self.log:
            print(text, file=sys.stderr, flush=True)

    def run(self, step: Step) -> None:
        block = step.block
        command = step.command
        if block.kind == "start":
            return self.start(step)
        if block.kind == "stop":
            return self.stop(step)
        words = shlex.split(command) if "\n" not in command else []
        if words[:1] == ["cd"] and len(words) == 2:
            self.here.cwd = (self.cwd / words[1]).resolve()
            return
        if words[:1] == ["source"] and len(words) == 2:
            dump = subprocess.run(["bash", "-c", f"source {shlex.quote(words[1])} && env -0"], cwd=self.cwd,
                                  env=self.env, capture_output=True, text=True, check=True)  # fmt: skip
            self.here.env = dict(line.split("=", 1) for line in dump.stdout.split("\0") if "=" in line)
            return
        expected = int(block.options.get("exit", "0"))
        until = block.options.get("until")
        wanted = until.split(" && ") if until is not None else []  # every one of them
        deadline = time.monotonic() + float(block.options.get("timeout", "120"))
        while True:
            done = subprocess.run(["bash", "-c", command], cwd=self.cwd, env=self.env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, timeout=600)  # fmt: skip
            step.printed, step.status = clean(done.stdout), done.returncode
            if all(text in step.printed for text in wanted) or time.monotonic() > deadline:
                break
            time.sleep(2)
        where = f"{block.page.relative_to(ROOT)}:{block.line}"
        if not all(text in step.printed for text in wanted):
            raise Failed(f"{where}: `{command}` never printed {until!r}:\n{step.printed[-3000:]}")
        if step.status != expected:
            raise Failed(
                f"{where}: `{command}` exited {step.status}, not {expected}:\n{step.printed[-3000:]}"
            )

    def start(self, step: Step) -> None:
        if self.up is not None:
            raise Failed(f"{step.block.page.name}: `{step.command}` while another is running")
        state = self.cwd / ".local"
        state.mkdir(exist_ok=True)
        log = state / "up.log"
        self.up_offset = log.stat().st_size if log.exists() else 0
        self.up = UpProcess(self.cwd / "cdk.out", state, self.env, prefix="hybridsync", cwd=self.cwd)
        self.up.command = ["bash", "-c", f"exec {step.command}"]  # the page's command, as typed
        try:
            self.up.start(timeout_s=300)
        except RuntimeError as error:
            self.up = None
            raise Failed(f"{step.block.page.name}: `{step.command}` did not come up: {error}") from None
        step.printed = self.since_start(log)

    def since_start(self, log: Path) -> str:
        text = log.read_bytes()[self.up_offset :].decode(errors="replace")
        self.up_offset += len(text.encode())
        return clean(text)

    def stop(self, step: Step) -> None:
        if self.up is None or self.up.process is None:
            raise Failed(f"{step.block.page.name}: ^C with nothing running")
        meanwhile = self.since_start(self.up.state / "up.log")  # what it printed while running
        if meanwhile:
            self.say(f"[{step.block.page.name}] the app printed, before ^C:\n{meanwhile}")
        self.up.process.send_signal(signal.SIGINT)
        step.status = self.up.process.wait(timeout=120)
        step.printed = self.since_start(self.up.state / "up.log")
        self.up = None

    def close(self) -> None:
        if self.up is not None:
            self.up.stop()
            self.up = None


class Failed(Exception):
    """A step did not do what the page says."""


def clean(text: str) -> str:
    text = ANSI.sub("", text).replace("\r\n", "\n")
    return "\n".join(line.rstrip() for line in text.split("\n")).strip("\n")


def edit(block: Block, folder: Path) -> None:
    """A `file` block: the code written into the reader's project."""
    (path,) = [k for k, v in block.options.items() if not v and k != "append"]
    target = folder / path
    code = block.body
    if "append" in block.options:
        target.write_text(target.read_text().rstrip("\n") + "\n\n" + code)
    elif where := [w for w in ("before", "after", "replace") if w in block.options]:
        anchor = block.options[where[0]]
        lines = target.read_text().split("\n")
        at = [n for n, line in enumerate(lines) if line.startswith(anchor)]
        if len(at) != 1:
            raise Failed(f"{block.page.name}: {len(at)} lines of {path} start with {anchor!r}, not one")
        start = at[0] + (where[0] == "after")
        lines[start : start + (where[0] == "replace")] = code.rstrip("\n").split("\n")
        target.write_text("\n".join(lines))
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(code)


def run(pages: list[Path], folder: Path, log: bool = True) -> Run:
    """Every step of the pages, in order, from `folder` (empty)."""
    reader, result = Reader(folder, log), Run(folder)
    try:
        for block in blocks(pages):
            if "terminal" in block.options:
                reader.here = reader.terminals[int(block.options["terminal"])]
            if block.kind == "file":
                reader.say(f"[{block.page.name}] file {' '.join(block.options)}")
                edit(block, reader.cwd)
                continue
            for typed, shown in block.commands():
                step = Step(block, typed, shown)
                started = time.monotonic()
                reader.run(step)
                reader.say(
                    f"[{block.page.name}] {typed.splitlines()[0]}  ({time.monotonic() - started:.1f}s)"
                )
                result.steps.append(step)
    finally:
        reader.close()
    return result


def write(result: Run) -> list[Path]:
    """Each page with what its commands printed this time; the pages changed."""
    by_page: dict[Path, dict[int, list[Step]]] = {}
    for step in result.steps:
        by_page.setdefault(step.block.page, {}).setdefault(step.block.start, []).append(step)
    changed = []
    for page, found in by_page.items():
        text = page.read_text()
        for start in sorted(found, reverse=True):
            steps = found[start]
            body = "".join(s.typed + "\n" + (s.printed + "\n" if s.printed else "") for s in steps)
            end = steps[0].block.end
            text = text[:start] + body + text[end:]
        if text != page.read_text():
            page.write_text(text)
            changed.append(page)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/tutorial",
        description="Run the tutorial (docs/tutorial/*.md) in an empty folder, as a reader would: "
        "exit 1 if a command fails or prints something of another shape than its page shows.",
        epilog="example: ./scripts/tutorial --write   (run it, then put what each command printed "
        "in the pages)",
    )
    parser.add_argument("--write", action="store_true", help="write what the commands printed into the pages")
    parser.add_argument("--keep", action="store_true", help="keep the folder the tutorial ran in")
    args = parser.parse_args(argv)
    pages = sorted(PAGES.glob("*.md"))  # each page goes on from the one before
    folder = Path(tempfile.mkdtemp(prefix="tutorial-"))
    try:
        result = run(pages, folder)
    except Failed as failed:
        print(f"the tutorial failed: {failed}", file=sys.stderr)
        return 1
    finally:
        if args.keep:
            print(f"the tutorial's folder: {folder}", file=sys.stderr)
        else:
            shutil.rmtree(folder, ignore_errors=True)
    if args.write:
        for page in write(result):
            print(f"wrote {page.relative_to(ROOT)}")
        return 0
    differences = result.differences()
    for diff in differences:
        print(diff + "\n")
    if differences:
        print(
            f"{len(differences)} output(s) changed shape: ./scripts/tutorial --write puts what they print "
            "now in the pages (then read the diff)"
        )
        return 1
    print(f"{len(result.steps)} commands: each printed what its page shows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
