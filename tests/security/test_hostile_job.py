"""A hostile job, run for real: the local stack, the real runner, and a command that attacks.

The container's attacks as a run: a job whose command (tests/security/hostile_job.sh) uses
everything its VM exposes to it — its metadata server (the run descriptor, the VM's own access
token, identity tokens for any audience), the storage endpoint, the credentials broker and
job_done — to overwrite, delete, open upload sessions on, read and list what is not its own:
another job's results, run.json and checkpoint, the results page, `tokens/` replay markers,
`pruned/` and `live/` markers, `deployed/` specs, the spend ledger, its own run record and its
run's next attempt; to get another run's storage token from the broker; and to report another
run's end to job_done. Every try must be refused, and a listing with generations taken before
and after must show nothing changed outside its own attempt's prefix (but what the engine itself
writes when the run ends: its record, its live marker, one replay marker, the day's ledger).

It runs as a local command always, and in a podman container when podman is here: on the host
network (`metadata_access: true`, the most a job can be given) and on its own network (the
default), where it must reach nothing at all. A local command runs as the user running local
mode: it is not walled off from that user's files or processes (docs/security.md), so what this
proves for it is the network's walls, the same ones a VM on Google Cloud meets.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from spotcron.core import layout
from spotcron.core.loader import load_job_file
from spotcron.local.stack import LocalStack
from spotcron.testing.waiting import wait_until
from tests.local import podman_image
from tests.local.conftest import python_job, spotcron_processes, write_job

pytestmark = pytest.mark.slow

SCRIPT = Path(__file__).with_name("hostile_job.sh")
REFUSED = {"401", "403", "404"}
# Says it is waiting, waits for its orders, then runs them (the attack reads its addresses and
# targets there too). The orders go in only once it waits: a run is `running` from its VM's
# creation, and the runner, when it starts, empties the results directory they are written to.
WAITING = ".waiting"
WAIT = (f': > "$SPOTCRON_RESULTS_DIR/{WAITING}"; '
        'while [ ! -f "$SPOTCRON_RESULTS_DIR/.go/attack.sh" ]; do sleep 0.2; done; '
        'exec busybox sh "$SPOTCRON_RESULTS_DIR/.go/attack.sh"')
VICTIM_CODE = ("import os, pathlib; env = os.environ;"
               " pathlib.Path(env['SPOTCRON_RESULTS_DIR'], 'answer.json').write_text('42');"
               " pathlib.Path(env['SPOTCRON_CHECKPOINT_DIR'], 'state.bin').write_bytes(b'secret')")
VICTIM = python_job(VICTIM_CODE, extra="checkpoint: /checkpoint\n")
SLEEPER = python_job("import time; time.sleep(240)", timeout="5m")


# An image of this test session's own (see podman_image.session_image), apart from test_podman's.
IMAGE = podman_image.session_image("hostile")


def hostile_spec(tmp_path: Path, *, metadata_access: bool) -> str:
    return (f'schedule: "0 3 * * *"\nimage: {IMAGE}\ntimeout: 3m\nmachine: {{type: e2-small}}\n'
            f"command: [sh, -c, {json.dumps(WAIT)}]\n"
            f"local:\n  command: [busybox, sh, -c, {json.dumps(WAIT)}]\n"
            + ("metadata_access: true\n" if metadata_access else ""))


def listing(stack: LocalStack) -> dict[str, tuple[int, int]]:
    """Every object of the bucket: name -> (generation, metageneration), listed with the control plane's token."""
    client = stack.bucket.client()
    return {blob.name: (blob.generation, blob.metageneration) for blob in client.list_blobs(stack.bucket.bucket)}


def wait_running(stack: LocalStack, job: str, run_id: str):
    """Its record once it is `running`: its VM exists, not yet that its runner has started the job."""
    def running():
        record = stack.deps.store.read(job, run_id)
        return record if record is not None and record.state == "running" else None

    return wait_until(running, f"{job}/{run_id} running")


