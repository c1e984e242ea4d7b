"""`#` (Nth weekday): the schedule validate suggests instead fires when its advice says it does."""

import calendar
import re
import zoneinfo
from datetime import UTC, datetime

import pytest

from spotcron.core.cron.schedule import parse_schedule
from spotcron.core.errors import CronError

ZONE = zoneinfo.ZoneInfo("Europe/Berlin")


def _advice(expression: str) -> tuple[str, int, int]:
    with pytest.raises(CronError) as caught:
        parse_schedule(expression)
    message = str(caught.value)
    suggested = re.search(r"write '([^']+)'", message).group(1)
    first, last = map(int, re.search(r"is (\d+)-(\d+) \(the", message).group(1, 2))
    return suggested, first, last


def _year_of_fires(expression: str) -> list[datetime]:
    schedule = parse_schedule(expression)
    fires = schedule.upcoming(datetime(2026, 12, 31, 23, 0, tzinfo=UTC), ZONE, 120)
    return [f.astimezone(ZONE) for f in fires if f.astimezone(ZONE).year == 2027]


@pytest.mark.parametrize(("expression", "weekday", "nth"), [
    ("0 9 * * 1#1", calendar.MONDAY, 1),
    ("30 7 * * FRI#3", calendar.FRIDAY, 3),
    ("0 18 * * 0#2", calendar.SUNDAY, 2),
    ("0 18 * * 7#4", calendar.SUNDAY, 4),
])
def test_suggestion_fires_weekly_and_its_day_window_holds_exactly_the_nth_weekday(expression, weekday, nth):
    suggested, first, last = _advice(expression)
    fires = _year_of_fires(suggested)
    hour, minute = int(expression.split()[1]), int(expression.split()[0])
    assert all(f.weekday() == weekday and (f.hour, f.minute) == (hour, minute) for f in fires)
    for month in range(1, 13):
        in_month = [f for f in fires if f.month == month]
        assert 4 <= len(in_month) <= 5, "a weekly schedule: 4 or 5 runs a month, as the advice says"
        kept = [f.day for f in in_month if first <= f.day <= last]
        nth_day = [d for week in calendar.Calendar().monthdayscalendar(2027, month)
                   for d in [week[weekday]] if d][nth - 1]
        assert kept == [nth_day], "the job's day check keeps exactly the Nth weekday, once a month"


def test_the_day_and_weekday_form_fires_far_more_than_once_a_month():
    # Why the advice warns against it: both fields restricted are ORed, as Cloud Scheduler reads them.
    fires = _year_of_fires("0 9 1-7 * MON")
    january = [f for f in fires if f.month == 1]
    assert len(january) > 7


def test_fifth_weekday_keeps_days_29_to_31():
    suggested, first, last = _advice("0 9 * * WED#5")
    assert (suggested, first, last) == ("0 9 * * WED", 29, 31)


def test_hash_in_a_list_still_says_it_is_unsupported_without_the_wrong_or_form():
    with pytest.raises(CronError) as caught:
        parse_schedule("0 9 * * 1#1,5")
    message = str(caught.value)
    assert "uses '#'" in message and "day-of-month '*'" in message
    assert "list days of the month and a weekday" not in message


def test_the_documented_days_form_fires_seven_times_a_month_one_of_them_the_first_monday():
    fires = _year_of_fires("0 9 1-7 * *")
    for month in range(1, 13):
        in_month = [f for f in fires if f.month == month]
        assert [f.day for f in in_month] == list(range(1, 8))
        assert len([f for f in in_month if f.weekday() == calendar.MONDAY]) == 1
