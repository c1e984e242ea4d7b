"""What `spotcron doctor` compares the project with: the permissions deploy uses (and the
predefined role that grants each), Compute Engine's GPU quota metric names, and how an effective
organisation policy (Org Policy v2 `PolicySpec.rules`) is read for one value. Pure data and
functions; the sources are cited in docs/deploy.md, "Before your first deploy".
"""

from __future__ import annotations

import re
from typing import Any

# "Depending on usage, some projects might be restricted to using Cloud Build only in the
# following regions" (https://cloud.google.com/build/docs/locations): the regions where every
# project may build.
CLOUD_BUILD_UNRESTRICTED = ("us-central1", "us-west2", "europe-west1", "asia-east1", "australia-southeast1",
                            "southamerica-east1")

# The image project every job VM boots from (settings.image_family), as
# compute.trustedImageProjects names it.
COS_IMAGES = "projects/cos-cloud"

# Every permission a first deploy (and `spotcron destroy`) uses on the project, with the
# narrowest predefined role that holds it; roles/owner holds them all.
DEPLOY_PERMISSIONS: dict[str, str] = {
    **{p: "roles/storage.admin" for p in (
        "storage.buckets.create", "storage.buckets.get", "storage.buckets.update", "storage.buckets.getIamPolicy",
        "storage.buckets.setIamPolicy", "storage.objects.create", "storage.objects.delete", "storage.objects.get",
        "storage.objects.list")},
    **{p: "roles/pubsub.admin" for p in (
        "pubsub.topics.create", "pubsub.topics.list", "pubsub.topics.update", "pubsub.topics.delete",
        "pubsub.topics.getIamPolicy", "pubsub.topics.setIamPolicy")},
    **{p: "roles/iam.serviceAccountAdmin" for p in (
        "iam.serviceAccounts.create", "iam.serviceAccounts.list", "iam.serviceAccounts.delete",
        "iam.serviceAccounts.getIamPolicy", "iam.serviceAccounts.setIamPolicy")},
    "iam.serviceAccounts.actAs": "roles/iam.serviceAccountUser",
    "resourcemanager.projects.getIamPolicy": "roles/resourcemanager.projectIamAdmin",
    "resourcemanager.projects.setIamPolicy": "roles/resourcemanager.projectIamAdmin",
    **{p: "roles/cloudfunctions.admin" for p in (
        "cloudfunctions.functions.create", "cloudfunctions.functions.update", "cloudfunctions.functions.list",
        "cloudfunctions.functions.delete", "cloudfunctions.operations.get")},
    **{p: "roles/run.admin" for p in ("run.services.getIamPolicy", "run.services.setIamPolicy")},
    **{p: "roles/cloudscheduler.admin" for p in (
        "cloudscheduler.jobs.create", "cloudscheduler.jobs.update", "cloudscheduler.jobs.list",
        "cloudscheduler.jobs.delete", "cloudscheduler.jobs.pause", "cloudscheduler.jobs.enable",
        "cloudscheduler.jobs.run")},
    **{p: "roles/artifactregistry.admin" for p in (
        "artifactregistry.repositories.create", "artifactregistry.repositories.get",
        "artifactregistry.repositories.update", "artifactregistry.repositories.getIamPolicy",
        "artifactregistry.repositories.setIamPolicy")},
    **{p: "roles/cloudbuild.builds.editor" for p in ("cloudbuild.builds.create", "cloudbuild.builds.list")},
    **{p: "roles/compute.securityAdmin" for p in (
        "compute.firewalls.create", "compute.firewalls.get", "compute.firewalls.update", "compute.firewalls.delete")},
    **{p: "roles/compute.networkAdmin" for p in (
        "compute.networks.get", "compute.networks.updatePolicy", "compute.subnetworks.get",
        "compute.subnetworks.setPrivateIpGoogleAccess")},
    "compute.instances.list": "roles/compute.viewer",  # destroy deletes live job VMs
    "compute.instances.delete": "roles/compute.instanceAdmin.v1",
    "serviceusage.services.list": "roles/serviceusage.serviceUsageViewer",
    "serviceusage.services.use": "roles/serviceusage.serviceUsageConsumer",
    "serviceusage.services.enable": "roles/serviceusage.serviceUsageAdmin",  # deploy's first step
}


