"""destroy = read what exists → plan its removal → (confirm) → execute: the inverse of deploy.

The same reader (actual.py), planner actions and executor as deploy, with a plan of its own:
- deleted: scheduler entries named spotcron-*, and functions, topics and source archives that
  carry spotcron's label; the service accounts deploy created (named by the stack, displayed
  "spotcron ..."); live VMs labelled spotcron=1 (their runs would never be recorded);
- updated: IAM policies that stay (the project's, a kept bucket's, other accounts'), losing only
  the bindings of spotcron's accounts, so a role someone else granted is never touched;
- deleted as well: the bucket of the job images' build logs, when it carries the label (it holds
  nothing but build logs, which deploy deletes after each build);
- kept: the results bucket, unless `delete_results`, and then only when it carries the label;
  the Artifact Registry repository (job images live there), losing our accounts' bindings;
  anything without spotcron's label or name.
Pure planning here; the CLI reads, prints the plan, asks, and runs it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from spotcron.core.errors import NotFound, Transient
from spotcron.core.settings import Settings
from spotcron.deploy.actual import Actual, read_actual
from spotcron.deploy.apply import retired_accounts
from spotcron.deploy.desired import desired_state
from spotcron.deploy.executor import ApiExecutor, Applied
from spotcron.deploy.handlers import Context
from spotcron.deploy.naming import Names
from spotcron.deploy.planner import DELETE, UPDATE, Action
from spotcron.deploy.resources import (
    ALERT_POLICY,
    BUCKET,
    DEPLOYED_SPEC,
    FIREWALL,
    FUNCTION,
    IAM_POLICY,
    POLICY_BUCKET,
    POLICY_FUNCTION,
    POLICY_SERVICE_ACCOUNT,
    POLICY_TOPIC,
    REPOSITORY,
    RETIRED_ACCOUNT,
    SCHEDULER_JOB,
    SERVICE_ACCOUNT,
    SOURCE,
    SUBNETWORK,
    TOPIC,
    Inventory,
    Resource,
    split_policy_name,
)
from spotcron.gcp.admin.calls import Caller, DeployError
from spotcron.gcp.admin.clients import Clients
from spotcron.gcp.error_map import ApiError

ACCOUNT_DISPLAY_PREFIX = "spotcron "  # what deploy names the accounts it creates
VM = "vm"  # not a deploy resource: live job VMs, deleted by destroy through the Compute port


@dataclass
class DestroyPlan:
    actions: list[Action]
    kept: list[str]  # what stays, said on screen
    vms: list[Any] = field(default_factory=list)  # Instances labelled spotcron=1


def plan_destroy(actual: Inventory, names: Names, *, delete_results: bool, vms: Sequence[Any] = ()) -> DestroyPlan:
    """The actions that remove spotcron's stack from `actual`, in execution order."""
    actions: list[Action] = []
    kept: list[str] = []
    going: set[tuple[str, str]] = set()
    for key, have in sorted(actual.items()):
        kind, name = key
        labelled = kind in (SCHEDULER_JOB, FUNCTION, TOPIC, SOURCE, DEPLOYED_SPEC, RETIRED_ACCOUNT, FIREWALL, ALERT_POLICY) \
            and have.owned
        if labelled or (kind == SERVICE_ACCOUNT and _our_account(have, names)):
            going.add(key)
        elif kind == BUCKET and name == names.build_logs_bucket:
            if have.owned:
                going.add(key)
            else:
                kept.append(f"bucket {name}: it does not carry the label spotcron=1, so it is not ours to delete")
        elif kind == BUCKET:
            if delete_results and have.owned:
                going.add(key)
            elif delete_results:
                kept.append(f"bucket {name}: it does not carry the label spotcron=1, so it is not ours to delete")
            else:
                kept.append(f"bucket {name} and every run's results in it (--delete-results deletes them)")
        elif kind == REPOSITORY:
            kept.append(f"repository {name} and the images in it (delete it by hand once no job needs them)")
        elif kind == SUBNETWORK:
            kept.append(f"Private Google Access on {name} (the network's setting; it costs nothing)")
    for key in sorted(going):
        have = actual[key]
        actions.append(Action(DELETE, have.type, have.name, {f: (v, None) for f, v in have.fields.items()},
                              have, have))
    for key, have in sorted(actual.items()):
        if key[0] != IAM_POLICY or not have.fields or _sits_on_something_going(key[1], going):
            continue
        changes = {role: (tuple(members or ()), ()) for role, members in have.fields.items() if members}
        if changes:
            actions.append(Action(UPDATE, IAM_POLICY, have.name, changes, Resource(IAM_POLICY, have.name, {}), have))
    return DestroyPlan(sorted(actions, key=_order), kept, list(vms))


def _our_account(account: Any, names: Names) -> bool:
    return names.own_account(account.name) and \
        str(account.fields.get("display_name", "")).startswith(ACCOUNT_DISPLAY_PREFIX)


def _sits_on_something_going(policy: str, going: set[tuple[str, str]]) -> bool:
    """A policy on a resource being deleted goes with it: no need to edit it first."""
    kind, ident = split_policy_name(policy)
    parent = {POLICY_BUCKET: BUCKET, POLICY_TOPIC: TOPIC, POLICY_FUNCTION: FUNCTION,
              POLICY_SERVICE_ACCOUNT: SERVICE_ACCOUNT}.get(kind)
    return parent is not None and (parent, ident) in going


