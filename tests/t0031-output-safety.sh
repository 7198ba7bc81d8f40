#!/bin/sh
# What may stand where an output goes (issue #11): correlate -o, synth -o
# and synth --truth create a new file or replace a regular one (correlate:
# only with --force), never a device, FIFO, symbolic link or directory; a
# correction never writes into its own input directory; FIFOs among the
# inputs are refused at once instead of hanging; the in-place journal's
# temporary file is created exclusively (a planted symbolic link is not
# followed).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
cd "$TMP" || exit 1
export SOURCE_DATE_EPOCH=1700000000

rc() { "$@" >"$TMP/out" 2>"$TMP/err"; echo $?; }

"$VMTRACE" synth -o a.data --size 256K --seed 3 2>/dev/null
cp a.data a.orig
echo precious >target.txt

# --- correlate -o
mkfifo fifo.out
check "correlate -o FIFO: refused (exit 1)" test "$(rc timeout 20 "$VMTRACE" correlate a.data -o fifo.out)" = 1
check "  ... says it is a FIFO; it stays a FIFO, nothing left beside it" \
	sh -c "grep -q 'fifo.out: is a FIFO' err && test -p fifo.out && ! ls -A | grep -q '^\.fifo\.out\.'"
ln -s target.txt link.out
check "correlate -o SYMLINK: refused (exit 1)" test "$(rc "$VMTRACE" correlate a.data -o link.out)" = 1
check "  ... the link and its target are unchanged" sh -c "test -L link.out && test \"\$(cat target.txt)\" = precious"
ln -s nowhere dangling.out
check "correlate -o dangling SYMLINK: refused, nothing created through it" \
	sh -c "[ $(rc "$VMTRACE" correlate a.data -o dangling.out) = 1 ] && test -L dangling.out && test ! -e nowhere"
mkdir dir.out
check "correlate FILE -o DIR: refused (exit 1), the directory untouched" \
	sh -c "[ $(rc "$VMTRACE" correlate a.data -o dir.out) = 1 ] && test -z \"\$(ls -A dir.out)\""
echo keep >exists.out
check "correlate -o an existing file: refused without --force (exit 1)" test "$(rc "$VMTRACE" correlate a.data -o exists.out)" = 1
check "  ... says so and leaves it as it was" sh -c "grep -q 'exists.out: already exists' err && test \"\$(cat exists.out)\" = keep"
check "correlate -o an existing file --force: replaced (exit 0)" test "$(rc "$VMTRACE" correlate a.data -o exists.out --force)" = 0
check "  ... with the corrected trace" sh -c "test -s exists.out && ! cmp -s exists.out a.data && cmp -s a.data a.orig"
check "no temporaries left beside the outputs" sh -c "! ls -A | grep -q 'vmtrace-tmp'"

