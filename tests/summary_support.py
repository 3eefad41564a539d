"""A small remittance job, run for real (``runner run``) against a loopback sandbox, for the
summary tests: two items settle (one named like a spreadsheet formula), one is REJECTED
after confirm (30200; its beneficiary named like an HTML injection), one is refused at
quotation (payer 13 is inactive: 1003001).

The sandbox runs with its own distinctive credentials so a test can prove they appear in no
report and no email.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from click.testing import CliRunner, Result

from runner.cli import main
from runner.sandbox import RunningSandbox

KEY, SECRET = "summary-key-Q7x", "summary-secret-Z9w"
NAME = "pay-2026-11"
JOB = """\
version: 1
name: pay-2026-11
kind: remittance
provider: {{base_url: "{url}", auth: hmac, api_key: "{key}", api_secret: "{secret}"}}
vars: {{period: "2026-11"}}
defaults:
  mode: SOURCE_AMOUNT
  source: {{country_iso_code: FRA, currency: EUR}}
  purpose_of_remittance: SALARY
  sender: {{firstname: Ada, lastname: Acme}}
items:
  from: rows.csv
  external_id: "pay-{{{{ row.id }}}}"
  template:
    payer_id: "{{{{ row.payer }}}}"
    source: {{amount: "{{{{ row.amount }}}}"}}
    destination: {{currency: KES}}
    credit_party_identifier: {{msisdn: "{{{{ row.msisdn }}}}"}}
    beneficiary: {{firstname: "{{{{ row.first }}}}", lastname: "{{{{ row.last }}}}"}}
run: {{wait_for_final: 2s, concurrency: 2}}
"""
HOSTILE = "<script>alert(1)</script>"
HEADER = "id,payer,amount,msisdn,first,last\n"
SETTLED = ("E1,1,100.00,+254700000001,Jo,Doe\n"
           "E2,1,250.50,+254700000002,=1+2,Doe\n")
FAILING = (f"E3,1,80.00,+254700999302,{HOSTILE},Smith & Sons\n"
           "E4,13,70.00,+254700000005,Old,Wallet\n")


def start_sandbox(sandbox_factory: Callable[..., RunningSandbox]) -> RunningSandbox:
    return sandbox_factory(submit_delay=0, complete_delay=0, api_key=KEY, api_secret=SECRET)


def write_job(folder: Path, sandbox: RunningSandbox, rows: str = SETTLED + FAILING,
              summary: str = "") -> Path:
    (folder / "rows.csv").write_text(HEADER + rows, encoding="utf-8")
    job = folder / "job.yaml"
    job.write_text(JOB.format(url=sandbox.url, key=KEY, secret=SECRET) + summary,
                   encoding="utf-8")
    return job


def cli(*args: str) -> Result:
    result = CliRunner().invoke(main, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        result.exc_info
    assert "Traceback" not in result.output
    return result


def run(job: Path, state: Path) -> Result:
    return cli("run", str(job), "--yes", "--state", str(state))


def reports(state: Path) -> dict[str, Path]:
    """The report files of the one run under the state folder, by suffix."""
    files = sorted((state.parent / "reports").iterdir())
    assert len(files) == 3, files
    return {f.suffix: f for f in files}
