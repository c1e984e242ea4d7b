"""The Compute port on Compute Engine (google-cloud-compute, REST transport).

`google.cloud.compute_v1` takes over a second to import, and the functions that use this class
are cold-started on a schedule, so it is imported on first use, never at module import.

The instance body is built by a pure function (`instance_body`) as the REST JSON the API
receives; tests compare it, and the request the client really sends, with a literal.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from spotcron.core.errors import AlreadyExists, Transient
from spotcron.engine.ports import MANAGED_LABEL, Instance, InstanceRequest
from spotcron.gcp.error_map import classify_create_error, create_error, translate, translated

CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
# The filter that list_managed sends: AIP-160 syntax on a nested label field.
MANAGED_FILTER = f'labels.{MANAGED_LABEL} = "1"'
# Set on every job VM whatever the request says: no SSH key of the project opens a job VM.
# (No `google-logging-enabled`: the VM account may not write Cloud Logging; the runner ships
# the job's output to the bucket.)
FORCED_METADATA = {"block-project-ssh-keys": "true"}
# Every job VM carries this network tag; deploy's firewall rule denies all ingress to it.
NETWORK_TAG = "spotcron-vm"


def _last_segment(url: str) -> str:
    """`zones/us-central1-a` or a full resource URL → `us-central1-a`."""
    return url.rstrip("/").rsplit("/", 1)[-1]


def _parse_time(value: str) -> datetime | None:
    if not value:
        return None
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return parsed.astimezone(UTC) if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def instance_body(request: InstanceRequest) -> dict[str, Any]:
    """The Instance resource (REST JSON, int64 values as strings) for `request`."""
    zone = request.zone
    metadata = {**request.metadata, **FORCED_METADATA}
    interface: dict[str, Any] = {"network": request.network}
    if request.subnetwork:
        interface["subnetwork"] = request.subnetwork
    if request.external_ip:
        # Asked for by the job (it reaches the internet); Spot VMs pay for an in-use external IPv4.
        interface["accessConfigs"] = [{"name": "External NAT", "type": "ONE_TO_ONE_NAT"}]
    body: dict[str, Any] = {
        "name": request.name,
        "machineType": f"zones/{zone}/machineTypes/{request.machine_type}",
        "labels": dict(request.labels),
        "metadata": {"items": [{"key": key, "value": value} for key, value in metadata.items()]},
        "disks": [{
            "boot": True,
            "autoDelete": True,  # the disk goes with the VM: nothing bills between runs
            "initializeParams": {
                "sourceImage": request.image,
                "diskSizeGb": str(request.disk_gb),
                "diskType": f"zones/{zone}/diskTypes/{request.disk_type}",
            },
        }],
        "tags": {"items": [NETWORK_TAG]},
        "networkInterfaces": [interface],
        "serviceAccounts": [{"email": request.service_account, "scopes": [CLOUD_PLATFORM_SCOPE]}],
        # Shielded VM (COS images support it): what compute.requireShieldedVm asks for, with Secure
        # Boot left off only for a job whose GPU driver must load (see InstanceRequest).
        "shieldedInstanceConfig": {
            "enableSecureBoot": request.secure_boot,
            "enableVtpm": True,
            "enableIntegrityMonitoring": True,
        },
        "scheduling": {
            "provisioningModel": "SPOT" if request.spot else "STANDARD",
            # Spot's default termination action is STOP, which keeps billing the disk.
            "instanceTerminationAction": "DELETE",
            "maxRunDuration": {"seconds": str(request.max_run_duration_s)},
            # Spot VMs and VMs with GPUs cannot live-migrate or be restarted in place.
            "onHostMaintenance": "TERMINATE",
            "automaticRestart": False,
        },
    }
    if request.gpu is not None:
        body["guestAccelerators"] = [{
            "acceleratorType": f"zones/{zone}/acceleratorTypes/{request.gpu.type}",
            "acceleratorCount": request.gpu.count,
        }]
    return body


def _to_instance(resource: Any, zone: str | None = None) -> Instance:
    """A compute_v1.Instance → our Instance."""
    scheduling = resource.scheduling
    model = scheduling.provisioning_model or ("SPOT" if scheduling.preemptible else "STANDARD")
    created = _parse_time(resource.creation_timestamp)
    return Instance(
        name=resource.name,
        zone=_last_segment(resource.zone) if resource.zone else (zone or ""),
        status=resource.status or "",
        labels=dict(resource.labels),
        machine_type=_last_segment(resource.machine_type),
        provisioning_model=model,
        # Compute Engine always sets creationTimestamp; the epoch only keeps a malformed
        # record from breaking a whole listing.
        created_at=created or datetime.fromtimestamp(0, UTC),
        metadata={item.key: item.value for item in resource.metadata.items},
        instance_id=str(resource.id) if resource.id else "",
    )


class GoogleCompute:
    """Compute on Compute Engine, for one project.

    `zones` are the zones the engine places VMs in (kept for callers; list_managed looks at
    every zone). `timeout` bounds each HTTP call in seconds; an insert is waited for with at
    most `max_waits` zoneOperations.wait calls (each returns after at most ~2 minutes).
    """

    def __init__(self, project: str, zones: Iterable[str] = (), *, client_options: Mapping[str, Any] | None = None,
                 credentials: Any = None, timeout: float = 60.0, max_waits: int = 3):
        self.project = project
        self.zones = tuple(zones)
        self.timeout = timeout
        self.max_waits = max_waits
        self._client_options = dict(client_options) if client_options else None
        self._credentials = credentials
        self._lock = threading.Lock()
        self._instances: Any = None
        self._operations: Any = None

    def _clients(self) -> tuple[Any, Any]:
        with self._lock:
            if self._instances is None:
                from google.cloud import compute_v1

                kwargs: dict[str, Any] = {"transport": "rest"}
                if self._client_options is not None:
                    kwargs["client_options"] = self._client_options
                if self._credentials is not None:
                    kwargs["credentials"] = self._credentials
                with translated(f"connect to Compute Engine in project {self.project}"):
                    self._instances = compute_v1.InstancesClient(**kwargs)
                    # insert()'s own poller ignores a custom api_endpoint; insert_unary + wait do not.
                    self._operations = compute_v1.ZoneOperationsClient(**kwargs)
            return self._instances, self._operations

    # --- create ----------------------------------------------------------------------------

    def create_instance(self, request: InstanceRequest) -> Instance:
        from google.cloud import compute_v1

        instances, _ = self._clients()
        what = f"create instance {request.name} in {request.zone}"
        resource = compute_v1.Instance.from_json(json.dumps(instance_body(request)))
        try:
            # requestId: a repeat of this attempt's insert within 60 minutes is ignored by Compute
            # Engine and answered with the first insert's operation (engine/ports.InstanceRequest).
            insert = compute_v1.InsertInstanceRequest(project=self.project, zone=request.zone,
                                                      instance_resource=resource)
            if request.request_id:
                insert.request_id = request.request_id
            operation = instances.insert_unary(request=insert, timeout=self.timeout)
        except Exception as exc:
            mapped = create_error(exc, what)
            if mapped is None:
                raise
            raise mapped from exc
        operation = self._wait(operation, request.zone, what)
        self._raise_operation_error(operation, what)
        created = _parse_time(operation.insert_time)
        if created is None:
            found = self.get_instance(request.zone, request.name)
            if found is None:
                raise Transient(f"{what}: the insert finished but the instance is not there")
            return found
        metadata = {**request.metadata, **FORCED_METADATA}
        return Instance(
            name=request.name,
            zone=request.zone,
            status="PROVISIONING",
            labels=dict(request.labels),
            machine_type=request.machine_type,
            provisioning_model="SPOT" if request.spot else "STANDARD",
            created_at=created,
            metadata=metadata,
            instance_id=str(operation.target_id) if operation.target_id else "",
        )

    def _wait(self, operation: Any, zone: str, what: str) -> Any:
        from google.cloud import compute_v1

        _, operations = self._clients()
        done = compute_v1.Operation.Status.DONE
        for _ in range(self.max_waits):
            if operation.status == done:
                return operation
            try:
                operation = operations.wait(project=self.project, zone=zone, operation=operation.name,
                                            timeout=self.timeout)
            except Exception as exc:
                # The insert was accepted; whatever went wrong while watching it, the instance
                # may exist: only a retry (which then meets AlreadyExists) can tell.
                mapped = translate(exc, f"{what}: wait for operation {operation.name}")
                if mapped is None:
                    raise
                raise Transient(str(mapped)) from exc
        if operation.status == done:
            return operation
        raise Transient(f"{what}: operation {operation.name} is still {operation.status.name} after "
                        f"{self.max_waits} waits; the instance may still appear")

    @staticmethod
    def _raise_operation_error(operation: Any, what: str) -> None:
        errors = list(operation.error.errors)
        if not errors:
            return
        status = int(operation.http_error_status_code or 0)
        # The first error decides; the others are folded into the message for the run record.
        first = errors[0]
        reasons = [detail.error_info.reason for e in errors for detail in e.error_details if detail.error_info.reason]
        message = "; ".join(e.message for e in errors if e.message) or operation.http_error_message
        mapped = classify_create_error(first.code, message, http_status=status, reasons=reasons)
        if isinstance(mapped, AlreadyExists | Transient):
            raise type(mapped)(f"{what}: {mapped}")
        raise type(mapped)(mapped.kind, f"{what}: {mapped.reason}")

    # --- read / delete ---------------------------------------------------------------------

    def get_instance(self, zone: str, name: str) -> Instance | None:
        from google.api_core import exceptions as gexc

        instances, _ = self._clients()
        with translated(f"get instance {name} in {zone}"):
            try:
                resource = instances.get(project=self.project, zone=zone, instance=name, timeout=self.timeout)
            except gexc.NotFound:
                return None
        return _to_instance(resource, zone)

    def list_managed(self) -> list[Instance]:
        """One aggregatedList over every zone (all pages), filtered on our label server-side."""
        from google.cloud import compute_v1

        instances, _ = self._clients()
        request = compute_v1.AggregatedListInstancesRequest(project=self.project, filter=MANAGED_FILTER)
        found: list[Instance] = []
        with translated("list managed instances"):
            for scope, scoped in instances.aggregated_list(request=request, timeout=self.timeout):
                if scoped.warning and scoped.warning.code == "UNREACHABLE":
                    # A partial listing would make live VMs look vanished (and their runs retried).
                    raise Transient(f"list managed instances: {scope} is unreachable: {scoped.warning.message}")
                for resource in scoped.instances:
                    instance = _to_instance(resource, _last_segment(scope))
                    if instance.managed:  # never trust a filter with the one label that guards deletion
                        found.append(instance)
        return sorted(found, key=lambda i: (i.zone, i.name))

    def delete_instance(self, zone: str, name: str) -> bool:
        """Ask for the deletion and return once it is accepted.

        The operation is not waited for: a delete takes tens of seconds, billing stops as the
        VM stops, and the sweep reaps the rare VM whose deletion failed.
        """
        from google.api_core import exceptions as gexc

        instances, _ = self._clients()
        with translated(f"delete instance {name} in {zone}"):
            try:
                instances.delete_unary(project=self.project, zone=zone, instance=name, timeout=self.timeout)
            except gexc.NotFound:
                return False
        return True
