"""Job files for the tests of runner.job: a valid remittance job, its rows, and a writer.

Line numbers in the tests' expected messages refer to ``REMITTANCE`` as written here.
"""

from __future__ import annotations

from pathlib import Path

REMITTANCE = """\
version: 1
name: payroll-2026-11
kind: remittance
provider: {api_key: k, api_secret: s}
vars: {period: "2026-11"}
defaults:
  payer_id: 1
  mode: SOURCE_AMOUNT
  source: {country_iso_code: FRA, currency: EUR}
  purpose_of_remittance: SALARY
  sender: {firstname: Ada, lastname: Acme}
items:
  from: payroll.csv
  external_id: "payroll-{{ vars.period }}-{{ row.employee_id }}"
  template:
    source: {amount: "{{ row.net_pay }}"}
    destination: {currency: KES}
    credit_party_identifier: {msisdn: "{{ row.msisdn }}"}
    beneficiary: {firstname: "{{ row.first_name }}", lastname: Doe}
"""

CSV = (
    "employee_id,net_pay,msisdn,first_name\n"
    "E1,12.50,+254700000001,Jo\n"
    "E2,7,+254700000002,Al\n"
)


def write(folder: Path, job: str = REMITTANCE, files: dict[str, str | bytes] | None = None,
          name: str = "job.yaml") -> Path:
    """Write ``job`` into ``folder`` with ``files`` beside it (default: payroll.csv = CSV);
    return the job file's path."""
    for file, content in ({"payroll.csv": CSV} if files is None else files).items():
        target = folder / file
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content, encoding="utf-8")
    path = folder / name
    path.write_text(job, encoding="utf-8")
    return path


def replace(job: str, old: str, new: str) -> str:
    """``job`` with ``old`` (which must be there, once) replaced by ``new``."""
    assert job.count(old) == 1, old
    return job.replace(old, new)
