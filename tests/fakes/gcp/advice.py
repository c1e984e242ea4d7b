"""A fake of Compute Engine's advice API (regions.advice.capacityHistory and .capacity).

Answers from a table of (machine type, zone) → (Spot $/h, daily preemption rate, obtainability)
with the response shapes of compute.v1 (CapacityHistoryResponse, CapacityAdviceResponse), and
records every request body so tests can compare it with the published schema.
"""

from __future__ import annotations

from typing import Any

from tests.fakes.gcp.rest import FakeRestServer, RecordedRequest, Reply

ADVICE = r"/compute/v1/projects/(?P<project>[^/]+)/regions/(?P<region>[^/]+)/advice/"


class FakeAdvice(FakeRestServer):
    def __init__(self, table: dict[tuple[str, str], tuple[float | None, float | None, float | None]]):
        super().__init__()
        self.table = table
        self.route("POST", ADVICE + "capacityHistory", self._history)
        self.route("POST", ADVICE + "capacity", self._capacity)

    def _history(self, request: RecordedRequest, project: str, region: str) -> Reply:
        body = request.body or {}
        machine = body["instanceProperties"]["machineType"]
        zone = body["locationPolicy"]["location"].rsplit("/", 1)[-1]
        price, rate, _ = self.table.get((machine, zone), (None, None, None))
        answer: dict[str, Any] = {"machineType": machine,
                                  "location": f"https://www.googleapis.com/compute/v1/projects/{project}/zones/{zone}"}
        if price is not None:
            units, nanos = int(price), round((price - int(price)) * 1e9)
            answer["priceHistory"] = [
                {"interval": {"startTime": "2026-11-23T08:00:00Z", "endTime": "2026-11-24T08:00:00Z"},
                 "listPrice": {"currencyCode": "USD", "units": str(units), "nanos": nanos + 1000}},
                {"interval": {"startTime": "2026-11-24T08:00:00Z", "endTime": "2026-11-25T08:00:00Z"},
                 "listPrice": {"currencyCode": "USD", "units": str(units), "nanos": nanos}},
            ]
        if rate is not None:
            answer["preemptionHistory"] = [
                {"interval": {"startTime": "2026-11-23T08:00:00Z", "endTime": "2026-11-24T08:00:00Z"},
                 "preemptionRate": rate / 2},
                {"interval": {"startTime": "2026-11-24T08:00:00Z", "endTime": "2026-11-25T08:00:00Z"},
                 "preemptionRate": rate * 1.5},
            ]
        return 200, answer

    def _capacity(self, request: RecordedRequest, project: str, region: str) -> Reply:
        body = request.body or {}
        selection = next(iter(body["instanceFlexibilityPolicy"]["instanceSelections"].values()))
        machine = selection["machineTypes"][0]
        recommendations = []
        for entry in body["distributionPolicy"]["zones"]:
            zone = entry["zone"].rsplit("/", 1)[-1]
            score = self.table.get((machine, zone), (None, None, None))[2]
            if score is None:
                continue
            recommendations.append({
                "scores": {"obtainability": score, "estimatedUptime": "3600s"},
                "shards": [{"zone": f"https://www.googleapis.com/compute/v1/projects/{project}/zones/{zone}",
                            "machineType": machine, "provisioningModel": "SPOT", "instanceCount": 1}]})
        return 200, {"recommendations": recommendations}
