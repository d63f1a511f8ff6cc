#!/usr/bin/env bash
# fusekit_bench --json on the CPU (any machine): the file must be strict JSON in UTF-8 (no NaN or
# Infinity tokens) even when a string it records is not UTF-8, such as a shapes file's path in
# another encoding; such bytes are written as U+FFFD.
#
#   tests/scripts/bench_json_check.sh BENCH_BINARY
set -uo pipefail
# shellcheck source=bench_check_common.sh
source "$(dirname "$0")/bench_check_common.sh"  # $bench, $work, fail

dir="$work/shapes-"$'\xff\xe9'"-é"
mkdir -p "$dir"
printf '{"norm": {"ops": ["rms_norm"], "M": [1, 3], "N": [8]}}' > "$dir/shapes.json"
"$bench" --cpu --ops rms_norm --shapes "$dir/shapes.json" --json "$work/out.json" > /dev/null \
  2> "$work/err.txt" || fail "exit $? ($(tail -2 "$work/err.txt"))"
python3 - "$work/out.json" <<'PY' || fail "the JSON is not strict UTF-8 JSON"
import json, sys
def no_constant(name):
    raise ValueError(f"bare {name} token")
with open(sys.argv[1], encoding="utf-8") as f:  # strict: raises on bytes that are not UTF-8
    doc = json.load(f, parse_constant=no_constant)
assert doc["env"]["shapes"].endswith("shapes-\ufffd\ufffd-\u00e9/shapes.json"), doc["env"]["shapes"]
assert len(doc["rows"]) == 2, doc["rows"]
PY
echo "bench_json_check: OK"
