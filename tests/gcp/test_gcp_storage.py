"""GcsBlobs on the wire: the requests google-cloud-storage sends for it, against the recording fake.
Its behaviour against real servers is the storage contract (tests/contracts)."""

from __future__ import annotations

import pytest

from spotcron.core.errors import ObjectKept, PreconditionFailed
from spotcron.gcp.error_map import ApiError
from tests.gcp.fixtures import BUCKET

UPLOAD = f"/upload/storage/v1/b/{BUCKET}/o"
LIST = f"/storage/v1/b/{BUCKET}/o"
RUN = "runs/bot/20261122-1000/run.json"
RUN_PATH = f"/storage/v1/b/{BUCKET}/o/runs%2Fbot%2F20261122-1000%2Frun.json"
RUN_DOWNLOAD = f"/download/storage/v1/b/{BUCKET}/o/runs%2Fbot%2F20261122-1000%2Frun.json"


def test_create_only_write_sends_if_generation_match_zero_and_maps_412(fake_gcs, fake_gcs_blobs):
    first = fake_gcs_blobs.write(RUN, b'{"state":"starting"}', if_generation_match=0, content_type="application/json")

    with pytest.raises(PreconditionFailed) as caught:
        fake_gcs_blobs.write(RUN, b'{"state":"other"}', if_generation_match=0)

    assert str(caught.value) == (f"write gs://{BUCKET}/{RUN}: the object is not absent (if_generation_match=0)")
    assert [c.param("ifGenerationMatch") for c in fake_gcs.calls("POST", UPLOAD)] == ["0", "0"]
    assert fake_gcs.buckets[BUCKET][RUN].generation == first
    assert fake_gcs.buckets[BUCKET][RUN].data == b'{"state":"starting"}'


def test_replace_at_a_stale_generation_is_refused(fake_gcs, fake_gcs_blobs):
    first = fake_gcs_blobs.write(RUN, b"1")
    second = fake_gcs_blobs.write(RUN, b"2", if_generation_match=first)

    with pytest.raises(PreconditionFailed) as caught:
        fake_gcs_blobs.write(RUN, b"3", if_generation_match=first)

    assert second != first
    assert str(caught.value) == f"write gs://{BUCKET}/{RUN}: the object is not at generation {first} " \
                                f"(if_generation_match={first})"


def test_a_plain_write_sends_no_precondition(fake_gcs, fake_gcs_blobs):
    fake_gcs_blobs.write(RUN, b"x")

    assert fake_gcs.calls("POST", UPLOAD)[0].param("ifGenerationMatch") is None


def test_read_downloads_exactly_the_generation_it_looked_up(fake_gcs, fake_gcs_blobs):
    generation = fake_gcs.put(BUCKET, RUN, b'{"a":1}', "application/json")

    blob = fake_gcs_blobs.read(RUN)

    assert (blob.data, blob.generation, blob.content_type) == (b'{"a":1}', generation, "application/json")
    assert blob.updated is not None and blob.updated.tzinfo is not None
    [download] = fake_gcs.calls("GET", RUN_DOWNLOAD)
    assert download.param("ifGenerationMatch") == str(generation)


def test_read_starts_over_when_the_object_is_replaced_between_lookup_and_download(fake_gcs, fake_gcs_blobs):
    fake_gcs.put(BUCKET, RUN, b"old")
    fake_gcs.fail_next("GET", RUN_DOWNLOAD, 412, "At least one of the pre-conditions you specified did not hold.",
                       "conditionNotMet")

    blob = fake_gcs_blobs.read(RUN)

    assert blob.data == b"old"
    assert len(fake_gcs.calls("GET", RUN_PATH)) == 2
    assert len(fake_gcs.calls("GET", RUN_DOWNLOAD)) == 2


def test_read_missing_is_none_and_makes_one_call(fake_gcs, fake_gcs_blobs):
    assert fake_gcs_blobs.read(RUN) is None
    assert [c.path for c in fake_gcs.calls() if c.path != f"/storage/v1/b/{BUCKET}"] == [RUN_PATH]


def test_list_follows_every_page(fake_gcs, fake_gcs_blobs):
    names = [f"runs/bot/{n:02d}/run.json" for n in range(7)]
    for name in reversed(names):
        fake_gcs.put(BUCKET, name, b"{}")
    fake_gcs.put(BUCKET, "runs/other/00/run.json", b"{}")

    assert fake_gcs_blobs.list("runs/bot/") == names
    assert [c.param("pageToken") for c in fake_gcs.calls("GET", LIST)] == [None, "3", "6"]
    assert {(c.param("prefix"), c.param("fields")) for c in fake_gcs.calls("GET", LIST)} == {
        ("runs/bot/", "items(name),nextPageToken")}


def test_list_folders_asks_for_prefixes_with_a_delimiter_from_its_start(fake_gcs, fake_gcs_blobs):
    for run in range(5):
        for name in ("run.json", "attempt-1/results/a", "attempt-1/results/b"):
            fake_gcs.put(BUCKET, f"runs/bot/{run:02d}/{name}", b"{}")

    assert fake_gcs_blobs.list_folders("runs/bot/", 4, start="runs/bot/01") == [
        f"runs/bot/{run:02d}/" for run in range(1, 5)]
    calls = fake_gcs.calls("GET", LIST)
    assert [(c.param("prefix"), c.param("delimiter"), c.param("startOffset"), c.param("maxResults"),
             c.param("fields")) for c in calls] == [("runs/bot/", "/", "runs/bot/01", "4", "prefixes,nextPageToken")]


def test_permission_denied_is_an_api_error_naming_the_object(fake_gcs, fake_gcs_blobs):
    fake_gcs.fail_next("GET", RUN_PATH, 403, "spotcron-vm does not have storage.objects.get access")

    with pytest.raises(ApiError) as caught:
        fake_gcs_blobs.read(RUN)

    assert caught.value.status == 403
    assert str(caught.value).startswith(f"read gs://{BUCKET}/{RUN}: HTTP 403: ")
    assert "does not have storage.objects.get access" in str(caught.value)


@pytest.mark.parametrize("kind", ["temporary", "event_based"])
def test_deleting_a_held_object_is_object_kept_not_a_missing_permission(fake_gcs, fake_gcs_blobs, kind):
    fake_gcs.put(BUCKET, RUN, b"{}")
    fake_gcs.hold(BUCKET, RUN, temporary=kind == "temporary", event_based=kind == "event_based")

    with pytest.raises(ObjectKept, match="hold and cannot be deleted"):
        fake_gcs_blobs.delete(RUN)
    assert RUN in fake_gcs.buckets[BUCKET]

    fake_gcs.hold(BUCKET, RUN, temporary=False, event_based=False)
    assert fake_gcs_blobs.delete(RUN)


def test_deleting_a_retained_object_is_object_kept(fake_gcs, fake_gcs_blobs):
    fake_gcs.put(BUCKET, RUN, b"{}")
    fake_gcs.retention_s[BUCKET] = 3600

    with pytest.raises(ObjectKept, match="retention policy"):
        fake_gcs_blobs.delete(RUN)


def test_a_delete_refused_for_want_of_permission_stays_an_api_error(fake_gcs, fake_gcs_blobs):
    fake_gcs.put(BUCKET, RUN, b"{}")
    fake_gcs.fail_next("DELETE", RUN_PATH, 403, "spotcron-fn does not have storage.objects.delete access")

    with pytest.raises(ApiError) as caught:
        fake_gcs_blobs.delete(RUN)
    assert caught.value.status == 403
