"""Fixtures every engine-level test directory uses: the functions on in-memory backends."""

import pytest

from spotcron.runtime import entrypoints
from spotcron.testing.harness import Harness, make_spec


@pytest.fixture
def h():
    harness = Harness()
    yield harness
    entrypoints.use(None)


@pytest.fixture
def running(h):
    """The harness with job `bot`'s run of 2026-11-22 12:00 running, its results uploaded."""
    h.start(make_spec())
    h.upload("bot", "20261122-1200")
    assert h.record("bot", "20261122-1200").state == "running"
    return h


@pytest.fixture
def example_jobs(tmp_path):
    """A jobs folder holding a copy of the example jobs only (jobs/ is the user's to add to)."""
    from tests.examples import copy_examples

    return copy_examples(tmp_path / "example-jobs")


def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (`make test`, --dist loadgroup): the tests of a module whose fixtures live
    for the module (a simulation, a built wheel, a podman image, a bench run) stay on one worker, so
    each such fixture is made once; every other test goes to whichever worker is free."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        defs = info.name2fixturedefs.values() if info is not None else ()
        if any(d and d[-1].scope == "module" for d in defs):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))
