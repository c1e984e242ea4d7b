"""`spotcron doctor`: will this project take the stack? Read-only checks, each with its fix.

Before anything is created, the project is looked at the way a first deploy and a first run
would meet it: the APIs deploy needs are enabled or can be (deploy enables them itself through
Service Usage after the user confirms, so an API that is off is no failure unless Service Usage
itself is off), the deployer holds the permissions deploy uses,
the quotas of the regions and GPU types the jobs ask for (Spot GPUs included) leave room for one
VM of each, the effective organisation policies let spotcron's VMs and functions exist (trusted
image projects, Shielded VM, the network, function ingress, resource locations, external
addresses), and the VMs' network and subnets exist. Each check that fails says what to run.

Pure: the project is read through a `ProjectFacts` (gcp/admin/project_reads.py on Google, a
fake server in tests); a read that fails makes its check "could not check", never an exception.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from spotcron.core.errors import SpotcronError
from spotcron.core.settings import Settings
from spotcron.core.spec import JobSpec
from spotcron.deploy.checkup_rules import (
    CLOUD_BUILD_UNRESTRICTED,
    COS_IMAGES,
    DEPLOY_PERMISSIONS,
    LIST_ALLOWED,
    LIST_DENIED,
    LIST_UNKNOWN,
    external_ip_allowed,
    gpu_metric,
    list_allows,
    location_allowed,
    role_for,
)
from spotcron.gcp.admin.calls import REQUIRED_APIS, ServiceDisabled

OK, FAIL, UNKNOWN, WARN = "ok", "fail", "unknown", "warn"
SERVICE_USAGE = "serviceusage.googleapis.com"  # deploy enables every other API through it
T = TypeVar("T")


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # ok | fail | unknown (the project could not be read for it) | warn (may fail; does not stop)
    detail: str
    fix: str = ""  # what to run (or ask for); empty when nothing is to be done


class ProjectFacts(Protocol):
    project: str

    def enabled_services(self) -> frozenset[str]: ...
    def granted_permissions(self, permissions: list[str]) -> frozenset[str]: ...
    def project_quotas(self) -> dict[str, tuple[float, float]]: ...
    def region_quotas(self, region: str) -> dict[str, tuple[float, float]] | None: ...
    def network(self, name: str) -> dict[str, Any] | None: ...
    def subnetwork(self, region: str, name: str) -> dict[str, Any] | None: ...
    def effective_policy(self, constraint: str) -> dict[str, Any]: ...


@dataclass(frozen=True)
class GpuNeed:
    region: str
    gpu: str
    count: int  # the most any one VM of these jobs asks for
    spot: bool
    jobs: tuple[str, ...]


def _read(name: str, read: Callable[[], T], hint: str) -> T | Check:
    try:
        return read()
    except ServiceDisabled as exc:
        if exc.service in REQUIRED_APIS and exc.service != SERVICE_USAGE:
            return Check(name, UNKNOWN, f"could not check: {exc.service} is not enabled yet; deploy enables it "
                                        "first, after you confirm", "run spotcron doctor again after the first deploy "
                                                                    f"(or enable it now: gcloud services enable "
                                                                    f"{exc.service})")
        return Check(name, UNKNOWN, f"could not check: {exc.service} is not enabled", hint)
    except SpotcronError as exc:
        return Check(name, UNKNOWN, f"could not check: {exc}", hint)


def gpu_needs(settings: Settings, jobs: Iterable[JobSpec]) -> list[GpuNeed]:
    """One entry per (region, GPU type, Spot or not) the jobs may start a VM with."""
    from spotcron.engine.placement import regions_for

    found: dict[tuple[str, str, bool], tuple[int, set[str]]] = {}
    for job in jobs:
        for variant in job.variants():
            gpu = variant.machine.gpu
            if gpu is None:
                continue
            for region in regions_for(variant, settings):
                key = (region, gpu.type, variant.machine.spot)
                count, names = found.get(key, (0, set()))
                found[key] = (max(count, gpu.count), names | {job.name})
    return [GpuNeed(r, g, c, s, tuple(sorted(n))) for (r, g, s), (c, n) in sorted(found.items())]


def regions_used(settings: Settings, jobs: Iterable[JobSpec]) -> list[str]:
    from spotcron.engine.placement import regions_for

    regions = {settings.region} | {r for job in jobs for v in job.variants() for r in regions_for(v, settings)}
    return [settings.region, *sorted(regions - {settings.region})]


def check_apis(facts: ProjectFacts, required: Sequence[str]) -> Check:
    """The APIs deploy needs. Deploy enables those that are off (Service Usage, its plan's first
    step), so only an API it cannot enable fails: Service Usage itself, through which it enables
    the others (https://cloud.google.com/service-usage/docs/enable-disable)."""
    name = "APIs"
    try:
        enabled = facts.enabled_services()
    except ServiceDisabled as exc:
        if exc.service != SERVICE_USAGE:
            return Check(name, UNKNOWN, f"could not check: {exc}")
        return Check(name, FAIL, f"{SERVICE_USAGE} is off: deploy enables the APIs it needs through it, and "
                                 "cannot turn it on itself",
                     f"gcloud services enable {SERVICE_USAGE} --project {facts.project}")
    except SpotcronError as exc:
        return Check(name, UNKNOWN, f"could not check: {exc}", "the account needs serviceusage.services.list "
                                                               "(roles/serviceusage.serviceUsageViewer)")
    missing = [api for api in required if api not in enabled]
    if not missing:
        return Check(name, OK, f"the {len(required)} APIs deploy needs are enabled")
    return Check(name, OK, f"{len(missing)} of {len(required)} APIs deploy needs are off; deploy enables them first, "
                           f"after you confirm: {', '.join(missing)}")


def check_permissions(facts: ProjectFacts) -> Check:
    name = "permissions"
    wanted = sorted(DEPLOY_PERMISSIONS)
    granted = _read(name, lambda: facts.granted_permissions(wanted), "")
    if isinstance(granted, Check):
        return granted
    missing = [p for p in wanted if p not in granted]
    if not missing:
        return Check(name, OK, f"the deploying account holds the {len(wanted)} permissions deploy uses")
    roles = sorted({role_for(p) for p in missing})
    fix = "\n".join(f"gcloud projects add-iam-policy-binding {facts.project} --member=user:YOU@example.com "
                    f"--role={role}" for role in roles)
    return Check(name, FAIL, f"the deploying account lacks {len(missing)} of {len(wanted)} permissions deploy uses: "
                             f"{', '.join(missing)}", f"{fix}\n(or roles/owner; a service account: "
                                                      f"--member=serviceAccount:EMAIL)")


def check_gpu_quotas(facts: ProjectFacts, needs: Sequence[GpuNeed]) -> list[Check]:
    """Per need, the region's GPU quota: a Spot VM takes preemptible quota where the project has
    some, and standard quota otherwise. Then GPUS_ALL_REGIONS, which counts every GPU."""
    checks: list[Check] = []
    console = f"https://console.cloud.google.com/iam-admin/quotas?project={facts.project}"
    quotas: dict[str, Any] = {}
    for need in needs:
        name = f"quota {need.region} {need.gpu}{' (Spot)' if need.spot else ''}"
        if need.region not in quotas:
            quotas[need.region] = _read(name, lambda r=need.region: facts.region_quotas(r),
                                        "the account needs compute.regions.get (roles/compute.viewer)")
        found = quotas[need.region]
        if isinstance(found, Check):
            checks.append(Check(name, UNKNOWN, found.detail, found.fix))
            continue
        if found is None:
            checks.append(Check(name, FAIL, f"Compute Engine has no region {need.region}",
                                f"use a region from `gcloud compute regions list --project {facts.project}`"))
            continue
        standard = gpu_metric(need.gpu)
        metrics = [f"PREEMPTIBLE_{standard}", standard] if need.spot else [standard]
        room = {m: found[m][0] - found[m][1] for m in metrics if m in found}
        jobs = ", ".join(need.jobs)
        if any(free >= need.count for free in room.values()):
            best = max(room, key=lambda m: room[m])
            checks.append(Check(name, OK, f"{best}: {room[best]:g} free, {need.count} needed by {jobs}"))
            continue
        seen = "; ".join(f"{m} {room[m]:g} free" for m in metrics if m in room) or "no such quota in the region"
        checks.append(Check(name, FAIL, f"{jobs} need{'s' if len(need.jobs) == 1 else ''} {need.count} x {need.gpu} "
                                        f"per VM in {need.region}, but {seen}: every start would fail QUOTA_EXCEEDED",
                            f"request at least {need.count} of {metrics[0]} in {need.region} (Compute Engine API) at "
                            f"{console}, or run these jobs in a region with quota"))
    if needs:
        name = "quota GPUS_ALL_REGIONS"
        total = _read(name, facts.project_quotas, "the account needs compute.projects.get (roles/compute.viewer)")
        most = max(n.count for n in needs)
        if isinstance(total, Check):
            checks.append(total)
        elif "GPUS_ALL_REGIONS" in total and total["GPUS_ALL_REGIONS"][0] - total["GPUS_ALL_REGIONS"][1] < most:
            limit, usage = total["GPUS_ALL_REGIONS"]
            checks.append(Check(name, FAIL, f"{limit - usage:g} GPUs free in all regions together, one VM needs {most}",
                                f"request at least {most} of GPUS_ALL_REGIONS at {console}"))
        else:
            checks.append(Check(name, OK, f"room for {most} GPU{'s' if most != 1 else ''} on one VM"))
    return checks


def _policy(facts: ProjectFacts, constraint: str) -> dict[str, Any] | Check:
    return _read(f"policy {constraint}", lambda: facts.effective_policy(constraint),
                 f"enable orgpolicy.googleapis.com and hold orgpolicy.policies.get (roles/orgpolicy.policyViewer), or "
                 f"look yourself: gcloud org-policies describe {constraint} --effective --project {facts.project}")


def _enforced(spec: dict[str, Any]) -> bool:
    return any(rule.get("enforce") for rule in spec.get("rules") or [])


def _ask_admin(constraint: str, facts: ProjectFacts, what: str) -> str:
    return (f"ask your organisation's policy administrator to {what} on project {facts.project} "
            f"(gcloud org-policies describe {constraint} --effective --project {facts.project} shows the policy)")


def check_policies(facts: ProjectFacts, settings: Settings, jobs: Sequence[JobSpec]) -> list[Check]:
    checks: list[Check] = []

    def list_check(constraint: str, values: Sequence[str], what: str, need: str) -> None:
        spec = _policy(facts, constraint)
        if isinstance(spec, Check):
            checks.append(spec)
            return
        verdicts = {v: list_allows(spec, v) for v in values}
        denied = [v for v, verdict in verdicts.items() if verdict == LIST_DENIED]
        unknown = [v for v, verdict in verdicts.items() if verdict == LIST_UNKNOWN]
        name = f"policy {constraint}"
        if denied:
            checks.append(Check(name, FAIL, f"{what}: {', '.join(denied)} not allowed", _ask_admin(constraint, facts, need)))
        elif unknown:
            checks.append(Check(name, UNKNOWN, f"{what}: cannot tell whether {', '.join(unknown)} is allowed by "
                                               f"{_values(spec)}", _ask_admin(constraint, facts, need)))
        else:
            checks.append(Check(name, OK, f"{what}: allowed"))

    list_check("compute.trustedImageProjects", [COS_IMAGES], "job VMs boot Container-Optimized OS from cos-cloud",
               f"allow {COS_IMAGES}")
    spec = _policy(facts, "compute.requireShieldedVm")
    if isinstance(spec, Check):
        checks.append(spec)
    else:
        gpu_jobs = sorted({j.name for j in jobs for v in j.variants() if v.machine.gpu is not None})
        if _enforced(spec) and gpu_jobs:
            checks.append(Check("policy compute.requireShieldedVm", FAIL,
                                f"enforced, and GPU jobs run without Secure Boot so that their driver loads: "
                                f"{', '.join(gpu_jobs)} would be refused",
                                _ask_admin("compute.requireShieldedVm", facts, "exempt the project") +
                                "; or remove machine.gpu from those jobs"))
        else:
            checks.append(Check("policy compute.requireShieldedVm", OK,
                                "enforced; job VMs are Shielded VMs" if _enforced(spec) else "not enforced"))
    spec = _policy(facts, "compute.skipDefaultNetworkCreation")
    if isinstance(spec, Check):
        checks.append(spec)
    else:
        note = ("enforced: new projects get no `default` network; the network check below says whether "
                f"`{settings.network}` exists") if _enforced(spec) else "not enforced"
        checks.append(Check("policy compute.skipDefaultNetworkCreation", OK, note))
    list_check("cloudfunctions.allowedIngressSettings", ["ALLOW_ALL"],
               "the functions accept all traffic (VMs call job_done over the internet, with identity tokens)",
               "allow ALLOW_ALL")
    list_check("run.allowedIngress", ["all"], "the functions' Cloud Run services accept all traffic", "allow all")
    locations = regions_used(settings, jobs)
    spec = _policy(facts, "gcp.resourceLocations")
    if isinstance(spec, Check):
        checks.append(spec)
    else:
        verdicts = {r: location_allowed(spec, r) for r in locations}
        denied = [r for r, v in verdicts.items() if v == LIST_DENIED]
        unknown = [r for r, v in verdicts.items() if v == LIST_UNKNOWN]
        name = "policy gcp.resourceLocations"
        if denied:
            checks.append(Check(name, FAIL, f"resources may not be created in {', '.join(denied)}",
                                _ask_admin("gcp.resourceLocations", facts, f"allow {', '.join(denied)}") +
                                "; or pick an allowed `region:` in infra/stack.yaml"))
        elif unknown:
            checks.append(Check(name, UNKNOWN, f"cannot tell whether {', '.join(unknown)} is allowed by {_values(spec)}",
                                _ask_admin("gcp.resourceLocations", facts, f"allow {', '.join(unknown)}")))
        else:
            checks.append(Check(name, OK, f"{', '.join(locations)} allowed"))
    external = sorted({j.name for j in jobs for v in j.variants() if v.external_ip})
    if external:
        spec = _policy(facts, "compute.vmExternalIpAccess")
        name = "policy compute.vmExternalIpAccess"
        verdict = spec if isinstance(spec, Check) else external_ip_allowed(spec)
        if isinstance(verdict, Check):
            checks.append(verdict)
        elif verdict == LIST_ALLOWED:
            checks.append(Check(name, OK, f"external addresses allowed for {', '.join(external)}"))
        else:
            checks.append(Check(name, FAIL if verdict == LIST_DENIED else UNKNOWN,
                                f"{', '.join(external)} ask for an external address (external_ip: true), which the "
                                "policy refuses to VMs it does not name (each run's VM has a new name)",
                                _ask_admin("compute.vmExternalIpAccess", facts, "allow external addresses") +
                                "; or set external_ip: false on those jobs"))
    return checks


def _values(spec: dict[str, Any]) -> str:
    values = [v for rule in spec.get("rules") or [] for v in (rule.get("values") or {}).get("allowedValues") or []]
    return "the allowed values " + ", ".join(values) if values else "the policy"


def check_network(facts: ProjectFacts, settings: Settings, regions: Sequence[str]) -> list[Check]:
    name = f"network {settings.network}"
    network = _read(name, lambda: facts.network(settings.network),
                    "the account needs compute.networks.get (roles/compute.networkViewer)")
    if isinstance(network, Check):
        return [network]
    if network is None:
        return [Check(name, FAIL, f"project {facts.project} has no network {settings.network!r} for job VMs "
                                  "(an organisation enforcing compute.skipDefaultNetworkCreation creates none)",
                      f"gcloud compute networks create {settings.network} --subnet-mode=auto --project {facts.project}\n"
                      "or name an existing one in infra/stack.yaml: `network:` (and `subnetwork:`)")]
    checks = [Check(name, OK, "exists" + (" (auto mode)" if network.get("autoCreateSubnetworks") else ""))]
    subnet = settings.subnetwork or settings.network
    for region in regions:
        found = _read(f"subnetwork {subnet} in {region}", lambda r=region: facts.subnetwork(r, subnet), "")
        if isinstance(found, Check):
            checks.append(found)
        elif found is None:
            checks.append(Check(f"subnetwork {subnet} in {region}", FAIL,
                                f"network {settings.network} has no subnet {subnet!r} in {region}, where job VMs run",
                                f"gcloud compute networks subnets create {subnet} --network {settings.network} "
                                f"--region {region} --range RANGE --enable-private-ip-google-access --project "
                                f"{facts.project}\nor set `subnetwork:` in infra/stack.yaml to the subnet there"))
        else:
            checks.append(Check(f"subnetwork {subnet} in {region}", OK, "exists"))
    return checks


def check_build_region(settings: Settings) -> Check:
    """Cloud Build may be restricted to a few regions for some projects, "due to quota
    restrictions" (https://cloud.google.com/build/docs/locations); no read tells in advance."""
    name = f"Cloud Build in {settings.region}"
    if settings.region in CLOUD_BUILD_UNRESTRICTED:
        return Check(name, OK, "a region where every project may build")
    return Check(name, WARN, f"Google may restrict a project's builds to {', '.join(CLOUD_BUILD_UNRESTRICTED)} "
                             "(\"cannot run builds in this region\"); the functions are built in the stack's region, "
                             "job images then in Cloud Build's global location",
                 "if the functions' builds are refused: set `region:` in infra/stack.yaml to one of "
                 f"{', '.join(CLOUD_BUILD_UNRESTRICTED)}, or ask Google support to lift the restriction")


def run_checks(facts: ProjectFacts, settings: Settings, jobs: Sequence[JobSpec], required_apis: Sequence[str]) -> list[Check]:
    """Every check, in the order a first deploy would meet them."""
    regions = regions_used(settings, jobs)
    return [check_apis(facts, required_apis), check_permissions(facts),
            *check_gpu_quotas(facts, gpu_needs(settings, jobs)), *check_policies(facts, settings, jobs),
            *check_network(facts, settings, regions), check_build_region(settings)]


MARKS = {OK: "✓", FAIL: "✗", UNKNOWN: "?", WARN: "!"}


def format_checks(checks: Sequence[Check]) -> list[str]:
    lines = []
    for check in checks:
        lines.append(f"{MARKS[check.status]} {check.name}: {check.detail}")
        if check.status != OK and check.fix:
            lines += [f"    fix: {line}" if i == 0 else f"         {line}" for i, line in enumerate(check.fix.splitlines())]
    failed = sum(1 for c in checks if c.status == FAIL)
    unknown = sum(1 for c in checks if c.status == UNKNOWN)
    if failed:
        lines.append(f"{failed} check{'s' if failed != 1 else ''} failed"
                     + (f", {unknown} could not be made" if unknown else "")
                     + ": a deploy or a run would fail on the project as it is. Fix them, then run spotcron doctor "
                       "again.")
    elif unknown:
        lines.append(f"No check failed; {unknown} could not be made (see above).")
    elif any(c.status == WARN for c in checks):
        lines.append("No check failed; see the warnings above.")
    else:
        lines.append(f"All {len(checks)} checks passed.")
    return lines


def failed(checks: Sequence[Check]) -> bool:
    return any(c.status == FAIL for c in checks)
