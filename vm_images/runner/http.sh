# shellcheck shell=bash disable=SC2034  # a sourced part: what it sets, the other parts read
# Logging, time, and HTTP through curl: one call, retries with backoff, and the two encoders the
# runner needs (URL path segments and JSON strings). Sourced by runner.sh.

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
  local try=$1 ms=$BACKOFF_MS cap=$BACKOFF_MAX_MS secs
  ((SHUTDOWN)) && cap=500
  while ((try > 1 && ms < cap)); do
    ms=$((ms * 2))
    try=$((try - 1))
  done
  ((ms > cap)) && ms=$cap
  ms=$((ms + RANDOM % (ms / 2 + 1)))
  printf -v secs '%d.%03d' $((ms / 1000)) $((ms % 1000))
  nap "$secs"
}

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

# JQ = $1 as a JSON string literal ($1 is valid UTF-8).
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

# json_field NAME FILE: JV = the string or number member NAME of the small flat JSON object in
# FILE (a token answer). Tokens hold no quote or backslash, so no JSON parser is needed.
json_field() {
  local text re="\"$1\"[[:space:]]*:[[:space:]]*(\"([^\"\\\\]*)\"|([0-9]+))"
  JV=""
  text=$(<"$2") || return 1
  [[ $text =~ $re ]] || return 1
  JV=${BASH_REMATCH[2]}${BASH_REMATCH[3]}
}

# http_call METHOD URL OUTFILE [curl args...]: HTTP_CODE is set (000 when nothing answered);
# true on 2xx. Once shutting down, every call ends within the shutdown limit.
HTTP_CODE=000
http_call() {
  local method=$1 url=$2 out=$3 timeout=${CALL_TIMEOUT:-$HTTP_TIMEOUT} left
  shift 3
  if ((SHUTDOWN)); then
    now_s
    left=$((SHUTDOWN_AT + SHUTDOWN_LIMIT - NOW))
    ((timeout > SHUTDOWN_HTTP_TIMEOUT)) && timeout=$SHUTDOWN_HTTP_TIMEOUT
    ((timeout > left)) && timeout=$left
    ((timeout < 1)) && timeout=1
  fi
  HTTP_CODE=$(curl -sS -X "$method" -o "$out" -w '%{http_code}' --connect-timeout "$CONNECT_TIMEOUT" \
    --max-time "$timeout" -H 'Expect:' "$@" "$url") || true
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