# Stop the ticks first, then what they call, then what those used; the bindings of the accounts
# before the accounts; the bucket (with everything in it) last.
# The firewall rule goes after the VMs (deleted first, through the Compute port) are gone.
_ORDER = {ALERT_POLICY: 0, SCHEDULER_JOB: 0, FUNCTION: 1, TOPIC: 2, SOURCE: 2, DEPLOYED_SPEC: 2, RETIRED_ACCOUNT: 2, FIREWALL: 2, IAM_POLICY: 3,
          SERVICE_ACCOUNT: 4, BUCKET: 5}


def _order(action: Action) -> tuple[int, str, str]:
    return (_ORDER[action.resource_type], action.resource_type, action.name)


def format_destroy(plan: DestroyPlan) -> list[str]:
    lines = [f"- delete vm {vm.name} ({vm.zone}, {vm.status}; run {vm.labels.get('job', '?')}/"
             f"{vm.labels.get('run', '?')})" for vm in plan.vms]
    for action in plan.actions:
        if action.kind == DELETE:
            lines.append(f"- delete {action.resource_type} {action.name}")
        else:
            lines.append(f"~ update {action.resource_type} {action.name}")
            lines += [f"    - {role} {member}" for role, (old, _) in action.changes.items() for member in old]
    lines += [f"  keep {what}" for what in plan.kept]
    deletes = sum(1 for a in plan.actions if a.kind == DELETE) + len(plan.vms)
    updates = sum(1 for a in plan.actions if a.kind == UPDATE)
    lines.append(f"Plan: {deletes} to delete, {updates} to update." if deletes or updates else
                 "Nothing to destroy: no spotcron resources in this project.")
    return lines


def read_for_destroy(settings: Settings, clients: Clients, call: Caller, pool: ThreadPoolExecutor) -> Actual:
    """What exists of the stack: deploy's reader, told which accounts and policies to look at."""
    names = Names.of(settings)
    wanted = desired_state(settings, [], "", settings.job_done_url)
    try:
        actual = read_actual(clients, call, names, wanted, pool)
        retired = retired_accounts(actual, [])
        if not retired:
            return actual
        # The jobs' own accounts: what deploy granted them (and the functions on them) goes too.
        wanted = desired_state(settings, [], "", settings.job_done_url, retired_accounts=retired)
        return read_actual(clients, call, names, wanted, pool)
    except (NotFound, Transient, ApiError) as exc:
        raise DeployError(f"could not read what is deployed, so nothing was changed: {exc}") from exc


def run_destroy(settings: Settings, clients: Clients, *, compute: Any, confirm: Callable[[DestroyPlan], bool],
                show: Callable[[DestroyPlan], None], delete_results: bool, dry_run: bool = False,
                concurrency: int = 16, caller: Caller | None = None, poll_initial: float = 2.0,
                on_done: Callable[[Action, str | None], None] | None = None) -> tuple[DestroyPlan, Applied | None]:
    """Read, plan, show, confirm, delete the VMs, then apply the plan; DeployError when something failed."""
    call = caller or Caller(settings.project)
    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="destroy") as pool:
        actual = read_for_destroy(settings, clients, call, pool)
        vms = [vm for vm in compute.list_managed() if vm.managed] if compute is not None else []
        plan = plan_destroy(actual.state, Names.of(settings), delete_results=delete_results, vms=vms)
        show(plan)
        if dry_run or not (plan.actions or plan.vms):
            return plan, None
        if not confirm(plan):
            raise DeployError("destroy cancelled: nothing was changed")
        for vm in plan.vms:  # before the functions go: nothing would record these runs' end
            compute.delete_instance(vm.zone, vm.name)
        ctx = Context(clients, call, Names.of(settings), b"", poll_initial=poll_initial)
        outcome = _execute(ctx, pool, plan.actions, on_done)
    if not outcome.ok:
        failed = "\n".join(f"  {action.title}: {error}" for action, error in outcome.failed)
        raise DeployError(f"destroy stopped: {len(outcome.failed)} changes failed:\n{failed}\n"
                          "What was deleted stays deleted; run destroy again to finish.")
    return plan, outcome


def _execute(ctx: Context, pool: ThreadPoolExecutor, actions: list[Action],
             on_done: Callable[[Action, str | None], None] | None) -> Applied:
    """Step by step in destroy's order (one step's actions concurrently), stopping at a failure."""
    outcome = Applied()
    for step in sorted({_ORDER[a.resource_type] for a in actions}):
        batch = [a for a in actions if _ORDER[a.resource_type] == step]
        done = ApiExecutor(ctx, pool, on_done).execute([_in_one_phase(a) for a in batch])
        outcome.done += done.done
        outcome.failed += done.failed
        if done.failed:
            outcome.skipped = [a for a in actions if _ORDER[a.resource_type] > step]
            break
    return outcome


class _OnePhase(Action):
    @property
    def phase(self) -> int:
        return 0


def _in_one_phase(action: Action) -> Action:
    return _OnePhase(action.kind, action.resource_type, action.name, action.changes, action.resource,
                     action.current)
