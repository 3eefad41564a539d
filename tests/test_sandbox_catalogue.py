"""The sandbox's money transfer discovery endpoints, its catalogue and list pagination, over
real HTTP.
"""

from __future__ import annotations

import itertools
from decimal import Decimal
from typing import Any

import pytest
from conftest import Api, body, error_of

MT = "/v1/money-transfer"
PAGE_HEADERS = ("X-Total", "X-Total-Pages", "X-Per-Page", "X-Page")
_ext = itertools.count(1)


def get_ok(api: Api, path: str, **params: Any) -> Any:
    r = api.get(MT + path, params=params)
    assert r.status_code == 200, r.text
    return body(r)


def ids(items: list[dict[str, Any]]) -> list[int]:
    return [x["id"] for x in items]


def refused(api: Api, path: str, **params: Any) -> tuple[int, str, str]:
    r = api.get(MT + path, params=params)
    status, code = error_of(r)
    return status, code, body(r)["errors"][0]["message"]


@pytest.fixture
def payers(api: Api) -> list[dict[str, Any]]:
    return get_ok(api, "/payers", per_page=100)  # type: ignore[no-any-return]


# ---------------------------------------------------------------- services and payers
def test_services_are_listed_and_filtered_by_the_countries_their_payers_serve(
        api: Api, payers: list[dict[str, Any]]) -> None:
    services = get_ok(api, "/services")
    assert len(services) >= 3
    assert len(set(ids(services))) == len(services)
    assert all(isinstance(s["id"], int) and s["name"] for s in services)
    assert {p["service"]["id"] for p in payers} == set(ids(services))
    for country in sorted({p["country_iso_code"] for p in payers}):
        expected = {p["service"]["id"] for p in payers if p["country_iso_code"] == country}
        got = get_ok(api, "/services", country_iso_code=country)
        assert set(ids(got)) == expected, country
        assert all(s in services for s in got)
    assert ids(get_ok(api, "/services", country_iso_code="KEN")) == [1]
    assert ids(get_ok(api, "/services", country_iso_code="PHL")) == [1, 2, 3]


@pytest.mark.parametrize(("params", "expected"), [
    ({"service_id": 3}, [7, 10]),
    ({"country_iso_code": "PHL"}, [4, 10, 12]),
    ({"currency": "MXN"}, [7, 11]),
    ({"service_id": 1, "country_iso_code": "PHL"}, [12]),
    ({"service_id": 2, "currency": "GHS"}, [14]),
    ({"country_iso_code": "KEN", "currency": "PHP"}, []),
])
def test_payers_filter_by_service_country_and_currency(
        api: Api, payers: list[dict[str, Any]], params: dict[str, Any],
        expected: list[int]) -> None:
    got = get_ok(api, "/payers", **params)
    assert ids(got) == expected
    wanted = [p for p in payers
              if params.get("service_id") in (None, p["service"]["id"])
              and params.get("country_iso_code") in (None, p["country_iso_code"])
              and params.get("currency") in (None, p["currency"])]
    assert got == wanted


def test_each_payer_is_served_by_id_with_every_field(api: Api,
                                                      payers: list[dict[str, Any]]) -> None:
    fields = {"id", "name", "precision", "increment", "currency", "country_iso_code",
              "minimum_transaction_amount", "maximum_transaction_amount", "service",
              "credit_party_identifiers_accepted", "required_sender_fields",
              "required_beneficiary_fields", "credit_party_information",
              "credit_party_verification"}
    assert ids(payers) == list(range(1, 15))
    for p in payers:
        assert fields <= set(p), p["id"]
        assert get_ok(api, f"/payers/{p['id']}") == p
        # The checks take what the payer accepts, but for the cash pick-ups (none) and
        # payer 6 (its bank accounts, not its wallets).
        checked = {6: [["bank_account_number", "swift_bic_code"]], 7: [], 10: []}.get(
            p["id"], p["credit_party_identifiers_accepted"])
        assert p["credit_party_information"] == {"credit_party_identifiers_accepted": checked}
        assert p["credit_party_verification"] == {
            "credit_party_identifiers_accepted": checked,
            "required_beneficiary_fields": p["required_beneficiary_fields"]}
        assert not isinstance(p["increment"], float)  # exact decimals on the wire


def test_unknown_payer_is_1000404_and_a_non_numeric_id_names_the_parameter(api: Api) -> None:
    assert refused(api, "/payers/999")[:2] == (404, "1000404")
    assert refused(api, "/payers/999/rates")[:2] == (404, "1000404")
    status, code, message = refused(api, "/payers/abc")
    assert (status, code) == (400, "1000999")
    assert "payer_id" in message


