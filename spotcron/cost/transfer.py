"""Data transfer a run pays when it runs outside the region of the stack's registry and bucket.

Every run boots a fresh VM, so every run pulls its image whole from the stack's Artifact Registry
repository (in the stack's region), and uploads its logs and results to the stack's bucket (in
the stack's region). In the same region both are free. From a VM in another region:

- the pull is Artifact Registry egress between two regions of one continent, billed per GB
  delivered by the repository;
- the upload is the VM's traffic to a Google API in another region, billed as Compute Engine
  inter-region egress; writing into a bucket is not billed by Cloud Storage itself.

Private Google Access changes only how a VM without an external IP reaches Google's APIs, not
what the bytes cost. Rates are per GB, dated and sourced like the price tables; docs/cost.md cites
them. Across continents the rates are higher: this table holds the Northern America ones, and a
pair of regions on different continents is priced at the intercontinental rate, which is why
placement across continents rarely pays for a short job.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TransferRates:
    as_of: str
    registry_inter_region_gb: float  # Artifact Registry: repository region → VM in another region, same continent
    vm_inter_region_gb: float  # Compute Engine: VM → Google API (the bucket) in another region, same continent
    intercontinental_gb: float  # either, between continents
    source: str


# The values are Google's published list prices on the date below (docs/cost.md gives the pages).
RATES = TransferRates(
    as_of="2026-11-25",
    registry_inter_region_gb=0.02,
    vm_inter_region_gb=0.02,
    intercontinental_gb=0.08,
    source="https://cloud.google.com/artifact-registry/pricing#network; "
           "https://cloud.google.com/vpc/network-pricing#vpc-pricing",
)


def continent(region: str) -> str:
    """us-west4 → "us"; northamerica-northeast1 → "northamerica" (one continent with us)."""
    head = region.split("-", 1)[0]
    return "us" if head in ("us", "northamerica") else head


def run_transfer_usd(stack_region: str, run_region: str, *, image_gb: float, results_gb: float,
                     rates: TransferRates = RATES) -> dict[str, float]:
    """What one run placed in `run_region` pays to move its image in and its results home."""
    if run_region == stack_region:
        return {"image_pull": 0.0, "results_upload": 0.0}
    if continent(run_region) == continent(stack_region):
        pull, upload = rates.registry_inter_region_gb, rates.vm_inter_region_gb
    else:
        pull = upload = rates.intercontinental_gb
    return {"image_pull": image_gb * pull, "results_upload": results_gb * upload}
