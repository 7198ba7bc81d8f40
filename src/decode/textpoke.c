/* textpoke.c - PERF_RECORD_TEXT_POKE: code that the kernel patched while it
 * was traced (alternatives, jump labels, static calls).  The image holds
 * the bytes from before the first poke (perf record --kcore copies kcore
 * at the start; record --source tcg writes the first bytes it saw); each
 * poke writes new_len bytes at addr from its time on, as perf applies them
 * to its copy of the image (machine__process_text_poke: the new bytes; the
 * old ones are not checked).
 *
 * For libipt: the versions of each poked 4 KiB page (the image's bytes,
 * then the bytes from each poke time on) are pages of a memory file
 * (memfd, read by libipt as /proc/self/fd/N).  The image's own sections
 * leave poked pages out (image.c).  A decoder reads a poked page through
 * its image's callback (queue.c: the bytes at libipt's time, as perf
 * applies pokes in time order) until the decoder's time passes the page's
 * last poke; from then on the page's last version is a section of its own
 * (a view adds it), with libipt's block cache like the rest of the code.
 * Kernels poke most pages early in the boot (jump labels, alternatives,
 * ftrace), so most of a trace decodes at full speed.  vmtrace's own walker
 * (walk.c) takes no sections: it asks for a page's bytes by time only on
 * poked pages (vt_decode_pokes_code: where the version keeps them, tagged
 * by version for its block table), elsewhere the image's bytes hold.  (A section per
 * version, swapped as time passes, is not enough: libipt reads code ahead
 * of the time vmtrace sees between blocks, and a page's section cannot be
 * taken out of a libipt image again but by replacing it.)
 */
#include "config.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "src/decode/internal.h"

#define PAGE 4096u

typedef struct {
	guint64 addr, tsc;
	guint32 off;             /* its new bytes in p->raw_bytes */
	guint16 len;
} Poke;

typedef struct {
	guint64 tsc;             /* from this time on (version 0: from the start) */
	gsize off;               /* its 4 KiB in p->mem */
	guint isid0, nisid;      /* its sections: p->isids[isid0 .. isid0 + nisid) */
} Version;

typedef struct {
	guint64 page;            /* number (address / 4096) */
	guint v0, n;             /* its versions: p->vers[v0 .. v0 + n) */
} Page;

typedef struct {
	guint64 tsc;             /* the page's last poke */
	guint page;              /* index into p->pg */
} Final;

struct VtDecodePokes {
	GArray *raw;             /* Poke, time order */
	GByteArray *raw_bytes;
	/* made by vt_decode_pokes_build() for one image: */
	GArray *pg;              /* Page, ascending page numbers */
	guint64 pmin, pmax;      /* the poked pages' range ... */
	guint8 *bits;            /* ... and a bit per page in it: poked? (64-bit words) */
	guint32 *rank;           /* per word of bits: the poked pages before it (page_get) */
	GArray *vers;            /* Version, grouped by page */
	GArray *finals;          /* Final, time order */
	GArray *isids;           /* int, libipt section ids */
	GByteArray *mem;         /* the versions' pages */
	int fd;                  /* mem as a file (memfd), -1: none */
	char *path;              /* "/proc/self/fd/FD" */
};

VtDecodePokes *vt_decode_pokes_new(void)
{
	VtDecodePokes *p = g_new0(VtDecodePokes, 1);

	p->raw = g_array_new(FALSE, FALSE, sizeof(Poke));
	p->raw_bytes = g_byte_array_new();
	p->fd = -1;
	return p;
}

static void built_free(VtDecodePokes *p)
{
	if (p->pg)
		g_array_free(p->pg, TRUE);
	if (p->vers)
		g_array_free(p->vers, TRUE);
	if (p->finals)
		g_array_free(p->finals, TRUE);
	if (p->isids)
		g_array_free(p->isids, TRUE);
	if (p->mem)
		g_byte_array_free(p->mem, TRUE);
	if (p->fd >= 0)
		close(p->fd);
	g_free(p->bits);
	g_free(p->rank);
	g_free(p->path);
	p->pg = p->vers = p->finals = p->isids = NULL;
	p->mem = NULL;
	p->bits = NULL;
	p->rank = NULL;
	p->path = NULL;
	p->fd = -1;
}

void vt_decode_pokes_free(VtDecodePokes *p)
{
	if (!p)
		return;
	built_free(p);
	g_array_free(p->raw, TRUE);
	g_byte_array_free(p->raw_bytes, TRUE);
	g_free(p);
}

