"""Bad job specs fail loudly: every case asserts the whole message (file, line, field, value, hint)."""

from __future__ import annotations

from pathlib import Path

import pytest

from spotcron.core.errors import ConfigError
from spotcron.core.loader import job_files, load_job_file, load_jobs

OK = 'schedule: "0 * * * *"\nimage: spotcron/bot:latest\n'


def problems(tmp_path: Path, monkeypatch, files: dict[str, str], *, grace: int = 300,
             paths: list[str] | None = None) -> list[str]:
    """The problem lines that load_jobs reports for `files` written under jobs/."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "jobs").mkdir(exist_ok=True)
    for name, text in files.items():
        (tmp_path / "jobs" / name).write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_jobs([Path(p) for p in (paths or ["jobs"])], grace=grace)
    return [str(p) for p in caught.value.problems]


# (case id, file text, the problem line expected; a tuple means: one line containing all parts)
CASES: list[tuple[str, str, str | tuple[str, ...]]] = [
    # --- YAML and shape
    ("bad-yaml", OK + "args: [--x\n",
     "jobs/bot.yaml:4: not valid YAML: expected ',' or ']', but got '<stream end>' (while parsing a flow sequence)"),
    ("tab-indent", OK + "machine:\n\ttype: e2-small\n",
     ("jobs/bot.yaml:4: not valid YAML:", "indent with spaces, not tabs")),
    ("unquoted-star", "schedule: */5 * * * *\nimage: spotcron/bot:latest\n",
     ("jobs/bot.yaml:1: not valid YAML:", "(while scanning an alias); quote values that start with *")),
    ("not-a-mapping", "- schedule: '0 * * * *'\n",
     "jobs/bot.yaml:1: a job file is a mapping of fields (schedule: ..., image: ...), not a list"),
    ("scalar-file", "just some text\n",
     "jobs/bot.yaml:1: a job file is a mapping of fields (schedule: ..., image: ...), not 'just some text'"),
    ("empty-file", "", "jobs/bot.yaml: the file is empty; a job needs at least schedule: and image:"),
    ("duplicate-key", OK + "image: other/image\n",
     "jobs/bot.yaml:3: image: duplicate key; already set on line 2 (YAML would silently keep only the last one)"),
    # --- unknown fields, with suggestions, at every level
    ("unknown-top", 'schdule: "0 * * * *"\nimage: spotcron/bot:latest\n',
     "jobs/bot.yaml:1: schdule: unknown field; did you mean 'schedule'?"),
    ("unknown-nested", OK + "machine:\n  typ: e2-small\n",
     "jobs/bot.yaml:4: machine.typ: unknown field; did you mean 'type'?"),
    ("unknown-no-hint", OK + "flavour: vanilla\n",
     ("jobs/bot.yaml:3: flavour: unknown field; allowed here: name, schedule, time_zone,", "local")),
    ("unknown-in-matrix-entry", OK + "matrix:\n  - name: cpu\n    machin: {type: e2-small}\n",
     "jobs/bot.yaml:5: matrix[0].machin: unknown field; did you mean 'machine'?"),
    ("unknown-in-entry-machine", OK + "matrix:\n  - name: cpu\n    machine: {tipe: e2-small}\n",
     "jobs/bot.yaml:5: matrix[0].machine.tipe: unknown field; did you mean 'type'?"),
    ("unknown-in-gpu", OK + "machine:\n  type: n1-standard-4\n  gpu: {type: nvidia-tesla-t4, cuont: 1}\n",
     "jobs/bot.yaml:5: machine.gpu.cuont: unknown field; did you mean 'count'?"),
    # --- required fields
    ("missing-schedule", "image: spotcron/bot:latest\n",
     'jobs/bot.yaml: schedule: required field is missing; add e.g. schedule: "0 */4 * * *"'),
    ("missing-image", 'schedule: "0 * * * *"\n',
     "jobs/bot.yaml: image: required field is missing; add e.g. image: "
     "us-docker.pkg.dev/my-project/spotcron/bot:latest, or build: a folder with a Dockerfile"),
    ("missing-entry-name", OK + "matrix:\n  - machine: {type: e2-small}\n",
     "jobs/bot.yaml:4: matrix[0].name: required field is missing; add e.g. name: cpu"),
    ("missing-gpu-type", OK + "machine:\n  type: n1-standard-4\n  gpu: {count: 1}\n",
     "jobs/bot.yaml:5: machine.gpu.type: required field is missing; add e.g. type: nvidia-tesla-t4"),
    # --- wrong types and ranges
    ("description-too-long", OK + "description: " + "x" * 501 + "\n",
     "jobs/bot.yaml:3: description: is 501 characters long; the job's Cloud Scheduler entry takes at most 500: "
     "shorten it"),
    ("bool-type", OK + "paused: maybe\n", "jobs/bot.yaml:3: paused: must be true or false, not 'maybe'"),
    ("int-type", OK + "history_limit: many\n", "jobs/bot.yaml:3: history_limit: must be a whole number, not 'many'"),
    ("mapping-type", OK + "machine: n1-standard-1\n",
     "jobs/bot.yaml:3: machine: must be a mapping (indented key: value lines), not 'n1-standard-1'; a machine "
     "type goes under type: write machine: {type: n1-standard-1}"),
    ("list-type", OK + "matrix: {name: cpu}\n", "jobs/bot.yaml:3: matrix: must be a list, not a mapping"),
    ("string-type", 'schedule: "0 * * * *"\nimage: 5\n',
     "jobs/bot.yaml:2: image: must be text, not the number 5; put it in quotes if needed"),
    ("disk-too-small", OK + "machine:\n  disk_gb: 5\n",
     "jobs/bot.yaml:4: machine.disk_gb: 5 is too small; the smallest allowed is 10"),
    ("retries-too-large", OK + "retries:\n  preemption: 20\n",
     "jobs/bot.yaml:4: retries.preemption: 20 is too large; the largest allowed is 10"),
    ("concurrency-literal", OK + "concurrency: forbidd\n",
     "jobs/bot.yaml:3: concurrency: 'forbidd' is not allowed; use one of allow, forbid, replace "
     "(did you mean 'forbid'?)"),
    # --- schedules (messages from spotcron.core.cron.schedule, located here)
    ("cron-six-fields", 'schedule: "0 0 */4 * * *"\nimage: spotcron/bot:latest\n',
     ("jobs/bot.yaml:1: schedule: '0 0 */4 * * *' has 6 fields; it needs exactly five fields", "seconds")),
    ("cron-tz-prefix", 'schedule: "TZ=Europe/Berlin 0 * * * *"\nimage: spotcron/bot:latest\n',
     ("jobs/bot.yaml:1: schedule: 'TZ=Europe/Berlin 0 * * * *': the TZ= prefix is not accepted",
      "time_zone: Europe/Berlin")),
    ("cron-never-fires", 'schedule: "59 23 31 2 *"\nimage: spotcron/bot:latest\n',
     ("jobs/bot.yaml:1: schedule: '59 23 31 2 *' can never fire", "February")),
    ("cron-last-day", 'schedule: "0 0 L * *"\nimage: spotcron/bot:latest\n',
     ("jobs/bot.yaml:1: schedule: '0 0 L * *'", "'L'", "Cloud Scheduler")),
    ("cron-macro", 'schedule: "@every 5m"\nimage: spotcron/bot:latest\n',
     ("jobs/bot.yaml:1: schedule: '@every 5m'", "'@every'", "unix-cron")),
    ("cron-out-of-range", 'schedule: "61 * * * *"\nimage: spotcron/bot:latest\n',
     ("jobs/bot.yaml:1: schedule: '61 * * * *'", "61", "out of range")),
    # --- time zones
    ("zone-typo", OK + "time_zone: Europe/Berln\n",
     ("jobs/bot.yaml:3: time_zone: 'Europe/Berln' is not a known time zone", "did you mean 'Europe/Berlin'?")),
    ("zone-abbreviation", OK + "time_zone: EST\n",
     ("jobs/bot.yaml:3: time_zone: 'EST' is a legacy or abbreviation-style zone name", "America/New_York")),
    # --- durations and Compute Engine's maxRunDuration range
    ("duration-words", OK + "timeout: 10 minutes\n",
     "jobs/bot.yaml:3: timeout: '10 minutes' is not a duration; write e.g. 90s, 10m or 2h"),
    ("timeout-over-120d", OK + "timeout: 121d\n",
     "jobs/bot.yaml:3: timeout: 10454400s is outside 1s..120d; Compute Engine deletes a VM after at most "
     "120 days (maxRunDuration)"),
    ("timeout-plus-grace", OK + "timeout: 120d\n",
     "jobs/bot.yaml:3: timeout: '120d' plus the stack's grace (300s) is 10368300s, but Compute Engine's "
     "maxRunDuration allows at most 120 days (10368000s); use a timeout of at most 10367700s"),
    ("deadline-too-short", OK + "starting_deadline: 5s\n",
     ("jobs/bot.yaml:3: starting_deadline: 5s is outside 30s..1d", "cold start")),
    ("deadline-too-long", OK + "starting_deadline: 2d\n",
     ("jobs/bot.yaml:3: starting_deadline: 172800s is outside 30s..1d",)),
    # --- machine types and GPUs
    ("machine-typo", OK + "machine:\n  type: n1-standrd-1\n",
     "jobs/bot.yaml:4: machine.type: 'n1-standrd-1' is not a machine type; did you mean 'n1-standard-1'?"),
    ("machine-unknown", OK + "machine:\n  type: big-box\n",
     ("jobs/bot.yaml:4: machine.type: 'big-box' is not a machine type spotcron knows (families: a2, a3,",
      "see docs/jobs.md")),
    ("machine-custom", OK + "machine:\n  type: n1-custom-4-16384\n",
     "jobs/bot.yaml:4: machine.type: 'n1-custom-4-16384': custom machine types are not supported; pick a "
     "predefined type such as n2-standard-4 or e2-highmem-2"),
    ("entry-machine-typo", OK + "matrix:\n  - name: cpu\n    machine: {type: e2-standard-3}\n",
     ("jobs/bot.yaml:5: matrix[0].machine.type: 'e2-standard-3' is not a machine type; did you mean",)),
    ("gpu-unknown", OK + "machine:\n  type: n1-standard-4\n  gpu: {type: nvidia-tesla-t5}\n",
     ("jobs/bot.yaml:5: machine.gpu.type: 'nvidia-tesla-t5' is not a GPU type; did you mean 'nvidia-tesla-t4'?",
      "known GPU types: nvidia-tesla-t4,")),
    ("gpu-k80-retired", OK + "machine:\n  type: n1-standard-4\n  gpu: {type: nvidia-tesla-k80}\n",
     ("jobs/bot.yaml:5: machine.gpu.type: 'nvidia-tesla-k80': the NVIDIA K80 reached end of support on "
      "Compute Engine on 1 May 2024", "use nvidia-tesla-t4")),
    ("gpu-wrong-family", OK + "machine:\n  type: e2-standard-4\n  gpu: {type: nvidia-tesla-t4}\n",
     "jobs/bot.yaml:5: machine.gpu: NVIDIA T4 (nvidia-tesla-t4) cannot attach to e2-standard-4 (E2 family); "
     "use a machine type of the n1-* family"),
    ("gpu-bad-count", OK + "machine:\n  type: n1-standard-8\n  gpu: {type: nvidia-tesla-t4, count: 3}\n",
     "jobs/bot.yaml:5: machine.gpu: 3 x nvidia-tesla-t4 cannot attach to an N1 VM; allowed counts: 1, 2, 4"),
    ("gpu-l4-count", OK + "machine:\n  type: g2-standard-8\n  gpu: {type: nvidia-l4, count: 2}\n",
     ("jobs/bot.yaml:5: machine.gpu: g2-standard-8 comes with exactly 1 x nvidia-l4, not 2; set count to 1",
      "g2-standard-24 (2)")),
    ("gpu-l4-on-n1", OK + "machine:\n  type: n1-standard-4\n  gpu: {type: nvidia-l4}\n",
     "jobs/bot.yaml:5: machine.gpu: NVIDIA L4 (nvidia-l4) cannot attach to n1-standard-4 (N1 family); "
     "use a machine type of the g2-* family, e.g. g2-standard-4"),
    ("gpu-too-many-vcpus", OK + "machine:\n  type: n1-standard-96\n  gpu: {type: nvidia-tesla-t4}\n",
     "jobs/bot.yaml:5: machine.gpu: n1-standard-96 has 96 vCPUs and 360 GB; with 1 x nvidia-tesla-t4 an N1 VM "
     "may have at most 48 vCPUs and 312 GB; use count 4 or a smaller machine type"),
    ("gpu-inherited-by-entry", OK + "machine:\n  type: n1-standard-8\n  gpu: {type: nvidia-tesla-t4}\n"
                                    "matrix:\n  - name: gpu\n  - name: cpu\n    machine: {type: e2-standard-4}\n",
     ("jobs/bot.yaml:9: matrix[1].machine.type: NVIDIA T4 (nvidia-tesla-t4) cannot attach to e2-standard-4",
      "the job's machine.gpu applies to every matrix entry that sets none")),
    ("entry-gpu-count", OK + "matrix:\n  - name: a100\n    machine:\n      type: a2-highgpu-1g\n"
                             "      gpu: {type: nvidia-tesla-a100, count: 2}\n",
     ("jobs/bot.yaml:7: matrix[0].machine.gpu.count: a2-highgpu-1g comes with exactly 1 x nvidia-tesla-a100, "
      "not 2",)),
    ("zone-is-region", OK + "machine:\n  zones: [us-central1]\n",
     "jobs/bot.yaml:4: machine.zones[0]: 'us-central1' is a region, not a zone; name zones in it, "
     "e.g. us-central1-a"),
    ("zone-malformed", OK + "machine:\n  zones:\n    - us-central1-a\n    - uscentral1a\n",
     "jobs/bot.yaml:6: machine.zones[1]: 'uscentral1a' is not a zone name; write e.g. us-central1-a "
     "(region-letter)"),
    # --- names
    ("entry-name-uppercase", OK + "matrix:\n  - name: T4\n",
     "jobs/bot.yaml:4: matrix[0].name: 'T4' is not a valid matrix entry name: use lowercase letters, digits "
     "and hyphens, start with a letter, end with a letter or digit, at most 12 characters (it becomes part "
     "of VM names and labels)"),
    ("entry-name-too-long", OK + "matrix:\n  - name: n1-highcpu-16x\n",
     ("jobs/bot.yaml:4: matrix[0].name: 'n1-highcpu-16x' is not a valid matrix entry name", "at most 12")),
    ("entry-name-duplicate", OK + "matrix:\n  - name: cpu\n  - name: gpu\n  - name: cpu\n",
     "jobs/bot.yaml:6: matrix[2].name: 'cpu' is already the name of matrix[0]; entry names must be unique "
     "within the job"),
    ("variant-reserved", OK + "variant: cpu\n",
     "jobs/bot.yaml:3: variant: reserved: spotcron sets it on the copy of the job made for each matrix entry; "
     "define entries under matrix: instead"),
    ("name-mismatch", OK + "name: other\n",
     "jobs/bot.yaml:3: name: 'other' does not match the file name 'bot.yaml'; a job is named after its file: "
     "rename the file or remove this key"),
    ("env-name-hyphen", OK + "env:\n  MY-VAR: x\n",
     "jobs/bot.yaml:4: env.MY-VAR: 'MY-VAR' is not a valid environment variable name: use letters, digits and "
     "underscores, not starting with a digit (e.g. MY_SETTING)"),
    ("entry-env-digit", OK + "matrix:\n  - name: cpu\n    env: {1THREADS: x}\n",
     ("jobs/bot.yaml:5: matrix[0].env.1THREADS: '1THREADS' is not a valid environment variable name",)),
    # --- commands, image, directories
    ("local-command-empty", OK + "local:\n  command: ''\n",
     "jobs/bot.yaml:4: local.command: is empty; write the command to run, e.g. python3 vm_images/bot/bot.py"),
    ("command-empty", OK + "command: []\n",
     "jobs/bot.yaml:3: command: is empty; leave command out to use the image's entrypoint"),
    ("args-unbalanced-quote", OK + "args: \"--name 'x\"\n",
     ("jobs/bot.yaml:3: args: \"--name 'x\" cannot be split into words (No closing quotation); "
      "write it as a list",)),
    ("image-uppercase", 'schedule: "0 * * * *"\nimage: ghcr.io/OWNER/bot:latest\n',
     "jobs/bot.yaml:2: image: 'ghcr.io/OWNER/bot:latest' is not a container image reference; write e.g. "
     "us-docker.pkg.dev/my-project/spotcron/bot:latest (lowercase path, no spaces)"),
    ("checkpoint-relative", OK + "checkpoint: checkpoint\n",
     "jobs/bot.yaml:3: checkpoint: 'checkpoint' is not an absolute container directory; write e.g. /results"),
    # --- benchmark settings
    ("benchmark-base-unknown", OK + "matrix:\n  - name: cpu\n  - name: gpu\nbenchmark:\n  base: k80\n",
     "jobs/bot.yaml:7: benchmark.base: 'k80' is not a matrix entry of this job; choose one of cpu, gpu"),
    ("benchmark-base-no-matrix", OK + "benchmark: {base: cpu}\n",
     "jobs/bot.yaml:3: benchmark.base: 'cpu': the job has no matrix, so there is nothing to compare; "
     "remove benchmark.base or add matrix entries"),
    ("repeat-zero", OK + "repeat: 0\n",
     "jobs/bot.yaml:3: repeat: 0 is too small; the smallest allowed is 1"),
    ("repeat-name-clash", OK + "matrix:\n  - {name: cpu, repeat: 2}\n  - {name: cpu-r2}\n",
     "jobs/bot.yaml:4: matrix[0].name: 'cpu-r2' names another matrix entry and a repeat of 'cpu' (repeats are "
     "named ENTRY-rN); rename that entry"),
    ("repeat-index-reserved", OK + "repeat_index: 2\n",
     "jobs/bot.yaml:3: repeat_index: reserved: spotcron numbers the copies that repeat: makes; set repeat: N "
     "instead"),
    # --- a job's own service account
    ("account-short-name", OK + "service_account: bot-runner\n",
     "jobs/bot.yaml:3: service_account: 'bot-runner' is not a service account email "
     "(ACCOUNT_ID@PROJECT_ID.iam.gserviceaccount.com); write the full email, e.g. "
     "bot-runner@PROJECT.iam.gserviceaccount.com"),
    ("account-not-a-service-account", OK + "service_account: me@example.com\n",
     "jobs/bot.yaml:3: service_account: 'me@example.com' is not a service account email "
     "(ACCOUNT_ID@PROJECT_ID.iam.gserviceaccount.com); write e.g. my-job@my-project.iam.gserviceaccount.com"),
    ("account-default-compute", OK + "service_account: 123456-compute@developer.gserviceaccount.com\n",
     "jobs/bot.yaml:3: service_account: '123456-compute@developer.gserviceaccount.com' is one of Google's default "
     "service accounts, which hold broad roles in most projects; create an account for this job (gcloud iam "
     "service-accounts create NAME), grant it only what the job needs, and write "
     "NAME@PROJECT.iam.gserviceaccount.com here"),
    ("account-without-metadata", OK + "service_account: bot-runner@my-proj.iam.gserviceaccount.com\n"
     "metadata_access: false\n",
     "jobs/bot.yaml:4: metadata_access: false contradicts service_account "
     "'bot-runner@my-proj.iam.gserviceaccount.com': a job's own account reaches the container through the "
     "metadata server, so naming one implies metadata_access; remove one of the two"),
    ("checkpoint-overlaps", OK + "results: /data\ncheckpoint: /data/ckpt\n",
     "jobs/bot.yaml:4: checkpoint: checkpoint '/data/ckpt' and results '/data' overlap; use separate "
     "directories such as /checkpoint and /results"),
]


@pytest.mark.parametrize("text, expected", [(t, e) for _, t, e in CASES], ids=[c for c, _, _ in CASES])
def test_bad_spec_is_reported_precisely(tmp_path, monkeypatch, text, expected):
    lines = problems(tmp_path, monkeypatch, {"bot.yaml": text})
    if isinstance(expected, str):
        assert expected in lines, "\n".join(lines)
    else:
        assert any(all(part in line for part in expected) for line in lines), "\n".join(lines)


def test_there_are_at_least_forty_cases():
    assert len(CASES) >= 40


def test_timeout_below_the_shortest_vm_lifetime_with_no_grace(tmp_path, monkeypatch):
    lines = problems(tmp_path, monkeypatch, {"bot.yaml": OK + "timeout: 10s\n"}, grace=0)
    assert lines == ["jobs/bot.yaml:3: timeout: '10s' plus the stack's grace (0s) is 10s, but Compute Engine's "
                     "maxRunDuration is at least 30s; use a timeout of at least 30s"]


def test_file_name_must_make_a_valid_job_name(tmp_path, monkeypatch):
    lines = problems(tmp_path, monkeypatch, {"Bot_Job.yaml": OK})
    assert lines == ["jobs/Bot_Job.yaml: the job name comes from the file name: 'Bot_Job' is not a valid job "
                     "name: use lowercase letters, digits and hyphens, start with a letter, end with a letter "
                     "or digit, at most 30 characters (it becomes part of VM names and labels); rename the file"]


def test_job_name_longer_than_thirty_characters(tmp_path, monkeypatch):
    name = "a" * 31
    lines = problems(tmp_path, monkeypatch, {f"{name}.yaml": OK})
    assert len(lines) == 1 and "at most 30 characters" in lines[0] and f"'{name}'" in lines[0]
    assert load_jobs_ok(tmp_path, {"b" * 30 + ".yaml": OK})[0].name == "b" * 30


def load_jobs_ok(tmp_path: Path, files: dict[str, str]):
    folder = tmp_path / "ok"
    folder.mkdir(exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return load_jobs([folder])


def test_same_job_name_in_two_files(tmp_path, monkeypatch):
    lines = problems(tmp_path, monkeypatch, {"bot.yaml": OK, "bot.yml": OK})
    assert lines == [
        "jobs/bot.yaml: job name 'bot' is also defined by jobs/bot.yml; a job is named after its file, so each "
        "file name must be unique",
        "jobs/bot.yml: job name 'bot' is also defined by jobs/bot.yaml; a job is named after its file, so each "
        "file name must be unique",
    ]


def test_every_problem_of_every_file_in_one_pass(tmp_path, monkeypatch):
    lines = problems(tmp_path, monkeypatch, {
        "a.yaml": 'schedule: "61 * * * *"\nimage: spotcron/a\nmachine: {type: n1-standrd-1}\n',
        "b.yaml": 'schdule: "0 * * * *"\nimage: spotcron/b\ntimeout: soon\n',
        "c.yaml": OK,
    })
    files = [line.split(":", 1)[0] for line in lines]
    assert files.count("jobs/a.yaml") == 2 and files.count("jobs/b.yaml") == 3, lines
    assert "jobs/c.yaml" not in files


def test_missing_path_and_wrong_extension(tmp_path, monkeypatch):
    (tmp_path / "notes.txt").write_text("x")
    lines = problems(tmp_path, monkeypatch, {}, paths=["nope", "notes.txt", "gone.yaml"])
    assert lines == ["gone.yaml: no such file",
                     f"nope: no such folder in {tmp_path}: `spotcron init` starts one with a first job, or point "
                     f"--jobs (SPOTCRON_JOBS) at yours",
                     "notes.txt: not a job file: job files end in .yaml or .yml"]


def test_directory_scan_skips_schema_and_hidden_files(tmp_path):
    for name in ("b.yaml", "a.yml", "schema.yaml", "x.schema.yml", ".hidden.yaml", "readme.md", "schema.json"):
        (tmp_path / name).write_text(OK)
    files, found_problems = job_files([tmp_path, tmp_path / "b.yaml"])
    assert [f.name for f in files] == ["a.yml", "b.yaml"] and found_problems == []


def test_valid_jobs_load_sorted_with_names_from_files(tmp_path):
    specs = load_jobs_ok(tmp_path, {"zeta.yaml": OK, "alpha.yml": OK + "name: alpha\n"})
    assert [s.name for s in specs] == ["alpha", "zeta"]


def test_empty_directory_is_no_jobs(tmp_path):
    assert load_jobs([tmp_path]) == []


def test_load_job_file_raises_only_its_problems(tmp_path):
    path = tmp_path / "bot.yaml"
    path.write_text(OK + "paused: maybe\n")
    with pytest.raises(ConfigError) as caught:
        load_job_file(path)
    assert [p.field for p in caught.value.problems] == ["paused"]
    assert caught.value.problems[0].line == 3


def test_yaml_anchors_and_merge_keys_work(tmp_path):
    text = (OK + "machine: &m\n  type: n1-standard-8\nmatrix:\n  - name: a\n    machine:\n      <<: *m\n"
                 "      spot: false\n")
    (spec,) = load_jobs_ok(tmp_path, {"bot.yaml": text})
    assert spec.variants()[0].machine.type == "n1-standard-8" and spec.variants()[0].machine.spot is False


# Where a problem points comes from its kind, never its words: rewording a message must keep it
# on its line. Each case: the file text, and the problem lines expected once every cross-field
# rule of the spec says only "the words changed".
REWORDED = [
    ("checkpoint-overlaps", OK + "results: /data\ncheckpoint: /data/ckpt\n",
     ["jobs/bot.yaml:4: checkpoint: the words changed"]),
    ("history-below-a-tick", OK + "repeat: 6\nhistory_limit: 5\n",
     ["jobs/bot.yaml:4: history_limit: the words changed"]),
    ("no-image", 'schedule: "0 * * * *"\n',
     ["jobs/bot.yaml: image: required field is missing; add e.g. image: "
      "us-docker.pkg.dev/my-project/spotcron/bot:latest, or build: a folder with a Dockerfile"]),
    ("entry-name-twice", OK + "matrix:\n  - name: cpu\n  - name: cpu\n",
     ["jobs/bot.yaml:5: matrix[1].name: 'cpu' is already the name of matrix[0]; entry names must be unique "
      "within the job"]),
]


@pytest.mark.parametrize("text, expected", [(t, e) for _, t, e in REWORDED], ids=[c for c, _, _ in REWORDED])
def test_a_reworded_rule_keeps_its_place(tmp_path, monkeypatch, text, expected):
    from pydantic_core import PydanticCustomError

    from spotcron.core import spec

    def reworded(kind: str, _message: str) -> PydanticCustomError:
        return PydanticCustomError(kind, "the words changed")

    monkeypatch.setattr(spec, "PydanticCustomError", reworded)
    assert problems(tmp_path, monkeypatch, {"bot.yaml": text}) == expected


def test_a_reworded_gpu_problem_keeps_its_field(tmp_path, monkeypatch):
    from spotcron.core import catalog

    real = catalog.gpu_problem

    def reworded(*args: object) -> catalog.GpuProblem | None:
        found = real(*args)
        return found and catalog.GpuProblem(found.field, "the words changed")

    monkeypatch.setattr(catalog, "gpu_problem", reworded)
    text = OK + "matrix:\n  - name: a100\n    machine:\n      type: a2-highgpu-1g\n" \
                "      gpu: {type: nvidia-tesla-a100, count: 2}\n"
    assert problems(tmp_path, monkeypatch, {"bot.yaml": text}) == [
        "jobs/bot.yaml:7: matrix[0].machine.gpu.count: the words changed"]


def test_a_reworded_cron_error_keeps_its_field(tmp_path, monkeypatch):
    from spotcron.core import loader
    from spotcron.core.errors import CronError

    def refuse(name: str) -> None:
        raise CronError(f"time_zone {name!r} was refused", detail="the words changed")

    monkeypatch.setattr(loader, "load_time_zone", refuse)
    assert problems(tmp_path, monkeypatch, {"bot.yaml": OK + "time_zone: Mars/Olympus\n"}) == [
        "jobs/bot.yaml:3: time_zone: the words changed"]
