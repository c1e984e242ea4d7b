import pytest

from spotcron.runtime import entrypoints
from spotcron.testing.harness import Harness


@pytest.fixture
def h():
    harness = Harness()
    yield harness
    entrypoints.use(None)
