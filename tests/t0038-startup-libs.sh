#!/bin/sh
# Startup: libvirt (with its ~50 libraries, ~25 ms of every run's time,
# 10 of them system time) is loaded only by what looks up a domain, not
# by a dry run or --version; looking a domain up still works.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

"$VMTRACE" synth -o "$TMP/t.data" --size 1M --vcpus 2 2>/dev/null
# the shared objects the dynamic loader opened for a run
loaded() { LD_DEBUG=files LD_DEBUG_OUTPUT="$TMP/ld" "$VMTRACE" "$@" >/dev/null 2>&1; cat "$TMP"/ld.* 2>/dev/null; rm -f "$TMP"/ld.*; }
loaded --version >"$TMP/ver"
check "--version does not load libvirt" sh -c "! grep -q 'file=libvirt' '$TMP/ver'"
loaded correlate --dry-run "$TMP/t.data" >"$TMP/dry"
check "a dry run does not load libvirt" sh -c "! grep -q 'file=libvirt' '$TMP/dry'"
check "...nor libgnutls or libxml2 (libvirt's)" sh -c "! grep -Eq 'file=lib(gnutls|xml2)' '$TMP/dry'"
loaded check --domain test --connect test:///default >"$TMP/chk"
check "check --domain loads libvirt" grep -q 'file=libvirt.so' "$TMP/chk"
"$VMTRACE" check --domain test --connect test:///default >"$TMP/out" 2>&1
check "...and finds the test driver's domain" grep -q "domain 'test' running on test:///default" "$TMP/out"
finish
