"""Fixtures for the Google adapters: fake Compute Engine server, storage and Pub/Sub emulators."""

from tests.gcp.fixtures import *  # noqa: F401,F403
