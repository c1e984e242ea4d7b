# shellcheck shell=bash disable=SC2034  # a sourced part: what it sets, the other parts read
# Cloud Storage: streaming uploads (media for small files, the resumable protocol for large ones),
# in parallel batches, each file opened once and never through a link; names the bucket can't
# take are skipped and listed; the manifest is written last. Sourced by runner.sh.

# Bytes of valid UTF-8 (no NUL), for names: Cloud Storage refuses anything else.
printf -v UTF8_RE '%b' '^([^\x80-\xff]|[\xc2-\xdf][\x80-\xbf]|\xe0[\xa0-\xbf][\x80-\xbf]|[\xe1-\xec\xee\xef][\x80-\xbf]{2}|'\
'\xed[\x80-\x9f][\x80-\xbf]|\xf0[\x90-\xbf][\x80-\xbf]{2}|[\xf1-\xf3][\x80-\xbf]{3}|\xf4[\x80-\x8f][\x80-\xbf]{2})*$'

# REASON = why Cloud Storage can't take object name $1; false when it can.
name_problem() {
  REASON=""
  if [[ $1 == *$'\n'* ]]; then REASON="it contains a line feed"
  elif [[ $1 == *$'\r'* ]]; then REASON="it contains a carriage return"
  elif ((${#1} > 1024)); then REASON="it is longer than 1024 bytes"
  elif [[ ! $1 =~ $UTF8_RE ]]; then REASON="it is not valid UTF-8"
  fi
  [[ -n $REASON ]]
}

# skip NAME REASON: a line in the logs and an entry in the manifest's "skipped" list, with the
# bytes that are not printable ASCII (and %) %XX-encoded.
skip() {
  pct_encode '[ -$&-~]' "$1"
  note "skipped $URLENC: $2"
  json_quote_all "$URLENC" "$2"
  printf '{"name":%s,"reason":%s}\n' "${QS[@]}" >>"$TMP/skipped"
}

# CTYPE = a content type from the name's extension, so the bucket serves it usefully.
content_type_for() {
  local t="; charset=utf-8"
  case ${1,,} in
    *.json) CTYPE=application/json ;;
    *.txt | *.log | *.out) CTYPE=text/plain$t ;;
    *.csv) CTYPE=text/csv$t ;;
    *.md) CTYPE=text/markdown$t ;;
    *.html | *.htm) CTYPE=text/html$t ;;
    *.png) CTYPE=image/png ;;
    *.jpg | *.jpeg) CTYPE=image/jpeg ;;
    *.svg) CTYPE=image/svg+xml ;;
    *) CTYPE=application/octet-stream ;;
  esac
}

_media_once() {  # SOURCE OBJECT CTYPE
  url_encode "$2"
  access_token || return 1
  http_call POST "$STORAGE_URL/upload/storage/v1/b/$BUCKET_Q/o?uploadType=media&name=$URLENC" \
    /dev/null -H "@$AUTH_HEADER" -H "Content-Type: $3" -T "$1"
}

# The resumable protocol: a session, then one streaming PUT; after a failure the session is asked
# how much it holds (308 + Range) and the rest is sent with curl's -C (Content-Range).
SESSION=""
_resumable_once() {  # SOURCE OBJECT CTYPE SIZE
  local hdr=$TMP/session.$BASHPID line held=-1 resume=()
  access_token || return 1
  if [[ -z $SESSION ]]; then
    url_encode "$2"
    http_call POST "$STORAGE_URL/upload/storage/v1/b/$BUCKET_Q/o?uploadType=resumable&name=$URLENC" /dev/null \
      -D "$hdr" -H "@$AUTH_HEADER" -H "X-Upload-Content-Type: $3" -H "X-Upload-Content-Length: $4" \
      -H 'Content-Type: application/json' --data-binary '{}' || return 1
    while IFS= read -r line; do
      line=${line%$'\r'}
      [[ ${line,,} == location:* ]] && SESSION=${line#*: }
    done <"$hdr"
    [[ -n $SESSION ]] || { log "no upload session for $2"; HTTP_CODE=000; return 1; }
  else
    http_call PUT "$SESSION" /dev/null -D "$hdr" -H "@$AUTH_HEADER" -H "Content-Range: bytes */$4" \
      --data-binary '' && return 0
    case $HTTP_CODE in
      308) ;;
      404 | 410) SESSION=""; HTTP_CODE=503; return 1 ;;  # the session expired: start again
      *) return 1 ;;
    esac
    while IFS= read -r line; do
      line=${line%$'\r'}
      [[ ${line,,} =~ ^range:\ *bytes=0-([0-9]+)$ ]] && held=${BASH_REMATCH[1]}
    done <"$hdr"
    ((held >= 0)) && resume=(-C $((held + 1)))
  fi
  CALL_TIMEOUT=$UPLOAD_TIMEOUT http_call PUT "$SESSION" /dev/null -H "@$AUTH_HEADER" "${resume[@]}" -T "$1"
}

