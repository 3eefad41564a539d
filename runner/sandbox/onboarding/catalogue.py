"""The collection service's onboarding catalogue: templates, fees, and the companies,
merchants and accounts seeded so that transfers, payouts and payment orders work without
onboarding first.
"""

from __future__ import annotations

from decimal import Decimal as D
from typing import Any

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
