# shellcheck shell=bash disable=SC2034  # a sourced part: what it sets, the other parts read
# The checkpoint directory as one tar archive in one object (the descriptor's checkpoint_object):
# a restore is one download and never mixes two generations, since an object is replaced whole.
# GNU tar opens each file relative to its directory with O_NOFOLLOW and stores links as links,
# so no host file can get into the archive. If the restore fails the attempt runs without saving:
# a fresh start must never overwrite the progress that is stored. Sourced by runner.sh.

CKPT_ENABLED=0

# STATE = a digest of the directory's names, types, sizes and times: unchanged means no upload.
checkpoint_state() { STATE=$(find -P "$CKPT_DIR" -printf '%y %s %T@ %P\0' | sha256sum); }

restore_checkpoint() {
  [[ -n $D_CHECKPOINT_PATH ]] || return 0
  local archive=$TMP/checkpoint.tar
  if retry "$RETRIES" _download_once "$D_CHECKPOINT_OBJECT" "$archive"; then
    if ! tar -x -f "$archive" -C "$CKPT_DIR" 2>"$TMP/tar.err"; then
      note "could not unpack the stored checkpoint ($(head -c 200 "$TMP/tar.err")); this attempt will not save it"
      return 1
    fi
    log "restored the checkpoint ($(stat -c %s "$archive") bytes)"
    rm -f "$archive"
  elif [[ $HTTP_CODE != 404 ]]; then
    note "could not download the stored checkpoint (HTTP $HTTP_CODE); this attempt will not save it"
    return 1
  fi
  checkpoint_state
  printf '%s' "$STATE" >"$TMP/checkpoint.state"
  CKPT_ENABLED=1
}

# Runs in the background while the job runs: what it saved is kept in a file.
sync_checkpoint() {
  ((CKPT_ENABLED)) || return 0
  local archive=$TMP/checkpoint.$BASHPID.tar
  checkpoint_state
  [[ $STATE == "$(<"$TMP/checkpoint.state")" ]] && return 0
  budget_left || return 1
  # tar's status 1: a file changed while it was read (the job is still writing); the archive is whole.
  tar -c -f "$archive" -C "$CKPT_DIR" . 2>"$TMP/tar.err"
  (($? > 1)) && { log "could not archive the checkpoint: $(head -c 200 "$TMP/tar.err")"; return 1; }
  put "$archive" "$D_CHECKPOINT_OBJECT" "$(stat -c %s "$archive")" && printf '%s' "$STATE" >"$TMP/checkpoint.state"
  local rc=$?
  rm -f "$archive"
  return $rc
}
