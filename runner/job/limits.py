"""The bounds a job is held to, in one place (docs/job-files.md, "Limits").

A job file, its rows and its templates come from people and from other programs' exports;
whatever they hold, loading them ends in bounded time and memory with an error naming the
file, the line or row, and the field. Each bound is far above what a payment file needs and
below what would hurt the machine: the YAML reader and the rows readers (``document``,
``rows``), the template sandbox (``budget``), the job model (``model``) and the item check of
every text field (``text``) read them from here. The length of each field the provider takes
is the provider's rule, in ``runner.rules``; the digits of an amount in ``runner.money``.
"""

from __future__ import annotations

from typing import Any

#: The job file. Rows beyond a few thousand belong in a CSV or JSON Lines file, which is
#: streamed; the YAML reader keeps the whole file, with the line of every value, in memory.
JOB_FILE_BYTES_MAX = 1 << 20
#: Values (keys, list items and scalars) in the job file, aliases (``*name``) and merges
#: (``<<:``) counted as everything they repeat.
YAML_VALUES_MAX = 100_000
#: Mappings and lists inside one another, in the job file and in a JSON Lines row.
NESTING_MAX = 32
#: One line of a CSV or JSON Lines file.
ROW_LINE_BYTES_MAX = 1 << 20

#: Workers of a run (``run.concurrency``, ``--concurrency``): calls in flight at once.
CONCURRENCY_MAX = 64

#: CPU seconds that rendering one item's templates may take (all its fields together). A
#: template that needs more is refused, and the job with it: nothing is sent.
TEMPLATE_SECONDS = 0.5
#: Characters of any text a template computes, and items of any list; also the largest
#: width, padding or repeat count a template may ask for.
TEMPLATE_VALUE_MAX = 10_000
#: Binary digits of an integer a template computes (about 100 decimal digits).
TEMPLATE_INTEGER_BITS_MAX = 340
#: CPU seconds that rendering one summary (its text, its HTML or its subject) may take: the
#: built-in templates take a few hundredths of a second with every list full. A template
#: over it is refused, before the run (exit 2) or after it (exit 3: the payments stand).
SUMMARY_SECONDS = 5.0
#: Characters or list items of any value a summary template is handed or computes (the
#: summary's lists hold their first 50 items each), and as width, padding or repeat count.
SUMMARY_VALUE_MAX = 1_000_000
#: Characters one summary template outputs in all.
SUMMARY_OUTPUT_MAX = 4_000_000


def too_deep(value: Any, limit: int = NESTING_MAX) -> bool:
    """True when ``value`` (plain data) nests mappings and lists more than ``limit`` deep."""
    level = [value]
    for _ in range(limit + 1):
        level = [child for node in level
                 for child in (node.values() if isinstance(node, dict) else
                               node if isinstance(node, list) else ())]
        if not level:
            return False
    return True
