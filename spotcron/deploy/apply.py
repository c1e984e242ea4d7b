"""deploy = read actual state → plan → (confirm) → execute → re-plan until nothing is left.

The second pass exists for one reason: job_done's URL (the audience of every VM's identity
token) is known only once job_done exists, and all three functions need it. On a first deploy
pass 1 creates everything but the scheduler entries, and pass 2 sets SPOTCRON_JOB_DONE_URL and
SPOTCRON_CREDENTIALS_URL, then creates the entries: no tick can start a VM whose descriptor has
no URL to call back. Afterwards a re-plan has zero actions. Any other leftover after a pass means
something changed the stack meanwhile, and deploy stops instead of looping.

APIs the project has not enabled come first, in a pass of their own right after the
confirmation; then the stack is read again (the kinds behind a disabled API could not be read).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol

from spotcron.core.errors import NotFound, Transient
from spotcron.core.settings import Settings
from spotcron.core.spec import JobSpec
from spotcron.deploy.actual import Actual, MissingSubnet, read_actual
from spotcron.deploy.desired import desired_state
from spotcron.deploy.executor import ApiExecutor, Applied
from spotcron.deploy.handlers import Context
from spotcron.deploy.naming import Names
from spotcron.deploy.planner import DELETE, UPDATE, Action
from spotcron.deploy.resources import (
    API,
    DEPLOYED_SPEC,
    FUNCTION,
    RETIRED_ACCOUNT,
    SCHEDULER_JOB,
    SERVICE_ACCOUNT,
    SOURCE,
    Inventory,
    index,
)
from spotcron.deploy.source import SourceBundle
from spotcron.gcp.admin.calls import Caller, DeployError
from spotcron.gcp.admin.clients import Clients
from spotcron.gcp.admin.settling import Settling
from spotcron.gcp.error_map import ApiError

URL_VARIABLES = frozenset({"SPOTCRON_JOB_DONE_URL", "SPOTCRON_CREDENTIALS_URL"})
MAX_LISTED_FAILURES = 10


class Reporter(Protocol):
    def show_plan(self, actions: list[Action]) -> None: ...
    def start(self, total: int, title: str) -> None: ...
    def advance(self, action: Action, error: str | None) -> None: ...
    def finish(self) -> None: ...
    def note(self, text: str) -> None: ...


class SilentReporter:
    """Reports nothing; used by the benchmark and as a base for test reporters."""

    def show_plan(self, actions: list[Action]) -> None:
        pass

    def start(self, total: int, title: str) -> None:
        pass

    def advance(self, action: Action, error: str | None) -> None:
        pass

    def finish(self) -> None:
        pass

    def note(self, text: str) -> None:
        pass


@dataclass
class PlanResult:
    desired: Inventory
    actual: Actual
    actions: list[Action]


@dataclass
class DeployResult:
    plan: list[Action]  # what the user saw (and confirmed)
    passes: list[Applied] = field(default_factory=list)


class DeployFailed(DeployError):
    """Some actions failed; what succeeded stays, and running deploy again continues."""

    def __init__(self, message: str, result: DeployResult):
        super().__init__(message)
        self.result = result


def compute_plan(settings: Settings, jobs: Sequence[JobSpec], source_object: str, clients: Clients,
                 call: Caller, pool: ThreadPoolExecutor) -> PlanResult:
    """Read what exists and plan the way to the desired state."""
    from spotcron.core.account_sharing import shared_account_problems
    from spotcron.deploy.account_breadth import breadth_problems
    from spotcron.deploy.iam import job_accounts
    from spotcron.deploy.planner import plan
    from spotcron.deploy.repository_owners import shared_repository_problems
    from spotcron.deploy.retirement import pending, records
    from spotcron.deploy.secret_grants import made_account_problems, secret_problems, with_secret_accounts

    names = Names.of(settings)
    jobs = with_secret_accounts(settings, jobs)
    shared = shared_account_problems({job.name: job.service_account for job in jobs},
                                     {job.name: job.secret_names(settings.project) for job in jobs}, settings.project)
    if shared:
        raise DeployError("jobs share a service account, so nothing was changed:\n  " + "\n  ".join(
            f"job {name}: {why}" for name, why in sorted(shared.items())))
    colliding = shared_repository_problems(settings.repository, job_accounts(jobs))
    if colliding:
        raise DeployError("two job accounts would share one image repository, so nothing was changed:\n  "
                          + "\n  ".join(colliding))
    desired = desired_state(settings, jobs, source_object, settings.job_done_url, settings.credentials_url)
    actual = read_actual(clients, call, names, desired, pool)
    retired = retired_accounts(actual, jobs)
    if retired:  # read again, with the policies and bindings of the accounts no job names any more
        desired = desired_state(settings, jobs, source_object, settings.job_done_url, settings.credentials_url,
                                retired, project_number=actual.project_number)
        actual = read_actual(clients, call, names, desired, pool)
    missing = {job.name: job.service_account for job in jobs
               if job.service_account and not job.deploy_account and job.service_account not in actual.accounts}
    if missing:
        listed = "; ".join(f"job {name}: service_account {email!r}" for name, email in sorted(missing.items()))
        raise DeployError(f"{listed}: no such service account in project {settings.project}, so nothing was "
                          f"changed. Create it (gcloud iam service-accounts create ACCOUNT_ID --project "
                          f"{settings.project}) and grant it what the job needs, or remove service_account from "
                          f"the job")
    broad = breadth_problems(settings.project, jobs, actual.project_roles, actual.account_roles)
    if broad:
        raise DeployError("a job would run as an account that holds the project or one of spotcron's accounts, so "
                          "nothing was changed:\n  "
                          + "\n  ".join(broad))
    reused = made_account_problems(jobs, {name: str(r.fields.get("display_name") or "")
                                          for (kind, name), r in actual.state.items() if kind == SERVICE_ACCOUNT})
    if reused:
        raise DeployError("a job's secrets would run under an account made for something else, so nothing was "
                          "changed:\n  " + "\n  ".join(reused))
    unreadable = secret_problems(settings, jobs, clients.secret_manager, call) if any(
        job.all_secrets() for job in jobs) else []
    if unreadable:
        raise DeployError("a job's secret cannot be read, so nothing was changed:\n  " + "\n  ".join(unreadable))
    url = settings.job_done_url or actual.job_done_url
    broker = settings.credentials_url or actual.credentials_url
    # Again with what only the read could tell: the URLs, and the project's number (the build
    # account's grant on Cloud Functions' source copy names it).
    desired = desired_state(settings, jobs, source_object, url, broker, retired, project_number=actual.project_number)
    actions = plan(desired, actual.state)
    unrevoked = pending(names, retired, actions)
    if unrevoked:  # remembered before any deployed spec that names them changes
        desired = {**desired, **index(records(unrevoked))}
        actions = plan(desired, actual.state)
    return PlanResult(desired, actual, actions)


DEFAULT_NETWORK = ("the default network, which Google creates when Compute Engine's API is enabled "
                   "(https://cloud.google.com/vpc/docs/vpc#default-network)")


def _makes_default_network(apis: list[Action], settings: Settings) -> bool:
    """Whether this deploy just enabled Compute Engine, so that the `default` network the stack
    uses may still be in the making."""
    return settings.network == "default" and any(a.name == "compute.googleapis.com" for a in apis)


def _default_network(error: BaseException) -> str | None:
    return DEFAULT_NETWORK if isinstance(error, MissingSubnet) else None


def retired_accounts(actual: Actual, jobs: Sequence[JobSpec]) -> frozenset[str]:
    """Jobs' own accounts that deployed specs name and no job names now, and that still exist:
    deploy revokes what it granted them (the deployed spec that named one is rewritten or deleted
    in the same apply, after which no later deploy knows of it)."""
    named = {job.service_account for job in jobs if job.service_account}
    return frozenset(a for a in actual.deployed_accounts if a not in named and a in actual.accounts)


def _urls_unknown(actions: list[Action]) -> bool:
    """Whether some function is deployed in this pass without the URLs it needs (a first deploy:
    they exist only once job_done and the broker do)."""
    for action in actions:
        if action.resource_type == FUNCTION and action.kind != DELETE and action.resource is not None:
            environment = action.resource.fields.get("environment") or {}
            if not all(environment.get(name) for name in URL_VARIABLES):
                return True
    return False


def _hold_entries(actions: list[Action]) -> tuple[list[Action], list[Action]]:
    """(what to apply now, the scheduler entries held back): while the functions do not know their
    URLs, an entry that fires would start a VM with nowhere to report, so entries wait a pass."""
    if not _urls_unknown(actions):
        return actions, []
    held = [a for a in actions if a.resource_type == SCHEDULER_JOB and a.kind != DELETE]
    return [a for a in actions if a not in held], held


def _only_url_followups(actions: list[Action], held: bool = False) -> bool:
    """True when every action only sets the functions' job_done URL (see the module docstring),
    or, after a pass that held them back (`held`), creates or updates a scheduler entry, or
    forgets an account whose grants the pass revoked (deploy/retirement.py)."""
    for action in actions:
        if held and action.resource_type == SCHEDULER_JOB and action.kind != DELETE:
            continue
        if action.resource_type == RETIRED_ACCOUNT and action.kind == DELETE:
            continue
        if action.kind != UPDATE or action.resource_type != FUNCTION or set(action.changes) != {"environment"}:
            return False
        old, new = action.changes["environment"]
        keys = {k for k in set(old or {}) | set(new or {}) if (old or {}).get(k) != (new or {}).get(k)}
        if not keys or not keys <= URL_VARIABLES:
            return False
    return True


def _failure_message(outcome: Applied) -> str:
    total = len(outcome.done) + len(outcome.failed) + len(outcome.skipped)
    lines = [f"deploy stopped: {len(outcome.failed)} of {total} changes failed"
             + (f", {len(outcome.skipped)} not started" if outcome.skipped else "") + ":"]
    lines += [f"  {action.title}: {error}" for action, error in outcome.failed[:MAX_LISTED_FAILURES]]
    if len(outcome.failed) > MAX_LISTED_FAILURES:
        lines.append(f"  … and {len(outcome.failed) - MAX_LISTED_FAILURES} more")
    lines.append("What succeeded stays in place; run deploy again to continue from where it stopped.")
    return "\n".join(lines)


def _apply_pass(ctx: Context, pool: ThreadPoolExecutor, reporter: Reporter, actions: list[Action], label: str,
                result: DeployResult) -> Applied:
    """Apply `actions` with a progress bar, recorded in `result`; DeployFailed when any failed."""
    reporter.start(len(actions), label)
    try:
        outcome = ApiExecutor(ctx, pool, reporter.advance).execute(actions)
    finally:
        reporter.finish()
    result.passes.append(outcome)
    if not outcome.ok:
        raise DeployFailed(_failure_message(outcome), result)
    return outcome


def run_deploy(settings: Settings, jobs: Sequence[JobSpec], source: SourceBundle, clients: Clients, *,
               confirm: Callable[[list[Action]], bool], reporter: Reporter, dry_run: bool = False,
               concurrency: int = 16, caller: Caller | None = None, poll_initial: float = 2.0,
               max_passes: int = 3, prepare: Callable[[], Sequence[JobSpec]] | None = None,
               settling: Settling | None = None) -> DeployResult:
    """Plan, show, confirm and apply; DeployFailed when an action fails after its retries.

    `settling`: how Google's propagation delays are waited out (default: minutes, real sleep);
    its lines go to the reporter's notes.

    `prepare` (images still to build): called after the confirmation, once the bucket, accounts,
    repository and their IAM bindings exist (a build pushes to that repository as the build
    account); it builds and returns the jobs pinned to the built digests, and the rest of the
    plan is made from those, so no deployed spec ever names an unbuilt image.
    """
    call = caller or Caller(settings.project)
    settle = (settling or Settling()).with_say(reporter.note)
    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="deploy") as pool:
        try:
            # An earlier deploy may have enabled the APIs moments ago: their first calls can still fail.
            planned = settle.run("read what is deployed", lambda: compute_plan(
                settings, jobs, source.object_name, clients, call, pool))
        except (NotFound, Transient, ApiError) as exc:
            raise DeployError(f"could not read what is deployed, so nothing was changed: {exc}") from exc
        reporter.show_plan(planned.actions)
        result = DeployResult(plan=planned.actions)
        if dry_run or not planned.actions:
            return result
        if not confirm(planned.actions):
            raise DeployError("deploy cancelled: nothing was changed")
        ctx = Context(clients, call, Names.of(settings), source.data, poll_initial=poll_initial, settling=settle)
        actions = planned.actions

        def replan(what: str) -> list[Action]:
            # Right after enabling APIs, their first calls may still be refused for a while.
            return settle.run(what, lambda: compute_plan(settings, jobs, source.object_name, clients, call,
                                                         pool).actions)

        apis = [a for a in actions if a.resource_type == API and a.kind != DELETE]
        if apis:
            _apply_pass(ctx, pool, reporter, apis, "enabling the APIs", result)
            try:
                actions = replan("read the stack once the APIs are enabled") if not _makes_default_network(
                    apis, settings) else settle.also(_default_network).run(
                    "read the stack once the APIs are enabled",
                    lambda: compute_plan(settings, jobs, source.object_name, clients, call, pool).actions)
            except (NotFound, Transient, ApiError) as exc:
                raise DeployFailed(f"enabled the APIs, then reading the stack failed: {exc}. Run deploy again to "
                                   "check and finish.",
                                   result) from exc
            if not actions:
                return result
        if prepare is not None:
            foundation = [a for a in actions if a.kind != DELETE and a.phase <= 1
                          and a.resource_type not in (SOURCE, DEPLOYED_SPEC)]
            if foundation:
                _apply_pass(ctx, pool, reporter, foundation, "preparing the images' repository", result)
            jobs = prepare()
            try:
                actions = compute_plan(settings, jobs, source.object_name, clients, call, pool).actions
            except (NotFound, Transient, ApiError) as exc:
                raise DeployFailed(f"built the images, then reading the stack failed: {exc}. Run deploy again "
                                   f"(the images are not built again).", result) from exc
            if not actions:
                return result
        for number in range(1, max_passes + 1):
            actions, held = _hold_entries(actions)
            outcome = _apply_pass(ctx, pool, reporter, actions,
                                  "applying" if number == 1 else f"applying (pass {number})", result)
            try:
                actions = compute_plan(settings, jobs, source.object_name, clients, call, pool).actions
            except (NotFound, Transient, ApiError) as exc:
                raise DeployFailed(f"applied {len(outcome.done)} changes, then reading the result failed: {exc}. "
                                   "Run deploy again to check and finish.", result) from exc
            if not actions:
                return result
            if not _only_url_followups(actions, bool(held)):
                raise DeployFailed(
                    f"after applying, {len(actions)} changes are still needed (did something else change the "
                    f"stack meanwhile?): " + ", ".join(a.title for a in actions[:MAX_LISTED_FAILURES])
                    + ". Run deploy again.", result)
            if any(a.resource_type != RETIRED_ACCOUNT for a in actions):
                reporter.note("the functions' URLs are known now: setting SPOTCRON_JOB_DONE_URL and "
                              "SPOTCRON_CREDENTIALS_URL on the functions"
                              + (", then creating the scheduler entries" if held else ""))
            else:
                reporter.note("what deploy granted the accounts no job names any more is revoked: forgetting them")
    raise DeployFailed(f"deploy did not converge in {max_passes} passes; run deploy again", result)
