"""The Cloud Storage JSON API as spotcron and its runner speak it, on the local storage server and on
fake-gcs-server: uploads (media, multipart, resumable), preconditions, listings, downloads."""

from __future__ import annotations

import json

import pytest

from tests.contracts.storage_servers import StorageApi

CHUNK = 256 * 1024  # resumable chunks are multiples of 256 KiB, but the last


def _upload(api: StorageApi, name: str, data: bytes, **query) -> object:
    return api.call("POST", f"/upload/storage/v1/b/{api.bucket}/o",
                    {"uploadType": "media", "name": name, **query}, data, {"Content-Type": "text/plain"})


def _media(api: StorageApi, name: str, **query) -> object:
    return api.call("GET", f"/storage/v1/b/{api.bucket}/o/{_q(name)}", {"alt": "media", **query})


def _q(name: str) -> str:
    from urllib.parse import quote

    return quote(name, safe="")


def _start_resumable(api: StorageApi, name: str, **query) -> str:
    reply = api.call("POST", f"/upload/storage/v1/b/{api.bucket}/o", {"uploadType": "resumable", "name": name, **query},
                     json.dumps({"contentType": "text/plain"}).encode(),
                     {"Content-Type": "application/json; charset=UTF-8", "X-Upload-Content-Type": "text/plain"})
    assert reply.status == 200, reply.body
    return reply.headers["location"]


def test_media_upload_then_metadata_and_bytes(storage_api):
    reply = _upload(storage_api, "runs/a/attempt-1/logs.txt", b"hello\n")

    assert reply.status == 200
    created = reply.json()
    assert (created["name"], created["size"], created["contentType"]) == ("runs/a/attempt-1/logs.txt", "6", "text/plain")
    meta = storage_api.call("GET", f"/storage/v1/b/{storage_api.bucket}/o/{_q('runs/a/attempt-1/logs.txt')}").json()
    assert meta["generation"] == created["generation"] and int(meta["generation"]) > 0
    assert _media(storage_api, "runs/a/attempt-1/logs.txt").body == b"hello\n"


def test_an_empty_object_and_a_json_body_are_stored_verbatim(storage_api):
    assert _upload(storage_api, "empty", b"").status == 200
    reply = storage_api.call("POST", f"/upload/storage/v1/b/{storage_api.bucket}/o",
                             {"uploadType": "media", "name": "m.json"}, b'{"a": 1}', {"Content-Type": "application/json"})
    assert reply.status == 200

    assert _media(storage_api, "empty").body == b""
    assert _media(storage_api, "m.json").body == b'{"a": 1}'


def test_multipart_upload_takes_name_and_type_from_its_metadata(storage_api):
    boundary = "==boundary=="
    body = (f"--{boundary}\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n"
            + json.dumps({"name": "runs/b/run.json", "contentType": "application/json"})
            + f"\r\n--{boundary}\r\nContent-Type: application/json\r\n\r\n").encode() + \
        bytes(range(256)) + f"\r\n--{boundary}--".encode()
    reply = storage_api.call("POST", f"/upload/storage/v1/b/{storage_api.bucket}/o", {"uploadType": "multipart"}, body,
                             {"Content-Type": f'multipart/related; boundary="{boundary}"'})

    assert reply.status == 200, reply.body
    assert reply.json()["contentType"] == "application/json"
    assert _media(storage_api, "runs/b/run.json").body == bytes(range(256))


