# shellcheck shell=bash disable=SC2034  # a sourced part: what it sets, the other parts read
# The job's secrets: each value read from Secret Manager with the VM's own token (never the
# container's: it may have no metadata access), its CRC32C checked, kept on tmpfs (SECRETS_DIR)
# and in this process only, handed to the container alone (an inherited variable, or a read-only
# file), and masked in the output the runner stores. The descriptor holds names and versions only.

SECRET_NAMES=() SECRET_VALUES=() SECRET_FILES=() SECRET_VERSIONS=() MASKS=() CRC32C_TABLE=()

crc32c_table() {
  local i j c
  for ((i = 0; i < 256; i++)); do
    c=$i
    for ((j = 0; j < 8; j++)); do if ((c & 1)); then c=$(((c >> 1) ^ 0x82F63B78)); else c=$((c >> 1)); fi; done
    CRC32C_TABLE[i]=$c
  done
}

# crc32c_file FILE: CRC = the file's CRC32C (Castagnoli), as an unsigned decimal.
crc32c_file() {
  local b c=0xFFFFFFFF
  ((${#CRC32C_TABLE[@]})) || crc32c_table
  # shellcheck disable=SC2013  # one number a word
  for b in $(od -An -v -tu1 "$1"); do c=$((CRC32C_TABLE[(c ^ b) & 255] ^ (c >> 8))); done
  CRC=$((c ^ 0xFFFFFFFF))
}

# Secret Manager's words for a refusal, as the run's reason says them.
_secret_why() {
  case $HTTP_CODE in
    403) echo "HTTP 403: the VM's account may not access it (roles/secretmanager.secretAccessor on the secret)" ;;
    404) echo "HTTP 404: no such secret or version" ;;
    400) echo "HTTP 400: the version is disabled or destroyed" ;;
    000) echo "Secret Manager did not answer" ;;
    *) echo "HTTP $HTTP_CODE" ;;
  esac
}

_secret_once() { http_call "$1" -H "@$SECRETS_DIR/.auth" "$SECRETS_URL/$2:access"; }

