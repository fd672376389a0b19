# Sourced by tests/gpu/run.sh and peer.sh (needs ROOT and PY). record_as KEY VALUE COMMAND... appends
# the command's last JSON line to $RECORD_FILE with KEY=VALUE added, or, when the command fails or
# prints no JSON, a record with KEY=VALUE and an error naming its last stderr lines: one line per
# command, never a missing row. RECORD_TIMEOUT (seconds, optional) bounds the command.
record_as() {
  local key="$1" value="$2"; shift 2
  local err out
  err="$(mktemp)"
  if out="$(${RECORD_TIMEOUT:+timeout "$RECORD_TIMEOUT"} "$@" 2>"$err")" &&
     echo "$out" | "$PY" "$ROOT/tests/bench/tag_json.py" "$key" "$value" >>"$RECORD_FILE" 2>/dev/null; then
    :
  else
    "$PY" -c 'import json,sys; print(json.dumps({sys.argv[1]: sys.argv[2], "error": sys.argv[3] or "no JSON output"}))' \
      "$key" "$value" "$(tail -n 3 "$err" | tr '\n' ' ')" >>"$RECORD_FILE"
  fi
  rm -f "$err"
  tail -n 1 "$RECORD_FILE" | cut -c1-220
}
