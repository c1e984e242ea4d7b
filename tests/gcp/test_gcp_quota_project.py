"""Deploy's calls are checked and billed against the stack's project, whatever quota project the
credentials carry. `gcloud auth application-default login` "tries to find a quota project from
gcloud's context and write it to ADC"
(https://cloud.google.com/sdk/gcloud/reference/auth/application-default/login): another project
than the stack's, for anyone whose gcloud points elsewhere. Google then answers SERVICE_DISABLED
naming that project (its ErrorInfo `consumer`), which no wait in the stack's project ends."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from google.api_core import exceptions as gexc
from google.rpc import error_details_pb2

from spotcron.gcp.admin.calls import Caller, DeployError, ForeignQuotaProject
from spotcron.gcp.admin.credentials import default_credentials
from spotcron.gcp.admin.settling import Settling


def adc_file(tmp_path: Path, quota_project: str) -> Path:
    """What `gcloud auth application-default login` writes (an authorized_user file)."""
    path = tmp_path / "application_default_credentials.json"
    path.write_text(json.dumps({"type": "authorized_user", "client_id": "id.apps.googleusercontent.com",
                                "client_secret": "not-a-secret", "refresh_token": "1//refresh",
                                "quota_project_id": quota_project}))
    return path


def test_the_stack_project_replaces_the_quota_project_gcloud_wrote(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GOOGLE_CLOUD_QUOTA_PROJECT", raising=False)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(adc_file(tmp_path, "gcloud-context-proj")))
    assert default_credentials("demo-proj").quota_project_id == "demo-proj"


def test_credentials_without_a_quota_project_get_the_stacks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GOOGLE_CLOUD_QUOTA_PROJECT", raising=False)
    path = adc_file(tmp_path, "x")
    data = json.loads(path.read_text())
    del data["quota_project_id"]
    path.write_text(json.dumps(data))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(path))
    assert default_credentials("demo-proj").quota_project_id == "demo-proj"


def disabled_in(consumer: str) -> gexc.PermissionDenied:
    """Google's 403 SERVICE_DISABLED, naming the project checked (by number, as Google does)."""
    info = error_details_pb2.ErrorInfo(reason="SERVICE_DISABLED", domain="googleapis.com", metadata={
        "service": "cloudfunctions.googleapis.com", "consumer": f"projects/{consumer}"})
    return gexc.PermissionDenied(
        f"Cloud Functions API has not been used in project {consumer} before or it is disabled. Enable it by "
        f"visiting https://console.developers.google.com/apis/api/cloudfunctions.googleapis.com/overview?project="
        f"{consumer} then retry. If you enabled this API recently, wait a few minutes for the action to propagate "
        "to our systems and retry.", details=[info], error_info=info)


def refuse(error: Exception):
    def call() -> None:
        raise error
    return call


def test_service_disabled_in_another_project_is_not_waited_for_and_says_how_to_fix() -> None:
    call = Caller("demo-proj", sleep=lambda s: None)
    call.project_number = "123456789012"
    settling = Settling(sleep=lambda s: None)
    with pytest.raises(ForeignQuotaProject) as raised:
        settling.run("list functions", lambda: call("list functions", refuse(disabled_in("999999999999"))))
    assert settling.waits == 0
    assert "disabled in project 999999999999, not the stack's project demo-proj" in str(raised.value)
    assert "gcloud auth application-default set-quota-project demo-proj" in str(raised.value)


def test_service_disabled_in_the_stacks_own_project_is_still_waited_for() -> None:
    call = Caller("demo-proj", sleep=lambda s: None)
    call.project_number = "123456789012"
    settling = Settling(sleep=lambda s: None, budget_s=30)
    with pytest.raises(DeployError, match="is not enabled in project demo-proj") as raised:
        settling.run("list functions", lambda: call("list functions", refuse(disabled_in("123456789012"))))
    assert not isinstance(raised.value, ForeignQuotaProject)
    assert settling.waits > 0


def test_a_project_named_by_id_is_compared_before_the_number_is_known() -> None:
    call = Caller("demo-proj", sleep=lambda s: None)
    with pytest.raises(ForeignQuotaProject):
        call("list functions", refuse(disabled_in("gcloud-context-proj")))
