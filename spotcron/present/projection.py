"""`spotcron cost` for people: the month's projection as table rows (a row per job, its matrix
configurations under it, the stack's overheads and total) and the sentences under the table.

Projections in, strings out; the command lays the rows out with `tables.print_table` and prints
the sentences. Dollars here keep the figures `spotcron cost` has always printed (three decimals in
the table, cents in the sentences), not `views.format_usd`: a projection is a sum to compare, not
one run's price.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spotcron.core.durations import format_duration
from spotcron.cost.projection import MONTHLY_ITEMS, run_log_month
from spotcron.present.tables import Columns

if TYPE_CHECKING:
    from spotcron.cost.prices import PriceTable
    from spotcron.cost.projection import StackProjection

# GPUs (and a job's external IPv4 addresses) count under compute here; --json splits them.
ITEMS = tuple(k for k in MONTHLY_ITEMS if k != "gpu")
VM_ITEMS = frozenset({"compute", "disk"})
HEADERS = {"scheduler": "sched", "functions": "fns", "storage": "store"}
# ticks: the schedule's fires a month; VMs: the runs they start (each tick starts a VM per matrix
# entry and repeat), which is what compute and disk are billed for.
NAMES = ("job", "ticks", "VMs", "VM/run", *(HEADERS.get(k, k) for k in ITEMS), "total", "classic")
# A narrow terminal drops whole columns (the itemised ones first); no figure is ever cut.
COLUMNS = Columns(NAMES, ("store", "fns", "disk", "sched", "VM/run", "compute", "classic", "ticks", "VMs"),
                  frozenset(NAMES[1:]))


def stack_title(table: PriceTable, region: str) -> str:
    return f"USD per 30-day month; prices {table.name} ({table.as_of}), {region}"


def stack_rows(stack: StackProjection) -> list[tuple[str, ...]]:
    """A row per job (and per matrix configuration under it), per overhead, and the stack's total
    last; cells in COLUMNS' order."""
    rows: list[tuple[str, ...]] = []
    for job in stack.jobs:
        # A matrix job's configurations each have their own VM time: a row each, under the job's.
        per_config = {v.variant: format_duration(v.vm_seconds) for v in job.variants if v.variant}
        # A VM the table cannot price shows `-` where its figures would be (a note says why).
        whole = not per_config and bool(job.unpriced)
        rows.append((job.job, _count(job.runs_per_month), _count(job.vms_per_month),
                     "" if per_config else format_duration(job.variants[0].vm_seconds) if job.variants else "",
                     *("-" if whole and k in VM_ITEMS else _usd(_item(job.items, k)) for k in ITEMS),
                     _usd(job.monthly_usd), _usd(job.classic_monthly_usd)))
        rows += [(f"  {name}", "", "", seconds, *("-" if name in job.unpriced and k in VM_ITEMS else "" for k in ITEMS),
                  "-" if name in job.unpriced else "", "") for name, seconds in per_config.items()]
    for part, part_items in stack.overhead.items():
        rows.append((f"({part})", "", "", "", *(_usd(_item(part_items, k)) for k in ITEMS),
                     _usd(sum(part_items.values())), ""))
    totals = stack.items()
    rows.append(("stack", "", "", "", *(_usd(_item(totals, k)) for k in ITEMS), _usd(stack.monthly_usd),
                 _usd(stack.classic_monthly_usd)))
    return rows


def _count(per_month: float) -> str:
    return f"{per_month:.1f}" if per_month < 100 else f"{per_month:.0f}"


def stack_notes(stack: StackProjection, table: PriceTable, basis: tuple[str, str, bool] | None = None,
                other: StackProjection | None = None) -> list[str]:
    """The sentences under the table: where VM time came from, the month after free tiers (and in the
    other scheduling mode), the classic design, and how indicative the prices are."""
    lines = []
    several = [j for j in stack.jobs if len(j.variants) > 1]
    if several:
        lines.append("ticks: how often a job's schedule fires a month; VMs: the runs those ticks start, each on its "
                     "own VM (" + ", ".join(f"{j.job} {len(j.variants)} a tick" for j in several) + ")")
    if basis is not None:
        lines.append(basis_line(stack, *basis))
    items = stack.items()
    if items["gpu"] > 0:
        lines.append(f"compute includes GPUs: {items['gpu']:.3f}")
    if items.get("external_ip", 0.0) > 0:
        lines.append(f"compute includes external IPv4 addresses: {items['external_ip']:.3f}")
    lines += unpriced_lines(stack)
    lines.append(f"After one billing account's free tiers (3 scheduler jobs, function calls): "
                 f"${stack.monthly_after_free_tier_usd:.2f}/month with scheduling: {stack.scheduling}.")
    if other is not None:
        lines.append(f"With scheduling: {other.scheduling} it would be ${other.monthly_after_free_tier_usd:.2f}/month "
                     f"after free tiers ({scheduling_note(other.scheduling)}).")
    lines.append(f"Classic design (a stopped VM whose disk bills all month, start and stop rules): "
                 f"${stack.classic_monthly_usd:.2f}/month.")
    lines.append(f"Prices are indicative ({table.name}, as of {table.as_of}): see docs/cost.md; "
                 f"override them with --prices FILE.")
    logging = run_log_month(sum(j.vms_per_month for j in stack.jobs))
    lines.append(f"Cloud Logging: one entry per run end, about {logging.entries:,.0f} a month, at most "
                 f"{logging.gib * 1024:.1f} MiB: ${logging.usd:.2f}/month (the first 50 GiB of a project's logs "
                 f"each month are free; docs/results.md).")
    lines.append("The results page's \"projected for the month\" extrapolates recent runs instead; docs/cost.md, "
                 "\"The results page's month and spotcron cost\", says why the two differ.")
    return lines


def basis_line(stack: StackProjection, source: str, runtime: str, explicit: bool = False) -> str:
    """Which VM time per run each configuration's price comes from: recorded runs, or the assumption."""
    parts = []
    for job in stack.jobs:
        for variant in job.variants:
            name = f"{job.job}/{variant.variant}" if variant.variant else job.job
            if variant.basis != "runtime":
                said = f"{variant.basis} in {source}"
            elif explicit:
                said = f"as given (--runtime {runtime})"
            else:
                said = f"assumed (--runtime {runtime}; no runs recorded)"
            parts.append(f"{name} {format_duration(variant.vm_seconds)}, {said}")
    return "VM time per run: " + "; ".join(dict.fromkeys(parts)) + "."  # repeats: one VM each, said once


def unpriced_lines(stack: StackProjection) -> list[str]:
    """A line per VM the price table cannot price: its figures are `-`, left out of every total."""
    lines = []
    for job in stack.jobs:
        for name, why in job.unpriced.items():
            label = job.job if name == job.job else f"{job.job}/{name}"
            lines.append(f"{label}: not priced, left out of the totals: {why}")
    return lines


def scheduling_note(mode: str) -> str:
    if mode == "shared":
        return "one scheduler entry and a dispatcher every minute; set scheduling: shared in the stack file"
    return "a scheduler entry per job; set scheduling: per-job in the stack file"


def _item(items: dict[str, float], key: str) -> float:
    if key == "compute":
        return items[key] + items["gpu"] + items.get("external_ip", 0.0)
    return items[key]


def _usd(value: float) -> str:
    return f"{value:.3f}"

