#!/usr/bin/env bash
# Checks scripts/test_shards.sh on any machine, GPU or not, with the test binary and stand-ins
# for it: the script must pass when the shards together run every listed test, and fail, naming
# the shard, when one fails, dies, or exits cleanly having run none of its tests, and when the
# shards run more tests than the binary lists (a binary that ignores the sharding).
#
#   tests/scripts/test_shards_check.sh TEST_BINARY
set -uo pipefail
binary=$1
script="$(cd "$(dirname "$0")/../.." && pwd)/scripts/test_shards.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/bin"
filter=--gtest_filter='NormConfig.*'
failures=0
expect() {  # WANT(pass|fail) NAME PATTERN BINARY: PATTERN must appear in the script's output
  local want=$1 name=$2 pattern=$3 bin=$4 rc
  "$script" 3 "$bin" "$work/$name" "$filter" > "$work/$name.out" 2>&1
  rc=$?
  if { [ "$want" = pass ] && [ $rc -ne 0 ]; } || { [ "$want" = fail ] && [ $rc -eq 0 ]; } ||
     ! grep -q -- "$pattern" "$work/$name.out"; then
    echo "FAILED: $name (rc=$rc, wanted $want and \"$pattern\"):"
    sed 's/^/  | /' "$work/$name.out"
    failures=$((failures + 1))
  else
    echo "ok: $name"
  fi
}
# A stand-in that runs the binary but misbehaves in shard 1 as MODE says.
stand_in() {  # NAME MODE
  cat > "$work/bin/$1" <<STANDIN
#!/usr/bin/env bash
if [ "\${GTEST_SHARD_INDEX:-}" = 1 ]; then
  case $2 in
    fail) "$binary" "\$@"; exit 1 ;;
    die) kill -9 \$\$ ;;
    nothing) exit 0 ;;
    unsharded) unset GTEST_TOTAL_SHARDS GTEST_SHARD_INDEX; exec "$binary" "\$@" ;;
  esac
fi
exec "$binary" "\$@"
STANDIN
  chmod +x "$work/bin/$1"
}
listed=$("$binary" "$filter" --gtest_list_tests | grep -c '^  ')
expect pass clean "$listed of $listed tests ran in 3 shards" "$binary"
for mode in fail die nothing unsharded; do
  stand_in "$mode" "$mode"
done
expect fail fail "shard 1 exited with 1" "$work/bin/fail"
expect fail die "shard 1 exited with 137" "$work/bin/die"
expect fail nothing "the shards ran" "$work/bin/nothing"
expect fail unsharded "the shards ran" "$work/bin/unsharded"
[ $failures -eq 0 ] && echo "scripts/test_shards.sh: all checks passed"
exit $((failures > 0))
