"""The corpus of hostile job files: what an attacker or a careless user writes, for every kind.

Each case starts from an example of jobs/ (every kind has one, valid as it is: the test checks
that first) and changes it: a replacement in the job file or its rows file, a file written
beside it, an environment variable, an option. Every case must end in exit 2 with the words
given, and nothing sent. Generated contents (bombs, huge lines) are built here, not stored.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

EXAMPLE = {
    "remittance": "payroll", "payout": "payouts", "account_transfer": "transfers",
    "merchant_payment": "merchant-payments", "payment_order": "payment-orders",
    "legacy_pay": "legacy-pay", "onboarding": "onboarding", "charge": "charges",
    "refund": "refunds", "cancel": "cancels",
}

#: A change to a copy of the example: (its folder, the job file's name).
Edit = Callable[[Path, str], None]


@dataclass(frozen=True)
class Case:
    id: str
    kind: str
    edits: tuple[Edit, ...]
    words: tuple[str, ...]
    options: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)

    @property
    def job(self) -> str:
        return f"{EXAMPLE[self.kind]}.yaml"


def sub(old: str, new: str, file: str | None = None) -> Edit:
    """Replace ``old`` (which must be there) by ``new`` in the case's job file, or ``file``."""
    def edit(folder: Path, job: str) -> None:
        path = folder / (file or job)
        text = path.read_text(encoding="utf-8")
        assert old in text, f"{old!r} is not in {path.name}"
        path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return edit


def cell(column: str, value: str, file: str) -> Edit:
    """Set ``column`` of the first data row of the CSV ``file`` to ``value`` (quoted)."""
    def edit(folder: Path, job: str) -> None:
        path = folder / file
        lines = path.read_text(encoding="utf-8").split("\n")
        header = lines[0].split(",")
        cells = lines[1].split(",")
        cells[header.index(column)] = '"' + value.replace('"', '""') + '"'
        lines[1] = ",".join(cells)
        path.write_text("\n".join(lines), encoding="utf-8")
    return edit


def put(name: str, content: str | bytes) -> Edit:
    def edit(folder: Path, job: str) -> None:
        target = folder / name
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content, encoding="utf-8")
    return edit


def fifo(name: str) -> Edit:
    def edit(folder: Path, job: str) -> None:
        (folder / name).unlink()
        os.mkfifo(folder / name)
    return edit


def link(name: str, target: str) -> Edit:
    """``name`` (in the case's folder) made a symbolic link to ``target``."""
    def edit(folder: Path, job: str) -> None:
        (folder / name).unlink(missing_ok=True)
        (folder / name).symlink_to(target)
    return edit


LAUGHS = "".join(
    [f"  l{c}: &l{c} [" + ",".join([f"*l{p}"] * 9) + "]\n"
     for p, c in zip("abcdefgh", "bcdefghi", strict=True)])
VARS = "vars:\n  period: \"2026-11\"\n"
JSONL_JOB = ("from: payroll.csv", "from: payroll.jsonl")
JSONL_ROW = ('{"employee_id": "E1", "first_name": "Ada", "last_name": "Byron", "payer_id": 1, '
             '"currency": "KES", "net_pay": %s, "msisdn": "+254700000001", '
             '"bank_account": "", "swift": ""}\n')


def jsonl(net_pay: str) -> tuple[Edit, ...]:
    return (sub(*JSONL_JOB), put("payroll.jsonl", JSONL_ROW % net_pay))


LONG_LINE = "E9," + "x" * (1 << 20) + ",Doe,1,KES,1.00,+254700000001,,\n"

