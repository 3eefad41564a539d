"""Job files: the YAML model, loading, rows and templating (docs/job-files.md).

``load_job(path)`` returns a checked ``Job`` or raises ``JobErrors`` with every problem;
``iter_items(job)`` streams its rows as ``ValidItem`` or ``InvalidItem``; ``approval_rules``
reads only who approves a job's plans. Checks that need
the provider (payers, payment methods, balances) come later, in the engine's validation.
"""

from runner.job.loading import (
    InvalidItem,
    ItemResult,
    ValidItem,
    approval_rules,
    check_job,
    iter_items,
    load_job,
)
from runner.job.model import Job

__all__ = [
    "InvalidItem",
    "ItemResult",
    "Job",
    "ValidItem",
    "approval_rules",
    "check_job",
    "iter_items",
    "load_job",
]
