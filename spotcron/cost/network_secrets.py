"""What the jobs' secrets and their way to the internet cost a month, beside the VMs.

Secret Manager (https://cloud.google.com/secret-manager/pricing, read 2026-11): $0.06 per active
version per location per month (destroyed versions are free; an automatic-replication secret
counts as one location), $0.03 per 10,000 access operations; free each month per billing account:
6 active versions and 10,000 accesses. A run reads each of its secrets once, at boot.

Egress: a job with `internet: true` gets an external IPv4 address per run, priced with its runs
(`external_ip`). The alternative, a Cloud NAT (https://cloud.google.com/nat/pricing, read
2026-11): $0.0014 per VM-hour while a VM uses the gateway (up to 32 VMs), $0.005 an hour for the
gateway's own external address (all month), and $0.045 per GiB processed, both directions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from spotcron.core.secret_refs import resource
from spotcron.core.spec import JobSpec

SECRETS_SOURCE = "https://cloud.google.com/secret-manager/pricing (2026-11)"
VERSION_MONTH = 0.06
ACCESS_PER_10K = 0.03
FREE_VERSIONS = 6
FREE_ACCESSES = 10_000
NAT_SOURCE = "https://cloud.google.com/nat/pricing (2026-11)"
NAT_VM_HOUR = 0.0014
NAT_ADDRESS_HOUR = 0.005
NAT_GIB = 0.045
HOURS_PER_MONTH = 720


@dataclass(frozen=True)
class SecretsMonth:
    versions: int  # active versions, one per secret (what `spotcron secrets set --destroy-older` keeps)
    accesses: float
    usd: float  # before the free tier
    usd_after_free: float


def secrets_month(specs: Sequence[JobSpec], runs_per_month: Mapping[str, float], project: str) -> SecretsMonth:
    names = {name for spec in specs for name in spec.secret_names(project)}
    accesses = sum(runs_per_month.get(spec.name, 0.0) * len(copy.secrets) for spec in specs for copy in spec.variants())
    versions = len(names)
    usd = versions * VERSION_MONTH + accesses / 10_000 * ACCESS_PER_10K
    after = max(0, versions - FREE_VERSIONS) * VERSION_MONTH + max(0.0, accesses - FREE_ACCESSES) / 10_000 * ACCESS_PER_10K
    return SecretsMonth(versions, accesses, usd, after)


@dataclass(frozen=True)
class EgressMonth:
    job: str
    external_ip_usd: float  # what the job's runs pay for their addresses (already in its items)
    nat_usd: float  # the same VM-hours through a Cloud NAT, before traffic (the gateway's address apart)


def egress_months(specs: Sequence[JobSpec], vm_hours: Mapping[str, float], external_ip_usd: Mapping[str, float]
                  ) -> list[EgressMonth]:
    return [EgressMonth(spec.name, external_ip_usd.get(spec.name, 0.0), vm_hours.get(spec.name, 0.0) * NAT_VM_HOUR)
            for spec in specs if spec.internet]


def secret_names_of(specs: Sequence[JobSpec], project: str) -> list[str]:
    return sorted({resource(ref.secret, project) for spec in specs for ref in spec.all_secrets().values()})
