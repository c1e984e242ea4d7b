"""No `wait` in the runner may block on a process that no longer exists.

Bash can reap a background child and drop its exit status when the child ends while a trapped
signal interrupts a `wait` (seen as a runner hung after SIGTERM: `end_bg` waited forever for a
live upload that had ended). Bash then still lists the child as running, and any `wait` for it
returns only when another child changes state: the preemption watcher, which never ends on its
own. That race cannot be forced, so `wait` here behaves as bash does then for the pids in
$TMP/lost (children that have already ended), and a long-lived child plays the watcher.
"""

from __future__ import annotations

import subprocess

from tests.runner.harness import RUNNER, needs_runner_tools

pytestmark = needs_runner_tools

SETUP = r"""
source "$RUNNER"
TMP=$(mktemp -d) && mkdir "$TMP/lost"
sleep 60 & WATCHER=$!
trap 'kill "$WATCHER"; rm -rf "$TMP"' EXIT
# Bash's `wait` for a child whose status it lost: the others as usual; it alone, until the watcher ends.
wait() {
  local -a rest=() && local x pids=0 lost=0
  for x in "$@"; do
    if [[ -e $TMP/lost/$x ]]; then lost=1; else rest+=("$x") && [[ $x =~ ^[0-9]+$ ]] && pids=$((pids + 1)); fi
  done
  if [[ $1 == -n ]] && ((pids)); then
    builtin wait "${rest[@]}" && x=0 || x=$?
    # One that ended meanwhile, its status lost: as if it had not ended.
    [[ $2 == -p && -f $TMP/lost/${!3} ]] && { wait "$@"; return; }
    return "$x"
  fi
  ((lost)) || { builtin wait "$@"; return; }
  builtin wait "$WATCHER"; echo "blocked until the watcher ended"; return 127
}
# Bash still lists them as (running) jobs.
jobs() { builtin jobs "$@"; [[ $1 != -p ]] || ls "$TMP/lost"; }
# A child that ended and whose status bash lost.
lost_child() { (exit 3) & LOST=$!; while kill -0 "$LOST" 2>/dev/null; do :; done; touch "$TMP/lost/$LOST"; }
"""


def run(script: str) -> str:
    try:
        done = subprocess.run(["bash", "-c", SETUP + script], capture_output=True, timeout=20,
                              env={"RUNNER": str(RUNNER), "PATH": "/usr/bin:/bin"})
    except subprocess.TimeoutExpired as hung:
        raise AssertionError(f"the runner's wait blocked on a finished child: {hung.stdout!r}") from None
    assert done.returncode == 0, done.stderr
    return done.stdout.decode()


def test_ending_a_background_upload_whose_status_bash_lost_does_not_block():
    out = run('lost_child && BG_PID=$LOST && end_bg BG_PID && echo "ended [$BG_PID]"')
    assert out == "ended []\n"


def test_waiting_for_a_process_whose_status_bash_lost_returns_without_a_status():
    out = run('lost_child && wait_pid "$LOST" && echo "rc=[$WAIT_RC]"')
    assert out == "rc=[]\n"


def test_the_exit_status_of_a_finished_or_running_child_is_still_collected():
    out = run(r"""
    (exit 5) & p=$!; while kill -0 "$p" 2>/dev/null; do :; done
    wait_pid "$p"; echo "finished: $WAIT_RC"
    (read -rt 0.3 <> <(:); exit 4) & wait_pid $!; echo "running: $WAIT_RC"
    (kill -TERM "$BASHPID") & wait_pid $!; echo "killed: $WAIT_RC"
    interruptible false; echo "interruptible: $?"
    """)
    assert out == "finished: 5\nrunning: 4\nkilled: 143\ninterruptible: 1\n"


def test_an_upload_batch_whose_status_bash_lost_ends_the_upload_as_failed(tmp_path):
    (tmp_path / "tree").mkdir()
    for n in range(3):
        (tmp_path / "tree" / f"f{n}").write_text("x")
    out = run(f"""
    ATTEMPT_PREFIX=runs/a/ BATCH_FILES=1 PARALLEL=2 LOGS=$TMP/logs.txt
    access_token() {{ :; }}
    # The second batch ends at once, its status lost; the others succeed.
    upload_batch() {{ [[ $3 == */000001 ]] && {{ sleep 0.2; touch "$TMP/lost/$BASHPID"; exit 0; }}; sleep 0.3; }}
    upload_tree {tmp_path}/tree results/; echo "rc=$?"
    """)
    assert out == "rc=1\n"