def test_resumable_upload_in_chunks_with_status_queries(storage_api):
    data = bytes(range(256)) * (CHUNK // 256) + b"tail of ten"
    location = _start_resumable(storage_api, "runs/c/attempt-1/results/big.bin")

    first = storage_api.call("PUT", "", body=data[:CHUNK], headers={"Content-Range": f"bytes 0-{CHUNK - 1}/*"},
                             url=location)
    assert first.status == 308
    assert first.headers["range"] == f"bytes=0-{CHUNK - 1}"

    if "status-query-finalizes" not in storage_api.departures:
        status = storage_api.call("PUT", "", body=b"", headers={"Content-Range": "bytes */*"}, url=location)
        assert (status.status, status.headers["range"]) == (308, f"bytes=0-{CHUNK - 1}")

    last = storage_api.call("PUT", "", body=data[CHUNK:],
                            headers={"Content-Range": f"bytes {CHUNK}-{len(data) - 1}/{len(data)}"}, url=location)
    assert last.status in (200, 201), last.body
    assert last.json()["size"] == str(len(data))
    assert _media(storage_api, "runs/c/attempt-1/results/big.bin").body == data


def test_a_status_query_before_any_bytes(storage_api):
    location = _start_resumable(storage_api, "not-yet.txt")

    nothing = storage_api.call("PUT", "", body=b"", headers={"Content-Range": "bytes */*"}, url=location)

    if "status-query-finalizes" in storage_api.departures:
        assert nothing.status == 200  # fake-gcs-server ends the upload here; Cloud Storage does not
        return
    assert nothing.status == 308
    assert "range" not in nothing.headers  # no bytes yet: no Range header
    done = storage_api.call("PUT", "", body=b"abc", headers={"Content-Range": "bytes 0-2/3"}, url=location)
    assert done.status == 200
    assert _media(storage_api, "not-yet.txt").body == b"abc"


def test_a_repeated_chunk_is_stored_once(storage_api):
    location = _start_resumable(storage_api, "again.bin")
    data = b"a" * CHUNK + b"b" * CHUNK + b"end"
    storage_api.call("PUT", "", body=data[:CHUNK], headers={"Content-Range": f"bytes 0-{CHUNK - 1}/*"}, url=location)
    storage_api.call("PUT", "", body=data[CHUNK:2 * CHUNK], headers={"Content-Range": f"bytes {CHUNK}-{2 * CHUNK - 1}/*"},
                     url=location)

    # The answer to the second chunk was lost: the client sends it again, then the rest.
    again = storage_api.call("PUT", "", body=data[CHUNK:2 * CHUNK],
                             headers={"Content-Range": f"bytes {CHUNK}-{2 * CHUNK - 1}/*"}, url=location)
    done = storage_api.call("PUT", "", body=data[2 * CHUNK:],
                            headers={"Content-Range": f"bytes {2 * CHUNK}-{len(data) - 1}/{len(data)}"}, url=location)

    assert again.status == 308
    assert done.status == 200
    if "repeated-chunk-appended" in storage_api.departures:  # fake-gcs-server stores the chunk twice
        assert _media(storage_api, "again.bin").body == data[:2 * CHUNK] + data[CHUNK:]
        return
    assert again.headers["range"] == f"bytes=0-{2 * CHUNK - 1}"
    assert _media(storage_api, "again.bin").body == data


def test_resumable_upload_in_one_put(storage_api):
    location = _start_resumable(storage_api, "one-put.txt")

    done = storage_api.call("PUT", "", body=b"all of it", headers={"Content-Range": "bytes 0-8/9"}, url=location)

    assert done.status in (200, 201)
    assert _media(storage_api, "one-put.txt").body == b"all of it"


def _multipart(api: StorageApi, name: str, data: bytes, **query) -> object:
    boundary = "==b=="
    body = (f"--{boundary}\r\nContent-Type: application/json\r\n\r\n{json.dumps({'name': name})}\r\n--{boundary}\r\n"
            f"Content-Type: text/plain\r\n\r\n").encode() + data + f"\r\n--{boundary}--".encode()
    return api.call("POST", f"/upload/storage/v1/b/{api.bucket}/o", {"uploadType": "multipart", **query}, body,
                    {"Content-Type": f'multipart/related; boundary="{boundary}"'})


def _write(api: StorageApi, name: str, data: bytes, **query) -> object:
    """Uploads whose preconditions every server honours: multipart where media ignores them."""
    if "media-preconditions" in api.departures:
        return _multipart(api, name, data, **query)
    return _upload(api, name, data, **query)


def test_media_upload_preconditions(storage_api):
    _upload(storage_api, "m", b"1")

    reply = _upload(storage_api, "m", b"2", ifGenerationMatch="0")

    if "media-preconditions" in storage_api.departures:
        assert reply.status == 200  # fake-gcs-server overwrites; Cloud Storage answers 412
    else:
        assert reply.status == 412
        assert _media(storage_api, "m").body == b"1"


def test_create_only_write_twice_is_412(storage_api):
    assert _write(storage_api, "runs/d/run.json", b"1", ifGenerationMatch="0").status == 200

    again = _write(storage_api, "runs/d/run.json", b"2", ifGenerationMatch="0")

    assert again.status == 412
    assert again.json()["error"]["code"] == 412
    assert _media(storage_api, "runs/d/run.json").body == b"1"


def test_replace_at_the_current_generation_then_at_a_stale_one(storage_api):
    first = _upload(storage_api, "x", b"1").json()["generation"]

    assert _write(storage_api, "x", b"2", ifGenerationMatch=first).status == 200
    assert _write(storage_api, "x", b"3", ifGenerationMatch=first).status == 412
    assert _media(storage_api, "x").body == b"2"


def test_metageneration_match_on_a_fresh_object(storage_api):
    _upload(storage_api, "x", b"1")

    assert _write(storage_api, "x", b"2", ifMetagenerationMatch="1").status == 200
    stale = _write(storage_api, "x", b"3", ifMetagenerationMatch="7")
    # fake-gcs-server checks only ifGenerationMatch on writes; Cloud Storage checks both.
    assert stale.status == (200 if "metageneration-preconditions" in storage_api.departures else 412)


def _deleted(api: StorageApi) -> int:
    return 200 if "deletes-answer-200" in api.departures else 204


def test_delete_then_read_is_404(storage_api):
    _upload(storage_api, "gone", b"1")

    assert storage_api.call("DELETE", f"/storage/v1/b/{storage_api.bucket}/o/gone").status == _deleted(storage_api)
    missing = _media(storage_api, "gone")
    assert missing.status == 404
    if storage_api.kind == "local-server":  # fake-gcs-server's 404 has a plain-text body
        assert missing.json()["error"]["code"] == 404
    assert storage_api.call("DELETE", f"/storage/v1/b/{storage_api.bucket}/o/gone").status == 404


def test_delete_at_a_stale_generation(storage_api):
    first = _upload(storage_api, "kept", b"1").json()["generation"]
    _upload(storage_api, "kept", b"2")

    reply = storage_api.call("DELETE", f"/storage/v1/b/{storage_api.bucket}/o/kept", {"ifGenerationMatch": first})

    if "delete-preconditions" in storage_api.departures:
        assert reply.status == _deleted(storage_api)  # fake-gcs-server deletes anyway; Cloud Storage answers 412
    else:
        assert reply.status == 412
        assert _media(storage_api, "kept").body == b"2"


def test_listing_with_a_prefix_and_a_delimiter(storage_api):
    for name in ("runs/bot/1/run.json", "runs/bot/1/attempt-1/logs.txt", "runs/bot/2/run.json", "runs/bots/1/run.json",
                 "runs/bot/top.txt", "live/bot/1"):
        _upload(storage_api, name, b"{}")

    listed = storage_api.call("GET", f"/storage/v1/b/{storage_api.bucket}/o",
                              {"prefix": "runs/bot/", "delimiter": "/"}).json()

    assert [item["name"] for item in listed.get("items", [])] == ["runs/bot/top.txt"]
    assert sorted(listed["prefixes"]) == ["runs/bot/1/", "runs/bot/2/"]


def test_listing_pages_follow_next_page_token(storage_api):
    names = [f"runs/p/{n:02d}" for n in range(7)]
    for name in reversed(names):
        _upload(storage_api, name, b"")
    _upload(storage_api, "runs/q/00", b"")

    seen, token, pages = [], None, 0
    while True:
        query = {"prefix": "runs/p/", "maxResults": "3", **({"pageToken": token} if token else {})}
        page = storage_api.call("GET", f"/storage/v1/b/{storage_api.bucket}/o", query).json()
        pages += 1
        seen += [item["name"] for item in page.get("items", [])]
        token = page.get("nextPageToken")
        if not token:
            break

    assert seen == names
    assert pages == 3


def test_a_byte_range_download(storage_api):
    _upload(storage_api, "r", b"0123456789")

    reply = _media(storage_api, "r")
    part = storage_api.call("GET", f"/storage/v1/b/{storage_api.bucket}/o/r", {"alt": "media"},
                            headers={"Range": "bytes=2-5"})

    assert reply.body == b"0123456789"
    assert (part.status, part.body) == (206, b"2345")


@pytest.mark.parametrize("name", ["a b/c+d", "Upper/lower", "ünï/cødé", "dots/a..b/.c", "sp%25cial"])
def test_names_with_any_characters_round_trip(storage_api, name):
    assert _upload(storage_api, name, name.encode()).status == 200

    assert _media(storage_api, name).body == name.encode()
    listed = storage_api.call("GET", f"/storage/v1/b/{storage_api.bucket}/o", {"prefix": name}).json()
    assert [item["name"] for item in listed["items"]] == [name]
