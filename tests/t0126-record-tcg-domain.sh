#!/bin/sh
# vmtrace record --source tcg --domain NAME: a libvirt domain whose QEMU
# does not load vmtrace-tcg.so gets exactly what to add to its XML (the
# qemu namespace on <domain>, <qemu:commandline> with -plugin
# file=PLUGIN,out=DIR and the filter/skip/limit options given) and exit 25.
# libvirt's test driver (test:///default, domain 'test': no QEMU process).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_python
: "${VMTRACE_TCG_PLUGIN:?run through make check (VMTRACE_TCG_PLUGIN)}"

"$VMTRACE" record --source tcg --domain test --connect test:///default -o "$TMP/rec" >"$TMP/out" 2>"$TMP/err"
check "a domain without the plugin: exit 25, nothing on stdout, no output left" \
	sh -c "[ $? = 25 ] && test ! -s '$TMP/out' && test ! -e '$TMP/rec' && [ -z \"\$(find '$TMP' -maxdepth 1 -name '*rec*')\" ]"
check "says the domain was not started with the plugin and how to edit it" \
	grep -q "domain 'test' on test:///default was not started with vmtrace's TCG plugin.  Add to its XML (virsh -c test:///default edit test):" "$TMP/err"
check "the qemu XML namespace on <domain type='qemu'>" \
	grep -qx "  <domain type='qemu' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>" "$TMP/err"
sed -n '/<qemu:commandline>/,/<\/qemu:commandline>/p' "$TMP/err" >"$TMP/cmdline"
printf '%s\n' "    <qemu:commandline>" "      <qemu:arg value='-plugin'/>" \
	"      <qemu:arg value='file=$VMTRACE_TCG_PLUGIN,out=/var/lib/libvirt/qemu/vmtrace-test'/>" \
	"    </qemu:commandline>" >"$TMP/want"
check "<qemu:commandline>: -plugin file=THE PLUGIN,out=a directory QEMU's user may write" test_cmp "$TMP/want" "$TMP/cmdline"
check "then: restart the domain, run the command again (it waits for the shutdown)" \
	grep -q "then start it again (virsh -c test:///default shutdown test; virsh -c test:///default start test) and run this command again" "$TMP/err"
"$VMTRACE" record --source tcg --domain test --connect test:///default --kernel-only --tcg-skip 5 --tcg-limit 7 \
	-o "$TMP/rec" 2>"$TMP/err2"
check "--kernel-only, --tcg-skip, --tcg-limit go into the plugin's argument" \
	sh -c "[ $? = 25 ] && grep -qx \"      <qemu:arg value='file=$VMTRACE_TCG_PLUGIN,out=/var/lib/libvirt/qemu/vmtrace-test,filter=kernel,skip=5,limit=7'/>\" '$TMP/err2'"
"$VMTRACE" record --source tcg --domain test --connect test:///default --json -o "$TMP/rec" >"$TMP/j" 2>"$TMP/jerr"
check "--json: exit 25, nothing on stderr" sh -c "[ $? = 25 ] && test ! -s '$TMP/jerr'"
check "--json: the advice as a JSON error with exit_status 25" \
	json_check "$TMP/j" "j['exit_status'] == 25 and '<qemu:commandline>' in j['error']"
"$VMTRACE" record --source tcg --domain nosuch --connect test:///default -o "$TMP/rec" 2>"$TMP/err3"
check "an unknown domain: exit 1, names the domains" \
	sh -c "[ $? = 1 ] && grep -q \"no domain named 'nosuch' on test:///default (domains: test)\" '$TMP/err3'"
"$VMTRACE" record --source tcg --domain test --connect test:///default -o "$TMP/rec" -- qemu-system-x86_64 2>"$TMP/err4"
check "--domain and a QEMU command line: exit 2" test $? = 2
VMTRACE_TCG_PLUGIN=$TMP/missing.so "$VMTRACE" record --source tcg --domain test --connect test:///default -o "$TMP/rec" 2>"$TMP/err5"
check "the plugin missing: exit 26 before any advice" sh -c "[ $? = 26 ] && ! grep -q qemu:commandline '$TMP/err5'"
finish
