"""Peak memory (RSS) of each Cloud Function through its first request; sets the deployed memory.

Each function runs in a fresh Python process, as a new instance does: functions-framework loads
functions/main.py, the Google backends the function's first request builds on Google Cloud are
built as there (google_deps from a SPOTCRON_* environment, then the clients the function uses:
Compute Engine, Cloud Storage, Pub/Sub, the token verifier, the downscoping minter), and the
first request is served by functions-framework's test client on the test harness's in-memory
backends (no network here, so the request itself touches no Google endpoint). The figure is the
process's peak resident set (getrusage ru_maxrss), which includes the interpreter.

Credentials: a service-account key generated for the run (never used to call anything), so that
the clients are built with Google's default-credentials path as on Google.

    python -m bench.function_memory                                   # one JSON line per function
    python -m bench.function_memory --write bench/data/function_memory.json   # also keep the figures

deploy/desired.py sets each function's memory from the kept figures with headroom, and
tests/deploy/test_function_memory.py holds it to them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "functions" / "main.py"
TARGETS = ("start_job", "job_done", "sweep", "credentials", "dispatch")
# Which Google clients each function's first request builds (runtime/google.py, engine/*).
CLIENTS = {
    "start_job": ("compute", "storage", "pubsub"),
    "job_done": ("compute", "storage", "pubsub", "identity"),
    "sweep": ("compute", "storage", "pubsub", "advice"),
    "credentials": ("compute", "storage", "identity", "downscoped"),
    "dispatch": ("storage", "pubsub"),
}

CHILD = r"""
import json, os, resource, sys
target, source, clients = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
import functions_framework
app = functions_framework.create_app(target=target, source=source)
loaded_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
from spotcron.runtime.google import google_deps
deps = google_deps(os.environ)
if "compute" in clients:
    deps.compute._clients()
if "storage" in clients:
    deps.blobs._handle()
if "pubsub" in clients:
    deps.events._client()
if "advice" in clients:
    deps.advisor._advice()
if "identity" in clients:
    import google.oauth2.id_token, google.auth.transport.requests  # noqa: E401,F401
if "downscoped" in clients:
    deps.minter._source_credentials()
    import google.auth.downscoped  # noqa: F401
clients_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
from spotcron.testing import harness
h = harness.Harness()
client = app.test_client()
harness._apps[target] = client
spec = harness.make_spec()
if target == "start_job":
    response = h.start(spec)
elif target == "job_done":
    h.start(spec)
    [record] = h.records(spec.name)
    h.upload(record.job, record.run_id)
    response = h.callback(record.job, record.run_id, token=h.token(record.job, record.run_id))
elif target == "credentials":
    h.start(spec)
    [record] = h.records(spec.name)
    response = client.post("/", headers={"Authorization": "Bearer " + h.token(record.job, record.run_id, audience=harness.CREDENTIALS_URL)})
elif target == "dispatch":
    response = h.functions.dispatch()
else:
    for name in ("a", "b", "c"):
        h.start(harness.make_spec(name=name))
    response = h.sweep()
peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"target": target, "loaded_mb": loaded_kb / 1024, "clients_mb": clients_kb / 1024,
                  "peak_mb": peak_kb / 1024, "status": response.status_code}))
"""


def service_account_key(directory: Path) -> Path:
    """A throwaway service-account key file: google.auth.default() builds credentials from it offline."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    path = directory / "key.json"
    path.write_text(json.dumps({"type": "service_account", "project_id": "bench-proj", "private_key_id": "0",
                                "private_key": pem, "client_email": "bench@bench-proj.iam.gserviceaccount.com",
                                "client_id": "0", "token_uri": "https://oauth2.googleapis.com/token"}))
    return path


def measure(target: str, key: Path) -> dict:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "GOOGLE_APPLICATION_CREDENTIALS": str(key),
           "SPOTCRON_PROJECT": "bench-proj", "SPOTCRON_BUCKET": "bench-proj-results",
           "SPOTCRON_JOB_DONE_URL": "https://job-done.example", "SPOTCRON_CREDENTIALS_URL": "https://creds.example"}
    env.pop("STORAGE_EMULATOR_HOST", None)
    done = subprocess.run([sys.executable, "-c", CHILD, target, str(SOURCE), ",".join(CLIENTS[target])], cwd=ROOT,
                          capture_output=True, text=True, timeout=180, env=env)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"memory child for {target} failed with exit {done.returncode}:\n{done.stderr[-2000:]}")
    return json.loads(lines[-1])


def main() -> None:
    import argparse
    import platform

    parser = argparse.ArgumentParser(prog="python -m bench.function_memory", description=__doc__.splitlines()[0])
    parser.add_argument("--write", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args()
    figures = {}
    with tempfile.TemporaryDirectory(prefix="spotcron-memory-") as tmp:
        key = service_account_key(Path(tmp))
        for target in TARGETS:
            figures[target] = measure(target, key)
            print(json.dumps(figures[target]), flush=True)
    if args.write:
        args.write.write_text(json.dumps({
            "what": "peak RSS (MiB, getrusage ru_maxrss) of a fresh process per function: functions-framework "
                    "load, the Google clients its first request builds, one request on in-memory backends",
            "python": platform.python_version(), "machine": f"{platform.system()} {platform.machine()}",
            "peak_mib": {t: round(f["peak_mb"], 1) for t, f in figures.items()}}, indent=2) + "\n")


if __name__ == "__main__":
    main()
