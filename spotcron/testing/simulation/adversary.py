"""The month's adversaries: a rogue publisher on the start topic and one hostile job.

The rogue publisher sends, a few times a day: a message carrying
its own spec (an on-demand a3-megagpu-8g miner), one naming a deployed job with hostile
settings, one with another digest, one naming a job that was never deployed, and a huge matrix.
Every VM created during one of those deliveries counts in `rogue_vms`.

The hostile job's VM, while it runs, does what its container could: it asks the credentials
broker for a storage token (its own, and one with another run's VM name), then tries to write
every object that is not its own: another run's record and results, live and pruned markers,
replay markers, deployed specs, the limits' admissions and the results page. A write the token's
boundary lets through outside the attempt's own prefixes counts in `foreign_writes`.

It also writes what any container can write to its own results: a hostile metrics.json (deeply
nested, a 400-digit value, bad UTF-8, NaN) and, a moment after its runner's upload, a manifest
rewritten as 3,000 `[`. The control plane must end each such run with a problem on its record
(`hostile runs with a recorded problem`) and never fail a function or a sweep over it (the
ledger counts any function that raises as `unexpected_errors`).

The boundary is evaluated here for the one condition form the broker writes,
`resource.name.startsWith('projects/_/buckets/B/objects/PREFIX')`; anything else grants nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any

from spotcron.core import layout
from spotcron.core.spec import JobSpec
from spotcron.engine.deployed import digest
from spotcron.testing.memory import MemoryMinter
from spotcron.testing.simulation.jobs import IMAGE, Behaviour, SimJob
from spotcron.testing.simulation.timeline import Timeline
from spotcron.testing.simulation.vm import SimVm, VmTokens
from spotcron.testing.simulation.world import Functions, SimBlobs, SimCompute

HOSTILE = "hostile"  # the job whose container attacks
_STARTS = re.compile(r"^resource\.name\.startsWith\('([^'\\]*)'\)$")
_LISTING = re.compile(r"^api\.getAttribute\('storage\.googleapis\.com/objectListPrefix', ''\)\.startsWith\('[^'\\]*'\)$")
# What the hostile container writes as its metrics.json, in turn: too deep, too many digits, not
# UTF-8, not JSON.
HOSTILE_METRICS = (b"[" * 3000, b'{"work": {"value": 1' + b"0" * 400 + b', "unit": "samples"}}',
                   b'{"work": {"value": 1, "unit": "\xff\xfe"}}', b'{"work": {"value": NaN, "unit": "s"}}')
HOSTILE_MANIFEST = b'{"exit_code": ' + b"[" * 3000
MINER = {"name": "miner", "schedule": "* * * * *", "image": "docker.io/attacker/miner", "timeout": "120d",
         "machine": {"type": "a3-megagpu-8g", "spot": False, "disk_gb": 2048}}


def allowed(rules: list[dict[str, Any]], bucket: str, name: str) -> bool:
    """Whether a token with these access boundary rules may write object `name`."""
    resource = f"projects/_/buckets/{bucket}/objects/{name}"
    for rule in rules:
        if rule.get("availableResource") != f"//storage.googleapis.com/projects/_/buckets/{bucket}":
            continue
        if not any(p in ("inRole:roles/storage.objectUser", "inRole:roles/storage.objectAdmin",
                         "inRole:roles/storage.objectCreator", "inRole:roles/storage.legacyBucketWriter")
                   for p in rule.get("availablePermissions", [])):
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
    spec = JobSpec.model_validate({"name": HOSTILE, "schedule": "43 * * * *", "image": IMAGE, "timeout": "20m",
                                   "machine": {"type": "e2-small"}, "history_limit": 60})
    return SimJob(spec, Behaviour(120))


class Adversary:
    """Both adversaries, given what they can reach: the start topic and the credentials broker (through
    `functions`), the bucket's listing, the VMs' tokens, and the jobs' VMs while they run."""

    def __init__(self, timeline: Timeline, functions: Functions, *, compute: SimCompute, blobs: SimBlobs,
                 minter: MemoryMinter, tokens: VmTokens, victim: JobSpec,
                 running_vms: Callable[[], Iterable[SimVm]]):
        self.timeline = timeline
        self.functions = functions
        self.compute = compute
        self.blobs = blobs
        self.minter = minter
        self.tokens = tokens
        self.victim = victim  # the deployed job the rogue messages name
        self.running_vms = running_vms
        self.rogue_vms = 0
        self.rogue_messages = 0
        self.foreign_writes = 0
        self.attempted_writes = 0
        self.tokens_refused = 0
        self.tokens_granted = 0
        self.hostile_files = 0

    # --- the rogue publisher --------------------------------------------------------------------
    def schedule(self, start: datetime, end: datetime) -> None:
        """Rogue messages every 7 hours between `start` and `end`."""
        at = start + timedelta(hours=5, minutes=17)
        while at < end:
            self.timeline.at(at, self.publish_rogue_messages)
            at += timedelta(hours=7)

    def rogue_payloads(self) -> list[bytes]:
        victim = self.victim
        hostile_settings = {**victim.to_payload(), "history_limit": 1, "concurrency": "replace"}
        huge = {**MINER, "matrix": [{"name": f"e{i}", "machine": {"type": "a3-megagpu-8g"}} for i in range(2700)]}
        return [json.dumps(MINER).encode(),
                json.dumps(hostile_settings).encode(),
                json.dumps({**hostile_settings, "job": victim.name, "digest": "0" * 64}).encode(),
                json.dumps({"job": victim.name, "digest": digest(victim.model_copy(update={"history_limit": 1}))}).encode(),
                json.dumps({"job": "miner", "digest": digest(victim)}).encode(),
                json.dumps(huge).encode()]

    def publish_rogue_messages(self) -> None:
        for payload in self.rogue_payloads():
            before = len(self.compute.created)
            self.functions.start(payload, self.timeline.now(), {}, f"rogue-{self.rogue_messages}")
            self.rogue_messages += 1
            self.rogue_vms += len(self.compute.created) - before

    # --- the hostile job --------------------------------------------------------------------------
    def attack_from(self, vm: SimVm) -> None:
        """What the hostile container does once it runs on `vm`."""
        job, run_id, attempt = vm.key
        self.write_hostile_files(vm)
        own = (layout.attempt_prefix(job, run_id, attempt), layout.checkpoint_prefix(job, run_id))
        status, body = self.functions.credentials(self.tokens.credentials(vm.instance))
        rules = self.minter.rules_of(body["access_token"]) if status == 200 else []
        self.tokens_granted += status == 200
        # A token of another run's VM name: the broker must refuse it.
        victim_status, victim_body = self.functions.credentials(
            self.tokens.credentials(vm.instance, name=self.victim_vm_name()))
        if victim_status == 200:
            rules = rules + self.minter.rules_of(victim_body["access_token"])
        else:
            self.tokens_refused += 1
        for name in self.targets(job, run_id):
            self.attempted_writes += 1
            if allowed(rules, self.blobs.bucket, name) and not name.startswith(own):
                self.foreign_writes += 1

    def write_hostile_files(self, vm: SimVm) -> None:
        """Hostile files in its own attempt, which its token may write: metrics now, and the
        manifest rewritten just after its runner's upload (the sweep meets it when the callback
        is lost)."""
        job, run_id, attempt = vm.key
        self.blobs.write(layout.results_prefix(job, run_id, attempt) + "metrics.json",
                         HOSTILE_METRICS[self.hostile_files % len(HOSTILE_METRICS)])
        self.hostile_files += 1
        manifest = layout.manifest(job, run_id, attempt)
        vm.at(vm.plan.runtime_s + vm.plan.upload_s + 0.5,
              lambda: self.blobs.write(manifest, HOSTILE_MANIFEST) if self.blobs.peek(manifest) else None)

    def victim_vm_name(self) -> str:
        live = [vm for vm in self.running_vms() if vm.key[0] != HOSTILE and vm.running()]
        return live[0].instance.name if live else "sc-victim-20261020-0000-a1"

    def targets(self, job: str, run_id: str) -> list[str]:
        """Every object a hostile container would like to write: everything but its own attempt."""
        # A slice of every kind of object, control plane and other runs alike: the bucket grows all
        # month (replay markers alone number in the thousands), and one of each kind makes the point.
        by_kind: dict[str, list[str]] = {}
        for name in self.blobs.list(""):
            if not name.startswith(layout.run_prefix(job, run_id)):
                kind = by_kind.setdefault(name.split("/", 1)[0], [])
                if len(kind) < 50:
                    kind.append(name)
        names = [name for kind in by_kind.values() for name in kind]
        victim = self.victim.name
        return names + [layout.run_record(job, run_id), f"live/{victim}/20261020-0000", f"pruned/{victim}",
                        layout.accepted_token("0" * 64), layout.deployed_spec(victim), layout.INDEX_PAGE,
                        layout.usage_admitted("2026-10-20", "sc-rogue", 0, 8, 0.0),
                        layout.usage_used("2026-10-20", f"sc-{victim}", 0.0), layout.attempt_prefix(job, run_id, 99) + "logs.txt"]

    # --- the figures ------------------------------------------------------------------------------
    def problems(self) -> dict[str, int]:
        """The invariants it can break: both must stay 0."""
        return {k: v for k, v in (("rogue_vms", self.rogue_vms), ("foreign_writes", self.foreign_writes)) if v}

    def figures(self) -> dict[str, int]:
        return {"rogue messages": self.rogue_messages, "rogue VMs": self.rogue_vms,
                "hostile write attempts": self.attempted_writes, "foreign writes allowed": self.foreign_writes,
                "own tokens granted": self.tokens_granted, "foreign tokens refused": self.tokens_refused,
                "hostile files written": self.hostile_files,
                "hostile runs with a recorded problem": self.runs_with_a_problem()}

    def runs_with_a_problem(self) -> int:
        """The hostile job's ended runs whose record names what was wrong with what it wrote."""
        from spotcron.core.runs import RunRecord

        count = 0
        for name in self.blobs.list_quietly(layout.job_prefix(HOSTILE)):
            if layout.parse_record_name(name):
                blob = self.blobs.peek(name)
                record = RunRecord.from_json(blob.data) if blob else None
                count += bool(record and record.terminal and record.metrics_problem)
        return count


def victim_of(jobs: list[SimJob]) -> JobSpec:
    """The job the rogue messages name: the first that is not the hostile one (or that one)."""
    return next((job.spec for job in jobs if job.spec.name != HOSTILE), jobs[-1].spec)
