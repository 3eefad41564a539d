"""The summary by email through smtplib: the text and HTML parts as alternatives of one
message, the full CSV attached while it is at most ATTACH_LIMIT bytes (a bigger one stays on
disk, where the summary's "Full list of items" line points: mail servers refuse messages of
10 to 25 MB, and the message is built in memory).

STARTTLS (the default), implicit TLS, or plain SMTP to a server on this machine (the job
model refuses plain SMTP elsewhere). The server's certificate is always verified, against
the system's authorities (which honour $SSL_CERT_FILE) or the job's ``smtp.ca_file``; there
is no switch to turn verification off. The login comes from the job's ``${SMTP_USER}`` /
``${SMTP_PASSWORD}`` references and is never written anywhere, messages included.
"""

from __future__ import annotations

import logging
import smtplib
import ssl
from email.headerregistry import Address
from email.message import EmailMessage
from email.utils import format_datetime, make_msgid
from pathlib import Path

from runner.credentials import redact
from runner.errors import EmailNotSent, FileUnreadable
from runner.job.model import Email, Smtp
from runner.job.sources import read_regular
from runner.logs import event
from runner.summary.model import Summary

log = logging.getLogger("runner")
#: The biggest CSV attached (bytes); base64 makes it a third bigger in the message.
ATTACH_LIMIT = 8 << 20
#: The biggest CA file read (bytes): a bundle of every public authority is about 0.2 MB.
CA_FILE_LIMIT = 4 << 20


def should_send(email: Email, summary: Summary) -> bool:
    """After a run: when its summary says something the last one mailed did not, and
    ``send`` is ``always``, or ``problems`` and there is one."""
    if not summary.changed:
        return False
    return email.send == "always" or (email.send == "problems" and summary.problems)


def compose(email: Email, summary: Summary, subject: str, text: str, html: str,
            csv_file: Path, csv_name: str) -> EmailMessage:
    message = EmailMessage()
    message["Subject"] = subject
    message["From"] = email.from_
    message["To"] = [Address(addr_spec=a) for a in email.to]
    if email.cc:
        message["Cc"] = [Address(addr_spec=a) for a in email.cc]
    message["Date"] = format_datetime(summary.generated_at)
    message["Message-ID"] = make_msgid(domain=email.from_.rpartition("@")[2])
    message.set_content(text)
    message.add_alternative(html, subtype="html")
    size = csv_file.stat().st_size
    if size <= ATTACH_LIMIT:
        message.add_attachment(csv_file.read_text(encoding="utf-8"), subtype="csv",
                               filename=csv_name)
    else:
        log.info("the list of items (%.1f MB) is not attached: over %d MB; the summary says "
                 "where it is", size / 1e6, ATTACH_LIMIT >> 20, extra=event("list_not_attached"))
    return message


def send(message: EmailMessage, email: Email, base: Path, what: str = "summary") -> list[str]:
    """Send ``message`` (``what`` it is, for the log) to the job's ``to`` and ``cc``, each
    one address (never read back from the headers); the recipients, or EmailNotSent saying
    why."""
    smtp = email.smtp
    where = f"{smtp.host}:{smtp.port}"
    recipients = [*email.to, *email.cc]
    try:
        context = _tls_context(smtp, base)
    except FileUnreadable as exc:  # the file changed since the run's start
        raise EmailNotSent(f"summary.email.smtp.ca_file: {smtp.ca_file}: {exc}") from None
    try:
        client: smtplib.SMTP
        if smtp.tls == "implicit":
            client = smtplib.SMTP_SSL(smtp.host, smtp.port, timeout=float(smtp.timeout),
                                      context=context)
        else:
            client = smtplib.SMTP(smtp.host, smtp.port, timeout=float(smtp.timeout))
        with client:
            if smtp.tls == "starttls":
                client.starttls(context=context)
            if smtp.username:
                password = smtp.password.get_secret_value() if smtp.password else ""
                client.login(smtp.username, password)
            refused = client.send_message(message, to_addrs=recipients)
    except smtplib.SMTPAuthenticationError as exc:
        raise EmailNotSent(f"the mail server {where} refused the login of {smtp.username}: "
                           f"{exc.smtp_code} {_text(exc.smtp_error)}") from None
    except smtplib.SMTPRecipientsRefused as exc:
        raise EmailNotSent(f"the mail server {where} refused every recipient: "
                           f"{_refusals(exc.recipients)}") from None
    except smtplib.SMTPResponseException as exc:
        raise EmailNotSent(f"the mail server {where} answered {exc.smtp_code} "
                           f"{_text(exc.smtp_error)}") from None
    except (smtplib.SMTPException, OSError) as exc:
        raise EmailNotSent(f"cannot send through the mail server {where}: "
                           f"{redact(_os_text(exc))}") from None
    if refused:
        raise EmailNotSent(f"the mail server {where} refused some recipients: "
                           f"{_refusals(refused)}")
    log.info("%s emailed to %s", what, ", ".join(recipients), extra=event(f"{what}_emailed"))
    return recipients


def _tls_context(smtp: Smtp, base: Path) -> ssl.SSLContext | None:
    if smtp.tls == "none":
        return None
    if smtp.ca_file is None:
        return ssl.create_default_context()
    return authorities(base / smtp.ca_file)


def authorities(path: Path) -> ssl.SSLContext:
    """A TLS context that trusts the certificates of the PEM file ``path`` (``smtp.ca_file``),
    and them only. The file is read as a job's files are (``open_regular``: never a FIFO, a
    device or ``/proc/self/environ``), CA_FILE_LIMIT bytes at most; FileUnreadable says why
    it cannot be used, never quoting what is in it."""
    data = read_regular(path, CA_FILE_LIMIT, f"larger than {CA_FILE_LIMIT >> 20} MiB; a CA "
                                             "file holds the certificates of a few authorities")
    # PEM is ASCII; some bundles name their authorities in comments that are not.
    text = data.decode("ascii", "ignore")
    if text.strip():  # (an empty cadata would be none: the system's authorities)
        try:
            return ssl.create_default_context(cadata=text)
        except ssl.SSLError:
            pass
    raise FileUnreadable("holds no certificate in PEM form (-----BEGIN CERTIFICATE-----)")


def _text(error: bytes | str) -> str:
    """What the mail server said, masked of the credentials runner holds: a server may quote
    the login it refused (``535 ... authentication failed for <AUTH PLAIN's base64>``)."""
    return redact(error.decode("utf-8", "replace") if isinstance(error, bytes) else str(error))


def _os_text(exc: Exception) -> str:
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)


def _refusals(refused: dict[str, tuple[int, bytes]]) -> str:
    return "; ".join(f"{address} ({code} {_text(why)})" for address, (code, why)
                     in sorted(refused.items()))
