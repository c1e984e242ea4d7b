#!/usr/bin/env bash
# spotcron VM runner: one job attempt on a Spot VM (docs/runner.md). Reads the flat `spotcron-run`
# attribute, restores the checkpoint, runs the container until it exits or its deadline, uploads
# checkpoint, results and logs, writes attempt-N/manifest.json last (only when all are stored) and
# POSTs the outcome to job_done. Needs only what Container-Optimized OS has. Every setting below
# can be overridden by SPOTCRON_<NAME>, which is how tests and local mode run these same files.
# Exit: 0 reported, 1 report not delivered, 2 no descriptor (nothing to report to).

# shellcheck disable=SC2034  # what it sets, the sourced parts read
set -o pipefail
shopt -s nullglob

# Byte semantics for names and URL encoding, without changing the job's locale.
ORIGINAL_LC_ALL=${LC_ALL-} ORIGINAL_LC_ALL_SET=${LC_ALL+1}
LC_ALL=C

# After a preemption notice Compute Engine powers the VM off about 30 s later. Of those, the job
# gets STOP_GRACE to stop, uploads end SHUTDOWN_BUDGET after the notice, and every call ends
# SHUTDOWN_LIMIT after it, with few, short tries: the callback gets the seconds in between.
for setting in METADATA_URL=http://metadata.google.internal/computeMetadata/v1 DOCKER=docker \
  STORAGE_URL=https://storage.googleapis.com IPTABLES=iptables IP6TABLES=ip6tables WORKDIR=/var/lib/spotcron/work \
  CHECKPOINT_INTERVAL=60 LOG_INTERVAL=5 PARALLEL=16 BATCH_FILES=32 RESUMABLE_MIN=8388608 RETRIES=6 \
  CALLBACK_RETRIES=8 BACKOFF_MS=1000 BACKOFF_MAX_MS=30000 STOP_GRACE=10 POLL=0.5 CONNECT_TIMEOUT=5 \
  HTTP_TIMEOUT=120 UPLOAD_TIMEOUT=3600 PREEMPT_WAIT=60 SHUTDOWN_BUDGET=18 SHUTDOWN_LIMIT=28 SHUTDOWN_RETRIES=2 \
  SHUTDOWN_HTTP_TIMEOUT=8 COS_EXTENSIONS=cos-extensions NVIDIA_DIR=/var/lib/nvidia DEV_DIR=/dev \
  JOB_NETWORK=spotcron JOB_BRIDGE=spotcron0 LOCAL_HOST= LOCAL_GPUS= GPU_PROBLEM= LOCAL_WAITED_S= IAM_WAIT=600 MOUNT=none \
  SECRETS_URL=https://secretmanager.googleapis.com/v1 SECRETS_DIR=/run/spotcron/secrets; do
  override=SPOTCRON_${setting%%=*}
  printf -v "${setting%%=*}" '%s' "${!override:-${setting#*=}}"
done

