"""`read_secret`, for the functions (a notification's webhook URL in a secret), against the fake
Secret Manager held to the published access method."""

from __future__ import annotations

import pytest
import requests

from spotcron.gcp.secret_access import SecretUnavailable, read_secret
from tests.fakes.secretmanager import FakeSecretManager

ACCOUNT = "spotcron-functions@proj-one.iam.gserviceaccount.com"


@pytest.fixture
def manager():
    with FakeSecretManager() as fake:
        fake.tokens["functions-token"] = f"serviceAccount:{ACCOUNT}"
        yield fake


def _session(token: str = "functions-token") -> requests.Session:
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {token}"
    return session


def test_reads_the_newest_or_a_pinned_version_with_its_number(manager):
    manager.add("projects/proj-one/secrets/hook", b"https://hooks.example/1", b"https://hooks.example/2",
                readers=(ACCOUNT,))
    assert read_secret("hook", "proj-one", session=_session(), base_url=manager.url) == (b"https://hooks.example/2", "2")
    assert read_secret("projects/proj-one/secrets/hook", "other", "1", session=_session(),
                       base_url=manager.url) == (b"https://hooks.example/1", "1")
    assert manager.request_shape_problems() == []


@pytest.mark.parametrize(("setup", "said"), [("no-grant", "HTTP 403"), ("corrupt", "damaged")])
def test_a_secret_it_may_not_read_or_that_arrives_damaged_is_refused_without_its_value(manager, setup, said):
    manager.add("projects/proj-one/secrets/hook", b"https://hooks.example/x",
                readers=() if setup == "no-grant" else (ACCOUNT,))
    manager.corrupt = setup == "corrupt"
    with pytest.raises(SecretUnavailable) as caught:
        read_secret("hook", "proj-one", session=_session(), base_url=manager.url)
    assert said in str(caught.value) and "hooks.example" not in str(caught.value)
