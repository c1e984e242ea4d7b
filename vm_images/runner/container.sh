# shellcheck shell=bash disable=SC2034  # a sourced part: what it sets, the other parts read
# The job: GPU driver, image, the network wall around the metadata server, the container (or the
# local command) and its supervision: deadline, preemption, periodic checkpoint and live logs.

GPU_ARGS=() GPU_ENV=() NETWORK_ARGS=() JOB_PID="" BG_PID="" LOG_CUT=0 STATUS=exited TIMED_OUT=false EXIT_CODE=""
PROBLEM=""  # why the job did not start, for the callback (the run's reason)

# The job sees exactly the GPUs its configuration names. Without one, none: CUDA_VISIBLE_DEVICES
# is empty (NVIDIA_VISIBLE_DEVICES=void for a container on a host whose runtime adds GPUs).
# Locally (LOCAL_HOST set), a GPU configuration gets the host GPUs local mode assigned it in
# LOCAL_GPUS; a host without them set GPU_PROBLEM, and the run ends with it instead of training
# on the CPU under a GPU's name.
setup_gpu() {
  if [[ -z $D_GPU_TYPE ]]; then
    GPU_ENV=("CUDA_VISIBLE_DEVICES=")
    [[ $DOCKER == none ]] || GPU_ENV+=("NVIDIA_VISIBLE_DEVICES=void")
    return 0
  fi
  if [[ -n $LOCAL_HOST ]]; then
    if [[ -n $GPU_PROBLEM || -z $LOCAL_GPUS ]]; then
      # Not a failure of the job: this host lacks what its configuration names, so it is not run.
      STATUS=unavailable PROBLEM="the configuration asks for $D_GPU_TYPE x$D_GPU_COUNT, and ${GPU_PROBLEM:-no host GPU was assigned to it}; not run on the CPU"
      note "$PROBLEM"
      return 1
    fi
    log "host GPUs $LOCAL_GPUS for $D_GPU_TYPE x$D_GPU_COUNT"
    if [[ $DOCKER == none ]]; then GPU_ENV=("CUDA_VISIBLE_DEVICES=$LOCAL_GPUS"); else GPU_ARGS=(--gpus "\"device=$LOCAL_GPUS\""); fi
    return 0
  fi
  log "installing the GPU driver for $D_GPU_TYPE x$D_GPU_COUNT"
  if ! interruptible "$COS_EXTENSIONS" install gpu >"$TMP/gpu.log" 2>&1; then
    ((PREEMPTED)) || { PROBLEM="GPU driver installation failed ($COS_EXTENSIONS install gpu)"; note "$PROBLEM; last lines:"; tail -n 20 "$TMP/gpu.log" >>"$LOGS"; }
    return 1
  fi
  # COS mounts /var noexec; the driver's binaries and libraries must be executable.
  if [[ $NVIDIA_DIR == /var/lib/nvidia ]]; then
    { mount --bind "$NVIDIA_DIR" "$NVIDIA_DIR" && mount -o remount,exec "$NVIDIA_DIR"; } || log "could not remount $NVIDIA_DIR exec"
  fi
  for dev in "$DEV_DIR"/nvidia*; do [[ -d $dev ]] || GPU_ARGS+=(--device "$dev:/dev/${dev##*/}"); done
  ((${#GPU_ARGS[@]})) || { PROBLEM="no $DEV_DIR/nvidia* device after the driver install"; note "$PROBLEM"; return 1; }
  GPU_ARGS+=(-v "$NVIDIA_DIR/lib64:/usr/local/nvidia/lib64" -v "$NVIDIA_DIR/bin:/usr/local/nvidia/bin")
}

# A failed pull is worth retrying, like a connection error, unless the VM is going away.
_pull_once() { HTTP_CODE=000; interruptible "$DOCKER" pull "$D_IMAGE" >&2 || { ((PREEMPTED)) && HTTP_CODE=499; false; }; }

# A failed pull is not fatal here: `docker run` tries again and its error lands in logs.txt.
pull_image() {
  [[ $DOCKER == none ]] || "$DOCKER" image inspect "$D_IMAGE" >/dev/null 2>&1 && return 0
  local host=${D_IMAGE%%/*}
  if [[ $D_IMAGE == */* && $host =~ (-docker\.pkg\.dev|^gcr\.io|\.gcr\.io)$ ]] && command -v docker-credential-gcr >/dev/null; then
    docker-credential-gcr configure-docker --registries="$host" >&2 || log "docker-credential-gcr could not configure $host"
  fi
  retry "$RETRIES" _pull_once || log "could not pull $D_IMAGE"
}

# wall IPTABLES CHAIN ADDRESS: drop what the job's bridge sends to ADDRESS, except DNS. On
# Compute Engine the VM's resolver is the metadata server's address (port 53), and a container's
# DNS queries leave from its own network namespace, so they cross this chain: dropping them
# leaves the job unable to resolve any name. The ACCEPTs must sit above the DROP: when the DROP
# is new, an ACCEPT left from before (now below it) is replaced.
wall() {
  local drop=("$2" -i "$JOB_BRIDGE" -d "$3" -j DROP) dns proto fresh=0
  if ! "$1" -w -C "${drop[@]}" 2>/dev/null; then
    "$1" -w -I "${drop[@]}" || {
      note "could not block the metadata server for the job network; the job does not run without its wall ($1 failed)"
      return 1
    }
    fresh=1
  fi
  for proto in udp tcp; do
    dns=("$2" -i "$JOB_BRIDGE" -d "$3" -p "$proto" --dport 53 -j ACCEPT)
    ((fresh)) && "$1" -w -D "${dns[@]}" 2>/dev/null
    "$1" -w -C "${dns[@]}" 2>/dev/null || "$1" -w -I "${dns[@]}" || {
      note "could not let the job network reach DNS at $3 ($1 failed); the job would resolve no name"
      return 1
    }
  done
}

# The container runs on its own bridge network, whose traffic to the metadata server is dropped,
# so it never sees the VM's tokens, unless the job opts in with `metadata_access: true`. The rule
# names the bridge, so it gets a fixed name (docker's option; local podman needs no rule).
wall_off_metadata() {
  [[ $DOCKER == none ]] && return 0
  [[ $D_METADATA_ACCESS == true ]] && { NETWORK_ARGS=(--network host); return 0; }
  # Locally a job whose VM would have no internet gets no network at all, as it would find there.
  # (One with metadata access keeps the host's: its metadata server is on this machine's loopback.)
  [[ -n $LOCAL_HOST && $D_EGRESS == false ]] && { NETWORK_ARGS=(--network none); return 0; }
  local create=("$DOCKER" network create --driver bridge)
  [[ $IPTABLES == none ]] || create+=(-o "com.docker.network.bridge.name=$JOB_BRIDGE")
  if ! "$DOCKER" network inspect "$JOB_NETWORK" >/dev/null 2>&1 && ! "${create[@]}" "$JOB_NETWORK" >&2; then
    note "could not create the job network $JOB_NETWORK; the job does not run without its wall"
    return 1
  fi
  # The metadata server also answers on IPv6. A docker that writes no IPv6 rules has made no
  # DOCKER-USER chain there, and leaves FORWARD alone: the rule goes first in FORWARD instead.
  if [[ $IPTABLES != none ]]; then
    local chain6=DOCKER-USER
    "$IP6TABLES" -w -n -L DOCKER-USER >/dev/null 2>&1 || chain6=FORWARD
    wall "$IPTABLES" DOCKER-USER 169.254.169.254/32 && wall "$IP6TABLES" "$chain6" fd20:ce::254/128 || return 1
  fi
  NETWORK_ARGS=(--network "$JOB_NETWORK")
}

# Every descriptor item is one argv element or one environment entry: nothing goes through a shell.
start_job() {
  local item cmd=() env=("${D_ENV[@]}") results=$D_RESULTS_PATH ckpt=$D_CHECKPOINT_PATH
  if [[ $DOCKER == none ]]; then
    if ((${#D_LOCAL_COMMAND[@]} == 0)); then
      note "${SPOTCRON_NO_RUNTIME:-no container runtime has $D_IMAGE}, and the job has no local command" \
        "to run instead: add local: {command: ...} to its job file, or make its image available"
      return 1
    fi
    # Said once by `spotcron up`; the runner's own log, not the job's, keeps it for each VM.
    [[ ${SPOTCRON_NO_RUNTIME-} == *"daemon is not running"* ]] && log "$SPOTCRON_NO_RUNTIME: running the job's local command"
    # {results} and {checkpoint} in the local command name this attempt's directories.
    for item in "${D_LOCAL_COMMAND[@]}"; do item=${item//\{results\}/$RESULTS_DIR} cmd+=("${item//\{checkpoint\}/$CKPT_DIR}"); done
    results=$RESULTS_DIR ckpt=${ckpt:+$CKPT_DIR}
    if [[ -n $LOCAL_HOST && $D_EGRESS == false && $D_METADATA_ACCESS != true ]]; then
      local words=()
      read -ra words < <(no_network_prefix)
      cmd=("${words[@]}" "${cmd[@]}")
    fi
  fi
  # spotcron's own variables (and the GPUs the configuration gets) come after the job's env, so
  # they always win.
  env+=("${GPU_ENV[@]}" "SPOTCRON_JOB=$D_JOB" "SPOTCRON_RUN_ID=$D_RUN_ID" "SPOTCRON_ATTEMPT=$D_ATTEMPT" "SPOTCRON_RESULTS_DIR=$results"
    ${ckpt:+"SPOTCRON_CHECKPOINT_DIR=$ckpt"})
  # With secrets, the output reaches logs.txt through the masker; a job never starts unmasked.
  local out=$LOGS
  if ! start_masker; then
    PROBLEM="could not start the log masker for the job's secrets; the job does not run unmasked" && note "$PROBLEM"
    return 1
  fi
  [[ -n $MASK_FIFO ]] && out=$MASK_FIFO
  if [[ $DOCKER == none ]]; then
    (
      if [[ -n $ORIGINAL_LC_ALL_SET ]]; then export LC_ALL=$ORIGINAL_LC_ALL; else unset LC_ALL; fi
      minimal_env
      for item in "${env[@]}"; do export "${item?}" 2>/dev/null || log "skipping env ${item%%=*}: not a valid name"; done
      export_secrets
      exec "${cmd[@]}"
    ) >>"$out" 2>&1 </dev/null &
  else
    secret_args
    cmd=("$DOCKER" run --rm --name "$CONTAINER_NAME" "${NETWORK_ARGS[@]}" -v "$RESULTS_DIR:$D_RESULTS_PATH"
      ${ckpt:+-v "$CKPT_DIR:$ckpt"} "${GPU_ARGS[@]}" "${SECRET_ARGS[@]}")
    for item in "${env[@]}"; do cmd+=(-e "$item"); done
    # As Kubernetes reads them: command[0] is the entrypoint; args replace the image's CMD.
    ((${#D_COMMAND[@]})) && cmd+=(--entrypoint "${D_COMMAND[0]}")
    "$DOCKER" rm -f "$CONTAINER_NAME" >/dev/null 2>&1
    # The secrets' values are in docker's environment only (`-e NAME` reads them from there).
    (export_secrets && exec "${cmd[@]}" "$D_IMAGE" "${D_COMMAND[@]:1}" "${D_ARGS[@]}") >>"$out" 2>&1 </dev/null &
  fi
  JOB_PID=$!
}

# Words that run a command without a network (its own empty network namespace), as a job whose VM
# has no external address would be there; none where this system allows no namespace (said once).
no_network_prefix() {
  local prefix
  for prefix in "unshare --net --" "unshare --user --map-current-user --net --" "unshare --user --map-root-user --net --"; do
    # shellcheck disable=SC2086  # words
    $prefix true 2>/dev/null && { echo "$prefix"; return 0; }
  done
  note "this machine lets no process leave the network (unshare --net failed): the job reaches the internet here," \
    "which its VM could not (write internet: true if it needs it)"
}

# A local command gets what a VM's container would, not the caller's shell: PATH, HOME, the
# user, the locale and time zone, the thread counts local mode shares out, and local mode's
# marker for its processes; the job's env and secrets are added after. A variable a job
# silently inherited here would be missing on its VM.
minimal_env() {
  local name
  for name in $(compgen -e); do
    case $name in
      PATH | HOME | USER | LOGNAME | LANG | LANGUAGE | LC_* | TZ | TMPDIR | SPOTCRON_LOCAL_VM) ;;
      OMP_NUM_THREADS | OPENBLAS_NUM_THREADS | MKL_NUM_THREADS) ;;
      *) unset "$name" ;;
    esac
  done
}

job_alive() { [[ -n $JOB_PID ]] && kill -0 "$JOB_PID" 2>/dev/null; }

# signal_tree SIGNAL PID: the process and everything below it, from /proc. The job stays in the
# runner's process group, so whoever ends the group (systemd, local mode deleting the "VM") ends
# the job too; stopping the job alone therefore walks its process tree.
signal_tree() {
  local stat line found=("$2") i=0
  local -A children=()
  for stat in /proc/[0-9]*/stat; do
    { read -r line <"$stat"; } 2>/dev/null || continue
    line=${line##*) } line=${line#* } stat=${stat#/proc/}  # "STATE PPID ...", after the name
    children[${line%% *}]+=" ${stat%/stat}"
  done
  # shellcheck disable=SC2206  # pids only
  while ((i < ${#found[@]})); do found+=(${children[${found[i]}]-}) i=$((i + 1)); done
  kill "-$1" "${found[@]}" 2>/dev/null
}

kill_job() { [[ $DOCKER == none ]] || "$DOCKER" kill "$CONTAINER_NAME" >/dev/null 2>&1; signal_tree KILL "$JOB_PID"; }

# end_bg NAME: TERM the process tree whose pid variable NAME holds, reap it and clear NAME.
end_bg() { local -n bg=$1 && [[ -n $bg ]] && { signal_tree TERM "$bg"; wait_pid "$bg"; }; bg=""; }

# SIGTERM, STOP_GRACE seconds, then SIGKILL; for docker through `docker stop`.
stop_job() {
  local stopper="" until && log "stopping the job: $1"
  if [[ $DOCKER == none ]]; then signal_tree TERM "$JOB_PID"; else "$DOCKER" stop -t "$STOP_GRACE" "$CONTAINER_NAME" >/dev/null 2>&1 & stopper=$!; fi
  now_s && until=$((NOW + STOP_GRACE + 2))
  while job_alive && ((NOW < until)); do nap 0.1; now_s; done
  job_alive && { log "the job ignored SIGTERM for ${STOP_GRACE}s: killing it"; kill_job; }
  end_bg stopper
}

# While the job runs, one background upload at a time: the checkpoint when due, and what logs.txt
# gained since the last look as its own object, attempt-N/logs/OFFSET.txt (OFFSET: the byte where
# it starts, 15 digits), so live logs cost only their new bytes. A part is cut once and, if its
# upload fails, sent again unchanged; `spotcron logs --follow` reads the parts in order. The whole
# logs.txt is stored when the attempt ends; the parts stay beside it.
live_upload() {
  local part
  (($1)) && { sync_checkpoint || log "checkpoint sync incomplete; will try again"; }
  for part in "$TMP"/logs/*; do
    put "$part" "${ATTEMPT_PREFIX}logs/${part##*/}" "$(stat -c %s "$part")" && rm -f "$part" || return 1
  done
}

supervise() {
  local next_sync next_log due parts size
  now_s
  next_sync=$((NOW + CHECKPOINT_INTERVAL)) next_log=$((NOW + LOG_INTERVAL))
  while job_alive; do
    ((PREEMPTED)) && { STATUS=preempted; stop_job "$PREEMPT_REASON"; break; }
    now_s
    ((NOW >= DEADLINE_S)) && { TIMED_OUT=true; stop_job "$KILL_REASON"; break; }
    [[ -n $BG_PID ]] && ! kill -0 "$BG_PID" 2>/dev/null && { wait_pid "$BG_PID"; BG_PID=""; }
    due=$((CKPT_ENABLED && NOW >= next_sync))
    if [[ -z $BG_PID ]] && ((NOW >= next_log || due)); then
      size=$(stat -c %s "$LOGS")
      printf -v parts '%s/logs/%015d.txt' "$TMP" "$LOG_CUT"
      ((size > LOG_CUT)) && dd if="$LOGS" of="$parts" iflag=skip_bytes,count_bytes skip="$LOG_CUT" \
        count=$((size - LOG_CUT)) status=none && LOG_CUT=$size
      parts=("$TMP"/logs/*)
      ((${#parts[@]} || due)) && { live_upload "$due" & BG_PID=$!; }
      ((NOW >= next_sync)) && next_sync=$((NOW + CHECKPOINT_INTERVAL))
      next_log=$((NOW + LOG_INTERVAL))
    fi
    nap "$POLL"
  done
  wait_pid "$JOB_PID"
  EXIT_CODE=$WAIT_RC JOB_PID=""
  end_bg BG_PID
  end_secrets
  # A shutdown signal sent to the whole process group reaches the job too: it may end before
  # the loop above sees the notice. The notice still came first, so the job was stopped.
  # The runner stopped it, then: its exit status says nothing about the job.
  ((PREEMPTED)) && STATUS=preempted
  if [[ $STATUS == preempted ]]; then EXIT_CODE="" && note "stopped: $PREEMPT_REASON"
  elif [[ $TIMED_OUT == true ]]; then note "killed: $KILL_REASON"; fi
}
