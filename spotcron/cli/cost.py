"""`spotcron cost`: what the jobs will cost a month, itemised, beside the classic design.

Also holds the options `report` shares with it (--prices, --region); both read run records from a
folder laid out like the bucket with spotcron.present.records.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from spotcron.cli._common import console, given, jobs_option, load_specs, load_stack, stack_option

if TYPE_CHECKING:
    from spotcron.core.runs import RunRecord
    from spotcron.cost.prices import PriceTable
    from spotcron.cost.projection import StackProjection

PRICES_ENV = "SPOTCRON_PRICES"


def prices_option(function: Any) -> Any:
    return click.option(
        "--prices", envvar=PRICES_ENV, show_envvar=True, default=None,
        help="A price table (gcp-2026-11, recipe-2018) or a YAML file merged over one; default gcp-2026-11.",
    )(function)


def region_option(function: Any) -> Any:
    return click.option("--region", default=None, help="Price region; default: the stack's region.")(function)


def history_option(function: Any) -> Any:
    return click.option(
        "--history", "history_dir", type=click.Path(path_type=Path, exists=True, file_okay=False), default=None,
        help="A folder of run records laid out like the bucket (runs/JOB/RUN/run.json), e.g. a copy of it.",
    )(function)


def load_table(prices: str | None) -> PriceTable:
    from spotcron.cost.prices import load_prices

    return load_prices(prices)


@click.command("cost")
@click.argument("names", nargs=-1, metavar="[JOB...]")
@jobs_option
@stack_option
@click.option("--runtime", default="5m", show_default=True,
              help="VM time per run (boot to delete), e.g. 90s, 2m, 1h. Given, it prices every run and no "
                   "run records are read; by default it stands in where the history has no runs.")
@history_option
@click.option("--bucket", metavar="gs://NAME", default=None,
              help="Take each job's VM time per run from the run records of a deployed stack's bucket.")
@click.option("--state-dir", type=click.Path(path_type=Path, file_okay=False), default=".spotcron",
              envvar="SPOTCRON_STATE_DIR", show_default=True, show_envvar=True,
              help="Without --history or --bucket: the local bucket whose run records give VM time per run.")
@prices_option
@region_option
@click.option("--scheduling", type=click.Choice(["per-job", "shared"]), default=None,
              help="Price this scheduling mode: a scheduler entry per job, or one shared entry and the "
                   "dispatcher; default: the stack file's `scheduling`.")
@click.option("--advice", "advice_path", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="A Spot advice object (advice/spot.json) to project placement with; default: the one in "
                   "--bucket or the local bucket, when there is one.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list, one object per job.")
def cost(names: tuple[str, ...], jobs_dir: Path, stack_path: Path, runtime: str, history_dir: Path | None,
         bucket: str | None, state_dir: Path, prices: str | None, region: str | None, scheduling: str | None,
         advice_path: Path | None, as_json: bool) -> None:
    """Projected monthly cost of each job and of the stack, itemised.

    Counts runs from each job's schedule (averaged over a year, 30-day months), takes each
    configuration's VM time per run from its recorded runs (the median of the newest 20, from
    --history, --bucket, or else the local bucket) or, without any, from --runtime, and says
    which it used; prices every run's VM per second with the one-minute minimum, and adds disk, scheduler, functions and
    storage. Beside it: the classic design (a stopped VM with its disk kept all month, two
    scheduler rules per job). --scheduling prices either scheduling mode (a scheduler entry per
    job, or one shared entry and the dispatcher); the other mode's total is shown too. Prices are
    indicative; see docs/cost.md.
    """
    from datetime import UTC, datetime

    from spotcron.core.durations import parse_duration
    from spotcron.core.errors import SpotcronError
    from spotcron.cost.projection import fire_minutes_per_month, project_jobs, project_stack

    try:
        runtime_s = parse_duration(runtime)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--runtime") from None
    settings = load_stack(stack_path)
    specs = load_specs([jobs_dir], stack_path)
    if names:
        known = {s.name: s for s in specs}
        missing = [n for n in names if n not in known]
        if missing:
            raise SpotcronError(f"no job named {', '.join(map(repr, missing))} in {jobs_dir}/; "
                                f"jobs there: {', '.join(known) or 'none'}")
        specs = [known[n] for n in names]
    table = load_table(prices)
    explicit = given("runtime")  # what the user asked for, never overridden by recorded runs
    if explicit and history_dir:
        raise SpotcronError("--history and --runtime both give the VM time per run: leave one out")
    records, source, stored_advice = _from_bucket(history_dir, bucket, state_dir, records=not explicit,
                                                  advice=advice_path is None)
    mode = scheduling or settings.scheduling
    now = datetime.now(UTC)

    # Each job is projected once; the two scheduling modes differ only in what the jobs share.
    jobs = project_jobs(specs, table=table, region=region or settings.region, now=now, runtime_s=runtime_s,
                        records=records, retention_days=settings.results_retention_days)

    def project(mode: str) -> StackProjection:
        minutes = fire_minutes_per_month(specs, now) if mode == "shared" else None
        return project_stack(jobs, table=table, sweep_interval_s=settings.sweep_interval, scheduling=mode,
                             fire_minutes=minutes)

    stack = project(mode)
    if as_json:
        click.echo(json.dumps([job.to_json() for job in stack.jobs], indent=2))
        return
    other = project("shared" if mode == "per-job" else "per-job")
    print_stack(stack, table, region or settings.region, basis=(source, runtime, explicit), other=other)
    advice = _advice_file(advice_path) if advice_path is not None else stored_advice
    print_placement(stack, specs, settings, table, advice, now)
    print_secrets_and_egress(stack, specs, settings.project)


def print_secrets_and_egress(stack: StackProjection, specs: list[Any], project: str) -> None:
    """Secret Manager's versions and accesses, and each internet job's egress, with their sources."""
    from spotcron.cost.network_secrets import (
        FREE_ACCESSES,
        FREE_VERSIONS,
        NAT_ADDRESS_HOUR,
        NAT_GIB,
        NAT_SOURCE,
        SECRETS_SOURCE,
        egress_months,
        secrets_month,
    )

    out = console()
    runs = {job.job: job.runs_per_month for job in stack.jobs}
    month = secrets_month(specs, runs, project)
    if month.versions:
        out.print(f"Secret Manager: {month.versions} active version{'s' if month.versions != 1 else ''} (one per "
                  f"secret; `spotcron secrets set --destroy-older` keeps it so) and {month.accesses:,.0f} accesses a "
                  f"month (one per secret per run): ${month.usd:.2f}/month, ${month.usd_after_free:.2f} after the "
                  f"free {FREE_VERSIONS} versions and {FREE_ACCESSES:,} accesses. Source: {SECRETS_SOURCE}.",
                  markup=False, highlight=False)
    hours = {job.job: job.runs_per_month * sum(v.vm_seconds for v in job.variants) / 3600 for job in stack.jobs}
    addresses = {job.job: job.items.get("external_ip", 0.0) for job in stack.jobs}
    for egress in egress_months(specs, hours, addresses):
        out.print(f"Egress of {egress.job} (internet: true): an external IPv4 address per run, "
                  f"${egress.external_ip_usd:.3f}/month (the external_ip item above); through a Cloud NAT instead: "
                  f"${egress.nat_usd:.3f}/month for its VM-hours, plus ${NAT_ADDRESS_HOUR * 720:.2f}/month for the "
                  f"gateway's address and ${NAT_GIB}/GiB processed. Source: {NAT_SOURCE}.", markup=False,
                  highlight=False)


def _advice_file(path: Path) -> Any:
    """The Spot advice object given with --advice."""
    from spotcron.core.errors import SpotcronError
    from spotcron.core.zone_advice import Advice

    try:
        return Advice.from_json(path.read_bytes())
    except OSError as exc:
        raise SpotcronError(f"--advice {path}: cannot read it ({exc.strerror}); give an advice/spot.json "
                            f"copied from the stack's bucket") from None
    except ValueError as exc:
        raise SpotcronError(f"--advice {path}: not a Spot advice object ({str(exc).splitlines()[0]})") from None


def print_placement(stack: StackProjection, specs: list[Any], settings: Any, table: PriceTable, advice: Any,
                    now: Any) -> None:
    """Each placed job's month of VM compute and transfer, with placement and in the fixed order."""
    from spotcron.engine.placement import placement_applies, project_placement

    placed = [s for s in specs if any(placement_applies(v, settings) for v in s.variants())]
    if not placed:
        return
    out = console()
    if advice is None:
        out.print("Placement is on, but no Spot advice is at hand (the sweep writes advice/spot.json; or give "
                  "--advice FILE): runs use the fixed zone order until it is there.")
        return
    seconds = {job.job: max(v.vm_seconds for v in job.variants) for job in stack.jobs}
    runs = {job.job: job.runs_per_month for job in stack.jobs}
    lines = []
    for spec in placed:
        month = project_placement(spec, settings, advice=advice, table=table, now=now,
                                  runs_per_month=runs.get(spec.name, 0.0), vm_seconds=seconds.get(spec.name, 0.0))
        if month is None:
            lines.append(f"{spec.name}: the advice does not let placement choose (stale, or no zone priced)")
            continue
        lines.append(f"{spec.name}: ${month.with_usd:.3f}/month placed ({month.zone}) vs ${month.without_usd:.3f} "
                     f"in {month.fixed_zone}")
    out.print(f"Placement under the Spot advice of {advice.fetched_at:%Y-%m-%d %H:%M} UTC (VM compute, expected "
              f"preemptions and data transfer; the rest of the bill is the same): " + "; ".join(lines) + ".")


