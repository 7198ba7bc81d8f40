/* symcache.c - the symbol of an address, cached: a direct-mapped table
 * keyed on (image, address), so that a trace's hot branch addresses cost
 * a compare instead of a code-segment search and a binary search over
 * kallsyms each time (vmtrace script's call traces: the called or returning
 * function of each line; whether the source is code, vt_decode_symcache_code,
 * asks the image only).
 * Bounded: a slot is replaced by the next address that maps to it.
 * A slot has no offset into the symbol (call traces show the name alone):
 * 32 bytes, so that 2^16 slots are one transparent huge page, zeroed on
 * their first write (40 bytes were two: 4 MiB zeroed, 2.5 MiB used). */
#include "config.h"

#include <string.h>

#include "src/decode/decode.h"

G_STATIC_ASSERT(sizeof(VtDecodeSym) == 32);

struct VtDecodeSymCache {
	VtDecodeSym *slots;
	guint shift;                /* 64 - log2(slots) */
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
	c->slots = vt_decode_table_new(sizeof(VtDecodeSym) << slots_log2);
	c->shift = 64 - slots_log2;
	return c;
}

void vt_decode_symcache_free(VtDecodeSymCache *c)
{
	if (!c)
		return;
	vt_decode_table_free(c->slots, sizeof(VtDecodeSym) << (64 - c->shift));
	g_free(c);
}

static void fill(VtDecodeSym *e, const VtDecodeImage *img, guint64 addr)
{
	gsize avail;
	guint64 off;

	e->img = img;
	e->addr = addr;
	e->sym = NULL;
	e->sym_len = 0;
	e->code = addr && img && vt_decode_image_code(img, addr, &avail);
	if (e->code)
		e->sym = vt_decode_image_symbol(img, addr, &off);
	if (e->sym)
		e->sym_len = (guint32)strlen(e->sym);
}

/* Fibonacci hashing: every bit of the address and the image counts */
static inline VtDecodeSym *slot_of(const VtDecodeSymCache *c, const VtDecodeImage *img, guint64 addr)
{
	return &c->slots[((addr ^ (guint64)(guintptr)img) * 0x9e3779b97f4a7c15ULL) >> c->shift];
}

void vt_decode_symcache_prefetch(const VtDecodeSymCache *c, const VtDecodeImage *img, guint64 addr)
{
	__builtin_prefetch(slot_of(c, img, addr));
}

const VtDecodeSym *vt_decode_symcache_lookup(VtDecodeSymCache *c, const VtDecodeImage *img, guint64 addr)
{
	VtDecodeSym *e = slot_of(c, img, addr);

	if (G_UNLIKELY(e->img != img || e->addr != addr || !img))
		fill(e, img, addr);
	return e;
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
