#!/usr/bin/env bash
# spotcron VM runner: runs one job attempt on a fresh Spot VM, then reports back.
#
# Reads the `spotcron-run` instance attribute (the JSON of spotcron.core.descriptor.RunDescriptor),
# installs the GPU driver when asked, restores /checkpoint from the bucket, runs the job's
# container until it exits or its deadline passes, uploads logs and results to
# PREFIX/attempt-N/, writes PREFIX/attempt-N/manifest.json last (only when every upload
# succeeded), and POSTs the outcome to job_done with the VM's identity token.
# A preemption notice or SIGTERM stops the job, flushes checkpoint and partial logs, and reports
# "preempted" within 30 seconds. See docs/runner.md.
#
# It needs only what Container-Optimized OS has: bash, curl, coreutils, docker and the metadata
# server. There is no python or jq there, so the descriptor is parsed by the small JSON reader
# below, and every value from it reaches docker (or the local process) as one argv element or
# one environment variable: nothing from the descriptor is ever evaluated by a shell.
#
# Every outside endpoint can be overridden, which is how tests and local mode run this same file:
#   SPOTCRON_METADATA_URL   metadata base (http://metadata.google.internal/computeMetadata/v1)
#   SPOTCRON_STORAGE_URL    Cloud Storage JSON API base (https://storage.googleapis.com)
#   SPOTCRON_DOCKER         docker binary; `none` runs the descriptor's local_command as a process
#   SPOTCRON_WORKDIR        where logs, results and checkpoint live on this machine
#   SPOTCRON_CHECKPOINT_INTERVAL, SPOTCRON_RETRIES, SPOTCRON_CALLBACK_RETRIES,
#   SPOTCRON_BACKOFF_MS, SPOTCRON_BACKOFF_MAX_MS, SPOTCRON_STOP_GRACE, SPOTCRON_POLL, ...
#
# Exit status: 0 when job_done acknowledged the report, 1 when it could not be delivered,
# 2 when the descriptor could not be read (nothing to report to).

set -o pipefail
shopt -s nullglob

# Byte semantics for the JSON reader and URL encoder, without changing the job's locale.
ORIGINAL_LC_ALL=${LC_ALL-}
ORIGINAL_LC_ALL_SET=${LC_ALL+1}
LC_ALL=C

