"""The Blobs port's contract, for MemoryBlobs and GcsBlobs on the local storage server and on
fake-gcs-server: every one enforces generation preconditions on writes."""

from __future__ import annotations

import pytest

from spotcron.core.errors import PreconditionFailed
from spotcron.engine.ports import Blobs

RUN = "runs/bot/20261122-1000/run.json"


def test_implements_the_protocol(blobs):
    assert isinstance(blobs, Blobs)
    assert blobs.bucket


def test_read_missing_is_none(blobs):
    assert blobs.read(RUN) is None


def test_write_then_read_gives_the_bytes_generation_and_type(blobs):
    generation = blobs.write(RUN, b'{"state":"starting"}', content_type="application/json")

    blob = blobs.read(RUN)

    assert generation > 0
    assert (blob.name, blob.data, blob.generation) == (RUN, b'{"state":"starting"}', generation)
    assert blob.content_type == "application/json"
    assert blob.json() == {"state": "starting"}
    assert blob.updated is not None


def test_binary_data_survives(blobs):
    data = bytes(range(256))
    blobs.write("runs/bot/x/attempt-1/results/out.bin", data)

    assert blobs.read("runs/bot/x/attempt-1/results/out.bin").data == data


def test_an_overwrite_has_a_newer_generation(blobs):
    first = blobs.write(RUN, b"1")
    second = blobs.write(RUN, b"2")

    assert second > first
    assert blobs.read(RUN).data == b"2"


def test_create_only_on_an_absent_object_creates_it(blobs):
    generation = blobs.write(RUN, b"1", if_generation_match=0)

    assert blobs.read(RUN).generation == generation


def test_replace_at_the_current_generation_succeeds(blobs):
    first = blobs.write(RUN, b"1")

    second = blobs.write(RUN, b"2", if_generation_match=first)

    assert second > first
    assert blobs.read(RUN).data == b"2"


def test_create_only_twice_is_precondition_failed(blobs):
    blobs.write(RUN, b"first", if_generation_match=0)

    with pytest.raises(PreconditionFailed) as caught:
        blobs.write(RUN, b"second", if_generation_match=0)

    assert RUN in str(caught.value)
    assert blobs.read(RUN).data == b"first"


def test_replace_at_a_stale_generation_is_precondition_failed(blobs):
    first = blobs.write(RUN, b"1")
    blobs.write(RUN, b"2", if_generation_match=first)

    with pytest.raises(PreconditionFailed):
        blobs.write(RUN, b"3", if_generation_match=first)

    assert blobs.read(RUN).data == b"2"


def test_replace_of_an_absent_object_is_precondition_failed(blobs):
    with pytest.raises(PreconditionFailed):
        blobs.write(RUN, b"x", if_generation_match=12345)

    assert blobs.read(RUN) is None


def test_list_by_prefix_is_sorted_and_complete(blobs):
    names = [f"runs/bot/20261122-{hour:02d}00/run.json" for hour in range(8)]
    for name in reversed(names):  # written out of order, more than one page of the recording fake
        blobs.write(name, b"{}")
    blobs.write("runs/bot/20261122-0000/attempt-1/manifest.json", b"{}")
    blobs.write("runs/bots/20261122-0000/run.json", b"{}")
    blobs.write("runs/other/20261122-0000/run.json", b"{}")

    listed = blobs.list("runs/bot/")

    assert listed == sorted(names + ["runs/bot/20261122-0000/attempt-1/manifest.json"])


def test_a_prefix_is_a_string_prefix_not_a_folder(blobs):
    blobs.write("runs/bot/1/run.json", b"{}")
    blobs.write("runs/bots/1/run.json", b"{}")

    assert blobs.list("runs/bot") == ["runs/bot/1/run.json", "runs/bots/1/run.json"]


def test_a_bounded_listing_returns_at_most_its_limit_from_where_it_is_told(blobs):
    names = [f"runs/bot/r{i:02d}/run.json" for i in range(12)]
    for name in reversed(names):  # more than one page of the recording fake
        blobs.write(name, b"{}")
    blobs.write("runs/bots/r00/run.json", b"{}")

    assert blobs.list_some("runs/bot/", 3) == names[:3]
    assert blobs.list_some("runs/bot/", 4, start="runs/bot/r05") == names[5:9]
    assert blobs.list_some("runs/bot/", 50, start="runs/bot/r10/run.json0") == names[11:]
    assert blobs.list_some("runs/bot/", 5, start="runs/bot0") == []


def test_a_folder_listing_names_each_folder_once_never_the_objects_in_it(blobs):
    for run in ("r00", "r01", "r02", "r03"):
        for name in ("run.json", "attempt-1/results/a", "attempt-1/results/b", "checkpoint/c.tar"):
            blobs.write(f"runs/bot/{run}/{name}", b"x")
    blobs.write("runs/bot/loose", b"x")  # directly under the prefix: not a folder
    blobs.write("runs/bots/r00/run.json", b"{}")

    assert blobs.list_folders("runs/bot/", 10) == [f"runs/bot/r0{i}/" for i in range(4)]
    assert blobs.list_folders("runs/bot/", 2) == ["runs/bot/r00/", "runs/bot/r01/"]
    # Paging on: start just past every object of the last folder seen ('0' follows '/').
    assert blobs.list_folders("runs/bot/", 2, start="runs/bot/r010") == ["runs/bot/r02/", "runs/bot/r03/"]
    assert blobs.list_folders("runs/bot/", 5, start="runs/bot/r02") == ["runs/bot/r02/", "runs/bot/r03/"]
    assert blobs.list_folders("runs/", 10) == ["runs/bot/", "runs/bots/"]
    assert blobs.list_folders("runs/nobody/", 10) == []


def test_list_of_nothing_is_empty(blobs):
    assert blobs.list("runs/nobody/") == []


def test_delete_twice_is_true_then_false(blobs):
    blobs.write(RUN, b"{}")

    assert blobs.delete(RUN) is True
    assert blobs.delete(RUN) is False
    assert blobs.read(RUN) is None
    assert blobs.list("runs/") == []


def test_a_deleted_object_can_be_created_again_create_only(blobs):
    blobs.write(RUN, b"1")
    blobs.delete(RUN)

    blobs.write(RUN, b"2", if_generation_match=0)

    assert blobs.read(RUN).data == b"2"


def test_read_range_gives_a_slice_without_reading_the_rest(blobs):
    data = bytes(range(256)) * 40  # 10240 bytes
    blobs.write("logs/big.txt", data, content_type="text/plain")
    assert blobs.read_range("logs/big.txt", 0, 100) == data[:100]
    assert blobs.read_range("logs/big.txt", 10_000, 1000) == data[10_000:]  # a short last piece
    assert blobs.read_range("logs/big.txt", 10_240, 100) == b""  # at the end: nothing more yet
    assert blobs.read_range("logs/big.txt", 20_000, 100) == b""
    assert blobs.read_range("logs/missing.txt", 0, 100) is None
    blobs.write("logs/empty.txt", b"", content_type="text/plain")
    assert blobs.read_range("logs/empty.txt", 0, 100) == b""
