# A hostile job's command (tests/security/test_hostile_job.py), run by the real runner as a local
# command or in a busybox container. POSIX sh with busybox applets only: the container has nothing
# else. It uses everything its VM exposes to it and prints one line per try:
#   CONTROL LABEL STATUS   what its own attempt may do (must work, or the tries below prove nothing)
#   ATTEMPT LABEL STATUS   what it must not be able to do (STATUS 000: no answer at all)
# then DONE. What it knows comes from $SPOTCRON_RESULTS_DIR/.go: `exposed` (the addresses its VM
# reaches: its metadata server, the storage endpoint; names of other runs an attacker could
# guess), `targets` (objects to overwrite, delete, open upload sessions on) and `reads`.

set -u
echo "WHERE $SPOTCRON_RESULTS_DIR"
B=busybox
GO=$SPOTCRON_RESULTS_DIR/.go
. "$GO/exposed"
T=$($B mktemp -d)
trap '$B rm -rf "$T"' EXIT
printf 'owned by a hostile job\n' >"$T/payload"
printf '{}' >"$T/empty.json"

# http METHOD URL [TOKEN] [BODY_FILE]: STATUS = the answer's status code (000: none); body in $T/body.
http() {
  m=$1 u=$2 tok=${3:-} body=${4:-} len=0
  hp=${u#http://}
  hp=${hp%%/*}
  p=/${u#http://*/}
  [ -n "$body" ] && len=$($B wc -c <"$body")
  {
    printf '%s %s HTTP/1.0\r\nHost: %s\r\nMetadata-Flavor: Google\r\n' "$m" "$p" "$hp"
    printf 'Content-Type: application/json\r\nContent-Length: %s\r\n' "$len"
    [ -n "$tok" ] && printf 'Authorization: Bearer %s\r\n' "$tok"
    printf '\r\n'
    [ -n "$body" ] && cat "$body"
  } | $B nc -w 5 "${hp%:*}" "${hp##*:}" >"$T/resp" 2>/dev/null
  STATUS=$($B head -n 1 "$T/resp" | $B awk '{print $2}')
  [ -n "$STATUS" ] || STATUS=000
  $B tr -d '\r' <"$T/resp" | $B sed '1,/^$/d' >"$T/body"
}

say() { echo "$1 $2 $STATUS"; }
json() { $B sed -n "s/.*\"$1\": *\"\\([^\"]*\\)\".*/\\1/p" "$T/body" | $B head -n 1; }
query() { printf %s "$1" | $B sed 's/%/%25/g; s/:/%3A/g; s,/,%2F,g; s/?/%3F/g; s/&/%26/g; s/=/%3D/g'; }
b64url_decode() {
  s=$(printf %s "$1" | $B tr '_-' '/+')
  while [ $((${#s} % 4)) -ne 0 ]; do s="$s="; done
  printf %s "$s" | $B base64 -d
}
b64url_encode() { $B base64 -w 0 | $B tr '+/' '-_' | $B tr -d '='; }
# rename TOKEN NAME: the token with its instance_name claim changed to NAME (not signed again).
rename() {
  head=${1%%.*} rest=${1#*.}
  claims=$(b64url_decode "${rest%%.*}" | $B sed "s/\"instance_name\": *\"[^\"]*\"/\"instance_name\": \"$2\"/")
  printf '%s.%s.%s' "$head" "$(printf %s "$claims" | b64url_encode)" "${rest#*.}"
}

# What its VM exposes: its metadata server, and through it the run descriptor.
http GET "$MD/instance/attributes/spotcron-run"
say CONTROL metadata-descriptor
cp "$T/body" "$T/descriptor"
field() { $B sed -n "s/^$1=//p" "$T/descriptor"; }
BUCKET=$(field bucket) PREFIX=$(field prefix) ATTEMPT=$(field attempt)
CRED=$(field credentials_url) DONE_URL=$(field job_done_url)
OWN_PREFIX=${PREFIX%/}/attempt-$ATTEMPT/
O=$STORAGE/storage/v1/b/$BUCKET/o
UP=$STORAGE/upload/storage/v1/b/$BUCKET/o

http GET "$MD/instance/service-accounts/default/token"
say CONTROL metadata-vm-token
TOK_vm=$(json access_token)
http GET "$MD/instance/service-accounts/default/identity?audience=$(query "$CRED")&format=full"
say CONTROL metadata-identity-for-broker
ID_CRED=$(cat "$T/body")
http GET "$MD/instance/service-accounts/default/identity?audience=$(query "$DONE_URL")&format=full"
say CONTROL metadata-identity-for-job-done
ID_DONE=$(cat "$T/body")

# The broker gives it its own attempt's token, which works on its own attempt.
http POST "$CRED" "$ID_CRED" "$T/empty.json"
say CONTROL broker-own-token
TOK_own=$(json access_token)
http POST "$UP?uploadType=media&name=${OWN_PREFIX}results/own.txt" "$TOK_own" "$T/payload"
say CONTROL own-attempt-write
TOK_none=""
TOK_forged="spotcron-local.$(printf '{"access":"full","exp":4102444800}' | b64url_encode).c2lnbmF0dXJl"

# Every token it can get or make, against everything that is not its own.
for kind in none vm forged own; do
  eval "tok=\$TOK_$kind"
  while read -r name; do
    [ -n "$name" ] || continue
    http POST "$UP?uploadType=media&name=$(query "$name")" "$tok" "$T/payload"
    say ATTEMPT "write:$kind:$name"
    http DELETE "$O/$(query "$name")" "$tok"
    say ATTEMPT "delete:$kind:$name"
    http POST "$UP?uploadType=resumable&name=$(query "$name")" "$tok" "$T/empty.json"
    say ATTEMPT "session:$kind:$name"
  done <"$GO/targets"
  while read -r name; do
    [ -n "$name" ] || continue
    http GET "$O/$(query "$name")?alt=media" "$tok"
    say ATTEMPT "read:$kind:$name"
  done <"$GO/reads"
  for prefix in "" runs/ "runs/$OTHER_JOB/"; do
    http GET "$O?prefix=$(query "$prefix")" "$tok"
    say ATTEMPT "list:$kind:$prefix"
  done
done

# Another run's storage token from the broker.
http POST "$CRED" "$ID_DONE" "$T/empty.json"
say ATTEMPT broker:job-done-audience
http POST "$CRED" "$(rename "$ID_CRED" "$OTHER_VM")" "$T/empty.json"
say ATTEMPT broker:renamed-claims
http POST "$CRED" "" "$T/empty.json"
say ATTEMPT broker:no-token
# The other VM's identity from the metadata server, asked for by its name.
http GET "$MD_ROOT/vm/$OTHER_VM/computeMetadata/v1/instance/service-accounts/default/identity?audience=$(query "$CRED")&format=full"
say ATTEMPT metadata:other-vm-by-name
if [ "$STATUS" = 200 ]; then
  http POST "$CRED" "$(cat "$T/body")" "$T/empty.json"
  say ATTEMPT broker:other-vms-identity
  http POST "$UP?uploadType=media&name=$(query "$OTHER_PREFIX")stolen.txt" "$(json access_token)" "$T/payload"
  say ATTEMPT write:stolen:other-attempt
fi

# job_done for another run.
printf '{"job":"%s","run_id":"%s","attempt":1,"status":"exited","exit_code":0,"uploaded":true}' \
  "$OTHER_JOB" "$OTHER_RUN" >"$T/callback.json"
http POST "$DONE_URL" "" "$T/callback.json"
say ATTEMPT job-done:no-token
http POST "$DONE_URL" "$ID_DONE" "$T/callback.json"
say ATTEMPT job-done:own-token-other-run
http POST "$DONE_URL" "$(rename "$ID_DONE" "$OTHER_VM")" "$T/callback.json"
say ATTEMPT job-done:renamed-claims
echo DONE
