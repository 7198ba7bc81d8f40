/* hex.h - lowercase hex digits of 64-bit numbers written straight into
 * memory, 8 digits at a time (SWAR: no table, no loop per digit): what
 * script's output (src/cli/textbuf.c) and the disassembly's branch texts
 * (disasm.c) are made of.  The caller has room: each writer may store up to
 * 8 bytes of junk past the digits it counts (24 bytes of room in all). */
#ifndef VT_DECODE_HEX_H
#define VT_DECODE_HEX_H

#include <glib.h>
#include <string.h>

/* How many digits v has ("%llx"; 0 has one). */
static inline int vt_hex_count(guint64 v)
{
	return (64 - __builtin_clzll(v | 1) + 3) / 4;
}

/* 8 hex digits of v (32 bits) as 8 ASCII bytes, the first digit in the
 * lowest byte: nibbles spread into bytes, '0' added, 'a'-'9'-1 more where
 * a nibble is over 9 (no table, no loop). */
static inline guint64 vt_hex8(guint32 v)
{
	guint64 x = v;

	x = (x | x << 16) & 0x0000ffff0000ffffULL;
	x = (x | x << 8) & 0x00ff00ff00ff00ffULL;
	x = (x | x << 4) & 0x0f0f0f0f0f0f0f0fULL;
	x += 0x3030303030303030ULL + (((x + 0x0606060606060606ULL) >> 4) & 0x0101010101010101ULL) * ('a' - '9' - 1);
	return __builtin_bswap64(x);
}

/* The n lowest hex digits of v at p..p+n-1, and up to 8 bytes of junk
 * after them (the caller has room for it and does not count it). */
static inline void vt_hex_digits(char *p, guint64 v, int n)
{
	guint64 lo = vt_hex8((guint32)v);

	if (n > 8) {
		guint64 hi = vt_hex8((guint32)(v >> 32)) >> (8 * (16 - n));

		memcpy(p, &hi, 8);
		memcpy(p + n - 8, &lo, 8);
	} else {
		lo >>= 8 * (8 - n);
		memcpy(p, &lo, 8);
	}
}

/* "%llx" of v at p; returns the number of digits. */
static inline gsize vt_hex_at(char *p, guint64 v)
{
	int n = vt_hex_count(v);

	vt_hex_digits(p, v, n);
	return (gsize)n;
}

/* "%16llx" of v at p (16 bytes: kernel addresses without counting). */
static inline void vt_hex16_at(char *p, guint64 v)
{
	guint64 hi, lo;

	if (G_UNLIKELY(!(v >> 60))) {    /* fewer digits: padded */
		int n = vt_hex_count(v);

		memset(p, ' ', 16);
		vt_hex_digits(p + 16 - n, v, n);   /* (its junk: the caller's room) */
		return;
	}
	hi = vt_hex8((guint32)(v >> 32));
	lo = vt_hex8((guint32)v);
	memcpy(p, &hi, 8);
	memcpy(p + 8, &lo, 8);
}

#endif