def attack(stack: LocalStack, tmp_path: Path, *, metadata_access: bool = True) -> dict:
    """Run a victim to success, start a sleeping run, then let a hostile run loose among them."""
    jobs = tmp_path / "jobs"
    victim = load_job_file(write_job(jobs, "victim", VICTIM))
    [(_, victim_run)] = runs = stack.run_now(victim)
    [done] = stack.wait(runs, timeout=90)
    assert done.state == "succeeded", done.reason
    # job_done ends its run's live marker and stores its replay marker just after the record:
    # both are in place before the listing that everything after is compared with.
    wait_until(lambda: stack.bucket.names(layout.TOKENS), "the victim's replay marker")
    sleeper = load_job_file(write_job(jobs, "sleeper", SLEEPER))
    [(_, sleeper_run)] = stack.run_now(sleeper)
    other = wait_running(stack, "sleeper", sleeper_run).current_attempt
    stack.bucket.write(layout.INDEX_PAGE, b"<html>the results page</html>", "text/html")
    stack.bucket.write(f"{layout.PRUNED}victim", victim_run.encode(), "text/plain")

    hostile = load_job_file(write_job(jobs, "hostile", hostile_spec(tmp_path, metadata_access=metadata_access)))
    [(_, run_id)] = hostile_runs = stack.run_now(hostile)
    me = wait_running(stack, "hostile", run_id).current_attempt
    before = listing(stack)
    own = (layout.attempt_prefix("hostile", run_id, 1), layout.checkpoint_prefix("hostile", run_id))
    tokens = [n for n in before if n.startswith(layout.TOKENS)]
    live = [n for n in before if n.startswith(f"{layout.LIVE}sleeper/")]
    assert tokens and live, (tokens, live)
    victim_prefix = layout.attempt_prefix("victim", victim_run, 1)
    targets = [
        layout.run_record("victim", victim_run), victim_prefix + "results/answer.json", victim_prefix + "manifest.json",
        victim_prefix + "logs.txt", layout.checkpoint_archive("victim", victim_run),
        layout.run_record("sleeper", sleeper_run), layout.attempt_prefix("sleeper", sleeper_run, 1) + "x.txt",
        layout.run_record("hostile", run_id), layout.attempt_prefix("hostile", run_id, 2) + "results/x.txt",
        layout.INDEX_PAGE, tokens[0], f"{layout.TOKENS}forged", f"{layout.PRUNED}victim", f"{layout.PRUNED}hostile",
        live[0], layout.deployed_spec("victim"), layout.deployed_spec("hostile"),
        next(n for n in before if n.startswith(layout.LIMITS)), layout.DISPATCH_CURSOR,
    ]
    reads = [layout.checkpoint_archive("victim", victim_run), victim_prefix + "results/answer.json"]
    storage = stack.bucket.url
    exposed = {
        "MD": stack.metadata.url_for(me.vm_name),  # on Google Cloud: the well-known address
        "MD_ROOT": stack.metadata.base_url, "STORAGE": storage,
        "OTHER_JOB": "sleeper", "OTHER_RUN": sleeper_run, "OTHER_VM": other.vm_name,
        "OTHER_PREFIX": layout.attempt_prefix("sleeper", sleeper_run, 1),
    }
    results = tmp_path / "state" / "vms" / me.vm_name / "results"
    wait_until((results / WAITING).exists, "the hostile job's command waiting for its orders")
    go = results / ".go"
    go.mkdir()
    (go / "exposed").write_text("".join(f"{k}='{v}'\n" for k, v in exposed.items()))
    (go / "targets").write_text("".join(f"{t}\n" for t in targets))
    (go / "reads").write_text("".join(f"{r}\n" for r in reads))
    shutil.copy(SCRIPT, go / "attack.sh.part")
    (go / "attack.sh.part").rename(go / "attack.sh")

    ended = stack.wait(hostile_runs, timeout=150)  # empty when its record is gone
    if [r.state for r in ended] == ["succeeded"]:
        # job_done stores its replay marker just after the record: the listing waits for it.
        wait_until(lambda: len([n for n in listing(stack) if n.startswith(layout.TOKENS)]) > len(tokens),
                   "the hostile run's replay marker")
    after = listing(stack)
    logs = stack.bucket.read(layout.logs("hostile", run_id, 1)) or b""
    # The sleeping run's runner stores its live logs meanwhile (logs.txt, and parts under logs/).
    sleeper_logs = layout.attempt_prefix("sleeper", sleeper_run, 1) + "logs"
    assert all(b"hostile" not in (stack.bucket.read(name) or b"") for name in stack.bucket.names(sleeper_logs))
    return {"ended": ended, "before": before, "sleeper_logs": sleeper_logs, "after": after, "own": own, "logs": logs.decode(errors="replace"),
            "targets": targets, "reads": reads, "run_id": run_id, "vm": me.vm_name}


def tries(logs: str) -> tuple[dict[str, str], dict[str, str]]:
    """(CONTROL label -> status, ATTEMPT label -> status) from the hostile job's logs."""
    found: dict[str, dict[str, str]] = {"CONTROL": {}, "ATTEMPT": {}}
    for line in logs.splitlines():
        kind, _, rest = line.partition(" ")
        if kind in found:
            label, _, status = rest.rpartition(" ")
            found[kind][label] = status
    return found["CONTROL"], found["ATTEMPT"]


def expected_attempts(outcome: dict) -> set[str]:
    labels = {"broker:job-done-audience", "broker:renamed-claims", "broker:no-token", "metadata:other-vm-by-name",
              "job-done:no-token", "job-done:own-token-other-run", "job-done:renamed-claims"}
    for kind in ("none", "vm", "forged", "own"):
        labels |= {f"{op}:{kind}:{name}" for name in outcome["targets"] for op in ("write", "delete", "session")}
        labels |= {f"read:{kind}:{name}" for name in outcome["reads"]}
        labels |= {f"list:{kind}:{prefix}" for prefix in ("", "runs/", "runs/sleeper/")}
    return labels


