"""SSH signatures and allowed-signers files: who signed a plan file, checked the way git checks
a commit signed with an SSH key.

A signature is ssh-keygen's ``-Y sign`` format (SSHSIG, OpenSSH's PROTOCOL.sshsig): the
signer's public key, a namespace (``runner-plan``: a signature made for something else never
passes for a plan's), the hash (sha512) of the message, signed, armored between ``-----BEGIN
SSH SIGNATURE-----`` lines. ``ssh-keygen -Y verify`` checks what ``sign`` makes, and
``verify`` checks what ``ssh-keygen -Y sign`` makes. Keys: Ed25519, ECDSA (P-256, P-384,
P-521) and RSA (rsa-sha2-512/256; SHA-1 ``ssh-rsa`` signatures are refused), read from their
private key files (OpenSSH's, or PEM), passphrase-protected or not. Security keys (``sk-``)
and certificates are not read: they sign through ssh-keygen only.

An allowed-signers file (ssh-keygen(1), ALLOWED SIGNERS; git's ``gpg.ssh.allowedSignersFile``)
lists one key a line: ``principals [options] keytype base64-key [comment]``; the options
honoured are ``namespaces="..."`` and ``valid-after``/``valid-before``; a ``cert-authority``
line trusts certificates, which are not read here, so it matches no signature.
"""

from __future__ import annotations

import base64
import fnmatch
import hashlib
import struct
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import (
    decode_dss_signature,
    encode_dss_signature,
)

from runner.errors import FileUnreadable, JobError, SigningError
from runner.job.sources import read_regular
from runner.passkeys import KEY_TYPE as PASSKEY_TYPE
from runner.passkeys import PASSKEYS_SUFFIX, from_b64url, passkey_blob

MAGIC = b"SSHSIG"
ARMOR = ("-----BEGIN SSH SIGNATURE-----", "-----END SSH SIGNATURE-----")
HASHES = {"sha512": hashlib.sha512, "sha256": hashlib.sha256}
_CURVES: dict[str, tuple[str, type[hashes.HashAlgorithm]]] = {
    "nistp256": ("secp256r1", hashes.SHA256), "nistp384": ("secp384r1", hashes.SHA384),
    "nistp521": ("secp521r1", hashes.SHA512)}
KEY_TYPES = ("ssh-ed25519", "ssh-rsa", *(f"ecdsa-sha2-{c}" for c in _CURVES))
#: The most read of a private key file, and of an allowed-signers file (bytes): an RSA key of
#: 16,384 bits is 13 KB; a line of the allowed signers is well under 1 KB.
KEY_FILE_LIMIT = 64 << 10
SIGNERS_FILE_LIMIT = 4 << 20
SigningKey = ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey
PublicKey = ed25519.Ed25519PublicKey | ec.EllipticCurvePublicKey | rsa.RSAPublicKey