# sed's literal form of $1 (a basic regular expression matching exactly it).
_sed_literal() {
  local s=$1
  s=${s//\\/\\\\} s=${s//\//\\/} s=${s//./\\.} s=${s//\*/\\*} s=${s//\[/\\[} s=${s//\]/\\]} s=${s//^/\\^}
  SEDLIT=${s//$/\\$}
}

# What the stored output must not show (best effort: a job that means to leak a secret can
# always encode it some other way). From the file's bytes, so a binary value is masked whole:
# each part between NULs and newlines (4 bytes or more: a shorter one would mask ordinary
# words); the whole value's base64 at each of the three byte offsets it may start at inside a
# longer encoded text (an Authorization: Basic header), and cut in 76-column lines as `base64`
# and MIME wrap it; base64url; lower- and upper-case hex; JSON's and repr's escaped forms; and the
# percent-encodings HTTP clients and loggers write (everything but unreserved, '/' kept, a space
# as '+', lower-case escapes).
_add_masks() {
  local file=$1 part line b64 k
  while IFS= read -r -d '' part || [[ -n $part ]]; do
    while IFS= read -r line || [[ -n $line ]]; do
      ((${#line} >= 4)) && _add_text_masks "$line"
    done <<<"$part"
  done <"$file"
  (($(wc -c <"$file") >= 4)) || return 0
  for k in 0 1 2; do
    # k filler bytes first: the base64 characters that depend on the value alone start after the
    # first 4 (k > 0) and end before the last, partial group.
    b64=$({ head -c "$k" /dev/zero; cat "$file"; } | base64 -w0)
    ((k > 0)) && b64=${b64:4}
    b64=${b64%%=*}
    ((${#b64} % 4)) && b64=${b64:0:$((${#b64} - ${#b64} % 4))}
    ((${#b64} >= 8)) || continue
    MASKS+=("$b64" "$(printf '%s' "$b64" | tr '+/' '-_')")
  done
  while IFS= read -r line; do
    line=${line%%=*}
    ((${#line} >= 8)) && MASKS+=("$line")
  done < <(base64 -w76 <"$file")
  line=$(od -An -v -tx1 <"$file" | tr -d ' \n')
  MASKS+=("$line" "${line^^}")
  return 0
}

# The masks of one text part of a value: itself, escaped as JSON and repr write it, percent-encoded.
_add_text_masks() {
  local v=$1 escaped URLENC
  MASKS+=("$v")
  escaped=${v//\\/\\\\}
  [[ $escaped != "$v" ]] && MASKS+=("$escaped")
  escaped=${escaped//\"/\\\"}
  [[ $escaped != "$v" ]] && MASKS+=("$escaped" "${escaped//\'/\\\'}")
  pct_encode '[a-zA-Z0-9._~-]' "$v" && [[ $URLENC != "$v" ]] && MASKS+=("$URLENC") &&
    MASKS+=("$(printf '%s' "$URLENC" | sed 's/%\([0-9A-F]\)\([0-9A-F]\)/%\L\1\2/g')")
  pct_encode '[a-zA-Z0-9._~/-]' "$v" && [[ $URLENC != "$v" ]] && MASKS+=("$URLENC")
  pct_encode '[a-zA-Z0-9._~ -]' "$v" && [[ $URLENC != "$v" ]] && MASKS+=("${URLENC// /+}")
  return 0
}

# Reads every secret the descriptor names; on the first that cannot be read, PROBLEM says which
# and why (never its value) and the job does not start.
fetch_secrets() {
  local item name version file answer value n data want resolved mask ok
  ((${#D_SECRETS[@]})) || return 0
  if ! { (umask 077 && mkdir -p "$SECRETS_DIR") && chmod 0711 "$SECRETS_DIR"; }; then
    PROBLEM="cannot make the secrets directory $SECRETS_DIR" && note "$PROBLEM"
    return 1
  fi
  if ! retry "$RETRIES" md_fetch instance/service-accounts/default/token "$SECRETS_DIR/.token" ||
    ! json_field access_token "$SECRETS_DIR/.token" || [[ -z $JV ]] || ! bearer_header "$JV" "$SECRETS_DIR/.auth"; then
    PROBLEM="secrets not read: no token for the VM's account from the metadata server (HTTP $HTTP_CODE)"
    note "$PROBLEM" && return 1
  fi
  rm -f "$SECRETS_DIR/.token"
  for item in "${D_SECRETS[@]}"; do
    IFS=$'\t' read -r name version file <<<"$item"
    answer=$SECRETS_DIR/.answer
    mask=$(umask) && umask 077
    retry "$RETRIES" _secret_once "$answer" "$version"
    ok=$?
    umask "$mask"
    if ((ok != 0)); then
      PROBLEM="secret $name (${version%/versions/*}, version ${version##*/}) could not be read: $(_secret_why)"
      # Secret Manager's own words (they name the resource, never a value), when it sent some.
      [[ -f $answer ]] && json_field message "$answer" && [[ -n $JV ]] && PROBLEM+=" ($(printf '%s' "${JV:0:200}" | tr -cd '[:print:]'))"
      rm -f "$answer" && note "$PROBLEM" && return 1
    fi
    json_field data "$answer" && data=$JV
    json_field dataCrc32c "$answer" && want=$JV
    json_field name "$answer" && resolved=${JV##*/}
    # A random name: the directory is 0711 (a container's user may be anyone) and not listable, so
    # another user of the machine cannot open a file whose name it cannot guess.
    n=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
    [[ ${#n} == 32 ]] || { PROBLEM="cannot name the secret's file (no /dev/urandom)" && note "$PROBLEM" && return 1; }
    (umask 077 && printf '%s' "$data" | base64 -d >"$SECRETS_DIR/$n") 2>/dev/null || data=""
    rm -f "$answer"
    crc32c_file "$SECRETS_DIR/$n"
    if [[ -z $data || -z $want || $CRC != "$want" ]]; then
      PROBLEM="secret $name (${version%/versions/*}) arrived damaged: its CRC32C does not match dataCrc32c"
      note "$PROBLEM" && return 1
    fi
    _add_masks "$SECRETS_DIR/$n"
    if [[ -z $file && $(tr -d '\000' <"$SECRETS_DIR/$n" | wc -c) != $(wc -c <"$SECRETS_DIR/$n") ]]; then
      # A variable ends at its first NUL: the job would get part of the value.
      PROBLEM="secret $name holds a NUL byte, which no environment variable can carry; deliver it as a file (file: /run/secrets/NAME)"
      rm -f "$SECRETS_DIR/$n" && note "$PROBLEM" && return 1
    fi
    IFS= read -r -d '' value <"$SECRETS_DIR/$n"
    [[ $resolved =~ ^[A-Za-z0-9_-]{1,40}$ ]] || resolved=${version##*/}
    SECRET_NAMES+=("$name") SECRET_VERSIONS+=("$resolved")
    if [[ -n $file ]]; then
      chmod 0444 "$SECRETS_DIR/$n"  # the container may run as any user; the directory keeps others out
      SECRET_FILES+=("$SECRETS_DIR/$n:$file") SECRET_VALUES+=("$file")
      [[ $DOCKER == none ]] && SECRET_VALUES[-1]=$SECRETS_DIR/$n  # no mount here: the variable says where
    else
      SECRET_VALUES+=("$value")
      rm -f "$SECRETS_DIR/$n"
    fi
  done
  rm -f "$SECRETS_DIR/.auth"
  log "read ${#SECRET_NAMES[@]} secret(s): ${SECRET_NAMES[*]}"
}

# In the job's process only (just before it execs): each secret as an exported variable.
export_secrets() {
  local i
  for ((i = 0; i < ${#SECRET_NAMES[@]}; i++)); do export "${SECRET_NAMES[i]}=${SECRET_VALUES[i]}"; done
}

# docker run's arguments for the secrets: `-e NAME` takes the value from docker's own
# environment (export_secrets), so no value is ever on a command line; files are mounted read-only.
secret_args() {
  local i
  SECRET_ARGS=()
  for ((i = 0; i < ${#SECRET_NAMES[@]}; i++)); do SECRET_ARGS+=(-e "${SECRET_NAMES[i]}"); done
  for i in "${SECRET_FILES[@]}"; do SECRET_ARGS+=(-v "$i:ro"); done
}

# The sed program that masks every value; it goes to sed through a pipe, never a file or argv.
mask_program() {
  local m
  for m in "${MASKS[@]}"; do _sed_literal "$m" && printf 's/%s/***/g\n' "$SEDLIT"; done
}

# The job's output, masked, appended to logs.txt: a masker reading a FIFO the job writes to.
start_masker() {
  MASK_FIFO=""
  ((${#MASKS[@]})) || return 0
  MASK_FIFO=$TMP/output.fifo
  # Bytes, not characters (a value may be any bytes); a program sed refuses would leave the job
  # writing into a FIFO nobody reads, so it is tried first.
  LC_ALL=C sed -n -f <(mask_program) </dev/null || { MASK_FIFO="" && return 1; }
  if ! { rm -f "$MASK_FIFO" && mkfifo -m 0600 "$MASK_FIFO"; }; then MASK_FIFO="" && return 1; fi
  LC_ALL=C sed -u -f <(mask_program) <"$MASK_FIFO" >>"$LOGS" 2>/dev/null &
  MASK_PID=$!
}

# After the job: the masker ends once every writer has closed the FIFO (a job's leftover child
# may hold it: it is stopped then), and the values leave the disk.
end_secrets() {
  local until
  if [[ -n ${MASK_PID-} ]]; then
    now_s && until=$((NOW + 5))
    while kill -0 "$MASK_PID" 2>/dev/null && ((NOW < until)); do nap 0.1; now_s; done
    end_bg MASK_PID
  fi
  [[ -n ${SECRETS_DIR-} && -d $SECRETS_DIR ]] && rm -rf "$SECRETS_DIR"
  return 0
}

# The callback's `secret_versions` member: {"NAME":"VERSION",...}.
secret_versions_json() {
  local i out=""
  for ((i = 0; i < ${#SECRET_NAMES[@]}; i++)); do out+="${out:+,}\"${SECRET_NAMES[i]}\":\"${SECRET_VERSIONS[i]}\""; done
  SECRET_VERSIONS_JSON="{$out}"
}
