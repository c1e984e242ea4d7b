import pytest

from spotcron.runtime import entrypoints
from spotcron.testing.harness import Harness


@pytest.fixture(params=["per-job", "shared"])
def h(request):
    """Every situation in both scheduling modes: start messages as a job's own scheduler entry
    sends them, and as the dispatcher does (with the exact tick)."""
    harness = Harness(scheduling=request.param)
    yield harness
    entrypoints.use(None)