/* One poke: len bytes at addr become new at time tsc (old: the bytes
 * before, unused - the image's are).  Pokes must come in time order. */
void vt_decode_pokes_add(VtDecodePokes *p, guint64 addr, const guint8 *old, const guint8 *new, gsize len,
			 guint64 tsc)
{
	Poke k = { addr, tsc, p->raw_bytes->len, (guint16)MIN(len, (gsize)G_MAXUINT16) };

	(void)old;
	g_byte_array_append(p->raw_bytes, new, k.len);
	g_array_append_val(p->raw, k);
}

guint vt_decode_pokes_count(const VtDecodePokes *p)
{
	return p ? p->raw->len : 0;
}

gboolean vt_decode_pokes_page(const VtDecodePokes *p, guint64 page)
{
	VtDecodePokedPages pp = vt_decode_pokes_pages(p);

	return vt_decode_poked(&pp, page);
}

/* Bits set in x (SWAR: __builtin_popcountll is a libgcc call on a CPU
 * baseline without POPCNT). */
static inline guint popcount64(guint64 x)
{
	x -= (x >> 1) & 0x5555555555555555ull;
	x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
	x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0full;
	return (guint)((x * 0x0101010101010101ull) >> 56);
}

guint64 vt_decode_pokes_next_page(const VtDecodePokes *p, guint64 page, guint64 last)
{
	guint64 nwords;

	if (!p || !p->bits || page > p->pmax || last < p->pmin || page > last)
		return G_MAXUINT64;
	if (page < p->pmin)
		page = p->pmin;
	/* the words up to last's (a kernel's text and its modules' pokes are
	 * a gigabyte apart: thousands of empty words between) */
	nwords = (MIN(last, p->pmax) - p->pmin) / 64 + 1;
	for (guint64 w = (page - p->pmin) / 64; w < nwords; w++) {
		guint64 word;

		memcpy(&word, p->bits + w * 8, 8);
		word = GUINT64_FROM_LE(word);
		if (w == (page - p->pmin) / 64)
			word &= ~((1ull << ((page - p->pmin) % 64)) - 1);
		if (word) {
			guint64 next = p->pmin + w * 64 + (guint64)__builtin_ctzll(word);

			return next <= last ? next : G_MAXUINT64;
		}
	}
	return G_MAXUINT64;
}

VtDecodePokedPages vt_decode_pokes_pages(const VtDecodePokes *p)
{
	if (!p || !p->bits)
		return (VtDecodePokedPages){ NULL, 1, 0 };
	return (VtDecodePokedPages){ p->bits, p->pmin, p->pmax };
}

/* The poked page's entry: pg is in page order, so its index is the
 * number of poked pages below it (a hash table's lookup here was 6% of a
 * real boot's decode: every block on a poked page asks). */
static const Page *page_get(const VtDecodePokes *p, guint64 page)
{
	guint64 w, word;

	if (!vt_decode_pokes_page(p, page))
		return NULL;
	page -= p->pmin;
	w = page / 64;
	memcpy(&word, p->bits + w * 8, 8);
	word = GUINT64_FROM_LE(word);
	return &g_array_index(p->pg, Page, p->rank[w] + (guint)popcount64(word & ((1ull << (page % 64)) - 1)));
}

/* ------------------------------------------------------------- building */
/* A page while the versions are made: their times and bytes. */
typedef struct {
	guint64 page;
	GArray *tsc;             /* guint64 */
	GByteArray *bytes;       /* 4 KiB per version */
} Building;

static void building_free(gpointer x)
{
	Building *b = x;

	g_array_free(b->tsc, TRUE);
	g_byte_array_free(b->bytes, TRUE);
	g_free(b);
}

/* The image's bytes of page (zeros where it has no code); FALSE: none. */
static gboolean image_page(const VtDecodeImage *img, guint64 page, guint8 *dst)
{
	gboolean any = FALSE;

	memset(dst, 0, PAGE);
	for (guint64 a = page * PAGE, end = a + PAGE; a < end;) {
		gsize avail = 0;
		const guint8 *code = vt_decode_image_code(img, a, &avail);

		if (!code) {
			a++;
			continue;
		}
		avail = MIN(avail, (gsize)(end - a));
		memcpy(dst + (a - page * PAGE), code, avail);
		a += avail;
		any = TRUE;
	}
	return any;
}

