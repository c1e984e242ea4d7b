"""Waiting out what Google makes true some minutes after the call that asked for it.

retry.Caller retries one call for about half a minute (rate limits, 5xx, lost answers). Some
failures on a fresh project are neither transient nor permanent: they end once Google has
propagated an earlier change, which Google documents as taking minutes:
- a grant: "Typically 2 minutes, potentially 7 minutes or longer"
  (https://cloud.google.com/iam/docs/access-change-propagation);
- a new service account: IAM reads are eventually consistent
  (https://cloud.google.com/iam/docs/reference/rest), so for a while a policy naming the account is
  refused ("Service account … does not exist") and the account's own policy reads 404;
- the Eventarc service agent, created on the project's first trigger: "If you recently started to
  use Eventarc, it may take a few minutes before all necessary permissions are propagated to the
  Service Agent" (Google's own error text);
- an API just enabled: "If you enabled this API recently, wait a few minutes for the action to
  propagate to our systems and retry" (the SERVICE_DISABLED error text);
- a build that runs as an account granted seconds ago (the functions' source read, an Artifact
  Registry push; Cloud Functions' "Could not build the function due to a missing permission on the
  build service account" and "Error determining source provenance"): the grant again.

`Settling.run` re-runs a whole idempotent step (a deploy action, a Cloud Build) while its error is
one of those, with a budget of minutes and one printed line per thing awaited. Sleep is injected:
tests run it on a virtual clock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

from spotcron.core.errors import NotFound
from spotcron.gcp.admin.calls import DeployError, ForeignQuotaProject

T = TypeVar("T")

# Ten minutes: Google's "up to 7 minutes or longer" for a grant, with room for the Eventarc agent.
BUDGET_S = 600.0
FIRST_STEP_S = 10.0
MAX_STEP_S = 30.0

NEW_ACCOUNT = "IAM to see the new service accounts (IAM reads are eventually consistent)"
GRANTS = "new IAM grants to take effect (Google: typically 2 minutes, up to 7 or longer)"
EVENTARC_AGENT = ("Eventarc's service agent, which Google creates on the project's first trigger "
                  "(Google: 'it may take a few minutes')")
API_ENABLED = "the APIs just enabled to be usable (Google: 'wait a few minutes')"


def awaited(error: BaseException) -> str | None:
    """What `error` is waiting for, when it is one of the propagation delays above; else None."""
    if isinstance(error, ForeignQuotaProject):
        return None  # disabled in another project: no wait in this one ends it
    text = str(error)
    lower = text.lower()
    if "service account" in lower and "does not exist" in lower:
        return NEW_ACCOUNT
    if isinstance(error, NotFound) and "iam policy of service_account:" in lower:
        return NEW_ACCOUNT
    if "eventarc service agent" in lower:
        return EVENTARC_AGENT
    if "you must grant storage object viewer permission" in lower:
        return GRANTS  # a function build fetching its source as the build account
    if "could not build the function due to a missing permission on the build service account" in lower \
            or "error determining source provenance" in lower:
        return GRANTS  # Cloud Functions' words for a build account whose roles have not applied yet
    if "artifactregistry.repositories.uploadartifacts" in lower and "denied" in lower:
        return GRANTS  # a build pushing as the build account
    if "builder service account does not have access to logs bucket" in lower:
        return GRANTS  # a job build whose account's grant on the build logs' folder has not applied yet
    if "is not enabled in project" in lower or "it is disabled" in lower:
        return API_ENABLED
    return None


class Settling:
    """Re-runs a step while it fails for one of the reasons `awaited` names, up to `budget_s`."""

    def __init__(self, *, budget_s: float = BUDGET_S, first_step_s: float = FIRST_STEP_S,
                 max_step_s: float = MAX_STEP_S, sleep: Callable[[float], None] = time.sleep,
                 say: Callable[[str], None] = lambda text: None,
                 recognise: Callable[[BaseException], str | None] = awaited):
        self.budget_s = budget_s
        self.first_step_s = first_step_s
        self.max_step_s = max_step_s
        self._sleep = sleep
        self._say = say
        self._recognise = recognise
        self._lock = threading.Lock()
        self._announced: set[str] = set()
        self.waits = 0  # steps slept, over all calls

    def also(self, recognise: Callable[[BaseException], str | None]) -> Settling:
        """The same policy, also waiting while `recognise` names what an error waits for."""
        mine = self._recognise
        return Settling(budget_s=self.budget_s, first_step_s=self.first_step_s, max_step_s=self.max_step_s,
                        sleep=self._sleep, say=self._say, recognise=lambda exc: recognise(exc) or mine(exc))

    def with_say(self, say: Callable[[str], None]) -> Settling:
        """The same policy, printing its lines with `say`."""
        return Settling(budget_s=self.budget_s, first_step_s=self.first_step_s, max_step_s=self.max_step_s,
                        sleep=self._sleep, say=say, recognise=self._recognise)

    def run(self, what: str, step: Callable[[], T]) -> T:
        waited, delay = 0.0, self.first_step_s
        while True:
            try:
                return step()
            except Exception as exc:
                reason = self._recognise(exc)
                if reason is None:
                    raise
                if waited >= self.budget_s:
                    raise DeployError(f"{what}: {exc} (waited {int(waited)}s for {reason}; if it still fails, run deploy "
                                    f"again in a few minutes)") from exc
                self._announce(reason)
            with self._lock:
                self.waits += 1
            self._sleep(delay)
            waited += delay
            delay = min(delay * 2, self.max_step_s)

    def _announce(self, reason: str) -> None:
        with self._lock:
            if reason in self._announced:
                return
            self._announced.add(reason)
        self._say(f"waiting for {reason}; deploy goes on by itself")
