"""Contract tests from the provider's public v1 reference: its recorded example requests and
answers (tests/reference/money-transfer-v1.json, each with its source) are asked of the
sandbox, over real HTTP and signed as real clients sign, and the answers must have the same
status codes, fields, types and nesting (values are the sandbox catalogue's own).

Where the provider's documents and the reference disagree, the documents win: ``DOCUMENTS_WIN``
lists each such field with the reason; any other difference fails.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import requests
import simplejson
from conftest import KEY, SECRET, Admin, Api, body
from notification_receiver import Receiver
from real_client import BRAND, RealClient

from runner.sandbox import RunningSandbox

REFERENCE = simplejson.loads(
    (Path(__file__).parent / "reference" / "money-transfer-v1.json").read_text("utf-8"),
    use_decimal=True)
EXAMPLES = {e["name"]: e for e in REFERENCE["examples"]}
CALLS = [name for name in EXAMPLES if name != "callback"]

# Fields where the reference's example and the documents differ; the sandbox follows the
# documents (document 2, money-transfer-service.md).
DOCUMENTS_WIN = {
    "callback": {
        "sender.bank": "only the reference's example shows it; document 2's Sender has no "
                       "bank field",
        "sender.bank_account": "only the reference's example shows it; document 2's Sender "
                               "has bank_account_number instead",
        "sender.card": "only the reference's example shows it; document 2's Sender has no "
                       "card field",
        "sender.bank_account_number": "document 2's Sender lists it; the reference's example "
                                      "has bank_account instead",
    },
}


# ---------------------------------------------------------------- shapes
def kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | Decimal | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def differences(reference: Any, sandbox: Any, keyed: tuple[str, ...] = (),
                path: str = "") -> Iterator[str]:
    """How the sandbox's value differs from the reference's in fields, types and nesting
    (a null on either side stands for any type: the fields are nullable). ``keyed``: paths
    of objects whose keys are data (the rates by source currency)."""
    mine, theirs = kind(reference), kind(sandbox)
    if "null" in (mine, theirs):
        return
    if mine != theirs:
        yield f"{path or 'body'}: {mine} in the reference, {theirs} in the sandbox"
    elif mine == "array":
        for a in reference:
            for b in sandbox:
                yield from differences(a, b, keyed, f"{path}[]")
    elif mine == "object" and path in keyed:
        for a in reference.values():
            for b in sandbox.values():
                yield from differences(a, b, keyed, f"{path}{{}}")
    elif mine == "object":
        here = f"{path}." if path else ""
        for name in reference.keys() - sandbox.keys():
            yield f"{here}{name}: in the reference only"
        for name in sandbox.keys() - reference.keys():
            yield f"{here}{name}: in the sandbox only"
        for name in reference.keys() & sandbox.keys():
            yield from differences(reference[name], sandbox[name], keyed, here + name)


def unexplained(name: str, found: Iterator[str]) -> list[str]:
    allowed = DOCUMENTS_WIN.get(name, {})
    return sorted(d for d in set(found) if d.split(":")[0].replace("[]", "") not in allowed)


def test_the_shape_comparison_sees_fields_types_and_nesting() -> None:
    ref = {"a": 1, "b": {"c": "x"}, "d": [{"e": 1}], "f": None}
    assert list(differences(ref, {"a": 2, "b": {"c": "y"}, "d": [{"e": 3}], "f": 4})) == []
    assert set(differences(ref, {"a": "1", "b": {"c": 1, "z": 0}, "d": [{}], "f": 4})) == {
        "a: number in the reference, string in the sandbox",
        "b.c: string in the reference, number in the sandbox",
        "b.z: in the sandbox only", "d[].e: in the reference only"}


# ---------------------------------------------------------------- the calls
@pytest.fixture
def branded(sandbox_factory: Callable[..., RunningSandbox]) -> RunningSandbox:
    return sandbox_factory(header_brand=BRAND)


@pytest.mark.parametrize("name", CALLS)
def test_the_sandbox_answers_the_reference_calls_alike(branded: RunningSandbox,
                                                       name: str) -> None:
    example = EXAMPLES[name]
    asked, expected = example["request"], example["response"]
    path = example.get("sandbox_path", asked["path"])
    if asked.get("credentials", True):
        answer = RealClient(branded.url).call(asked["method"], path)
    else:
        answer = requests.request(asked["method"], branded.url + path, timeout=30)
    assert answer.status_code == expected["status"], (example["source"], answer.text)
    written = list(answer.raw.headers.keys())  # as on the wire, case and all
    for header, value in expected.get("headers", {}).items():
        assert header in written, (example["source"], header, written)
        assert re.fullmatch(r"[1-9][0-9]*", answer.headers[header]), header
        if header in ("X-Per-Page", "X-Page"):  # what the request asked
            assert answer.headers[header] == value, (header, answer.headers[header])
    if "body" in expected:
        found = differences(expected["body"], body(answer), tuple(example.get("keyed", ())))
        assert unexplained(name, found) == [], example["source"]
    if name == "error":
        assert body(answer)["errors"][0]["code"] == expected["body"]["errors"][0]["code"]


def test_the_callback_is_the_reference_s(branded: RunningSandbox,
                                        receivers: Callable[..., Receiver]) -> None:
    example = EXAMPLES["callback"]["request"]
    receiver = receivers()
    api, admin = Api(branded.url, (KEY, SECRET)), Admin(branded.url)
    reference = example["body"]
    quotation = body(api.post("/v1/money-transfer/quotations", {
        "external_id": "q-1", "payer_id": 1, "mode": "SOURCE_AMOUNT",
        "source": {"country_iso_code": "FRA", "currency": "EUR", "amount": Decimal(10)},
        "destination": {"currency": "KES"}}))
    made = api.post(f"/v1/money-transfer/quotations/{quotation['id']}/transactions", {
        "external_id": "t-1", "credit_party_identifier": reference["credit_party_identifier"],
        "sender": {k: v for k, v in reference["sender"].items()
                   if k not in ("bank", "bank_account", "card")},
        "beneficiary": reference["beneficiary"], "callback_url": receiver.url("/callback"),
        "retail_fee": Decimal(1), "retail_fee_currency": "EUR",
        "purpose_of_remittance": reference["purpose_of_remittance"]})
    assert made.status_code == 201, made.text
    api.post(f"/v1/money-transfer/transactions/{body(made)['id']}/confirm")
    admin.advance(60)
    admin.advance(60)
    delivered = receiver.wait_for(3)[2]
    assert delivered.path == example["path"] and delivered.json["status"] == 70000
    assert unexplained("callback", differences(reference, delivered.json)) == []
    # Header names are case-insensitive (RFC 7230): the reference writes X-TransferTo-Apikey,
    # the sandbox X-TransferTo-apikey as document 2 writes X-Svc-apikey (the documents win).
    for name in example["headers"]:
        assert name.lower() in delivered.headers, name
    headers = delivered.headers
    assert headers["content-type"] == example["headers"]["Content-Type"]
    date = headers["date"]
    assert date.endswith(" GMT") and delivered.dated_in_real_time()  # (RFC 1123)
    nonce = headers[f"x-{BRAND.lower()}-nonce"]
    # The reference's nonce is the Unix time in seconds; the sandbox's begins so, and a
    # random part keeps it unique per delivery (document 2: unique per request, <= 64).
    assert re.match(r"[0-9]{10}", nonce) and len(nonce) <= 64
    signed = hmac.new(SECRET.encode(), (KEY + nonce + date).encode(), hashlib.sha256)
    assert headers[f"x-{BRAND.lower()}-hmac"] == base64.b64encode(signed.digest()).decode()
