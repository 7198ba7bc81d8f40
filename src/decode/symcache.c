/* symcache.c - the symbol of an address, cached: a direct-mapped table
 * keyed on (image, address), so that a trace's hot branch addresses cost
 * a compare instead of a code-segment search and a binary search over
 * kallsyms each time (vmtrace script's call traces: the called or returning
 * function of each line; whether the source is code, vt_decode_symcache_code,
 * asks the image only).
 * Bounded: a slot is replaced by the next address that maps to it.
 * A slot has no offset into the symbol (call traces show the name alone):
 * 32 bytes, so that 2^16 slots are one transparent huge page, zeroed on
 * their first write (40 bytes were two: 4 MiB zeroed, 2.5 MiB used).
 * Script's printers (a decoding thread each) share one table: each had
 * its own, and on this VM the first write of each huge page cost 1-3 ms
 * (the kernel zeroing it: 5-8% of a 1 MiB exit-heavy call trace's CPU
 * samples, with the walk's tables), and each filled the slots of the same
 * kernel functions again (exit-heavy: 46,324 fills, 29,574 addresses). */
#include "config.h"

#include <string.h>

#include "src/decode/decode.h"
#include "src/decode/seqlock.h"

/* A slot: written and read under its sequence number (seqlock.h);
 * len_code: the name's length, shifted, its low bit: code. */
typedef struct {
	guint32 seq;
	guint32 len_code;
	guint64 addr;
	const VtDecodeImage *img;   /* NULL: empty */
	const char *sym;
} Slot;

G_STATIC_ASSERT(sizeof(Slot) == 32);

typedef struct {
	Slot *slots;
	guint shift;                /* 64 - log2(slots) */
	gint refs;
} Table;

struct VtDecodeSymCache {
	Table *t;
	VtDecodeSym out;            /* the last lookup's */
	/* vt_decode_symcache_code(): code of img from lo up to hi, as the
	 * image said (img NULL: none known), the last two images' (host,
	 * guest), the older replaced */
	struct {
		const VtDecodeImage *img;
		guint64 lo, hi;
	} code[2];
	guint code_old;
};

VtDecodeSymCache *vt_decode_symcache_new(guint slots_log2)
{
	VtDecodeSymCache *c = g_new0(VtDecodeSymCache, 1);

	slots_log2 = CLAMP(slots_log2, 1, 24);
	c->t = g_new0(Table, 1);
	c->t->slots = vt_decode_table_new(sizeof(Slot) << slots_log2);
	c->t->shift = 64 - slots_log2;
	c->t->refs = 1;
	return c;
}

VtDecodeSymCache *vt_decode_symcache_share(const VtDecodeSymCache *c)
{
	VtDecodeSymCache *n = g_new0(VtDecodeSymCache, 1);

	n->t = c->t;
	g_atomic_int_inc(&n->t->refs);
	return n;
}

void vt_decode_symcache_free(VtDecodeSymCache *c)
{
	if (!c)
		return;
	if (g_atomic_int_dec_and_test(&c->t->refs)) {
		vt_decode_table_free(c->t->slots, sizeof(Slot) << (64 - c->t->shift));
		g_free(c->t);
	}
	g_free(c);
}

static void fill(VtDecodeSym *e, const VtDecodeImage *img, guint64 addr)
{
	gsize avail, len = 0;
	guint64 off;

	e->img = img;
	e->addr = addr;
	e->sym = NULL;
	e->code = addr && img && vt_decode_image_code(img, addr, &avail);
	if (e->code)
		e->sym = vt_decode_image_symbol_len(img, addr, &off, &len);
	e->sym_len = e->sym ? (guint32)MIN(len, (gsize)G_MAXUINT32 >> 1) : 0;
}

/* Fibonacci hashing: every bit of the address and the image counts */
static inline Slot *slot_of(const Table *t, const VtDecodeImage *img, guint64 addr)
{
	return &t->slots[((addr ^ (guint64)(guintptr)img) * 0x9e3779b97f4a7c15ULL) >> t->shift];
}

void vt_decode_symcache_prefetch(const VtDecodeSymCache *c, const VtDecodeImage *img, guint64 addr)
{
	__builtin_prefetch(slot_of(c->t, img, addr));
}

void vt_decode_symcache_prefetch_name(const VtDecodeSymCache *c, const VtDecodeImage *img, guint64 addr)
{
	Slot *e = slot_of(c->t, img, addr);

	if (__atomic_load_n(&e->addr, __ATOMIC_RELAXED) == addr && __atomic_load_n(&e->img, __ATOMIC_RELAXED) == img)
		__builtin_prefetch(__atomic_load_n(&e->sym, __ATOMIC_RELAXED));
}

/* e's (img, addr) into c->out if it holds them. */
static gboolean slot_get(VtDecodeSymCache *c, Slot *e, const VtDecodeImage *img, guint64 addr)
{
	Slot x;

	if (!vt_seq_read(&x, e, sizeof(x)) || x.img != img || x.addr != addr)
		return FALSE;
	c->out = (VtDecodeSym){ addr, img, x.sym, x.len_code >> 1, x.len_code & 1 };
	return TRUE;
}

static void slot_put(Slot *e, const VtDecodeSym *y)
{
	Slot x = { 0, y->sym_len << 1 | (y->code ? 1 : 0), y->addr, y->img, y->sym };
	guint32 seq;

	if (!vt_seq_lock(&e->seq, &seq))
		return;
	memcpy((guint8 *)e + sizeof(e->seq), (const guint8 *)&x + sizeof(x.seq), sizeof(x) - sizeof(x.seq));
	vt_seq_unlock(&e->seq, seq);
}

const VtDecodeSym *vt_decode_symcache_lookup(VtDecodeSymCache *c, const VtDecodeImage *img, guint64 addr)
{
	Slot *e = slot_of(c->t, img, addr);

	if (G_LIKELY(img && slot_get(c, e, img, addr)))
		return &c->out;
	fill(&c->out, img, addr);
	if (img)
		slot_put(e, &c->out);
	return &c->out;
}

/* Not from the table: the code range the image gave last (the branch
 * sources are mostly in one segment), widened downwards while the image
 * gives code up to the same end, else the image; a table slot
 * is a cache miss (1 MiB tnt-dense --call-trace: 6.5% of the run's CPU
 * samples, the table 2.6 MB), and the sources filled slots the targets'
 * symbols could use (c: one interface for both). */
gboolean vt_decode_symcache_code(VtDecodeSymCache *c, const VtDecodeImage *img, guint64 addr)
{
	guint k = c->code[1].img == img;
	gsize avail;

	if (G_LIKELY(img && c->code[k].img == img && addr >= c->code[k].lo && addr < c->code[k].hi))
		return addr != 0;
	if (!addr || !img || !vt_decode_image_code(img, addr, &avail))
		return FALSE;
	if (c->code[k].img != img) {
		k = c->code_old;
		c->code_old ^= 1;
	}
	/* code runs on from addr up to the end the image gave: joined with
	 * the range known if both end there (one segment) */
	if (c->code[k].img != img || addr + avail != c->code[k].hi) {
		c->code[k].img = img;
		c->code[k].lo = addr;
		c->code[k].hi = addr + avail;
	} else {
		c->code[k].lo = MIN(c->code[k].lo, addr);
	}
	return TRUE;
}
