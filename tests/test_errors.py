"""The exception tree: every error class of runner (outside the sandbox, whose errors are the
emulated provider's answers) is a RunnerError, drawn in runner/errors.py's docstring where it
stands in the hierarchy; and the one function that maps a provider's answer to its class."""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil
import re
from typing import Any

import pytest

import runner
import runner.errors
from runner.errors import (
    AlreadyConfirmed,
    AuthenticationError,
    BusinessRefusal,
    DuplicateExternalId,
    DuplicateWithoutLookup,
    InsufficientBalance,
    InvalidRequest,
    NotFound,
    PayRefused,
    PayStatusUnknown,
    ProviderHTTPError,
    QuotationExpired,
    RateLimited,
    ReferenceTaken,
    Retry,
    RunnerError,
    ServerError,
    ServiceUnavailable,
    UnexpectedAnswer,
)
from runner.provider.errors import error_from_answer

PAY = "POST /Rest/V40/PaymentOrder/Pay"
ORDERS = "POST /v1/payment/payment-orders"
REUSED = "External ID has already been used: po-1"


@functools.cache
def error_classes() -> dict[str, type[BaseException]]:
    """Every exception class defined in a module of runner, but the sandbox's, by name."""
    found: dict[str, type[BaseException]] = {}
    for module_info in pkgutil.walk_packages(runner.__path__, "runner."):
        if module_info.name.startswith("runner.sandbox") or module_info.name == "runner.__main__":
            continue  # (__main__ runs the command line when imported)
        module = importlib.import_module(module_info.name)
        for name, value in vars(module).items():
            if (inspect.isclass(value) and issubclass(value, BaseException)
                    and value.__module__ == module.__name__):
                assert name not in found, f"two error classes named {name}"
                found[name] = value
    return found


def drawn_tree() -> dict[str, str | None]:
    """The drawing of runner/errors.py's docstring: each class name and its drawn parent."""
    doc = runner.errors.__doc__ or ""
    block = doc.split("::\n\n", 1)[1].split("\n\n", 1)[0]
    lines = [line[4:] for line in block.splitlines()]
    root = lines[0].split()[0]
    parents: dict[str, str | None] = {root: None}
    path = [root]
    for line in lines[1:]:
        branch = re.match(r"([ │]*)[├└]── (\w+)", line)
        if branch is None:
            continue  # a description going on over more lines
        depth = len(branch[1]) // 4 + 1
        name = branch[2]
        assert name not in parents, f"{name} is drawn twice"
        del path[depth:]
        parents[name] = path[depth - 1]
        path.append(name)
    return parents


def test_every_error_class_is_a_runner_error_drawn_in_the_tree() -> None:
    classes = error_classes()
    drawn = drawn_tree()
    assert len(classes) > 30  # the walk did find them
    for name, cls in classes.items():
        assert issubclass(cls, RunnerError), f"{cls.__module__}.{name} is no RunnerError"
        assert name in drawn, f"{cls.__module__}.{name} is not drawn in runner/errors.py"
    assert set(drawn) == set(classes), "the drawing names classes that do not exist"


def test_the_drawing_is_the_hierarchy() -> None:
    classes = error_classes()
    for name, parent in drawn_tree().items():
        bases = classes[name].__bases__
        assert (parent is None and bases == (Exception,)) or (
            parent is not None and classes[parent] in bases), f"{name} is drawn under {parent}"


def test_every_error_is_defined_in_runner_errors() -> None:
    assert {cls.__module__ for cls in error_classes().values()} == {"runner.errors"}


def body(code: str, message: str = "m") -> dict[str, Any]:
    return {"errors": [{"code": code, "message": message}]}


def pay(code: int, message: str = "m") -> dict[str, Any]:
    return {"ReturnCode": code, "ReturnMessage": message, "PaymentOrderId": "7",
            "Status": "Refused"}


