"""Cold start: import time and first-request time of each Cloud Function entry point.

Each measurement is a fresh Python process, as a new function instance is: it loads
functions/main.py through functions-framework (the import figure), builds in-memory backends
(the test harness's, not timed), then serves one request (the first-request figure). The
parent also times the whole process, interpreter start included.

Baseline: the same functions/main.py with the Google clients imported eagerly at the top
(`import google.cloud.compute_v1, google.cloud.storage, google.cloud.pubsub_v1`), the usual way
such functions are written; spotcron imports them only where they are used.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import Section, median

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "functions" / "main.py"
TARGETS = ("start_job", "job_done", "sweep")
EAGER = "import google.cloud.compute_v1, google.cloud.storage, google.cloud.pubsub_v1  # noqa: E401,F401\n"
FUTURE = "from __future__ import annotations\n"

# Runs in the child. Only functions-framework and the entry point are loaded before the import
# figure is taken; everything the harness needs comes after it.
CHILD = r"""
import json, sys, time
target, source = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
import functions_framework
app = functions_framework.create_app(target=target, source=source)
t1 = time.perf_counter()
from spotcron.testing import harness
h = harness.Harness()
client = app.test_client()
harness._apps[target] = client  # the harness posts through this very app
spec = harness.make_spec()
if target == "start_job":
    request = lambda: h.start(spec)
elif target == "job_done":
    h.start(spec)  # through its own start_job app: the run to report on
    [record] = h.records(spec.name)
    h.upload(record.job, record.run_id)
    token = h.token(record.job, record.run_id)
    request = lambda: h.callback(record.job, record.run_id, token=token)
else:
    for name in ("a", "b", "c"):
        h.start(harness.make_spec(name=name))
    request = lambda: h.sweep()
t2 = time.perf_counter()
response = request()
t3 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "first_request_s": t3 - t2, "status": response.status_code}))
"""


def eager_source(directory: Path) -> Path:
    """functions/main.py with the Google clients imported at the top, as the baseline."""
    text = SOURCE.read_text()
    # After `from __future__`, which must stay the first statement.
    text = text.replace(FUTURE, FUTURE + EAGER, 1) if FUTURE in text else EAGER + text
    path = directory / "main.py"
    path.write_text(text)
    return path


def measure(target: str, source: Path) -> dict:
    """One fresh process: import seconds, first-request seconds, whole-process seconds."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", CHILD, target, str(source)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    wall = time.perf_counter() - started
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"cold-start child for {target} ({source}) failed with exit {done.returncode}:\n"
                           f"{done.stderr[-2000:]}")
    result = json.loads(lines[-1])
    if result["status"] >= 500:
        raise RuntimeError(f"cold-start child for {target}: first request answered {result['status']}")
    return {**result, "process_s": wall}


def run(quick: bool = False) -> Section:
    started = time.perf_counter()
    repeats = 1 if quick else 5
    section = Section("coldstart", f"Cold start per entry point, fresh process each, median of {repeats}",
                      baseline="the same functions/main.py importing compute_v1, storage and pubsub_v1 eagerly")
    with tempfile.TemporaryDirectory(prefix="spotcron-bench-") as tmp:
        naive = eager_source(Path(tmp))
        ours: dict[str, list[dict]] = {t: [] for t in TARGETS}
        theirs: dict[str, list[dict]] = {t: [] for t in TARGETS}
        # Interleaved, so that a slow patch of the machine hits both sides alike.
        for _ in range(repeats):
            for target in TARGETS:
                ours[target].append(measure(target, SOURCE))
                theirs[target].append(measure(target, naive))
    for target in TARGETS:
        for key, label, unit, scale in (("import_s", "import", "s", 1), ("first_request_s", "first request", "ms", 1000),
                                        ("process_s", "whole process (interpreter, import, harness, request)", "s", 1)):
            section.add(f"{target}: {label}", median(m[key] for m in ours[target]) * scale,
                        median(m[key] for m in theirs[target]) * scale, unit)
    section.notes += [
        "Import = functions_framework.create_app(target, source) in a fresh interpreter; first request = one "
        "request through its test client on the in-memory backends of spotcron/testing/harness.py.",
        "On Google Cloud the first request also builds the Google clients it uses; that cost is the same in both "
        "designs and is not in these figures.",
    ]
    section.seconds = time.perf_counter() - started
    return section