def test_payer_rates_come_in_two_bands_per_source_currency(api: Api,
                                                           payers: list[dict[str, Any]]) -> None:
    for p in payers:
        rates = get_ok(api, f"/payers/{p['id']}/rates")
        assert rates["destination_currency"] == p["currency"]
        assert set(rates["rates"]) == {"EUR", "USD"}
        for bands in rates["rates"].values():
            low, high = bands
            assert (low["source_amount_min"], low["source_amount_max"]) == (
                Decimal("0.01"), Decimal("1000.00"))
            assert (high["source_amount_min"], high["source_amount_max"]) == (
                Decimal("1000.01"), Decimal("1000000.00"))
            assert high["wholesale_fx_rate"] > low["wholesale_fx_rate"] > 0
        assert rates["rates"]["EUR"] != rates["rates"]["USD"]
    kes = get_ok(api, "/payers/1/rates")["rates"]
    assert kes["EUR"][0]["wholesale_fx_rate"] == Decimal("140.2515")
    assert kes["USD"][0]["wholesale_fx_rate"] == Decimal("129.5011")


# ---------------------------------------------------------------- countries and divisions
def test_countries_cover_every_payer_country(api: Api, payers: list[dict[str, Any]]) -> None:
    countries = get_ok(api, "/countries")
    codes = [c["iso_code"] for c in countries]
    assert len(codes) == len(set(codes)) == 9
    assert all(len(c) == 3 and c.isupper() for c in codes)
    assert {p["country_iso_code"] for p in payers} == set(codes)
    assert {"iso_code": "KEN", "name": "Kenya"} in countries


@pytest.mark.parametrize("path", [
    "/countries/XXX/administrative-division-categories",
    "/countries/XXX/administrative-divisions",
    "/countries/XXX/entity-categories",
    "/countries/XXX/entity-identifiers",
    "/countries/XXX/payment-systems",
    "/countries/XXX/entities",
    "/administrative-divisions/999",
    "/administrative-divisions/999/administrative-divisions",
    "/entities/999",
    "/entities/999/entities",
])
def test_unknown_country_division_or_entity_is_1000404(api: Api, path: str) -> None:
    assert refused(api, path)[:2] == (404, "1000404")


def test_division_categories_per_country(api: Api) -> None:
    phl = get_ok(api, "/countries/PHL/administrative-division-categories")
    assert [c["name"] for c in phl] == ["Region", "Province", "City"]
    mex = get_ok(api, "/countries/MEX/administrative-division-categories")
    assert [c["name"] for c in mex] == ["Estado", "Municipio"]
    assert not set(ids(phl)) & set(ids(mex))
    assert get_ok(api, "/countries/KEN/administrative-division-categories") == []


@pytest.mark.parametrize("country", ["PHL", "MEX"])
def test_divisions_form_a_consistent_tree(api: Api, country: str) -> None:
    divisions = get_ok(api, f"/countries/{country}/administrative-divisions")
    categories = set(ids(get_ok(api, f"/countries/{country}/administrative-division-categories")))
    by_id = {d["id"]: d for d in divisions}
    assert divisions and len(by_id) == len(divisions)
    for d in divisions:
        assert set(d) >= {"id", "name", "depth", "parent_id", "category"}
        assert d["category"]["id"] in categories
        if d["parent_id"] is None:
            assert d["depth"] == 0
        else:
            assert d["depth"] == by_id[d["parent_id"]]["depth"] + 1
        assert get_ok(api, f"/administrative-divisions/{d['id']}") == d
        children = get_ok(api, f"/administrative-divisions/{d['id']}/administrative-divisions")
        assert children == [c for c in divisions if c["parent_id"] == d["id"]]
        assert all(c["depth"] == d["depth"] + 1 for c in children)
    assert any(d["parent_id"] is not None for d in divisions)


def test_division_children_by_example(api: Api) -> None:
    metro = get_ok(api, "/administrative-divisions/2")
    assert (metro["name"], metro["depth"], metro["parent_id"]) == ("Metro Manila", 1, 1)
    children = get_ok(api, "/administrative-divisions/2/administrative-divisions")
    assert [(c["name"], c["depth"], c["parent_id"]) for c in children] == [
        ("Manila", 2, 2), ("Quezon City", 2, 2)]
    assert get_ok(api, "/administrative-divisions/3/administrative-divisions") == []
    assert get_ok(api, "/countries/KEN/administrative-divisions") == []


