"""Data transfer a run pays when it runs outside the region of the stack's registry and bucket.

Every run boots a fresh VM, so every run pulls its image whole, and uploads its logs and results
to the stack's bucket (in the stack's region). Where the image lives decides what the pull costs:

- a regional Artifact Registry repository (`REGION-docker.pkg.dev`, e.g. the stack's own): free
  in its region; billed per GB delivered to another region of its continent, more across;
- a multi-region repository (`us-docker.pkg.dev`, `gcr.io`, ...): free to any region of its
  continent;
- a registry outside Google Cloud (Docker Hub, ...): ingress, which Google does not bill.

The upload from a VM in another region is billed as the VM's inter-region traffic; writing into a
bucket is not billed by Cloud Storage itself.

Private Google Access changes only how a VM without an external IP reaches Google's APIs, not
what the bytes cost. Rates are per GB, dated and sourced like the price tables; docs/cost.md cites
them. Across continents the rates are higher: this table holds the Northern America ones, and a
pair of regions on different continents is priced at the intercontinental rate, which is why
placement across continents rarely pays for a short job.
"""

from __future__ import annotations

import re
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


# Multi-region registry hosts and the continent each serves free of charge.
MULTI_REGION_HOSTS = {"us-docker.pkg.dev": "us", "gcr.io": "us", "us.gcr.io": "us",
                      "europe-docker.pkg.dev": "europe", "eu.gcr.io": "europe",
                      "asia-docker.pkg.dev": "asia", "asia.gcr.io": "asia"}
_REGIONAL_HOST = re.compile(r"^([a-z]+-[a-z]+[0-9]+)-docker\.pkg\.dev$")


def image_location(image: str) -> tuple[str, str] | None:
    """("region", REGION) or ("multi-region", CONTINENT) of an image on Google's registries;
    None for an image elsewhere (its pull is ingress)."""
    host = image.split("/", 1)[0] if "/" in image else ""
    regional = _REGIONAL_HOST.match(host)
    if regional:
        return "region", regional.group(1)
    if host in MULTI_REGION_HOSTS:
        return "multi-region", MULTI_REGION_HOSTS[host]
    return None


def pull_rate(image: str, run_region: str, rates: TransferRates = RATES) -> float:
    """USD per GB for a VM in `run_region` to pull `image`."""
    where = image_location(image)
    if where is None:
        return 0.0
    kind, place = where
    if kind == "region":
        if place == run_region:
            return 0.0
        return rates.registry_inter_region_gb if continent(place) == continent(run_region) else rates.intercontinental_gb
    return 0.0 if place == continent(run_region) else rates.intercontinental_gb


def run_transfer_usd(stack_region: str, run_region: str, *, image: str, image_gb: float, results_gb: float,
                     rates: TransferRates = RATES) -> dict[str, float]:
    """What one run in `run_region` pays to pull `image` and send its results to the stack's bucket."""
    if run_region == stack_region:
        upload = 0.0
    elif continent(run_region) == continent(stack_region):
        upload = rates.vm_inter_region_gb
    else:
        upload = rates.intercontinental_gb
    return {"image_pull": image_gb * pull_rate(image, run_region, rates), "results_upload": results_gb * upload}