METADATA_URL=${SPOTCRON_METADATA_URL:-http://metadata.google.internal/computeMetadata/v1}
STORAGE_URL=${SPOTCRON_STORAGE_URL:-https://storage.googleapis.com}
DOCKER=${SPOTCRON_DOCKER:-docker}
WORKDIR=${SPOTCRON_WORKDIR:-/var/lib/spotcron/work}
CHECKPOINT_INTERVAL=${SPOTCRON_CHECKPOINT_INTERVAL:-60}
RETRIES=${SPOTCRON_RETRIES:-6}
CALLBACK_RETRIES=${SPOTCRON_CALLBACK_RETRIES:-8}
BACKOFF_MS=${SPOTCRON_BACKOFF_MS:-1000}
BACKOFF_MAX_MS=${SPOTCRON_BACKOFF_MAX_MS:-30000}
STOP_GRACE=${SPOTCRON_STOP_GRACE:-10}
POLL=${SPOTCRON_POLL:-0.5}
CONNECT_TIMEOUT=${SPOTCRON_CONNECT_TIMEOUT:-5}
HTTP_TIMEOUT=${SPOTCRON_HTTP_TIMEOUT:-120}
PREEMPT_WAIT=${SPOTCRON_PREEMPT_WAIT:-60}
# After a preemption notice Compute Engine powers the VM off about 30 s later. Of those, the job
# gets STOP_GRACE to stop, uploads end SHUTDOWN_BUDGET after the notice, and every call ends
# SHUTDOWN_LIMIT after it, with few, short tries: the callback gets the seconds in between.
SHUTDOWN_BUDGET=${SPOTCRON_SHUTDOWN_BUDGET:-18}
SHUTDOWN_LIMIT=${SPOTCRON_SHUTDOWN_LIMIT:-28}
SHUTDOWN_RETRIES=${SPOTCRON_SHUTDOWN_RETRIES:-2}
SHUTDOWN_HTTP_TIMEOUT=${SPOTCRON_SHUTDOWN_HTTP_TIMEOUT:-8}
COS_EXTENSIONS=${SPOTCRON_COS_EXTENSIONS:-cos-extensions}
NVIDIA_DIR=${SPOTCRON_NVIDIA_DIR:-/var/lib/nvidia}
DEV_DIR=${SPOTCRON_DEV_DIR:-/dev}
DESCRIPTOR_KEY=spotcron-run

RUNNER_PID=$$
KILL_REASON=""
RESULTS_DIR=$WORKDIR/results
CKPT_DIR=$WORKDIR/checkpoint
LOGS=$WORKDIR/logs.txt
TMP=$WORKDIR/.runner

# --- logging -----------------------------------------------------------------------------------

log() {
  local stamp
  printf -v stamp '%(%Y-%m-%dT%H:%M:%SZ)T' -1
  printf '%s spotcron-runner: %s\n' "$stamp" "$*" >&2
}

# A line for the user: goes to the runner's log and into logs.txt beside the job's output.
note() {
  log "$*"
  printf 'spotcron: %s\n' "$*" >>"$LOGS"
}

# --- time --------------------------------------------------------------------------------------

now_s() { printf -v NOW '%(%s)T' -1; }

now_iso() { date -u +%Y-%m-%dT%H:%M:%S.%3NZ; }

# Sleep that a trapped signal interrupts at once (a foreground sleep would delay the trap).
NAP_PID=""
nap() {
  sleep "$1" &
  NAP_PID=$!
  wait "$NAP_PID" 2>/dev/null
  kill "$NAP_PID" 2>/dev/null
  NAP_PID=""
}

# Exponential backoff with jitter: BACKOFF_MS * 2^(try-1), capped, then +0..50%.
backoff() {
  local try=$1 ms=$BACKOFF_MS cap=$BACKOFF_MAX_MS
  ((SHUTDOWN)) && cap=500
  while ((try > 1 && ms < cap)); do
    ms=$((ms * 2))
    try=$((try - 1))
  done
  ((ms > cap)) && ms=$cap
  ms=$((ms + RANDOM % (ms / 2 + 1)))
  local secs
  printf -v secs '%d.%03d' $((ms / 1000)) $((ms % 1000))
  nap "$secs"
}

# --- JSON reader -------------------------------------------------------------------------------
# json_parse TEXT flattens a JSON document into three associative arrays. A path is "v" followed
# by each object key or array index, each preceded by JSON_SEP (unit separator, which no key of
# ours contains). J[path] is a scalar's value (strings unescaped; numbers, true, false, null as
# written) or the member count of an object or array; JT[path] is its type (s n b z o a);
# JK[path SEP "#" N] is the Nth key of an object, in document order.

JSON_SEP=$'\x1f'
declare -A J=() JT=() JK=()
JREST=""
JSTR=""
JCHAR=""
JV=""
JVT=""

json_parse() {
  J=()
  JT=()
  JK=()
  JREST=$1
  _json_value "v" || return 1
  _json_ws
  [[ -z $JREST ]]
}

# jget KEY...: JV and JVT for the value at that path; false when it is absent.
jget() {
  local path=v key
  for key in "$@"; do path+=$JSON_SEP$key; done
  JV=${J[$path]-}
  JVT=${JT[$path]-}
  [[ -n $JVT ]]
}

# jkey N KEY...: JV is the Nth key of the object at that path.
jkey() {
  local n=$1 path=v key
  shift
  for key in "$@"; do path+=$JSON_SEP$key; done
  JV=${JK[$path$JSON_SEP#$n]-}
}

_json_ws() {
  JREST=${JREST#"${JREST%%[!$' \t\r\n']*}"}
}

_json_value() {
  local path=$1 n=0
  _json_ws
  case ${JREST:0:1} in
    '{')
      JREST=${JREST:1}
      JT[$path]=o
      _json_ws
      if [[ ${JREST:0:1} == '}' ]]; then
        JREST=${JREST:1}
        J[$path]=0
        return 0
      fi
      while :; do
        _json_ws
        [[ ${JREST:0:1} == '"' ]] || return 1
        _json_string || return 1
        JK[$path$JSON_SEP#$n]=$JSTR
        local child=$path$JSON_SEP$JSTR
        _json_ws
        [[ ${JREST:0:1} == ':' ]] || return 1
        JREST=${JREST:1}
        _json_value "$child" || return 1
        n=$((n + 1))
        _json_ws
        case ${JREST:0:1} in
          ',') JREST=${JREST:1} ;;
          '}') JREST=${JREST:1}; break ;;
          *) return 1 ;;
        esac
      done
      J[$path]=$n
      ;;
    '[')
      JREST=${JREST:1}
      JT[$path]=a
      _json_ws
      if [[ ${JREST:0:1} == ']' ]]; then
        JREST=${JREST:1}
        J[$path]=0
        return 0
      fi
      while :; do
        _json_value "$path$JSON_SEP$n" || return 1
        n=$((n + 1))
        _json_ws
        case ${JREST:0:1} in
          ',') JREST=${JREST:1} ;;
          ']') JREST=${JREST:1}; break ;;
          *) return 1 ;;
        esac
      done
      J[$path]=$n
      ;;
    '"')
      _json_string || return 1
      J[$path]=$JSTR
      JT[$path]=s
      ;;
    t | f | n)
      local word
      for word in true false null; do
        if [[ ${JREST:0:${#word}} == "$word" ]]; then
          JREST=${JREST:${#word}}
          J[$path]=$word
          if [[ $word == null ]]; then JT[$path]=z; else JT[$path]=b; fi
          return 0
        fi
      done
      return 1
      ;;
    *)
      [[ $JREST =~ ^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)? ]] || return 1
      [[ -n ${BASH_REMATCH[0]} ]] || return 1
      J[$path]=${BASH_REMATCH[0]}
      JT[$path]=n
      JREST=${JREST:${#BASH_REMATCH[0]}}
      ;;
  esac
}

# JREST starts at a string's opening quote; JSTR gets the unescaped string.
_json_string() {
  local s=${JREST:1} out="" pre esc hex cp lo
  while :; do
    pre=${s%%[\"\\]*}
    out+=$pre
    s=${s:${#pre}}
    case ${s:0:1} in
      '"')
        JREST=${s:1}
        JSTR=$out
        return 0
        ;;
      "\\")
        esc=${s:1:1}
        s=${s:2}
        case $esc in
          '"') out+='"' ;;
          "\\") out+="\\" ;;
          /) out+=/ ;;
          b) out+=$'\b' ;;
          f) out+=$'\f' ;;
          n) out+=$'\n' ;;
          r) out+=$'\r' ;;
          t) out+=$'\t' ;;
          u)
            hex=${s:0:4}
            [[ $hex =~ ^[0-9a-fA-F]{4}$ ]] || return 1
            s=${s:4}
            cp=$((16#$hex))
            if ((cp >= 0xD800 && cp <= 0xDBFF)) && [[ ${s:0:2} == '\u' && ${s:2:4} =~ ^[dD][c-fC-F][0-9a-fA-F]{2}$ ]]; then
              lo=$((16#${s:2:4}))
              s=${s:6}
              cp=$((0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00)))
            fi
            _json_utf8 "$cp"
            out+=$JCHAR
            ;;
          *) return 1 ;;
        esac
        ;;
      *) return 1 ;;
    esac
  done
}

# JCHAR = the UTF-8 bytes of code point $1 (NUL cannot live in a bash string: dropped).
_json_utf8() {
  local cp=$1 fmt
  if ((cp == 0)); then
    JCHAR=""
    return 0
  elif ((cp < 0x80)); then
    printf -v fmt '\\x%02x' "$cp"
  elif ((cp < 0x800)); then
    printf -v fmt '\\x%02x\\x%02x' $((0xC0 | cp >> 6)) $((0x80 | (cp & 0x3F)))
  elif ((cp < 0x10000)); then
    printf -v fmt '\\x%02x\\x%02x\\x%02x' $((0xE0 | cp >> 12)) $((0x80 | ((cp >> 6) & 0x3F))) $((0x80 | (cp & 0x3F)))
  else
    printf -v fmt '\\x%02x\\x%02x\\x%02x\\x%02x' $((0xF0 | cp >> 18)) $((0x80 | ((cp >> 12) & 0x3F))) \
      $((0x80 | ((cp >> 6) & 0x3F))) $((0x80 | (cp & 0x3F)))
  fi
  printf -v JCHAR '%b' "$fmt"
}