# /dev/null in a private mount namespace (root only): it must stay a device
if [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then
	unshare -m sh -c "mount -t tmpfs none /dev && mknod -m666 /dev/null c 1 3 &&
		'$VMTRACE' correlate a.data -o /dev/null; echo \$? >ns.rc; stat -c %F /dev/null >ns.kind;
		'$VMTRACE' synth -o /dev/null --size 64K; echo \$? >>ns.rc; stat -c %F /dev/null >>ns.kind;
		'$VMTRACE' synth -o ns.data --truth /dev/null --size 64K; echo \$? >>ns.rc; stat -c %F /dev/null >>ns.kind;
		ls -A /dev >ns.ls" 2>ns.err
	check "-o /dev/null (correlate, synth) and --truth /dev/null: refused (exit 1 1 1)" test "$(echo $(cat ns.rc))" = "1 1 1"
	check "  ... /dev/null stays a character device" test "$(sort -u ns.kind)" = "character special file"
	check "  ... and no temporary is left in /dev" test "$(cat ns.ls)" = null
	check "  ... nor a half recording for the refused truth" test ! -e ns.data
fi

# --- synth -o and --truth
check "synth -o FIFO: refused (exit 1), still a FIFO" \
	sh -c "[ $(rc timeout 20 "$VMTRACE" synth -o fifo.out --size 64K) = 1 ] && test -p fifo.out && grep -q 'is a FIFO' err"
check "synth -o SYMLINK: refused (exit 1), target unchanged" \
	sh -c "[ $(rc "$VMTRACE" synth -o link.out --size 64K) = 1 ] && test -L link.out && test \"\$(cat target.txt)\" = precious"
check "synth --truth SYMLINK: refused (exit 1), target unchanged, no recording" \
	sh -c "[ $(rc "$VMTRACE" synth -o t.data --truth link.out --size 64K) = 1 ] && test -L link.out && test \"\$(cat target.txt)\" = precious && test ! -e t.data"
check "synth --truth FIFO: refused (exit 1)" \
	sh -c "[ $(rc timeout 20 "$VMTRACE" synth -o t.data --truth fifo.out --size 64K) = 1 ] && test -p fifo.out && test ! -e t.data"
echo old >s.data
check "synth -o an existing regular file: replaced (exit 0)" \
	sh -c "[ $(rc "$VMTRACE" synth -o s.data --truth s.json --size 64K) = 0 ] && test -s s.json && head -c 8 s.data | grep -q PERFILE2"
mkdir notrec && echo mine >notrec/file
check "synth --dir into a directory that is not a recording: refused, untouched" \
	sh -c "[ $(rc "$VMTRACE" synth -o notrec --dir --size 64K) = 1 ] && test \"\$(ls -A notrec)\" = file"
ln -s notrec linkdir
check "synth --dir through a symbolic link: refused" \
	sh -c "[ $(rc "$VMTRACE" synth -o linkdir --dir --size 64K) = 1 ] && test \"\$(ls -A notrec)\" = file"
"$VMTRACE" synth -o rec.d --dir --size 64K --seed 1 2>/dev/null
check "synth --dir over a recording: rewritten (exit 0)" \
	sh -c "[ $(rc "$VMTRACE" synth -o rec.d --dir --size 64K --seed 2) = 0 ] && test \"\$(ls -A rec.d)\" = data"

# --- a correction never goes into its own input
"$VMTRACE" synth -o in.d --dir --size 256K 2>/dev/null
check "correlate DIR -o DIR/sub: refused (exit 2) at once" test "$(rc timeout 20 "$VMTRACE" correlate in.d -o in.d/sub)" = 2
check "  ... says why, and nothing was written into DIR" sh -c "grep -q 'inside the input' err && test \"\$(ls -A in.d)\" = data"
mkdir -p outer && "$VMTRACE" synth -o outer/in2.d --dir --size 256K 2>/dev/null
check "correlate OUT/DIR -o OUT (the input inside the output): refused (exit 2)" \
	sh -c "[ $(rc "$VMTRACE" correlate outer/in2.d -o outer) = 2 ] && grep -q 'inside the output' err"

# --- FIFOs among the inputs: an error at once, not a hang
mkdir dd && cp a.data dd/data && mkfifo dd/fifo
check "correlate DIR -o with a FIFO in DIR: exit 1 within 20 s" test "$(rc timeout 20 "$VMTRACE" correlate dd -o dd.out)" = 1
check "  ... names the FIFO; no output, no temporary" sh -c "grep -q 'dd/fifo.*FIFO' err && test ! -e dd.out && ! ls -A | grep -q '^\.dd\.out\.'"
mkfifo in.fifo
check "correlate FIFO --dry-run: refused (exit 3) within 20 s" test "$(rc timeout 20 "$VMTRACE" correlate --dry-run in.fifo)" = 3
check "correlate FIFO -o: refused within 20 s" sh -c "r=$(rc timeout 20 "$VMTRACE" correlate in.fifo -o f.out); [ \$r != 124 ] && [ \$r != 0 ] && test ! -e f.out"
mkdir fd && mkfifo fd/data
check "correlate DIR whose data is a FIFO: refused (exit 3) within 20 s" test "$(rc timeout 20 "$VMTRACE" correlate --dry-run fd)" = 3
check "correlate DIR whose data is a FIFO, --in-place: refused within 20 s" \
	sh -c "r=$(rc timeout 20 "$VMTRACE" correlate --in-place fd); [ \$r != 124 ] && [ \$r != 0 ]"
mkdir md && cp a.data md/data && mkfifo md/vmtrace-kvm.ini
check "correlate DIR whose vmtrace-kvm.ini is a FIFO: refused (exit 3) within 20 s" \
	sh -c "[ $(rc timeout 20 "$VMTRACE" correlate --dry-run md) = 3 ] && grep -q 'vmtrace-kvm.ini.*FIFO' err"

# --- the in-place journal's temporary file: never through a planted link
cp a.orig j.data
ln -s target.txt j.data.vmtrace-journal.tmp
check "correlate --in-place with a symlink planted at the old journal temp name: exit 0" \
	test "$(rc "$VMTRACE" correlate --in-place j.data)" = 0
check "  ... the symlink's target is unchanged" test "$(cat target.txt)" = precious
check "  ... the file was corrected, no journal or temporary left" \
	sh -c "cmp -s j.data exists.out && test ! -e j.data.vmtrace-journal && ! ls -A | grep -q '^\.j\.data'"
finish
