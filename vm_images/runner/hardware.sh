# shellcheck shell=bash disable=SC2034  # a sourced part: what it sets, the other parts read
# What the run ran on, measured here rather than taken from the job: CPU model and count, memory,
# the GPUs the job could see (nvidia-smi: name, driver, memory), and where: the machine type and
# zone from the metadata server, or "local" and the host. Written to $TMP/hardware.json and
# stored as attempt-N/hardware.json; the control plane reads it with a byte cap and a bounded
# parser (spotcron.core.hardware), like every file a VM writes.

HARDWARE_FILE="" LOAD_START=null

# host_load: the host's 1-minute load average (/proc/loadavg), or null. Recorded before the job
# and after it: runs that shared a busy host say so, as pyperf records load_avg_1min.
host_load() {
  local load _
  read -r load _ </proc/loadavg 2>/dev/null && [[ $load =~ ^[0-9]{1,6}(\.[0-9]{1,3})?$ ]] || load=null
  printf '%s' "$load"
}

# _hw_text VALUE: VALUE with control characters dropped and cut to 120 bytes, JSON-quoted in JQ.
_hw_text() { local s=${1//[$'\x01'-$'\x1f']/}; json_quote "${s:0:120}"; }

# _hw_gpus: the JSON list of the GPUs this job could use, from nvidia-smi when there is one.
_hw_gpus() {
  local smi=nvidia-smi ids=() line name driver memory out="" sep=""
  [[ -x $NVIDIA_DIR/bin/nvidia-smi ]] && smi=$NVIDIA_DIR/bin/nvidia-smi
  # Locally, only the GPUs assigned to this run: none when setup_gpu found it none (it never ran).
  if [[ -z $D_GPU_TYPE || ( -n $LOCAL_HOST && ( -n $GPU_PROBLEM || -z $LOCAL_GPUS ) ) ]] ||
    ! command -v "$smi" >/dev/null 2>&1; then printf '[]'; return; fi
  [[ -n $LOCAL_HOST ]] && ids=(-i "$LOCAL_GPUS")
  while IFS= read -r line; do
    IFS=, read -r name driver memory <<<"$line"
    name=${name# } driver=${driver# } memory=${memory// /}
    [[ $memory =~ ^[0-9]{1,9}$ ]] || memory=null
    _hw_text "$name" && name=$JQ && _hw_text "$driver" && driver=$JQ
    out+="$sep{\"name\":$name,\"driver\":$driver,\"memory_mib\":$memory}" sep=,
  done < <(LD_LIBRARY_PATH=$NVIDIA_DIR/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} timeout 20 "$smi" "${ids[@]}" \
    --query-gpu=name,driver_version,memory.total --format=csv,noheader,nounits 2>/dev/null | head -n 16)
  printf '[%s]' "$out"
}

record_hardware() {
  local model cpus memory=null key value host machine=null zone=null local_run=false threads=null waited=null
  model=$(grep -m1 -E '^(model name|Hardware|Processor)[[:space:]]*:' /proc/cpuinfo 2>/dev/null) && model=${model#*: }
  [[ -n $model ]] || model=$(uname -m)
  # The CPUs the job may run on (its affinity); nproc would also obey a job's OMP_NUM_THREADS.
  cpus=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc 2>/dev/null) && [[ $cpus =~ ^[0-9]{1,6}$ ]] || cpus=null
  # The thread count the job was given (local mode sets it per run); null where nothing set it.
  [[ ${OMP_NUM_THREADS-} =~ ^[0-9]{1,6}$ ]] && threads=$OMP_NUM_THREADS
  while read -r key value _; do
    [[ $key == MemTotal: && $value =~ ^[0-9]{1,12}$ ]] && { memory=$((value / 1024)); break; }
  done </proc/meminfo 2>/dev/null
  if [[ -n $LOCAL_HOST ]]; then
    local_run=true host=$LOCAL_HOST
    # Seconds the local VM waited for its turn or its GPUs before this runner started.
    [[ $LOCAL_WAITED_S =~ ^[0-9]{1,9}(\.[0-9]{1,6})?$ ]] && waited=$LOCAL_WAITED_S
  else
    host=$(hostname 2>/dev/null)
    # Both answer a full name (projects/NUMBER/machineTypes/TYPE): the last part is the one.
    md_fetch instance/machine-type "$TMP/hw.type" && value=$(head -c 300 "$TMP/hw.type") && _hw_text "${value##*/}" && machine=$JQ
    md_fetch instance/zone "$TMP/hw.zone" && value=$(head -c 300 "$TMP/hw.zone") && _hw_text "${value##*/}" && zone=$JQ
  fi
  _hw_text "$model" && model=$JQ
  _hw_text "$host" && host=$JQ
  HARDWARE_FILE=$TMP/hardware.json
  printf '{"version":1,"local":%s,"host":%s,"machine_type":%s,"zone":%s,"cpu_model":%s,"cpus":%s,"memory_mib":%s,"gpus":%s,"threads":%s,"load_start":%s,"load_end":%s,"waited_s":%s}\n' \
    "$local_run" "$host" "$machine" "$zone" "$model" "$cpus" "$memory" "$(_hw_gpus)" "$threads" "$LOAD_START" \
    "$(host_load)" "$waited" >"$HARDWARE_FILE"
}

upload_hardware() {
  [[ -n $HARDWARE_FILE && -s $HARDWARE_FILE ]] || return 0
  put "$HARDWARE_FILE" "${ATTEMPT_PREFIX}hardware.json" "$(stat -c %s "$HARDWARE_FILE")"
}
