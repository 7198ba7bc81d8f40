#!/bin/sh
# Same synth options -> same bytes; another seed -> other bytes.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

"$VMTRACE" synth -o "$TMP/a.data" --truth "$TMP/a.json" --per-cpu --vcpus 4 --cyc --size 1M --seed 42 2>/dev/null
"$VMTRACE" synth -o "$TMP/b.data" --truth "$TMP/b.json" --per-cpu --vcpus 4 --cyc --size 1M --seed 42 2>/dev/null
"$VMTRACE" synth -o "$TMP/c.data" --per-cpu --vcpus 4 --cyc --size 1M --seed 43 2>/dev/null
check "same seed: identical perf.data" cmp -s "$TMP/a.data" "$TMP/b.data"
check "same seed: identical ground truth" cmp -s "$TMP/a.json" "$TMP/b.json"
check "other seed: different perf.data" sh -c "! cmp -s '$TMP/a.data' '$TMP/c.data'"
size=$(stat -c %s "$TMP/a.data")
check "--size 1M gives about 1 MiB ($size bytes)" test "$size" -ge 1000000 -a "$size" -le 1200000
check "output is 0644-ish, not executable" sh -c "test ! -x '$TMP/a.data'"
finish
