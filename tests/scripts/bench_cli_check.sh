#!/usr/bin/env bash
# fusekit_bench's command line on any machine (CPU timings): a value that cannot be used as given
# must be refused as bad usage (exit code 2) before anything runs, not read in part (atoi's "5x"),
# clamped, overflowed or dropped; and a GPU-only option on a CPU run must be noted as ignored.
#
#   tests/scripts/bench_cli_check.sh BENCH_BINARY
set -uo pipefail
# shellcheck source=bench_check_common.sh
source "$(dirname "$0")/bench_check_common.sh"  # $bench, $work, fail

usage_error() {  # message args...: exit 2 and the message on stderr
  local message=$1
  shift
  "$bench" "$@" > "$work/out.txt" 2> "$work/err.txt"
  local status=$?
  [ "$status" = 2 ] || fail "$*: exit $status, not 2 ($(tail -2 "$work/err.txt"))"
  grep -qF -- "$message" "$work/err.txt" || fail "$*: no '$message' in: $(head -2 "$work/err.txt")"
}

small=(--cpu --ops rms_norm --M 1 --N 8)
# --runs: a whole number of runs, no more than the timer keeps (gpu_timer.cu's kMaxRuns).
usage_error "bad or missing value for --runs" "${small[@]}" --runs 5x
usage_error "bad or missing value for --runs" "${small[@]}" --runs 99999999999
usage_error "bad or missing value for --runs" "${small[@]}" --runs 501
# An empty path would silently mean "no JSON" or "the default shapes file".
usage_error "bad or missing value for --json" "${small[@]}" --json ""
usage_error "bad or missing value for --shapes" "${small[@]}" --shapes ""
# Bytes per call past int64 (M x N x element size wrapping around) are bad usage, not a case with
# a wrapped byte count and a wrapped allocation.
printf '{"norm": {"ops": ["rms_norm"], "M": [1], "N": [8]},
         "act_and_mul": {"ops": ["silu_and_mul"], "M": [1], "N": [8]}}' > "$work/shapes.json"
usage_error "bytes" --cpu --shapes "$work/shapes.json" --ops rms_norm --M 4294967296 \
  --N 4294967296 --max-bytes 0
usage_error "bytes" --cpu --shapes "$work/shapes.json" --ops silu_and_mul --M 3037000500 \
  --N 3037000500 --max-bytes 0

# GPU-only options on a CPU run: noted as ignored, like --sweep and --size-copy.
"$bench" "${small[@]}" --runs 7 --flush write > "$work/out.txt" 2> "$work/err.txt" ||
  fail "--cpu --runs 7 --flush write: exit $?"
grep -q "note: --runs applies to GPU runs only; ignored" "$work/err.txt" ||
  fail "--cpu --runs: no note that the option is GPU-only"
grep -q "note: --flush applies to GPU runs only; ignored" "$work/err.txt" ||
  fail "--cpu --flush: no note that the option is GPU-only"
"$bench" "${small[@]}" --sweep-only blocks > "$work/out.txt" 2> "$work/err.txt" ||
  fail "--sweep-only alone: exit $?"
grep -q "note: --sweep-only applies with --sweep only; ignored" "$work/err.txt" ||
  fail "--sweep-only without --sweep: no note that it is ignored"
"$bench" "${small[@]}" --runs 500 > /dev/null 2>&1 || fail "--runs 500: exit $?"
echo "bench_cli_check: OK"
