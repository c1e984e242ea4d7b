"""`python -m bench`: run every bench in order, one table per section, then a summary.

    python -m bench                  # the full run (a few minutes on 2 cores)
    python -m bench --quick          # small sizes: a smoke run of every section
    python -m bench --only scale     # one bench (or one part: scale-sweep, scale-deploy, scale-local)
    python -m bench --json out.json --markdown out.md
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from bench import Section, fmt, fmt_ratio, machine_line


def _cost(quick: bool) -> Section:
    from bench import cost_bench

    return cost_bench.run(quick)


def _placement(quick: bool) -> Section:
    from bench import placement_bench

    return placement_bench.run(quick)


def _overhead(quick: bool) -> Section:
    from bench import overhead_bench

    return overhead_bench.run(quick)


def _coldstart(quick: bool) -> Section:
    from bench import coldstart_bench

    return coldstart_bench.run(quick)


def _report(quick: bool) -> Section:
    from bench import report_bench

    return report_bench.run(quick)


def _dl(quick: bool) -> Section:
    from bench import dl_bench

    return dl_bench.run(quick)


def _uploads(quick: bool) -> Section:
    from bench import upload_bench

    return upload_bench.run(quick)


def _storage(quick: bool) -> Section:
    from bench import storage_bench

    return storage_bench.run(quick)


def _scale(part: str) -> Callable[[bool], Section]:
    def run(quick: bool) -> Section:
        from bench import scale_bench

        return scale_bench.PARTS[part](quick)

    return run


# Cheap and deterministic first; the local-mode benches, which load the machine, last.
BENCHES: dict[str, tuple[str, Callable[[bool], Section]]] = {
    "cost": ("Cost", _cost),
    "coldstart": ("Cold start", _coldstart),
    "placement": ("Placement", _placement),
    "overhead": ("Billed overhead", _overhead),
    "report": ("Report statistics", _report),
    "dl": ("Example training benchmark", _dl),
    "uploads": ("Uploads", _uploads),
    "storage": ("Local storage server", _storage),
    "scale-sweep": ("Scale (a): sweep", _scale("scale-sweep")),
    "scale-deploy": ("Scale (b): deploy", _scale("scale-deploy")),
    "scale-local": ("Scale (c): local burst", _scale("scale-local")),
}


def selected(only: str | None) -> list[str]:
    if not only:
        return list(BENCHES)
    keys = [k for k in BENCHES if k == only or k.startswith(only + "-")]
    if not keys:
        raise SystemExit(f"--only {only!r}: no such bench; choose one of {', '.join(BENCHES)} (or 'scale')")
    return keys


def run_one(key: str, quick: bool) -> Section:
    title, bench = BENCHES[key]
    started = time.perf_counter()
    try:
        section = bench(quick)
    except Exception as exc:  # noqa: BLE001 - one broken bench must not hide the others' figures
        section = Section(key, title, baseline="")
        section.unavailable = f"failed: {type(exc).__name__}: {exc}"
        section.notes.append(traceback.format_exc(limit=4))
    section.seconds = section.seconds or time.perf_counter() - started
    return section


def render(section: Section, console) -> None:
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    if section.unavailable:
        console.print(f"[bold]{escape(section.title)}[/bold]\n  {escape(section.unavailable)}\n")
        for note in section.notes:
            console.print(f"  [dim]{escape(note)}[/dim]")
        return
    table = Table(title=escape(section.title), box=box.SIMPLE_HEAD, title_justify="left")
    table.add_column("figure", overflow="fold")
    table.add_column("spotcron", justify="right", no_wrap=True)
    table.add_column("baseline", justify="right", no_wrap=True)
    table.add_column("ratio", justify="right", no_wrap=True)
    for figure in section.figures:
        name = escape(figure.name) + (f" [dim](baseline: {escape(figure.baseline_label)})[/dim]"
                                      if figure.baseline_label else "")
        if figure.better == "higher":
            name += " [dim](higher is better)[/dim]"
        table.add_row(name, fmt(figure.spotcron, figure.unit), fmt(figure.baseline, figure.unit), fmt_ratio(figure))
    console.print(table)
    console.print(f"  baseline: {escape(section.baseline)}")
    for note in section.notes:
        console.print(f"  [dim]- {escape(note)}[/dim]")
    console.print(f"  [dim]({section.seconds:.1f} s)[/dim]\n")


def render_summary(sections: list[Section], total_s: float, console) -> None:
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    table = Table(title="Summary: the first figure of each section", box=box.SIMPLE_HEAD, title_justify="left")
    table.add_column("section")
    table.add_column("figure", overflow="fold")
    table.add_column("ratio", justify="right")
    table.add_column("seconds", justify="right")
    for section in sections:
        if section.unavailable or not section.figures:
            table.add_row(section.key, escape(section.unavailable or "no figures"), "", f"{section.seconds:.1f}")
            continue
        first = section.figures[0]
        table.add_row(section.key, escape(first.name), fmt_ratio(first), f"{section.seconds:.1f}")
    console.print(table)
    console.print(f"ratio = spotcron / baseline. Total {total_s:.1f} s on {machine_line()}.")


def markdown(sections: list[Section], total_s: float, quick: bool) -> str:
    lines = [f"Taken on {machine_line()}; {'--quick' if quick else 'full'} run, {total_s:.0f} s in all.", ""]
    for section in sections:
        lines += [f"### {section.title}", ""]
        if section.unavailable:
            lines += [section.unavailable, ""]
            continue
        lines += [f"Baseline: {section.baseline}.", "", "| figure | spotcron | baseline | ratio |",
                  "|---|---:|---:|---:|"]
        for f in section.figures:
            name = f.name.strip() + (f" (baseline: {f.baseline_label})" if f.baseline_label else "")
            name += " (higher is better)" if f.better == "higher" else ""
            lines.append(f"| {name} | {fmt(f.spotcron, f.unit)} | {fmt(f.baseline, f.unit)} | {fmt_ratio(f)} |")
        lines.append("")
        lines += [f"- {note}" for note in section.notes if "Traceback" not in note]
        lines.append("")
    return "\n".join(lines)


def quiet_logs() -> None:
    # The local stack's HTTP servers log every request; the figures are what a reader wants here.
    for name in ("werkzeug", "spotcron.local.storage", "urllib3"):
        logging.getLogger(name).setLevel(logging.WARNING)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run of every section")
    parser.add_argument("--only", metavar="NAME", help=f"run one bench: {', '.join(BENCHES)} or 'scale'")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the figures as JSON")
    parser.add_argument("--markdown", type=Path, metavar="FILE", help="also write the tables as Markdown")
    args = parser.parse_args(argv)
    keys = selected(args.only)

    from rich.console import Console

    console = Console(width=None if sys.stdout.isatty() else 130)
    quiet_logs()
    console.print(f"spotcron bench{' --quick' if args.quick else ''} on {machine_line()}\n")
    started = time.perf_counter()
    sections = []
    for key in keys:
        section = run_one(key, args.quick)
        sections.append(section)
        render(section, console)
    total = time.perf_counter() - started
    render_summary(sections, total, console)
    if args.json:
        args.json.write_text(json.dumps({"quick": args.quick, "machine": machine_line(), "seconds": round(total, 1),
                                         "sections": [s.to_json() for s in sections]}, indent=2))
    if args.markdown:
        args.markdown.write_text(markdown(sections, total, args.quick))
    failed = [s.key for s in sections if s.unavailable and s.unavailable.startswith("failed")]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
