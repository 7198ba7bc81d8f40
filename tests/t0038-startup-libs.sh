#!/bin/sh
# Startup: libvirt (with its ~50 libraries, ~25 ms of every run's time,
# 10 of them system time) is loaded only by what looks up a domain, not
# by a dry run or --version; looking a domain up still works.  Likewise
# libssh (with libcrypto and Kerberos: ~2.5 ms, ~200 page faults) only by
# what connects over SSH.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/guest-lib.sh"

"$VMTRACE" synth -o "$TMP/t.data" --size 1M --vcpus 2 2>/dev/null
# the shared objects the dynamic loader opened for a run
loaded() { LD_DEBUG=files LD_DEBUG_OUTPUT="$TMP/ld" "$VMTRACE" "$@" >/dev/null 2>&1; cat "$TMP"/ld.* 2>/dev/null; rm -f "$TMP"/ld.*; }
loaded --version >"$TMP/ver"
check "--version does not load libvirt" sh -c "! grep -q 'file=libvirt' '$TMP/ver'"
loaded correlate --dry-run "$TMP/t.data" >"$TMP/dry"
check "a dry run does not load libvirt" sh -c "! grep -q 'file=libvirt' '$TMP/dry'"
check "...nor libgnutls or libxml2 (libvirt's)" sh -c "! grep -Eq 'file=lib(gnutls|xml2)' '$TMP/dry'"
# (the sanitizer build links libtirpc up front - configure.ac: ASan's xdr
# interceptors - and libtirpc needs Kerberos)
krb='|krb5|gssapi_krb5'
asan_build && krb=
check "...nor libssh or libcrypto${krb:+/Kerberos} (libssh's)" sh -c "! grep -Eq 'file=lib(ssh|crypto$krb)\.' '$TMP/dry'"
check "--version does not load libssh" sh -c "! grep -q 'file=libssh' '$TMP/ver'"
loaded check --domain test --connect test:///default >"$TMP/chk"
check "check --domain loads libvirt" grep -q 'file=libvirt.so' "$TMP/chk"
"$VMTRACE" check --domain test --connect test:///default >"$TMP/out" 2>&1
check "...and finds the test driver's domain" grep -q "domain 'test' running on test:///default" "$TMP/out"
# guest fetch --ssh to a port nobody listens on: libssh loaded, its error
need_python
port=$(free_port)
: >"$TMP/known_hosts"
LD_DEBUG=files LD_DEBUG_OUTPUT="$TMP/ld" "$VMTRACE" guest fetch --ssh "nobody@127.0.0.1:$port" \
	--known-hosts "$TMP/known_hosts" --batch --no-kcore -o "$TMP/cache" >/dev/null 2>"$TMP/err"
rc=$?
check "guest fetch --ssh loads libssh" sh -c "cat '$TMP'/ld.* | grep -q 'file=libssh.so'"
check "...and connects with it: exit 12, connection refused" \
	sh -c "test $rc -eq 12 && grep -qi 'port $port.*refused' '$TMP/err'"
finish
