"""The Advisor port on Compute Engine's advice API (google-cloud-compute's AdviceClient, REST).

- `regions.advice.capacityHistory` (POST .../regions/REGION/advice/capacityHistory): per machine
  type and location, the daily Spot preemption rate and the Spot list price for 30 days back. Its
  response covers one location, so it is asked once per zone. N1 with GPUs, custom types and TPUs
  are not covered.
- `regions.advice.capacity` (POST .../regions/REGION/advice/capacity): whether Spot capacity can
  be had now, as an obtainability score per recommended zone.

The request bodies are built by pure functions as the REST JSON the API receives; tests compare
them, and what the real client sends to a fake server, with literals whose field names are those
of the compute.v1 schema (CapacityHistoryRequest, CapacityAdviceRequest).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from spotcron.engine.ports import ZoneHistory
from spotcron.gcp.error_map import translated

# capacity's instanceFlexibilityPolicy.instanceSelections is a map keyed by a name we choose.
SELECTION = "spotcron"


def history_body(machine_type: str, zone: str) -> dict[str, Any]:
    """CapacityHistoryRequest for one zone: both history types, Spot (the only model it serves)."""
    return {
        "instanceProperties": {"machineType": machine_type, "scheduling": {"provisioningModel": "SPOT"}},
        "locationPolicy": {"location": f"zones/{zone}"},
        "types": ["PREEMPTION", "PRICE"],
    }


def capacity_body(machine_type: str, zones: Sequence[str]) -> dict[str, Any]:
    """CapacityAdviceRequest: one Spot VM of `machine_type` in any single one of `zones`."""
    return {
        "instanceProperties": {"scheduling": {"provisioningModel": "SPOT"}},
        "instanceFlexibilityPolicy": {"instanceSelections": {SELECTION: {"machineTypes": [machine_type]}}},
        "size": 1,
        "distributionPolicy": {"zones": [{"zone": f"zones/{zone}"} for zone in zones],
                               "targetShape": "ANY_SINGLE_ZONE"},
    }


def _money(value: Mapping[str, Any] | None) -> float | None:
    if not value:
        return None
    return int(value.get("units") or 0) + int(value.get("nanos") or 0) / 1e9


def parse_history(response: Mapping[str, Any]) -> ZoneHistory | None:
    """The latest Spot list price (USD/h) and the mean daily preemption rate; None when empty."""
    prices = sorted(response.get("priceHistory") or [],
                    key=lambda r: str((r.get("interval") or {}).get("endTime", "")))
    rates = [float(r["preemptionRate"]) for r in response.get("preemptionHistory") or [] if "preemptionRate" in r]
    price = _money(prices[-1].get("listPrice")) if prices else None
    if price is None and not rates:
        return None
    rate = min(1.0, max(0.0, sum(rates) / len(rates))) if rates else None
    return ZoneHistory(spot_hourly=price, preemption_rate=rate)


def parse_capacity(response: Mapping[str, Any]) -> dict[str, float]:
    """zone → the best obtainability score any recommendation gives it."""
    scores: dict[str, float] = {}
    for recommendation in response.get("recommendations") or []:
        score = (recommendation.get("scores") or {}).get("obtainability")
        if score is None:
            continue
        for shard in recommendation.get("shards") or []:
            zone = str(shard.get("zone", "")).rstrip("/").rsplit("/", 1)[-1]
            if zone:
                scores[zone] = max(scores.get(zone, 0.0), min(1.0, max(0.0, float(score))))
    return scores


class GoogleAdvisor:
    """Advisor for one project. `google.cloud.compute_v1` is imported on first use (it is slow)."""

    def __init__(self, project: str, *, client_options: Mapping[str, Any] | None = None,
                 credentials: Any = None, timeout: float = 30.0):
        self.project = project
        self.timeout = timeout
        self._client_options = dict(client_options) if client_options else None
        self._credentials = credentials
        self._lock = threading.Lock()
        self._client: Any = None

    def _advice(self) -> Any:
        with self._lock:
            if self._client is None:
                from google.cloud import compute_v1

                kwargs: dict[str, Any] = {"transport": "rest"}
                if self._client_options is not None:
                    kwargs["client_options"] = self._client_options
                if self._credentials is not None:
                    kwargs["credentials"] = self._credentials
                with translated(f"connect to the Compute Engine advice API in project {self.project}"):
                    self._client = compute_v1.AdviceClient(**kwargs)
            return self._client

    def capacity_history(self, region: str, machine_type: str, zones: Sequence[str]) -> dict[str, ZoneHistory]:
        from google.cloud import compute_v1

        client, found = self._advice(), {}
        for zone in zones:
            request = compute_v1.CapacityHistoryRequest.from_json(_json(history_body(machine_type, zone)))
            with translated(f"advice.capacityHistory for {machine_type} in {zone}"):
                response = client.capacity_history(project=self.project, region=region,
                                                   capacity_history_request_resource=request, timeout=self.timeout)
            said = parse_history(_as_json(type(response), response))
            if said is not None:
                found[zone] = said
        return found

    def capacity(self, region: str, machine_type: str, zones: Sequence[str]) -> dict[str, float]:
        from google.cloud import compute_v1

        request = compute_v1.CapacityAdviceRequest.from_json(_json(capacity_body(machine_type, zones)))
        with translated(f"advice.capacity for {machine_type} in {region}"):
            response = self._advice().capacity(project=self.project, region=region,
                                               capacity_advice_request_resource=request, timeout=self.timeout)
        return parse_capacity(_as_json(type(response), response))


def _json(body: Mapping[str, Any]) -> str:
    import json

    return json.dumps(body)


def _as_json(kind: Any, message: Any) -> dict[str, Any]:
    """A proto-plus message as the REST JSON it came from (camelCase field names)."""
    import json

    return json.loads(kind.to_json(message, preserving_proto_field_name=False))
