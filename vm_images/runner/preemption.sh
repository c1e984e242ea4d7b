# shellcheck shell=bash disable=SC2034  # a sourced part: what it sets, the other parts read
# Preemption and shutdown: a watcher long-polls instance/preempted; a notice or SIGTERM starts the
# shutdown budget, within which the job stops, the checkpoint, logs and results are stored (in
# that order) and the callback goes out. Sourced by runner.sh.

PREEMPTED=0 SHUTDOWN=0 SHUTDOWN_AT=0 PREEMPT_REASON="" WATCHER_PID=""

on_shutdown() {  # REASON
  PREEMPTED=1 PREEMPT_REASON=${PREEMPT_REASON:-$1}
  ((SHUTDOWN)) && return 0
  now_s
  SHUTDOWN=1 SHUTDOWN_AT=$NOW
}

# False once the shutdown budget is spent: what is left goes to the callback.
budget_left() { ((!SHUTDOWN)) || { now_s; ((NOW < SHUTDOWN_AT + SHUTDOWN_BUDGET)); }; }

# Long-polls instance/preempted (with last_etag, so no change is missed between two polls) and
# signals the runner (USR1) when it turns TRUE. A subshell; on TERM it takes its curl with it.
preempt_watcher() {
  local cpid="" etag="" query out=$TMP/preempted
  trap '[[ -n $cpid ]] && kill "$cpid" 2>/dev/null; exit 0' TERM
  while :; do
    query=${etag:+"?wait_for_change=true&timeout_sec=$PREEMPT_WAIT&last_etag=$etag"}
    curl -sS -f -o "$out" -D "$out.hdr" --connect-timeout "$CONNECT_TIMEOUT" --max-time $((PREEMPT_WAIT + 15)) \
      -H 'Metadata-Flavor: Google' "$METADATA_URL/instance/preempted$query" 2>/dev/null &
    cpid=$!
    if wait "$cpid"; then
      [[ $(<"$out") == TRUE ]] && { kill -USR1 "$RUNNER_PID" 2>/dev/null; exit 0; }
      etag=$(sed -n 's/^etag: *//Ip' "$out.hdr" | tr -d '\r')
    else
      etag=""
      sleep 1 &
      cpid=$!
      wait "$cpid"
    fi
    cpid=""
  done
}

# One direct look, just before the job starts: the watcher's signal may still be on its way.
preempted_now() { md_fetch instance/preempted "$TMP/preempted.now" && [[ $(<"$TMP/preempted.now") == TRUE ]]; }

# WAIT_RC = the exit status of background process $1 ("" if lost). A trapped signal interrupts
# `wait` (status > 128) while the process may still run: then wait again (after a TERM to it when
# $2 is set and the VM is going away); bash keeps a reaped child's status, so a second `wait`
# returns its own. But bash can drop the status of a child ending while a trap interrupts a
# `wait`, and a `wait` for it then blocks until some other child ends (the watcher: never): so
# one that is gone yet still listed as a job is waited for only beside a short timer.
wait_pid() {
  local got="" t
  while kill -0 "$1" 2>/dev/null; do
    wait "$1" 2>/dev/null; WAIT_RC=$?
    ((WAIT_RC > 128)) || return 0
    kill -0 "$1" 2>/dev/null || break
    [[ -n ${2-} ]] && ((PREEMPTED)) && kill -TERM "$1" 2>/dev/null
  done
  t=" $(jobs -p) " && t=${t//$'\n'/ }
  [[ $t == *" $1 "* ]] || { wait "$1" 2>/dev/null; WAIT_RC=$?; return 0; }
  sleep 0.2 & t=$!
  while [[ -z $got ]] && kill -0 "$t" 2>/dev/null; do wait -n -p got "$1" "$t" 2>/dev/null; WAIT_RC=$?; done
  kill "$t" 2>/dev/null; [[ $got == "$1" ]] || WAIT_RC=""
}

# Runs a long setup command in the background, so a preemption is handled while it runs.
interruptible() { "$@" & wait_pid $! term; return "${WAIT_RC:-1}"; }
