"""Passkeys: approvals signed with WebAuthn, checked offline the way SSH signatures are
(``runner.signatures``), by the kept library py_webauthn (``webauthn``: the CBOR, COSE keys
and the assertion's checks; nothing here parses them).

A passkey is registered once in `runner console` (``registration_options``, then
``registered``): the console shows the line its holder adds to the passkeys file beside the
allowed-signers file (``approvers`` -> ``approvers.passkeys``), reviewed in the same
repository as it. A line is an allowed-signers line whose key type is ``webauthn``::

    alice@example.com rp-id="localhost",credential="fQ3f...",valid-before="20271231Z" \
        webauthn pQECAyYg...

(one line in the file).

``credential`` is the credential's id and the key its COSE public key (base64url, no padding),
``rp-id`` the relying party (the console's host name) it was made for. Such a line counts as
one key (``AllowedSigner.key`` is ``passkey_blob``'s), with the same options and limits as an
SSH key's.

Signing is an assertion (``navigator.credentials.get``) whose challenge is ``challenge``:
the sha256 of the namespace and the very message an SSH signature signs (a plan's digest,
the role, the time; a payee's account and name), so an assertion made for one plan or one
decision never passes for another. ``verify`` checks one against the passkey's registered
key, offline: the relying party's hash, the origin's host (the rp-id or below it), user
presence and verification, the signature. The signature counter is not kept (an approval is
checked again years later, offline); a cloned passkey is the holder's to revoke by removing
its line.
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from runner.errors import SigningError

KEY_TYPE = "webauthn"
PASSKEYS_SUFFIX = ".passkeys"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def from_b64url(text: str) -> bytes:
    """The bytes of base64url ``text`` (padding optional); ValueError when it is not."""
    if not isinstance(text, str) or not all(c.isalnum() or c in "-_=" for c in text):
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def passkey_blob(rp_id: str, credential_id: bytes, public_key: bytes) -> bytes:
    """What stands for a passkey where an SSH key's blob would (fingerprints, trust lists):
    its relying party, credential id and public key, length-prefixed."""
    return b"".join(struct.pack(">I", len(p)) + p for p in (
        KEY_TYPE.encode(), rp_id.encode(), credential_id, public_key))


def passkey_line(principal: str, rp_id: str, credential_id: bytes, public_key: bytes,
                 comment: str = "") -> str:
    """The passkeys file's line for a registered passkey."""
    return (f'{principal} rp-id="{rp_id}",credential="{b64url(credential_id)}" {KEY_TYPE} '
            f"{b64url(public_key)}{' ' + comment if comment else ''}")


def challenge(namespace: str, message: bytes) -> bytes:
    """What an assertion over ``message`` in ``namespace`` signs as its challenge."""
    return hashlib.sha256(namespace.encode() + b"\n" + message).digest()


@dataclass(frozen=True)
class Assertion:
    """A WebAuthn assertion as a plan file or the state keeps it (base64url texts)."""

    credential_id: str
    authenticator_data: str
    client_data_json: str
    signature: str
    user_handle: str = ""

    @classmethod
    def from_entry(cls, entry: Any) -> Assertion:
        """The assertion in a signature entry's ``passkey`` (or a browser's credential
        JSON); SigningError when it is not one."""
        if not isinstance(entry, dict):
            raise SigningError("the passkey signature is not an assertion")
        response = entry.get("response", entry)
        values = {"credential_id": entry.get("credential_id", entry.get("rawId")),
                  "authenticator_data": response.get("authenticator_data",
                                                     response.get("authenticatorData")),
                  "client_data_json": response.get("client_data_json",
                                                   response.get("clientDataJSON")),
                  "signature": response.get("signature")}
        if not all(isinstance(v, str) and v for v in values.values()):
            raise SigningError("the passkey signature lacks its credential, authenticator "
                               "data, client data or signature")
        handle = response.get("user_handle", response.get("userHandle")) or ""
        return cls(**values, user_handle=handle if isinstance(handle, str) else "")

    def as_entry(self) -> dict[str, str]:
        return {"credential_id": self.credential_id,
                "authenticator_data": self.authenticator_data,
                "client_data_json": self.client_data_json, "signature": self.signature,
                **({"user_handle": self.user_handle} if self.user_handle else {})}

    def origin(self) -> str:
        try:
            client = json.loads(from_b64url(self.client_data_json))
        except (ValueError, UnicodeDecodeError):
            raise SigningError("the passkey's client data is not JSON") from None
        origin = client.get("origin") if isinstance(client, dict) else None
        if not isinstance(origin, str):
            raise SigningError("the passkey's client data names no origin")
        return origin


