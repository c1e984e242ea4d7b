"""python -m spotcron.testing.simulation --days 30 --jobs 60 --seed 7 (what `make reliability` runs, with
--reliability-map tests/RELIABILITY.md)."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path

from spotcron.testing.simulation import SimConfig, reliability_coverage, simulate


def _date(value: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a date like 2026-10-20 or 2026-10-20T06:00") from None
    return parsed.replace(tzinfo=parsed.tzinfo or UTC)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spotcron.testing.simulation",
                                     description="A seeded fault simulation of the run engine; exit 1 when an "
                                                 "invariant fails.")
    parser.add_argument("--days", type=float, default=30.0, help="simulated days of scheduler ticks (default 30)")
    parser.add_argument("--jobs", type=int, default=60, help="how many jobs (default 60)")
    parser.add_argument("--seed", type=int, default=7, help="random seed (default 7)")
    parser.add_argument("--start", type=_date, default=SimConfig().start,
                        help="first simulated instant, UTC unless it says otherwise (default 2026-10-20)")
    parser.add_argument("--drain-hours", type=float, default=SimConfig().drain_hours,
                        help="hours without new ticks at the end, for retries and sweeps to settle (default 12)")
    parser.add_argument("--vm-hours-per-day", type=float, default=SimConfig().vm_hours_per_day, metavar="H",
                        help="the stack's max_vm_hours_per_day (default: no limit to speak of)")
    parser.add_argument("--deploy-every-hours", type=float, default=SimConfig().deploy_every_h, metavar="H",
                        help="pause, resume, redeploy or put back a random job this often (default: never)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument("--reliability-map", type=Path, metavar="PATH",
                        help="the table of reliability situations and their tests (tests/RELIABILITY.md); "
                             "the report says how many of its rows name a test")
    args = parser.parse_args(argv)
    if args.days <= 0 or args.jobs < 1:
        parser.error("--days must be above 0 and --jobs at least 1")
    if args.reliability_map is not None and not args.reliability_map.is_file():
        parser.error(f"--reliability-map {args.reliability_map}: no such file")

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    config = SimConfig(days=args.days, jobs=args.jobs, seed=args.seed, start=args.start,
                       drain_hours=args.drain_hours, vm_hours_per_day=args.vm_hours_per_day,
                       deploy_every_h=args.deploy_every_hours)
    report = simulate(config, None if args.quiet else progress)
    if args.reliability_map is not None:
        report.coverage = reliability_coverage(args.reliability_map)
    print("\n".join(report.lines()))
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