def _string(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def _mpint(n: int) -> bytes:
    raw = n.to_bytes(n.bit_length() // 8 + 1, "big") if n else b""
    return _string(raw)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, n: int) -> bytes:
        if self.at + n > len(self.data):
            raise SigningError("the signature is cut short")
        chunk = self.data[self.at:self.at + n]
        self.at += n
        return chunk

    def string(self) -> bytes:
        (n,) = struct.unpack(">I", self.take(4))
        return self.take(n)

    def end(self) -> None:
        if self.at != len(self.data):
            raise SigningError("the signature has bytes after its end")


def key_blob(key: PublicKey) -> bytes:
    """The key in SSH's wire format (what fingerprints and allowed-signers lines are of)."""
    text = key.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return base64.b64decode(text.split()[1])


def fingerprint(blob: bytes) -> str:
    """``SHA256:...``, as ``ssh-keygen -l`` prints it."""
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


def _signed_data(namespace: str, hash_name: str, message: bytes) -> bytes:
    return (MAGIC + _string(namespace.encode()) + _string(b"") + _string(hash_name.encode())
            + _string(HASHES[hash_name](message).digest()))


def load_signing_key(path: Path, passphrase: Callable[[], str | None]) -> SigningKey:
    """The private key in ``path`` (OpenSSH's format or PEM); ``passphrase`` is asked only
    for a protected key. SigningError when it cannot sign (unreadable, a public key, a wrong
    passphrase, a type not read here)."""
    try:  # never a FIFO, a device or /proc/self/environ
        data = read_regular(path, KEY_FILE_LIMIT, f"larger than {KEY_FILE_LIMIT >> 10} KiB, "
                                                  "which no private key is")
    except (OSError, FileUnreadable) as exc:
        raise SigningError(f"{path}: cannot read the key: "
                           f"{getattr(exc, 'strerror', None) or exc}") from None
    if data.startswith((b"ssh-", b"ecdsa-", b"sk-")):
        raise SigningError(f"{path} is a public key; give its private key file (the one "
                           f"without .pub)")
    load = serialization.load_ssh_private_key if b"OPENSSH PRIVATE KEY" in data else \
        serialization.load_pem_private_key
    try:
        try:
            key = load(data, None)
        except TypeError:  # protected by a passphrase
            secret = passphrase()
            if not secret:
                raise SigningError(f"{path} is protected by a passphrase: set "
                                   f"RUNNER_KEY_PASSPHRASE, or sign on a terminal") from None
            key = load(data, secret.encode())
    except (ValueError, UnsupportedAlgorithm) as exc:
        reason = "a wrong passphrase, or not a key" if "password" in str(exc).lower() or \
            "checksum" in str(exc).lower() else str(exc)
        raise SigningError(f"{path}: cannot read the private key: {reason}") from None
    if not isinstance(key, ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey |
                      rsa.RSAPrivateKey):
        raise SigningError(f"{path}: a {type(key).__name__} does not sign here (Ed25519, "
                           f"ECDSA and RSA keys do)")
    if isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.name not in (
            c for c, _ in _CURVES.values()):
        raise SigningError(f"{path}: the curve {key.curve.name} does not sign here")
    return key


def sign(key: SigningKey, message: bytes, namespace: str) -> str:
    """The armored SSHSIG signature of ``message`` by ``key`` in ``namespace``."""
    data = _signed_data(namespace, "sha512", message)
    if isinstance(key, ed25519.Ed25519PrivateKey):
        inner = _string(b"ssh-ed25519") + _string(key.sign(data))
    elif isinstance(key, ec.EllipticCurvePrivateKey):
        curve, digest = next((name, h) for name, (c, h) in _CURVES.items()
                             if c == key.curve.name)
        r, s = decode_dss_signature(key.sign(data, ec.ECDSA(digest())))
        inner = _string(f"ecdsa-sha2-{curve}".encode()) + _string(_mpint(r) + _mpint(s))
    else:
        inner = _string(b"rsa-sha2-512") + _string(
            key.sign(data, padding.PKCS1v15(), hashes.SHA512()))
    blob = (MAGIC + struct.pack(">I", 1) + _string(key_blob(key.public_key()))
            + _string(namespace.encode()) + _string(b"") + _string(b"sha512") + _string(inner))
    text = base64.b64encode(blob).decode()
    return "\n".join([ARMOR[0], *(text[i:i + 70] for i in range(0, len(text), 70)),
                      ARMOR[1]]) + "\n"


def verify(armored: str, message: bytes, namespace: str) -> bytes:
    """The signer's public key (its blob) when ``armored`` is a good signature of ``message``
    in ``namespace``; SigningError otherwise (forged, of other bytes, another namespace)."""
    text = armored.strip()
    if not (text.startswith(ARMOR[0]) and text.endswith(ARMOR[1])):
        raise SigningError("not an SSH signature (-----BEGIN SSH SIGNATURE-----)")
    try:
        blob = base64.b64decode("".join(text[len(ARMOR[0]):-len(ARMOR[1])].split()),
                                validate=True)
    except ValueError:
        raise SigningError("the signature is not base64") from None
    read = _Reader(blob)
    if read.take(6) != MAGIC or struct.unpack(">I", read.take(4))[0] != 1:
        raise SigningError("not an SSHSIG signature of version 1")
    public, signed_ns = read.string(), read.string().decode(errors="replace")
    read.string()  # reserved
    hash_name = read.string().decode(errors="replace")
    inner = _Reader(read.string())
    read.end()
    if signed_ns != namespace:
        raise SigningError(f"signed for {signed_ns!r}, not {namespace!r}")
    if hash_name not in HASHES:
        raise SigningError(f"the hash {hash_name!r} is not sha512 nor sha256")
    sig_type, sig = inner.string().decode(errors="replace"), inner.string()
    inner.end()
    data = _signed_data(namespace, hash_name, message)
    key = _public_key(public)
    try:
        if isinstance(key, ed25519.Ed25519PublicKey) and sig_type == "ssh-ed25519":
            key.verify(sig, data)
        elif isinstance(key, ec.EllipticCurvePublicKey) and sig_type.startswith("ecdsa-sha2-"):
            curve = _CURVES.get(sig_type.removeprefix("ecdsa-sha2-"))
            if curve is None or curve[0] != key.curve.name:
                raise SigningError(f"a {sig_type} signature by a {key.curve.name} key")
            parts = _Reader(sig)
            r, s = (int.from_bytes(parts.string(), "big") for _ in range(2))
            parts.end()
            key.verify(encode_dss_signature(r, s), data, ec.ECDSA(curve[1]()))
        elif isinstance(key, rsa.RSAPublicKey) and sig_type in ("rsa-sha2-512", "rsa-sha2-256"):
            digest = hashes.SHA512() if sig_type == "rsa-sha2-512" else hashes.SHA256()
            key.verify(sig, data, padding.PKCS1v15(), digest)
        else:
            raise SigningError(f"a {sig_type} signature is not read here")
    except InvalidSignature:
        raise SigningError("the signature does not match the plan (edited since it was "
                           "signed, or forged)") from None
    return public


def _public_key(blob: bytes) -> PublicKey:
    kind = _Reader(blob).string().decode(errors="replace")
    if kind not in KEY_TYPES:
        raise SigningError(f"a {kind} key is not read here (Ed25519, ECDSA and RSA keys are)")
    try:
        key = serialization.load_ssh_public_key(
            kind.encode() + b" " + base64.b64encode(blob))
    except (ValueError, UnsupportedAlgorithm) as exc:
        raise SigningError(f"the signer's key cannot be read: {exc}") from None
    assert isinstance(key, ed25519.Ed25519PublicKey | ec.EllipticCurvePublicKey |
                      rsa.RSAPublicKey)
    return key


# ---------------------------------------------------------------- allowed signers
@dataclass(frozen=True)
class AllowedSigner:
    """One line of an allowed-signers file: who (``principals``, as written), the key, and
    its limits."""

    principals: str
    key: bytes
    line: int
    namespaces: tuple[str, ...] | None = None
    valid_after: datetime | None = None
    valid_before: datetime | None = None
    cert_authority: bool = False
    # A passkey's line (``runner.passkeys``): its relying party, credential and COSE key.
    rp_id: str = ""
    credential_id: bytes = b""
    public_key: bytes = b""

    @property
    def passkey(self) -> bool:
        return bool(self.credential_id)

    def refuses(self, namespace: str, now: datetime) -> str:
        """Why this line does not let its key sign in ``namespace`` at ``now``; "" if it
        does."""
        if self.cert_authority:
            return "its line trusts certificates (cert-authority), which are not read here"
        if self.namespaces is not None and not any(fnmatch.fnmatchcase(namespace, n)
                                                   for n in self.namespaces):
            return f"its line allows only namespaces {','.join(self.namespaces)}"
        if self.valid_after is not None and now < self.valid_after:
            return f"its line makes it valid only after {self.valid_after:%Y-%m-%d %H:%M}"
        if self.valid_before is not None and now >= self.valid_before:
            return f"its line made it valid only before {self.valid_before:%Y-%m-%d %H:%M}"
        return ""


def read_allowed_signers(path: Path) -> list[AllowedSigner]:
    """Every key of the allowed-signers file ``path``, and of the passkeys file beside it
    (``passkeys_of``) when there is one; a JobError naming the file and line for one that
    cannot be read (a trust list is read whole or not at all)."""
    signers = _read_signers(path)
    beside = passkeys_of(path)
    return signers + _read_signers(beside) if beside.is_file() else signers


def passkeys_of(path: Path) -> Path:
    """The passkeys file beside the allowed-signers file ``path`` (``runner.passkeys``)."""
    return path.with_name(path.name + PASSKEYS_SUFFIX)


def _read_signers(path: Path) -> list[AllowedSigner]:
    try:
        # Never a FIFO, a device or /proc/self/environ.
        text = read_regular(path, SIGNERS_FILE_LIMIT, f"larger than {SIGNERS_FILE_LIMIT >> 20} "
                                                      "MiB (thousands of keys fit in less)"
                            ).decode("utf-8")
    except (OSError, UnicodeDecodeError, FileUnreadable) as exc:
        raise JobError(str(path), None, None, f"cannot read the approvers' keys: "
                       f"{getattr(exc, 'strerror', None) or exc}") from None
    return parse_allowed_signers(text, str(path))


def parse_allowed_signers(text: str, where: str) -> list[AllowedSigner]:
    """Every key of an allowed-signers file's ``text`` (from ``where``, for messages)."""
    signers = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip() and not line.lstrip().startswith("#"):
            try:
                signers.append(_signer(line, number))
            except ValueError as exc:
                raise JobError(where, number, None, str(exc)) from None
    return signers


def _split(text: str, separators: str) -> list[str]:
    """``text`` cut at ``separators`` outside double quotes (the quotes kept)."""
    parts, current, quoted = [], "", False
    for char in text:
        if char == '"':
            quoted = not quoted
        if char in separators and not quoted:
            if current:
                parts.append(current)
            current = ""
        else:
            current += char
    if quoted:
        raise ValueError("a quote is not closed")
    return [*parts, current] if current else parts


def _signer(line: str, number: int) -> AllowedSigner:
    words = _split(line.strip(), " \t")
    if len(words) < 3:
        raise ValueError("expected: principals [options] keytype base64-key [comment]")
    principals, rest = words[0].strip('"'), words[1:]
    options: dict[str, str] = {}
    if rest[0] not in (*KEY_TYPES, PASSKEY_TYPE) and not rest[0].startswith(
            ("sk-", "ssh-", "ecdsa-")):
        for option in _split(rest[0], ","):
            name, _, value = option.partition("=")
            options[name.lower()] = value.strip('"')
        rest = rest[1:]
    if len(rest) < 2:
        raise ValueError("a key type and a base64 key are expected after the principals")
    kind, encoded = rest[0], rest[1]
    if kind == PASSKEY_TYPE:
        return _passkey(principals, options, encoded, number)
    if kind not in KEY_TYPES:
        raise ValueError(f"a {kind} key is not read here (Ed25519, ECDSA and RSA keys are)")
    try:
        blob = base64.b64decode(encoded, validate=True)
        if _Reader(blob).string().decode() != kind:
            raise ValueError
    except (ValueError, SigningError):
        raise ValueError(f"the {kind} key is not valid base64 of such a key") from None
    unknown = set(options) - {"cert-authority", "namespaces", "valid-after", "valid-before"}
    if unknown:
        raise ValueError(f"unknown option {sorted(unknown)[0]!r}")
    namespaces = tuple(options["namespaces"].split(",")) if "namespaces" in options else None
    return AllowedSigner(principals, blob, number, namespaces,
                         _time(options.get("valid-after")), _time(options.get("valid-before")),
                         "cert-authority" in options)


def _passkey(principals: str, options: dict[str, str], encoded: str,
             number: int) -> AllowedSigner:
    """A passkeys file's line (``runner.passkeys``)."""
    unknown = set(options) - {"rp-id", "credential", "namespaces", "valid-after",
                              "valid-before"}
    if unknown:
        raise ValueError(f"unknown option {sorted(unknown)[0]!r}")
    rp_id = options.get("rp-id", "")
    if not rp_id or "credential" not in options:
        raise ValueError('a passkey\'s line names its rp-id="..." and credential="..."')
    try:
        credential, key = from_b64url(options["credential"]), from_b64url(encoded)
    except ValueError:
        raise ValueError("the passkey's credential and key are base64url") from None
    if not credential or not key:
        raise ValueError("the passkey's credential and key are base64url")
    namespaces = tuple(options["namespaces"].split(",")) if "namespaces" in options else None
    return AllowedSigner(principals, passkey_blob(rp_id, credential, key), number, namespaces,
                         _time(options.get("valid-after")), _time(options.get("valid-before")),
                         rp_id=rp_id, credential_id=credential, public_key=key)


def _time(value: str | None) -> datetime | None:
    """ssh-keygen's YYYYMMDD[HHMM[SS]][Z] (without Z: the local time zone)."""
    if value is None:
        return None
    utc, text = value.endswith("Z"), value.removesuffix("Z")
    forms = {8: "%Y%m%d", 12: "%Y%m%d%H%M", 14: "%Y%m%d%H%M%S"}
    if len(text) not in forms:
        raise ValueError(f"{value!r} is not YYYYMMDD[HHMM[SS]][Z]")
    when = datetime.strptime(text, forms[len(text)])
    return when.replace(tzinfo=UTC) if utc else when.astimezone()


def signer_of(signers: list[AllowedSigner], key: bytes, namespace: str,
              now: datetime) -> tuple[AllowedSigner | None, str]:
    """The line that lets ``key`` sign in ``namespace`` at ``now`` (and ""), or None and why
    not."""
    lines = [s for s in signers if s.key == key]
    if not lines:
        return None, "its key is not in run.approvers"
    why = ""
    for line in lines:
        why = line.refuses(namespace, now)
        if not why:
            return line, ""
    return None, why
