"""Pre-flight checks, and how Google's errors are translated and retried."""

from __future__ import annotations

from pathlib import Path

import pytest
from google.api_core import exceptions as gexc

from spotcron.core.errors import AlreadyExists, ConfigError, NotFound, Transient
from spotcron.core.settings import Settings
from spotcron.core.spec import JobSpec
from spotcron.deploy.validate import job_problems, preflight, settings_problems
from spotcron.gcp.admin.calls import Caller, DeployError, enable_command, translate_deploy_error
from tests.deploy.conftest import make_settings


def test_good_settings_have_no_problems() -> None:
    assert settings_problems(make_settings(), None) == []


def test_settings_problems_name_file_line_field_and_value(tmp_path: Path) -> None:
    stack = tmp_path / "stack.yaml"
    stack.write_text("project: My_Project\nbucket: x\nsweep_interval: 30s\njob_done_url: http://a\n")
    settings = Settings(project="My_Project", bucket="x", sweep_interval=30, job_done_url="http://a")
    assert [str(p) for p in settings_problems(settings, stack)] == [
        f"{stack}:1: project: 'My_Project' is not a project id (6-30 characters: lower-case letters, digits, '-')",
        f"{stack}:2: bucket: 'x' is not a bucket name (3-63 characters: lower-case letters, digits, '-', '_', '.')",
        f"{stack}:3: sweep_interval: 30s is too short; Cloud Scheduler fires at most once a minute (write 1m or more)",
        f"{stack}:4: job_done_url: 'http://a' must be an https:// URL, or empty so that deploy fills it in",
    ]


def test_settings_from_the_environment_say_so() -> None:
    [problem] = settings_problems(Settings(project="my-project", bucket="mine-spotcron"), None)
    assert str(problem) == ("<environment>: project: 'my-project' is the placeholder; set your Google Cloud "
                            "project id here or in SPOTCRON_PROJECT")


def test_job_problems() -> None:
    jobs = [JobSpec(name="sweep", schedule="0 * * * *", image="busybox"),
            JobSpec(name="bot", schedule="0 * * * *", image="busybox"),
            JobSpec(name="bot", schedule="5 * * * *", image="busybox")]
    assert [str(p) for p in job_problems(jobs, {"sweep": Path("jobs/sweep.yaml")})] == [
        "jobs/sweep.yaml: name: 'sweep' is reserved (its scheduler entry would be spotcron-sweep, the name of "
        "spotcron's own sweep or dispatch entry); rename the job",
        "job bot: name: 2 jobs use the name 'bot'; each job needs its own",
    ]
    with pytest.raises(ConfigError):
        preflight(make_settings(), jobs, None)


# --- error translation and retries ------------------------------------------------------------


class Flaky:
    def __init__(self, *errors: BaseException, result: str = "ok"):
        self.errors = list(errors)
        self.result = result
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return self.result


def test_transient_errors_are_retried_with_growing_capped_backoff() -> None:
    sleeps: list[float] = []
    caller = Caller("p", attempts=5, base_delay=1.0, max_delay=3.0, sleep=sleeps.append)
    caller._rng.uniform = lambda low, high: high  # the upper bound of each jitter window
    flaky = Flaky(gexc.ServiceUnavailable("busy"), gexc.TooManyRequests("slow down"),
                  gexc.InternalServerError("oops"), gexc.DeadlineExceeded("late"))
    assert caller("create topic t", flaky) == "ok"
    assert flaky.calls == 5 and sleeps == [1.0, 2.0, 3.0, 3.0]
    assert (caller.calls, caller.retries) == (5, 4)


def test_permanent_errors_are_not_retried() -> None:
    flaky = Flaky(gexc.NotFound("no such topic"))
    with pytest.raises(NotFound, match="^delete topic t: not found: no such topic$"):
        Caller("p", sleep=lambda s: None)("delete topic t", flaky)
    assert flaky.calls == 1


def test_giving_up_says_how_often_it_tried() -> None:
    flaky = Flaky(*[gexc.ServiceUnavailable("busy")] * 3)
    with pytest.raises(Transient, match=r"^list topics: HTTP 503: busy; safe to retry \(gave up after 3 attempts\)$"):
        Caller("p", attempts=3, sleep=lambda s: None)("list topics", flaky)


def test_transient_if_retries_what_the_caller_knows_is_passing() -> None:
    lag = gexc.BadRequest("Service account spotcron-vm@p.iam.gserviceaccount.com does not exist. (serviceAccount)")
    flaky = Flaky(lag)
    assert Caller("p", sleep=lambda s: None)("set policy", flaky,
                                             transient_if=lambda e: "does not exist" in str(e)) == "ok"


def test_conflict_means_already_exists() -> None:
    assert isinstance(translate_deploy_error(gexc.Conflict("exists"), "create topic t", "p"), AlreadyExists)


def test_disabled_api_names_the_command_that_enables_everything() -> None:
    error = gexc.PermissionDenied("Cloud Scheduler API has not been used in project demo-proj before or it is "
                                  "disabled.")  # no errorInfo: the message alone must be recognised
    translated = translate_deploy_error(error, "list scheduler jobs", "demo-proj")
    assert isinstance(translated, DeployError)
    assert str(translated) == (
        "list scheduler jobs: a required API is not enabled in project demo-proj. Enable every API deploy needs "
        f"with:\n  {enable_command('demo-proj')}")
    assert enable_command("demo-proj").startswith(
        "gcloud services enable compute.googleapis.com cloudscheduler.googleapis.com pubsub.googleapis.com ")


def test_disabled_api_from_error_info_names_the_service() -> None:
    from google.rpc import error_details_pb2

    info = error_details_pb2.ErrorInfo(reason="SERVICE_DISABLED", domain="googleapis.com",
                                       metadata={"service": "cloudfunctions.googleapis.com"})
    error = gexc.PermissionDenied("Cloud Functions API is disabled", details=[info], error_info=info)
    translated = translate_deploy_error(error, "list functions", "demo-proj")
    assert str(translated).startswith("list functions: cloudfunctions.googleapis.com is not enabled in project "
                                      "demo-proj. Enable every API deploy needs with:")


def test_other_permission_errors_say_which_role_is_needed() -> None:
    translated = translate_deploy_error(gexc.PermissionDenied("iam.serviceAccounts.create denied"),
                                        "create service account x", "demo-proj")
    assert str(translated) == ("create service account x: permission denied: iam.serviceAccounts.create denied. The "
                               "account running deploy needs roles/owner on demo-proj (or the admin roles listed in "
                               "docs/deploy.md).")


def test_rejected_credentials_say_how_to_log_in() -> None:
    translated = translate_deploy_error(gexc.Unauthenticated("token expired"), "list topics", "demo-proj")
    assert str(translated) == ("list topics: Google did not accept the credentials: run `gcloud auth "
                               "application-default login` (or set GOOGLE_APPLICATION_CREDENTIALS)")
