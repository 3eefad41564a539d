"""Account numbers as runner reads them, wherever it meets one (job validation, the summary's
masking, the sandbox): IBAN and BIC (``runner.bank_accounts``) and the Luhn check of card
numbers (``runner.cards``), all from python-stdnum."""

from __future__ import annotations

import pytest

from runner.bank_accounts import bic_problem, compact_bic, compact_iban, iban_problem
from runner.cards import luhn, mask


@pytest.mark.parametrize("value, problem", [
    ("FR7630006000011234567890189", None),
    ("FR76 3000 6000 0112 3456 7890 189", None),  # as printed
    ("fr76 3000 6000 0112 3456 7890 189", None),
    ("GB29 NWBK 6016 1331 9268 19", None),
    ("DE89370400440532013000", None),
    ("FR39300060000112345", "an IBAN of FR has 27 characters, this one 19"),
    ("FR7630006000011234567890188", "its check digits are wrong"),
    ("DE8937040044053201300", "its check digits are wrong"),
    ("QQ05300060000112345678901", "'QQ' is not a country with IBANs"),
    ("", "it is empty"),
])
def test_iban(value: str, problem: str | None) -> None:
    assert iban_problem(value) == problem


def test_iban_and_bic_are_sent_in_electronic_form() -> None:
    assert compact_iban("fr76 3000-6000 0112 3456 7890 189") == "FR7630006000011234567890189"
    assert compact_bic(" bnpa fr pp ") == "BNPAFRPP"


@pytest.mark.parametrize("value, problem", [
    ("DEUTDEFF", None),
    ("AGRIFRPPXXX", None),
    ("DEUTZZFF", "'ZZ' is not a country code (ISO 3166)"),
    ("AGRI", "not 8 or 11 letters and digits (bank, country, place, branch)"),
    ("AGRIF2PP", "not 8 or 11 letters and digits (bank, country, place, branch)"),
    ("AGRIFRPPXX", "not 8 or 11 letters and digits (bank, country, place, branch)"),
])
def test_bic(value: str, problem: str | None) -> None:
    assert bic_problem(value) == problem


@pytest.mark.parametrize("digits, valid", [
    ("4111111111111111", True), ("4111111111111112", False), ("5555555555554444", True),
    ("5555555555554443", False), ("0", True), ("", False), ("41111x1111111111", False),
])
def test_luhn(digits: str, valid: bool) -> None:
    assert luhn(digits) is valid


def test_mask_keeps_the_last_four() -> None:
    assert mask("4111111111111111") == "************1111"