/* The part of poke k on page `page` applied to that page's versions. */
static void building_poke(GHashTable *pages, const VtDecodeImage *img, const Poke *k, const guint8 *bytes,
			  guint64 page)
{
	Building *b = g_hash_table_lookup(pages, GSIZE_TO_POINTER(page));
	guint64 lo = MAX(k->addr, page * PAGE), hi = MIN(k->addr + k->len, page * PAGE + PAGE);
	guint8 *last;

	if (!b) {
		guint8 first[PAGE];
		guint64 zero = 0;

		if (!image_page(img, page, first))
			return;             /* no code there: nothing to decode */
		b = g_new0(Building, 1);
		b->page = page;
		b->tsc = g_array_new(FALSE, FALSE, sizeof(guint64));
		b->bytes = g_byte_array_new();
		g_array_append_val(b->tsc, zero);
		g_byte_array_append(b->bytes, first, PAGE);
		g_hash_table_insert(pages, GSIZE_TO_POINTER(page), b);
	}
	if (b->tsc->len == 1 || g_array_index(b->tsc, guint64, b->tsc->len - 1) != k->tsc) {
		guint len = b->bytes->len;

		g_array_append_val(b->tsc, k->tsc);
		g_byte_array_set_size(b->bytes, len + PAGE);   /* a copy of the last version (not an */
		memcpy(b->bytes->data + len, b->bytes->data + len - PAGE, PAGE);   /* append of itself) */
	}
	last = b->bytes->data + b->bytes->len - PAGE;
	memcpy(last + (lo - page * PAGE), bytes + (lo - k->addr), hi - lo);
}

static gint cmp_building(gconstpointer a, gconstpointer b)
{
	const Building *x = *(Building *const *)a, *y = *(Building *const *)b;

	return x->page < y->page ? -1 : x->page > y->page;
}

static gint cmp_final(gconstpointer a, gconstpointer b)
{
	const Final *x = a, *y = b;

	if (x->tsc != y->tsc)
		return x->tsc < y->tsc ? -1 : 1;
	return x->page < y->page ? -1 : x->page > y->page;
}

/* The pages of the versions in order, their changes, the page bitmap. */
static void flatten(VtDecodePokes *p, GPtrArray *list)
{
	guint64 nwords;

	p->pg = g_array_new(FALSE, FALSE, sizeof(Page));
	p->vers = g_array_new(FALSE, FALSE, sizeof(Version));
	p->finals = g_array_new(FALSE, FALSE, sizeof(Final));
	p->isids = g_array_new(FALSE, FALSE, sizeof(int));
	p->mem = g_byte_array_new();
	p->pmin = list->len ? ((Building *)list->pdata[0])->page : 0;
	p->pmax = list->len ? ((Building *)list->pdata[list->len - 1])->page : 0;
	nwords = (p->pmax - p->pmin) / 64 + 1;
	p->bits = g_malloc0(nwords * 8);
	p->rank = g_new0(guint32, nwords);
	for (guint i = 0; i < list->len; i++) {
		const Building *b = list->pdata[i];
		Page pg = { b->page, p->vers->len, b->tsc->len };
		Final f = { g_array_index(b->tsc, guint64, b->tsc->len - 1), i };

		for (guint v = 0; v < b->tsc->len; v++) {
			Version ver = { g_array_index(b->tsc, guint64, v), p->mem->len + (gsize)v * PAGE, 0, 0 };

			g_array_append_val(p->vers, ver);
		}
		g_array_append_val(p->finals, f);
		g_byte_array_append(p->mem, b->bytes->data, b->bytes->len);
		g_array_append_val(p->pg, pg);
		p->bits[(b->page - p->pmin) / 8] |= (guint8)(1u << ((b->page - p->pmin) % 8));
	}
	for (guint64 w = 1; w < nwords; w++) {
		guint64 word;

		memcpy(&word, p->bits + (w - 1) * 8, 8);
		p->rank[w] = p->rank[w - 1] + (guint32)popcount64(word);
	}
	g_array_sort(p->finals, cmp_final);
}

