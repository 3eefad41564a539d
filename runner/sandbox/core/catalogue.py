"""Catalogue data several services share: country names, the base exchange rates, the names
of party identifiers, and the parties the provider knows by an identifier.

Each service's own catalogue sits in its package (money_transfer/catalogue.py: payers;
merchant_payment/catalogue.py: payment methods; payment_orders/catalogue.py: payment pages;
onboarding/catalogue.py: the seeded companies, merchants and accounts).
"""

from __future__ import annotations

from decimal import Decimal as D

COUNTRY_NAMES = {
    "KEN": "Kenya", "SEN": "Senegal", "UGA": "Uganda", "PHL": "Philippines", "IND": "India",
    "NGA": "Nigeria", "MEX": "Mexico", "VNM": "Vietnam", "GHA": "Ghana",
}


# Units of destination currency per unit of source currency, below the 1,000 band.
BASE_RATES = {
    "EUR": {"KES": D("140.2515"), "XOF": D("655.957"), "UGX": D("4050.5"), "PHP": D("63.4201"),
            "INR": D("92.1544"), "NGN": D("1650.4"), "MXN": D("19.8512"), "VND": D("27150"),
            "GHS": D("15.9502")},
    "USD": {"KES": D("129.5011"), "XOF": D("607.4105"), "UGX": D("3750.25"), "PHP": D("58.7004"),
            "INR": D("85.3012"), "NGN": D("1528.1"), "MXN": D("18.3808"), "VND": D("25140"),
            "GHS": D("14.7705")},
}

MSISDN, BANK, SWIFT = "msisdn", "bank_account_number", "swift_bic_code"
NAMES = ["firstname", "lastname"]

# Identifier value -> name the provider knows (credit/debit party information answers these).
KNOWN_PARTIES = {
    "+254700100200": ("Wanjiru", "Kamau"), "+221770001122": ("Awa", "Diop"),
    "+256700300400": ("Okello", "Mugisha"), "+639171234567": ("Maria", "Santos"),
    "+2348031234567": ("Chinedu", "Okafor"), "+233241234567": ("Kwame", "Mensah"),
    "+525512345678": ("Lucia", "Hernandez"), "+919812345678": ("Priya", "Sharma"),
    "0012345678": ("Juan", "Dela Cruz"), "1234567890": ("Adaeze", "Nwosu"),
}

