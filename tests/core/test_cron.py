"""Parsing, day rules, previews and descriptions of Cloud Scheduler cron schedules (no DST here)."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from spotcron.core.cron.describe import describe, dst_notes
from spotcron.core.cron.schedule import CronSchedule, load_time_zone, parse_schedule
from spotcron.core.errors import CronError

UTC_ZONE = ZoneInfo("Etc/UTC")


def at(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)


def fires(expression: str, after: datetime, count: int, tz: ZoneInfo = UTC_ZONE) -> list[datetime]:
    return parse_schedule(expression).upcoming(after, tz, count)


# --- accepted syntax ----------------------------------------------------------------------------


def test_fields_expand_to_sets():
    s = parse_schedule("0,30 9-17/4 1,15 JAN-MAR mon-fri")
    assert s.minutes == {0, 30}
    assert s.hours == {9, 13, 17}
    assert s.days == {1, 15}
    assert s.months == {1, 2, 3}
    assert s.weekdays == {1, 2, 3, 4, 5}
    assert s.dom_restricted and s.dow_restricted
    assert s.fixed_time


def test_expression_is_canonical_for_deploy():
    assert parse_schedule("  0  9 * jan-mar  mon-FRI ").expression == "0 9 * JAN-MAR MON-FRI"


def test_star_and_steps():
    s = parse_schedule("*/15 */6 */10 */3 *")
    assert s.minutes == {0, 15, 30, 45}
    assert s.hours == {0, 6, 12, 18}
    assert s.days == {1, 11, 21, 31}
    assert s.months == {1, 4, 7, 10}
    assert s.weekdays == set(range(7))
    assert not s.dom_restricted and not s.dow_restricted
    assert not s.fixed_time


def test_range_with_step_and_leading_zeros():
    s = parse_schedule("05 07 1-30/5 * *")
    assert s.minutes == {5}
    assert s.hours == {7}
    assert s.days == {1, 6, 11, 16, 21, 26}


@pytest.mark.parametrize("dow", ["0", "7", "SUN", "sun", "Sun"])
def test_zero_and_seven_are_both_sunday(dow):
    s = parse_schedule(f"0 12 * * {dow}")
    assert s.weekdays == {0}
    # 2026-03-01 is a Sunday.
    assert s.upcoming(at(2026, 2, 27), UTC_ZONE, 2) == [at(2026, 3, 1, 12), at(2026, 3, 8, 12)]


def test_range_ending_in_seven_wraps_to_sunday():
    assert parse_schedule("0 12 * * 5-7").weekdays == {5, 6, 0}
    assert parse_schedule("0 12 * * 0-7").weekdays == set(range(7))


def test_fixed_time_follows_vixie_star_rule():
    assert parse_schedule("30 2 * * *").fixed_time
    assert parse_schedule("0-59 2 * * *").fixed_time
    assert not parse_schedule("*/30 2 * * *").fixed_time
    assert not parse_schedule("0 */4 * * *").fixed_time
    assert not parse_schedule("* * * * *").fixed_time


# --- rejected syntax ----------------------------------------------------------------------------

REJECTED = [
    ("0 0 9 * * *", ["has 6 fields", "no seconds or year field", "'0' seconds"]),
    ("0 9 * * * 2027", ["has 6 fields", "'2027' a year"]),
    ("0 9 * *", ["has 4 fields", "minute hour day-of-month month day-of-week"]),
    ("*", ["has 1 field;", "needs exactly five fields"]),
    ("", ["schedule is empty"]),
    ("   ", ["schedule is empty"]),
    ("0 0 L * *", ["'L' uses 'L' (last day)", "not support"]),
    ("0 0 LW * *", ["'LW' uses 'L' (last day)"]),
    ("0 0 * * 5L", ["day-of-week field '5L'", "'L' (last day)"]),
    ("0 0 15W * *", ["'15W' uses 'W' (nearest weekday)"]),
    ("0 0 * * MON#1", ["'MON#1' uses '#' (nth weekday"]),
    ("0 0 ? * MON", ["'?' uses '?'", "use '*'"]),
    ("@every 5m", ["'@every' macros are not part", "five fields"]),
    ("@reboot", ["'@reboot' macros are not part"]),
    ("@hourly", ["'@hourly' macros", "write '0 * * * *' instead"]),
    ("@daily", ["write '0 0 * * *' instead"]),
    ("@weekly", ["write '0 0 * * 0' instead"]),
    ("TZ=Europe/Berlin 0 9 * * *", ["TZ= prefix is not accepted", "put the zone in time_zone: Europe/Berlin"]),
    ("CRON_TZ=America/New_York 0 9 * * *", ["CRON_TZ= prefix", "time_zone: America/New_York"]),
    ("60 * * * *", ["': minute 60 is out of range: allowed 0-59"]),
    ("0 24 * * *", ["': hour 24 is out of range: allowed 0-23"]),
    ("0 0 0 * *", ["': day-of-month 0 is out of range: allowed 1-31"]),
    ("0 0 1-32 * *", ["day-of-month field '1-32': 32 is out of range"]),
    ("0 0 * 13 *", ["': month 13 is out of range: allowed 1-12 or JAN-DEC"]),
    ("0 0 * * 8", ["': day-of-week 8 is out of range: allowed 0-6 or SUN-SAT (7 is also Sunday)"]),
    ("0 5-1 * * *", ["range '5-1' is reversed", "smaller value first"]),
    ("0 0 * * FRI-MON", ["range 'FRI-MON' is reversed"]),
    ("*/0 * * * *", ["minute field '*/0': step 0 is out of range: allowed 1-60"]),
    ("0 0 * * MON-FRI/0", ["day-of-week field 'MON-FRI/0': step 0 is out of range"]),
    ("*/61 * * * *", ["minute field '*/61': step 61 is out of range"]),
    ("5/15 * * * *", ["'5/15' puts a step after a single value", "write '5-59/15'"]),
    ("0 0 * * 1/2", ["write '1-6/2'"]),
    ("59 23 31 2 *", ["can never fire: February has no day 31", "February 29 is fine"]),
    ("0 0 30 2 *", ["can never fire: February has no day 30"]),
    ("0 0 30,31 FEB *", ["February has no day 30 and 31"]),
    ("0 0 31 4,6,9,11 *", ["April, June, September and November have no day 31"]),
    ("0 0 * JANUARY *", ["'JANUARY' in 'JANUARY' is not a month value: allowed 1-12 or JAN-DEC"]),
    ("0 9 * * SUNDAY", ["'SUNDAY' in 'SUNDAY' is not a day-of-week value"]),
    ("0 9 * * MAR", ["'MAR' in 'MAR' is not a day-of-week value"]),
    ("0 0 * * MON,,FRI", ["day-of-week field 'MON,,FRI' has an empty list item"]),
    ("0 0 * * MON-", ["'MON-' is not a value, range (a-b), list (a,b) or step"]),
    ("0 -5 * * *", ["hour field '-5'", "is not a value, range"]),
    ("*-5 * * * *", ["'*-5' mixes '*' and a range"]),
    ("*/x * * * *", ["step 'x' in '*/x' must be a whole number"]),
    ("every 5 minutes", ["App Engine 'every N minutes' form is not supported"]),
]


@pytest.mark.parametrize(("expression", "fragments"), REJECTED, ids=[r[0] or "empty" for r in REJECTED])
def test_rejected_with_clear_message(expression, fragments):
    with pytest.raises(CronError) as caught:
        parse_schedule(expression)
    message = str(caught.value)
    for fragment in fragments:
        assert fragment in message, message
    if expression.strip():
        assert f"{expression.strip()!r}" in message


def test_rejects_non_string():
    with pytest.raises(CronError, match="must be a string like '0 \\*/4 \\* \\* \\*', not None"):
        parse_schedule(None)  # type: ignore[arg-type]


@pytest.mark.parametrize("schedule, message", [
    ("0 25 * * *", "schedule '0 25 * * *': hour 25 is out of range: allowed 0-23"),
    ("0 0,25 * * *", "schedule '0 0,25 * * *': hour field '0,25': 25 is out of range: allowed 0-23"),
    ("0 0 1-32,5 * *", "schedule '0 0 1-32,5 * *': day-of-month field '1-32,5': 32 in '1-32' is out of range: "
                       "allowed 1-31"),
])
def test_an_out_of_range_value_is_named_once(schedule, message):
    with pytest.raises(CronError) as caught:
        parse_schedule(schedule)
    assert str(caught.value) == message


def test_cron_error_is_a_value_error():
    with pytest.raises(ValueError):
        parse_schedule("61 * * * *")


@pytest.mark.parametrize("load, value, detail", [
    (parse_schedule, "61 * * * *", "'61 * * * *': minute 61 is out of range: allowed 0-59"),
    (parse_schedule, "", "is empty: write "),
    (load_time_zone, "CET", "'CET' is a legacy or abbreviation-style zone name"),
    (load_time_zone, "Europe/Berlln", "'Europe/Berlln' is not a known time zone: did you mean 'Europe/Berlin'?"),
])
def test_cron_error_detail_is_the_message_without_its_field(load, value, detail):
    with pytest.raises(CronError) as caught:
        load(value)
    assert caught.value.detail.startswith(detail)
    assert str(caught.value).startswith(("schedule ", "time_zone ", "unknown time_zone "))


def test_feb_29_is_valid():
    assert parse_schedule("0 0 29 2 *").days == {29}
    # Day 31 is fine as long as one listed month has it.
    assert parse_schedule("0 0 31 2,3 *").months == {2, 3}
    # With a restricted day of week the OR rule lets it fire on weekdays.
    assert parse_schedule("0 0 31 2 MON").dow_restricted


# --- day rules ------------------------------------------------------------------------------------


def test_day_of_month_or_day_of_week_when_both_restricted():
    # 10th of the month OR any Friday; 2026-04-10 is both and fires once.
    assert fires("0 0 10 * 5", at(2026, 3, 1), 8) == [
        at(2026, 3, 6), at(2026, 3, 10), at(2026, 3, 13), at(2026, 3, 20), at(2026, 3, 27),
        at(2026, 4, 3), at(2026, 4, 10), at(2026, 4, 17),
    ]


def test_star_prefixed_day_field_means_and():
    # crontab(5): '*/2' starts with '*', so both fields must match: odd days that are Mondays.
    s = parse_schedule("0 0 */2 * 1")
    assert not s.dom_restricted and s.dow_restricted
    assert s.upcoming(at(2026, 3, 1), UTC_ZONE, 4) == [at(2026, 3, 9), at(2026, 3, 23), at(2026, 4, 13), at(2026, 4, 27)]


def test_only_day_of_week_restricts_when_day_of_month_is_star():
    assert fires("0 6 * * SAT,SUN", at(2026, 3, 2), 3) == [at(2026, 3, 7, 6), at(2026, 3, 8, 6), at(2026, 3, 14, 6)]


def test_weekday_only_schedule_skips_weekends():
    # 2026-05-08 is a Friday.
    assert fires("30 9 * * 1-5", at(2026, 5, 8, 9), 7) == [
        at(2026, 5, 8, 9, 30), at(2026, 5, 11, 9, 30), at(2026, 5, 12, 9, 30), at(2026, 5, 13, 9, 30),
        at(2026, 5, 14, 9, 30), at(2026, 5, 15, 9, 30), at(2026, 5, 18, 9, 30),
    ]
    assert parse_schedule("30 9 * * 1-5").latest_at_or_before(at(2026, 5, 10, 23), UTC_ZONE) == at(2026, 5, 8, 9, 30)


# --- previews around month ends and leap days -------------------------------------------------------


def test_day_31_skips_short_months():
    assert fires("0 0 31 * *", at(2026, 1, 31), 3) == [at(2026, 3, 31), at(2026, 5, 31), at(2026, 7, 31)]


def test_day_30_skips_february():
    assert fires("0 12 30 * *", at(2027, 1, 30, 12), 2) == [at(2027, 3, 30, 12), at(2027, 4, 30, 12)]


def test_leap_day_preview():
    assert fires("0 0 29 2 *", at(2027, 3, 1), 2) == [at(2028, 2, 29), at(2032, 2, 29)]
    # 2100 is not a leap year.
    assert fires("0 0 29 2 *", at(2096, 3, 1), 1) == [at(2104, 2, 29)]


def test_leap_day_latest_within_400_days_only():
    s = parse_schedule("0 0 29 2 *")
    assert s.latest_at_or_before(at(2028, 6, 1), UTC_ZONE) == at(2028, 2, 29)
    assert s.latest_at_or_before(at(2027, 6, 1), UTC_ZONE) is None


def test_year_end_rollover():
    assert fires("59 23 31 12 *", at(2026, 12, 31, 23, 59), 1) == [at(2027, 12, 31, 23, 59)]
    assert fires("0 0 1 1 *", at(2026, 12, 31, 23, 59, 59), 1) == [at(2027, 1, 1)]


def test_next_after_is_strict_and_latest_is_inclusive():
    s = parse_schedule("0 */4 * * *")
    assert s.next_after(at(2026, 5, 5, 4), UTC_ZONE) == at(2026, 5, 5, 8)
    assert s.next_after(at(2026, 5, 5, 3, 59, 59), UTC_ZONE) == at(2026, 5, 5, 4)
    assert s.latest_at_or_before(at(2026, 5, 5, 4), UTC_ZONE) == at(2026, 5, 5, 4)
    assert s.latest_at_or_before(at(2026, 5, 5, 3, 59, 59), UTC_ZONE) == at(2026, 5, 5, 0)
    assert s.next_after(datetime(2026, 5, 5, 4, 0, 0, 1, tzinfo=UTC), UTC_ZONE) == at(2026, 5, 5, 8)


def test_results_are_utc_for_any_input_zone():
    tokyo = ZoneInfo("Asia/Tokyo")
    after = datetime(2026, 5, 5, 9, 30, tzinfo=tokyo)  # 00:30 UTC
    result = parse_schedule("0 12 * * *").next_after(after, tokyo)
    assert result == at(2026, 5, 5, 3) and result.tzinfo is UTC


def test_naive_datetimes_are_refused():
    with pytest.raises(ValueError, match="must be timezone-aware"):
        parse_schedule("0 * * * *").next_after(datetime(2026, 1, 1), UTC_ZONE)


def test_upcoming_every_minute_and_count_zero():
    assert fires("* * * * *", at(2026, 1, 1, 23, 58, 30), 3) == [at(2026, 1, 1, 23, 59), at(2026, 1, 2), at(2026, 1, 2, 0, 1)]
    assert fires("* * * * *", at(2026, 1, 1), 0) == []


def test_matches_wall_time():
    s = parse_schedule("30 9 * * 1-5")
    assert s.matches(datetime(2026, 5, 8, 9, 30))
    assert not s.matches(datetime(2026, 5, 9, 9, 30))


def test_a_rare_schedule_reaches_across_a_century_gap():
    # 2100 is not a leap year, so the next Feb 29 after 2096 is in 2104: a minute-stepping
    # search would never get there; speed itself is measured by bench/, not asserted here.
    rare = parse_schedule("0 0 29 2 *")
    berlin = ZoneInfo("Europe/Berlin")
    assert rare.next_after(at(2096, 3, 1), berlin) == datetime(2104, 2, 29, tzinfo=berlin).astimezone(UTC)


# --- describe -------------------------------------------------------------------------------------

DESCRIPTIONS = [
    ("0 */4 * * *", "every 4 hours, at minute 0"),
    ("30 9 * * 1-5", "at 09:30 on Monday through Friday"),
    ("0 0 1 * 0", "at 00:00 on day 1 of the month or on Sunday"),
    ("* * * * *", "every minute"),
    ("*/15 * * * *", "every 15 minutes"),
    ("*/15 9-17 * * MON-FRI", "every 15 minutes from 09:00 through 17:59 on Monday through Friday"),
    ("5 * * * *", "every hour, at minute 5"),
    ("0 8,20 * * *", "at 08:00 and 20:00"),
    ("0,30 2 * * *", "at 02:00 and 02:30"),
    ("0 0 29 2 *", "at 00:00 on day 29 of the month in February"),
    ("0 6 1,15 * *", "at 06:00 on days 1 and 15 of the month"),
    ("0 6 1-7 * *", "at 06:00 on days 1 through 7 of the month"),
    ("0 7 * * SAT,SUN", "at 07:00 on Saturday and Sunday"),
    ("0 7 * * 0,1,2,3", "at 07:00 on Monday through Wednesday and Sunday"),
    ("0 0 */2 * 1", "at 00:00 on days 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29 and 31 of the month, "
                    "only when that day is Monday"),
    ("0 12 * JAN-MAR,DEC *", "at 12:00 in January through March and December"),
    ("*/7 * * * *", "every hour, at minutes 0, 7, 14, 21, 28, 35, 42, 49 and 56"),
    ("10,40 1-23/2 * * *", "at minutes 10 and 40 past hours 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21 and 23"),
    ("0 9-11,14 * * *", "at 09:00, 10:00, 11:00 and 14:00"),
    ("* 3 * * *", "every minute from 03:00 through 03:59"),
]


@pytest.mark.parametrize(("expression", "text"), DESCRIPTIONS)
def test_describe(expression, text):
    assert describe(parse_schedule(expression)) == text


# --- time zones -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["Etc/UTC", "UTC", "Europe/Berlin", "America/Argentina/Buenos_Aires", "Etc/GMT+5",
                                  "US/Eastern"])
def test_load_time_zone_accepts_iana_names(name):
    assert load_time_zone(name).key == name


@pytest.mark.parametrize(("name", "fragment"), [
    ("Europe/Berln", "unknown time_zone 'Europe/Berln': did you mean 'Europe/Berlin'?"),
    ("europe/berlin", "did you mean 'Europe/Berlin'?"),
    ("America/NewYork", "did you mean 'America/New_York'?"),
    ("Mars/Olympus_Mons", "unknown time_zone 'Mars/Olympus_Mons': use an IANA name such as 'Etc/UTC'"),
    ("EST5EDT", "time_zone 'EST5EDT' is a legacy or abbreviation-style zone name; use 'America/New_York'"),
    ("EST", "use 'America/New_York'"),
    ("CET", "use 'Europe/Berlin'"),
    ("GMT", "use 'Etc/UTC'"),
    ("Japan", "use an Area/Location name like 'Europe/Berlin'"),
    ("posix/Europe/Berlin", "unknown time_zone 'posix/Europe/Berlin'"),
    ("../../etc/passwd", "unknown time_zone '../../etc/passwd'"),
    ("Europe/Berlin ", "unknown time_zone 'Europe/Berlin '"),
    ("", "time_zone must be an IANA name"),
])
def test_load_time_zone_rejects(name, fragment):
    with pytest.raises(CronError) as caught:
        load_time_zone(name)
    assert fragment in str(caught.value)


def test_dst_notes_empty_for_utc_zones():
    s = parse_schedule("30 2 * * *")
    for name in ("Etc/UTC", "UTC", "Etc/GMT-2"):
        assert dst_notes(s, load_time_zone(name), at(2026, 1, 1)) == []


def test_schedule_is_hashable_and_comparable():
    assert parse_schedule("0 9 * * mon") == parse_schedule("0 9 * * MON")
    assert isinstance(hash(parse_schedule("0 9 * * 1")), int)
    assert isinstance(parse_schedule("0 9 * * 1"), CronSchedule)
