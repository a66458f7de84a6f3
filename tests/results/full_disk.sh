#!/usr/bin/env bash
# A run whose --out fills up mid-run (a 48 KiB tmpfs): fabench exits non-zero with an error
# naming the file and the cause, and every row already written is whole and parses, the
# same rows in CSV and JSONL. Needs root for mount; skips (77) without it.
set -euo pipefail
bin=${FABENCH_BIN:?FABENCH_BIN not set}
[ "$(id -u)" -eq 0 ] || { echo "SKIP: mounting a tmpfs needs root"; exit 77; }
m=$(mktemp -d /tmp/fabench-full-XXXXXX)
cleanup() { umount "$m" 2>/dev/null || true; rmdir "$m" 2>/dev/null || true; rm -f "$m.err"; }
trap cleanup EXIT
mount -t tmpfs -o size=48k tmpfs "$m" || { echo "SKIP: cannot mount a tmpfs"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
set +e
timeout 120 "$bin" allreduce -n 2 --transport tcp --algo ring,rd,rhd,tree --max-bytes 64K \
  --iters 3 --warmup 1 --timeout 10 --out "$m/run" >/dev/null 2>"$m.err"
rc=$?
set -e
cat "$m.err"
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || { echo "FAIL: exit status $rc (want an error, not success or a hang)"; exit 1; }
grep -q "cannot write '$m/run/allreduce\.\(csv\|jsonl\)': No space left on device" "$m.err" ||
  { echo "FAIL: no error naming the table and the full disk"; exit 1; }
python3 - "$m/run" <<'PY'
import csv, json, sys
d = sys.argv[1]
raw = open(d + "/allreduce.csv", newline="").read()
assert raw.endswith("\n"), "CSV ends in a partial line"
rows = list(csv.DictReader(raw.splitlines()))
jl = open(d + "/allreduce.jsonl").read()
assert jl.endswith("\n"), "JSONL ends in a partial line"
objs = [json.loads(l) for l in jl.splitlines()]
assert len(rows) > 0, "no row was written before the disk filled"
assert len(rows) == len(objs), f"CSV has {len(rows)} rows, JSONL {len(objs)}"
for r, o in zip(rows, objs):
    assert r["bytes"] == str(o["bytes"]) and r["algo"] == o["algo"] and r["errors"] == "0", (r, o)
    assert int(r["schema"]) == o["schema"] >= 1
print(f"ok: {len(rows)} whole rows in CSV and JSONL before the disk filled")
PY
