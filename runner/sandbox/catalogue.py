"""The sandbox's deterministic catalogue: services, payers and their rates, countries,
administrative divisions, entities, payment methods and starting balances.

Payers are chosen to differ where it matters to a client: msisdn-only wallets, bank
accounts needing account number and SWIFT, payers accepting several alternatives, different
sender and beneficiary requirements, precision 0 and 2, increments other than 1, a payer with
no maximum, one inactive (1003001) and one currently unavailable (1003007).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal as D
from typing import Any

SERVICES = [{"id": 1, "name": "MobileWallet"}, {"id": 2, "name": "BankAccount"},
            {"id": 3, "name": "CashPickup"}]

COUNTRY_NAMES = {
    "KEN": "Kenya", "SEN": "Senegal", "UGA": "Uganda", "PHL": "Philippines", "IND": "India",
    "NGA": "Nigeria", "MEX": "Mexico", "VNM": "Vietnam", "GHA": "Ghana",
}

# Countries a remittance may be sent from (others: 1000998), and the source currencies priced.
SOURCE_COUNTRIES = {"FRA", "DEU", "ESP", "ITA", "NLD", "BEL", "IRL", "USA", "GBR"}

# Units of destination currency per unit of source currency, below the 1,000 band.
BASE_RATES = {
    "EUR": {"KES": D("140.2515"), "XOF": D("655.957"), "UGX": D("4050.5"), "PHP": D("63.4201"),
            "INR": D("92.1544"), "NGN": D("1650.4"), "MXN": D("19.8512"), "VND": D("27150"),
            "GHS": D("15.9502")},
    "USD": {"KES": D("129.5011"), "XOF": D("607.4105"), "UGX": D("3750.25"), "PHP": D("58.7004"),
            "INR": D("85.3012"), "NGN": D("1528.1"), "MXN": D("18.3808"), "VND": D("25140"),
            "GHS": D("14.7705")},
}
BAND_EDGE = D("1000.00")
TOP_BAND_BONUS = D("1.004")  # a better rate for larger amounts
MAX_SOURCE_AMOUNT = D("1000000.00")  # above the last band: 1006001

MSISDN, BANK, SWIFT = "msisdn", "bank_account_number", "swift_bic_code"
NAMES = ["firstname", "lastname"]


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
              fee_fixed=D("2.00"), fee_percent=D("0.25")),
    PayerSpec(7, "Efectivo Mexico", 3, "MEX", "MXN", 0, D(10), D(100), D(30000), [[MSISDN]],
              [NAMES + ["id_type", "id_number"]],
              [NAMES + ["id_type", "id_number"],
               NAMES + ["date_of_birth", "country_of_birth_iso_code"]],
              fee_fixed=D("4.00")),
    PayerSpec(8, "Saigon Bank", 2, "VNM", "VND", 0, D(1000), D(100000), D(500000000),
              [[BANK, SWIFT]], [NAMES], [NAMES + ["bank_account_holder_name"]]),
    PayerSpec(9, "Accra Mobile Money", 1, "GHA", "GHS", 2, D("0.01"), D(1), D(10000), [[MSISDN]],
              [NAMES + ["date_of_birth"], NAMES + ["id_type", "id_number"]], [NAMES],
              fee_fixed=D("0.99")),
    PayerSpec(10, "Cebuana Cash Pickup", 3, "PHL", "PHP", 0, D(100), D(500), D(50000), [[MSISDN]],
              [NAMES], [NAMES + ["msisdn"]], fee_fixed=D("2.00")),
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
        "credit_party_information": {"credit_party_identifiers_accepted": p.identifiers},
        "credit_party_verification": {"credit_party_identifiers_accepted": p.identifiers,
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

# ---------------------------------------------------------------- balances
# currency -> (balance, credit facility); available = balance - pending (+ facility to spend)
MONEY_TRANSFER_BALANCES = {"EUR": (D("10000000.00"), D("0.00")),
                           "USD": (D("5000000.00"), D("250000.00"))}
MERCHANT_BALANCES = {"EUR": D("0.00"), "USD": D("0.00")}


# ---------------------------------------------------------------- merchant payment methods
@dataclass(frozen=True)
class MethodSpec:
    id: int
    name: str
    description: str
    country: str
    currency: str
    precision: int
    increment: D
    minimum: D
    maximum: D
    identifiers: list[list[str]]
    consumer: list[list[str]]
    details: list[str]
    redirect: bool = False
    active: bool = True
    available: bool = True


MERCHANT_FEE_PERCENT = D("1.5")
MERCHANT_FEE_MINIMUM = D("0.30")

PAYMENT_METHODS = [
    MethodSpec(1, "M-Wallet QR Kenya", "Pay by scanning a QR code in the wallet app", "KEN", "KES",
               0, D(1), D(10), D(150000), [[MSISDN]], [NAMES], ["qr_code", "qr_url"]),
    MethodSpec(2, "Bank Transfer Nigeria", "Pay by bank transfer with the given reference", "NGA",
               "NGN", 2, D("0.50"), D(100), D(2000000), [[BANK], [MSISDN]],
               [NAMES + ["email"]], ["instructions"]),
    MethodSpec(3, "Card Checkout Mexico", "Pay on the card page the consumer is sent to", "MEX",
               "MXN", 2, D("0.01"), D(10), D(100000), [["email"]], [NAMES + ["email"]], [],
               redirect=True),
    MethodSpec(4, "Mobile Money Senegal", "Approve the payment on the phone", "SEN", "XOF", 0,
               D(5), D(500), D(1000000), [[MSISDN]], [NAMES, ["msisdn"]], ["instructions"]),
    MethodSpec(5, "QR Ph Philippines", "Scan the QR Ph code", "PHL", "PHP", 2, D("0.05"), D(20),
               D(50000), [[MSISDN], [BANK]], [NAMES], ["qr_code"]),
    MethodSpec(6, "UPI India", "Approve the collect request in any UPI app", "IND", "INR", 2,
               D("0.01"), D(1), D(200000), [[MSISDN], ["email"]],
               [NAMES + ["id_type", "id_number"]], ["qr_code", "qr_url", "instructions"]),
    MethodSpec(7, "Old Wallet Kenya", "Retired", "KEN", "KES", 0, D(1), D(10), D(150000),
               [[MSISDN]], [NAMES], ["qr_code"], active=False),
    MethodSpec(8, "Bank Transfer Ghana", "Pay by bank transfer", "GHA", "GHS", 2, D("0.01"), D(1),
               D(20000), [[BANK]], [NAMES], ["instructions"], available=False),
]
METHODS_BY_ID = {m.id: m for m in PAYMENT_METHODS}

# Units of payment currency per unit of collection currency.
MERCHANT_RATES = {c: {k: v for k, v in t.items()} for c, t in BASE_RATES.items()}


def method_resource(m: MethodSpec) -> dict[str, Any]:
    return {
        "id": m.id, "name": m.name, "description": m.description, "country_iso_code": m.country,
        "currency": m.currency, "precision": m.precision, "increment": m.increment,
        "minimum_payment_amount": m.minimum, "maximum_payment_amount": m.maximum,
        "debit_party_identifiers_accepted": m.identifiers,
        "debit_party_information": {"debit_party_identifiers_accepted": m.identifiers},
        "debit_party_verification": {"debit_party_identifiers_accepted": m.identifiers,
                                     "required_consumer_fields": m.consumer},
        "payment_details_fields": m.details,
        "required_consumer_fields": m.consumer,
    }


# ---------------------------------------------------------------- known parties
# Identifier value -> name the provider knows (credit/debit party information answers these).
KNOWN_PARTIES = {
    "+254700100200": ("Wanjiru", "Kamau"), "+221770001122": ("Awa", "Diop"),
    "+256700300400": ("Okello", "Mugisha"), "+639171234567": ("Maria", "Santos"),
    "+2348031234567": ("Chinedu", "Okafor"), "+233241234567": ("Kwame", "Mensah"),
    "+525512345678": ("Lucia", "Hernandez"), "+919812345678": ("Priya", "Sharma"),
    "0012345678": ("Juan", "Dela Cruz"), "1234567890": ("Adaeze", "Nwosu"),
}


# ---------------------------------------------------------------- collection: accounts, onboarding
# Templates given to the integrator: each presets the currency of merchants and accounts.
TEMPLATES = {"TPL-STANDARD": "EUR", "TPL-MARKETPLACE": "EUR", "TPL-US": "USD"}
# Fee ids an account may name (recorded on the account; the sandbox charges none).
FEES = ("FEE-PAYOUT-SEPA", "FEE-TRANSFER", "FEE-MONTHLY")
# Seeded so that transfers and payouts work without onboarding first. Globex belongs to
# another integrator: its resources exist but are forbidden (1000403).
COLLECTION_COMPANIES: list[dict[str, Any]] = [
    {"name": "Acme", "template_id": "TPL-STANDARD", "foreign": False},  # CMP0001
    {"name": "Globex", "template_id": "TPL-STANDARD", "foreign": True},  # CMP0002
]
COLLECTION_MERCHANTS: list[dict[str, Any]] = [
    {"company": "Acme", "merchant_external_id": "acme-shop", "name": "Acme Shop",  # MER0001
     "template_id": "TPL-STANDARD", "custom_data": None, "foreign": False},
    {"company": "Globex", "merchant_external_id": "globex-store", "name": "Globex Store",
     "template_id": "TPL-STANDARD", "custom_data": None, "foreign": True},  # MER0002
]
_ACME_BANK = {"bank_name": "Banque Exemple", "bank_country_iso_code": "FRA",
              "holder_name": "Acme SAS", "format": "IBAN"}
COLLECTION_ACCOUNTS: list[dict[str, Any]] = [
    {"company": "Acme", "label": "acme-eur-main", "template_id": "TPL-STANDARD",  # ACC0001
     "opening_balance": D("50000.00"), "recipient_email": "finance@acme.example",
     "fees": None, "foreign": False,
     "payout_bank_accounts": [  # PBA0001-1 (default), PBA0001-2 (blocked)
         {**_ACME_BANK, "label": "acme-main-bank", "iban": "FR7630006000011234567890189",
          "bic": "AGRIFRPPXXX"},
         {**_ACME_BANK, "label": "acme-old-bank", "iban": "DE89370400440532013000",
          "bic": "COBADEFFXXX", "bank_country_iso_code": "DEU", "is_blocked": True}]},
    {"company": "Acme", "label": "acme-eur-reserve", "template_id": "TPL-STANDARD",  # ACC0002
     "opening_balance": D("0.00"), "recipient_email": None, "fees": None, "foreign": False,
     "payout_bank_accounts": [  # PBA0002-1
         {**_ACME_BANK, "label": "acme-reserve-bank", "iban": "GB29NWBK60161331926819",
          "bic": "NWBKGB2LXXX", "bank_country_iso_code": "GBR"}]},
    {"company": "Globex", "label": "globex-eur-main", "template_id": "TPL-STANDARD",  # ACC0003
     "opening_balance": D("1000.00"), "recipient_email": None, "fees": None, "foreign": True,
     "payout_bank_accounts": []},
]
