"""A passkey made in the test itself (what an authenticator holds: a P-256 key and a
credential id), to register in a passkeys file and to make WebAuthn assertions with, as a
browser's authenticator makes them (authenticator data, client data, an ECDSA signature), so
that `runner apply`'s offline checks are driven without a browser. The browser tests make
theirs in Chromium's virtual authenticator."""

from __future__ import annotations

import hashlib
import json
import os
import struct
from dataclasses import dataclass, field
from typing import Any

import cbor2
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

from runner import passkeys
from runner.engine.plan_file import digest_of
from runner.engine.plan_signing import NAMESPACE, message


@dataclass
class SoftPasskey:
    principal: str
    rp_id: str = "localhost"
    origin: str = "http://localhost:8600"
    key: ec.EllipticCurvePrivateKey = field(
        default_factory=lambda: ec.generate_private_key(ec.SECP256R1()))
    credential_id: bytes = field(default_factory=lambda: os.urandom(16))
    count: int = 0

    @property
    def cose(self) -> bytes:
        numbers = self.key.public_key().public_numbers()
        return cbor2.dumps({1: 2, 3: -7, -1: 1, -2: numbers.x.to_bytes(32, "big"),
                            -3: numbers.y.to_bytes(32, "big")})

    def line(self, options: str = "") -> str:
        """Its line of a passkeys file (``options``: more, such as valid-before=...)."""
        text = passkeys.passkey_line(self.principal, self.rp_id, self.credential_id,
                                     self.cose)
        if options:
            text = text.replace('" webauthn', f'",{options} webauthn', 1)
        return text

    def assertion(self, challenge: bytes, origin: str | None = None,
                flags: int = 0x05) -> dict[str, str]:
        """An assertion over ``challenge`` (user present and verified), as a plan entry's
        ``passkey`` holds it."""
        self.count += 1
        data = hashlib.sha256(self.rp_id.encode()).digest() + bytes([flags]) + \
            struct.pack(">I", self.count)
        client = json.dumps({"type": "webauthn.get", "challenge": passkeys.b64url(challenge),
                             "origin": origin or self.origin, "crossOrigin": False}).encode()
        signature = self.key.sign(data + hashlib.sha256(client).digest(),
                                  ec.ECDSA(hashes.SHA256()))
        return passkeys.Assertion(passkeys.b64url(self.credential_id), passkeys.b64url(data),
                                  passkeys.b64url(client), passkeys.b64url(signature)
                                  ).as_entry()

    def credential(self, challenge: bytes, origin: str | None = None) -> dict[str, Any]:
        """An assertion over ``challenge`` as a browser's script sends it (the JSON of a
        PublicKeyCredential)."""
        proof = self.assertion(challenge, origin)
        return {"id": proof["credential_id"], "rawId": proof["credential_id"],
                "type": "public-key", "response": {
                    "authenticatorData": proof["authenticator_data"],
                    "clientDataJSON": proof["client_data_json"],
                    "signature": proof["signature"]}}

    def sign_plan(self, content: dict[str, Any], role: str = "approve",
                  at: str = "2026-11-25T10:00:00Z", reason: str = "") -> dict[str, Any]:
        """A signature entry of the plan ``content`` by this passkey."""
        text = message(digest_of(content), role, at, reason)
        return {"role": role, "signed_at": at, **({"reason": reason} if reason else {}),
                "passkey": self.assertion(passkeys.challenge(NAMESPACE, text))}
