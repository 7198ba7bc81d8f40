#!/usr/bin/env python3
"""SHA-256 of all AUXTRACE payloads of a perf.data (file or DIR/data, pipe mode too), in file order."""
import hashlib, os, struct, sys
path = sys.argv[1]
if os.path.isdir(path):
    path = os.path.join(path, "data")
b = open(path, "rb").read()
if struct.unpack_from("<Q", b, 8)[0] == 16:      # pipe mode: records from byte 16 to the end
    data_off, data_size = 16, len(b) - 16
else:
    data_off, data_size = struct.unpack_from("<QQ", b, 40)
pos, end, h = data_off, data_off + data_size, hashlib.sha256()
while pos < end:
    typ, misc, size = struct.unpack_from("<IHH", b, pos)
    if typ == 71:
        n = struct.unpack_from("<Q", b, pos + 8)[0]
        h.update(b[pos + size:pos + size + n])
        pos += size + n
    else:
        pos += size
print(h.hexdigest())