# ---------------------------------------------------------------- entities
ENTITY_FIELDS = {"id", "name", "address", "administrative_division", "category",
                 "country_iso_code", "depth", "identifiers", "parent_id", "payers",
                 "payment_systems"}


def test_entity_categories_identifiers_and_payment_systems(api: Api) -> None:
    for country, idents, systems in [("PHL", ["SWIFT", "BRSTN"], ["INSTAPAY", "PESONET"]),
                                     ("MEX", ["SWIFT", "CLABE_BANK"], ["SPEI"])]:
        entities = get_ok(api, f"/countries/{country}/entities")
        categories = get_ok(api, f"/countries/{country}/entity-categories")
        assert sorted(ids(categories)) == sorted({e["category"]["id"] for e in entities})
        assert all(c == e["category"] for e in entities for c in categories
                   if c["id"] == e["category"]["id"])
        identifiers = get_ok(api, f"/countries/{country}/entity-identifiers")
        assert [i["code"] for i in identifiers] == idents
        payment_systems = get_ok(api, f"/countries/{country}/payment-systems")
        assert [s["code"] for s in payment_systems] == systems
        for e in entities:
            for i in e["identifiers"]:
                assert {"id": i["id"], "code": i["code"]} in identifiers
            for s in e["payment_systems"]:
                assert s in payment_systems
    assert [c["name"] for c in get_ok(api, "/countries/PHL/entity-categories")] == [
        "Bank", "Branch", "Agent"]
    for path in ("entity-categories", "entity-identifiers", "payment-systems", "entities"):
        assert get_ok(api, f"/countries/KEN/{path}") == []


@pytest.mark.parametrize(("params", "expected"), [
    ({}, [1, 2, 3, 4]),
    ({"category_id": 2}, [2, 3]),
    ({"service_id": 3}, [4]),
    ({"service_id": 2}, [1, 2, 3]),
    ({"payer_id": 4}, [1, 2, 3]),
    ({"payer_id": 10, "category_id": 3}, [4]),
    ({"payer_id": 11}, []),
])
def test_country_entities_filter_by_category_service_and_payer(
        api: Api, payers: list[dict[str, Any]], params: dict[str, Any],
        expected: list[int]) -> None:
    everything = get_ok(api, "/countries/PHL/entities")
    got = get_ok(api, "/countries/PHL/entities", **params)
    assert ids(got) == expected
    service_of = {p["id"]: p["service"]["id"] for p in payers}
    wanted = [e for e in everything
              if params.get("category_id") in (None, e["category"]["id"])
              and params.get("payer_id") in (None, *ids(e["payers"]))
              and params.get("service_id") in (None, *(service_of[p] for p in ids(e["payers"])))]
    assert got == wanted
    assert all(e["country_iso_code"] == "PHL" for e in got)


def test_entities_across_countries_and_by_country(api: Api) -> None:
    everything = get_ok(api, "/entities")
    assert ids(everything) == list(range(1, 8))
    by_country: list[dict[str, Any]] = []
    for country in ("MEX", "PHL"):
        filtered = get_ok(api, "/entities", country_iso_code=country)
        assert filtered == get_ok(api, f"/countries/{country}/entities")
        assert filtered and all(e["country_iso_code"] == country for e in filtered)
        by_country += filtered
    assert sorted(ids(by_country)) == ids(everything)
    assert ids(get_ok(api, "/entities", payer_id=11)) == [5, 6]
    assert ids(get_ok(api, "/entities", country_iso_code="MEX", category_id=3)) == [7]
    assert get_ok(api, "/entities", country_iso_code="KEN") == []


def test_each_entity_by_id_is_consistent_with_divisions_payers_and_children(
        api: Api, payers: list[dict[str, Any]]) -> None:
    everything = get_ok(api, "/entities")
    by_id = {e["id"]: e for e in everything}
    payer_by_id = {p["id"]: p for p in payers}
    for e in everything:
        assert set(e) >= ENTITY_FIELDS
        assert get_ok(api, f"/entities/{e['id']}") == e
        division = e["administrative_division"]
        assert get_ok(api, f"/administrative-divisions/{division['id']}") == division
        assert division in get_ok(api, f"/countries/{e['country_iso_code']}"
                                      "/administrative-divisions")
        for ref in e["payers"]:
            p = payer_by_id[ref["id"]]
            assert (ref["name"], ref["currency"]) == (p["name"], p["currency"])
            assert p["country_iso_code"] == e["country_iso_code"]
        if e["parent_id"] is None:
            assert e["depth"] == 0
        else:
            assert e["depth"] == by_id[e["parent_id"]]["depth"] + 1
        children = get_ok(api, f"/entities/{e['id']}/entities")
        assert children == [c for c in everything if c["parent_id"] == e["id"]]
    assert ids(get_ok(api, "/entities/1/entities")) == [2, 3]
    assert ids(get_ok(api, "/entities/5/entities")) == [6]
    assert get_ok(api, "/entities/2/entities") == []


