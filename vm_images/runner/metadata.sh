# shellcheck shell=bash disable=SC2034  # a sourced part: what it sets, the other parts read
# The metadata server: the descriptor, the storage token (from the broker, or the VM's own when
# the descriptor names no broker), identity tokens, and the job_done callback. Sourced by runner.sh.

md_fetch() { http_call "$2" -H 'Metadata-Flavor: Google' "$METADATA_URL/$1"; }

# Tokens go to curl in header files (-H @file), never on its command line, where any process on
# the machine could read them. A new header replaces the old one in one rename, so parallel
# uploads always read a whole one.
bearer_header() {
  (umask 077 && printf 'Authorization: Bearer %s\n' "$1" >"$2.$BASHPID" && mv -f "$2.$BASHPID" "$2") ||
    { HTTP_CODE=000; return 1; }
}

# identity_token AUDIENCE HEADER_FILE: a fresh instance identity token (format=full) as a header.
identity_token() {
  local URLENC  # its own: a caller may hold an encoded object name there (an upload's, a download's)
  url_encode "$1"
  md_fetch "instance/service-accounts/default/identity?audience=$URLENC&format=full" "$2.jwt" &&
    bearer_header "$(<"$2.jwt")" "$2"
}

# The storage token, refreshed a margin before it expires. With a credentials_url the broker
# mints a token limited to this attempt's objects; the VM's own token is the fallback. The header
# file and its expiry (written after it) are shared by every background upload, so one token
# serves them all.
access_token() {
  local answer=$TMP/token.$BASHPID life=300 expires=0
  now_s
  { read -r expires <"$AUTH_HEADER.expires"; } 2>/dev/null && ((NOW < expires)) && return 0
  if [[ -n $D_CREDENTIALS_URL ]]; then
    identity_token "$D_CREDENTIALS_URL" "$TMP/broker.$BASHPID" || return 1
    if ! http_call "$answer" -X POST -H "@$TMP/broker.$BASHPID" -H 'Content-Type: application/json' \
      --data-binary '{}' "$D_CREDENTIALS_URL"; then
      [[ $HTTP_CODE == 403 ]] && DENIED_BY="the credentials broker"
      return 1
    fi
  else
    md_fetch instance/service-accounts/default/token "$answer" || return 1
  fi
  json_field access_token "$answer" && [[ -n $JV ]] || { log "no access_token in the token answer"; HTTP_CODE=000; return 1; }
  bearer_header "$JV" "$AUTH_HEADER" || return 1
  json_field expires_in "$answer" && life=$JV
  echo $((NOW + life - (life > 600 ? 300 : life / 2))) >"$AUTH_HEADER.expires.$BASHPID" &&
    mv -f "$AUTH_HEADER.expires.$BASHPID" "$AUTH_HEADER.expires"
}

# The engine validated every field (spotcron.core.descriptor); this only unpacks them. Lists
# are base64 of NUL-terminated items.
load_descriptor() {
  local line key when
  local -A raw=()
  if ! retry "$RETRIES" md_fetch instance/attributes/spotcron-run "$TMP/descriptor"; then
    log "could not read instance attribute spotcron-run from $METADATA_URL (HTTP $HTTP_CODE)"
    return 1
  fi
  while IFS= read -r line || [[ -n $line ]]; do [[ $line == ?*=* ]] && raw[${line%%=*}]=${line#*=}; done <"$TMP/descriptor"
  if [[ ${raw[version]-} != 2 ]]; then
    log "descriptor version '${raw[version]-}' is not supported; this runner reads version 2"
    return 1
  fi
  for key in job run_id image bucket prefix job_done_url deadline attempt timeout_s checkpoint_object \
    results_path checkpoint_path credentials_url metadata_access gpu_type gpu_count egress; do
    printf -v "D_${key^^}" '%s' "${raw[$key]-}"
  done
  for key in command args local_command env secrets; do
    local -n list=D_${key^^}
    list=()
    [[ -z ${raw[$key]-} ]] || mapfile -d '' -t list < <(printf '%s' "${raw[$key]}" | base64 -d)
    unset -n list
  done
  if ! when=$(date -u -d "$D_DEADLINE" '+%s %N'); then
    log "descriptor: deadline '$D_DEADLINE' is not a time that date(1) reads"
    return 1
  fi
  # Whole seconds, rounded up: the job is never stopped before its deadline.
  DEADLINE_S=${when% *}
  [[ ${when#* } =~ ^0+$ ]] || DEADLINE_S=$((DEADLINE_S + 1))
  url_encode "$D_BUCKET"
  BUCKET_Q=$URLENC ATTEMPT_PREFIX=${D_PREFIX%/}/attempt-$D_ATTEMPT/ AUTH_HEADER=$TMP/auth.header
  # Local mode names the container after its "VM", so deleting the VM can remove it too.
  local name=spotcron-$D_JOB-$D_RUN_ID-a$D_ATTEMPT
  CONTAINER_NAME=${SPOTCRON_CONTAINER_NAME:-${name//[^a-zA-Z0-9_.-]/-}}
}

_callback_once() {
  identity_token "$D_JOB_DONE_URL" "$TMP/identity.header" || return 1
  http_call "$TMP/callback.out" -X POST -H "@$TMP/identity.header" -H 'Content-Type: application/json' \
    --data-binary "@$TMP/callback.json" "$D_JOB_DONE_URL" && return 0
  [[ $HTTP_CODE == 403 ]] && DENIED_BY=job_done
  return 1
}

# JSON for a time that may be missing.
iso_or_null() { if [[ -n $1 ]]; then printf '"%s"' "$1"; else printf null; fi; }

send_callback() {
  local code=null problem=null
  secret_versions_json
  [[ $EXIT_CODE =~ ^[0-9]+$ ]] && code=$EXIT_CODE
  [[ -n $PROBLEM ]] && json_quote "${PROBLEM:0:400}" && problem=$JQ
  json_quote "$D_JOB" "$D_RUN_ID"
  printf '{"job":%s,"run_id":%s,"attempt":%s,"status":"%s","exit_code":%s,"timed_out":%s,"uploaded":%s,"started_at":%s,"finished_at":%s,"problem":%s,"secret_versions":%s}\n' \
    "${QS[@]}" "$D_ATTEMPT" "$STATUS" "$code" "$TIMED_OUT" "$UPLOADED" "$(iso_or_null "$STARTED_AT")" \
    "$(iso_or_null "$FINISHED_AT")" "$problem" "$SECRET_VERSIONS_JSON" >"$TMP/callback.json"
  retry "$CALLBACK_RETRIES" _callback_once && log "reported $STATUS (exit code $code, uploaded $UPLOADED) to $D_JOB_DONE_URL" &&
    return 0
  log "could not report to $D_JOB_DONE_URL (HTTP $HTTP_CODE); the sweep will reap this VM"
  return 1
}
