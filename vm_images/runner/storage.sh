# shellcheck shell=bash disable=SC2034  # a sourced part: what it sets, the other parts read
# Cloud Storage: streaming uploads (media for small files, the resumable protocol for large ones),
# in parallel batches, each file opened once and never through a link; names the bucket can't
# take are skipped and listed; the manifest is written last.

# Bytes of valid UTF-8 (no NUL), for names: Cloud Storage refuses anything else.
printf -v UTF8_RE '%b' '^([^\x80-\xff]|[\xc2-\xdf][\x80-\xbf]|\xe0[\xa0-\xbf][\x80-\xbf]|[\xe1-\xec\xee\xef][\x80-\xbf]{2}|'\
'\xed[\x80-\x9f][\x80-\xbf]|\xf0[\x90-\xbf][\x80-\xbf]{2}|[\xf1-\xf3][\x80-\xbf]{3}|\xf4[\x80-\x8f][\x80-\xbf]{2})*$'

# REASON = why Cloud Storage can't take object name $1; false when it can.
name_problem() {
  REASON=""
  [[ $1 == *[!\ -~]* && ! $1 =~ $UTF8_RE ]] && REASON="it is not valid UTF-8"  # (the regex only when needed)
  ((${#1} > 1024)) && REASON="it is longer than 1024 bytes"
  [[ $1 == *$'\r'* ]] && REASON="it contains a carriage return"
  [[ $1 == *$'\n'* ]] && REASON="it contains a line feed"
  [[ -n $REASON ]]
}

# skip NAME REASON: a line in the logs and an entry in the manifest's "skipped" list, with the
# bytes that are not printable ASCII (and %) %XX-encoded.
skip() {
  pct_encode '[ -$&-~]' "$1"
  note "skipped $URLENC: $2"
  json_quote "$URLENC" "$2"
  printf '{"name":%s,"reason":%s}\n' "${QS[@]}" >>"$TMP/skipped"
}

# A content type from the name's extension, so the bucket serves it usefully.
declare -A CTYPES=([json]=application/json [txt]=text/plain [log]=text/plain [out]=text/plain [csv]=text/csv
  [md]=text/markdown [html]=text/html [htm]=text/html [png]=image/png [jpg]=image/jpeg [jpeg]=image/jpeg
  [svg]=image/svg+xml [tar]=application/x-tar)

# media SOURCE OBJECT: REQ = curl's arguments for one streaming media upload (-T reads the file
# as it goes), for a single upload and for a batch of them in one curl process.
media() {
  local leaf=${2##*/} ext
  ext=${leaf#"${leaf%.*}".}
  [[ $leaf == *.* ]] || ext=none
  CTYPE=${CTYPES[${ext,,}]:-application/octet-stream}
  [[ $CTYPE == text/* ]] && CTYPE+="; charset=utf-8"
  url_encode "$2"
  REQ=(-X POST -H "@$AUTH_HEADER" -H "Content-Type: $CTYPE" -T "$1"
    "$STORAGE_URL/upload/storage/v1/b/$BUCKET_Q/o?uploadType=media&name=$URLENC")
}
_media_once() { access_token && media "$@" && http_call /dev/null "${REQ[@]}"; }

# The resumable protocol: a session, then one streaming PUT; after a failure the session is asked
# how much it holds (308 + Range) and the rest is sent with curl's -C (Content-Range).
SESSION=""
_resumable_once() {  # SOURCE OBJECT SIZE
  local hdr=$TMP/session.$BASHPID held resume=()
  access_token || return 1
  if [[ -z $SESSION ]]; then
    media "$1" "$2"
    http_call /dev/null -D "$hdr" -X POST -H "@$AUTH_HEADER" -H "X-Upload-Content-Type: $CTYPE" \
      -H "X-Upload-Content-Length: $3" -H 'Content-Type: application/json' --data-binary '{}' \
      "${REQ[-1]/uploadType=media/uploadType=resumable}" || return 1
    SESSION=$(sed -n 's/^location: *//Ip' "$hdr" | tr -d '\r')
    [[ -n $SESSION ]] || { log "no upload session for $2"; HTTP_CODE=000; return 1; }
  else
    http_call /dev/null -D "$hdr" -X PUT -H "@$AUTH_HEADER" -H "Content-Range: bytes */$3" --data-binary '' \
      "$SESSION" && return 0
    [[ $HTTP_CODE =~ ^(404|410)$ ]] && { SESSION="" HTTP_CODE=503; return 1; }  # it expired: start again
    [[ $HTTP_CODE == 308 ]] || return 1
    held=$(sed -n 's/^range: *bytes=0-\([0-9]*\).*/\1/Ip' "$hdr")
    [[ -n $held ]] && resume=(-C $((held + 1)))
  fi
  CALL_TIMEOUT=$UPLOAD_TIMEOUT http_call /dev/null -X PUT -H "@$AUTH_HEADER" "${resume[@]}" -T "$1" "$SESSION"
}

# put SOURCE OBJECT SIZE: streamed from SOURCE, retried; resumable from RESUMABLE_MIN bytes.
put() {
  SESSION=""
  if (($3 < RESUMABLE_MIN)); then retry "$RETRIES" _media_once "$@"; else retry "$RETRIES" _resumable_once "$@"; fi
}

# download OBJECT FILE: false with HTTP_CODE 404 when there is no such object.
_download_once() {
  url_encode "$1"
  { access_token && http_call "$2" -H "@$AUTH_HEADER" "$STORAGE_URL/storage/v1/b/$BUCKET_Q/o/$URLENC?alt=media"; } ||
    { rm -f "$2"; false; }
}

# upload_batch REAL_ROOT BASE OUT REL...: each file ROOT/REL to ATTEMPT_PREFIX/BASE+REL. Each is
# opened once; the open file's own path (from /proc) must be ROOT/REL, so a file swapped for a
# link, or under a directory swapped for one, is skipped; everything after reads that open file.
# One line per stored file goes to OUT for the manifest. The first try of every file shares one
# curl process (one connection); what failed is retried one by one.
upload_batch() {
  local root=$1 base=$2 out=$3 rel i fd fds=() srcs=() names=() failed=0 args=() ok=()
  local -a real sums sizes codes
  shift 3
  : >"$out"
  for rel; do
    if [[ -f $root/$rel && ! -L $root/$rel ]] && exec {fd}<"$root/$rel"; then
      fds+=("$fd") srcs+=("/proc/$BASHPID/fd/$fd") names+=("$rel")
    else
      skip "$base$rel" "it is no longer a regular file"
    fi
  done
  ((${#fds[@]})) || return 0
  mapfile -d '' -t real < <(readlink -z "${srcs[@]}")
  mapfile -t sizes < <(stat -L -c %s "${srcs[@]}")
  mapfile -t sums < <(sha256sum "${srcs[@]}")
  for i in "${!names[@]}"; do
    if [[ ${real[i]-} != "$root/${names[i]}" ]]; then
      skip "$base${names[i]}" "it was moved, or replaced by a link, while being uploaded"
      continue
    fi
    ok+=("$i")
    media "${srcs[i]}" "$ATTEMPT_PREFIX$base${names[i]}"
    ((${#args[@]})) && args+=(--next)
    args+=(-sS -o /dev/null -w '%{http_code}\n' -H 'Expect:' --connect-timeout "$CONNECT_TIMEOUT"
      --max-time "$HTTP_TIMEOUT" "${REQ[@]}")
  done
  ((${#ok[@]} > 1 && !SHUTDOWN)) && access_token && mapfile -t codes < <(curl "${args[@]}")
  for rel in "${!ok[@]}"; do
    i=${ok[rel]}
    if [[ ${codes[rel]-} == 2[0-9][0-9] ]] || put "${srcs[i]}" "$ATTEMPT_PREFIX$base${names[i]}" "${sizes[i]}"; then
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
upload_tree() {
  local root base=$2 item type size rel bytes=0 total=0 count done=0 quarter=0 failed=0 pid next=0 i first=0
  local -a files=() starts=() again=() && local -A running=()
  root=$(readlink -f "$1") || return 1
  while IFS= read -r -d '' item; do
    type=${item%% *} item=${item#* } size=${item%% *} rel=${item#* }
    if name_problem "$ATTEMPT_PREFIX$base$rel"; then skip "$base$rel" "$REASON"
    elif [[ $type == l ]]; then skip "$base$rel" "it is a symbolic link"
    elif [[ $type != f ]]; then skip "$base$rel" "it is not a regular file"
    else
      # A batch ends at BATCH_FILES files or at RESUMABLE_MIN bytes.
      if ((${#files[@]} > first && (${#files[@]} - first >= BATCH_FILES || bytes >= RESUMABLE_MIN))); then
        starts+=("$first") first=${#files[@]} bytes=0
      fi
      files+=("$rel") bytes=$((bytes + size)) total=$((total + size))
    fi
  done < <(find -P "$root" -mindepth 1 ! -type d -printf '%y %s %P\0')
  count=${#files[@]}
  ((count > first)) && starts+=("$first")
  local batches=${#starts[@]} && starts+=("$count")  # batch i: files starts[i] to starts[i+1]-1
  ((count)) && note "uploading $count file(s), $total bytes, from $base" && access_token  # one, for every batch
  while ((next < batches || ${#again[@]} || ${#running[@]})); do
    if ((SHUTDOWN && !LOGS_SENT)); then
      for pid in "${!running[@]}"; do signal_tree TERM "$pid"; wait_pid "$pid"; again+=("${running[$pid]}"); done
      running=()
      upload_logs || failed=1
    elif ((next < batches || ${#again[@]})) && ((${#running[@]} < PARALLEL)) && budget_left; then
      if ((${#again[@]})); then i=${again[-1]} && unset 'again[-1]'; else i=$next next=$((next + 1)); fi
      printf -v rel '%s/up/%06d' "$TMP" "$i"
      upload_batch "$root" "$base" "$rel" "${files[@]:starts[i]:starts[i+1]-starts[i]}" &
      running[$!]=$i
    else
      ((${#running[@]})) || break
      pid="" && for i in "${!running[@]}"; do kill -0 "$i" 2>/dev/null || pid=$i; done  # gone: see wait_pid
      if [[ -n $pid ]]; then wait_pid "$pid"; else wait -n -p pid "${!running[@]}"; WAIT_RC=$?; fi
      [[ -n $pid ]] || continue  # a trapped signal interrupted the wait
      [[ $WAIT_RC == 0 ]] || failed=1
      i=${running[$pid]} && unset "running[$pid]"
      done=$((done + starts[i + 1] - starts[i]))
      # Progress, each quarter of a large tree.
      ((count > 4 * BATCH_FILES && done * 4 / count > quarter && done < count)) &&
        quarter=$((done * 4 / count)) && note "uploaded $done of $count file(s) from $base"
    fi
  done
  ((next < batches || ${#again[@]})) && failed=1
  ((count)) && note "uploaded $count file(s) from $base$( ((failed)) && printf ' (some failed)')"
  return $failed
}

# LOGS_SENT: logs.txt stored in this upload phase (under a notice it goes before the results).
LOGS_SENT=0 UPLOADED=false
upload_logs() { LOGS_SENT=1; upload_batch "$(readlink -f "$WORKDIR")" "" "$TMP/up/logs" logs.txt; }
upload_outputs() {
  local failed=0
  ((CKPT_ENABLED)) && { sync_checkpoint || failed=1; }
  ((SHUTDOWN)) && { upload_logs || failed=1; }
  upload_tree "$RESULTS_DIR" results/ || failed=1
  ((LOGS_SENT)) || upload_logs || failed=1
  ((SHUTDOWN)) || upload_hardware || log "could not store hardware.json"
  UPLOADED=true
  ((failed)) && UPLOADED=false
}

write_manifest() {
  local file=$TMP/manifest.json code=null
  [[ $EXIT_CODE =~ ^[0-9]+$ ]] && code=$EXIT_CODE
  json_quote "$D_JOB" "$D_RUN_ID" "$D_IMAGE"
  printf '{"version":1,"job":%s,"run_id":%s,"attempt":%s,"image":%s,"status":"%s","exit_code":%s,"timed_out":%s,' \
    "${QS[0]}" "${QS[1]}" "$D_ATTEMPT" "${QS[2]}" "$STATUS" "$code" "$TIMED_OUT" >"$file"
  printf '"runner_started_at":"%s","started_at":%s,"finished_at":%s,"uploaded_at":"%s","files":[%s],"skipped":[%s]}\n' \
    "$RUNNER_STARTED_AT" "$(iso_or_null "$STARTED_AT")" "$(iso_or_null "$FINISHED_AT")" "$(now_iso)" \
    "$(cat "$TMP/up/logs" "$TMP/up/"[0-9]* 2>/dev/null | paste -sd,)" "$(paste -sd, "$TMP/skipped" 2>/dev/null)" >>"$file"
  put "$file" "${ATTEMPT_PREFIX}manifest.json" "$(stat -c %s "$file")"
}
