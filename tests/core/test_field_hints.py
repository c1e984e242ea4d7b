"""Unknown fields: a suggestion only when it is likely, words from other tools understood, and
never a field spotcron keeps for itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from spotcron.core.errors import ConfigError
from spotcron.core.field_hints import INTERNAL_FIELDS, suggest_field
from spotcron.core.loader import load_job_file
from spotcron.core.spec import JobSpec, job_file_schema

OK = 'schedule: "0 * * * *"\nimage: spotcron/bot:latest\n'


def problem(tmp_path: Path, text: str) -> str:
    path = tmp_path / "bot.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_job_file(path)
    [only] = caught.value.problems
    return only.message


@pytest.mark.parametrize(("typed", "meant"), [
    ("enviroment", "env"), ("environment", "env"), ("Environment", "env"), ("cmd", "command"),
    ("entrypoint", "command"), ("timezone", "time_zone"), ("retry", "retries"), ("schedules", "schedule"),
    ("imge", "image"), ("schdule", "schedule"),
])
def test_a_typo_or_another_tools_word_gets_the_field_it_means(tmp_path, typed, meant):
    assert problem(tmp_path, OK + f"{typed}: x\n") == f"unknown field; did you mean {meant!r}?"


@pytest.mark.parametrize("typed", ["bogus_field", "flavour", "zzz"])
def test_a_name_like_no_field_gets_the_list_not_a_guess(tmp_path, typed):
    message = problem(tmp_path, OK + f"{typed}: x\n")
    assert message.startswith("unknown field; allowed here: name, schedule,") and "did you mean" not in message


def test_the_list_of_fields_hides_what_spotcron_sets_for_itself(tmp_path):
    message = problem(tmp_path, OK + "flavour: x\n")
    for internal in INTERNAL_FIELDS:
        assert internal not in message
    assert suggest_field("repeat_indx", JobSpec.model_fields) == "repeat"  # the field a user sets
    assert suggest_field("deploy_acount", JobSpec.model_fields) is None
    # Internal indeed: the model sets them on its resolved copies, the schema leaves them out.
    assert set(JobSpec.model_fields) >= INTERNAL_FIELDS
    assert not INTERNAL_FIELDS & set(job_file_schema()["properties"])


def test_a_nested_synonym_is_read_against_that_level(tmp_path):
    message = problem(tmp_path, OK + "machine:\n  type: n1-standard-4\n  accelerator: {type: nvidia-tesla-t4}\n")
    assert message == "unknown field; did you mean 'gpu'?"
