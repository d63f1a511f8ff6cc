#!/usr/bin/env bash
# Runs a GoogleTest binary in SHARDS processes at once (GoogleTest's own sharding:
# GTEST_TOTAL_SHARDS / GTEST_SHARD_INDEX), each shard's log in DIR/shard-K.log, and fails unless
# every shard exits cleanly and the shards together ran every test the binary lists for the same
# arguments (a shard that died part way, or ran nothing, fails the run too). The C++ suite in one
# process runs its CPU cases one after another beside the GPU's; in 12 shards on an H100 its 539
# tests took 191 s (2026-12-07), against over ten minutes in one.
#
#   scripts/test_shards.sh SHARDS BINARY DIR [gtest arguments...]
set -uo pipefail
if [ $# -lt 3 ] || ! [[ $1 =~ ^[1-9][0-9]*$ ]]; then
  sed -n '2,9p' "$0"
  exit 2
fi
shards=$1 binary=$2 dir=$3
shift 3
mkdir -p "$dir" || exit 2
rm -f "$dir"/shard-*.log
listed=$("$binary" "$@" --gtest_list_tests | grep -c '^  ') || {
  echo "$binary lists no tests for: $*"
  exit 1
}
pids=()
for ((k = 0; k < shards; k++)); do
  GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$k "$binary" "$@" --gtest_brief=1 \
    > "$dir/shard-$k.log" 2>&1 &
  pids+=($!)
done
status=0
for k in "${!pids[@]}"; do
  wait "${pids[$k]}"
  rc=$?
  if [ $rc -ne 0 ]; then
    echo "shard $k exited with $rc: $dir/shard-$k.log"
    status=1
  fi
done
grep -h -E '^\[  (FAILED|PASSED|SKIPPED) ' "$dir"/shard-*.log | sort | uniq -c
ran=$(awk '/^\[==========\] [0-9]+ tests? from .* ran/ { n += $2 } END { print n + 0 }' \
  "$dir"/shard-*.log)
echo "$ran of $listed tests ran in $shards shards"
if [ "$ran" -ne "$listed" ]; then
  echo "the shards ran $ran tests, the binary lists $listed"
  status=1
fi
exit $status
