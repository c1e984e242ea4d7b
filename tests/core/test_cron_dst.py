"""Fire times around daylight-saving changes, checked instant by instant.

Rules (see spotcron.core.cron.schedule's docstring): a fixed-time job whose local time is skipped runs once at the
jump; one whose local time repeats runs once, on the first pass; a job with '*' leading its minute or
hour field follows the clock. Transition instants below are from the tz database on this machine
(identical in tzdata 2025b and 2026f):
  Europe/Berlin        2026-10-25 01:00Z back 03:00->02:00   2027-03-28 01:00Z forward 02:00->03:00
  America/New_York     2026-11-01 06:00Z back 02:00->01:00   2027-03-14 07:00Z forward 02:00->03:00
  Australia/Lord_Howe  2026-04-04 15:00Z back 02:00->01:30   2026-10-03 15:30Z forward 02:00->02:30
  Africa/Cairo         2026-04-23 22:00Z forward 00:00->01:00 (on the 24th)
                       2026-10-29 21:00Z back 24:00->23:00 (23:00-23:59 of the 29th happens twice)
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from spotcron.core.cron.describe import dst_notes
from spotcron.core.cron.schedule import CronSchedule, parse_schedule

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")
LORD_HOWE = ZoneInfo("Australia/Lord_Howe")
CAIRO = ZoneInfo("Africa/Cairo")
MINUTE = timedelta(minutes=1)


def at(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)


def fires(expression: str, tz: ZoneInfo, after: datetime, count: int) -> list[datetime]:
    return parse_schedule(expression).upcoming(after, tz, count)


def test_transition_instants_are_what_the_tests_assume():
    def offset(tz, instant):
        return instant.astimezone(tz).utcoffset()

    for tz, instant, before, after in [
        (BERLIN, at(2026, 10, 25, 1), 2, 1), (BERLIN, at(2027, 3, 28, 1), 1, 2),
        (NEW_YORK, at(2026, 11, 1, 6), -4, -5), (NEW_YORK, at(2027, 3, 14, 7), -5, -4),
        (LORD_HOWE, at(2026, 4, 4, 15), 11, 10.5), (LORD_HOWE, at(2026, 10, 3, 15, 30), 10.5, 11),
        (CAIRO, at(2026, 4, 23, 22), 2, 3), (CAIRO, at(2026, 10, 29, 21), 3, 2),
    ]:
        assert offset(tz, instant - timedelta(seconds=1)) == timedelta(hours=before), (tz, instant)
        assert offset(tz, instant) == timedelta(hours=after), (tz, instant)


# --- Europe/Berlin --------------------------------------------------------------------------------


def test_berlin_spring_forward_runs_skipped_job_once_at_the_jump():
    # 02:30 does not exist on 2027-03-28; the run happens at 03:00 CEST = 01:00 UTC.
    assert fires("30 2 * * *", BERLIN, at(2027, 3, 27), 3) == [
        at(2027, 3, 27, 1, 30), at(2027, 3, 28, 1), at(2027, 3, 29, 0, 30)]


def test_berlin_fall_back_runs_repeated_job_once():
    result = fires("30 2 * * *", BERLIN, at(2026, 10, 24), 3)
    assert result == [at(2026, 10, 24, 0, 30), at(2026, 10, 25, 0, 30), at(2026, 10, 26, 1, 30)]
    on_the_day = [r for r in result if r.astimezone(BERLIN).date().isoformat() == "2026-10-25"]
    assert len(on_the_day) == 1
    # Asking again after the first pass does not produce the second pass.
    assert parse_schedule("30 2 * * *").next_after(at(2026, 10, 25, 0, 30), BERLIN) == at(2026, 10, 26, 1, 30)
    assert parse_schedule("30 2 * * *").next_after(at(2026, 10, 25, 1, 10), BERLIN) == at(2026, 10, 26, 1, 30)


def test_berlin_fixed_job_with_two_minutes_in_repeated_hour():
    assert fires("0,30 2 * * *", BERLIN, at(2026, 10, 24, 12), 3) == [
        at(2026, 10, 25, 0), at(2026, 10, 25, 0, 30), at(2026, 10, 26, 1)]


def test_berlin_every_30_minutes_through_fall_back_keeps_real_cadence():
    # 01:30 CEST, 02:00 CEST, 02:30 CEST, 02:00 CET, 02:30 CET, 03:00 CET: every 30 real minutes.
    expected = [at(2026, 10, 24, 23, 30) + i * timedelta(minutes=30) for i in range(7)]
    assert fires("*/30 * * * *", BERLIN, at(2026, 10, 24, 23, 10), 7) == expected
    # From inside the first pass (02:40 CEST), the next run is 02:00 CET of the second pass.
    assert parse_schedule("*/30 * * * *").next_after(at(2026, 10, 25, 0, 40), BERLIN) == at(2026, 10, 25, 1)
    # From inside the second pass (02:10 CET).
    assert parse_schedule("*/30 * * * *").next_after(at(2026, 10, 25, 1, 10), BERLIN) == at(2026, 10, 25, 1, 30)


def test_berlin_every_30_minutes_through_spring_forward():
    # 01:30 CET is followed by 03:00 CEST: 30 real minutes, nothing lost, nothing doubled.
    assert fires("*/30 * * * *", BERLIN, at(2027, 3, 28, 0, 10), 3) == [
        at(2027, 3, 28, 0, 30), at(2027, 3, 28, 1), at(2027, 3, 28, 1, 30)]


def test_berlin_wildcard_job_inside_the_changing_hour():
    # '*/30 2 * * *' follows the clock: both passes in autumn, no run at all on the spring day.
    assert fires("*/30 2 * * *", BERLIN, at(2026, 10, 24, 12), 5) == [
        at(2026, 10, 25, 0), at(2026, 10, 25, 0, 30), at(2026, 10, 25, 1), at(2026, 10, 25, 1, 30),
        at(2026, 10, 26, 1)]
    assert fires("*/30 2 * * *", BERLIN, at(2027, 3, 27, 2), 1) == [at(2027, 3, 29, 0)]


def test_berlin_latest_at_or_before_across_fall_back():
    fixed, fixed45, wild = parse_schedule("30 2 * * *"), parse_schedule("45 2 * * *"), parse_schedule("*/30 * * * *")
    assert fixed.latest_at_or_before(at(2026, 10, 25, 1, 30), BERLIN) == at(2026, 10, 25, 0, 30)
    assert fixed.latest_at_or_before(at(2026, 10, 25, 1, 45), BERLIN) == at(2026, 10, 25, 0, 30)
    assert fixed.latest_at_or_before(at(2026, 10, 25, 0, 29), BERLIN) == at(2026, 10, 24, 0, 30)
    # At 02:10 CET (second pass) the latest 02:45 run was 02:45 CEST, a later wall time.
    assert fixed45.latest_at_or_before(at(2026, 10, 25, 1, 10), BERLIN) == at(2026, 10, 25, 0, 45)
    assert wild.latest_at_or_before(at(2026, 10, 25, 1, 10), BERLIN) == at(2026, 10, 25, 1)
    assert wild.latest_at_or_before(at(2026, 10, 25, 0, 59), BERLIN) == at(2026, 10, 25, 0, 30)


def test_berlin_latest_at_or_before_across_spring_forward():
    fixed = parse_schedule("30 2 * * *")
    assert fixed.latest_at_or_before(at(2027, 3, 28, 1), BERLIN) == at(2027, 3, 28, 1)
    assert fixed.latest_at_or_before(at(2027, 3, 28, 0, 59), BERLIN) == at(2027, 3, 27, 1, 30)
    assert fixed.latest_at_or_before(at(2027, 3, 29, 0, 29), BERLIN) == at(2027, 3, 28, 1)


# --- America/New_York -----------------------------------------------------------------------------


def test_new_york_spring_forward_and_fall_back():
    assert fires("30 2 * * *", NEW_YORK, at(2027, 3, 13), 3) == [
        at(2027, 3, 13, 7, 30), at(2027, 3, 14, 7), at(2027, 3, 15, 6, 30)]
    assert fires("30 1 * * *", NEW_YORK, at(2026, 10, 31), 3) == [
        at(2026, 10, 31, 5, 30), at(2026, 11, 1, 5, 30), at(2026, 11, 2, 6, 30)]


def test_new_york_every_four_hours_across_fall_back():
    # 00:00 EDT then 04:00 EST: five real hours apart on the long day.
    assert fires("0 */4 * * *", NEW_YORK, at(2026, 11, 1, 3), 3) == [
        at(2026, 11, 1, 4), at(2026, 11, 1, 9), at(2026, 11, 1, 13)]


def test_new_york_every_minute_in_repeated_hour_runs_120_times():
    result = fires("* 1 * * *", NEW_YORK, at(2026, 11, 1, 4, 59), 121)
    assert result[0] == at(2026, 11, 1, 5) and result[119] == at(2026, 11, 1, 6, 59)
    assert result[120] == at(2026, 11, 2, 6)


# --- Australia/Lord_Howe (30-minute shift) ------------------------------------------------------------


def test_lord_howe_fall_back_half_hour_runs_once():
    # 01:45 happens at +11 (14:45Z) and again at +10:30 (15:15Z); only the first runs.
    assert fires("45 1 * * *", LORD_HOWE, at(2026, 4, 3, 12), 3) == [
        at(2026, 4, 3, 14, 45), at(2026, 4, 4, 14, 45), at(2026, 4, 5, 15, 15)]


def test_lord_howe_spring_forward_half_hour_runs_at_the_jump():
    # 02:15 does not exist on 2026-10-04 (02:00 -> 02:30); it runs at 02:30 = 15:30Z.
    assert fires("15 2 * * *", LORD_HOWE, at(2026, 10, 2, 12), 3) == [
        at(2026, 10, 2, 15, 45), at(2026, 10, 3, 15, 30), at(2026, 10, 4, 15, 15)]


def test_lord_howe_every_15_minutes_through_fall_back():
    assert fires("*/15 * * * *", LORD_HOWE, at(2026, 4, 4, 14, 20), 5) == [
        at(2026, 4, 4, 14, 30), at(2026, 4, 4, 14, 45), at(2026, 4, 4, 15), at(2026, 4, 4, 15, 15),
        at(2026, 4, 4, 15, 30)]


# --- Africa/Cairo (changes at midnight) -------------------------------------------------------------


def test_cairo_spring_forward_at_midnight():
    # Midnight of 2026-04-24 does not exist; the job runs at 01:00 EEST = 22:00Z on the 23rd.
    assert fires("0 0 * * *", CAIRO, at(2026, 4, 22, 12), 3) == [
        at(2026, 4, 22, 22), at(2026, 4, 23, 22), at(2026, 4, 24, 21)]
    assert parse_schedule("0 0 * * *").latest_at_or_before(at(2026, 4, 23, 23), CAIRO) == at(2026, 4, 23, 22)


def test_cairo_spring_forward_respects_the_local_date():
    # A Friday-only midnight job: Friday 2026-04-24 has no midnight, it runs at the jump.
    assert fires("0 0 * * FRI", CAIRO, at(2026, 4, 20), 2) == [at(2026, 4, 23, 22), at(2026, 4, 30, 21)]


def test_cairo_fall_back_before_midnight_runs_once():
    assert fires("30 23 * * *", CAIRO, at(2026, 10, 28, 12), 3) == [
        at(2026, 10, 28, 20, 30), at(2026, 10, 29, 20, 30), at(2026, 10, 30, 21, 30)]
    assert fires("0 0 * * *", CAIRO, at(2026, 10, 29, 12), 2) == [at(2026, 10, 29, 22), at(2026, 10, 30, 22)]


# --- against a minute-by-minute reference ------------------------------------------------------------


def reference(schedule: CronSchedule, tz: ZoneInfo, start: datetime, end: datetime) -> list[datetime]:
    """Every fire in (start, end], by walking real minutes and applying the Vixie rules literally."""
    out: set[datetime] = set()
    u = start.replace(second=0, microsecond=0)
    previous = u.astimezone(tz).utcoffset()
    while u <= end:
        local = u.astimezone(tz)
        offset = local.utcoffset()
        if offset > previous and schedule.fixed_time:  # a jump forward happened at u
            wall = (u + previous).replace(tzinfo=None)
            while wall < (u + offset).replace(tzinfo=None):
                if schedule.matches(wall):
                    out.add(u)
                wall += MINUTE
        if schedule.matches(local) and not (schedule.fixed_time and local.fold == 1):
            out.add(u)
        previous, u = offset, u + MINUTE
    return sorted(f for f in out if start < f <= end)


SCHEDULES = ["30 2 * * *", "0,30 2 * * *", "*/30 * * * *", "* * * * *", "15 * * * *", "0 */4 * * *",
             "45 1 * * *", "0 0 * * *", "30 0 * * *", "59 23 * * *", "*/30 2 * * *", "0-59 2 * * *",
             "15,45 1,2 * * *", "0 0 * * 5", "10 23 * * *", "*/7 0-3 * * *", "5 1-3 * * *", "30 3 * * *"]
TRANSITIONS = [(BERLIN, at(2026, 10, 25, 1)), (BERLIN, at(2027, 3, 28, 1)), (NEW_YORK, at(2026, 11, 1, 6)),
               (NEW_YORK, at(2027, 3, 14, 7)), (LORD_HOWE, at(2026, 4, 4, 15)), (LORD_HOWE, at(2026, 10, 3, 15, 30)),
               (CAIRO, at(2026, 4, 23, 22)), (CAIRO, at(2026, 10, 29, 21)),
               (ZoneInfo("America/Santiago"), at(2026, 4, 5, 3)), (ZoneInfo("Pacific/Chatham"), at(2026, 9, 26, 14))]


@pytest.mark.parametrize(("tz", "transition"), TRANSITIONS, ids=lambda v: getattr(v, "key", str(v)))
def test_matches_minute_by_minute_reference(tz, transition):
    start, end = transition - timedelta(hours=5), transition + timedelta(hours=5)
    for expression in SCHEDULES:
        schedule = parse_schedule(expression)
        expected = reference(schedule, tz, start - timedelta(days=1), end)
        inside = [f for f in expected if f > start]
        assert schedule.upcoming(start, tz, len(inside))[: len(inside)] == inside, expression
        probe = start
        while probe < end:
            later = [f for f in expected if f > probe]
            if later and later[0] <= end:
                assert schedule.next_after(probe, tz) == later[0], (expression, probe)
            earlier = [f for f in expected if f <= probe]
            if earlier:
                assert schedule.latest_at_or_before(probe, tz) == earlier[-1], (expression, probe)
            probe += timedelta(minutes=7, seconds=13)


# --- dst_notes ------------------------------------------------------------------------------------


CAVEAT = ("Cloud Scheduler documents only that jobs at such times 'may observe execution anomalies'; "
          "these notes follow classic cron (Vixie/Debian) rules")


def test_dst_notes_berlin_fixed_job():
    assert dst_notes(parse_schedule("30 2 * * *"), BERLIN, at(2026, 9, 1)) == [
        "2026-10-25: Europe/Berlin clocks go back from 03:00 to 02:00; 02:30 happens twice and the job runs "
        "once, on the first pass (00:30 UTC), not again on the second pass",
        "2027-03-28: Europe/Berlin clocks jump forward from 02:00 to 03:00; 02:30 does not exist that day, so "
        "the job runs once right after the jump, at 03:00 (01:00 UTC)",
        CAVEAT,
        "This job runs between 00:00 and 04:00 Europe/Berlin time, when clocks usually change; Cloud Scheduler "
        "recommends UTC: consider time_zone: Etc/UTC with the hours shifted",
    ]


def test_dst_notes_berlin_wildcard_job():
    notes = dst_notes(parse_schedule("*/30 * * * *"), BERLIN, at(2026, 9, 1), days=100)
    assert notes[0] == ("2026-10-25: Europe/Berlin clocks go back from 03:00 to 02:00; the runs at 02:00 and "
                        "02:30 happen on both passes (the schedule has '*' in its minute or hour field, so it "
                        "keeps its real-time cadence)")
    assert notes[1] == CAVEAT
    assert len(notes) == 2  # the 2027 spring change is outside 100 days; every hour has runs: no hours to shift


def test_dst_notes_wildcard_spring_forward_lists_many_runs_briefly():
    notes = dst_notes(parse_schedule("* * * * *"), NEW_YORK, at(2027, 1, 1), days=90)
    assert notes[0] == ("2027-03-14: America/New_York clocks jump forward from 02:00 to 03:00; the runs at "
                        "02:00, 02:01 ... 02:59 (60 runs) are skipped that day (the schedule has '*' in its "
                        "minute or hour field, so it follows the new clock and nothing is made up)")


def test_dst_notes_cairo_midnight_changes():
    assert dst_notes(parse_schedule("30 23 * * *"), CAIRO, at(2026, 1, 1), days=365) == [
        "2026-10-29: Africa/Cairo clocks go back from 24:00 to 23:00; 23:30 happens twice and the job runs "
        "once, on the first pass (20:30 UTC), not again on the second pass",
        CAVEAT,
    ]
    notes = dst_notes(parse_schedule("0 0 * * *"), CAIRO, at(2026, 1, 1), days=365)
    assert notes[0] == ("2026-04-24: Africa/Cairo clocks jump forward from 00:00 to 01:00; 00:00 does not exist "
                        "that day, so the job runs once right after the jump, at 01:00 (22:00 UTC)")


def test_dst_notes_lord_howe_half_hour():
    notes = dst_notes(parse_schedule("15 2 * * *"), LORD_HOWE, at(2026, 6, 1), days=180)
    assert notes[0] == ("2026-10-04: Australia/Lord_Howe clocks jump forward from 02:00 to 02:30; 02:15 does not "
                        "exist that day, so the job runs once right after the jump, at 02:30 (15:30 UTC)")


def test_dst_notes_quiet_when_the_job_avoids_the_changes():
    assert dst_notes(parse_schedule("0 12 * * *"), BERLIN, at(2026, 1, 1)) == []
    assert dst_notes(parse_schedule("0 12 * * *"), ZoneInfo("Asia/Tokyo"), at(2026, 1, 1)) == []


def test_dst_notes_recommend_utc_for_early_local_jobs_even_without_dst():
    assert dst_notes(parse_schedule("0 3 * * *"), ZoneInfo("Asia/Tokyo"), at(2026, 1, 1)) == [
        "This job runs between 00:00 and 04:00 Asia/Tokyo time, when clocks usually change; Cloud Scheduler "
        "recommends UTC: consider time_zone: Etc/UTC with the hours shifted"]


def test_no_hours_to_shift_for_a_job_that_runs_every_hour():
    """The 00:00-04:00 advice is about moving a job's hours; a job that runs every hour has none to move."""
    for expression in ("* * * * *", "*/5 * * * *", "0 * * * *"):
        for zone in (ZoneInfo("Asia/Tokyo"), BERLIN):
            assert not [n for n in dst_notes(parse_schedule(expression), zone, at(2026, 1, 1))
                        if "00:00 and 04:00" in n], (expression, zone)
    assert any("00:00 and 04:00" in n for n in dst_notes(parse_schedule("0 */2 * * *"), BERLIN, at(2026, 1, 1)))
