"""Moved to spotcron.testing.harness (the one front door for tests, the simulation and the bench);
this name stays so that tests written against it keep importing."""

from spotcron.testing.harness import *  # noqa: F403
from spotcron.testing.harness import Harness, app, make_spec  # noqa: F401