# JQ = $1 as a JSON string literal.
json_quote() {
  local s=$1 i hex c
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\n'/\\n}
  s=${s//$'\r'/\\r}
  s=${s//$'\t'/\\t}
  if [[ $s == *[$'\x01'-$'\x1f']* ]]; then
    for ((i = 1; i < 32; i++)); do
      printf -v hex '%02x' "$i"
      printf -v c '%b' "\\x$hex"
      s=${s//"$c"/\\u00$hex}
    done
  fi
  JQ="\"$s\""
}

# JN = $1 as a JSON number or null.
json_int_or_null() {
  if [[ $1 =~ ^-?[0-9]+$ ]]; then JN=$1; else JN=null; fi
}

# --- URLs and HTTP -----------------------------------------------------------------------------

# URLENC = $1 percent-encoded for a URL path segment or query value (RFC 3986 unreserved kept).
url_encode() {
  local s=$1 out="" c i n
  for ((i = 0; i < ${#s}; i++)); do
    c=${s:i:1}
    case $c in
      [a-zA-Z0-9._~-]) out+=$c ;;
      *)
        printf -v n '%d' "'$c"
        printf -v c '%%%02X' $((n & 255))
        out+=$c
        ;;
    esac
  done
  URLENC=$out
}

# http_call METHOD URL OUTFILE [curl args...]: HTTP_CODE is set (000 when nothing answered);
# true on 2xx. curl's own complaints go to the runner's log.
HTTP_CODE=000
http_call() {
  local method=$1 url=$2 out=$3 timeout=$HTTP_TIMEOUT left
  shift 3
  if ((SHUTDOWN)); then
    now_s
    left=$((SHUTDOWN_AT + SHUTDOWN_LIMIT - NOW))
    ((timeout > SHUTDOWN_HTTP_TIMEOUT)) && timeout=$SHUTDOWN_HTTP_TIMEOUT
    ((timeout > left)) && timeout=$left
    ((timeout < 1)) && timeout=1
  fi
  HTTP_CODE=$(curl -sS -X "$method" -o "$out" -w '%{http_code}' --connect-timeout "$CONNECT_TIMEOUT" \
    --max-time "$timeout" "$@" "$url") || true
  [[ $HTTP_CODE =~ ^[0-9]{3}$ ]] || HTTP_CODE=000
  [[ $HTTP_CODE == 2[0-9][0-9] ]]
}

retryable() {
  case $1 in
    000 | 401 | 408 | 429 | 5[0-9][0-9]) return 0 ;;
    *) return 1 ;;
  esac
}

# retry MAX FN ARGS...: FN until it succeeds, fails for good (a non-retryable HTTP answer), or
# MAX retries are spent. Once shutting down, at most SHUTDOWN_RETRIES.
retry() {
  local max=$1 try=0
  shift
  while :; do
    "$@" && return 0
    [[ $HTTP_CODE == 401 ]] && TOKEN=""
    try=$((try + 1))
    if ((SHUTDOWN)); then
      ((max > SHUTDOWN_RETRIES)) && max=$SHUTDOWN_RETRIES
      now_s
      ((NOW >= SHUTDOWN_AT + SHUTDOWN_LIMIT)) && max=0
    fi
    if ! retryable "$HTTP_CODE" || ((try > max)); then
      log "giving up on $1 ${2-} after $try tries (HTTP $HTTP_CODE)"
      return 1
    fi
    backoff "$try"
  done
}

md_fetch() {
  http_call GET "$METADATA_URL/$1" "$2" -H 'Metadata-Flavor: Google'
}

TOKEN=""
TOKEN_EXPIRES=0
access_token() {
  now_s
  [[ -n $TOKEN ]] && ((NOW < TOKEN_EXPIRES)) && return 0
  md_fetch instance/service-accounts/default/token "$TMP/token.json" || return 1
  json_parse "$(<"$TMP/token.json")" || { HTTP_CODE=000; return 1; }
  jget access_token && TOKEN=$JV
  jget expires_in
  [[ $JV =~ ^[0-9]+ ]] || JV=300
  TOKEN_EXPIRES=$((NOW + ${BASH_REMATCH[0]:-300} - 60))
  [[ -n $TOKEN ]] && bearer_header "$TOKEN" "$AUTH_HEADER"
}

# Tokens go to curl in a header file (-H @file), never on its command line, where any process
# on the machine could read them.
AUTH_HEADER=$TMP/auth.header
IDENTITY_HEADER=$TMP/identity.header
bearer_header() {
  (umask 077 && printf 'Authorization: Bearer %s\n' "$1" >"$2")
}

_upload_once() {
  local file=$1 name=$2 ctype=$3
  url_encode "$name"
  access_token || return 1
  http_call POST "$STORAGE_URL/upload/storage/v1/b/$BUCKET_Q/o?uploadType=media&name=$URLENC" \
    "$TMP/upload.out" -H "@$AUTH_HEADER" -H "Content-Type: $ctype" --data-binary "@$file"
}

gcs_upload() {  # FILE OBJECT [CONTENT_TYPE]
  retry "$RETRIES" _upload_once "$1" "$2" "${3:-application/octet-stream}"
}

_download_once() {
  local name=$1 out=$2
  url_encode "$name"
  access_token || return 1
  http_call GET "$STORAGE_URL/storage/v1/b/$BUCKET_Q/o/$URLENC?alt=media" "$out" \
    -H "@$AUTH_HEADER" && return 0
  [[ $HTTP_CODE == 404 ]] && rm -f "$out"
  return 1
}

_delete_once() {
  url_encode "$1"
  access_token || return 1
  http_call DELETE "$STORAGE_URL/storage/v1/b/$BUCKET_Q/o/$URLENC" "$TMP/delete.out" \
    -H "@$AUTH_HEADER" || [[ $HTTP_CODE == 404 ]]
}

_list_page_once() {
  access_token || return 1
  http_call GET "$1" "$TMP/list.json" -H "@$AUTH_HEADER"
}

# LISTED = every object name under $1, all pages.
gcs_list() {
  local prefix page="" url i n
  url_encode "$1"
  prefix=$URLENC
  LISTED=()
  while :; do
    url="$STORAGE_URL/storage/v1/b/$BUCKET_Q/o?prefix=$prefix&fields=items%28name%29%2CnextPageToken"
    if [[ -n $page ]]; then
      url_encode "$page"
      url+="&pageToken=$URLENC"
    fi
    retry "$RETRIES" _list_page_once "$url" || return 1
    json_parse "$(<"$TMP/list.json")" || { log "object listing is not JSON"; return 1; }
    jget items
    n=${JV:-0}
    [[ $JVT == a ]] || n=0
    for ((i = 0; i < n; i++)); do
      jget items "$i" name && LISTED+=("$JV")
    done
    page=""
    jget nextPageToken && page=$JV
    [[ -n $page ]] || return 0
  done
}

# --- the descriptor ----------------------------------------------------------------------------

D_COMMAND=()
D_ARGS=()
D_LOCAL_COMMAND=()
D_ENV_KEYS=()
D_ENV_VALUES=()
HAS_COMMAND=0
HAS_LOCAL_COMMAND=0

# read_strings ARRAY_NAME KEY: ARRAY = the descriptor's list of strings at KEY; false if not a list.
read_strings() {
  local -n into=$1
  local i n
  into=()
  jget "$2" || return 1
  [[ $JVT == a ]] || return 1
  n=$JV
  for ((i = 0; i < n; i++)); do
    jget "$2" "$i"
    into+=("$JV")
  done
}

require_string() {
  if ! jget "$1" || [[ $JVT != s || -z $JV ]]; then
    log "descriptor: field '$1' is missing or not a non-empty string"
    return 1
  fi
}

load_descriptor() {
  local raw field i n
  if ! retry "$RETRIES" md_fetch "instance/attributes/$DESCRIPTOR_KEY" "$TMP/descriptor.json"; then
    log "could not read instance attribute $DESCRIPTOR_KEY from $METADATA_URL (HTTP $HTTP_CODE)"
    return 1
  fi
  raw=$(<"$TMP/descriptor.json")
  if ! json_parse "$raw"; then
    log "instance attribute $DESCRIPTOR_KEY is not valid JSON (near: ${JREST:0:40})"
    return 1
  fi
  if jget version && [[ $JV != 1 ]]; then
    log "descriptor version $JV is not supported; this runner reads version 1"
    return 1
  fi
  for field in job run_id image bucket prefix job_done_url deadline; do
    require_string "$field" || return 1
  done
  jget job; D_JOB=$JV
  jget run_id; D_RUN_ID=$JV
  jget image; D_IMAGE=$JV
  jget bucket; D_BUCKET=$JV
  jget prefix; D_PREFIX=${JV%/}/
  jget job_done_url; D_JOB_DONE_URL=$JV
  jget deadline; D_DEADLINE=$JV
  if ! jget attempt || [[ ! $JV =~ ^[0-9]+$ ]]; then
    log "descriptor: field 'attempt' must be a whole number (got '${JV}')"
    return 1
  fi
  D_ATTEMPT=$JV
  D_TIMEOUT_S=""
  jget timeout_s && D_TIMEOUT_S=$JV
  D_RESULTS_PATH=/results
  jget results_path && [[ $JVT == s && -n $JV ]] && D_RESULTS_PATH=$JV
  D_CHECKPOINT_PATH=""
  jget checkpoint_path && [[ $JVT == s ]] && D_CHECKPOINT_PATH=$JV
  read_strings D_COMMAND command && HAS_COMMAND=1
  read_strings D_ARGS args
  read_strings D_LOCAL_COMMAND local_command && HAS_LOCAL_COMMAND=1
  D_ENV_KEYS=()
  D_ENV_VALUES=()
  if jget env && [[ $JVT == o ]]; then
    n=$JV
    for ((i = 0; i < n; i++)); do
      jkey "$i" env
      D_ENV_KEYS+=("$JV")
      jget env "$JV"
      D_ENV_VALUES+=("$JV")
    done
  fi
  D_GPU_TYPE=""
  D_GPU_COUNT=0
  if jget gpu && [[ $JVT == o ]]; then
    jget gpu type && D_GPU_TYPE=$JV
    jget gpu count && D_GPU_COUNT=$JV
  fi
  local iso='^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?(Z|[+-][0-9]{2}:?[0-9]{2})$' when
  if [[ ! $D_DEADLINE =~ $iso ]] || ! when=$(date -u -d "$D_DEADLINE" '+%s %N' 2>/dev/null); then
    log "descriptor: deadline '$D_DEADLINE' is not an ISO-8601 time"
    return 1
  fi
  # Whole seconds, rounded up: the job is never stopped before its deadline.
  DEADLINE_S=${when% *}
  [[ ${when#* } =~ ^0+$ ]] || DEADLINE_S=$((DEADLINE_S + 1))
  url_encode "$D_BUCKET"
  BUCKET_Q=$URLENC
  ATTEMPT_PREFIX=${D_PREFIX}attempt-$D_ATTEMPT/
  CKPT_PREFIX=${D_PREFIX}checkpoint/
  local name=spotcron-$D_JOB-$D_RUN_ID-a$D_ATTEMPT
  CONTAINER_NAME=${name//[^a-zA-Z0-9_.-]/-}
  # Local mode names the container after its "VM", so deleting the VM can remove it too.
  CONTAINER_NAME=${SPOTCRON_CONTAINER_NAME:-$CONTAINER_NAME}
}

# --- checkpoint --------------------------------------------------------------------------------
# /checkpoint is mirrored file by file under PREFIX/checkpoint/. CKPT_SYNCED["f:REL"] holds the
# sha256 of what the bucket has for REL (empty once deleted there), so a sync uploads only what
# changed. If the restore fails the attempt runs without syncing: a fresh start must never
# overwrite the progress that is stored.

declare -A CKPT_SYNCED=()
CKPT_ENABLED=0

sha256_of() {
  local sum
  sum=$(sha256sum <"$1") || return 1
  SHA=${sum%% *}
}

safe_relpath() {
  local rel=$1
  [[ -n $rel && $rel != /* && $rel != */ && $rel != *//* ]] || return 1
  [[ /$rel/ != */../* && /$rel/ != */./* ]]
}

restore_checkpoint() {
  [[ -n $D_CHECKPOINT_PATH ]] || return 0
  local name rel
  if ! gcs_list "$CKPT_PREFIX"; then
    note "could not list the stored checkpoint; this attempt will not sync /checkpoint"
    return 1
  fi
  for name in "${LISTED[@]}"; do
    ((PREEMPTED)) && return 1
    rel=${name#"$CKPT_PREFIX"}
    if ! safe_relpath "$rel"; then
      log "skipping checkpoint object with an unsafe name: $name"
      continue
    fi
    [[ $rel == */* ]] && mkdir -p "$CKPT_DIR/${rel%/*}"
    if retry "$RETRIES" _download_once "$name" "$CKPT_DIR/$rel"; then
      sha256_of "$CKPT_DIR/$rel" && CKPT_SYNCED["f:$rel"]=$SHA
    elif [[ $HTTP_CODE != 404 ]]; then
      note "could not restore checkpoint file $rel; this attempt will not sync /checkpoint"
      return 1
    fi
  done
  ((${#LISTED[@]})) && log "restored ${#LISTED[@]} checkpoint file(s)"
  CKPT_ENABLED=1
}

sync_checkpoint() {
  ((CKPT_ENABLED)) || return 0
  local f rel key failed=0
  local -A seen=()
  shopt -s globstar dotglob
  for f in "$CKPT_DIR"/**; do
    [[ -f $f && ! -L $f ]] || continue
    rel=${f#"$CKPT_DIR"/}
    seen["f:$rel"]=1
    sha256_of "$f" || continue
    [[ ${CKPT_SYNCED["f:$rel"]-} == "$SHA" ]] && continue
    budget_left || { failed=1; break; }
    if gcs_upload "$f" "$CKPT_PREFIX$rel"; then
      CKPT_SYNCED["f:$rel"]=$SHA
    else
      failed=1
    fi
  done
  shopt -u globstar dotglob
  for key in "${!CKPT_SYNCED[@]}"; do
    [[ -n ${CKPT_SYNCED[$key]} && -z ${seen[$key]-} ]] || continue
    budget_left || { failed=1; break; }
    if retry "$RETRIES" _delete_once "$CKPT_PREFIX${key#f:}"; then
      CKPT_SYNCED[$key]=""
    else
      failed=1
    fi
  done
  return $failed
}

# --- preemption and shutdown -------------------------------------------------------------------

PREEMPTED=0
SHUTDOWN=0
SHUTDOWN_AT=0
PREEMPT_REASON=""

enter_shutdown() {
  ((SHUTDOWN)) && return 0
  SHUTDOWN=1
  now_s
  SHUTDOWN_AT=$NOW
}

on_preempted() {
  PREEMPTED=1
  PREEMPT_REASON=${PREEMPT_REASON:-"preemption notice from the metadata server"}
  enter_shutdown
}

on_term() {
  PREEMPTED=1
  PREEMPT_REASON=${PREEMPT_REASON:-"SIGTERM (the VM is shutting down)"}
  enter_shutdown
}

# False once the shutdown budget is spent: what is left goes to the callback.
budget_left() {
  ((SHUTDOWN)) || return 0
  now_s
  ((NOW < SHUTDOWN_AT + SHUTDOWN_BUDGET))
}

# Long-polls instance/preempted and signals the runner (USR1) when it turns TRUE.
# Runs in a subshell; on TERM it takes its curl down with it.
preempt_watcher() {
  local cpid="" etag="" query="" out=$TMP/preempted hdr=$TMP/preempted.hdr line
  trap '[[ -n $cpid ]] && kill "$cpid" 2>/dev/null; exit 0' TERM
  while :; do
    query=""
    [[ -n $etag ]] && query="?wait_for_change=true&timeout_sec=$PREEMPT_WAIT&last_etag=$etag"
    curl -sS -f -o "$out" -D "$hdr" --connect-timeout "$CONNECT_TIMEOUT" --max-time $((PREEMPT_WAIT + 15)) \
      -H 'Metadata-Flavor: Google' "$METADATA_URL/instance/preempted$query" 2>/dev/null &
    cpid=$!
    if wait "$cpid"; then
      cpid=""
      if [[ $(<"$out") == TRUE ]]; then
        kill -USR1 "$RUNNER_PID" 2>/dev/null
        exit 0
      fi
      etag=""
      while IFS= read -r line; do
        line=${line%$'\r'}
        [[ ${line,,} == etag:* ]] && etag=${line#*: }
      done <"$hdr"
    else
      cpid=""
      etag=""
      sleep 1 &
      cpid=$!
      wait "$cpid"
      cpid=""
    fi
  done
}

# One direct look, just before the job starts: the watcher's signal may still be on its way.
preempted_now() {
  md_fetch instance/preempted "$TMP/preempted.now" && [[ $(<"$TMP/preempted.now") == TRUE ]]
}

WATCHER_PID=""
start_watcher() {
  preempt_watcher &
  WATCHER_PID=$!
}

stop_watcher() {
  [[ -n $WATCHER_PID ]] || return 0
  kill -TERM "$WATCHER_PID" 2>/dev/null
  wait "$WATCHER_PID" 2>/dev/null
  WATCHER_PID=""
}

# WAIT_RC = the exit status of background process $1. A trapped signal interrupts `wait` (status
# > 128) while the process may still run: then wait again. Bash keeps a reaped child's status,
# so once the process has ended a second `wait` returns its own status, whichever came first.
# $2, if given, runs after each interruption while the process still runs.
wait_pid() {
  local rc
  while :; do
    wait "$1"
    rc=$?
    ((rc > 128)) || break
    if kill -0 "$1" 2>/dev/null; then
      [[ -n ${2-} ]] && "$2" "$1"
      continue
    fi
    wait "$1"
    rc=$?
    break
  done
  WAIT_RC=$rc
}

_term_if_preempted() {
  ((PREEMPTED)) && kill -TERM "$1" 2>/dev/null
  return 0
}

# Runs a long setup command in the background, so a preemption is handled while it runs.
interruptible() {
  "$@" &
  wait_pid $! _term_if_preempted
  return "$WAIT_RC"
}

# --- GPU, image, job ---------------------------------------------------------------------------

GPU_ARGS=()
setup_gpu() {
  [[ -n $D_GPU_TYPE ]] || return 0
  if [[ $DOCKER == none ]]; then
    log "GPU $D_GPU_TYPE requested; running the local command without driver setup"
    return 0
  fi
  log "installing the GPU driver for $D_GPU_TYPE x$D_GPU_COUNT"
  if ! interruptible "$COS_EXTENSIONS" install gpu >"$TMP/gpu.log" 2>&1; then
    ((PREEMPTED)) && return 1
    cat "$TMP/gpu.log" >&2
    note "GPU driver installation failed ($COS_EXTENSIONS install gpu); last lines:"
    tail -n 20 "$TMP/gpu.log" >>"$LOGS"
    return 1
  fi
  # COS mounts /var noexec; the driver's binaries and libraries must be executable.
  if [[ $NVIDIA_DIR == /var/lib/nvidia ]]; then
    if ! { mount --bind "$NVIDIA_DIR" "$NVIDIA_DIR" && mount -o remount,exec "$NVIDIA_DIR"; }; then
      log "could not remount $NVIDIA_DIR exec"
    fi
  fi
  local dev
  GPU_ARGS=()
  for dev in "$DEV_DIR"/nvidia*; do
    [[ -d $dev ]] && continue
    GPU_ARGS+=(--device "$dev:/dev/${dev##*/}")
  done
  if ((${#GPU_ARGS[@]} == 0)); then
    note "no $DEV_DIR/nvidia* device after the driver install"
    return 1
  fi
  GPU_ARGS+=(-v "$NVIDIA_DIR/lib64:/usr/local/nvidia/lib64" -v "$NVIDIA_DIR/bin:/usr/local/nvidia/bin")
}

configure_registry_auth() {
  [[ $D_IMAGE == */* ]] || return 0
  local host=${D_IMAGE%%/*}
  case $host in
    *-docker.pkg.dev | gcr.io | *.gcr.io) ;;
    *) return 0 ;;
  esac
  command -v docker-credential-gcr >/dev/null 2>&1 || return 0
  docker-credential-gcr configure-docker --registries="$host" >&2 ||
    log "docker-credential-gcr could not configure $host"
}

_pull_once() {
  HTTP_CODE=000  # a failed pull is worth retrying, like a connection error...
  interruptible "$DOCKER" pull "$D_IMAGE" >&2 && return 0
  ((PREEMPTED)) && HTTP_CODE=499  # ...unless the VM is going away
  return 1
}

pull_image() {
  [[ $DOCKER == none ]] && return 0
  "$DOCKER" image inspect "$D_IMAGE" >/dev/null 2>&1 && return 0
  configure_registry_auth
  # A failed pull is not fatal here: `docker run` tries again and its error lands in logs.txt.
  retry "$RETRIES" _pull_once || log "could not pull $D_IMAGE"
  return 0
}

# The variables spotcron gives every job, set after the job's own env so they always win.
job_env_pairs() {
  local results=$1 checkpoint=$2
  JOB_ENV=("SPOTCRON_JOB=$D_JOB" "SPOTCRON_RUN_ID=$D_RUN_ID" "SPOTCRON_ATTEMPT=$D_ATTEMPT"
    "SPOTCRON_RESULTS_DIR=$results")
  [[ -n $checkpoint ]] && JOB_ENV+=("SPOTCRON_CHECKPOINT_DIR=$checkpoint")
}

JOB_PID=""
start_job() {
  local i
  if [[ $DOCKER == none ]]; then
    if ((!HAS_LOCAL_COMMAND)) || ((${#D_LOCAL_COMMAND[@]} == 0)); then
      note "SPOTCRON_DOCKER=none but the descriptor has no local_command to run"
      return 1
    fi
    job_env_pairs "$RESULTS_DIR" "${D_CHECKPOINT_PATH:+$CKPT_DIR}"
    (
      if [[ -n $ORIGINAL_LC_ALL_SET ]]; then export LC_ALL=$ORIGINAL_LC_ALL; else unset LC_ALL; fi
      unset "${!SPOTCRON_@}"
      for ((i = 0; i < ${#D_ENV_KEYS[@]}; i++)); do
        export "${D_ENV_KEYS[i]}=${D_ENV_VALUES[i]}" || log "skipping env ${D_ENV_KEYS[i]}: not a valid name"
      done
      for i in "${JOB_ENV[@]}"; do export "${i?}"; done
      exec "${D_LOCAL_COMMAND[@]}"
    ) >>"$LOGS" 2>&1 </dev/null &
    JOB_PID=$!
    return 0
  fi
  local -a cmd=("$DOCKER" run --rm --name "$CONTAINER_NAME" --network host
    -v "$RESULTS_DIR:$D_RESULTS_PATH")
  [[ -n $D_CHECKPOINT_PATH ]] && cmd+=(-v "$CKPT_DIR:$D_CHECKPOINT_PATH")
  cmd+=("${GPU_ARGS[@]}")
  for ((i = 0; i < ${#D_ENV_KEYS[@]}; i++)); do
    cmd+=(-e "${D_ENV_KEYS[i]}=${D_ENV_VALUES[i]}")
  done
  job_env_pairs "$D_RESULTS_PATH" "$D_CHECKPOINT_PATH"
  for i in "${JOB_ENV[@]}"; do cmd+=(-e "$i"); done
  if ((HAS_COMMAND && ${#D_COMMAND[@]} > 0)); then
    cmd+=(--entrypoint "${D_COMMAND[0]}" "$D_IMAGE" "${D_COMMAND[@]:1}" "${D_ARGS[@]}")
  else
    cmd+=("$D_IMAGE" "${D_ARGS[@]}")
  fi
  "$DOCKER" rm -f "$CONTAINER_NAME" >/dev/null 2>&1
  "${cmd[@]}" >>"$LOGS" 2>&1 </dev/null &
  JOB_PID=$!
}

job_alive() {
  [[ -n $JOB_PID ]] && kill -0 "$JOB_PID" 2>/dev/null
}

# DESCENDANTS = every process below pid $1, from /proc. The job stays in the runner's process
# group, so whoever ends the runner's group (systemd, local mode deleting the "VM") ends the job
# too; stopping the job alone therefore walks its process tree.
job_tree() {
  local stat line pid ppid
  local -a fields queue
  local -A children=()
  for stat in /proc/[0-9]*/stat; do
    { read -r line <"$stat"; } 2>/dev/null || continue
    read -ra fields <<<"${line##*) }"
    pid=${stat#/proc/}
    pid=${pid%/stat}
    ppid=${fields[1]}
    children[$ppid]+=" $pid"
  done
  DESCENDANTS=()
  queue=("$1")
  while ((${#queue[@]})); do
    pid=${queue[0]}
    queue=("${queue[@]:1}")
    for ppid in ${children[$pid]-}; do
      DESCENDANTS+=("$ppid")
      queue+=("$ppid")
    done
  done
}

# signal_job SIGNAL: the job and everything it started.
signal_job() {
  job_tree "$JOB_PID"
  kill "-$1" "$JOB_PID" "${DESCENDANTS[@]}" 2>/dev/null
}

# SIGTERM, STOP_GRACE seconds, then SIGKILL; for docker through `docker stop`.
stop_job() {
  local stopper="" until
  log "stopping the job: $1"
  if [[ $DOCKER == none ]]; then
    signal_job TERM
  else
    "$DOCKER" stop -t "$STOP_GRACE" "$CONTAINER_NAME" >/dev/null 2>&1 &
    stopper=$!
  fi
  now_s
  until=$((NOW + STOP_GRACE + 2))
  while job_alive && ((NOW < until)); do
    nap 0.1
    now_s
  done
  if job_alive; then
    log "the job ignored SIGTERM for ${STOP_GRACE}s: killing it"
    [[ $DOCKER == none ]] || "$DOCKER" kill "$CONTAINER_NAME" >/dev/null 2>&1
    signal_job KILL
  fi
  if [[ -n $stopper ]]; then
    kill "$stopper" 2>/dev/null
    wait "$stopper" 2>/dev/null
  fi
}

EXIT_CODE=""
reap_job() {
  wait_pid "$JOB_PID"
  EXIT_CODE=$WAIT_RC
  JOB_PID=""
}

STATUS=exited
TIMED_OUT=false
supervise() {
  local next_sync
  now_s
  next_sync=$((NOW + CHECKPOINT_INTERVAL))
  while job_alive; do
    if ((PREEMPTED)); then
      STATUS=preempted
      stop_job "$PREEMPT_REASON"
      break
    fi
    now_s
    if ((NOW >= DEADLINE_S)); then
      TIMED_OUT=true
      stop_job "$KILL_REASON"
      break
    fi
    if ((CKPT_ENABLED && NOW >= next_sync)); then
      sync_checkpoint || log "checkpoint sync incomplete; will try again"
      now_s
      next_sync=$((NOW + CHECKPOINT_INTERVAL))
    fi
    nap "$POLL"
  done
  reap_job
  if [[ $STATUS == preempted ]]; then
    EXIT_CODE=""  # the runner stopped it: its exit status says nothing about the job
    note "stopped: $PREEMPT_REASON"
  elif [[ $TIMED_OUT == true ]]; then
    note "killed: $KILL_REASON"
  fi
}

# --- outputs -----------------------------------------------------------------------------------

MANIFEST_FILES=()
UPLOADED=false

# upload_file LOCAL RELATIVE_NAME CONTENT_TYPE: into PREFIX/attempt-N/, recorded for the manifest.
upload_file() {
  local file=$1 rel=$2 size
  budget_left || return 1
  gcs_upload "$file" "$ATTEMPT_PREFIX$rel" "$3" || return 1
  sha256_of "$file" || return 1
  size=$(stat -c %s "$file") || return 1
  json_quote "$rel"
  MANIFEST_FILES+=("{\"name\":$JQ,\"size\":$size,\"sha256\":\"$SHA\"}")
}

# CTYPE = a content type for a result file, from its extension, so the bucket serves it usefully.
content_type_for() {
  case ${1,,} in
    *.json) CTYPE=application/json ;;
    *.txt | *.log | *.out) CTYPE="text/plain; charset=utf-8" ;;
    *.csv) CTYPE="text/csv; charset=utf-8" ;;
    *.md) CTYPE="text/markdown; charset=utf-8" ;;
    *.html | *.htm) CTYPE="text/html; charset=utf-8" ;;
    *.png) CTYPE=image/png ;;
    *.jpg | *.jpeg) CTYPE=image/jpeg ;;
    *.svg) CTYPE=image/svg+xml ;;
    *) CTYPE=application/octet-stream ;;
  esac
}

upload_outputs() {
  local failed=0 f rel
  sync_checkpoint || failed=1
  [[ -f $LOGS ]] || : >"$LOGS"
  upload_file "$LOGS" logs.txt "text/plain; charset=utf-8" || failed=1
  shopt -s globstar dotglob
  for f in "$RESULTS_DIR"/**; do
    [[ -f $f && ! -L $f ]] || continue  # a symlink could point anywhere on the host
    rel=results/${f#"$RESULTS_DIR"/}
    content_type_for "$f"
    upload_file "$f" "$rel" "$CTYPE" || failed=1
  done
  shopt -u globstar dotglob
  if ((failed)); then UPLOADED=false; else UPLOADED=true; fi
}

write_manifest() {
  local file=$TMP/manifest.json files="" entry uploaded_at
  for entry in "${MANIFEST_FILES[@]}"; do files+=${files:+,}$entry; done
  uploaded_at=$(now_iso)
  json_int_or_null "$EXIT_CODE"
  {
    printf '{"version":1'
    json_quote "$D_JOB"; printf ',"job":%s' "$JQ"
    json_quote "$D_RUN_ID"; printf ',"run_id":%s' "$JQ"
    printf ',"attempt":%s' "$D_ATTEMPT"
    json_quote "$D_IMAGE"; printf ',"image":%s' "$JQ"
    printf ',"status":"%s","exit_code":%s,"timed_out":%s' "$STATUS" "$JN" "$TIMED_OUT"
    printf ',"runner_started_at":"%s","started_at":%s,"finished_at":%s,"uploaded_at":"%s"' \
      "$RUNNER_STARTED_AT" "$(iso_or_null "$STARTED_AT")" "$(iso_or_null "$FINISHED_AT")" "$uploaded_at"
    printf ',"files":[%s]}\n' "$files"
  } >"$file"
  gcs_upload "$file" "${ATTEMPT_PREFIX}manifest.json" application/json
}

iso_or_null() {
  if [[ -n $1 ]]; then printf '"%s"' "$1"; else printf null; fi
}

_callback_once() {
  url_encode "$D_JOB_DONE_URL"
  md_fetch "instance/service-accounts/default/identity?audience=$URLENC&format=full" "$TMP/identity" || return 1
  bearer_header "$(<"$TMP/identity")" "$IDENTITY_HEADER" || { HTTP_CODE=000; return 1; }
  rm -f "$TMP/identity"
  http_call POST "$D_JOB_DONE_URL" "$TMP/callback.out" -H "@$IDENTITY_HEADER" \
    -H 'Content-Type: application/json' --data-binary "@$TMP/callback.json"
}

send_callback() {
  json_int_or_null "$EXIT_CODE"
  {
    printf '{'
    json_quote "$D_JOB"; printf '"job":%s' "$JQ"
    json_quote "$D_RUN_ID"; printf ',"run_id":%s' "$JQ"
    printf ',"attempt":%s,"status":"%s","exit_code":%s' "$D_ATTEMPT" "$STATUS" "$JN"
    printf ',"timed_out":%s,"uploaded":%s' "$TIMED_OUT" "$UPLOADED"
    printf ',"started_at":%s,"finished_at":%s}\n' "$(iso_or_null "$STARTED_AT")" "$(iso_or_null "$FINISHED_AT")"
  } >"$TMP/callback.json"
  if retry "$CALLBACK_RETRIES" _callback_once; then
    log "reported $STATUS (exit code $JN, uploaded $UPLOADED) to $D_JOB_DONE_URL"
    return 0
  fi
  log "could not report to $D_JOB_DONE_URL (HTTP $HTTP_CODE); the sweep will reap this VM"
  return 1
}

# --- main --------------------------------------------------------------------------------------

cleanup() {
  stop_watcher
  if job_alive; then
    [[ $DOCKER == none ]] || "$DOCKER" kill "$CONTAINER_NAME" >/dev/null 2>&1
    signal_job KILL
  fi
  [[ -n $NAP_PID ]] && kill "$NAP_PID" 2>/dev/null
  rm -rf "$TMP"
}

prepare_workdir() {
  mkdir -p "$WORKDIR" || return 1
  rm -rf "$RESULTS_DIR" "$CKPT_DIR" "$TMP" "$LOGS"
  mkdir -p "$RESULTS_DIR" "$CKPT_DIR" "$TMP" || return 1
  : >"$LOGS"
  # The container may run as any user; it must be able to write its outputs. The runner's own
  # files (tokens among them) are for root only.
  chmod 0777 "$RESULTS_DIR" "$CKPT_DIR"
  chmod 0700 "$TMP"
}

main() {
  local setup_ok=1
  RUNNER_STARTED_AT=$(now_iso)
  STARTED_AT=""
  FINISHED_AT=""
  trap on_term TERM INT
  trap on_preempted USR1
  trap cleanup EXIT
  if ! prepare_workdir; then
    log "cannot prepare $WORKDIR"
    exit 2
  fi
  load_descriptor || exit 2
  log "job $D_JOB run $D_RUN_ID attempt $D_ATTEMPT: image $D_IMAGE, deadline $D_DEADLINE"
  start_watcher

  ((PREEMPTED)) || setup_gpu || setup_ok=0
  if ((setup_ok && !PREEMPTED)); then
    restore_checkpoint
    ((PREEMPTED)) || pull_image
    ((PREEMPTED)) || ! preempted_now || on_preempted
  fi
  if ((PREEMPTED)); then
    STATUS=preempted
    note "stopped before the job started: $PREEMPT_REASON"
  elif ((setup_ok)); then
    STARTED_AT=$(now_iso)
    # `timeout` bounds the job itself, counted from its start; the descriptor's deadline (set
    # when the VM was created) still wins when boot and image pull ate into the VM's lifetime.
    now_s
    KILL_REASON="the deadline $D_DEADLINE passed"
    # NOW is whole seconds, rounded down: add one so the job never gets less than its timeout.
    if [[ $D_TIMEOUT_S =~ ^[0-9]+$ ]] && ((NOW + 1 + D_TIMEOUT_S < DEADLINE_S)); then
      DEADLINE_S=$((NOW + 1 + D_TIMEOUT_S))
      KILL_REASON="its timeout of ${D_TIMEOUT_S}s passed"
    fi
    if start_job; then
      supervise
      FINISHED_AT=$(now_iso)
    else
      STARTED_AT=""
    fi
  fi
  ((PREEMPTED)) && [[ $STATUS != preempted ]] && log "shutdown notice after the job ended"

  upload_outputs
  # The manifest marks a finished attempt whose outputs are all stored; a shutdown that arrives
  # before it is written makes the attempt preempted, so no partial result passes as a success.
  if ((PREEMPTED)); then
    STATUS=preempted
  elif [[ $UPLOADED == true && -n $EXIT_CODE ]]; then
    if ! write_manifest; then
      UPLOADED=false
      log "could not write the manifest"
    fi
  fi
  stop_watcher
  send_callback || exit 1
  exit 0
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  main "$@"
fi
