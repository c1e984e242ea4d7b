"""History pruning lists a job's objects in at most PRUNE_PAGES pages of PRUNE_PAGE names, and a
page that ends inside a run skips the rest of it. A run of PRUNE_PAGE or more objects (a job that
writes a thousand result files per run) therefore fills one page by itself; once a job holds more
than PRUNE_PAGES such runs, `_runs_listed` raises PruneIncomplete before anything is deleted, on
every pass: the job's history is never pruned again. The default history_limit (50) keeps exactly
PRUNE_PAGES runs, so the 51st such run is enough; no hold, no publisher, nothing but the job's own
results.
"""

from __future__ import annotations

from spotcron.core import layout
from spotcron.engine.store import PRUNE_PAGE, PRUNE_PAGES
from spotcron.testing.harness import make_spec


def test_runs_of_a_thousand_files_stop_history_pruning_for_good(h):
    spec = make_spec(name="wide", schedule="* * * * *", timeout="10m")  # history_limit left at 50
    assert spec.history_limit == PRUNE_PAGES
    runs = PRUNE_PAGES + 6
    for _ in range(runs):
        h.clock.advance(60)
        h.start(spec)
        run_id = h.clock.now().strftime("%Y%m%d-%H%M")
        for i in range(PRUNE_PAGE):  # what the runner uploads: the job's result files
            h.blobs.write(layout.results_prefix("wide", run_id, 1) + f"part-{i:05d}.json", b"{}")
        h.finish_ok("wide", run_id)
    for _ in range(3):
        h.clock.advance(300)
        h.sweep()
    kept = h.deps.store.run_ids("wide")
    assert len(kept) <= spec.history_limit, (
        f"history_limit {spec.history_limit}, yet {len(kept)} runs of the job are still in the bucket after "
        f"{runs} runs and three sweeps: pruning stops at its {PRUNE_PAGES}-page listing bound before it deletes "
        f"anything, on every pass")
