"""The metrics contract: what metrics.json may hold, and the message for each way it can be wrong."""

from __future__ import annotations

import json

import pytest

from spotcron.core.metrics import MAX_BYTES, MetricsProblem, RunMetrics, check_time_metric, parse_metrics

GOOD = {"work": {"value": 6400, "unit": "samples"},
        "metrics": {"train_seconds": {"value": 41.2, "unit": "s"}, "accuracy": {"value": 0.91, "unit": "1"},
                    "step_ms": {"value": 6.4, "unit": "ms"}},
        "tasks": {"mlp": {"anything": ["the job's own"]}}}


def test_a_good_file_keeps_work_and_named_metrics_with_units():
    parsed = parse_metrics(json.dumps(GOOD).encode())
    assert parsed.work.value == 6400 and parsed.work.unit == "samples"
    assert sorted(parsed.metrics) == ["accuracy", "step_ms", "train_seconds"]
    assert parsed.seconds("train_seconds") == 41.2 and parsed.seconds("step_ms") == pytest.approx(0.0064)
    assert parsed.seconds("accuracy") is None and parsed.seconds("missing") is None
    assert parse_metrics(b'{"work": {"value": 3, "unit": "steps"}}').metrics == {}
    assert RunMetrics.model_validate_json(parsed.model_dump_json()) == parsed  # as the run record stores it


W = "results/metrics.json"
EXAMPLE = ('{"work": {"value": 6400, "unit": "samples"}, "metrics": {"train_seconds": {"value": 41.2, '
           '"unit": "s"}}}')
CASES = [
    ("not-json", b"{'work': 1}", f"{W}: not JSON (Expecting property name enclosed in double quotes: line 1 "
                                 f"column 2 (char 1)); write one object, e.g. {EXAMPLE}"),
    ("a-list", b"[1, 2]", f"{W}: a JSON list, not an object; write e.g. {EXAMPLE}"),
    ("free-form", b'{"total_seconds": 12.5}',
     f"{W}: no \"work\" and no \"metrics\"; spotcron reads only those, e.g. {EXAMPLE}"),
    ("work-number", b'{"work": 6400}', f'{W}: work is 6400; write {{"value": NUMBER, "unit": "..."}}'),
    ("work-zero", b'{"work": {"value": 0, "unit": "steps"}}',
     f"{W}: work.value is 0; the work done must be more than 0 (steps, samples, items processed)"),
    ("work-text", b'{"work": {"value": "12", "unit": "steps"}}', f'{W}: work.value is "12"; write a finite number'),
    ("work-bool", b'{"work": {"value": true, "unit": "steps"}}', f"{W}: work.value is true; write a finite number"),
    ("work-nan", b'{"work": {"value": NaN, "unit": "steps"}}', f"{W}: work.value is NaN; write a finite number"),
    ("no-unit", b'{"metrics": {"loss": {"value": 0.3}}}',
     f'{W}: metrics.loss.unit is missing; name the unit in at most 32 printable characters, e.g. "s", "samples", '
     f'"1" for a ratio'),
    ("unit-line-break", b'{"metrics": {"loss": {"value": 0.3, "unit": "s\\n# x"}}}',
     f'{W}: metrics.loss.unit is "s\\n# x"; name the unit in at most 32 printable characters, e.g. "s", '
     f'"samples", "1" for a ratio'),
    ("metrics-list", b'{"metrics": [1]}',
     f'{W}: metrics is [1]; write an object of named values, e.g. {{"train_seconds": {{"value": 41.2, '
     f'"unit": "s"}}}}'),
    ("bad-name", b'{"metrics": {"train time": {"value": 1, "unit": "s"}}}',
     f"{W}: metrics name 'train time' is not allowed; use letters, digits, _ . - (at most 64, starting with a "
     f"letter or _)"),
]


@pytest.mark.parametrize("data, expected", [(d, e) for _, d, e in CASES], ids=[c for c, _, _ in CASES])
def test_each_break_of_the_contract_says_where_what_and_how_to_fix(data, expected):
    with pytest.raises(MetricsProblem) as caught:
        parse_metrics(data)
    assert str(caught.value) == expected


def test_too_big_and_too_many():
    with pytest.raises(MetricsProblem, match=f"more than the {MAX_BYTES} allowed"):
        parse_metrics(b" " * (MAX_BYTES + 1))
    many = {"metrics": {f"m{i}": {"value": i, "unit": "1"} for i in range(65)}}
    with pytest.raises(MetricsProblem, match="metrics has 65 entries, more than 64"):
        parse_metrics(json.dumps(many).encode())


def test_the_time_metric_must_be_there_and_be_a_time():
    parsed = parse_metrics(json.dumps(GOOD).encode())
    check_time_metric(parsed, "train_seconds")
    check_time_metric(parsed, "step_ms")
    with pytest.raises(MetricsProblem) as caught:
        check_time_metric(parsed, "total_seconds")
    assert str(caught.value) == (f"{W}: no metrics.total_seconds, which the job's benchmark.time_metric names; "
                                 f"metrics there: accuracy, step_ms, train_seconds")
    with pytest.raises(MetricsProblem) as caught:
        check_time_metric(parsed, "accuracy")
    assert str(caught.value) == (f"{W}: metrics.accuracy.unit is '1', but benchmark.time_metric needs a time: one "
                                 f"of s, ms, us, min, h")
