#!/bin/sh
# Bad input never crashes or hangs: every damaged file gives a one-line error
# naming the file, and a non-zero exit below 128 (no signal).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
need_python

"$VMTRACE" synth -o "$TMP/good.data" --per-cpu --vcpus 4 --size 512K --buffer-size 32K 2>/dev/null
good="$TMP/good.data"
size=$(stat -c %s "$good")

# verdict FILE WHAT: run correlate, expect exit 3, one stderr line naming FILE
verdict() {
	timeout 60 "$VMTRACE" correlate --dry-run "$1" >/dev/null 2>"$TMP/err"
	rc=$?
	lines=$(wc -l <"$TMP/err")
	if [ $rc -ne 0 ] && [ $rc -lt 124 ] && [ "$lines" = 1 ] && grep -q "$(basename "$1")" "$TMP/err"; then
		ok "$2: exit $rc, $(cut -c1-110 "$TMP/err")"
	else
		fail "$2: exit $rc, $lines stderr lines: $(head -3 "$TMP/err")"
	fi
}

i=0
while [ $i -lt 64 ]; do
	cut=$((size * i / 64))
	head -c "$cut" "$good" >"$TMP/trunc$i.data"
	verdict "$TMP/trunc$i.data" "truncated at $i/64 ($cut bytes)"
	i=$((i + 1))
done

patch() { # patch.py OP FILE
	"$PYTHON3" - "$@" <<'PY'
import struct, sys, random
op, path = sys.argv[1], sys.argv[2]
b = bytearray(open(path, 'rb').read())
attrs_off, = struct.unpack_from('<Q', b, 24)
data_off, data_size = struct.unpack_from('<QQ', b, 40)
def records():
    pos = data_off
    while pos < data_off + data_size:
        typ, misc, size = struct.unpack_from('<IHH', b, pos)
        yield pos, typ, size
        if typ == 71:
            pos += size + struct.unpack_from('<Q', b, pos + 8)[0]
        else:
            pos += size
if op == 'magic':
    b[0:8] = b'PERFILE9'
elif op == 'attr-size':
    struct.pack_into('<I', b, attrs_off + 4, 200)
elif op == 'attr-size-small':
    struct.pack_into('<I', b, attrs_off + 4, 8)
elif op == 'header-attr-size':
    struct.pack_into('<Q', b, 16, 4096)
elif op == 'aux-past-eof':
    pos = [p for p, t, s in records() if t == 71][-1]
    struct.pack_into('<Q', b, pos + 8, 1 << 40)
elif op == 'record-size-zero':
    pos = [p for p, t, s in records() if t == 71][2]
    struct.pack_into('<H', b, pos + 6, 0)
elif op == 'data-past-eof':
    struct.pack_into('<Q', b, 48, data_size + (1 << 30))
elif op.startswith('info:'):          # info:WORD:VALUE - an AUXTRACE_INFO word
    w, v = op.split(':')[1:]
    pos = [p for p, t, s in records() if t == 70][0]
    struct.pack_into('<Q', b, pos + 16 + 8 * int(w), int(v, 0))
elif op == 'time-conv-shift':
    pos = [p for p, t, s in records() if t == 79][0]
    struct.pack_into('<Q', b, pos + 8, 64)
elif op.startswith('short:'):         # short:TYPE - the first TYPE record is cut to its header
    pos = [p for p, t, s in records() if t == int(op.split(':')[1])][0]
    struct.pack_into('<H', b, pos + 6, 8)
elif op.startswith('random-aux'):
    rnd = random.Random(int(op.split(':')[1]))
    for p, t, s in records():
        if t == 71:
            n, = struct.unpack_from('<Q', b, p + 8)
            start = p + s + rnd.randrange(0, max(1, n // 2))
            for k in range(start, min(start + 4096, p + s + n)):
                b[k] = rnd.randrange(256)
open(path, 'wb').write(b)
PY
}
for op in magic attr-size attr-size-small header-attr-size aux-past-eof record-size-zero data-past-eof \
	  random-aux:1 random-aux:2 random-aux:3; do
	cp "$good" "$TMP/bad.data"
	patch "$op" "$TMP/bad.data"
	verdict "$TMP/bad.data" "$op"
done
# AUXTRACE_INFO words no hardware gives: refused, never "ok" with garbage
# (words: 5 TSC bit, 10 MTC bit, 11 MTC frequency bits, 12/13 TSC:CTC, 1 time
# shift, 15 non-turbo ratio); records cut short name the file too
for op in info:11:0xffffffffffffffff info:11:0x2c000 info:12:0x8000000000000000 info:13:0 info:12:1 \
	  info:12:0x100000000 info:5:0x600 info:10:0xffffffffffffffff info:1:64 info:15:256 time-conv-shift \
	  short:70 short:79 short:71; do
	cp "$good" "$TMP/bad.data"
	patch "$op" "$TMP/bad.data"
	verdict "$TMP/bad.data" "$op"
done
head -c 100000 /dev/urandom >"$TMP/noise.data"
verdict "$TMP/noise.data" "random bytes"
: >"$TMP/empty.data"
verdict "$TMP/empty.data" "empty file"
mkdir -p "$TMP/emptydir"
verdict "$TMP/emptydir" "directory without data"
finish