/* mem as a file libipt can open by name (it maps sections itself). */
static gboolean mem_file(VtDecodePokes *p, GError **error)
{
	gsize done = 0;

	p->fd = memfd_create("vmtrace-text-pokes", MFD_CLOEXEC);
	if (p->fd < 0) {
		g_set_error(error, VT_DECODE_ERROR, VT_DECODE_ERROR_IO, "text pokes: memfd_create: %s",
			    g_strerror(errno));
		return FALSE;
	}
	while (done < p->mem->len) {
		ssize_t n = write(p->fd, p->mem->data + done, p->mem->len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			g_set_error(error, VT_DECODE_ERROR, VT_DECODE_ERROR_IO, "text pokes: writing the memory file: %s",
				    n < 0 ? g_strerror(errno) : "no space");
			return FALSE;
		}
		done += (gsize)n;
	}
	p->path = g_strdup_printf("/proc/self/fd/%d", p->fd);
	return TRUE;
}

gboolean vt_decode_pokes_build(VtDecodePokes *p, const VtDecodeImage *img, GError **error)
{
	g_autoptr(GHashTable) pages = g_hash_table_new_full(NULL, NULL, NULL, building_free);
	g_autoptr(GPtrArray) list = NULL;
	GHashTableIter it;
	gpointer v;

	built_free(p);
	for (guint i = 0; i < p->raw->len; i++) {
		const Poke *k = &g_array_index(p->raw, Poke, i);

		for (guint64 pg = k->addr / PAGE; k->len && pg <= (k->addr + k->len - 1) / PAGE; pg++)
			building_poke(pages, img, k, p->raw_bytes->data + k->off, pg);
	}
	list = g_ptr_array_new();
	g_hash_table_iter_init(&it, pages);
	while (g_hash_table_iter_next(&it, NULL, &v))
		g_ptr_array_add(list, v);
	g_ptr_array_sort(list, cmp_building);
	flatten(p, list);
	return mem_file(p, error);
}

/* The code runs [lo, hi) of the image on page: FALSE when there is none
 * at or after *lo. */
static gboolean code_run(const VtDecodeImage *img, guint64 page, guint64 *lo, guint64 *hi)
{
	for (guint64 a = *lo, end = page * PAGE + PAGE; a < end; a++) {
		gsize avail = 0;

		if (vt_decode_image_code(img, a, &avail)) {
			*lo = a;
			*hi = MIN(end, a + avail);
			return TRUE;
		}
	}
	return FALSE;
}

gboolean vt_decode_pokes_add_sections(VtDecodePokes *p, const VtDecodeImage *img,
				      struct pt_image_section_cache *iscache, GError **error)
{
	for (guint i = 0; i < p->pg->len; i++) {
		const Page *pg = &g_array_index(p->pg, Page, i);

		for (guint v = pg->v0 + pg->n - 1; v < pg->v0 + pg->n; v++) {   /* the last version */
			Version *ver = &g_array_index(p->vers, Version, v);
			guint64 lo = pg->page * PAGE, hi;

			ver->isid0 = p->isids->len;
			for (; code_run(img, pg->page, &lo, &hi); lo = hi) {
				int isid = pt_iscache_add_file(iscache, p->path, ver->off + (lo - pg->page * PAGE), hi - lo,
							       lo);

				if (isid < 0) {
					g_set_error(error, VT_DECODE_ERROR, VT_DECODE_ERROR_FAILED,
						    "text pokes: libipt: %s", pt_errstr(pt_errcode(isid)));
					return FALSE;
				}
				g_array_append_val(p->isids, isid);
			}
			ver->nisid = p->isids->len - ver->isid0;
		}
	}
	return TRUE;
}

