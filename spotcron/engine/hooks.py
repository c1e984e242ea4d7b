"""Run-end hooks: the extension point for anything a run's end must do in the world.

A hook is owed like `run.finished` is (engine/writer.py): the terminal write records one owed
entry per hook that applies to the run (`hook:NAME`, core/runs.hook_entry), and whoever touches
the run next does the entries still owed. Each hook is done, recorded and retried on its own: one
that fails stays owed (its failure recorded on the run, `effect_failures`) while the others are
recorded done and never run again. A hook that keeps failing is given up after `max_tries`
(recorded as such on the run), so a receiver gone for good does not keep a run's end open for
ever. A crash (any BaseException) leaves every entry owed: hooks run at least once, so each must
be idempotent or carry an id its receiver deduplicates on (engine/notifications.py sends one).

How to add one: docs/architecture.md, "Adding a run-end effect".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from spotcron.core.runs import HOOK_PREFIX, Effect, RunRecord, hook_entry

if TYPE_CHECKING:
    from spotcron.engine.deps import Deps

# 24 tries at the sweep's interval (5 minutes by default): two hours of retries.
DEFAULT_MAX_TRIES = 24


def _always(record: RunRecord) -> bool:
    return True


@dataclass(frozen=True)
class RunEndHook:
    """A named run-end hook. `applies` says (from the record alone) whether a run owes it;
    `on_start`, when set, is told best-effort when a run's VM is created (a start ping)."""

    name: str
    run: Callable[[Deps, RunRecord], None]
    applies: Callable[[RunRecord], bool] = _always
    on_start: Callable[[Deps, RunRecord], None] | None = None
    max_tries: int = DEFAULT_MAX_TRIES

    def __call__(self, deps: Deps, record: RunRecord) -> None:
        self.run(deps, record)


def named(hooks: Sequence[Callable]) -> list[RunEndHook]:
    """Every hook as a RunEndHook; a bare callable is named after its function (a repeated name
    gets `#2`, `#3`), so its owed entry stays the same for as long as the deployment does."""
    out: list[RunEndHook] = []
    seen: dict[str, int] = {}
    for hook in hooks:
        if isinstance(hook, RunEndHook):
            named_hook = hook
        else:
            named_hook = RunEndHook(name=getattr(hook, "__qualname__", None) or type(hook).__name__, run=hook)
        count = seen.get(named_hook.name, 0) + 1
        seen[named_hook.name] = count
        if count > 1:
            named_hook = RunEndHook(f"{named_hook.name}#{count}", named_hook.run, named_hook.applies,
                                    named_hook.on_start, named_hook.max_tries)
        out.append(named_hook)
    return out


def owed_entries(deps: Deps, record: RunRecord) -> tuple[str, ...]:
    """The owed entries of the hooks that apply to `record`."""
    return tuple(hook_entry(hook.name) for hook in named(deps.on_run_end) if hook.applies(record))


def owe_hooks(deps: Deps, record: RunRecord) -> RunRecord:
    """`record` (just ended) with its `hooks` entry replaced by one entry per hook that applies."""
    if Effect.HOOKS not in record.owed:
        return record
    owed: list = []
    for entry in record.owed:
        owed.extend(owed_entries(deps, record) if entry == Effect.HOOKS else [entry])
    return record.model_copy(update={"owed": tuple(dict.fromkeys(owed))})


def hook_named(deps: Deps, entry: str) -> RunEndHook | None:
    name = entry[len(HOOK_PREFIX):] if entry.startswith(HOOK_PREFIX) else None
    return next((hook for hook in named(deps.on_run_end) if hook.name == name), None)


def hook_tries(deps: Deps, entry: str) -> int | None:
    """How many tries a hook entry gets before it is given up; None for an effect that is no hook."""
    if not entry.startswith(HOOK_PREFIX):
        return None
    hook = hook_named(deps, entry)
    return hook.max_tries if hook is not None else DEFAULT_MAX_TRIES


def started(deps: Deps, record: RunRecord, log) -> None:
    """Tell each hook with `on_start` that `record`'s VM was created; best effort, never raises."""
    for hook in named(deps.on_run_end):
        if hook.on_start is None or not hook.applies(record):
            continue
        try:
            hook.on_start(deps, record)
        except Exception as exc:  # noqa: BLE001 - a start ping must never hold a run's start
            log.warning("%s/%s: run-start hook %s failed: %s", record.job, record.run_id, hook.name, exc)
