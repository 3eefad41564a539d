"""What runner's exit codes mean, in one place: every command, the error tree
(``runner.errors``: each error class's ``exit_code``), the engine's endings, the summary's
``status`` and `runner --help` (``help_lines``) take them from here. A cron job or a
Kubernetes Job reads them (README.md, "Exit codes", says each in full).

The codes above 2 follow sysexits.h where one fits (70, 74, 75, 78), and a process ended by
a signal exits as the shell says one does (128 + the signal).
"""

from __future__ import annotations

import textwrap
from enum import IntEnum


class ExitCode(IntEnum):
    """An exit code of runner: the member's comment says when it is given."""

    OK = 0  # every item settled well
    PROBLEMS = 1  # some items failed, were refused, are unknown or need a person; "no"
    USAGE = 2  # usage, an invalid job, a refused plan: nothing was sent
    SUMMARY_NOT_SENT = 3  # items handled, the summary email not sent (the run's own was 0)
    FUNDS_SHORT = 4  # the balances cannot cover what is to be paid: nothing was confirmed
    PENDING = 5  # status: no item failed, some are still on their way
    INTERNAL_ERROR = 70  # EX_SOFTWARE: a bug in runner, not a verdict on the items
    STATE_UNUSABLE = 74  # EX_IOERR: the state database (or a file to write) cannot be used
    TRY_LATER = 75  # EX_TEMPFAIL: a lease held, the provider unreachable, the state locked
    CONFIGURATION = 78  # EX_CONFIG: credentials refused, a certificate not trusted
    INTERRUPTED = 130  # SIGINT (Ctrl-C): calls in flight finished and recorded
    TERMINATED = 143  # SIGTERM: likewise


def signalled(signum: int) -> int:
    """The exit code of a run stopped by signal ``signum`` (the shell's 128 + signal)."""
    return 128 + signum


# What `runner --help` says of each code (README.md says it at length).
HELP = (
    (ExitCode.OK, "every item settled well"),
    (ExitCode.PROBLEMS, 'some items failed, were refused or are unknown; a row changed after '
                        'its item was paid or sent (left unpaid); or "no" to the question '
                        'before money moves (nothing was sent or written)'),
    (ExitCode.USAGE, "usage error or invalid job file (nothing was sent); a plan refused by "
                     "apply, or run and confirm refused under run.four_eyes; a key that "
                     "cannot sign, or a plan approve refuses; status, report or reconcile "
                     "named a state database that does not exist"),
    (ExitCode.SUMMARY_NOT_SENT, "items handled, but the summary email could not be sent (or "
                                "the summary not made); the summary is under the state "
                                "folder's reports/ (a worse code wins)"),
    (ExitCode.FUNDS_SHORT, "the balances cannot cover what is to be paid: nothing was paid "
                           "(run, apply, confirm; plan and run --dry-run: a run would stop "
                           "so; status: the latest run stopped so)"),
    (ExitCode.PENDING, "status: no item failed, but some are still pending or awaiting "
                       "confirmation"),
    (ExitCode.INTERNAL_ERROR, "internal error: a bug in runner (what is recorded is safe; "
                              "--debug shows where)"),
    (ExitCode.STATE_UNUSABLE, "the state database cannot be used: read-only, no permission, "
                              "damaged, written by a newer runner, a table missing (a person "
                              "must look); or a file to write (plan -o, report --output) "
                              "cannot be: a full disk, a link or a device there"),
    (ExitCode.TRY_LATER, "another run holds the job's lease; the provider is unreachable or "
                         'answers "later" (the payee checks too); a read or dry-run '
                         "quotation for no item (validate, plan) still gets a 5xx or an "
                         "answer runner cannot read; or the state database stays locked or "
                         "its disk is full (try later)"),
    (ExitCode.CONFIGURATION, "configuration: the provider refuses the credentials (401/403), "
                             "or its TLS certificate is not trusted (SSL_CERT_FILE, "
                             "REQUESTS_CA_BUNDLE), the payee checks and dry runs too; "
                             "retrying changes "
                             "nothing until it is fixed"),
    (ExitCode.INTERRUPTED, f"stopped by Ctrl-C (SIGINT), {int(ExitCode.TERMINATED)} by "
                           f"SIGTERM: the calls in flight finished and were recorded, the "
                           f"summary was written; run again to resume"),
)


# When a command gives a code for the same reasons as others do; what its other codes mean
# (0, 1, 2 ...) each command's --help says itself, in ``exits``.
UNREACHABLE = 'the provider stays unreachable or answers "later" after retries'
WHEN = {
    ExitCode.STATE_UNUSABLE: "the state database (or a file to write) cannot be used",
    ExitCode.TRY_LATER: f"{UNREACHABLE}, or the state stays locked",
    ExitCode.CONFIGURATION: "the provider refuses the credentials or its TLS certificate is "
                            "not trusted",
}


def exits(*codes: ExitCode | tuple[ExitCode, str]) -> str:
    """The sentence in which a command's --help states every code it gives: each with when
    (the command's own words, or ``WHEN``'s), as "Exits 0 when ...; 2 when ...; or 75
    when ..."."""
    cases = [f"{int(code)} when {when}" for code, when in
             (code if isinstance(code, tuple) else (code, WHEN[code]) for code in codes)]
    return "Exits " + "; ".join(cases[:-1]) + ("; or " if len(cases) > 1 else "") + \
        cases[-1] + "."


def listed(*codes: ExitCode) -> str:
    """The codes a command gives, for a --help whose words say some of them: `runner --help`
    says each."""
    numbers = [str(int(code)) for code in codes]
    return f"Exit codes: {', '.join(numbers[:-1])} or {numbers[-1]} (`runner --help` says " \
           f"each)."


def help_lines(width: int = 80) -> list[str]:
    """The codes as `runner --help` lists them: the code, then its meaning, wrapped."""
    return [line for code, text in HELP
            for line in textwrap.wrap(text, width, initial_indent=f"  {int(code):<4}",
                                      subsequent_indent=" " * 6)]
