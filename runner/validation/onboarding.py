"""Checks of ``onboarding`` items before anything is created.

Template ids and fee ids are handed to the integrator with the account: the service offers no
call that lists them, so they are not checked here (an unknown one is refused with 1001001
and the item fails at that link). What is checked:

- an existing ``company_id`` is read once per run: it must exist and be the integrator's own;
- the names the provider keeps unique and looks resources up by (company name, account
  label) must not have the form of an id of their kind (``CMP0001``, ``ACC0001``) and must
  not hold ``/`` (they go into lookup paths);
- e-mail addresses; per payout bank account, with ``format: IBAN``, the IBAN (its
  country's length and layout, ISO 13616 check digits; spaces allowed), the BIC (8 or 11
  characters, an ISO 3166 country: ``runner.bank_accounts``), ``bank_country_iso_code``
  (ISO 3166-1 alpha-3) and ``target_currency`` (ISO 4217).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from runner import rules
from runner.bank_accounts import bic_problem, iban_problem
from runner.job.collection import OnboardingItem, PayoutBankAccount
from runner.validation.catalogue import Catalogue, Read, unless_forbidden

Problems = Iterator[tuple[str, str]]
EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")


def _name(where: str, value: str, prefix: str) -> Problems:
    if re.fullmatch(prefix + r"\d+", value):
        yield where, f"must not have the form of an id ({prefix} and digits)"
    if "/" in value:
        yield where, "must not contain '/'"


def _email(where: str, value: str | None) -> Problems:
    if value is not None and not EMAIL.fullmatch(value):
        yield where, f"{value!r} is not an e-mail address"


def _bank(where: str, bank: PayoutBankAccount) -> Problems:
    if bank.format == "IBAN" and (problem := iban_problem(bank.iban)) is not None:
        yield f"{where}.iban", f"{bank.iban!r} is not an IBAN: {problem}"
    if (problem := bic_problem(bank.bic)) is not None:
        yield f"{where}.bic", f"{bank.bic!r} is not a BIC: {problem}"
    country = bank.bank_country_iso_code
    if country is not None and not rules.is_country(country):
        yield f"{where}.bank_country_iso_code", f"{country!r} is not an ISO 3166-1 alpha-3 code"
    if bank.target_currency is not None and not rules.is_currency(bank.target_currency):
        yield f"{where}.target_currency", f"{bank.target_currency!r} is not an ISO 4217 code"
    yield from _email(f"{where}.holder_email", bank.holder_email)


def _company(catalogue: Catalogue, company_id: str) -> Read:
    def fetch() -> str:
        found = catalogue.provider.onboarding.find_company(company_id)
        return "" if found is not None else f"company {company_id!r} does not exist"

    return ("company", company_id), lambda: unless_forbidden(
        fetch, lambda exc: f"company {company_id!r} is not yours: {exc.code} {exc.message}")


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