def origin_allowed(origin: str, rp_id: str) -> bool:
    """WebAuthn's rule: the origin's host is the relying party's id or below it, over
    https (http only on localhost, as browsers allow)."""
    parts = urlsplit(origin)
    host = parts.hostname or ""
    return (host == rp_id or host.endswith("." + rp_id)) and (
        parts.scheme == "https" or (parts.scheme == "http" and host == "localhost"))


def verify(assertion: Assertion, expected_challenge: bytes, rp_id: str,
           public_key: bytes) -> None:
    """Check ``assertion`` over ``expected_challenge`` by the passkey registered for
    ``rp_id`` with ``public_key``; SigningError naming why it does not hold."""
    import webauthn
    from webauthn.helpers.exceptions import InvalidAuthenticationResponse, InvalidCBORData

    origin = assertion.origin()
    if not origin_allowed(origin, rp_id):
        raise SigningError(f"made at {origin}, which is not a page of {rp_id}")
    credential = {"id": assertion.credential_id, "rawId": assertion.credential_id,
                  "type": "public-key",
                  "response": {"authenticatorData": assertion.authenticator_data,
                               "clientDataJSON": assertion.client_data_json,
                               "signature": assertion.signature,
                               **({"userHandle": assertion.user_handle}
                                  if assertion.user_handle else {})}}
    try:
        webauthn.verify_authentication_response(
            credential=credential, expected_challenge=expected_challenge,
            expected_rp_id=rp_id, expected_origin=origin, credential_public_key=public_key,
            credential_current_sign_count=0, require_user_verification=True)
    except InvalidAuthenticationResponse as exc:
        text = str(exc)
        if "challenge" in text.lower():
            text = "it was made for other bytes (another plan, decision or time)"
        raise SigningError(f"the passkey's assertion does not hold: {text}") from None
    except (InvalidCBORData, ValueError, KeyError, TypeError) as exc:
        raise SigningError(f"the passkey's assertion cannot be read: {exc}") from None


# ---------------------------------------------------------------- registration
def registration_options(rp_id: str, rp_name: str, user: str, challenge_bytes: bytes
                         ) -> str:
    """The options (JSON) for ``navigator.credentials.create`` of a passkey for ``user``."""
    import webauthn
    from webauthn.helpers.structs import (
        AuthenticatorSelectionCriteria,
        ResidentKeyRequirement,
        UserVerificationRequirement,
    )

    options = webauthn.generate_registration_options(
        rp_id=rp_id, rp_name=rp_name, user_name=user, user_id=hashlib.sha256(
            user.encode()).digest()[:16], challenge=challenge_bytes,
        authenticator_selection=AuthenticatorSelectionCriteria(
            resident_key=ResidentKeyRequirement.PREFERRED,
            user_verification=UserVerificationRequirement.REQUIRED))
    return str(webauthn.options_to_json(options))


def registered(credential: dict[str, Any], challenge_bytes: bytes, rp_id: str,
               origin: str, user: str) -> str:
    """The passkeys file's line for the passkey the browser made (``credential``, its JSON)
    against ``challenge_bytes``; SigningError when it does not hold."""
    import webauthn
    from webauthn.helpers.exceptions import InvalidCBORData, InvalidRegistrationResponse

    try:
        made = webauthn.verify_registration_response(
            credential=credential, expected_challenge=challenge_bytes, expected_rp_id=rp_id,
            expected_origin=origin, require_user_verification=True)
    except (InvalidRegistrationResponse, InvalidCBORData, ValueError, KeyError,
            TypeError) as exc:
        raise SigningError(f"the passkey was not made: {exc}") from None
    return passkey_line(user, rp_id, made.credential_id, made.credential_public_key)


def request_options(rp_id: str, challenge_bytes: bytes, credential_ids: list[bytes]) -> str:
    """The options (JSON) for ``navigator.credentials.get`` over ``challenge_bytes`` by one
    of ``credential_ids``."""
    import webauthn
    from webauthn.helpers.structs import (
        PublicKeyCredentialDescriptor,
        UserVerificationRequirement,
    )

    options = webauthn.generate_authentication_options(
        rp_id=rp_id, challenge=challenge_bytes,
        allow_credentials=[PublicKeyCredentialDescriptor(id=c) for c in credential_ids],
        user_verification=UserVerificationRequirement.REQUIRED)
    return str(webauthn.options_to_json(options))
