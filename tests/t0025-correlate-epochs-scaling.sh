#!/bin/sh
# Beyond perf: a TSC offset that changes during the recording (epochs) and
# VMX TSC scaling.  After correction every guest TSC packet equals the host
# TSC synth recorded: the digest of all AUX data equals the ground truth's
# corrected_aux_sha256.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_python
digest() { "$PYTHON3" "$top_srcdir/tests/aux-digest.py" "$1"; }
truth() { "$PYTHON3" -c 'import json,sys; print(json.load(open(sys.argv[1]))["corrected_aux_sha256"])' "$1"; }

for mode in "" "--per-cpu --cpus 2"; do
	tag=${mode:+per-cpu}; tag=${tag:-per-thread}
	# shellcheck disable=SC2086
	"$VMTRACE" synth -o "$TMP/ch.data" --truth "$TMP/ch.json" --size 4M --vcpus 4 --psb-period 1 $mode \
		--offset 0xfffffe0000000000 --offset-change 0:0xffffff0123456789@0.5 2>/dev/null
	"$VMTRACE" correlate --dry-run --json "$TMP/ch.data" >"$TMP/ch.dry"
	check "$tag offset change: dry run exit 0" test $? -eq 0
	check "$tag offset change: each VMCS has two epochs with the true offsets" "$PYTHON3" - "$TMP/ch.dry" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for v in d["vmcs"]:
    assert v["status"] == "changes", v
    offs = [e["tsc_offset"] for e in v["epochs"]]
    assert offs == ["0xfffffe0000000000", "0xffffff0123456789"], offs
    assert int(v["epochs"][0]["last_tsc"], 16) < int(v["epochs"][1]["first_tsc"], 16)
PY
	rm -f "$TMP/ch.corr" "$TMP/ch.single" "$TMP/sc.corr"    # -o writes a new file
	"$VMTRACE" correlate "$TMP/ch.data" -o "$TMP/ch.corr" >/dev/null
	check "$tag offset change: every guest TSC corrected to its host TSC" test "$(digest "$TMP/ch.corr")" = "$(truth "$TMP/ch.json")"
	"$VMTRACE" correlate --vm-time-correlation=0xfffffe0000000000 "$TMP/ch.data" -o "$TMP/ch.single" >/dev/null
	check "$tag offset change: one offset (perf's way) is wrong after the change" test "$(digest "$TMP/ch.single")" != "$(truth "$TMP/ch.json")"
	check "$tag offset change: a dry run on the result finds no offsets" sh -c '"$VMTRACE" correlate --dry-run "$TMP/ch.corr" | grep -c "no-offset$" | grep -qx 4'

	# scaling on VM 0 (ratio 1.25, frac 48), VM 1 unscaled
	# shellcheck disable=SC2086
	"$VMTRACE" synth -o "$TMP/sc.data" --truth "$TMP/sc.json" --size 4M --vms 2 --vcpus 4 $mode \
		--offset 0xffffff0000000000:0 --offset 0xfffffff000000000:1 --tsc-scale 0x1400000000000/48:0 2>/dev/null
	vm0=$("$PYTHON3" -c 'import json,sys; print(",".join(v["vmcs"] for v in json.load(open(sys.argv[1]))["vcpus"] if v["vm"] == 0))' "$TMP/sc.json")
	"$VMTRACE" correlate --dry-run "$TMP/sc.data" >/dev/null 2>&1
	check "$tag scaling: without --tsc-scale the scaled VMCS are inconsistent (exit 5)" test $? -eq 5
	"$VMTRACE" correlate --dry-run --json --tsc-scale "0x1400000000000/48:$vm0" "$TMP/sc.data" >"$TMP/sc.dry"
	check "$tag scaling: with --tsc-scale every VMCS is ok with its true offset" "$PYTHON3" - "$TMP/sc.dry" "$TMP/sc.json" <<'PY'
import json, sys
d, t = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
want = {v["vmcs"]: v["tsc_offset56"] for v in t["vcpus"]}
assert {v["vmcs"]: v["tsc_offset"] for v in d["vmcs"]} == want, d["vmcs"]
assert all(v["status"] == "ok" for v in d["vmcs"])
PY
	"$VMTRACE" correlate --tsc-scale "0x1400000000000/48:$vm0" "$TMP/sc.data" -o "$TMP/sc.corr" >/dev/null
	check "$tag scaling: every guest TSC corrected to its host TSC (exact inverse)" test "$(digest "$TMP/sc.corr")" = "$(truth "$TMP/sc.json")"
done
# A change late in the recording: some VMCS see their new offset in one
# guest TSC packet only (at 0.99, anchored at a host TSC; at 0.98, measured
# from a translated guest TSC that contradicts the old offset).  Such an
# epoch is believed - the last epoch may be cut short - and the correction
# is exactly right.
for at in 0.98 0.99; do
	"$VMTRACE" synth -o "$TMP/late.data" --truth "$TMP/late.json" --size 16M --vcpus 4 \
		--offset-change 0:0xfffffff000000000@$at 2>/dev/null
	"$VMTRACE" correlate --dry-run "$TMP/late.data" >"$TMP/late.dry" 2>&1
	check "change at $at of 16 MiB: dry run exit 0" test $? -eq 0
	check "change at $at of 16 MiB: an epoch of one estimate, said so" grep -q ", 1 estimate, spread 0" "$TMP/late.dry"
	rm -f "$TMP/late.corr"
	"$VMTRACE" correlate "$TMP/late.data" -o "$TMP/late.corr" >/dev/null 2>&1
	check "change at $at of 16 MiB: every guest TSC corrected to its host TSC" test "$(digest "$TMP/late.corr")" = "$(truth "$TMP/late.json")"
done
check "--tsc-scale 0: exit 2" sh -c '"$VMTRACE" correlate --dry-run --tsc-scale 0 "$TMP/sc.data" 2>/dev/null; test $? -eq 2'
check "--tsc-scale 5/64: exit 2" sh -c '"$VMTRACE" correlate --dry-run --tsc-scale 5/64 "$TMP/sc.data" 2>/dev/null; test $? -eq 2'
finish
