"""How Google's errors become spotcron's: the create classifier and the general translation."""

from __future__ import annotations

import concurrent.futures

import pytest
import requests
from google.api_core import exceptions as gexc

from spotcron.core.errors import (
    AlreadyExists,
    CreateFailed,
    NotFound,
    PreconditionFailed,
    SpotcronError,
    Transient,
)
from spotcron.gcp.error_map import ApiError, classify_create_error, translate, translated


@pytest.mark.parametrize(("code", "message", "status", "kind"), [
    ("ZONE_RESOURCE_POOL_EXHAUSTED", "The zone 'projects/p/zones/z' does not have enough resources", 503,
     CreateFailed.STOCKOUT),
    ("ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", "A n1-standard-8 VM instance with 1 nvidia-tesla-t4 is "
     "currently unavailable in the us-central1-a zone.", 503, CreateFailed.STOCKOUT),
    ("UNSUPPORTED_OPERATION", "The VM was preempted while it was being created", 400, CreateFailed.STOCKOUT),
    ("QUOTA_EXCEEDED", "Quota 'GPUS_ALL_REGIONS' exceeded.  Limit: 0.0 globally.", 403, CreateFailed.QUOTA),
    ("forbidden", "Quota 'CPUS' exceeded.  Limit: 8.0 in region us-central1.", 403, CreateFailed.QUOTA),
    ("forbidden", "Required 'compute.instances.create' permission for 'projects/p'", 403,
     CreateFailed.PERMISSION),
    ("IAM_PERMISSION_DENIED", "Permission 'iam.serviceAccounts.actAs' denied", 0, CreateFailed.PERMISSION),
    ("notFound", "The resource 'projects/cos-cloud/global/images/family/cos-nope' was not found", 404,
     CreateFailed.IMAGE),
    ("notFound", "The resource 'projects/x/zones/us-central1-a/imageFamilyViews/cos-nope' was not found", 404,
     CreateFailed.IMAGE),
    ("notFound", "The resource 'projects/p/zones/us-central1-a/machineTypes/n9-huge' was not found", 404,
     CreateFailed.INVALID),
    ("invalid", "Invalid value for field 'resource.name': 'A'.", 400, CreateFailed.INVALID),
])
def test_create_refusals_are_classified(code, message, status, kind):
    error = classify_create_error(code, message, http_status=status)

    assert isinstance(error, CreateFailed)
    assert error.kind == kind
    assert error.reason == f"{code}: {message}"


@pytest.mark.parametrize(("code", "status", "expected"), [
    ("alreadyExists", 409, AlreadyExists),
    ("RESOURCE_ALREADY_EXISTS", 0, AlreadyExists),
    ("backendError", 503, Transient),
    ("rateLimitExceeded", 403, Transient),
    ("", 429, Transient),
    ("INTERNAL_ERROR", 500, Transient),
])
def test_create_answers_that_are_not_refusals(code, status, expected):
    assert type(classify_create_error(code, "m", http_status=status)) is expected


def test_only_a_stockout_lets_the_caller_try_another_zone():
    assert classify_create_error("ZONE_RESOURCE_POOL_EXHAUSTED", "m").try_another_zone
    assert not classify_create_error("QUOTA_EXCEEDED", "m").try_another_zone


@pytest.mark.parametrize(("exc", "expected", "text"), [
    (gexc.NotFound("No such object: b/x"), NotFound, "read x: not found: No such object: b/x"),
    (gexc.Conflict("exists"), AlreadyExists, "read x: already exists: exists"),
    (gexc.AlreadyExists("exists"), AlreadyExists, "read x: already exists: exists"),
    (gexc.PreconditionFailed("conditionNotMet"), PreconditionFailed, "read x: precondition failed: conditionNotMet"),
    (gexc.ServiceUnavailable("down"), Transient, "read x: HTTP 503: down; safe to retry"),
    (gexc.InternalServerError("boom"), Transient, "read x: HTTP 500: boom; safe to retry"),
    (gexc.TooManyRequests("slow down"), Transient, "read x: HTTP 429: slow down; safe to retry"),
    (gexc.DeadlineExceeded("late"), Transient, "read x: deadline exceeded (late); it may still have happened"),
    (gexc.RetryError("gave up", None), Transient, "read x: deadline exceeded (gave up); it may still have happened"),
    (requests.exceptions.ReadTimeout("read timed out"), Transient,
     "read x: ReadTimeout: read timed out; it may still have happened"),
    (concurrent.futures.TimeoutError(), Transient, "read x: no answer in time; it may still have happened"),
    (gexc.Forbidden("Required 'storage.objects.get' permission"), ApiError,
     "read x: HTTP 403: Required 'storage.objects.get' permission"),
    (gexc.BadRequest("Invalid bucket name"), ApiError, "read x: HTTP 400: Invalid bucket name"),
])
def test_translate(exc, expected, text):
    mapped = translate(exc, "read x")

    assert type(mapped) is expected
    assert str(mapped) == text


HINT = "run `gcloud auth application-default login` (or set GOOGLE_APPLICATION_CREDENTIALS)"


def test_missing_or_refused_credentials_say_how_to_log_in():
    from google.auth import exceptions as auth_exc

    missing = translate(auth_exc.DefaultCredentialsError("Your default credentials were not found."), "read x")
    refused = translate(auth_exc.RefreshError("invalid_grant: Bad Request"), "read x")

    assert type(missing) is SpotcronError and type(refused) is SpotcronError
    assert str(missing) == f"read x: no Google credentials found: {HINT}"
    assert str(refused) == f"read x: Google did not accept the credentials (invalid_grant: Bad Request): {HINT}"


@pytest.fixture
def no_credentials(monkeypatch, tmp_path):
    """Application Default Credentials that point at a file that does not exist, and no emulator."""
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    for name in ("STORAGE_EMULATOR_HOST", "PUBSUB_EMULATOR_HOST"):
        monkeypatch.delenv(name, raising=False)


def test_adapters_without_credentials_raise_our_error_not_googles(no_credentials):
    """Clients are made on first use; making one is where missing credentials show up."""
    from spotcron.gcp.compute import GoogleCompute
    from spotcron.gcp.pubsub import PubSubEvents
    from spotcron.gcp.storage import GcsBlobs

    with pytest.raises(SpotcronError, match="^open gs://b: no Google credentials found: run `gcloud auth"):
        GcsBlobs("b").list("runs/")
    with pytest.raises(SpotcronError, match="^connect to Compute Engine in project p: no Google credentials"):
        GoogleCompute("p").list_managed()
    with pytest.raises(SpotcronError, match="^connect to Pub/Sub in project p: no Google credentials"):
        PubSubEvents("p").publish("spotcron-events", {"x": 1})


def test_translate_leaves_programming_errors_alone():
    assert translate(KeyError("k"), "read x") is None
    with pytest.raises(KeyError), translated("read x"):
        raise KeyError("k")


def test_translated_chains_the_google_exception():
    with pytest.raises(NotFound) as caught, translated("get instance a in z"):
        raise gexc.NotFound("gone")
    assert isinstance(caught.value.__cause__, gexc.NotFound)