def changes_outside_its_own_prefixes(outcome: dict) -> list[str]:
    """What changed in the bucket that neither the job's own attempt nor the engine's end of its run explains."""
    before, after, run_id = outcome["before"], outcome["after"], outcome["run_id"]

    def engine_writes(name: str) -> bool:
        # Its run ending: its record, its live marker, the day's ledger (charged), the replay marker;
        # and the sleeping run's own runner, storing its live logs.
        return (name == layout.run_record("hostile", run_id) or name.startswith(f"{layout.LIVE}hostile/")
                or name.startswith(layout.LIMITS) or name.startswith(outcome["sleeper_logs"]))

    found = []
    for name in sorted(set(before) | set(after)):
        if name.startswith(outcome["own"]) or engine_writes(name):
            continue
        if name not in after:
            found.append(f"deleted {name}")
        elif name not in before:
            found.append(f"created {name}")
        elif before[name] != after[name]:
            found.append(f"changed {name} (generation {before[name]} -> {after[name]})")
    return found


def assert_every_try_refused_and_nothing_else_changed(outcome: dict, stack: LocalStack) -> None:
    controls, attempts = tries(outcome["logs"])
    changed = changes_outside_its_own_prefixes(outcome)
    assert "DONE" in outcome["logs"].splitlines(), (f"the job did not finish its tries: {outcome['logs'][-2000:]!r}; "
                                                    f"what changed: {changed}")
    # Its own attempt's powers work: the refusals below are the walls, not a broken script.
    assert controls and set(controls.values()) == {"200"}, controls
    allowed = {n: s for n, s in attempts.items() if s not in REFUSED}
    assert allowed == {}, f"tries that were not refused: {allowed}; what changed: {changed}"
    assert set(attempts) == expected_attempts(outcome), set(attempts) ^ expected_attempts(outcome)
    # One replay marker more: the job's own callback (its content is the VM's name).
    new_tokens = [c for c in changed if c.startswith(f"created {layout.TOKENS}")]
    assert len(new_tokens) == 1 and stack.bucket.read(new_tokens[0].removeprefix("created ")) == outcome["vm"].encode()
    assert [c for c in changed if c not in new_tokens] == []
    assert [(r.state, r.reason) for r in outcome["ended"]] == [("succeeded", None)]
    assert stack.bucket.read(outcome["own"][0] + "results/own.txt") == b"owned by a hostile job\n"


def test_a_hostile_local_command_is_refused_everything_but_its_own_attempt(tmp_path):
    if shutil.which("busybox") is None:
        pytest.skip("the hostile job's command runs with busybox: install busybox-static (`make tools`)")
    stack = LocalStack(tmp_path / "state", environ=dict(os.environ), cwd=tmp_path, runtime_for=lambda image: None,
                       sweep_interval=3600, grace=20).start()
    try:
        outcome = attack(stack, tmp_path)
        assert_every_try_refused_and_nothing_else_changed(outcome, stack)
        assert f"WHERE {tmp_path}/state/vms/{outcome['vm']}/results" in outcome["logs"].splitlines()
    finally:
        stack.stop()
    assert spotcron_processes(tmp_path / "state") == []


@pytest.fixture(scope="module")
def podman(tmp_path_factory):
    with podman_image.ready(tmp_path_factory.mktemp("podman"), IMAGE) as found:
        yield found


@pytest.fixture
def podman_stack(tmp_path, podman):
    environ = podman.env({**os.environ, "SPOTCRON_STOP_GRACE": "1"})
    stack = LocalStack(tmp_path / "state", environ=environ, cwd=tmp_path, sweep_interval=3600, grace=20).start()
    yield stack
    stack.stop()
    podman_image.remove_containers(podman.binary, image=IMAGE)
    deadline = time.monotonic() + 10
    while spotcron_processes(tmp_path / "state") and time.monotonic() < deadline:
        time.sleep(0.2)


def test_a_hostile_container_on_the_host_network_is_refused_everything_but_its_own_attempt(podman_stack, tmp_path):
    outcome = attack(podman_stack, tmp_path, metadata_access=True)
    assert "WHERE /results" in outcome["logs"].splitlines(), outcome["logs"][:300]  # it ran in the container
    assert_every_try_refused_and_nothing_else_changed(outcome, podman_stack)


def test_a_hostile_container_on_its_own_network_reaches_nothing_at_all(podman_stack, tmp_path):
    outcome = attack(podman_stack, tmp_path, metadata_access=False)
    controls, attempts = tries(outcome["logs"])
    assert "WHERE /results" in outcome["logs"].splitlines(), outcome["logs"][:300]  # it ran in the container
    assert "DONE" in outcome["logs"].splitlines(), outcome["logs"][-3000:]
    # Not even its own metadata server: every address of the stack is on the host's loopback.
    assert set(controls.values()) == {"000"} and set(attempts.values()) == {"000"}, (controls, attempts)
    changed = changes_outside_its_own_prefixes(outcome)
    assert [c for c in changed if not c.startswith(f"created {layout.TOKENS}")] == []
    assert [(r.state, r.reason) for r in outcome["ended"]] == [("succeeded", None)]
