"""The run-end hooks a deployment installs: the structured log entry and the notifiers.

One place, so the functions (runtime/google.py) and `spotcron up` (local/stack.py) run the same
hooks, under the same names (a name is stored in each run record as an owed entry).
"""

from __future__ import annotations

from spotcron.core.notify_spec import Notify
from spotcron.engine.deps import Deps
from spotcron.engine.notifications import Announce, Post, SecretLookup, run_end_hooks
from spotcron.engine.run_log import log_hook


def install(deps: Deps, *, post: Post, secrets: SecretLookup | None, default: Notify | None = None,
            announce: Announce | None = None, local: bool = False) -> Deps:
    deps.on_run_end.extend([log_hook(), *run_end_hooks(post, secrets, default, announce, local=local)])
    return deps
