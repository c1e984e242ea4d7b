"""The month's adversaries: a rogue publisher on the start topic and one hostile job.

The rogue publisher sends, a few times a day, what issue 12's attacker sent: a message carrying
its own spec (an on-demand a3-megagpu-8g miner), one naming a deployed job with hostile
settings, one with another digest, one naming a job that was never deployed, and a huge matrix.
Every VM created during one of those deliveries counts in `rogue_vms`.

The hostile job's VM, while it runs, does what its container could: it asks the credentials
broker for a storage token (its own, and one with another run's VM name), then tries to write
every object that is not its own: another run's record and results, live and pruned markers,
replay markers, deployed specs, the limits ledger and the results page. A write the token's
boundary lets through outside the attempt's own prefixes counts in `foreign_writes`.

The boundary is evaluated here for the one condition form the broker writes,
`resource.name.startsWith('projects/_/buckets/B/objects/PREFIX')`; anything else grants nothing.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from spotcron.core import layout
from spotcron.engine.deployed import digest
from spotcron.local.signer import instance_claims

if TYPE_CHECKING:
    from spotcron.testing.simulation.jobs import SimJob
    from spotcron.testing.simulation.loop import Simulation
    from spotcron.testing.simulation.vm import SimVm

HOSTILE = "hostile"  # the job whose container attacks
_STARTS = re.compile(r"^resource\.name\.startsWith\('([^'\\]*)'\)$")
_LISTING = re.compile(r"^api\.getAttribute\('storage\.googleapis\.com/objectListPrefix', ''\)\.startsWith\('[^'\\]*'\)$")
MINER = {"name": "miner", "schedule": "* * * * *", "image": "docker.io/attacker/miner", "timeout": "120d",
         "machine": {"type": "a3-megagpu-8g", "spot": False, "disk_gb": 2048}}


def allowed(rules: list[dict[str, Any]], bucket: str, name: str) -> bool:
    """Whether a token with these access boundary rules may write object `name`."""
    resource = f"projects/_/buckets/{bucket}/objects/{name}"
    for rule in rules:
        if rule.get("availableResource") != f"//storage.googleapis.com/projects/_/buckets/{bucket}":
            continue
        if not any(p in ("inRole:roles/storage.objectUser", "inRole:roles/storage.objectAdmin",
                         "inRole:roles/storage.objectCreator") for p in rule.get("availablePermissions", [])):
            continue
        terms = [t.strip() for t in (rule.get("availabilityCondition") or {}).get("expression", "").split("||")]
        if not all(_STARTS.match(t) or _LISTING.match(t) for t in terms):
            continue  # a condition this check cannot read grants nothing
        # A write names an object: the listing term (a bucket-level attribute) never holds for it.
        if any((m := _STARTS.match(t)) and resource.startswith(m.group(1)) for t in terms):
            return True
    return False


def hostile_job() -> SimJob:
    """An ordinary-looking hourly job whose container attacks (see `Adversary.attack_from`)."""
    from spotcron.core.spec import JobSpec
    from spotcron.testing.simulation.jobs import IMAGE, Behaviour, SimJob

    spec = JobSpec.model_validate({"name": HOSTILE, "schedule": "43 * * * *", "image": IMAGE, "timeout": "20m",
                                   "machine": {"type": "e2-small"}, "history_limit": 60})
    return SimJob(spec, Behaviour(120))


class Adversary:
    def __init__(self, sim: Simulation):
        self.sim = sim
        self.rogue_vms = 0
        self.rogue_messages = 0
        self.foreign_writes = 0
        self.attempted_writes = 0
        self.tokens_refused = 0
        self.tokens_granted = 0

    # --- the rogue publisher --------------------------------------------------------------------
    def schedule(self) -> None:
        sim = self.sim
        at = sim.config.start + timedelta(hours=5, minutes=17)
        while at < sim.end_of_ticks:
            sim.schedule(at, self.publish_rogue_messages)
            at += timedelta(hours=7)

    def rogue_payloads(self) -> list[bytes]:
        victim = self.victim()
        hostile_settings = {**victim.to_payload(), "history_limit": 1, "concurrency": "replace"}
        huge = {**MINER, "matrix": [{"name": f"e{i}", "machine": {"type": "a3-megagpu-8g"}} for i in range(2700)]}
        return [json.dumps(MINER).encode(),
                json.dumps(hostile_settings).encode(),
                json.dumps({**hostile_settings, "job": victim.name, "digest": "0" * 64}).encode(),
                json.dumps({"job": victim.name, "digest": digest(victim.model_copy(update={"history_limit": 1}))}).encode(),
                json.dumps({"job": "miner", "digest": digest(victim)}).encode(),
                json.dumps(huge).encode()]

    def publish_rogue_messages(self) -> None:
        sim = self.sim
        assert sim.functions is not None
        for payload in self.rogue_payloads():
            before = len(sim.compute.created)
            sim.functions.start(payload, sim.clock.now(), {}, f"rogue-{self.rogue_messages}")
            self.rogue_messages += 1
            self.rogue_vms += len(sim.compute.created) - before

    # --- the hostile job --------------------------------------------------------------------------
    def attack_from(self, vm: SimVm) -> None:
        """What the hostile container does once it runs on `vm`."""
        sim = self.sim
        assert sim.functions is not None
        job, run_id, attempt = vm.key
        own = (layout.attempt_prefix(job, run_id, attempt), layout.checkpoint_prefix(job, run_id))
        status, body = sim.functions.credentials(self.token(vm))
        rules = sim.minter.rules_of(body["access_token"]) if status == 200 else []
        self.tokens_granted += status == 200
        # A token of another run's VM name: the broker must refuse it.
        victim_status, victim_body = sim.functions.credentials(self.token(vm, name=self.victim_vm_name()))
        if victim_status == 200:
            rules = rules + sim.minter.rules_of(victim_body["access_token"])
        else:
            self.tokens_refused += 1
        for name in self.targets(job, run_id):
            self.attempted_writes += 1
            if allowed(rules, sim.blobs.bucket, name) and not name.startswith(own):
                self.foreign_writes += 1

    def victim(self):
        """The job the rogue messages name: the first that is not the hostile one (or that one)."""
        return next((job.spec for job in self.sim.jobs if job.spec.name != HOSTILE), self.sim.jobs[-1].spec)

    def victim_vm_name(self) -> str:
        live = [vm for vm in self.sim.vms.values() if vm.key[0] != HOSTILE and vm.running()]
        return live[0].instance.name if live else "sc-victim-20261020-0000-a1"

    def token(self, vm: SimVm, *, name: str | None = None) -> str:
        settings = self.sim.settings
        claims = instance_claims(service_account=settings.vm_service_account_email, project_id=settings.project,
                                 project_number=0, zone=f"projects/0/zones/{vm.instance.zone}",
                                 instance_id=vm.instance.instance_id, instance_name=name or vm.instance.name,
                                 created_at=vm.instance.created_at)
        return self.sim.identity.issue(settings.credentials_url, claims)

    def targets(self, job: str, run_id: str) -> list[str]:
        """Every object a hostile container would like to write: everything but its own attempt."""
        sim = self.sim
        # A slice of every kind of object, control plane and other runs alike: the bucket grows all
        # month (replay markers alone number in the thousands), and one of each kind makes the point.
        by_kind: dict[str, list[str]] = {}
        for name in sim.blobs.list(""):
            if not name.startswith(layout.run_prefix(job, run_id)):
                kind = by_kind.setdefault(name.split("/", 1)[0], [])
                if len(kind) < 50:
                    kind.append(name)
        names = [name for kind in by_kind.values() for name in kind]
        victim = self.victim().name
        return names + [layout.run_record(job, run_id), f"live/{victim}/20261020-0000", f"pruned/{victim}",
                        layout.accepted_token("0" * 64), layout.deployed_spec(victim), layout.INDEX_PAGE,
                        layout.usage_ledger("2026-10-20"), layout.attempt_prefix(job, run_id, 99) + "logs.txt"]