# (HTTP status, body, endpoint) -> the class, and its retry rule.
ANSWERS = [
    # A reused external_id, which collection-service.md words only in 2001201's message.
    (400, body("2001201", REUSED), ORDERS, DuplicateExternalId, Retry.LOOKUP),
    (400, body("2001201", REUSED), "POST /v1/payment/quotations", DuplicateExternalId,
     Retry.LOOKUP),
    (400, body("2001201", REUSED), "POST /v1/payment/quotations/ext-q-1/payment-orders",
     DuplicateExternalId, Retry.LOOKUP),
    (400, body("2001201", REUSED), "POST /v1/payment/payment-orders/PO0000000001/charges",
     DuplicateWithoutLookup, Retry.UNSAFE),
    (400, body("2001201", REUSED), "POST /v1/payment/payment-orders/ext-o%2F1/refunds",
     DuplicateWithoutLookup, Retry.UNSAFE),
    (400, body("2001201", REUSED), "POST /v1/payment/payment-orders/PO0000000001/cancellations",
     DuplicateWithoutLookup, Retry.UNSAFE),
    (400, pay(2500, REUSED), PAY, DuplicateWithoutLookup, Retry.UNSAFE),
    (400, body("1007001", "External ID has already been used"),
     "POST /v1/money-transfer/quotations", DuplicateExternalId, Retry.LOOKUP),
    # 2001201 also says a quotation expired, or a reference or name is taken.
    (400, body("2001201", "quotation QT0000000001 has expired (2026-11-24T10:00:00)"),
     "POST /v1/payment/quotations/QT0000000001/payment-orders", QuotationExpired,
     Retry.UNSAFE),
    (400, body("2001201", "Operation not allowed: External reference has already been used: "
                          "r-1"), "POST /v1/account/payout-requests", ReferenceTaken,
     Retry.UNSAFE),
    (400, body("2001201", "a company named 'Acme' already exists"),
     "POST /v1/onboarding/companies", ReferenceTaken, Retry.UNSAFE),
    (400, body("2001201", "merchant_external_id 'shop' is already used"),
     "POST /v1/onboarding/merchants", ReferenceTaken, Retry.UNSAFE),
    (400, body("2001201", "an account labelled 'main' already exists"),
     "POST /v1/onboarding/accounts", ReferenceTaken, Retry.UNSAFE),
    # 2001201 with any other message is the business rule it names.
    (400, body("2001201", "quotation QT0000000001 was used by payment order PO0000000002"),
     ORDERS, BusinessRefusal, Retry.UNSAFE),
    (400, body("2001201", "source and target are the same account"),
     "POST /v1/account/transfer-requests", BusinessRefusal, Retry.UNSAFE),
    (400, body("2001201", f"the order says: {REUSED}"), ORDERS, BusinessRefusal, Retry.UNSAFE),
    (500, body("2001201", REUSED), ORDERS, ServerError, Retry.LOOKUP),
    (400, pay(2500, "Operation not allowed"), PAY, BusinessRefusal, Retry.UNSAFE),
    # The JSON services, by code.
    (400, body("2001101"), ORDERS, InvalidRequest, Retry.UNSAFE),
    (400, body("1001001"), ORDERS, InvalidRequest, Retry.UNSAFE),
    (400, body("2001301"), ORDERS, BusinessRefusal, Retry.UNSAFE),
    (500, body("2001401"), ORDERS, ServerError, Retry.LOOKUP),
    (503, body("2001501"), ORDERS, ServiceUnavailable, Retry.SAFE),
    (403, body("1000403"), ORDERS, BusinessRefusal, Retry.UNSAFE),
    (401, body("1000401"), ORDERS, AuthenticationError, Retry.UNSAFE),
    (404, body("1008004"), "GET /v1/money-transfer/transactions/1", NotFound, Retry.UNSAFE),
    (400, body("1007002"), "POST /v1/money-transfer/transactions/1/confirm", AlreadyConfirmed,
     Retry.UNSAFE),
    (400, body("1007004"), "POST /v1/money-transfer/transactions/1/confirm", QuotationExpired,
     Retry.UNSAFE),
    (400, body("1007005"), "POST /v1/money-transfer/transactions/1/confirm",
     InsufficientBalance, Retry.UNSAFE),
    # ... and by status where the body says nothing.
    (429, None, ORDERS, RateLimited, Retry.SAFE),
    (503, None, ORDERS, ServiceUnavailable, Retry.SAFE),
    (502, None, ORDERS, ServerError, Retry.LOOKUP),
    (401, None, ORDERS, AuthenticationError, Retry.UNSAFE),
    (404, {}, ORDERS, NotFound, Retry.UNSAFE),
    # An answer that is not one the call promises: in doubt, whatever its status.
    (307, None, ORDERS, UnexpectedAnswer, Retry.LOOKUP),
    (302, body("1000400"), ORDERS, UnexpectedAnswer, Retry.LOOKUP),
    (102, None, ORDERS, UnexpectedAnswer, Retry.LOOKUP),
    (400, None, ORDERS, UnexpectedAnswer, Retry.LOOKUP),
    (200, None, ORDERS, UnexpectedAnswer, Retry.LOOKUP),
    # The legacy Pay, by ReturnCode (XML gives it as text), else by status.
    (400, pay(3000), PAY, PayRefused, Retry.UNSAFE),
    (400, pay(5000), PAY, PayStatusUnknown, Retry.LOOKUP),
    (400, {"ReturnCode": "5050", "ReturnMessage": "later"}, PAY, ServiceUnavailable,
     Retry.SAFE),
    (403, pay(9403), PAY, AuthenticationError, Retry.UNSAFE),
    (404, None, PAY, UnexpectedAnswer, Retry.LOOKUP),
    (403, None, PAY, AuthenticationError, Retry.UNSAFE),
    (200, None, PAY, UnexpectedAnswer, Retry.LOOKUP),
    (200, {"ReturnCode": "7777"}, PAY, ServerError, Retry.LOOKUP),
]


@pytest.mark.parametrize(("status", "answer", "endpoint", "cls", "retry"), ANSWERS)
def test_one_function_maps_every_answer(status: int, answer: Any, endpoint: str,
                                        cls: type[ProviderHTTPError], retry: Retry) -> None:
    error = error_from_answer(status, answer, endpoint, "item-1")
    assert type(error) is cls
    assert error.retry is retry
    assert (error.status, error.endpoint, error.external_id) == (status, endpoint, "item-1")


def test_an_error_carries_the_providers_code_and_message() -> None:
    error = error_from_answer(400, body("2001201", REUSED), ORDERS, "po-1")
    assert (error.code, error.message) == ("2001201", REUSED)
    assert str(error) == f"2001201 {REUSED} ({ORDERS})"
    unreadable = error_from_answer(502, b"<html>", ORDERS)
    assert (unreadable.code, unreadable.message, unreadable.external_id) == (
        None, "HTTP 502", None)


def test_a_pay_error_carries_its_payment_order() -> None:
    refused = error_from_answer(400, pay(3000, "Operation refused"), PAY, "m-1")
    assert isinstance(refused, PayRefused)
    assert (refused.code, refused.message) == ("3000", "Operation refused")
    assert (refused.payment_order_id, refused.order_status) == (7, "Refused")
