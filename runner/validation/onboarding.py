"""Checks of ``onboarding`` items before anything is created.

Template ids and fee ids are handed to the integrator with the account: the service offers no
call that lists them, so they are not checked here (an unknown one is refused with 1001001
and the item fails at that link). What is checked:

- an existing ``company_id`` is read once per run: it must exist and be the integrator's own;
- the names the provider keeps unique and looks resources up by (company name, account
  label) must not have the form of an id of their kind (``CMP0001``, ``ACC0001``) and must
  not hold ``/`` (they go into lookup paths);
- e-mail addresses; per payout bank account, with ``format: IBAN``, the IBAN (electronic
  form, ISO 13616 check digits), the BIC (8 or 11 characters), ``bank_country_iso_code``
  (ISO 3166-1 alpha-3) and ``target_currency`` (ISO 4217).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from runner import rules
from runner.errors import ProviderHTTPError
from runner.job.collection import OnboardingItem, PayoutBankAccount

if TYPE_CHECKING:
    from runner.validation import Catalogue, Read

Problems = Iterator[tuple[str, str]]
EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
IBAN = re.compile(r"[A-Z]{2}\d{2}[A-Z0-9]{11,30}")
BIC = re.compile(r"[A-Z]{6}[A-Z0-9]{2}([A-Z0-9]{3})?")


def is_iban(value: str) -> bool:
    """Electronic form (no spaces), with valid check digits (ISO 13616, mod 97)."""
    if not IBAN.fullmatch(value):
        return False
    moved = value[4:] + value[:4]
    return int("".join(str(int(c, 36)) for c in moved)) % 97 == 1


def _name(where: str, value: str, prefix: str) -> Problems:
    if re.fullmatch(prefix + r"\d+", value):
        yield where, f"must not have the form of an id ({prefix} and digits)"
    if "/" in value:
        yield where, "must not contain '/'"


def _email(where: str, value: str | None) -> Problems:
    if value is not None and not EMAIL.fullmatch(value):
        yield where, f"{value!r} is not an e-mail address"


def _bank(where: str, bank: PayoutBankAccount) -> Problems:
    if bank.format == "IBAN" and not is_iban(bank.iban):
        yield f"{where}.iban", "not a valid IBAN (electronic form without spaces, check " \
                               "digits)"
    if not BIC.fullmatch(bank.bic):
        yield f"{where}.bic", f"{bank.bic!r} is not a BIC (8 or 11 characters)"
    country = bank.bank_country_iso_code
    if country is not None and not rules.is_country(country):
        yield f"{where}.bank_country_iso_code", f"{country!r} is not an ISO 3166-1 alpha-3 code"
    if bank.target_currency is not None and not rules.is_currency(bank.target_currency):
        yield f"{where}.target_currency", f"{bank.target_currency!r} is not an ISO 4217 code"
    yield from _email(f"{where}.holder_email", bank.holder_email)


def _company(catalogue: Catalogue, company_id: str) -> Read:
    def fetch() -> str:
        try:
            found = catalogue.provider.onboarding.find_company(company_id)
        except ProviderHTTPError as exc:
            if exc.status == 403:
                return f"company {company_id!r} is not yours: {exc.code} {exc.message}"
            raise
        return "" if found is not None else f"company {company_id!r} does not exist"

    return ("company", company_id), fetch


def want_onboarding(item: OnboardingItem, catalogue: Catalogue) -> None:
    if item.company is None and item.company_id is not None:
        catalogue.want(*_company(catalogue, item.company_id))


def check_onboarding(item: OnboardingItem, catalogue: Catalogue | None) -> Problems:
    if item.company is not None:
        yield from _name("company.name", item.company.name, "CMP")
    elif item.company_id is not None and catalogue is not None:
        problem = catalogue.once(*_company(catalogue, item.company_id))
        if problem:
            yield "company_id", problem
    account = item.account
    if account is None:
        return
    yield from _name("account.label", account.label, "ACC")
    yield from _email("account.recipient_email", account.recipient_email)
    for n, bank in enumerate(account.payout_bank_accounts or []):
        yield from _bank(f"account.payout_bank_accounts.{n}", bank)
