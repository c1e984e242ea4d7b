"""The executor that applies a plan on Google Cloud (`--dry-run` only prints it: planner.format_plan).

The API executor runs the plan phase by phase (resources.phase): every action of a phase runs
concurrently on a bounded thread pool, and the next phase starts only when the whole phase
succeeded, so nothing is created before what it depends on. A failed action does not stop the
others of its phase (1,000 scheduler entries should not wait on one), but it stops the phases
after it; running deploy again picks up from there, because the plan is recomputed from what
exists and every handler is idempotent.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from itertools import groupby

from spotcron.core.errors import SpotcronError
from spotcron.deploy.handlers import HANDLERS, Context
from spotcron.deploy.planner import Action

# Called after each action with the error message, or None when it succeeded.
OnDone = Callable[[Action, str | None], None]


@dataclass
class Applied:
    done: list[Action] = field(default_factory=list)
    failed: list[tuple[Action, str]] = field(default_factory=list)
    skipped: list[Action] = field(default_factory=list)  # not started: an earlier phase failed

    @property
    def ok(self) -> bool:
        return not self.failed and not self.skipped


class ApiExecutor:
    def __init__(self, ctx: Context, pool: ThreadPoolExecutor, on_done: OnDone | None = None):
        self.ctx = ctx
        self.pool = pool
        self.on_done = on_done or (lambda action, error: None)

    def _run(self, action: Action) -> None:
        # Every handler is idempotent, so an action that meets a propagation delay (a new account,
        # a grant, Eventarc's first-use agent) is simply run again once it has had time to settle.
        self.ctx.settling.run(action.title, lambda: HANDLERS[action.resource_type](action, self.ctx))

    def execute(self, actions: list[Action]) -> Applied:
        outcome = Applied()
        phases = [list(group) for _, group in groupby(sorted(actions, key=lambda a: a.phase), key=lambda a: a.phase)]
        for number, batch in enumerate(phases):
            futures: dict[Future[None], Action] = {self.pool.submit(self._run, a): a for a in batch}
            try:
                pending = set(futures)
                while pending:
                    finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for future in finished:
                        self._record(futures[future], future, outcome)
            except KeyboardInterrupt:
                for future in futures:
                    future.cancel()  # running calls finish; the next deploy converges from there
                raise
            if outcome.failed:
                outcome.skipped = [a for later in phases[number + 1:] for a in later]
                break
        return outcome

    def _record(self, action: Action, future: Future[None], outcome: Applied) -> None:
        error = future.exception()
        if error is None:
            outcome.done.append(action)
            self.on_done(action, None)
            return
        if not isinstance(error, SpotcronError):
            error = SpotcronError(f"{action.title}: {type(error).__name__}: {error}")
        outcome.failed.append((action, str(error)))
        self.on_done(action, str(error))
