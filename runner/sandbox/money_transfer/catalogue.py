"""The money transfer service's deterministic catalogue: services, payers and their rates,
source countries, administrative divisions, entities and starting balances.

Payers are chosen to differ where it matters to a client: msisdn-only wallets, bank
accounts needing account number and SWIFT, payers accepting several alternatives, different
sender and beneficiary requirements, precision 0 and 2, increments other than 1, a payer with
no maximum, one inactive (1003001) and one currently unavailable (1003007). The credit party
checks (information and verification) take the identifiers a payer accepts, but for the cash
pick-up payers (7 and 10: no account to check, 1007100) and payer 6, which checks bank
accounts and not wallets.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal as D
from typing import Any

from runner.sandbox.core.catalogue import BANK, BASE_RATES, MSISDN, NAMES, SWIFT

SERVICES = [{"id": 1, "name": "MobileWallet"}, {"id": 2, "name": "BankAccount"},
            {"id": 3, "name": "CashPickup"}]

# Countries a remittance may be sent from (others: 1000998), and the source currencies priced.
SOURCE_COUNTRIES = {"FRA", "DEU", "ESP", "ITA", "NLD", "BEL", "IRL", "USA", "GBR"}

BAND_EDGE = D("1000.00")
TOP_BAND_BONUS = D("1.004")  # a better rate for larger amounts
MAX_SOURCE_AMOUNT = D("1000000.00")  # above the last band: 1006001


@dataclass(frozen=True)
class PayerSpec:
    id: int
    name: str
    service: int
    country: str
    currency: str
    precision: int
    increment: D
    minimum: D
    maximum: D | None
    identifiers: list[list[str]]
    sender: list[list[str]]
    beneficiary: list[list[str]]
    fee_fixed: D = D("1.50")
    fee_percent: D = D("0")
    active: bool = True
    available: bool = True
    checks: list[list[str]] | None = None  # the identifiers its party checks take

    @property
    def checked(self) -> list[list[str]]:
        return self.identifiers if self.checks is None else self.checks


PAYERS = [
    PayerSpec(1, "M-Wallet Kenya", 1, "KEN", "KES", 0, D(1), D(100), D(250000), [[MSISDN]],
              [NAMES], [NAMES]),
    PayerSpec(2, "Wave Senegal", 1, "SEN", "XOF", 0, D(5), D(500), D(2000000), [[MSISDN]],
              [NAMES + ["country_iso_code"]], [NAMES], fee_fixed=D("1.00")),
    PayerSpec(3, "AirPay Uganda", 1, "UGA", "UGX", 0, D(100), D(5000), D(20000000), [[MSISDN]],
              [NAMES], [NAMES], fee_percent=D("0.5")),
    PayerSpec(4, "Banco de Manila", 2, "PHL", "PHP", 2, D("0.01"), D(100), None,
              [[BANK, SWIFT]], [NAMES + ["address", "city", "country_iso_code"]],
              [NAMES + ["bank_account_holder_name"]], fee_fixed=D("3.00")),
    PayerSpec(5, "Bharat Bank", 2, "IND", "INR", 2, D("0.01"), D(500), D(1000000),
              [[BANK, SWIFT]], [NAMES + ["date_of_birth", "id_type", "id_number"]],
              [NAMES + ["bank_account_holder_name"]], fee_fixed=D("2.50")),
    PayerSpec(6, "Lagos Commercial Bank", 2, "NGA", "NGN", 2, D("0.50"), D(1000), D(5000000),
              [[BANK, SWIFT], [MSISDN]], [NAMES], [NAMES, ["bank_account_holder_name"]],
              fee_fixed=D("2.00"), fee_percent=D("0.25"), checks=[[BANK, SWIFT]]),
    PayerSpec(7, "Efectivo Mexico", 3, "MEX", "MXN", 0, D(10), D(100), D(30000), [[MSISDN]],
              [NAMES + ["id_type", "id_number"]],
              [NAMES + ["id_type", "id_number"],
               NAMES + ["date_of_birth", "country_of_birth_iso_code"]],
              fee_fixed=D("4.00"), checks=[]),
    PayerSpec(8, "Saigon Bank", 2, "VNM", "VND", 0, D(1000), D(100000), D(500000000),
              [[BANK, SWIFT]], [NAMES], [NAMES + ["bank_account_holder_name"]]),
    PayerSpec(9, "Accra Mobile Money", 1, "GHA", "GHS", 2, D("0.01"), D(1), D(10000), [[MSISDN]],
              [NAMES + ["date_of_birth"], NAMES + ["id_type", "id_number"]], [NAMES],
              fee_fixed=D("0.99")),
    PayerSpec(10, "Cebuana Cash Pickup", 3, "PHL", "PHP", 0, D(100), D(500), D(50000), [[MSISDN]],
              [NAMES], [NAMES + ["msisdn"]], fee_fixed=D("2.00"), checks=[]),
    PayerSpec(11, "Banco Jalisco", 2, "MEX", "MXN", 2, D("0.01"), D(100), D(1000000), [[BANK]],
              [NAMES], [NAMES]),
    PayerSpec(12, "GCash Philippines", 1, "PHL", "PHP", 2, D("0.05"), D(50), D(100000), [[MSISDN]],
              [NAMES], [NAMES]),
    PayerSpec(13, "Old Wallet Kenya", 1, "KEN", "KES", 0, D(1), D(100), D(250000), [[MSISDN]],
              [NAMES], [NAMES], active=False),
    PayerSpec(14, "Gold Coast Bank", 2, "GHA", "GHS", 2, D("0.01"), D(10), D(50000),
              [[BANK, SWIFT]], [NAMES], [NAMES], available=False),
]
PAYERS_BY_ID = {p.id: p for p in PAYERS}


def payer_resource(p: PayerSpec) -> dict[str, Any]:
    service = next(s for s in SERVICES if s["id"] == p.service)
    return {
        "id": p.id, "name": p.name, "precision": p.precision, "increment": p.increment,
        "currency": p.currency, "country_iso_code": p.country,
        "minimum_transaction_amount": p.minimum, "maximum_transaction_amount": p.maximum,
        "service": dict(service),
        "credit_party_identifiers_accepted": p.identifiers,
        "required_sender_fields": p.sender,
        "required_beneficiary_fields": p.beneficiary,
        "credit_party_information": {"credit_party_identifiers_accepted": p.checked},
        "credit_party_verification": {"credit_party_identifiers_accepted": p.checked,
                                      "required_beneficiary_fields": p.beneficiary},
    }


def rate_bands(destination_currency: str) -> dict[str, list[dict[str, D]]]:
    bands = {}
    for source, table in BASE_RATES.items():
        base = table[destination_currency]
        bands[source] = [
            {"source_amount_min": D("0.01"), "source_amount_max": BAND_EDGE,
             "wholesale_fx_rate": base},
            {"source_amount_min": BAND_EDGE + D("0.01"), "source_amount_max": MAX_SOURCE_AMOUNT,
             "wholesale_fx_rate": (base * TOP_BAND_BONUS).quantize(D("0.0001"))},
        ]
    return bands


# ---------------------------------------------------------------- divisions and entities
DIVISION_CATEGORIES = {
    "PHL": [{"id": 1, "name": "Region"}, {"id": 2, "name": "Province"}, {"id": 3, "name": "City"}],
    "MEX": [{"id": 4, "name": "Estado"}, {"id": 5, "name": "Municipio"}],
}
# id, country, name, category id, parent id
_DIVISIONS = [
    (1, "PHL", "National Capital Region", 1, None), (2, "PHL", "Metro Manila", 2, 1),
    (3, "PHL", "Manila", 3, 2), (4, "PHL", "Quezon City", 3, 2),
    (5, "PHL", "Central Visayas", 1, None), (6, "PHL", "Cebu", 2, 5), (7, "PHL", "Cebu City", 3, 6),
    (8, "MEX", "Jalisco", 4, None), (9, "MEX", "Guadalajara", 5, 8),
    (10, "MEX", "Ciudad de Mexico", 4, None), (11, "MEX", "Coyoacan", 5, 10),
]


def _category(category_id: int) -> dict[str, Any]:
    for cats in DIVISION_CATEGORIES.values():
        for c in cats:
            if c["id"] == category_id:
                return dict(c)
    raise KeyError(category_id)


def _divisions() -> dict[int, dict[str, Any]]:
    out: dict[int, dict[str, Any]] = {}
    for did, country, name, cat, parent in _DIVISIONS:
        depth = 0 if parent is None else out[parent]["depth"] + 1
        out[did] = {"id": did, "name": name, "depth": depth, "parent_id": parent,
                    "category": _category(cat), "country_iso_code": country}
    return out


DIVISIONS = _divisions()

ENTITY_CATEGORIES = [{"id": 1, "name": "Bank"}, {"id": 2, "name": "Branch"},
                     {"id": 3, "name": "Agent"}]
ENTITY_IDENTIFIERS = {"PHL": [{"id": 1, "code": "SWIFT"}, {"id": 2, "code": "BRSTN"}],
                      "MEX": [{"id": 3, "code": "SWIFT"}, {"id": 4, "code": "CLABE_BANK"}]}
PAYMENT_SYSTEMS = {"PHL": [{"id": 1, "code": "INSTAPAY"}, {"id": 2, "code": "PESONET"}],
                   "MEX": [{"id": 3, "code": "SPEI"}]}
# id, country, name, category, parent, division, payer ids, identifiers (id, value), systems
_ENTITIES = [
    (1, "PHL", "Banco de Manila", 1, None, 1, [4], [(1, "BMNLPHMM")], [1, 2]),
    (2, "PHL", "Banco de Manila - Makati", 2, 1, 3, [4], [(2, "010330123")], [1]),
    (3, "PHL", "Banco de Manila - Cebu", 2, 1, 7, [4], [(2, "010330456")], [1]),
    (4, "PHL", "Cebuana Lhuillier Colon", 3, None, 7, [10], [], []),
    (5, "MEX", "Banco Jalisco", 1, None, 8, [11], [(3, "BJALMXMM"), (4, "072")], [3]),
    (6, "MEX", "Banco Jalisco - Centro", 2, 5, 9, [11], [], [3]),
    (7, "MEX", "Farmacia Coyoacan", 3, None, 11, [7], [], []),
]


def _entities() -> dict[int, dict[str, Any]]:
    out: dict[int, dict[str, Any]] = {}
    for eid, country, name, cat, parent, div, payer_ids, idents, systems in _ENTITIES:
        division = {k: v for k, v in DIVISIONS[div].items() if k != "country_iso_code"}
        codes = {i["id"]: i["code"] for i in ENTITY_IDENTIFIERS.get(country, [])}
        sys_codes = {s["id"]: s["code"] for s in PAYMENT_SYSTEMS.get(country, [])}
        out[eid] = {
            "id": eid, "name": name, "address": None, "administrative_division": division,
            "category": dict(ENTITY_CATEGORIES[cat - 1]), "country_iso_code": country,
            "depth": 0 if parent is None else out[parent]["depth"] + 1,
            "identifiers": [{"id": i, "code": codes[i], "value": v} for i, v in idents],
            "parent_id": parent,
            "payers": [{"id": p, "name": PAYERS_BY_ID[p].name,
                        "currency": PAYERS_BY_ID[p].currency} for p in payer_ids],
            "payment_systems": [{"id": s, "code": sys_codes[s]} for s in systems],
        }
    return out


ENTITIES = _entities()

# currency -> (balance, credit facility); available = balance - pending (+ facility to spend)
BALANCES = {"EUR": (D("10000000.00"), D("0.00")),
            "USD": (D("5000000.00"), D("250000.00"))}
