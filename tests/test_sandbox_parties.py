"""The sandbox's credit and debit party checks, as payee checks use them: who holds an account
(the known parties, and whoever a verification named first), the documented test values
(unregistered, closed, a failing check, a close variant of the name, somebody else), the
payers and methods that offer no check, the calls counted apart, and the register kept
across a restart on a state file."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import requests
from conftest import KEY, SECRET, Admin, Api, body, error_of

from runner.sandbox import RunningSandbox

MT = "/v1/money-transfer"
MP = "/v1/merchant-payment"
ADA = {"firstname": "Ada", "lastname": "Kamau"}


def verify(api: Api, identifier: dict[str, str], party: dict[str, str] | None = ADA,
           payer: int = 1) -> requests.Response:
    extra = {"beneficiary": party} if party is not None else {}
    return api.post(f"{MT}/payers/{payer}/credit-party-verification",
                    {"credit_party_identifier": identifier, **extra})


def inform(api: Api, identifier: dict[str, str], payer: int = 1) -> requests.Response:
    return api.post(f"{MT}/payers/{payer}/credit-party-information",
                    {"credit_party_identifier": identifier})


def holder(r: requests.Response, key: str | None = None) -> tuple[str, str]:
    assert r.status_code == 200, r.text
    found = body(r)[key] if key else body(r)
    return found["firstname"], found["lastname"]


def test_the_first_verification_names_an_account_holder_and_the_test_values(api: Api) -> None:
    # An account nobody named is unknown; the first name verified holds it from then on.
    fresh = {"msisdn": "+254700123456"}
    assert error_of(inform(api, fresh)) == (404, "1000404")
    assert body(verify(api, fresh, party=None))["account_status"] == "AVAILABLE"
    assert error_of(inform(api, fresh)) == (404, "1000404")  # no name given: none held
    assert body(verify(api, fresh)) == {"id": 1, "account_status": "AVAILABLE"}
    assert holder(inform(api, fresh)) == ("Ada", "Kamau")
    verify(api, fresh, {"firstname": "Peter", "lastname": "Otieno"})
    assert holder(inform(api, fresh)) == ("Ada", "Kamau")
    # A known party holds its account whatever a verification says.
    known = {"msisdn": "+254700100200"}
    verify(api, known, {"firstname": "Peter", "lastname": "Otieno"})
    assert holder(inform(api, known)) == ("Wanjiru", "Kamau")
    # The test values.
    assert body(verify(api, {"msisdn": "+254700999401"}))["account_status"] == "UNREGISTERED"
    assert error_of(inform(api, {"msisdn": "+254700999401"})) == (404, "1000404")
    closed = {"msisdn": "+254700999402"}
    assert body(verify(api, closed))["account_status"] == "UNAVAILABLE"
    assert holder(inform(api, closed)) == ("Ada", "Kamau")
    failing = {"msisdn": "+254700999403"}
    assert error_of(verify(api, failing)) == (500, "1009001")
    assert error_of(inform(api, failing)) == (500, "1009001")
    close = {"msisdn": "+254700999411"}
    assert body(verify(api, close))["account_status"] == "AVAILABLE"
    assert holder(inform(api, close)) == ("Ada", "Kamao")
    verify(api, {"msisdn": "+254711999411"}, {"firstname": "Ngozi", "lastname": ""})
    assert holder(inform(api, {"msisdn": "+254711999411"})) == ("Ngozy", "")
    other = {"msisdn": "+254700999412"}
    verify(api, other)
    assert holder(inform(api, other)) == ("Ines", "Valderrama")
    # A bank account is one account with its SWIFT code: another code is another account.
    bank = {"bank_account_number": "5550001234", "swift_bic_code": "BMNLPHMM"}
    assert body(verify(api, bank, payer=4))["account_status"] == "AVAILABLE"
    assert holder(inform(api, bank, payer=4)) == ("Ada", "Kamau")
    assert error_of(inform(api, {**bank, "swift_bic_code": "BOPIPHMM"}, payer=4)) == \
        (404, "1000404")


def test_payers_and_methods_that_offer_no_check(api: Api) -> None:
    # Cash pick-up has no account to check; payer 6 checks its bank accounts, not wallets.
    for payer in (7, 10):
        assert error_of(verify(api, {"msisdn": "+639171234567"}, payer=payer)) == \
            (400, "1007100")
        assert error_of(inform(api, {"msisdn": "+639171234567"}, payer=payer)) == \
            (400, "1007100")
    status, code = error_of(verify(api, {"msisdn": "+2348031234567"}, payer=6))
    assert (status, code) == (400, "1000999")
    bank = {"bank_account_number": "1234567890", "swift_bic_code": "LCBKNGLA"}
    assert holder(inform(api, bank, payer=6)) == ("Adaeze", "Nwosu")
    path = f"{MP}/payment-methods/3/debit-party-verification"
    assert error_of(api.post(path, {"debit_party_identifier": {"email": "a@x.test"},
                                    "consumer": {**ADA, "email": "a@x.test"}})) == \
        (400, "1007100")


def test_debit_party_checks_share_the_register_and_test_values(api: Api) -> None:
    def mverify(ident: dict[str, str]) -> str:
        r = api.post(f"{MP}/payment-methods/1/debit-party-verification",
                     {"debit_party_identifier": ident, "consumer": ADA})
        assert r.status_code == 200, r.text
        return str(body(r)["account_status"])

    def minform(ident: dict[str, str]) -> requests.Response:
        return api.post(f"{MP}/payment-methods/1/debit-party-information",
                        {"debit_party_identifier": ident})

    assert mverify({"msisdn": "+254722000001"}) == "AVAILABLE"
    assert holder(minform({"msisdn": "+254722000001"}), "consumer") == ("Ada", "Kamau")
    verify(api, {"msisdn": "+254722000002"})  # named in the money transfer service
    assert holder(minform({"msisdn": "+254722000002"}), "consumer") == ("Ada", "Kamau")
    assert mverify({"msisdn": "+254722999401"}) == "UNREGISTERED"
    assert mverify({"msisdn": "+254722999402"}) == "UNAVAILABLE"
    assert mverify({"msisdn": "+254722999412"}) == "AVAILABLE"
    assert holder(minform({"msisdn": "+254722999412"}), "consumer") == ("Ines", "Valderrama")
    r = api.post(f"{MP}/payment-methods/1/debit-party-verification",
                 {"debit_party_identifier": {"msisdn": "+254722999403"}, "consumer": ADA})
    assert error_of(r) == (500, "1009001")


def test_checks_are_counted_apart(api: Api, admin: Admin) -> None:
    admin.api.call("DELETE", "/requests", None)
    for n in range(3):
        verify(api, {"msisdn": f"+25470012300{n}"})
    inform(api, {"msisdn": "+254700123000"})
    counts = admin.requests()["counts"]
    assert (counts["POST parties"], counts["POST parties verification"],
            counts["POST parties information"]) == (4, 3, 1)


def test_account_holders_are_kept_across_a_restart(
        sandbox_factory: Callable[..., RunningSandbox], tmp_path: Path) -> None:
    path = tmp_path / "sandbox.jsonl"
    for restart in range(2):
        sb = sandbox_factory(state_file=path)
        api = Api(sb.url, (KEY, SECRET))
        try:
            if restart == 0:
                verify(api, {"msisdn": "+254700765432"})
            assert holder(inform(api, {"msisdn": "+254700765432"})) == ("Ada", "Kamau")
        finally:
            api.session.close()
            sb.stop()

