"""Summaries of a job: what it came to, from the state database, as text, HTML, JSON and
CSV, written under the state folder's ``reports/`` and emailed (the job's ``summary:``).

``model`` builds the ``Summary`` (the batch's one read model, of ``lines.ItemLine``s and
``totals``; ``status`` gives its terminal lines); ``amounts`` writes money as accountants
do; ``render``
runs the Jinja templates (the job's, then the built-in ones in ``templates/``); ``items_csv``
writes the full list as it streams from the state; ``tally`` adds a batch up item by item,
holding the first items of each list; ``mail`` sends it; ``reports`` ties them together for
the end of a run (once per change) and for ``runner report``.
"""

from runner.summary.model import Summary, build_summary
from runner.summary.render import Templates, check_summary, templates_of
from runner.summary.reports import (
    Delivery,
    Rendered,
    conclude,
    email_summary,
    render_all,
    summary_of,
)
from runner.summary.status import status_lines

__all__ = [
    "Delivery",
    "Rendered",
    "Summary",
    "Templates",
    "build_summary",
    "check_summary",
    "conclude",
    "email_summary",
    "render_all",
    "status_lines",
    "summary_of",
    "templates_of",
]
