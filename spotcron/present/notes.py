"""What a run's state alone does not say: why it ended as it did, what was wrong with the
metrics.json it wrote (every problem, not only the first), why it has no cost, and that the cost
of a run that had no VM is its start_job call.

A run can succeed and still leave a metrics.json that breaks the contract; its benchmark figures
are then missing. Every surface that says `succeeded` (`runs`, `up`, `run --follow`, the page)
takes its words from here, so they say the same thing. Records in, text out.

A reason may quote what a job wrote (the problem its container posted, its metrics.json), so
every word here is one printable line (neutral.line_text): no terminal escape, no line break.
"""

from __future__ import annotations

from spotcron.core.metrics import problem_list
from spotcron.core.runs import RunRecord, RunState
from spotcron.present.neutral import line_text


def metrics_note(record: RunRecord) -> str:
    """`results/metrics.json of attempt 1 has 2 problems: (1) ...; (2) ...`, or "" when it had none.

    Each problem the record keeps starts with where it is; that is said once.
    """
    problems = problem_list(record.metrics_problem)
    if not problems:
        return ""
    where = problems[0].partition(": ")[0]
    said = [p.partition(": ")[2] if p.startswith(where + ": ") else p for p in problems]
    if len(said) == 1:
        return f"{where}: {said[0]}"
    listed = " ".join(f"({number}) {text}" for number, text in enumerate(said, 1))
    return f"{where} has {len(said)} problems: {listed}"


def metrics_flag(record: RunRecord) -> str:
    """A few words for a narrow column: `metrics.json: 2 problems`, or ""."""
    count = len(problem_list(record.metrics_problem))
    if not count:
        return ""
    return f"metrics.json: {count} problem{'s' if count != 1 else ''}"


def run_note(record: RunRecord) -> str:
    """Everything a reader should know beside the state, in one line: the reason, the metrics.json
    problems, and why an ended run has no cost."""
    parts = []
    if record.reason:
        parts.append(line_text(record.reason))
    note = metrics_note(record)
    if note:
        parts.append(line_text(note))
    if record.terminal and record.cost_usd is None and record.cost_problem:
        parts.append(f"no cost: {line_text(record.cost_problem)}")
    elif record.terminal and record.cost_usd and not record.had_vm:
        parts.append("cost: the start_job call only, no VM ran")
    return "; ".join(parts)


def ended_words(record: RunRecord) -> str:
    """`: REASON` for a run that did not succeed, `, but its METRICS NOTE` for one that did with a
    broken metrics.json, else "": what follows the state in a one-line outcome."""
    if record.state != RunState.SUCCEEDED:
        return f": {line_text(record.reason)}" if record.reason else ""
    note = metrics_note(record)
    return f", but {line_text(note)}" if note else ""
