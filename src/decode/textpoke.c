/* textpoke.c - PERF_RECORD_TEXT_POKE: code that the kernel patched while it
 * was traced (alternatives, jump labels, static calls).  The image holds
 * the bytes from before the first poke (perf record --kcore copies kcore
 * at the start; record --source tcg writes the first bytes it saw); each
 * poke replaces old_len bytes at addr with new_len bytes from its time on,
 * as perf applies them to its copy of the image (machine__process_text_poke).
 *
 * For libipt: the pages holding a poked byte get no section in the images
 * (image.c); the decoder reads them through a callback (queue.c) that
 * returns the bytes as they were at the decoder's time (pt_blk_time).
 * These pages lose libipt's block cache: kernels poke a few thousand
 * bytes, on a few hundred pages. */
#include "config.h"

#include <linux/perf_event.h>
#include <string.h>

#include "src/decode/internal.h"

typedef struct {
	guint64 tsc;             /* from this time on ... */
	guint8 val;              /* ... the byte is this */
} Version;

struct VtDecodePokes {
	GHashTable *bytes;       /* address -> GArray of Version, time order; [0]: before any poke */
	GHashTable *pages;       /* page numbers (4 KiB) with a poked byte */
	guint n;                 /* pokes */
};

static void versions_free(gpointer p)
{
	g_array_free(p, TRUE);
}

VtDecodePokes *vt_decode_pokes_new(void)
{
	VtDecodePokes *p = g_new0(VtDecodePokes, 1);

	p->bytes = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, versions_free);
	p->pages = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
	return p;
}

void vt_decode_pokes_free(VtDecodePokes *p)
{
	if (!p)
		return;
	g_hash_table_destroy(p->bytes);
	g_hash_table_destroy(p->pages);
	g_free(p);
}

/* One poke: len bytes at addr change from old to new at time tsc.  Pokes
 * must come in time order. */
void vt_decode_pokes_add(VtDecodePokes *p, guint64 addr, const guint8 *old, const guint8 *new, gsize len,
			 guint64 tsc)
{
	for (gsize i = 0; i < len; i++) {
		guint64 a = addr + i;
		GArray *v = g_hash_table_lookup(p->bytes, &a);
		Version nv = { tsc, new[i] };

		if (!v) {
			Version first = { 0, old ? old[i] : new[i] };
			guint64 *key = g_memdup2(&a, sizeof(a));
			guint64 *page = g_memdup2(&a, sizeof(a));

			v = g_array_new(FALSE, FALSE, sizeof(Version));
			g_array_append_val(v, first);
			g_hash_table_insert(p->bytes, key, v);
			*page = a >> 12;
			g_hash_table_add(p->pages, page);   /* frees an equal key it replaces */
		}
		g_array_append_val(v, nv);
	}
	p->n++;
}

guint vt_decode_pokes_count(const VtDecodePokes *p)
{
	return p ? p->n : 0;
}

gboolean vt_decode_pokes_page(const VtDecodePokes *p, guint64 page)
{
	return p && g_hash_table_contains(p->pages, &page);
}

/* The byte at a as at time tsc; FALSE if a was never poked. */
static gboolean byte_at(const VtDecodePokes *p, guint64 a, guint64 tsc, guint8 *out)
{
	GArray *v = g_hash_table_lookup(p->bytes, &a);
	guint lo = 1, hi;

	if (!v)
		return FALSE;
	hi = v->len;
	while (lo < hi) {               /* the first version after tsc */
		guint mid = (lo + hi) / 2;

		if (g_array_index(v, Version, mid).tsc <= tsc)
			lo = mid + 1;
		else
			hi = mid;
	}
	*out = g_array_index(v, Version, lo - 1).val;
	return TRUE;
}

/* Up to n bytes at addr as at time tsc, within addr's page: the image's
 * bytes with the pokes up to tsc applied.  Returns the count (0: no code). */
gsize vt_decode_pokes_read(const VtDecodePokes *p, const VtDecodeImage *img, guint64 addr, guint64 tsc,
			   guint8 *dst, gsize n)
{
	gsize avail = 0;
	const guint8 *code = vt_decode_image_code(img, addr, &avail);

	if (!code)
		return 0;
	n = MIN(n, avail);
	n = MIN(n, (gsize)(4096 - (addr & 4095)));
	for (gsize i = 0; i < n; i++)
		if (!byte_at(p, addr + i, tsc, &dst[i]))
			dst[i] = code[i];
	return n;
}

/* One PERF_RECORD_TEXT_POKE record (the whole record: header, u64 addr,
 * u16 old_len, u16 new_len, old bytes, new bytes) at time tsc, added to
 * *host (kernel cpumode) or *guest (guest kernel), made when needed; pokes
 * of user code and malformed records are skipped (FALSE). */
gboolean vt_decode_pokes_add_record(VtDecodePokes **host, VtDecodePokes **guest, const guint8 *rec, gsize size,
				    guint64 tsc)
{
	struct perf_event_header h;
	guint64 addr;
	guint16 ol, nl;
	VtDecodePokes **to;

	if (size < sizeof(h) + 12)
		return FALSE;
	memcpy(&h, rec, sizeof(h));
	memcpy(&addr, rec + sizeof(h), 8);
	memcpy(&ol, rec + sizeof(h) + 8, 2);
	memcpy(&nl, rec + sizeof(h) + 10, 2);
	switch (h.misc & PERF_RECORD_MISC_CPUMODE_MASK) {
	case PERF_RECORD_MISC_KERNEL: to = host; break;
	case PERF_RECORD_MISC_GUEST_KERNEL: to = guest; break;
	default: return FALSE;
	}
	if (h.size > size || sizeof(h) + 12u + ol + nl > h.size || !nl)
		return FALSE;
	if (!*to)
		*to = vt_decode_pokes_new();
	vt_decode_pokes_add(*to, addr, ol == nl ? rec + sizeof(h) + 12 : NULL, rec + sizeof(h) + 12 + ol, nl, tsc);
	return TRUE;
}
