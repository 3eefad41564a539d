"""A real SMTP server for the summary tests: aiosmtpd on a free loopback port, in its own
thread, keeping every message it accepts; and a throwaway certificate authority for TLS.

Variants: plain SMTP; STARTTLS required, then AUTH required (aiosmtpd refuses AUTH before
TLS, as a real server should); implicit TLS with AUTH offered. AUTH accepts one login.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import socket
import ssl
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage
from pathlib import Path
from typing import Any

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, Envelope, LoginPassword, Session
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

USER, PASSWORD = "runner", "smtp-Pa55-word-9q"


def free_port() -> int:
    """A loopback port nobody listens on (aiosmtpd's controller cannot bind port 0)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Arrived:
    sender: str
    recipients: list[str]
    message: EmailMessage
    raw: bytes
    login: str | None


@dataclass
class Mailbox:
    """aiosmtpd's handler: keeps what arrives."""

    arrived: list[Arrived] = field(default_factory=list)

    async def handle_DATA(self, server: Any, session: Session, envelope: Envelope) -> str:
        raw = bytes(envelope.original_content or b"")
        message = message_from_bytes(raw, policy=policy.default)
        assert isinstance(message, EmailMessage)
        auth = session.auth_data
        login = auth.login.decode() if session.authenticated and isinstance(
            auth, LoginPassword) else None
        self.arrived.append(Arrived(str(envelope.mail_from), list(envelope.rcpt_tos), message,
                                    raw, login))
        return "250 OK"


def check_login(server: Any, session: Session, envelope: Envelope, mechanism: str,
                auth_data: Any) -> AuthResult:
    ok = isinstance(auth_data, LoginPassword) and (auth_data.login, auth_data.password) == (
        USER.encode(), PASSWORD.encode())
    # handled=False: aiosmtpd answers the refusal (535) itself
    return AuthResult(success=ok, handled=False, auth_data=auth_data if ok else None)


@dataclass
class Authority:
    """A certificate authority made for one test, and a server certificate it signed for
    localhost and 127.0.0.1 (as its subjectAltName; with ``alt_names=False`` only as its
    common name, which no TLS client should accept)."""

    ca_file: Path
    server: ssl.SSLContext

    @classmethod
    def make(cls, folder: Path, alt_names: bool = True) -> Authority:
        now = dt.datetime.now(dt.UTC)
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "runner test CA")])
        ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
              .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
              .not_valid_before(now - dt.timedelta(minutes=5))
              .not_valid_after(now + dt.timedelta(days=1))
              .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
              .add_extension(x509.KeyUsage(False, False, False, False, False, True, True,
                                           False, False), critical=True)
              .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()),
                             critical=False)
              .sign(ca_key, hashes.SHA256()))
        key = ec.generate_private_key(ec.SECP256R1())
        names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
        cert = (x509.CertificateBuilder()
                .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
                .issuer_name(ca_name).public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - dt.timedelta(minutes=5))
                .not_valid_after(now + dt.timedelta(days=1)))
        if alt_names:
            cert = cert.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = (cert
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                               critical=False)
                .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                    ca_key.public_key()), critical=False)
                .sign(ca_key, hashes.SHA256()))
        ca_file, cert_file, key_file = (folder / n for n in ("ca.pem", "server.pem",
                                                              "server.key"))
        ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
        cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                               serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
        server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server.load_cert_chain(cert_file, key_file)
        return cls(ca_file, server)


def refuse_quoting(server: Any, session: Session, envelope: Envelope, mechanism: str,
                   auth_data: Any) -> AuthResult:
    """A server that refuses every login and quotes, in its refusal, the AUTH PLAIN text it
    was sent (as some do in their logs and answers)."""
    quoted = ""
    if isinstance(auth_data, LoginPassword):
        quoted = base64.b64encode(b"\0" + auth_data.login + b"\0" + auth_data.password).decode()
    return AuthResult(success=False, handled=False,
                      message=f"535 5.7.8 authentication failed for {quoted}")


@dataclass
class MailServer:
    port: int
    mailbox: Mailbox
    controller: Controller

    @property
    def arrived(self) -> list[Arrived]:
        return self.mailbox.arrived

    def stop(self) -> None:
        self.controller.stop()


def start(tls: str = "none", authority: Authority | None = None,
          authenticator: Any = check_login) -> MailServer:
    """``tls``: none (no AUTH), starttls (STARTTLS and AUTH required), implicit (TLS from
    the first byte, AUTH offered; ``Arrived.login`` tells whether it was used).
    ``authenticator``: who may log in (``refuse_quoting``: nobody, and it says what it was
    sent)."""
    mailbox, port = Mailbox(), free_port()
    options: dict[str, Any] = {}
    if tls != "none":
        assert authority is not None
        if tls == "starttls":
            options = dict(authenticator=authenticator, auth_required=True,
                           tls_context=authority.server, require_starttls=True)
        else:  # aiosmtpd sees no TLS of its own here, so would not offer AUTH otherwise
            options = dict(authenticator=authenticator, auth_require_tls=False,
                           ssl_context=authority.server)
    controller = Controller(mailbox, hostname="127.0.0.1", port=port, **options)
    controller.start()
    return MailServer(port, mailbox, controller)