# put SOURCE OBJECT CTYPE SIZE: streamed from SOURCE, retried.
put() {
  if (($4 < RESUMABLE_MIN)); then
    retry "$RETRIES" _media_once "$@"
  else
    SESSION=""
    retry "$RETRIES" _resumable_once "$@"
  fi
}

# download OBJECT FILE: false with HTTP_CODE 404 when there is no such object.
_download_once() {
  url_encode "$1"
  access_token || return 1
  http_call GET "$STORAGE_URL/storage/v1/b/$BUCKET_Q/o/$URLENC?alt=media" "$2" -H "@$AUTH_HEADER" && return 0
  rm -f "$2"
  return 1
}

# upload_batch REAL_ROOT BASE OUT REL...: each file ROOT/REL to ATTEMPT_PREFIX/BASE+REL. Each is
# opened once; the open file's own path (from /proc) must be ROOT/REL, so a file swapped for a
# link, or under a directory swapped for one, is skipped; everything after reads that open file.
# One line per stored file goes to OUT for the manifest. Small files share one curl process.
upload_batch() {
  local root=$1 base=$2 out=$3 rel i n fd fds=() srcs=() names=() failed=0
  local -a real sums sizes codes
  shift 3
  : >"$out"
  for rel in "$@"; do
    if [[ -f $root/$rel && ! -L $root/$rel ]] && exec {fd}<"$root/$rel"; then
      fds+=("$fd")
      srcs+=("/proc/$BASHPID/fd/$fd")
      names+=("$rel")
    else
      skip "$base$rel" "it is no longer a regular file"
    fi
  done
  n=${#fds[@]}
  ((n)) || return 0
  mapfile -d '' -t real < <(readlink -z "${srcs[@]}")
  mapfile -t sizes < <(stat -L -c %s "${srcs[@]}")
  mapfile -t sums < <(sha256sum "${srcs[@]}")
  local -a args=() ok=() types=()
  for ((i = 0; i < n; i++)); do
    if [[ ${real[i]-} != "$root/${names[i]}" ]]; then
      skip "$base${names[i]}" "it was moved, or replaced by a link, while being uploaded"
      continue
    fi
    ok+=("$i")
    url_encode "$ATTEMPT_PREFIX$base${names[i]}"
    content_type_for "${names[i]}"
    types[i]=$CTYPE
    ((${#args[@]})) && args+=(--next)
    args+=(-sS -X POST -o /dev/null -w '%{http_code}\n' -H 'Expect:' -H "@$AUTH_HEADER" -H "Content-Type: $CTYPE"
      --connect-timeout "$CONNECT_TIMEOUT" --max-time "$HTTP_TIMEOUT" -T "${srcs[i]}"
      "$STORAGE_URL/upload/storage/v1/b/$BUCKET_Q/o?uploadType=media&name=$URLENC")
  done
  # The first try for every small file in one process; what failed is retried one by one.
  ((n > 1 && ${#args[@]} && !SHUTDOWN)) && access_token && mapfile -t codes < <(curl "${args[@]}")
  for n in "${!ok[@]}"; do
    i=${ok[n]}
    if [[ ${codes[n]-} == 2[0-9][0-9] ]] || put "${srcs[i]}" "$ATTEMPT_PREFIX$base${names[i]}" "${types[i]}" "${sizes[i]}"; then
      json_quote "$base${names[i]}"
      printf '{"name":%s,"size":%s,"sha256":"%s"}\n' "$JQ" "${sizes[i]}" "${sums[i]%% *}" >>"$out"
    else
      failed=1
    fi
  done
  for fd in "${fds[@]}"; do exec {fd}<&-; done
  return $failed
}

# upload_tree ROOT BASE: every file below ROOT, BATCH_FILES at a time, PARALLEL batches at once.
# Under a shutdown notice the running batches are stopped, logs go first, then the rest as time
# allows (the stopped batches first).
BATCH_FILES=${SPOTCRON_BATCH_FILES:-32}
upload_tree() {
  local root base=$2 item type size rel bytes=0 total=0 count done=0 quarter=0 failed=0 pid next=0 i rc first=0
  root=$(readlink -f "$1") || return 1
  local -a files=() starts=() again=()
  local -A running=()
  while IFS= read -r -d '' item; do
    type=${item%% *} item=${item#* } size=${item%% *} rel=${item#* }
    if name_problem "$ATTEMPT_PREFIX$base$rel"; then skip "$base$rel" "$REASON"
    elif [[ $type == l ]]; then skip "$base$rel" "it is a symbolic link"
    elif [[ $type != f ]]; then skip "$base$rel" "it is not a regular file"
    else
      if ((${#files[@]} > first && (${#files[@]} - first >= BATCH_FILES || bytes >= RESUMABLE_MIN))); then
        starts+=("$first") first=${#files[@]} bytes=0
      fi
      files+=("$rel") bytes=$((bytes + size)) total=$((total + size))
    fi
  done < <(find -P "$root" -mindepth 1 ! -type d -printf '%y %s %P\0')
  count=${#files[@]}
  ((count > first)) && starts+=("$first")
  local batches=${#starts[@]}
  starts+=("$count")  # batch i: files starts[i] to starts[i+1]-1
  ((count)) && note "uploading $count file(s), $total bytes, from $base"
  while ((next < batches || ${#again[@]} || ${#running[@]})); do
    if ((SHUTDOWN && !LOGS_SENT)); then
      for pid in "${!running[@]}"; do signal_tree TERM "$pid"; done
      for pid in "${!running[@]}"; do
        wait "$pid" 2>/dev/null
        again+=("${running[$pid]}")
      done
      running=()
      upload_logs || failed=1
      continue
    fi
    if ((next < batches || ${#again[@]})) && ((${#running[@]} < PARALLEL)) && budget_left; then
      if ((${#again[@]})); then
        i=${again[-1]}
        unset 'again[-1]'
      else
        i=$next next=$((next + 1))
      fi
      printf -v rel '%s/up/%06d' "$TMP" "$i"
      upload_batch "$root" "$base" "$rel" "${files[@]:starts[i]:starts[i+1]-starts[i]}" &
      running[$!]=$i
      continue
    fi
    ((${#running[@]})) || break
    pid=""
    wait -n -p pid "${!running[@]}"
    rc=$?
    [[ -n $pid ]] || continue
    ((rc)) && failed=1
    i=${running[$pid]}
    done=$((done + starts[i + 1] - starts[i]))
    unset "running[$pid]"
    # Progress, every quarter of a large tree.
    if ((count > 4 * BATCH_FILES && done * 4 / count > quarter && done < count)); then
      quarter=$((done * 4 / count))
      note "uploaded $done of $count file(s) from $base"
    fi
  done
  ((next < batches || ${#again[@]})) && failed=1
  ((count)) && note "uploaded $count file(s) from $base$( ((failed)) && printf ' (some failed)')"
  return $failed
}

# LOGS_SENT: logs.txt stored during this upload phase (under a notice it goes before results).
LOGS_SENT=0
upload_logs() {
  LOGS_SENT=1
  : >"$TMP/up/logs"
  upload_batch "$(readlink -f "$WORKDIR")" "" "$TMP/up/logs" logs.txt
}

MANIFEST_FILES=()
UPLOADED=false
upload_outputs() {
  local failed=0
  ((CKPT_ENABLED)) && { sync_checkpoint || failed=1; }
  [[ -f $LOGS ]] || : >"$LOGS"
  ((SHUTDOWN)) && { upload_logs || failed=1; }
  upload_tree "$RESULTS_DIR" results/ || failed=1
  if ((!LOGS_SENT)); then upload_logs || failed=1; fi
  if ((failed)); then UPLOADED=false; else UPLOADED=true; fi
}

write_manifest() {
  local file=$TMP/manifest.json code=null files skipped=""
  [[ $EXIT_CODE =~ ^[0-9]+$ ]] && code=$EXIT_CODE
  files=$(cat "$TMP/up/logs" "$TMP/up/"[0-9]* 2>/dev/null | paste -sd,)
  [[ -f $TMP/skipped ]] && skipped=$(paste -sd, "$TMP/skipped")
  json_quote_all "$D_JOB" "$D_RUN_ID" "$D_IMAGE"
  printf '{"version":1,"job":%s,"run_id":%s,"attempt":%s,"image":%s,"status":"%s","exit_code":%s,"timed_out":%s,' \
    "${QS[0]}" "${QS[1]}" "$D_ATTEMPT" "${QS[2]}" "$STATUS" "$code" "$TIMED_OUT" >"$file"
  printf '"runner_started_at":"%s","started_at":%s,"finished_at":%s,"uploaded_at":"%s","files":[%s],"skipped":[%s]}\n' \
    "$RUNNER_STARTED_AT" "$(iso_or_null "$STARTED_AT")" "$(iso_or_null "$FINISHED_AT")" "$(now_iso)" "$files" \
    "$skipped" >>"$file"
  put "$file" "${ATTEMPT_PREFIX}manifest.json" application/json "$(stat -c %s "$file")"
}
