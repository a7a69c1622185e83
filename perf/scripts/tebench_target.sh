# Sourced by the perf scripts that run one tebench target and initiators against it.
# start_tebench_target TEBENCH CONFIG BUFFER_BYTES LOG: starts the target, waits (up to
# 30 s) for its "tebench target ready:" line, sets target_pid and segment, and stops
# the target on exit (stop_target). Needs the caller's die().
start_tebench_target() {
  local bin=$1 config=$2 buffer=$3 log=$4
  "$bin" --backend=tent --xport_type=rdma --seg_type=DRAM --config="$config" \
    --total_buffer_size="$buffer" >"$log" 2>&1 &
  target_pid=$!
  trap stop_target EXIT
  segment=""
  for _ in $(seq 1 300); do
    segment=$(sed -n 's/^tebench target ready: segment=\([^ ]*\).*/\1/p' "$log")
    [ -n "$segment" ] && return 0
    kill -0 "$target_pid" 2>/dev/null || { cat "$log" >&2; die "the target exited"; }
    sleep 0.1
  done
  cat "$log" >&2
  die "the target did not get ready in 30 s"
}

stop_target() {
  if [ -n "${target_pid:-}" ] && kill -0 "$target_pid" 2>/dev/null; then
    kill -TERM "$target_pid" 2>/dev/null || true
    wait "$target_pid" 2>/dev/null || true
  fi
  target_pid=""
}