CASES: list[Case] = [
    # ---- the YAML itself
    Case("alias-bomb", "remittance", (sub(VARS, VARS + '  la: &la ["lol","lol","lol","lol",'
                                                 '"lol","lol","lol","lol","lol"]\n' + LAUGHS),),
         ("aliases (*name) repeat values past 100,000",)),
    Case("merge-itself", "payout", (sub("vars:\n", "vars:\n  loop: &loop {<<: *loop}\n"),),
         ("a merge (<<) includes the mapping it is in",)),
    Case("nested-deep", "account_transfer",
         (sub("vars:\n", "vars:\n  deep: " + "[" * 40 + "]" * 40 + "\n"),),
         ("nested more than 32 deep",)),
    Case("too-many-values", "charge",
         (sub("vars:\n", "vars:\n  many: [" + ",".join(["1"] * 100_001) + "]\n"),),
         ("more than 100,000 values",)),
    Case("file-over-1-mib", "refund",
         (sub("vars:\n", "vars:\n  note: '" + "x" * (1 << 20) + "'\n"),),
         ("larger than 1,048,576 bytes",)),
    Case("job-file-is-a-fifo", "cancel", (fifo("cancels.yaml"),), ("not a regular file",)),
    Case("python-tag", "merchant_payment",
         (sub("vars:\n", "vars:\n  x: !!python/object/apply:os.system [echo owned]\n"),),
         ("the YAML tag '!!python/object/apply:os.system' is not allowed",)),
    Case("binary-tag", "payment_order", (sub("vars:\n", "vars:\n  blob: !!binary aGVsbG8=\n"),),
         ("the YAML tag '!!binary' is not allowed",)),
    Case("local-tag", "legacy_pay", (sub("vars:\n", "vars:\n  ref: !Ref {name: x}\n"),),
         ("the YAML tag '!Ref' is not allowed",)),
    Case("set-tag", "onboarding", (sub("vars:\n", "vars:\n  s: !!set {a, b}\n"),),
         ("the YAML tag '!!set' is not allowed",)),
    # ---- the provider and run sections
    Case("credentials-in-base-url", "remittance",
         (sub("${RUNNER_BASE_URL:-sandbox}", "https://payroll:S3cr3tPass@api.example.com"),),
         ("credentials do not belong in base_url", "provider.api_key")),
    Case("nul-in-base-url", "payout",
         (sub("${RUNNER_BASE_URL:-sandbox}", '"https://api.exa\\0mple.com"'),),
         ("provider.base_url: holds a NUL (U+0000) at character 16",)),
    Case("line-break-in-api-key", "account_transfer", (),
         ("provider.api_key: holds a control character",), env={"RUNNER_API_KEY": "k\nX-Evil: 1"}),
    Case("concurrency-huge", "merchant_payment",
         (sub("concurrency: 8", "concurrency: 99999999999999999999999"),),
         ("run.concurrency: Input should be less than or equal to 64",)),
    Case("concurrency-100000", "payment_order", (sub("concurrency: 4", "concurrency: 100000"),),
         ("run.concurrency: Input should be less than or equal to 64",)),
    Case("concurrency-option-huge", "legacy_pay", (),
         ("'--concurrency'", "1<=x<=64"), options=("--concurrency", "99999999999999999999999")),
    Case("wait-for-ever", "onboarding", (sub("  retry:", "  wait_for_final: 99999d\n  retry:"),),
         ("run.wait_for_final: at most 7d",)),
    Case("timeout-1e400", "charge", (sub("  auth: basic", "  auth: basic\n  timeout: 1e400"),),
         ("provider.timeout: not a duration",)),
    Case("rate-limit-tiny", "refund", (sub("  concurrency: 4", "  concurrency: 4\n  rate_limit: "
                                               "1e-300"),),
         ("run.rate_limit: Input should be greater than or equal to 0.01",)),
    Case("retries-huge", "cancel", (sub("attempts: 6", "attempts: 1000000000"),),
         ("run.retry.attempts: Input should be less than or equal to 100",)),
    # ---- templates that would loop or grow for ever
    Case("nested-range", "remittance",
         (sub('"{{ row.last_name }}"',
              '"{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}'
              '{% endfor %}{{ row.last_name }}"'),),
         ("a range of more than 10,000 numbers",)),
    Case("loop-over-time", "payout",
         (sub('"{{ row.label }}"', '"{% for i in range(10000) %}{% for j in range(10000) %}'
                                    '{% endfor %}{% endfor %}{{ row.label }}"'),),
         ("took more than 0.5 s of CPU",)),
    Case("repeat-a-gigabyte", "account_transfer",
         (sub('"{{ row.label }}"', '"{{ \'x\' * 10**9 }}"'),),
         ("repeats past 10,000 characters",)),
    Case("huge-power", "merchant_payment",
         (sub('"{{ row.first_name }}"', '"{{ 2 ** 100000 }}"'),), ("a power over 340 bits",)),
    Case("center-a-gigabyte", "legacy_pay",
         (sub('"{{ row.email }}"', '"{{ row.email|center(10**9) }}"'),),
         ("a width, length or size over 10,000",)),
    Case("format-width", "onboarding",
         (sub('"{{ row.company }}"', '"{{ \'{:>1000000000}\'.format(row.company) }}"'),),
         ("a format width or precision over 10,000",)),
    Case("printf-width", "refund",
         (sub('"{{ row.note }}"', '"{{ \'%1000000000s\' % row.note }}"'),),
         ("a % width or precision over 10,000",)),
    Case("doubling-namespace", "cancel",
         (sub('"{{ row.note }}"', '"{% set ns = namespace(s=row.note) %}{% for i in range(64) %}'
                                  '{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}"'),),
         ("more than 10,000 characters",)),
    Case("exponential-macro", "charge",
         (sub('"{{ row.note }}"', '"{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}'
                                  '{% endif %}{% endmacro %}{{ f(40) }}{{ row.note }}"'),),
         ("took more than 0.5 s of CPU",)),
    Case("endless-generator", "payment_order",
         (sub('"{{ row.page }}"', '"{{ [1]|slice(1000000000)|list|length }}"'),),
         ("more than 10,000 steps in one loop",)),
    Case("shared-lists", "remittance",
         (sub('"{{ row.last_name }}"',
              '"{% set a = [\'x\' * 900] * 10 %}{% set b = [a, a, a, a, a, a, a, a, a, a] %}'
              '{% set c = [b, b, b, b, b, b, b, b, b, b] %}{{ c }}"'),),
         ("a value of more than 10,000 characters or items",)),
    Case("defaults-bomb", "payout",
         (sub("  payout: {currency: EUR}", "  payout: {currency: EUR}\n  custom_data: "
              "\"{% for i in range(10000) %}{% for j in range(10000) %}{% endfor %}"
              "{% endfor %}\""),),
         ("defaults.custom_data", "took more than 0.5 s of CPU")),
    Case("python-internals", "account_transfer",
         (sub('"{{ row.label }}"', '"{{ \'\'.__class__.__mro__ }}"'),),
         ("refused by the template sandbox",)),
    Case("join-bomb", "merchant_payment",
         (sub('"{{ row.last_name }}"', '"{% set s = \'x\' * 10000 %}{{ s.join(s) }}"'),),
         ("joins past 10,000 characters",)),
    Case("replace-bomb", "legacy_pay",
         (sub('"{{ row.email }}"', '"{% set s = \'x\' * 10000 %}{{ s|replace(\'\', s) }}"'),),
         ("a replacement past 10,000 characters",)),
    Case("to-bytes-bomb", "onboarding",
         (sub('"{{ row.region }}"', '"{{ (1).to_bytes(1000000000, \'big\') }}"'),),
         ("a width, length or size over 10,000",)),
    # ---- external_ids that may differ from one process to the next (an object's address,
    # a counter, a method): refused with the job, whatever the row
    Case("id-object-address", "remittance",
         (sub('"payroll-{{ vars.period }}-{{ row.employee_id }}"',
              '"payroll-{{ row.employee_id }}-{{ \'\'.join|string }}"'),),
         ("items.external_id: ''.join", "the same text in every process")),
    Case("id-cycler", "payout",
         (sub('"payout-{{ vars.period }}-{{ row.payout_id }}"',
              '"payout-{{ cycler(1, 2).next() }}-{{ row.payout_id }}"'),),
         ("items.external_id: the call cycler(...).next(...)",)),
    Case("id-row-method", "account_transfer",
         (sub('"transfer-{{ vars.period }}-{{ row.ref }}"', '"transfer-{{ row.values }}"'),),
         ("items.external_id: row.values ('values' is a method",)),
    Case("id-lipsum", "merchant_payment",
         (sub('"mp-{{ vars.period }}-{{ row.consumer_id }}"',
              '"mp-{{ lipsum(1, false, 1, 1) }}-{{ row.consumer_id }}"'),),
         ("items.external_id: the call lipsum(...)",)),
    Case("id-defaults", "payment_order",
         (sub('"po-{{ vars.period }}-{{ row.order_id }}"',
              '"po-{{ defaults.type }}-{{ row.order_id }}"'),),
         ("items.external_id: defaults.type",)),
    # ---- amounts: one grammar in CSV, JSON Lines and YAML
    Case("amount-exponent-csv", "remittance", (cell("net_pay", "1e3", "payroll.csv"),),
         ("source.amount: not a decimal amount: '1e3'", "without an exponent")),
    Case("amount-underscore-csv", "remittance", (cell("net_pay", "1_000.00", "payroll.csv"),),
         ("not a decimal amount: '1_000.00'", "without _")),
    Case("amount-full-width-csv", "remittance", (cell("net_pay", "９７８.２６", "payroll.csv"),),
         ("not a decimal amount", "write the digits as 0-9")),
    Case("amount-arabic-indic-csv", "remittance",
         (cell("net_pay", "٩٧٨.٢٦", "payroll.csv"),), ("write the digits as 0-9",)),
    Case("amount-31-digits-csv", "remittance", (cell("net_pay", "9" * 31, "payroll.csv"),),
         ("31 digits before the point; at most 15",)),
    Case("amount-7-decimals-csv", "payout", (cell("amount", "1.1234567", "payouts.csv"),),
         ("payout.amount: 7 digits after the point; at most 6",)),
    Case("amount-nan-csv", "payout", (cell("amount", "NaN", "payouts.csv"),),
         ("payout.amount: not a decimal amount: 'NaN'",)),
    Case("amount-exponent-yaml", "account_transfer", (sub('amount: "5000.00"', "amount: 1e3"),),
         ("transfer.amount: not a decimal amount: '1e3'",)),
    Case("amount-underscore-yaml", "account_transfer",
         (sub('amount: "5000.00"', "amount: 1_000.00"),), ("not a decimal amount: '1_000.00'",)),
    Case("amount-float-exponent-yaml", "charge", (sub('amount: "120.00"', "amount: 1.5e+3"),),
         ("requested.amount: not a decimal amount: '1.5e+3'",)),
    Case("amount-inf-yaml", "refund", (sub('amount: "40.00"', "amount: .inf"),),
         ("requested.amount: not a decimal amount: '.inf'",)),
    Case("amount-negative-yaml", "cancel", (sub('amount: "30.00"', "amount: -5"),),
         ("requested.amount: must be greater than 0",)),
    Case("amount-1e400-jsonl", "remittance", jsonl("1e400"),
         ("source.amount: not a decimal amount: '1e400'",)),
    Case("amount-40-digits-jsonl", "remittance", jsonl("9" * 40),
         ("source.amount: 40 digits before the point",)),
    Case("amount-comma-csv", "payment_order", (cell("amount", "12,50", "payment-orders.csv"),),
         ("requested.amount", "use a point as the decimal separator")),
    Case("amount-arabic-indic-legacy", "legacy_pay", (cell("amount", "١٢", "legacy-pay.csv"),),
         ("Amount: not a decimal amount", "0-9")),
    Case("payer-id-full-width", "remittance", (cell("payer_id", "１", "payroll.csv"),),
         ("payer_id: not an id",)),
    # ---- rows files
    Case("jsonl-nested-deep", "remittance",
         (sub(*JSONL_JOB), put("payroll.jsonl", '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}\n")),
         ("nested more than 32 deep",)),
    Case("jsonl-line-over-1-mib", "remittance",
         (sub(*JSONL_JOB), put("payroll.jsonl", '{"pad": "' + "x" * (1 << 20) + '"}\n')),
         ("the line is longer than 1,048,576 bytes",)),
    Case("csv-line-over-1-mib", "remittance",
         (put("payroll.csv", "employee_id,first_name,last_name,payer_id,currency,net_pay,"
                             "msisdn,bank_account,swift\n" + LONG_LINE),),
         ("payroll.csv:2: the line is longer than 1,048,576 bytes",)),
    Case("csv-cell-over-field-limit", "payout",
         (put("payouts.csv", "payout_id,bank_account,amount,label\nP1,PBA0001-1,1.00,"
                             + "y" * 200_000 + "\n"),),
         ("invalid CSV", "field larger than field limit")),
    # ---- text fields
    Case("nul-in-csv-cell", "remittance", (cell("first_name", "Wan\x00jiru", "payroll.csv"),),
         ("beneficiary.firstname: holds a NUL (U+0000) at character 4",)),
    Case("line-break-in-csv-cell", "merchant_payment",
         (cell("first_name", "Wanjiru\nKamau", "merchant-payments.csv"),),
         ("consumer.firstname: holds a line break (U+000A)",)),
    Case("tab-in-label", "payout", (cell("label", "Week\t45", "payouts.csv"),),
         ("label: holds a tab (U+0009)",)),
    Case("escape-in-yaml-row", "account_transfer",
         (sub('label: "Reserve top-up"', 'label: "Reserve\\x1b[31m top-up"'),),
         ("label: holds a control character (U+001B)",)),
    Case("name-101-digits", "remittance", (cell("first_name", "1" * 101, "payroll.csv"),),
         ("beneficiary.firstname: 101 characters; at most 100",)),
    Case("label-5000", "payout", (cell("label", "L" * 5000, "payouts.csv"),),
         ("label: 5,000 characters; at most 100",)),
    Case("company-name-101", "onboarding", (cell("company", "C" * 101, "onboarding.csv"),),
         ("company.name: 101 characters; at most 100",)),
    Case("card-number-40", "payment_order",
         (cell("card_number", "4" * 40, "payment-orders.csv"),),
         ("payment_information.card_number: 40 characters; at most 23",)),
    Case("email-300", "legacy_pay",
         (cell("email", "a" * 290 + "@example.com", "legacy-pay.csv"),),
         ("MerchantOrder.Customer.Email: 302 characters; at most 254",)),
    Case("custom-data-2000", "refund",
         (sub("note: one item returned", "note: " + "n" * 2000),),
         ("custom_data: 2,000 characters; at most 1,000",)),
    # ---- files a job may not read, and what is never printed from them
    Case("rows-linked-to-environ", "remittance", (link("payroll.csv", "/proc/self/environ"),),
         ("payroll.csv: outside the job file's folder, where the job's rows files are read "
          "from",)),
    Case("rows-root-is-proc", "payout",
         (sub("from: payouts.csv", "from: /proc/self/environ\n  format: csv\n  root: /proc"),),
         ("items.from: /proc/self/environ: a special file of the system (proc)",)),
    Case("rows-outside-the-folder", "merchant_payment",
         (sub("from: merchant-payments.csv", "from: /etc/passwd\n  format: csv"),),
         ("items.from: /etc/passwd: outside the job file's folder",)),
    Case("rows-file-is-a-fifo", "payment_order", (fifo("payment-orders.csv"),),
         ("items.from: payment-orders.csv: not a regular file (a FIFO)",)),
    Case("summary-template-linked-to-environ", "remittance",
         (link("../templates/summary.html.j2", "/proc/self/environ"),),
         ("summary.template: the summary template failed: TemplateError: summary.html.j2: a "
          "special file of the system (proc)",)),
    Case("approvers-linked-to-environ", "remittance",
         (sub("run:\n", "run:\n  four_eyes: true\n  approvers: signers\n"),
          link("signers", "/proc/self/environ")),
         ("signers: cannot read the approvers' keys: a special file of the system (proc)",)),
    Case("header-is-a-settings-line", "legacy_pay",
         (put("legacy-pay.csv", "PGPASSWORD=s3cr3t-in-header,amount,format,email\n"
                                "A-1,1.00,json,a@example.com\n"),),
         ("legacy-pay.csv:1: row 1 is not a header: column 1 holds an =",)),
    # ---- JSON Lines, YAML and environment values no reader agrees on
    Case("jsonl-duplicate-key", "remittance",
         (sub(*JSONL_JOB), put("payroll.jsonl", JSONL_ROW.replace(
             '"net_pay": %s', '"net_pay": 1.00, "net_pay": 99.00'))),
         ("payroll.jsonl:1: invalid JSON: the key 'net_pay' is given twice in one object",)),
    Case("jsonl-lone-surrogate", "remittance",
         (sub(*JSONL_JOB), put("payroll.jsonl", (JSONL_ROW % "1.00").replace(
             '"Ada"', '"Ad\\ud800a"'))),
         ("payroll.jsonl:1: invalid JSON: a text holds a lone surrogate (U+D800)",)),
    Case("yaml-lone-surrogate", "onboarding", (sub("vars:\n", 'vars:\n  s: "x\\ud800"\n'),),
         ("vars.s: holds a lone surrogate (U+D800)",)),
    Case("environment-not-utf8", "charge", (),
         ("provider.api_key: holds a lone surrogate (U+DCFF)",),
         env={"RUNNER_API_KEY": "key\udcff"}),
    Case("nested-reference-unset", "refund",
         (sub("${RUNNER_API_KEY:-sandbox-key}", "${RUNNER_NO_KEY:-${RUNNER_NO_KEY_EITHER}}"),),
         ("provider.api_key: environment variable RUNNER_NO_KEY_EITHER is not set",)),
    Case("next-line-in-name", "remittance",
         (cell("first_name", "Wan\u0085jiru", "payroll.csv"),),
         ("beneficiary.firstname: holds a control character (U+0085) at character 4",)),
    Case("line-separator-in-label", "payout", (cell("label", "Week\u202845", "payouts.csv"),),
         ("label: holds a line separator (U+2028) at character 5",)),
    Case("bidi-override-in-name", "merchant_payment",
         (cell("first_name", "\u202eWanjiru", "merchant-payments.csv"),),
         ("consumer.firstname: holds a bidirectional control (U+202E) at character 1",)),
    Case("bidi-isolate-in-company", "onboarding",
         (cell("company", "Boulangerie\u2067 Lyon", "onboarding.csv"),),
         ("company.name: holds a bidirectional control (U+2067) at character 12",)),
    Case("recipients-in-one-text", "remittance", (),
         ("summary.email.to.0: 'payroll@example.com,attacker@evil.example' is not one email "
          "address",), env={"RUNNER_SUMMARY_TO": "payroll@example.com,attacker@evil.example"}),
    # ---- enumerations of the documents
    Case("transfer-type-bogus", "account_transfer",
         (sub("  transfer: {currency: EUR}", "  transfer: {currency: EUR}\n  type: Bogus"),),
         ("type: 'Bogus' is not one of ScheduledTransferOut",)),
    Case("purpose-of-payment", "merchant_payment",
         (sub("purpose_of_payment: OTHER", "purpose_of_payment: SALARY"),),
         ("purpose_of_payment: 'SALARY' is not one of OTHER",)),
    Case("bank-account-format", "onboarding", (sub("format: IBAN", "format: BBAN"),),
         ("format: 'BBAN' is not one of IBAN",)),
    Case("gender", "merchant_payment",
         (sub('      id_type: "{{ row.id_type }}"',
              '      id_type: "{{ row.id_type }}"\n      gender: M'),),
         ("consumer.gender: 'M' is not one of MALE, FEMALE",)),
    Case("integration-mode", "payment_order",
         (cell("mode", "REDIRECTION", "payment-orders.csv"),),
         ("integration_mode: 'REDIRECTION' is not one of REDIRECT, HOST_TO_HOST",)),
    Case("legacy-format", "legacy_pay", (cell("format", "yaml", "legacy-pay.csv"),),
         ("format: 'yaml' is not one of json, xml",)),
    Case("account-type", "onboarding", (sub("format: IBAN", "format: IBAN\n          "
                                             "external_account_type: BUSINESS"),),
         ("external_account_type: 'BUSINESS' is not one of SAVINGS, DEPOSIT, CHECKING, OTHERS",)),
]
