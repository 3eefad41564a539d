"""Client of the legacy single-call Pay (``POST /Rest/V40/PaymentOrder/Pay``, document 3
part B), in JSON or XML: the answer comes back in the request's form.

The call reports in its own ReturnCodes (docs/sandbox.md, "Legacy Pay"): 1000 is success, and every
other answer is mapped onto the exception tree by ``runner.provider.errors.error_from_answer``, as
every client's answers are (3000 ``PayRefused``, 5000 ``PayStatusUnknown`` in doubt, 5050
``ServiceUnavailable`` safe to retry, and so on; its ``BY_RETURN_CODE`` is the table).

A lost connection or a timeout after sending is in doubt too (``http.ProviderClient.send``). The
call has no lookup of its own, so the engine never sends an in-doubt Pay again (rule 5 of
docs/exactly-once.md). XML is written with the standard library and read with defusedxml (no DTD, no
entities). Card data goes out in the request body only: nothing here logs or keeps it.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

import defusedxml.ElementTree as SafeET
import simplejson

from runner.provider.errors import answer_int, answer_text, error_from_answer
from runner.provider.http import ProviderClient

PAY = "/Rest/V40/PaymentOrder/Pay"
MEDIA = {"json": "application/json", "xml": "application/xml"}
SUCCESS = 1000


class LegacyPayClient(ProviderClient):
    prefix = ""

    def pay(self, order: Mapping[str, Any], credentials: Sequence[Mapping[str, str]],
            form: str = "json", external_id: str | None = None) -> dict[str, Any]:
        """One Pay. ``order`` is the PaymentOrder (document's field names, Amount a Decimal),
        ``credentials`` its ``{name, credential}`` list, ``form`` json or xml. Returns the
        answer's fields (ReturnCode 1000); any other answer raises."""
        if form not in MEDIA:
            raise ValueError(f"form must be json or xml, not {form!r}")
        body = (xml_request(order, credentials) if form == "xml"
                else simplejson.dumps({"PaymentOrder": order, "Credentials": list(credentials)},
                                      use_decimal=True).encode())

        def read(raw: bytes, headers: Mapping[str, str]) -> dict[str, Any] | None:
            answer = read_answer(raw, headers.get("Content-Type"), form)
            if answer is None and raw:
                raise ValueError("not a Pay answer")  # (its connection is closed)
            return answer

        response = self.send("POST", PAY, data=body, external_id=external_id, read=read,
                             headers={"Content-Type": f"{MEDIA[form]}; charset=utf-8",
                                      "Accept": MEDIA[form]})
        endpoint = f"POST {PAY}"
        answer = response.body
        if answer is not None and answer_int(answer.get("ReturnCode")) == SUCCESS:
            # XML answers are text: the same types whatever the form.
            return {**answer, "ReturnCode": SUCCESS,
                    "PaymentOrderId": answer_int(answer.get("PaymentOrderId")),
                    "Status": answer_text(answer.get("Status"))}
        raise error_from_answer(response.status_code, answer, endpoint, external_id,
                                response.headers.get("Retry-After"), response.unexpected)


def xml_request(order: Mapping[str, Any], credentials: Sequence[Mapping[str, str]]) -> bytes:
    """``<Request><PaymentOrder>...</PaymentOrder><Credentials><Credential name="...">``."""
    root = ET.Element("Request")
    _fill(ET.SubElement(root, "PaymentOrder"), order)
    holder = ET.SubElement(root, "Credentials")
    for c in credentials:
        ET.SubElement(holder, "Credential", name=c["name"]).text = c["credential"]
    # (typeshed types tostring by its encoding only for the default and "unicode".)
    written: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return written


def _fill(parent: ET.Element, values: Mapping[str, Any]) -> None:
    for name, value in values.items():
        if value is None:
            continue
        if isinstance(value, Mapping):
            _fill(ET.SubElement(parent, name), value)
        else:
            ET.SubElement(parent, name).text = (format(value, "f") if isinstance(value, Decimal)
                                                else str(value))


def read_answer(raw: bytes, content_type: str | None, sent: str) -> dict[str, Any] | None:
    """The answer's fields, from JSON or XML (as its Content-Type says, else as sent); None
    when it cannot be read."""
    media = (content_type or "").split(";")[0].strip().lower()
    form = "xml" if media.endswith("xml") else "json" if media.endswith("json") else sent
    if not raw:
        return None
    if form == "xml":
        try:
            root = SafeET.fromstring(raw, forbid_dtd=True)
        except (SafeET.ParseError, ValueError):  # ValueError: defusedxml's refusals
            return None
        if root.tag != "Response":
            return None
        return {child.tag: (child.text or "").strip() for child in root}
    try:
        answer = simplejson.loads(raw, use_decimal=True)
    except (ValueError, UnicodeDecodeError):
        return None
    return answer if isinstance(answer, dict) else None

