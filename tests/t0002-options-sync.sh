#!/bin/sh
# Every command's options are the same in --help, its man page and the bash
# completion; every command in `vmtrace --help` has a man page and a
# completion entry.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_python

cmds=$("$VMTRACE" --help | sed -n 's/^  \([a-z][a-z]*\)  .*/\1/p')
check "vmtrace --help lists commands" test -n "$cmds"
for c in $cmds; do
	check "$c has a man page" test -f "$top_srcdir/doc/vmtrace-$c.1"
	check "$c is completed" grep -q "^	$c)" "$top_srcdir/scripts/completion/vmtrace"
	check "$c is in the completion's command list" grep -q "compgen -W \"[^\"]*\\<$c\\>" "$top_srcdir/scripts/completion/vmtrace"
done
subs=$("$VMTRACE" guest --help | sed -n 's/^  \([a-z][a-z]*\)  .*/\1/p' | tr '\n' ' ')
check "guest subcommands (fetch check) are completed" test "$subs" = "fetch check "
check "--help, man page and completion list the same options for every command" \
	"$PYTHON3" "$top_srcdir/tests/options-sync.py" "$VMTRACE" "$top_srcdir" $cmds

# Every environment variable the sources read is in vmtrace(1)'s ENVIRONMENT.
envs=$(cd "$top_srcdir" && grep -rhoE 'getenv\("[A-Z_]+"\)' src vmcorr guestfs | sed 's/.*("\(.*\)")/\1/' | sort -u)
check "the sources read environment variables (grep works)" test -n "$envs"
for v in $envs; do
	check "vmtrace(1) documents \$$v" sh -c "sed -n '/^\.SH ENVIRONMENT/,/^\.SH FILES/p' '$top_srcdir/doc/vmtrace.1' | sed -n 's/^\.B //p' | sed 's/\\\\f[BRI]/ /g' | grep -qw '$v'"
done

# Every exit code of src/cli/cli.h is in vmtrace(1)'s EXIT STATUS.
codes=$(sed -n 's/^[[:space:]]*VT_EXIT_[A-Z_]* = \([0-9]*\),.*/\1/p' "$top_srcdir/src/cli/cli.h")
check "cli.h defines exit codes (sed works)" test "$(echo "$codes" | wc -l)" -gt 20
documented=$(sed -n '/^\.SH EXIT STATUS/,/^\.SH ENVIRONMENT/p' "$top_srcdir/doc/vmtrace.1" | sed -n 's/^\.B \([0-9][0-9]*\)$/\1/p')
for n in $codes; do
	check "vmtrace(1) documents exit code $n" sh -c "echo '$documented' | grep -qx '$n'"
done

# The checker itself notices a difference.
mkdir -p "$TMP/top/doc" "$TMP/top/scripts/completion"
cp "$top_srcdir"/doc/*.1 "$TMP/top/doc/"
sed 's/ --cyc / /' "$top_srcdir/scripts/completion/vmtrace" >"$TMP/top/scripts/completion/vmtrace"
"$PYTHON3" "$top_srcdir/tests/options-sync.py" "$VMTRACE" "$TMP/top" synth >"$TMP/out"
check "a missing completion word is found" grep -q "synth: --cyc is in --help but not in the completion" "$TMP/out"
finish