# ---------------------------------------------------------------- balances
def test_balances_start_as_documented(api: Api) -> None:
    balances = get_ok(api, "/balances")
    assert [(b["currency"], b["balance"], b["available_balance"], b["credit_facility"])
            for b in balances] == [
        ("EUR", Decimal("10000000.00"), Decimal("10000000.00"), Decimal("0.00")),
        ("USD", Decimal("5000000.00"), Decimal("5000000.00"), Decimal("250000.00"))]
    assert all(isinstance(b["id"], int) for b in balances)


# ---------------------------------------------------------------- catalogue properties
def test_catalogue_size(api: Api, payers: list[dict[str, Any]]) -> None:
    assert len(get_ok(api, "/services")) >= 3
    assert len(payers) >= 12
    assert len({p["country_iso_code"] for p in payers}) >= 6
    assert len({p["currency"] for p in payers}) >= 6


def test_requirement_lists_differ_between_payers(payers: list[dict[str, Any]]) -> None:
    def shapes(field: str) -> list[list[set[str]]]:
        return [[set(alt) for alt in p[field]] for p in payers]

    identifiers = shapes("credit_party_identifiers_accepted")
    assert [{"msisdn"}] in identifiers
    assert [{"bank_account_number", "swift_bic_code"}] in identifiers
    assert any(len(alts) >= 2 for alts in identifiers)
    assert any(len(alts) >= 2 for alts in shapes("required_sender_fields"))
    assert any(len(alts) >= 2 for alts in shapes("required_beneficiary_fields"))
    assert any(p["required_sender_fields"] != p["required_beneficiary_fields"] for p in payers)
    assert len({str(p["required_sender_fields"]) for p in payers}) >= 3
    assert len({str(p["credit_party_identifiers_accepted"]) for p in payers}) >= 3


def test_precisions_increments_and_an_open_maximum(payers: list[dict[str, Any]]) -> None:
    assert {p["precision"] for p in payers} >= {0, 2}
    units = {p["id"]: Decimal(1).scaleb(-p["precision"]) for p in payers}
    coarse = {p["increment"] for p in payers if p["increment"] != units[p["id"]]}
    assert coarse >= {Decimal(5), Decimal(100), Decimal("0.05"), Decimal("0.50")}
    for p in payers:
        assert p["increment"] >= units[p["id"]]
        assert p["minimum_transaction_amount"] % p["increment"] == 0
    open_ended = [p["id"] for p in payers if p["maximum_transaction_amount"] is None]
    assert open_ended == [4]
    assert all(p["maximum_transaction_amount"] > p["minimum_transaction_amount"]
               for p in payers if p["maximum_transaction_amount"] is not None)


def test_exactly_one_payer_is_inactive_and_one_unavailable(
        api: Api, payers: list[dict[str, Any]]) -> None:
    outcomes = {}
    for p in payers:
        r = api.post(MT + "/quotations", {
            "external_id": f"cat-{next(_ext)}", "payer_id": p["id"],
            "mode": "DESTINATION_AMOUNT",
            "source": {"country_iso_code": "FRA", "currency": "EUR"},
            "destination": {"currency": p["currency"],
                            "amount": p["minimum_transaction_amount"]}})
        outcomes[p["id"]] = r.status_code if r.status_code == 201 else error_of(r)
    assert {k: v for k, v in outcomes.items() if v != 201} == {
        13: (400, "1003001"), 14: (400, "1003007")}


def test_balances_in_two_currencies_one_with_credit(api: Api) -> None:
    balances = get_ok(api, "/balances")
    assert len({b["currency"] for b in balances}) >= 2
    assert any(b["credit_facility"] > 0 for b in balances)


# ---------------------------------------------------------------- pagination
def page_of(api: Api, path: str, **params: Any) -> tuple[list[Any], dict[str, str]]:
    r = api.get(MT + path, params=params)
    assert r.status_code == 200, r.text
    headers = {h: r.headers[h] for h in (*PAGE_HEADERS, "X-Next-Page", "X-Prev-Page")
               if h in r.headers}
    return body(r), headers


