#!/usr/bin/env bash
# scripts/hw-smoke.sh without hardware: the no-device path (exit 77 with a message),
# usage errors (exit 2), and --dry-run over a fake /sys/class/infiniband tree
# (TENT_HW_SMOKE_SYSFS): the generated verbs configs and the planned steps.
# Nothing here needs a NIC or a build.
set -uo pipefail
src=${TENT_TEST_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
script="$src/scripts/hw-smoke.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
pass() { echo "ok: $*"; }

# Runs the script; sets $rc and $output (stdout + stderr).
smoke() { output=$("$script" "$@" 2>&1); rc=$?; }
expect_rc() {  # $1 expected, $2 what
  if [ "$rc" = "$1" ]; then pass "$2 (exit $rc)"; else fail "$2: exit $rc, expected $1"; echo "$output"; fi
}
expect_text() {  # $1 fixed string, $2 what
  if grep -qF -- "$1" <<<"$output"; then pass "$2"; else fail "$2: no '$1' in:"; echo "$output"; fi
}

# ---- syntax ----------------------------------------------------------------------
if bash -n "$script"; then pass "bash -n"; else fail "bash -n"; fi
if command -v shellcheck >/dev/null 2>&1; then
  if shellcheck "$script"; then pass "shellcheck"; else fail "shellcheck"; fi
else
  echo "skip: shellcheck not installed"
fi

# ---- no device -------------------------------------------------------------------
mkdir -p "$tmp/empty"
TENT_HW_SMOKE_SYSFS="$tmp/empty" smoke --out "$tmp/out-empty"
expect_rc 77 "no device in an empty sysfs tree"
expect_text "no RDMA device" "the skip says why"
expect_text "$tmp/empty" "the skip names what it checked"

TENT_HW_SMOKE_SYSFS="$tmp/missing" smoke --out "$tmp/out-missing"
expect_rc 77 "no device when the sysfs directory does not exist"

# This machine, as the script sees it when it has no RDMA device (no environment
# override: rdma-core's tools when installed, else /sys/class/infiniband).
have_device=0
if ls /sys/class/infiniband/* >/dev/null 2>&1; then have_device=1; fi
if command -v ibv_devinfo >/dev/null 2>&1 && [ -n "$(ibv_devinfo -l 2>/dev/null | awk 'NR > 1 && NF == 1')" ]; then
  have_device=1
fi
if [ "$have_device" = 0 ]; then
  smoke --out "$tmp/out-host" --no-build
  expect_rc 77 "this machine (no RDMA device)"
else
  echo "skip: this machine has an RDMA device; run scripts/hw-smoke.sh itself"
fi

# ---- usage -----------------------------------------------------------------------
smoke --no-such-flag
expect_rc 2 "an unknown argument"
smoke --build
expect_rc 2 "a flag without its value"
smoke --help
expect_rc 0 "--help"
expect_text "exit 77" "--help documents the skip"

# ---- a fake tree with two devices, --dry-run ---------------------------------------
fake="$tmp/sys"
p0="$fake/mlx5_0/ports/1"
p1="$fake/mlx5_1/ports/1"
mkdir -p "$p0/gids" "$p0/gid_attrs/types" "$p1"
echo "4: ACTIVE" >"$p0/state"; echo Ethernet >"$p0/link_layer"; echo "100 Gb/sec (4X EDR)" >"$p0/rate"
echo "fe80:0000:0000:0000:0000:0000:0000:0001" >"$p0/gids/0"; echo "RoCE v1" >"$p0/gid_attrs/types/0"
echo "0000:0000:0000:0000:0000:ffff:0a00:000c" >"$p0/gids/3"; echo "RoCE v2" >"$p0/gid_attrs/types/3"
echo "1: DOWN" >"$p1/state"; echo InfiniBand >"$p1/link_layer"; echo "200 Gb/sec (4X HDR)" >"$p1/rate"
mkdir -p "$p0/hw_counters"
echo 3 >"$p0/hw_counters/local_ack_timeout_err"; echo 0 >"$p0/hw_counters/packet_seq_err"

TENT_HW_SMOKE_SYSFS="$fake" smoke --dry-run --out "$tmp/out" --build "$tmp/build"
expect_rc 0 "--dry-run with two devices"
expect_text "devices: mlx5_0 mlx5_1" "both devices found"
expect_text "mlx5_1's port is not ACTIVE" "a port that is down is reported"
expect_text "nothing was run" "the dry run says it ran nothing"
for step in "ensure-build.sh $tmp/build" fabric_verbs_hardware_test \
            "--config=$tmp/out/verbs-mlx5_0.yaml" "--config=$tmp/out/verbs-mlx5_1.yaml" \
            "--config=$tmp/out/verbs-all.yaml" "--check_consistency=true" \
            "run_burst_comparison.sh --build $tmp/build" "--capacity 37.5"; do
  expect_text "$step" "planned: $step"
done
# perftest beside tebench: each device to itself and across the two NICs.
for step in "ib_write_lat -d mlx5_0 -i 1" "-s 4096" "ib_write_bw -d mlx5_1 -i 1" "-s 4194304" \
            "ib_write_bw -d mlx5_0 -i 1 -p" "-x 3" "--start_block_size=4M" \
            "perftest mlx5_0->mlx5_0" "perftest mlx5_1->mlx5_1" "perftest mlx5_0->mlx5_1" \
            "read retransmit counters" "retransmits            SKIP  dry run (2 counters found)"; do
  expect_text "$step" "planned: $step"
done
for f in verbs-mlx5_0 verbs-mlx5_1 verbs-all; do
  if [ -f "$tmp/out/$f.yaml" ] && grep -q "provider: verbs" "$tmp/out/$f.yaml"; then
    pass "$f.yaml is a verbs config"
  else
    fail "$f.yaml missing or not provider verbs"
  fi
done
if grep -qF "devices: [mlx5_0, mlx5_1]" "$tmp/out/verbs-all.yaml"; then
  pass "verbs-all.yaml names both devices"
else
  fail "verbs-all.yaml: $(cat "$tmp/out/verbs-all.yaml")"
fi

TENT_HW_SMOKE_SYSFS="$fake" smoke --dry-run --out "$tmp/out2" --devices mlx5_1 --no-burst
expect_rc 0 "--devices picks one"
expect_text "devices: mlx5_1" "only the named device"
expect_text "burst                  SKIP" "--no-burst skips the comparison"

# Two hosts: the servers go through ssh to the peer, with configs it can be reached by.
TENT_HW_SMOKE_SYSFS="$fake" TENT_HW_SMOKE_SSH="echo ssh" smoke --dry-run --out "$tmp/out4" \
  --devices mlx5_0 --no-burst --peer 198.18.0.2 --peer-top /srv/tent
expect_rc 0 "--peer with --dry-run"
expect_text "two hosts: servers on 198.18.0.2" "the two-host mode says so"
expect_text "echo ssh 198.18.0.2 exec timeout 120 ib_write_bw -d mlx5_0" "perftest server on the peer"
expect_text "ib_write_bw -d mlx5_0 -i 1 -p 18602 -s 4194304 -n 2000 -F --report_gbits -x 3 198.18.0.2" \
  "perftest client here, to the peer"
expect_text "/srv/tent/" "the peer runs its own checkout's tebench"
if grep -qF 'advertise_host: "198.18.0.2"' "$tmp/out4/peer-verbs-mlx5_0.yaml"; then
  pass "the peer's config advertises the peer"
else
  fail "peer-verbs-mlx5_0.yaml: $(cat "$tmp/out4/peer-verbs-mlx5_0.yaml" 2>&1)"
fi
smoke --retransmit-limit lots
expect_rc 2 "--retransmit-limit that is not a count"

# Without a build the engine steps fail, but the retransmit counters are still read
# and compared (unchanged here: 0 events).
TENT_HW_SMOKE_SYSFS="$fake" smoke --no-build --out "$tmp/out5" --build "$tmp/nobuild" --devices mlx5_0
expect_rc 1 "no build: a failure"
expect_text "retransmits            PASS  0 events (limit 1000)" "counters compared after a failure"

TENT_HW_SMOKE_SYSFS="$fake" smoke --dry-run --out "$tmp/out3" --devices mlx5_9
expect_rc 2 "--devices naming a device that is not there"
expect_text "devices found: mlx5_0 mlx5_1" "the error lists what exists"

echo
if [ "$fails" -gt 0 ]; then
  echo "$fails check(s) failed"
  exit 1
fi
echo "all checks passed"