def role_for(permission: str) -> str:
    return DEPLOY_PERMISSIONS.get(permission, "roles/owner")


def gpu_metric(gpu_type: str) -> str:
    """Compute Engine's regional quota metric for a GPU type: nvidia-tesla-t4 → NVIDIA_T4_GPUS,
    nvidia-a100-80gb → NVIDIA_A100_80GB_GPUS, nvidia-h100-80gb → NVIDIA_H100_GPUS (Quota.Metric)."""
    model = gpu_type.removeprefix("nvidia-").removeprefix("tesla-").upper().replace("-", "_")
    if model.startswith("H100"):  # the H100's metric names no memory size
        model = "H100"
    return f"NVIDIA_{model}_GPUS"


LIST_ALLOWED, LIST_DENIED, LIST_UNKNOWN = "allowed", "denied", "unknown"


def _plain(value: str) -> str:
    return value.removeprefix("is:")


def list_allows(spec: dict[str, Any], value: str) -> str:
    """Whether the list constraint's effective `spec` allows `value`.

    No rule: the constraint's default, which allows everything for the constraints doctor reads.
    `denyAll` denies; a denied value denies; with allowed values, the value must be among them; a
    value group (`in:…`) that is not the value itself cannot be told apart here: unknown."""
    rules = spec.get("rules") or []
    if any(rule.get("denyAll") for rule in rules):
        return LIST_DENIED
    allowed: list[str] = []
    for rule in rules:
        values = rule.get("values") or {}
        if value in {_plain(v) for v in values.get("deniedValues") or []}:
            return LIST_DENIED
        allowed += values.get("allowedValues") or []
    if any(rule.get("allowAll") for rule in rules) or not allowed:
        return LIST_ALLOWED
    plain = {_plain(v) for v in allowed}
    if value in plain:
        return LIST_ALLOWED
    return LIST_UNKNOWN if any(v.startswith("in:") for v in allowed) else LIST_DENIED


# Multi-region value groups of gcp.resourceLocations and the region name prefixes they hold.
_REGION_GROUP = re.compile(r"^in:[a-z]+-[a-z]+[0-9]+-locations$")
_LOCATION_GROUPS = {"in:us-locations": "us-", "in:eu-locations": "europe-", "in:asia-locations": "asia-"}


def location_allowed(spec: dict[str, Any], region: str) -> str:
    """gcp.resourceLocations for one region: the region itself, its `in:REGION-locations` group,
    or the multi-region group it lies in."""
    rules = spec.get("rules") or []
    allowed = [v for rule in rules for v in (rule.get("values") or {}).get("allowedValues") or []]
    for value in allowed:
        if _plain(value) == region or value == f"in:{region}-locations" or (
                value in _LOCATION_GROUPS and region.startswith(_LOCATION_GROUPS[value])):
            without = {**spec, "rules": [{**r, "values": {"deniedValues": (r.get("values") or {}).get("deniedValues")
                                                          or []}} for r in rules]}
            return list_allows(without, region)
    if allowed and all(not v.startswith("in:") or v in _LOCATION_GROUPS or _REGION_GROUP.match(v) for v in allowed):
        return LIST_DENIED if not any(r.get("allowAll") for r in rules) else list_allows(spec, region)
    return list_allows(spec, region)


def external_ip_allowed(spec: dict[str, Any]) -> str:
    """compute.vmExternalIpAccess for VMs created per run: its allowed values name instances, and a
    run's VM has a new name every time, so only "no rule" or allowAll lets them have an address."""
    rules = spec.get("rules") or []
    if not rules or any(rule.get("allowAll") for rule in rules):
        return LIST_ALLOWED
    if any(rule.get("denyAll") or (rule.get("values") or {}).get("allowedValues") for rule in rules):
        return LIST_DENIED
    return LIST_UNKNOWN
