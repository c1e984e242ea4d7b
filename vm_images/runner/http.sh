# shellcheck shell=bash disable=SC2034  # a sourced part: what it sets, the other parts read
# Logging, time, HTTP through curl with retries and backoff, and the encoders the runner needs.

log() { printf '%(%Y-%m-%dT%H:%M:%SZ)T spotcron-runner: %s\n' -1 "$*" >&2; }
# A line for the user: goes to the runner's log and into logs.txt beside the job's output.
note() { log "$*"; printf 'spotcron: %s\n' "$*" >>"$LOGS"; }
now_s() { printf -v NOW '%(%s)T' -1; }
now_iso() { date -u +%Y-%m-%dT%H:%M:%S.%3NZ; }
# A sleep that a trapped signal interrupts at once (a foreground sleep would delay the trap).
NAP_PID=""
nap() { sleep "$1" & NAP_PID=$!; wait "$NAP_PID" 2>/dev/null; kill "$NAP_PID" 2>/dev/null; NAP_PID=""; }

# Exponential backoff with jitter: BACKOFF_MS * 2^(try-1), capped, then +0..50%.
backoff() {
  local cap=$BACKOFF_MAX_MS ms=$((BACKOFF_MS << ($1 > 16 ? 15 : $1 - 1))) secs
  ((SHUTDOWN)) && cap=500
  ((ms > cap)) && ms=$cap
  ms=$((ms + RANDOM % (ms / 2 + 1)))
  printf -v secs '%d.%03d' $((ms / 1000)) $((ms % 1000))
  nap "$secs"
}

# pct_encode GLOB TEXT: URLENC = TEXT with every byte that does not match GLOB as %XX.
pct_encode() {
  local s=$2 c n i
  URLENC=""
  for ((i = 0; i < ${#s}; i++)); do
    c=${s:i:1}
    # shellcheck disable=SC2053  # $1 is a pattern
    [[ $c == $1 ]] || { printf -v n '%d' "'$c"; printf -v c '%%%02X' $((n & 255)); }
    URLENC+=$c
  done
}
# URLENC = $1 encoded for a URL path segment or query value (RFC 3986 unreserved kept). Most
# object names need only their slashes encoded: that is done without the byte-by-byte loop.
url_encode() { if [[ $1 == *[!a-zA-Z0-9._~/-]* ]]; then pct_encode '[a-zA-Z0-9._~-]' "$1"; else URLENC=${1//\//%2F}; fi; }

# QS = each argument as a JSON string literal (each is valid UTF-8); JQ = the last.
json_quote() {
  local s i c h
  QS=()
  for s; do
    s=${s//\\/\\\\} s=${s//\"/\\\"} s=${s//$'\n'/\\n} s=${s//$'\r'/\\r} s=${s//$'\t'/\\t}
    for ((i = 1; i < 32; i++)); do
      [[ $s == *[$'\x01'-$'\x1f']* ]] || break
      printf -v h %02x "$i"
      printf -v c %b "\\x$h"
      s=${s//"$c"/\\u00$h}
    done
    QS+=("\"$s\"") JQ="\"$s\""
  done
}

# json_field NAME FILE: JV = the string or number member NAME of the small flat JSON object in
# FILE (a token answer). Tokens hold no quote or backslash, so no JSON parser is needed.
json_field() {
  local text re="\"$1\"[[:space:]]*:[[:space:]]*(\"([^\"\\\\]*)\"|([0-9]+))"
  JV=""
  text=$(<"$2") && [[ $text =~ $re ]] && JV=${BASH_REMATCH[2]}${BASH_REMATCH[3]}
}

# http_call OUTFILE CURL_ARGS... (method, headers, URL): HTTP_CODE is set (000 when nothing
# answered); true on 2xx. Once shutting down, every call ends within the shutdown limit.
HTTP_CODE=000
http_call() {
  local out=$1 timeout=${CALL_TIMEOUT:-$HTTP_TIMEOUT}
  shift
  if ((SHUTDOWN)); then
    now_s
    timeout=$((SHUTDOWN_AT + SHUTDOWN_LIMIT - NOW < timeout ? SHUTDOWN_AT + SHUTDOWN_LIMIT - NOW : timeout))
    timeout=$((timeout > SHUTDOWN_HTTP_TIMEOUT ? SHUTDOWN_HTTP_TIMEOUT : timeout < 1 ? 1 : timeout))
  fi
  DENIED_BY=""
  HTTP_CODE=$(curl -sS -o "$out" -w '%{http_code}' --connect-timeout "$CONNECT_TIMEOUT" --max-time "$timeout" \
    -H 'Expect:' "$@") || true
  [[ $HTTP_CODE =~ ^[0-9]{3}$ ]] || HTTP_CODE=000
  [[ $HTTP_CODE == 2[0-9][0-9] ]]
}

# The broker and job_done admit this VM's account through an invoker grant that deploy made
# minutes before the first tick; a new grant takes "typically 2 minutes, potentially 7 minutes or
# longer" to apply (https://cloud.google.com/iam/docs/access-change-propagation). Until
# IAM_WAIT_UNTIL (IAM_WAIT seconds after the runner started) a 403 from either is waited out;
# after that it is final. DENIED_BY names the endpoint whose 403 HTTP_CODE holds.
DENIED_BY="" IAM_WAITING=0
awaiting_grant() {
  [[ $HTTP_CODE == 403 && -n $DENIED_BY ]] && ((!SHUTDOWN)) || return 1
  now_s
  ((NOW < IAM_WAIT_UNTIL)) || return 1
  ((IAM_WAITING)) || log "HTTP 403 from $DENIED_BY: waiting up to $((IAM_WAIT_UNTIL - NOW))s for this VM's" \
    "invoker grant to take effect (IAM propagation takes minutes)"
  IAM_WAITING=1
}

# retry MAX FN ARGS...: FN until it succeeds, fails for good (a non-retryable HTTP answer), or
# MAX retries are spent. Once shutting down, at most SHUTDOWN_RETRIES, within the limit. A 403
# from the broker or job_done is retried until IAM_WAIT_UNTIL without counting against MAX.
retry() {
  local max=$1 try=0
  shift
  until "$@"; do
    [[ $HTTP_CODE == 401 ]] && rm -f "$AUTH_HEADER.expires"  # a new token on the next try
    try=$((try + 1))
    if awaiting_grant; then
      backoff "$try"
      try=$((try > max ? max : try))
      continue
    fi
    if ((SHUTDOWN)); then
      now_s
      ((max > SHUTDOWN_RETRIES)) && max=$SHUTDOWN_RETRIES
      ((NOW >= SHUTDOWN_AT + SHUTDOWN_LIMIT)) && max=0
    fi
    if [[ ! $HTTP_CODE =~ ^(000|401|408|429|5..)$ ]] || ((try > max)); then
      log "giving up on $1 ${2-} after $try tries (HTTP $HTTP_CODE)"
      return 1
    fi
    backoff "$try"
  done
}
