"""Documented Cloud Storage behaviour beyond what spotcron's own code calls: what a job's code or a
future feature reaches through google-cloud-storage's ordinary helpers (generation deletes, long
names, object metadata, gzip objects, globs, checksums, conditional reads, PATCH, compose,
copy/rewrite, buckets). Each test states the JSON API's documented answer and runs on every
storage server; where fake-gcs-server departs, the test says so."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
from urllib.parse import quote

import pytest

from tests.contracts.storage_servers import StorageApi


def _q(name: str) -> str:
    return quote(name, safe="")


def _objects(api: StorageApi) -> str:
    return f"/storage/v1/b/{api.bucket}/o"


def _put(api: StorageApi, name: str, data: bytes, headers: dict[str, str] | None = None, **query):
    return api.call("POST", f"/upload/storage/v1/b/{api.bucket}/o", {"uploadType": "media", "name": name, **query},
                    data, {"Content-Type": "text/plain", **(headers or {})})


def _multipart(api: StorageApi, metadata: dict, data: bytes, **query):
    boundary = "==b=="
    body = (f"--{boundary}\r\nContent-Type: application/json\r\n\r\n{json.dumps(metadata)}\r\n--{boundary}\r\n"
            f"Content-Type: text/plain\r\n\r\n").encode() + data + f"\r\n--{boundary}--".encode()
    return api.call("POST", f"/upload/storage/v1/b/{api.bucket}/o", {"uploadType": "multipart", **query}, body,
                    {"Content-Type": f'multipart/related; boundary="{boundary}"'})


def _media(api: StorageApi, name: str, headers: dict[str, str] | None = None, **query):
    return api.call("GET", f"{_objects(api)}/{_q(name)}", {"alt": "media", **query}, headers=headers)


def _meta(api: StorageApi, name: str, headers: dict[str, str] | None = None, **query):
    return api.call("GET", f"{_objects(api)}/{_q(name)}", query or None, headers=headers)


def _listed(api: StorageApi, **query) -> dict:
    reply = api.call("GET", _objects(api), query)
    assert reply.status == 200, reply.body
    return reply.json()


def _json(method: str, api: StorageApi, path: str, body: dict, **query):
    return api.call(method, path, query or None, json.dumps(body).encode(), {"Content-Type": "application/json"})


# --- deletes ------------------------------------------------------------------------------------------


def test_delete_at_an_old_generation_is_404_and_keeps_the_live_object(storage_api):
    """objects.delete `generation`: without versioning an old generation no longer exists."""
    old = _put(storage_api, "g", b"1").json()["generation"]
    _put(storage_api, "g", b"2")

    reply = storage_api.call("DELETE", f"{_objects(storage_api)}/g", {"generation": old})

    if "generation-delete" in storage_api.departures:
        assert reply.status in (200, 204)  # fake-gcs-server deletes the live object; Cloud Storage keeps it
        return
    assert reply.status == 404
    assert _media(storage_api, "g").body == b"2"


def test_delete_at_the_live_generation_deletes_it(storage_api):
    live = _put(storage_api, "g", b"1").json()["generation"]

    reply = storage_api.call("DELETE", f"{_objects(storage_api)}/g", {"generation": live})

    assert reply.status in (200, 204)
    assert _media(storage_api, "g").status == 404


# --- names --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [
    "汉" * 300,  # 900 bytes of UTF-8 in one segment
    "U" * 1000,  # upper case
    "a" * 1024,  # the longest legal name
    "runs/" + "x" * 300 + "/results/" + "É" * 200 + ".json",
    "//double//slashes//",
    "~tilde~/%41",
], ids=["cjk-900-bytes", "upper-1000", "ascii-1024", "long-segments", "slashes", "tilde"])
def test_any_legal_name_round_trips(storage_api, name):
    """Object names are any UTF-8 of 1 to 1,024 bytes, without a limit per segment."""
    stored = _put(storage_api, name, b"kept")
    if "long-names" in storage_api.departures and (max(len(s.encode()) for s in name.split("/")) > 255 or "//" in name):
        return  # fake-gcs-server keeps an object in a file named after it

    assert stored.status == 200, stored.body
    assert stored.json()["name"] == name
    assert _media(storage_api, name).body == b"kept"
    assert [item["name"] for item in _listed(storage_api, prefix=name).get("items", [])] == [name]


@pytest.mark.parametrize("name", ["a" * 1025, ".", "..", "line\nbreak", "carriage\rreturn"],
                         ids=["1025-bytes", "dot", "dot-dot", "lf", "cr"])
def test_illegal_names_are_400(storage_api, name):
    """Cloud Storage refuses names over 1,024 bytes, `.`, `..` and names with CR or LF."""
    reply = _put(storage_api, name, b"x")

    if storage_api.kind == "fake-gcs-server" and name in (".", "..", "line\nbreak", "carriage\rreturn"):
        return  # fake-gcs-server checks none of these
    assert reply.status == 400


# --- ranges -------------------------------------------------------------------------------------------


def test_a_range_on_an_empty_object_is_416(storage_api):
    _put(storage_api, "empty", b"")

    reply = _media(storage_api, "empty", {"Range": "bytes=0-"})

    if "empty-range-200" in storage_api.departures:  # fake-gcs-server sends the empty object
        assert reply.status in (200, 206)
        return
    assert reply.status == 416


# --- metadata and encodings ------------------------------------------------------------------------------


def test_metadata_sent_on_upload_is_stored(storage_api):
    fields = {"name": "described.txt", "contentType": "text/plain", "metadata": {"owner": "bot", "n": "1"},
              "cacheControl": "no-cache", "contentDisposition": "attachment; filename=\"d.txt\"",
              "contentLanguage": "en", "customTime": "2026-11-22T10:00:00.000Z"}
    created = _multipart(storage_api, fields, b"body")
    assert created.status == 200, created.body

    got = _meta(storage_api, "described.txt").json()

    for key in ("metadata", "cacheControl", "contentDisposition", "contentLanguage"):
        assert got[key] == fields[key], key
    assert got["customTime"].startswith("2026-11-22T10:00:00")


def test_a_gzip_object_is_served_raw_to_who_accepts_gzip_and_decompressed_otherwise(storage_api):
    """Decompressive transcoding: Content-Encoding gzip is stored; `Accept-Encoding: gzip` gets
    the stored bytes, any other reader the decompressed ones."""
    text = b"hello " * 1000
    packed = gzip.compress(text)
    assert _multipart(storage_api, {"name": "z.txt", "contentEncoding": "gzip"}, packed).status == 200

    raw = _media(storage_api, "z.txt", {"Accept-Encoding": "gzip"})
    plain = _media(storage_api, "z.txt", {"Accept-Encoding": "identity"})

    assert _meta(storage_api, "z.txt").json()["contentEncoding"] == "gzip"
    assert raw.status == 200
    assert raw.headers.get("content-encoding") == "gzip"
    assert raw.body == packed
    assert plain.status == 200
    assert plain.body == text


# --- listings -------------------------------------------------------------------------------------------


def test_match_glob_selects_names(storage_api):
    for name in ("logs/a.txt", "logs/b.json", "logs/deep/c.txt", "other/d.txt", "logs/e.txt.bak"):
        _put(storage_api, name, b"")

    def names(glob: str) -> list[str]:
        return [item["name"] for item in _listed(storage_api, matchGlob=glob).get("items", [])]

    if "match-glob-ignored" in storage_api.departures:
        assert len(names("logs/*.txt")) == 5  # fake-gcs-server lists everything
        return

    assert names("logs/*.txt") == ["logs/a.txt"]
    assert names("logs/**.txt") == ["logs/a.txt", "logs/deep/c.txt"]
    assert names("**/?.txt") == ["logs/a.txt", "logs/deep/c.txt", "other/d.txt"]
    assert names("logs/{a,b}.*") == ["logs/a.txt", "logs/b.json"]
    assert names("logs/[a-b].*") == ["logs/a.txt", "logs/b.json"]


def test_include_trailing_delimiter_lists_folder_placeholders_as_items(storage_api):
    for name in ("d/", "d/x", "f"):
        _put(storage_api, name, b"")

    without = _listed(storage_api, delimiter="/")
    with_it = _listed(storage_api, delimiter="/", includeTrailingDelimiter="true")

    assert [item["name"] for item in without.get("items", [])] == ["f"]
    if "trailing-delimiter-ignored" in storage_api.departures:
        return
    assert [item["name"] for item in with_it.get("items", [])] == ["d/", "f"]
    assert with_it["prefixes"] == ["d/"]


# --- checksums --------------------------------------------------------------------------------------------


def test_a_checksum_sent_with_an_upload_must_match(storage_api):
    data = b"checked"
    right = base64.b64encode(hashlib.md5(data).digest()).decode()  # noqa: S324 - Cloud Storage's md5Hash
    wrong = base64.b64encode(hashlib.md5(b"other").digest()).decode()  # noqa: S324

    assert _multipart(storage_api, {"name": "ok", "md5Hash": right}, data).status == 200
    if "upload-checksums-ignored" in storage_api.departures:
        return  # fake-gcs-server stores bytes whatever checksum came with them
    bad = _multipart(storage_api, {"name": "bad", "md5Hash": wrong}, data)
    bad_header = _put(storage_api, "bad-header", data, {"X-Goog-Hash": f"md5={wrong}"})

    assert bad.status == 400
    assert _media(storage_api, "bad").status == 404
    if "upload-hash-header-ignored" in storage_api.departures:
        return
    assert bad_header.status == 400
    assert _put(storage_api, "ok-header", data, {"X-Goog-Hash": f"md5={right}"}).status == 200


# --- conditional reads -----------------------------------------------------------------------------------


def test_if_match_and_if_none_match_on_reads(storage_api):
    _put(storage_api, "e", b"1")
    etag = _media(storage_api, "e").headers.get("etag")
    assert etag

    assert _media(storage_api, "e", {"If-Match": etag}).status == 200
    if "etag-conditions-ignored" in storage_api.departures:
        return  # fake-gcs-server answers 200 to both
    assert _media(storage_api, "e", {"If-None-Match": etag}).status == 304
    assert _media(storage_api, "e", {"If-Match": '"not-the-etag"'}).status == 412
    assert _media(storage_api, "e", {"If-None-Match": '"not-the-etag"'}).status == 200


# --- PATCH, compose, copy, rewrite ------------------------------------------------------------------------


def test_patch_merges_metadata_and_bumps_the_metageneration(storage_api):
    created = _multipart(storage_api, {"name": "p", "metadata": {"keep": "1", "drop": "2"}}, b"x").json()
    path = f"{_objects(storage_api)}/p"

    patched = _json("PATCH", storage_api, path, {"metadata": {"drop": None, "add": "3"}, "contentType": "text/csv",
                                                 "cacheControl": "no-store"}, ifMetagenerationMatch="1")
    stale = _json("PATCH", storage_api, path, {"contentType": "text/html"}, ifMetagenerationMatch="1")

    assert patched.status == 200, patched.body
    body = patched.json()
    if "patch-keeps-null-metadata" in storage_api.departures:
        assert body["metadata"]["add"] == "3"  # fake-gcs-server keeps "drop"; Cloud Storage removes it
    else:
        assert body["metadata"] == {"keep": "1", "add": "3"}
    assert (body["contentType"], body["cacheControl"]) == ("text/csv", "no-store")
    if "patch-new-generation" not in storage_api.departures:
        assert body["generation"] == created["generation"]
        assert body["metageneration"] == "2"
        assert stale.status == 412  # fake-gcs-server's metageneration stays 1
        assert _meta(storage_api, "p").json()["contentType"] == "text/csv"
    assert _media(storage_api, "p").body == b"x"


def test_compose_concatenates_its_sources(storage_api):
    first = _put(storage_api, "part-1", b"abc").json()["generation"]
    _put(storage_api, "part-2", b"def")
    path = f"{_objects(storage_api)}/whole/compose"

    done = _json("POST", storage_api, path, {"sourceObjects": [
        {"name": "part-1", "objectPreconditions": {"ifGenerationMatch": first}}, {"name": "part-2"}],
        "destination": {"contentType": "text/plain"}})

    assert done.status == 200, done.body
    if "compose-component-count" not in storage_api.departures:
        assert done.json()["componentCount"] == 2
    assert done.json()["contentType"] == "text/plain"
    assert _media(storage_api, "whole").body == b"abcdef"
    missing = _json("POST", storage_api, f"{_objects(storage_api)}/again/compose",
                    {"sourceObjects": [{"name": "part-1"}, {"name": "no-such-part"}]})
    assert missing.status == (500 if "compose-missing-source-500" in storage_api.departures else 404)


def test_compose_checks_its_preconditions(storage_api):
    _put(storage_api, "part", b"abc")
    _put(storage_api, "dest", b"old")

    stale_source = _json("POST", storage_api, f"{_objects(storage_api)}/new/compose", {"sourceObjects": [
        {"name": "part", "objectPreconditions": {"ifGenerationMatch": "1"}}]})
    taken = _json("POST", storage_api, f"{_objects(storage_api)}/dest/compose", {"sourceObjects": [{"name": "part"}]},
                  ifGenerationMatch="0")

    if "compose-preconditions-ignored" not in storage_api.departures:
        assert stale_source.status == 412
        assert taken.status == 412
        assert _media(storage_api, "dest").body == b"old"


@pytest.mark.parametrize("verb", ["copyTo", "rewriteTo"])
def test_copy_and_rewrite_make_a_new_object_with_the_sources_bytes_and_metadata(storage_api, verb):
    source = _multipart(storage_api, {"name": "src", "metadata": {"k": "v"}, "contentType": "text/csv"}, b"a,b\n")
    assert source.status == 200
    path = f"{_objects(storage_api)}/src/{verb}/b/{storage_api.bucket}/o/{_q('copies/dst')}"

    reply = api_reply = storage_api.call("POST", path, {"ifGenerationMatch": "0"}, b"",
                                         {"Content-Type": "application/json"})
    again = storage_api.call("POST", path, {"ifGenerationMatch": "0"}, b"", {"Content-Type": "application/json"})

    assert reply.status == 200, reply.body
    resource = api_reply.json()
    if verb == "rewriteTo":
        assert resource["done"] is True
        assert resource["totalBytesRewritten"] == resource["objectSize"] == "4"
        resource = resource["resource"]
    assert resource["name"] == "copies/dst"
    assert resource["contentType"] == source.json()["contentType"]
    assert resource.get("metadata") == {"k": "v"}
    assert _media(storage_api, "copies/dst").body == b"a,b\n"
    if "copy-preconditions-ignored" not in storage_api.departures:
        assert again.status == 412


def test_copy_of_a_missing_source_is_404(storage_api):
    reply = storage_api.call("POST", f"{_objects(storage_api)}/nothing/copyTo/b/{storage_api.bucket}/o/dst")

    assert reply.status == 404


# --- buckets ---------------------------------------------------------------------------------------------------


def test_bucket_get_and_list(storage_api):
    got = storage_api.call("GET", f"/storage/v1/b/{storage_api.bucket}", {"fields": "name,timeCreated,location"})
    listed = storage_api.call("GET", "/storage/v1/b", {"project": "test-project"})

    assert got.status == 200, got.body
    assert got.json()["name"] == storage_api.bucket
    assert "timeCreated" in got.json()
    assert listed.status == 200, listed.body
    assert storage_api.bucket in [item["name"] for item in listed.json().get("items", [])]
    assert storage_api.call("GET", "/storage/v1/b/no-such-bucket-here-xyz").status == 404


def test_a_resumable_upload_keeps_the_metadata_it_opened_with_and_checks_its_checksum(storage_api):
    data = b"resumed"
    right = base64.b64encode(hashlib.md5(data).digest()).decode()  # noqa: S324 - Cloud Storage's md5Hash
    wrong = base64.b64encode(hashlib.md5(b"other").digest()).decode()  # noqa: S324

    def upload(name: str, md5: str):
        opened = _json("POST", storage_api, f"/upload/storage/v1/b/{storage_api.bucket}/o",
                       {"name": name, "contentType": "text/plain", "metadata": {"step": "7"}, "md5Hash": md5},
                       uploadType="resumable")
        assert opened.status == 200, opened.body
        return storage_api.call("PUT", "", body=data, headers={"Content-Range": f"bytes 0-{len(data) - 1}/{len(data)}"},
                                url=opened.headers["location"])

    done = upload("kept", right)
    refused = upload("refused", wrong)

    assert done.status == 200, done.body
    assert _meta(storage_api, "kept").json()["metadata"] == {"step": "7"}
    if "upload-checksums-ignored" in storage_api.departures:
        return
    assert refused.status == 400
    assert _media(storage_api, "refused").status == 404