def _from_bucket(history_dir: Path | None, bucket: str | None, state_dir: Path, *, records: bool,
                 advice: bool) -> tuple[list[RunRecord], str, Any]:
    """The run records that give VM time per run, where they came from (said on screen), and the
    stack's Spot advice: from --history, and --bucket or else the local bucket, opened once."""
    from spotcron.cli._bucket import describe, open_store
    from spotcron.core import layout
    from spotcron.core.zone_advice import Advice
    from spotcron.present.records import read_records

    found = read_records(history_dir) if history_dir and records else []
    source = str(history_dir) if history_dir and records else ""
    local = (state_dir / "bucket").is_dir()
    need_records = records and (bool(bucket) or not history_dir and local)
    need_advice = advice and (bool(bucket) or local)
    stored = None
    if need_records or need_advice:
        with open_store(bucket, state_dir) as store:
            if need_records:
                found += [r for job in store.jobs() for r in store.records(job)]
                source = " and ".join(filter(None, (source, describe(bucket, state_dir))))
            blob = store.blobs.read(layout.ADVICE) if need_advice else None
        try:
            stored = Advice.from_json(blob.data) if blob is not None else None
        except ValueError:
            stored = None
    return found, source, stored


def print_stack(stack: StackProjection, table: PriceTable, region: str,
                basis: tuple[str, str, bool] | None = None, other: StackProjection | None = None) -> None:
    from rich import box

    from spotcron.present.projection import COLUMNS, stack_notes, stack_rows, stack_title
    from spotcron.present.tables import print_table

    rows = stack_rows(stack)
    out = console()
    print_table(out, COLUMNS, rows, title=stack_title(table, region), styles=[{"total": "bold"}] * len(rows),
                sections=frozenset({len(rows) - 1}), box=box.SIMPLE_HEAD, hint="--json has every item")
    for line in stack_notes(stack, table, basis, other):
        out.print(line, markup=False, soft_wrap=not out.is_terminal)  # a file or a log wraps its own


COMMANDS = [cost]
