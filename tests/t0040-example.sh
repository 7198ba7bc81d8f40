#!/bin/sh
# The bundled example is what `vmtrace synth` makes from its recorded
# options (so it can be regenerated), and correlating it finds the 4 vCPUs'
# offsets of its ground truth.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_python
ex="$top_srcdir/examples"
# shellcheck disable=SC2046
"$VMTRACE" synth -o "$TMP/ex.data" --truth "$TMP/ex.json" $(cat "$ex/kvm-4vcpu.args") 2>/dev/null
check "examples/kvm-4vcpu.data is reproducible from kvm-4vcpu.args" cmp -s "$TMP/ex.data" "$ex/kvm-4vcpu.data"
check "examples/kvm-4vcpu.json is its ground truth" cmp -s "$TMP/ex.json" "$ex/kvm-4vcpu.json"
"$VMTRACE" correlate --dry-run --json "$ex/kvm-4vcpu.data" >"$TMP/out.json"
check "correlating the example exits 0" test $? -eq 0
check "every vCPU's offset matches the ground truth" "$PYTHON3" - "$ex/kvm-4vcpu.json" "$TMP/out.json" <<'PY'
import json, sys
truth, got = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
want = {int(v["vmcs"], 16): (int(v["tsc_offset56"], 16), v["vcpu"], v["tid"]) for v in truth["vcpus"]}
have = {int(v["vmcs"], 16): (int(v["tsc_offset"], 16), v["vcpu"], v["tid"]) for v in got["vmcs"]}
assert len(want) == 4 and have == want, (have, want)
assert all(v["status"] == "ok" and v["spread"] == 0 for v in got["vmcs"])
PY
finish