RUNNER_PID=$$ RESULTS_DIR=$WORKDIR/results CKPT_DIR=$WORKDIR/checkpoint LOGS=$WORKDIR/logs.txt TMP=$WORKDIR/.runner
HERE=${BASH_SOURCE[0]%/*}
[[ $HERE == "${BASH_SOURCE[0]}" ]] && HERE=.
for part in http metadata storage checkpoint preemption secrets container hardware; do
  # shellcheck source=/dev/null  # each part is checked on its own
  source "$HERE/$part.sh"
done

cleanup() {
  end_bg WATCHER_PID && end_bg BG_PID
  job_alive && kill_job
  [[ -n $NAP_PID ]] && kill "$NAP_PID" 2>/dev/null
  end_secrets
  rm -rf "$TMP"
}

# Container-Optimized OS mounts /var writable but non-executable
# (https://cloud.google.com/container-optimized-os/docs/concepts/disks-and-filesystem), and the
# job's results and checkpoint directories are bind-mounted from here into its container with
# that flag: a job could not run a file it restored from its checkpoint. The work dir becomes a
# mount of its own, remounted exec, as Google's GPU steps do for /var/lib/nvidia.
# Only on the VM (cloud-init sets SPOTCRON_MOUNT=mount): elsewhere (local mode, a bench, a test) the
# host's directory is left as it is.
exec_workdir() {
  [[ $MOUNT == none ]] && return 0
  { "$MOUNT" --bind "$WORKDIR" "$WORKDIR" && "$MOUNT" -o remount,exec "$WORKDIR"; } ||
    log "could not remount $WORKDIR exec: the job cannot execute files in its results or checkpoint directory"
}

# The container may run as any user and must be able to write its outputs; the runner's own
# files (tokens among them) are for root only.
prepare_workdir() {
  mkdir -p "$WORKDIR" && exec_workdir && rm -rf "$RESULTS_DIR" "$CKPT_DIR" "$TMP" "$LOGS" &&
    mkdir -p "$RESULTS_DIR" "$CKPT_DIR" "$TMP/up" "$TMP/logs" && : >"$LOGS" &&
    chmod 0777 "$RESULTS_DIR" "$CKPT_DIR" && chmod 0700 "$TMP"
}

# Runs the job, if setup allowed it; sets STATUS, EXIT_CODE, STARTED_AT, FINISHED_AT.
run_attempt() {
  local setup_ok=1
  ((PREEMPTED)) || setup_gpu || setup_ok=0
  if ((setup_ok && !PREEMPTED)); then
    restore_checkpoint
    ((PREEMPTED)) || pull_image
    ((PREEMPTED)) || wall_off_metadata || setup_ok=0
    ((PREEMPTED || !setup_ok)) || fetch_secrets || setup_ok=0
    ((PREEMPTED)) || ! preempted_now || on_shutdown "preemption notice from the metadata server"
  fi
  if ((PREEMPTED)); then STATUS=preempted && note "stopped before the job started: $PREEMPT_REASON"
  elif ((setup_ok)); then
    STARTED_AT=$(now_iso) LOAD_START=$(host_load)
    # `timeout_s` bounds the job from its start; the deadline (set when the VM was created) still
    # wins when boot and pull ate into it. NOW is rounded down: +1 never gives less than the timeout.
    now_s
    KILL_REASON="the deadline $D_DEADLINE passed"
    if ((NOW + 1 + D_TIMEOUT_S < DEADLINE_S)); then
      DEADLINE_S=$((NOW + 1 + D_TIMEOUT_S)) KILL_REASON="its timeout of ${D_TIMEOUT_S}s passed"
    fi
    if start_job; then supervise; FINISHED_AT=$(now_iso); else STARTED_AT=""; fi
  fi
  ((PREEMPTED)) && [[ $STATUS != preempted ]] && log "shutdown notice after the job ended"
}

main() {
  RUNNER_STARTED_AT=$(now_iso) STARTED_AT="" FINISHED_AT=""
  now_s
  IAM_WAIT_UNTIL=$((NOW + IAM_WAIT))
  trap 'on_shutdown "SIGTERM (the VM is shutting down)"' TERM INT
  trap 'on_shutdown "preemption notice from the metadata server"' USR1
  trap cleanup EXIT
  prepare_workdir || { log "cannot prepare $WORKDIR"; exit 2; }
  load_descriptor || exit 2
  log "job $D_JOB run $D_RUN_ID attempt $D_ATTEMPT: image $D_IMAGE, deadline $D_DEADLINE"
  preempt_watcher & WATCHER_PID=$!
  run_attempt
  ((PREEMPTED)) || record_hardware
  upload_outputs
  # The manifest marks a finished attempt whose outputs are all stored; a shutdown that arrives
  # before it is written makes the attempt preempted, so no partial result passes as a success.
  if ((PREEMPTED)); then STATUS=preempted
  elif [[ $UPLOADED == true && -n $EXIT_CODE ]]; then write_manifest || { UPLOADED=false; log "could not write the manifest"; }; fi
  end_bg WATCHER_PID
  send_callback
}

[[ ${BASH_SOURCE[0]} != "$0" ]] || main "$@"