def test_default_page_is_50_per_page(api: Api) -> None:
    items, headers = page_of(api, "/payers")
    assert len(items) == 14
    assert headers == {"X-Total": "14", "X-Total-Pages": "1", "X-Per-Page": "50",
                       "X-Page": "1"}


def test_pages_of_five(api: Api, payers: list[dict[str, Any]]) -> None:
    first, h1 = page_of(api, "/payers", per_page=5)
    assert h1 == {"X-Total": "14", "X-Total-Pages": "3", "X-Per-Page": "5", "X-Page": "1",
                  "X-Next-Page": "2"}
    explicit, h1b = page_of(api, "/payers", per_page=5, page=1)
    assert (explicit, h1b) == (first, h1)
    second, h2 = page_of(api, "/payers", per_page=5, page=2)
    assert h2 == {"X-Total": "14", "X-Total-Pages": "3", "X-Per-Page": "5", "X-Page": "2",
                  "X-Next-Page": "3", "X-Prev-Page": "1"}
    last, h3 = page_of(api, "/payers", per_page=5, page=3)
    assert h3 == {"X-Total": "14", "X-Total-Pages": "3", "X-Per-Page": "5", "X-Page": "3",
                  "X-Prev-Page": "2"}
    assert [ids(first), ids(second), ids(last)] == [[1, 2, 3, 4, 5], [6, 7, 8, 9, 10],
                                                    [11, 12, 13, 14]]
    assert first + second + last == payers


def test_page_past_the_end_is_1003009(api: Api) -> None:
    assert refused(api, "/payers", per_page=5, page=4)[:2] == (400, "1003009")
    assert refused(api, "/payers", page=2)[:2] == (400, "1003009")


@pytest.mark.parametrize(("params", "field"), [
    ({"per_page": 101}, "per_page"),
    ({"per_page": 0}, "per_page"),
    ({"per_page": -5}, "per_page"),
    ({"page": 0}, "page"),
    ({"page": -1}, "page"),
    ({"page": "abc"}, "page"),
    ({"page": "1.5"}, "page"),
    ({"per_page": "ten"}, "per_page"),
])
def test_invalid_page_parameters_are_1000999_naming_them(
        api: Api, params: dict[str, Any], field: str) -> None:
    status, code, message = refused(api, "/payers", **params)
    assert (status, code) == (400, "1000999")
    assert field in message


def test_a_hundred_per_page_is_the_maximum_allowed(api: Api) -> None:
    items, headers = page_of(api, "/payers", per_page=100)
    assert len(items) == 14
    assert headers["X-Per-Page"] == "100"
    assert headers["X-Total-Pages"] == "1"


def test_an_empty_list_has_one_empty_page(api: Api) -> None:
    items, headers = page_of(api, "/countries/KEN/administrative-divisions")
    assert items == []
    assert headers == {"X-Total": "0", "X-Total-Pages": "1", "X-Per-Page": "50", "X-Page": "1"}
    assert page_of(api, "/countries/KEN/administrative-divisions", page=1)[0] == []
    assert refused(api, "/countries/KEN/administrative-divisions", page=2)[:2] == (
        400, "1003009")


@pytest.mark.parametrize("path", [
    "/services", "/payers", "/countries", "/countries/PHL/administrative-division-categories",
    "/countries/PHL/administrative-divisions",
    "/administrative-divisions/1/administrative-divisions",
    "/countries/PHL/entity-categories", "/countries/PHL/entity-identifiers",
    "/countries/PHL/payment-systems", "/countries/PHL/entities", "/entities",
    "/entities/1/entities", "/balances",
])
def test_every_list_is_paginated(api: Api, path: str) -> None:
    everything, headers = page_of(api, path)
    total = len(everything)
    assert total >= 1
    assert headers == {"X-Total": str(total), "X-Total-Pages": "1", "X-Per-Page": "50",
                       "X-Page": "1"}
    pages = [page_of(api, path, per_page=1, page=n) for n in range(1, total + 1)]
    assert [item for items, _ in pages for item in items] == everything
    assert all(h["X-Total-Pages"] == str(total) for _, h in pages)
    assert "X-Prev-Page" not in pages[0][1] and "X-Next-Page" not in pages[-1][1]
    assert refused(api, path, per_page=1, page=total + 1)[:2] == (400, "1003009")
    assert refused(api, path, per_page=101)[:2] == (400, "1000999")
