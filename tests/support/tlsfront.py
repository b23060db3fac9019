"""A TLS front for a control plane on loopback: `python -m tests.support.tlsfront CERT KEY PORT BACKEND_PORT`.

It terminates TLS with CERT/KEY on 127.0.0.1:PORT and pipes each connection to
127.0.0.1:BACKEND_PORT, so an agent can enrol and poll over https:// (bench/agent_rss.py, tests).
`self_signed` makes the certificate (for 127.0.0.1) that the agent trusts through SSL_CERT_FILE.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import ssl
import subprocess
import sys
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.support.processes import free_port, stop_process

ROOT = Path(__file__).resolve().parents[2]


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate and key for 127.0.0.1, valid for a day; returns their paths."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "front-cert.pem", folder / "front-key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_path, key_path


async def _pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError, ssl.SSLError):
        while data := await src.read(65536):
            dst.write(data)
            await dst.drain()
    with contextlib.suppress(OSError, ssl.SSLError):
        dst.close()


async def serve(cert: Path, key: Path, port: int, backend: int) -> None:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", backend)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))

    server = await asyncio.start_server(handle, "127.0.0.1", port, ssl=context)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


def start_front(folder: Path, backend: int) -> tuple[subprocess.Popen[bytes], str]:
    """A TLS front before 127.0.0.1:*backend* and its https:// URL; its certificate is *folder*/front-cert.pem."""
    cert, key = self_signed(folder)
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.tlsfront", str(cert), str(key), str(port), str(backend)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
    )
    assert proc.stdout is not None
    with proc.stdout:
        ready = proc.stdout.readline().strip() == b"ready"  # printed once it listens; b"" if it died
    if not ready:
        stop_process(proc)
        raise AssertionError("the TLS front did not start")
    return proc, f"https://127.0.0.1:{port}"


if __name__ == "__main__":
    asyncio.run(serve(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])))
