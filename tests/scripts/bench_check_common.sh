# Sourced by the fusekit_bench checks in this folder (bench_*_check.sh BENCH_BINARY): the binary
# under test as $bench, a scratch folder $work removed on exit, and fail MESSAGE, which prints
# "FAIL: MESSAGE" and ends the check with exit code 1.
bench=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