/* --------------------------------------------------------------- reading */
/* The version of page pg at time tsc. */
static guint version_at(const VtDecodePokes *p, const Page *pg, guint64 tsc)
{
	guint lo = 1, hi = pg->n;

	while (lo < hi) {               /* the first version after tsc */
		guint mid = (lo + hi) / 2;

		if (g_array_index(p->vers, Version, pg->v0 + mid).tsc <= tsc)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo - 1;
}

/* Up to n bytes at addr: the image's, on poked pages those of the version
 * at tsc; *tag (if not NULL) names the versions read (0: no poked page).
 * Returns the count (0: no code). */
static gsize read_bytes(const VtDecodePokes *p, const VtDecodeImage *img, guint64 tsc, guint64 addr, guint8 *dst,
			gsize n, guint64 *tag)
{
	gsize done = 0;

	if (tag)
		*tag = 0;
	while (done < n) {
		guint64 a = addr + done;
		gsize avail = 0;
		const guint8 *code = vt_decode_image_code(img, a, &avail);
		const Page *pg = page_get(p, a / PAGE);
		gsize k = MIN(MIN(avail, n - done), (gsize)(PAGE - a % PAGE));

		if (!code)
			break;
		if (pg) {
			guint v = version_at(p, pg, tsc);

			code = p->mem->data + g_array_index(p->vers, Version, pg->v0 + v).off + a % PAGE;
			if (tag)
				*tag = *tag << 32 | (pg->v0 + v + 1);   /* at most two pages */
		}
		memcpy(dst + done, code, k);
		done += k;
	}
	return done;
}

const guint8 *vt_decode_pokes_code(const VtDecodePokes *p, const VtDecodeImage *img, guint64 addr, guint64 tsc,
				   gsize *avail, guint64 *tag, VtDecodePokeMemo *memo)
{
	guint64 page = addr / PAGE;
	const guint8 *code;

	*avail = 0;
	*tag = 0;
	if (memo->page != page || tsc < memo->lo || tsc >= memo->hi) {
		const Page *pg = page_get(p, page);
		gsize page_avail = 0;
		guint v;

		if (!pg)
			return NULL;
		v = version_at(p, pg, tsc);
		memo->page = page;
		memo->lo = v ? g_array_index(p->vers, Version, pg->v0 + v).tsc : 0;
		memo->hi = v + 1 < pg->n ? g_array_index(p->vers, Version, pg->v0 + v + 1).tsc : G_MAXUINT64;
		memo->tag = pg->v0 + v + 1;
		memo->bytes = p->mem->data + g_array_index(p->vers, Version, pg->v0 + v).off;
		memo->whole = vt_decode_image_code(img, page * PAGE, &page_avail) && page_avail >= PAGE;
	}
	if (!(code = vt_decode_image_code(img, addr, avail)))
		return NULL;
	*avail = MIN(*avail, (gsize)(PAGE - addr % PAGE));
	*tag = memo->tag;
	return memo->bytes + addr % PAGE;
}

gsize vt_decode_pokes_read(const VtDecodePokes *p, const VtDecodeImage *img, guint64 addr, guint64 tsc,
			   guint8 *dst, gsize n)
{
	return read_bytes(p, img, tsc, addr, dst, n, NULL);
}

/* ----------------------------------------------------------------- views */
struct VtDecodePokeView {
	const VtDecodePokes *p;
	struct pt_image *pi;
	struct pt_image_section_cache *iscache;
	guint pos;               /* pages whose last version pi has (p->finals) */
};

VtDecodePokeView *vt_decode_poke_view_new(const VtDecodeImage *img, struct pt_image_section_cache *iscache,
					  struct pt_image *pi)
{
	const VtDecodePokes *p = vt_decode_image_pokes(img);
	VtDecodePokeView *w;

	if (!p || !p->pg)
		return NULL;
	w = g_new0(VtDecodePokeView, 1);
	w->p = p;
	w->pi = pi;
	w->iscache = iscache;
	return w;
}

void vt_decode_poke_view_free(VtDecodePokeView *w)
{
	g_free(w);
}

gboolean vt_decode_poke_view_moved(const VtDecodePokeView *w)
{
	return w && w->pos;
}

void vt_decode_poke_view_reset(VtDecodePokeView *w, struct pt_image *pi)
{
	w->pi = pi;
	w->pos = 0;
}

void vt_decode_poke_view_at(VtDecodePokeView *w, guint64 tsc)
{
	const GArray *fin = w->p->finals;

	while (w->pos < fin->len && g_array_index(fin, Final, w->pos).tsc <= tsc) {
		const Page *pg = &g_array_index(w->p->pg, Page, g_array_index(fin, Final, w->pos++).page);
		const Version *ver = &g_array_index(w->p->vers, Version, pg->v0 + pg->n - 1);

		for (guint i = 0; i < ver->nisid; i++)   /* fills the gap image.c left */
			(void)pt_image_add_cached(w->pi, w->iscache, g_array_index(w->p->isids, int, ver->isid0 + i),
						  NULL);
	}
}

gsize vt_decode_pokes_read_tag(const VtDecodePokes *p, const VtDecodeImage *img, guint64 addr, guint64 tsc,
			       guint8 *dst, gsize n, guint64 *tag)
{
	*tag = 0;
	if (!vt_decode_pokes_page(p, addr / PAGE) && !vt_decode_pokes_page(p, (addr + n - 1) / PAGE))
		return 0;
	return read_bytes(p, img, tsc, addr, dst, n, tag);
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
	vt_decode_pokes_add(*to, addr, rec + sizeof(h) + 12, rec + sizeof(h) + 12 + ol, nl, tsc);
	return TRUE;
}
