#!/usr/bin/env python3
# aux-corrupt.py FILE: overwrite 32 bytes at each eighth of every
# PERF_RECORD_AUXTRACE payload of perf.data FILE with random bytes (seed 5),
# in place - corrupt AUX data for the decoder's error and resync tests.
import random, struct, sys
d = bytearray(open(sys.argv[1], 'rb').read())
off, size = struct.unpack_from('<QQ', d, 40)
pos, rng = off, random.Random(5)
while pos < off + size:
    typ, misc, sz = struct.unpack_from('<IHH', d, pos)
    if typ == 71:
        n = struct.unpack_from('<Q', d, pos + 8)[0]
        for k in range(1, 8):
            at = pos + sz + k * n // 8
            d[at:at + 32] = bytes(rng.randrange(256) for _ in range(32))
        pos += sz + n
    else:
        pos += sz
open(sys.argv[1], 'wb').write(d)
