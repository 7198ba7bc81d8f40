/* dryrun.c - find each VMCS's TSC offset, as perf's VM Time Correlation does.
 *
 * Per AUX queue, a packet-only state machine follows the decisions of
 * perf 6.1's intel_pt_vm_time_correlation(): expected host TSC from the
 * last TMA plus MTC-accumulated CTC ticks, PIP.NR for guest/host, offsets
 * learned from guest TSCs in PSB+ after an earlier TSC of the same stream.
 *
 * Parallelism.  perf decodes queues one after another (in the pop order of
 * its auxtrace heap, all queues having ordinal 1) and shares one VMCS table,
 * so a queue can depend on offsets learned by earlier queues.  We decode
 * every queue concurrently against a private table ("speculation") and
 * then replay them in perf's order against the shared table.  A
 * speculative result is kept only if nothing it depended on differs: every
 * VMCS it touched was either untouched by earlier queues, or already known
 * to earlier queues with exactly the 7-byte offset this queue used for all
 * of that VMCS's TSCs.  Otherwise the queue is decoded again, sequentially,
 * against the shared table.  Either way the output equals perf's.
 */
#include "config.h"

#include <string.h>

#include "src/pt/pt-scan.h"
#include "vmcorr/vmcorr.h"
#include "vmcorr/session.h"

G_DEFINE_QUARK(vmcorr-error-quark, vmcorr_error)

#define SEVEN_BYTES VMCORR_SEVEN_BYTES
#define NO_VMCS VMCORR_NO_VMCS
#define AUX_WINDOW (1u << 20)      /* AUX bytes read at once (per queue being decoded) */
#define AUX_WINDOW_MIN 256u
#define LOOK_PIECE 4096u           /* lookahead past the window: read this much at a time */
#define MAP_CHUNK (8u << 20)       /* file bytes per mapping, shared by the queues being decoded */
#define MAP_READ (256u << 10)      /* largest read from a mapping: a chunk maps this much more */

const char *vmcorr_status_name(VmcorrStatus s)
{
	switch (s) {
	case VMCORR_OK: return "ok";
	case VMCORR_UNDETERMINED: return "undetermined";
	case VMCORR_INCONSISTENT: return "inconsistent";
	case VMCORR_ZERO: return "no-offset";
	case VMCORR_CHANGES: return "changes";
	}
	return "?";
}

void vmcorr_options_init(VmcorrOptions *o)
{
	memset(o, 0, sizeof(*o));
}

/* ------------------------------------------------------------ tables */

typedef struct {
	uint64_t vmcs;
	/* perf's VMCS info */
	uint64_t tsc_offset;
	gboolean reliable;
	gboolean seen;              /* looked up while decoding (not only given) */
	GArray *cands;              /* uint64_t: offsets of the epochs (vmtrace extension) */
	uint64_t ratio;             /* TSC scaling: guest = (host * ratio >> frac) + offset */
	guint frac;
	/* speculation bookkeeping: offsets this queue translated with */
	gboolean used_set, used_mixed, untranslated;
	uint64_t used7;
	/* statistics (per queue; summed at the end) */
	uint64_t n_guest_tsc, n_est;
	gboolean have_est;
	uint64_t est_first;
	int64_t est_lo, est_hi;     /* relative to est_first */
	gboolean have_time;
	uint64_t first_time;        /* host TSC of the first guest TSC */
	GArray *ests;               /* VmcorrEst: reliable estimates with their host time */
} Entry;

static void entry_free(gpointer p)
{
	Entry *e = p;

	if (e->cands)
		g_array_free(e->cands, TRUE);
	if (e->ests)
		g_array_free(e->ests, TRUE);
	g_free(e);
}

typedef struct {
	GHashTable *h;              /* vmcs -> Entry* */
	uint64_t dflt;              /* default offset for new entries (0: none) */
	uint64_t dflt_ratio;        /* default TSC scaling for new entries (0: none) */
	guint dflt_frac;
	const VmcorrOptions *opt;
} Table;

static Entry *table_findnew(Table *t, uint64_t vmcs);

/* A table as perf starts it: the command line's `off:vmcs` entries
 * (reliable unless 0) and its default offset for every other VMCS. */
static void table_init(Table *t, const VmcorrOptions *opt)
{
	memset(t, 0, sizeof(*t));
	t->h = g_hash_table_new_full(g_int64_hash, g_int64_equal, NULL, entry_free);
	t->dflt = opt && opt->have_default ? opt->default_offset : 0;
	t->opt = opt;
	for (guint i = 0; opt && opt->scales && i < opt->scales->len; i++) {
		const VmcorrScale *sc = &g_array_index(opt->scales, VmcorrScale, i);

		if (!sc->vmcs) {
			t->dflt_ratio = sc->ratio;
			t->dflt_frac = sc->frac;
		}
	}
	for (guint i = 0; opt && opt->offsets && i < opt->offsets->len; i++) {
		const VmcorrOffset *o = &g_array_index(opt->offsets, VmcorrOffset, i);
		Entry *e = table_findnew(t, o->vmcs);

		e->tsc_offset = o->offset;
		e->reliable = o->offset != 0;
	}
	/* epochs: every offset of a VMCS is a candidate, the first is the default */
	for (guint i = 0; opt && opt->epochs && i < opt->epochs->len; i++) {
		const VmcorrOffset *o = &g_array_index(opt->epochs, VmcorrOffset, i);
		Entry *e = table_findnew(t, o->vmcs);

		if (!e->cands) {
			e->cands = g_array_new(FALSE, FALSE, sizeof(uint64_t));
			e->tsc_offset = o->offset;
			e->reliable = TRUE;
		}
		g_array_append_val(e->cands, o->offset);
	}
}

/* The state an entry has before any queue touched it. */
static void table_initial(const Table *t, const VmcorrOptions *opt, uint64_t vmcs, uint64_t *off, gboolean *rel)
{
	*off = t->dflt;
	for (guint i = 0; opt && opt->offsets && i < opt->offsets->len; i++) {
		const VmcorrOffset *o = &g_array_index(opt->offsets, VmcorrOffset, i);

		if (o->vmcs == vmcs)
			*off = o->offset;
	}
	*rel = *off != 0;
}

static void table_clear(Table *t)
{
	if (t->h)
		g_hash_table_destroy(t->h);
	t->h = NULL;
}

static Entry *table_get(Table *t, uint64_t vmcs)
{
	return g_hash_table_lookup(t->h, &vmcs);
}

static Entry *table_findnew(Table *t, uint64_t vmcs)
{
	Entry *e = table_get(t, vmcs);

	if (!e) {
		e = g_new0(Entry, 1);
		e->vmcs = vmcs;
		e->tsc_offset = t->dflt;
		e->reliable = t->dflt != 0;
		e->ratio = t->dflt_ratio;
		e->frac = t->dflt_frac;
		for (guint i = 0; t->opt && t->opt->scales && i < t->opt->scales->len; i++) {
			const VmcorrScale *sc = &g_array_index(t->opt->scales, VmcorrScale, i);

			if (sc->vmcs == vmcs) {
				e->ratio = sc->ratio;
				e->frac = sc->frac;
			}
		}
		g_hash_table_insert(t->h, &e->vmcs, e);
	}
	return e;
}

/* perf's intel_pt_findnew_vmcs_info: VMCS 0 ("none seen") only with a default. */
static Entry *table_lookup_vmcs(Table *t, uint64_t vmcs)
{
	Entry *e;

	if (!vmcs && !t->dflt)
		return NULL;
	e = table_findnew(t, vmcs);
	e->seen = TRUE;
	return e;
}

/* ------------------------------------------------------- queue decoder */

typedef struct {
	gboolean tsc, tma, pip, vmcs, psbend;
	uint16_t tma_ctc, tma_fc;
	uint8_t pip_nr;
	uint64_t vmcs_payload;
	uint64_t ctc_delta;
	uint32_t last_ctc;
} Look;

typedef struct {
	uint64_t vmcs, offset;
	gboolean reliable;
} Assign;

/* Where a worker gets AUX bytes from: the file mapped read-only in
 * chunks of MAP_CHUNK bytes (chunk k maps [k * MAP_CHUNK, (k + 1) *
 * MAP_CHUNK + MAP_READ), so that every read of up to MAP_READ bytes
 * starting in it lies in it), shared by all the queues being decoded: the
 * queues' buffers interleave in the file, and a window per queue mapped
 * every byte once per queue (an mmap and a munmap per 4 MiB and queue,
 * and their page-table work, 3-4% of the dry run's time).  A chunk is
 * unmapped when no queue reads in it any more, so at most one chunk per
 * queue being decoded is mapped (peak RSS).  No copy: pread's copy from
 * the page cache was 10-20% of the user time.  Mapped bytes are read under
 * vt_perf_file_guarded so that a file that shrinks gives an error instead
 * of SIGBUS; when mapping fails or a test asks for small windows, a
 * reusable buffer is read with pread. */
typedef struct {
	uint64_t k;                 /* chunk number (the hash key) */
	VtPerfWindow w;
	guint refs;                 /* AuxBufs reading in it */
} MapChunk;

typedef struct {
	const VtPerfFile *f;
	GMutex lock;
	GHashTable *chunks;         /* &k -> MapChunk, mapped ones only */
} AuxMaps;

static void auxmaps_init(AuxMaps *m, const VtPerfFile *f)
{
	m->f = f;
	g_mutex_init(&m->lock);
	m->chunks = g_hash_table_new(g_int64_hash, g_int64_equal);
}

/* (every AuxBuf has let go of its chunk by now) */
static void auxmaps_clear(AuxMaps *m)
{
	g_assert(g_hash_table_size(m->chunks) == 0);
	g_hash_table_destroy(m->chunks);
	g_mutex_clear(&m->lock);
}

/* Let go of chunk c; unmapped (outside the lock) when nobody reads in it. */
static void auxmaps_drop(AuxMaps *m, MapChunk *c)
{
	if (!c)
		return;
	g_mutex_lock(&m->lock);
	if (--c->refs) {
		g_mutex_unlock(&m->lock);
		return;
	}
	g_hash_table_remove(m->chunks, &c->k);
	g_mutex_unlock(&m->lock);
	vt_perf_window_unmap(&c->w);
	g_free(c);
}

/* The chunk holding the read of n <= MAP_READ bytes at off, mapped if it
 * was not, with a reference for the caller; NULL if it cannot be mapped. */
static MapChunk *auxmaps_take(AuxMaps *m, uint64_t off, gsize n)
{
	uint64_t k = off / MAP_CHUNK;
	MapChunk *c;

	g_mutex_lock(&m->lock);
	c = g_hash_table_lookup(m->chunks, &k);
	if (!c) {
		c = g_new0(MapChunk, 1);
		c->k = k;
		if (!vt_perf_window_map(m->f, &c->w, k * MAP_CHUNK, off + n - k * MAP_CHUNK,
					(uint64_t)MAP_CHUNK + MAP_READ, NULL)) {
			g_mutex_unlock(&m->lock);
			g_free(c);
			return NULL;
		}
		g_hash_table_insert(m->chunks, &c->k, c);
	}
	c->refs++;
	g_mutex_unlock(&m->lock);
	return c;
}
/* Tiny AUX buffers (a million one-packet queues, ...) are read through a
 * worker's 16 KiB copy of the file around them: one pread serves the
 * neighbouring records too (queues are decoded in index order, which is
 * mostly file order). */
#define NEAR_MAX 512u
#define NEAR_SIZE (16u << 10)
typedef struct {
	guint8 p[NEAR_SIZE];
	uint64_t off;
	gsize len;
} Near;

typedef struct {
	AuxMaps *maps;              /* the shared chunks, or NULL: read */
	MapChunk *chunk;            /* the chunk held, or NULL */
	gboolean mapped;            /* read through maps */
	guint8 *p;
	gsize cap;
	gsize window;               /* largest read (AUX_WINDOW unless a test asks) */
	Near *near;                 /* the worker's, or NULL */
	guint64 *progress;          /* VmcorrOptions.progress (the workers' buffers; NULL: not counted) */
} AuxBuf;

/* n bytes at off of the file, from ab's window or read into its buffer;
 * NULL with an error if they cannot be read. */
static const guint8 *auxbuf_get(AuxBuf *ab, const VtPerfFile *f, uint64_t off, gsize n, GError **error);

/* n bytes at off, through the cache when they are few. */
static gboolean aux_read(const VtPerfFile *f, Near *nr, uint64_t off, guint8 *dst, gsize n, GError **error)
{
	uint64_t size = vt_perf_file_size(f);
	gsize len;

	if (!nr || n > NEAR_MAX)
		return vt_perf_file_read(f, off, dst, n, error);
	/* (tests compare with and without: a window set by the caller skips it) */
	if (off < nr->off || off - nr->off + n > nr->len) {
		len = (gsize)MIN((uint64_t)NEAR_SIZE, size - MIN(off, size));
		nr->len = 0;
		if (len < n)
			return vt_perf_file_read(f, off, dst, n, error);    /* (its error) */
		if (!vt_perf_file_read(f, off, nr->p, len, error))
			return FALSE;
		nr->off = off;
		nr->len = len;
	}
	memcpy(dst, nr->p + (off - nr->off), n);
	return TRUE;
}

/* The scanner runs over a window of the open AUX buffer: all of it when it
 * fits, else `window` bytes at a time, moved along as the scan goes (the
 * scanner's state carries over; lookaheads and PSB searches that run into
 * the window's end read on - see look_next and cur_sync - so the result
 * is the same as over the whole buffer). */
typedef struct {
	guint bi;                   /* next buffer */
	gboolean open;
	const VmcorrBuffer *b;
	VtPtScanner sc;
	AuxBuf *buf;
	uint64_t ws;                /* offset in b of the window's first byte */
	gboolean final;             /* the window reaches the end of b */
	gsize margin;               /* move the window when fewer bytes are left */
	guint8 stitch[64];
	gsize carry;                /* bytes of a cut packet carried over */
} Cursor;

typedef struct {
	const VmcorrSession *s;
	const VmcorrQueue *q;
	Table *table;               /* perf's VMCS table (private or shared) */
	Table stats;                /* this queue's statistics, by VMCS */
	GArray *assigns;            /* Assign: every change of an entry, in order */
	GPtrArray *errors;          /* perf ERROR lines (once each) */
	gboolean shared;            /* decoding against the shared table */
	GPtrArray *lines;           /* shared mode: where to print VMCS lines */

	/* timing (perf's names) */
	uint64_t timestamp, tsc_timestamp, ctc_timestamp, ref_timestamp, buf_timestamp;
	uint64_t ctc_delta;
	uint32_t last_ctc;
	uint32_t last_mtc;
	gboolean have_tma;
	uint64_t ctc_rem_mask;
	guint mtc_shift;
	uint64_t n, d, mult;

	/* context */
	gboolean in_psb, pge, continuous, same_buf, reliable_flag;
	gboolean anchor_host;       /* the last TSC was a host TSC */
	uint64_t tolerance;         /* largest spread of one offset's estimates (VmcorrResult) */
	uint8_t pip_nr;
	uint64_t vmcs;
	uint64_t last_reliable_timestamp;
	Look psb;                   /* lookahead data of the current PSB+ */
	gboolean oor_printed, unknown_vmcs_printed;

	Cursor cur;
	GArray *patches;            /* VmcorrPatch: translated TSC payloads (apply) */
	gboolean stitching;         /* decoding a packet split across buffers */
	gboolean ooc_unknown;       /* an out-of-context TSC met a VMCS of unknown offset */

	/* counters */
	uint64_t n_tsc, n_guest, n_host, n_bad;
	uint64_t first_bad;         /* file offset of the first bad packet */
	GError *io_error;           /* reading the AUX data failed: decoding stopped */
} Dec;

static void dec_io_failed(Dec *d, GError *e)
{
	if (d->io_error)
		g_error_free(e);
	else
		d->io_error = e;
	d->cur.open = FALSE;
	d->cur.bi = d->q->nbufs;
}

/* Lookahead over the packets after a scanner's position, reading past the
 * cursor's window when it gets there (never past a stitched packet). */
typedef struct {
	Dec *d;
	VtPtScanner t;
	guint8 piece[LOOK_PIECE];
} LookIter;

static void look_init(LookIter *li, Dec *d, const VtPtScanner *sc)
{
	li->d = d;
	li->t = *sc;
}

static int look_next(LookIter *li, VtPtPacket *p)
{
	int r = vt_pt_scan_next(&li->t, p);
	const VmcorrBuffer *b = li->d->cur.b;
	uint64_t at, wend;
	gsize n;
	GError *e = NULL;

	if (r != -vt_pte_eos || li->d->stitching || !b || li->d->io_error)
		return r;
	at = vt_pt_scan_offset(&li->t) - b->payload_off;
	wend = li->t.base + (uint64_t)(li->t.end - li->t.begin) - b->payload_off;
	if (wend >= b->size)
		return r;               /* the end of the AUX buffer */
	n = (gsize)MIN((uint64_t)LOOK_PIECE, b->size - at);
	if (!vt_perf_file_read(li->d->s->f, b->payload_off + at, li->piece, n, &e)) {
		dec_io_failed(li->d, e);
		return r;
	}
	li->t.begin = li->t.pos = li->piece;
	li->t.end = li->piece + n;
	li->t.base = b->payload_off + at;
	return vt_pt_scan_next(&li->t, p);
}

static void dec_error_once(Dec *d, const char *msg)
{
	for (guint i = 0; i < d->errors->len; i++)
		if (strcmp(d->errors->pdata[i], msg) == 0)
			return;
	g_ptr_array_add(d->errors, g_strdup(msg));
}

static uint64_t ctc_to_tsc(const Dec *d, uint64_t ctc)
{
	if (d->mult)
		return ctc * d->mult;
	return (ctc / d->d) * d->n + ((ctc % d->d) * d->n) / d->d;
}

static uint64_t tsc_8b(uint64_t t, uint64_t ref)
{
	t |= ref & (0xffULL << 56);
	if (t < ref) {
		if (ref - t > (1ULL << 55))
			t += 1ULL << 56;
	} else if (t - ref > (1ULL << 55)) {
		t -= 1ULL << 56;
	}
	return t;
}

static gboolean in_range(const Dec *d, uint64_t t)
{
	/* perf computes a fallback upper bound when buf_timestamp is 0 but
	 * then compares against buf_timestamp anyway: reproduced. */
	return t >= d->last_reliable_timestamp && t < d->buf_timestamp;
}

static void calc_tsc_timestamp(Dec *d, uint64_t payload)
{
	uint64_t ts;
	gboolean bad = FALSE;

	d->have_tma = FALSE;
	if (d->ref_timestamp) {
		ts = tsc_8b(payload, d->ref_timestamp);
		d->tsc_timestamp = ts;
		d->timestamp = ts;
		d->ref_timestamp = 0;
	} else if (d->timestamp) {
		ts = payload | (d->timestamp & (0xffULL << 56));
		d->tsc_timestamp = ts;
		if (ts < d->timestamp && d->timestamp - ts < 0x10000)
			ts = d->timestamp;      /* backwards slip suppressed */
		if (ts < d->timestamp) {
			if (!d->buf_timestamp || ts + (1ULL << 56) < d->buf_timestamp) {
				ts += 1ULL << 56;
				d->tsc_timestamp = ts;
			} else {
				ts = d->timestamp;
				bad = TRUE;
			}
		}
		if ((bad || !in_range(d, ts)) && !d->oor_printed) {
			d->oor_printed = TRUE;
			dec_error_once(d, "Timestamp out of range");
		}
		d->timestamp = ts;
	}
}

static void calc_tma(Dec *d, uint16_t ctc, uint16_t fc)
{
	uint32_t rem = ctc & d->ctc_rem_mask;

	if (!d->d)
		return;
	d->last_mtc = (ctc >> d->mtc_shift) & 0xff;
	d->last_ctc = ctc - rem;
	d->ctc_timestamp = d->tsc_timestamp - fc - ctc_to_tsc(d, rem);
	d->ctc_delta = 0;
	d->have_tma = TRUE;
}

static void calc_mtc(Dec *d, uint8_t mtc)
{
	uint32_t delta;
	uint64_t ts;

	if (!d->have_tma)
		return;
	/* (mtc_shift > 8 high-bit fix-up not needed: MTC periods are <= 15
	 * but perf only fixes up for shifts > 8; we reproduce it below.) */
	if (mtc > d->last_mtc)
		delta = mtc - d->last_mtc;
	else
		delta = mtc + 256 - d->last_mtc;
	d->ctc_delta += (uint64_t)delta << d->mtc_shift;
	ts = d->ctc_timestamp + ctc_to_tsc(d, d->ctc_delta);
	if (ts >= d->timestamp)
		d->timestamp = ts;
	d->last_mtc = mtc;
}

static uint64_t expected_tsc(const Dec *d, const Look *l)
{
	uint64_t last_mtc_ctc = (uint64_t)l->last_ctc + l->ctc_delta;
	uint64_t delta = (uint64_t)(int64_t)(int16_t)((uint16_t)l->tma_ctc - (uint16_t)last_mtc_ctc);

	return d->ctc_timestamp + ctc_to_tsc(d, l->ctc_delta + delta) + l->tma_fc;
}

/* Record which offset this queue translated a TSC of `e` with. */
static void note_used(Entry *e, gboolean translated, uint64_t off)
{
	if (!translated) {
		e->untranslated = TRUE;
		return;
	}
	off &= SEVEN_BYTES;
	if (!e->used_set) {
		e->used_set = TRUE;
		e->used7 = off;
	} else if (e->used7 != off) {
		e->used_mixed = TRUE;
	}
}

/* guest TSC -> host TSC: (p - off) mod 2^56, and with TSC scaling the exact
 * inverse of guest = (host * ratio >> frac) + off: the smallest host value
 * that scales to it (unique when ratio >= 2^frac). */
/* Record a translation decision for `info`, in the table (speculation) and
 * in this queue's statistics (single-pass correction). */
static void track(Dec *d, Entry *info, gboolean translated, uint64_t off);

static uint64_t translate(const Entry *info, uint64_t p, uint64_t off)
{
	uint64_t x = (p - off) & SEVEN_BYTES;

	if (info && info->ratio) {
		unsigned __int128 num = (unsigned __int128)x << info->frac;

		x = (uint64_t)((num + info->ratio - 1) / info->ratio) & SEVEN_BYTES;
	}
	return x;
}

/* host TSC -> guest TSC without offset (TSC scaling) */
static uint64_t scale_tsc(const Entry *info, uint64_t host)
{
	if (!info || !info->ratio)
		return host;
	return (uint64_t)(((unsigned __int128)host * info->ratio) >> info->frac);
}

/* The offset to translate with: with several epochs, the one nearest to
 * this packet's own estimate. */
static uint64_t pick_offset(const Entry *info, gboolean have_est, uint64_t est)
{
	uint64_t best = info->tsc_offset, bestd = G_MAXUINT64;

	if (!info->cands || !have_est)
		return best;
	for (guint i = 0; i < info->cands->len; i++) {
		uint64_t c = g_array_index(info->cands, uint64_t, i);
		uint64_t dd = (uint64_t)ABS((int64_t)(((est - c) & SEVEN_BYTES) << 8) >> 8);

		if (dd < bestd) {
			bestd = dd;
			best = c;
		}
	}
	return best;
}

/* An estimate measured from a translated guest TSC can only repeat the
 * offset used for it (it hides a change); when it differs from that offset
 * by more than the tolerance, it saw one and counts. */
static gboolean contradicts(const Dec *d, const Entry *info, uint64_t est)
{
	uint64_t o;

	if (!info || !info->tsc_offset)
		return FALSE;
	o = pick_offset(info, TRUE, est);
	return (uint64_t)ABS((int64_t)(((est - o) & SEVEN_BYTES) << 8) >> 8) > d->tolerance;
}

static void assign(Dec *d, Entry *info, uint64_t off, gboolean rel)
{
	if (info->tsc_offset == off && info->reliable == rel)
		return;
	if (d->shared && info->tsc_offset != off)
		g_ptr_array_add(d->lines, g_strdup_printf("VMCS: %#" G_GINT64_MODIFIER "x  TSC Offset %#"
							  G_GINT64_MODIFIER "x", info->vmcs, off));
	info->tsc_offset = off;
	info->reliable = rel;
	if (!d->shared) {
		Assign a = { info->vmcs, off, rel };

		g_array_append_val(d->assigns, a);
	}
}

static void stats_guest(Dec *d, uint64_t vmcs, gboolean est_ok, uint64_t est, uint64_t host_time)
{
	Entry *st = table_findnew(&d->stats, vmcs);

	st->n_guest_tsc++;
	if (!st->have_time) {
		st->have_time = TRUE;
		st->first_time = host_time;
	}
	if (!est_ok)
		return;
	if (!st->ests)
		st->ests = g_array_new(FALSE, FALSE, sizeof(VmcorrEst));
	g_array_append_val(st->ests, ((VmcorrEst){ host_time, est }));
	st->n_est++;
	if (!st->have_est) {
		st->have_est = TRUE;
		st->est_first = est;
		st->est_lo = st->est_hi = 0;
	} else {
		int64_t dv = (int64_t)(est - st->est_first);

		st->est_lo = MIN(st->est_lo, dv);
		st->est_hi = MAX(st->est_hi, dv);
	}
}

static void track(Dec *d, Entry *info, gboolean translated, uint64_t off)
{
	note_used(info, translated, off);
	note_used(table_findnew(&d->stats, info->vmcs), translated, off);
}

/* perf's intel_pt_vm_tm_corr_first_tsc */
static uint64_t first_tsc(Dec *d, const Look *l, Entry *info, uint64_t p, uint64_t host_tsc, uint64_t vmcs)
{
	if (!d->in_psb) {
		dec_error_once(d, "ERROR: First TSC is not in PSB+");
		return p;
	}
	if (l->pip) {
		if (l->pip_nr) {
			d->n_guest++;
			if (info && info->tsc_offset) {
				stats_guest(d, vmcs, FALSE, 0, translate(info, p, info->tsc_offset));
				track(d, info, TRUE, info->tsc_offset);
				p = translate(info, p, info->tsc_offset);
				d->reliable_flag = info->reliable;
				d->anchor_host = FALSE;
			} else {
				if (info) {
					stats_guest(d, vmcs, FALSE, 0, p);
					track(d, info, FALSE, 0);
				}
				dec_error_once(d, "ERROR: First TSC, unknown TSC Offset");
				d->reliable_flag = FALSE;
			}
		} else {
			d->n_host++;
			d->reliable_flag = TRUE;
			d->anchor_host = TRUE;
		}
		return p;
	}
	d->reliable_flag = FALSE;
	if (in_range(d, host_tsc)) {
		d->n_host++;
		return p;
	}
	if (info && info->tsc_offset) {
		d->n_guest++;
		d->anchor_host = FALSE;
		track(d, info, TRUE, info->tsc_offset);
		stats_guest(d, vmcs, FALSE, 0, translate(info, p, info->tsc_offset));
		return translate(info, p, info->tsc_offset);
	}
	if (info)
		track(d, info, FALSE, 0);   /* with the offset known it would be translated */
	dec_error_once(d, "ERROR: First TSC, no PIP, unknown TSC Offset");
	return p;
}

/* Look ahead (within this buffer) for a TMA after a TSC outside PSB+:
 * up to 16 MTC/CYC packets may come first. */
static void tma_lookahead(Dec *d, const VtPtScanner *sc, Look *l)
{
	LookIter li;
	VtPtPacket p;
	int n = 0;

	look_init(&li, d, sc);
	while (look_next(&li, &p) > 0) {
		if (p.type == VT_PT_PAD)
			continue;
		if (p.type == VT_PT_TMA) {
			l->tma = TRUE;
			l->tma_ctc = p.u.tma.ctc;
			l->tma_fc = p.u.tma.fc;
			return;
		}
		if ((p.type != VT_PT_MTC && p.type != VT_PT_CYC) || ++n > 16)
			return;
	}
}

/* perf's intel_pt_vm_tm_corr_tsc: returns the (possibly translated) payload */
static uint64_t vm_tm_corr_tsc(Dec *d, const VtPtScanner *sc, uint64_t p)
{
	Look local, *l;
	uint64_t vmcs, ref, host_tsc, expected, off;
	gboolean reliable = TRUE, assign_it = FALSE, assign_rel = FALSE;
	Entry *info;

	if (!d->in_psb) {
		memset(&local, 0, sizeof(local));
		local.ctc_delta = d->ctc_delta;
		local.last_ctc = d->last_ctc;
		if (d->pge) {
			/* in context: the last PIP (none yet: payload 0, host) */
			local.pip = TRUE;
			local.pip_nr = d->pip_nr;
		}
		tma_lookahead(d, sc, &local);
		l = &local;
	} else {
		l = &d->psb;
	}
	if (!l->tma) {
		dec_error_once(d, "ERROR: TSC without TMA");
		return p;
	}
	vmcs = l->vmcs ? l->vmcs_payload : d->vmcs;
	if (vmcs == NO_VMCS)
		vmcs = 0;
	info = table_lookup_vmcs(d->table, vmcs);
	ref = d->timestamp ? d->timestamp : d->buf_timestamp;
	host_tsc = tsc_8b(p, ref);

	if (!d->ctc_timestamp)
		return first_tsc(d, l, info, p, host_tsc, vmcs);

	expected = expected_tsc(d, l);
	off = host_tsc - scale_tsc(info, expected);

	if (l->pip) {
		if (l->pip_nr) {
			if (!info) {
				dec_error_once(d, "ERROR: Missing VMCS");
				d->n_guest++;
				d->reliable_flag = FALSE;
				d->anchor_host = FALSE;
				return translate(NULL, p, off);
			}
			goto guest;
		}
		d->n_host++;
		d->last_reliable_timestamp = host_tsc;
		d->reliable_flag = TRUE;
		d->anchor_host = TRUE;
		return p;
	}
	reliable = FALSE;
	if (info && !info->tsc_offset)
		d->ooc_unknown = TRUE;      /* the guess would differ with the offset known */
	if (d->in_psb) {
		if (!off) {
			d->n_host++;
			return p;
		}
		if (info && (off & SEVEN_BYTES) == (info->tsc_offset & SEVEN_BYTES))
			goto guest;
	}
	if (host_tsc >= expected && in_range(d, host_tsc)) {
		d->n_host++;
		d->reliable_flag = FALSE;
		return p;
	}
guest:
	d->n_guest++;
	/* statistics: estimates perf would call reliable, measured from a host
	 * TSC (after a guest TSC translated with a stale offset, the next
	 * estimate would repeat that offset and hide a change) */
	stats_guest(d, vmcs, l->pip && d->in_psb && d->reliable_flag && d->continuous && d->same_buf &&
		    (d->anchor_host || contradicts(d, info, off)), off, expected);
	d->anchor_host = FALSE;
	if (info && info->vmcs) {
		if (info->tsc_offset && info->reliable) {
			/* keep */
		} else if (d->in_psb && l->pip && d->reliable_flag && d->continuous && d->same_buf) {
			assign_it = TRUE;
			assign_rel = TRUE;
		} else if (d->in_psb && l->pip && d->same_buf) {
			assign_it = TRUE;
			assign_rel = FALSE;
		}
	}
	if (assign_it)
		assign(d, info, off, assign_rel);
	if (info && info->tsc_offset) {
		uint64_t o = pick_offset(info, TRUE, off);

		track(d, info, TRUE, o);
		p = translate(info, p, o);
		if (!info->reliable)
			reliable = FALSE;
	} else {
		reliable = FALSE;
		if (info) {
			char *m = g_strdup_printf("ERROR: Unknown TSC Offset for VMCS %#" G_GINT64_MODIFIER "x",
						  info->vmcs);

			dec_error_once(d, m);
			g_free(m);
		} else if (!d->unknown_vmcs_printed) {
			d->unknown_vmcs_printed = TRUE;
			dec_error_once(d, "ERROR: Unknown VMCS");
		}
		if (info)
			track(d, info, TRUE, off);
		p = translate(info, p, off);
	}
	d->reliable_flag = reliable;
	return p;
}

/* PSB+ lookahead: TSC/TMA/PIP/VMCS up to PSBEND. */
static void psb_lookahead(Dec *d, const VtPtScanner *sc)
{
	LookIter li;
	VtPtPacket p;
	Look *l = &d->psb;

	memset(l, 0, sizeof(*l));
	l->ctc_delta = d->ctc_delta;
	l->last_ctc = d->last_ctc;
	look_init(&li, d, sc);
	while (look_next(&li, &p) > 0) {
		switch (p.type) {
		case VT_PT_PAD: case VT_PT_MNT: case VT_PT_MODE_EXEC: case VT_PT_MODE_TSX:
		case VT_PT_MTC: case VT_PT_FUP: case VT_PT_CYC: case VT_PT_CBR:
			break;
		case VT_PT_TSC:
			l->tsc = TRUE;
			break;
		case VT_PT_TMA:
			l->tma = TRUE;
			l->tma_ctc = p.u.tma.ctc;
			l->tma_fc = p.u.tma.fc;
			break;
		case VT_PT_PIP:
			l->pip = TRUE;
			l->pip_nr = p.u.pip.nr;
			break;
		case VT_PT_VMCS:
			l->vmcs = TRUE;
			l->vmcs_payload = p.u.vmcs;
			break;
		case VT_PT_PSBEND:
			l->psbend = TRUE;
			return;
		default:
			return;
		}
	}
}

/* After OVF: PacketEn iff the first packet that is not CYC/MTC/TSC (looking
 * at no more than 16 of those) is a FUP. */
static gboolean ovf_fup_follows(Dec *d, const VtPtScanner *sc)
{
	LookIter li;
	VtPtPacket p;
	int n = 0;

	look_init(&li, d, sc);
	while (look_next(&li, &p) > 0) {
		if (p.type == VT_PT_PAD)
			continue;
		if (p.type == VT_PT_CYC || p.type == VT_PT_MTC || p.type == VT_PT_TSC) {
			if (++n > 16)
				return FALSE;
			continue;
		}
		return p.type == VT_PT_FUP;
	}
	return FALSE;
}

static void handle(Dec *d, VtPtScanner *sc, VtPtPacket *pkt)
{
	switch (pkt->type) {
	case VT_PT_PSB:
		psb_lookahead(d, sc);
		if (d->psb.tsc && !d->psb.psbend)
			dec_error_once(d, "ERROR: PSB without PSBEND");
		d->in_psb = d->psb.psbend;
		break;
	case VT_PT_PSBEND:
		d->in_psb = FALSE;
		break;
	case VT_PT_PIP:
		d->pip_nr = pkt->u.pip.nr;
		break;
	case VT_PT_VMCS:
		if (pkt->u.vmcs != NO_VMCS)
			d->vmcs = pkt->u.vmcs;
		break;
	case VT_PT_TNT_8: case VT_PT_TNT_64: case VT_PT_TIP: case VT_PT_TIP_PGE:
		d->pge = TRUE;
		break;
	case VT_PT_TIP_PGD:
		d->pge = FALSE;
		d->continuous = FALSE;
		break;
	case VT_PT_FUP:
		if (d->in_psb)
			d->pge = TRUE;
		break;
	case VT_PT_STOP:
		d->pge = FALSE;
		d->continuous = FALSE;
		d->have_tma = FALSE;
		break;
	case VT_PT_OVF:
		d->in_psb = FALSE;
		d->pge = ovf_fup_follows(d, sc);
		if (!d->pge)
			d->continuous = FALSE;
		break;
	case VT_PT_MTC:
		calc_mtc(d, pkt->u.mtc);
		break;
	case VT_PT_TMA:
		calc_tma(d, pkt->u.tma.ctc, pkt->u.tma.fc);
		break;
	case VT_PT_TSC: {
		uint64_t p;

		d->n_tsc++;
		p = vm_tm_corr_tsc(d, sc, pkt->u.tsc);
		/* perf writes translations into the mapped file, except for a
		 * TSC split across two buffers (decoded from a copy) */
		if (d->patches && p != pkt->u.tsc && !d->stitching) {
			VmcorrPatch pa = { pkt->offset + 1, p };

			g_array_append_val(d->patches, pa);
		}
		calc_tsc_timestamp(d, p);
		d->same_buf = TRUE;
		d->continuous = d->pge;
		break;
	}
	default:
		break;
	}
}

static void dec_init(Dec *d, const VmcorrSession *s, const VmcorrQueue *q, Table *table, gboolean shared,
		     GPtrArray *lines, gboolean opt_patches)
{
	memset(d, 0, sizeof(*d));
	d->s = s;
	d->q = q;
	d->table = table;
	d->shared = shared;
	d->lines = lines;
	table_init(&d->stats, NULL);
	d->patches = opt_patches ? g_array_new(FALSE, FALSE, sizeof(VmcorrPatch)) : NULL;
	d->assigns = g_array_new(FALSE, FALSE, sizeof(Assign));
	d->errors = g_ptr_array_new_with_free_func(g_free);
	d->n = s->tsc_ctc_n;
	d->d = s->tsc_ctc_d;
	d->mult = (d->d && d->n % d->d == 0) ? d->n / d->d : 0;
	d->mtc_shift = s->mtc_period;
	d->ctc_rem_mask = (1u << d->mtc_shift) - 1;
	d->vmcs = NO_VMCS;
}

static void dec_free(Dec *d)
{
	table_clear(&d->stats);
	if (d->assigns)
		g_array_free(d->assigns, TRUE);
	if (d->errors)
		g_ptr_array_free(d->errors, TRUE);
	if (d->patches)
		g_array_free(d->patches, TRUE);
	g_clear_error(&d->io_error);
}

/* ------------------------------------------------------- queue cursor
 *
 * A queue is decoded buffer by buffer.  Consecutive buffers form one stream
 * (full-trace mode); a packet split across two buffers is decoded from a
 * small stitch buffer, as perf does.  The cursor is resumable so that one
 * thread can interleave two queues (dec_run_pair). */

/* Read the window of the open buffer that starts `back` bytes before
 * offset `at` of it, and put the scanner at `at` (its IP/BIP state carries
 * over).  FALSE (decoding stops) if the file cannot be read. */
static gboolean cur_fill(Dec *d, uint64_t at, gsize back)
{
	Cursor *c = &d->cur;
	const VmcorrBuffer *b = c->b;
	uint64_t ws = at - back;
	gsize n = (gsize)MIN((uint64_t)c->buf->window, b->size - ws);
	const guint8 *p;
	GError *e = NULL;

	p = auxbuf_get(c->buf, d->s->f, b->payload_off + ws, n, &e);
	if (!p) {
		dec_io_failed(d, e);
		return FALSE;
	}
	if (c->buf->progress && n > back)
		__atomic_add_fetch(c->buf->progress, n - back, __ATOMIC_RELAXED);
	c->ws = ws;
	c->final = ws + n == b->size;
	c->sc.begin = p;
	c->sc.end = p + n;
	c->sc.pos = p + back;
	c->sc.base = b->payload_off + ws;
	return TRUE;
}

/* Offset in the open buffer of a position in the window. */
static inline uint64_t cur_at(const Cursor *c, const guint8 *pos)
{
	return c->ws + (uint64_t)(pos - c->sc.begin);
}

/* Move the window to the scanner's position, keeping the 16 bytes before
 * it (vt_pt_scan_sync_forward looks back up to 15). */
static gboolean cur_slide(Dec *d)
{
	uint64_t at = cur_at(&d->cur, d->cur.sc.pos);

	return cur_fill(d, at, (gsize)MIN(at, 16));
}

/* vt_pt_scan_sync_forward over the whole buffer: a PSB is the last 16
 * bytes of a run of "02 82" pairs, so one found at the window's end (or
 * none) is decided only with the bytes after it. */
static int cur_sync(Dec *d, int at_ok)
{
	Cursor *c = &d->cur;

	for (;;) {
		int r = vt_pt_scan_sync_forward(&c->sc, at_ok);
		uint64_t at;

		if (c->final || (r == 0 && c->sc.end - c->sc.pos >= 18))
			return r;
		/* found near the end: read on from it; none: from the last 16
		 * bytes, which may start one */
		at = cur_at(c, r == 0 ? c->sc.pos : c->sc.end - 16);
		if (!cur_fill(d, at, (gsize)MIN(at, 16)))
			return -vt_pte_nosync;
		at_ok = 1;
	}
}

/* Open the next buffer of the queue; FALSE when there is none left. */
static gboolean cur_open_next(Dec *d)
{
	Cursor *c = &d->cur;

	while (c->bi < d->q->nbufs) {
		const VmcorrBuffer *b = &d->s->bufs[d->q->first + c->bi];
		gboolean consecutive = c->bi > 0 && !d->s->snapshot;
		const guint8 *data;
		VtPtPacket pkt;

		c->bi++;
		c->b = b;
		if (!cur_fill(d, 0, 0))
			return FALSE;
		data = c->sc.begin;
		d->buf_timestamp = b->reference;
		if (!consecutive) {
			d->timestamp = 0;
			d->have_tma = FALSE;
			d->same_buf = FALSE;
			d->ref_timestamp = b->reference;
			c->carry = 0;
		}
		vt_pt_scan_init(&c->sc, data, (gsize)(c->sc.end - data), b->payload_off);
		if (c->carry) {
			/* finish the packet cut at the end of the previous buffer */
			gsize take = MIN((gsize)(c->sc.end - data), sizeof(c->stitch) - c->carry - 16);
			VtPtScanner st;
			int r;

			memcpy(c->stitch + c->carry, data, take);
			memset(c->stitch + c->carry + take, 0, 16);
			vt_pt_scan_init(&st, c->stitch, c->carry + take, 0);
			r = vt_pt_scan_next(&st, &pkt);
			if (r > 0 && (gsize)r > c->carry) {
				/* lookahead sees nothing beyond the stitched packet */
				vt_pt_scan_init(&st, c->stitch, r, 0);
				vt_pt_scan_next(&st, &pkt);
				d->stitching = TRUE;
				handle(d, &st, &pkt);
				d->stitching = FALSE;
				c->sc.pos += r - c->carry;
			} else {
				d->n_bad++;
			}
			c->carry = 0;
		}
		if (!consecutive) {
			if (cur_sync(d, 1) < 0) {
				if (d->io_error)
					return FALSE;
				continue;
			}
			if (!d->timestamp)
				d->timestamp = 1;
		}
		c->open = TRUE;
		return TRUE;
	}
	return FALSE;
}

static void cur_close(Dec *d)
{
	d->cur.open = FALSE;
}

/* Is there something left to decode?  Opens buffers as needed. */
static inline gboolean dec_ready(Dec *d)
{
	return !d->io_error && (d->cur.open || cur_open_next(d));
}

/* Decode with `buf` as the read buffer. */
static void dec_attach(Dec *d, AuxBuf *buf)
{
	d->cur.buf = buf;
	d->cur.margin = MIN((gsize)64 << 10, buf->window / 4);
}

/* A window of `window` bytes read with pread (tests), or 0: mapped
 * (through maps) unless `pread`. */
static void auxbuf_init(AuxBuf *b, AuxMaps *maps, gsize window, gboolean pread)
{
	b->maps = maps;
	b->chunk = NULL;
	b->mapped = !window && !pread;
	b->p = NULL;
	b->cap = 0;
	b->window = window ? MAX(window, AUX_WINDOW_MIN) : b->mapped ? MAP_READ : AUX_WINDOW;
	b->near = NULL;
	b->progress = NULL;
}

static void auxbuf_free(AuxBuf *b)
{
	auxmaps_drop(b->maps, b->chunk);
	b->chunk = NULL;
	g_free(b->p);
}

static const guint8 *auxbuf_get(AuxBuf *ab, const VtPerfFile *f, uint64_t off, gsize n, GError **error)
{
	const guint8 *p;

	if (ab->mapped) {
		if (ab->chunk && (p = vt_perf_window_at(&ab->chunk->w, off, n)))
			return p;
		auxmaps_drop(ab->maps, ab->chunk);
		ab->chunk = n <= MAP_READ ? auxmaps_take(ab->maps, off, n) : NULL;
		if (ab->chunk && (p = vt_perf_window_at(&ab->chunk->w, off, n)))
			return p;
		auxmaps_drop(ab->maps, ab->chunk);
		ab->chunk = NULL;
		ab->mapped = FALSE;        /* cannot be mapped: read it */
		ab->window = MIN(ab->window, AUX_WINDOW);
		n = MIN(n, ab->window);
	}
	if (ab->cap < n) {
		g_free(ab->p);
		ab->p = g_malloc(n);
		ab->cap = n;
	}
	return aux_read(f, ab->near, off, ab->p, n, error) ? ab->p : NULL;
}

/* Decode and handle one packet of the open buffer; closes the buffer at
 * its end. */
static inline void dec_step(Dec *d)
{
	Cursor *c = &d->cur;
	VtPtPacket pkt;
	int r;

	if (G_UNLIKELY(!c->final && (gsize)(c->sc.end - c->sc.pos) < c->margin) && !cur_slide(d))
		return;
	r = vt_pt_scan_next_inline(&c->sc, &pkt);
	if (G_UNLIKELY(r < 0)) {
		if (r == -vt_pte_eos) {
			gsize left = c->sc.end - c->sc.pos;

			if (!c->final) {        /* (the margin makes this rare) */
				cur_slide(d);
				return;
			}

			if (left && left < 32) {
				memcpy(c->stitch, c->sc.pos, left);
				c->carry = left;
			}
			cur_close(d);
			return;
		}
		/* bad packet: perf resynchronises at the next PSB */
		if (!d->n_bad++)
			d->first_bad = pkt.offset;
		d->in_psb = FALSE;
		d->pge = FALSE;
		d->continuous = FALSE;
		if (cur_sync(d, 0) < 0)
			cur_close(d);
		return;
	}
	handle(d, &c->sc, &pkt);
}

/* MTCs may be skipped (accumulated) while a TMA is known, as calc_mtc
 * would then only add up their ticks; mtc_shift > 8 needs perf's fix-up.
 * PIPs may be skipped too: handle() only keeps the last NR bit, which
 * nothing reads before the next packet that stops the skipping.  And,
 * outside PSB+, a TIP.PGD ... TIP.PGE stretch with only such packets in
 * between (an exit to user space of an idle guest): handle() would turn
 * PacketEn off and on again and clear `continuous`, nothing else. */
static inline VtPtMtcAcc *mtc_acc_begin(Dec *d, VtPtMtcAcc *acc)
{
	if (!d->have_tma || d->mtc_shift > 8)
		return NULL;
	acc->last = d->last_mtc;
	acc->ticks = 0;
	acc->count = 0;
	acc->skip_pip = 1;
	acc->pip_count = 0;
	acc->skip_pgd = !d->in_psb;
	acc->pgd_count = 0;
	return acc;
}

/* Apply skipped MTCs: the same state calc_mtc leaves after each of them
 * (its timestamp update is monotonic, so the last one decides); and the
 * last skipped PIP, as handle() would. */
static inline void mtc_acc_end(Dec *d, const VtPtMtcAcc *acc)
{
	uint64_t ts;

	if (!acc)
		return;
	if (acc->pip_count)
		d->pip_nr = acc->pip_nr;
	if (acc->pgd_count)
		d->continuous = FALSE;
	if (!acc->count)
		return;
	d->ctc_delta += acc->ticks << d->mtc_shift;
	d->last_mtc = acc->last;
	ts = d->ctc_timestamp + ctc_to_tsc(d, d->ctc_delta);
	if (ts >= d->timestamp)
		d->timestamp = ts;
}

/* While PacketEn is known, TNT/TIP/FUP/PAD/CYC change nothing here (nor
 * MODE; MTC and PIP go through the accumulator).  While it is off (after
 * TIP.PGD: idle guests' exits to user space), PAD/CYC/MODE/MTC/PIP still
 * change nothing but through the accumulator; TNT, TIP and TIP.PGE would
 * set it, FUP in PSB+ too, so they stop that skipping. */
static inline void dec_skip(Dec *d)
{
	VtPtMtcAcc acc, *a = mtc_acc_begin(d, &acc);

	if (d->pge)
		vt_pt_scan_skip_flow(&d->cur.sc, a);
	else
		vt_pt_scan_skip_timing(&d->cur.sc, a);
	mtc_acc_end(d, a);
}

/* Decode one queue to the end. */
static void dec_run(Dec *d)
{
	while (dec_ready(d)) {
		dec_skip(d);
		dec_step(d);
	}
}

/* Decode two queues to the end, interleaved: skipping control-flow
 * packets is bound by load latency, and two independent streams overlap. */
static void dec_run_pair(Dec *a, Dec *b)
{
	while (dec_ready(a) && dec_ready(b)) {
		int stopped = 3;

		if (a->pge && b->pge) {
			VtPtMtcAcc acca, accb, *pa = mtc_acc_begin(a, &acca), *pb = mtc_acc_begin(b, &accb);

			stopped = vt_pt_scan_skip_flow2(&a->cur.sc, pa, &b->cur.sc, pb);
			mtc_acc_end(a, pa);
			mtc_acc_end(b, pb);
		} else {
			dec_skip(a);
			dec_skip(b);
		}
		if (stopped & 1)
			dec_step(a);
		if (stopped & 2)
			dec_step(b);
	}
	dec_run(a);
	dec_run(b);
}

/* ------------------------------------------------------ perf's queue order */

/* Order in which perf's auxtrace min-heap pops n queues that all have
 * ordinal 1 (inserted in index order): on ties the sift-down prefers the
 * right child. */
static void perf_queue_order(guint n, guint *order)
{
	guint *heap = g_new(guint, MAX(n, 1));
	guint cnt = 0;

	for (guint i = 0; i < n; i++)
		heap[cnt++] = i;   /* equal ordinals: sift-up never moves */
	for (guint k = 0; k < n; k++) {
		guint pos = 0;

		order[k] = heap[0];
		cnt--;
		for (;;) {
			guint left = 2 * pos + 1, right = left + 1;

			if (left >= cnt + 1)
				break;
			if (right >= cnt + 1) {
				heap[pos] = heap[left];
				goto popped;
			}
			/* left.ordinal < right.ordinal is never true on ties */
			heap[pos] = heap[right];
			pos = right;
		}
		/* move the last element into the hole (sift-up is a no-op on ties) */
		heap[pos] = heap[cnt];
popped:
		;
	}
	g_free(heap);
}

/* --------------------------------------------------------------- driver */

/* A queue's speculative decode: the decoder and its private table.  Made
 * by the worker that decodes the queue, and kept only when it found
 * something (qdec_keep): memory does not grow with queues that hold
 * nothing. */
typedef struct {
	Dec d;
	Table table;
} QDec;

static QDec *qdec_new(const VmcorrSession *s, const VmcorrQueue *q, const VmcorrOptions *opt, uint64_t tol)
{
	QDec *x = g_new0(QDec, 1);

	table_init(&x->table, opt);
	dec_init(&x->d, s, q, &x->table, FALSE, NULL, opt->collect_patches);
	x->d.tolerance = tol;
	return x;
}

static void qdec_free(QDec *x)
{
	if (!x)
		return;
	dec_free(&x->d);
	table_clear(&x->table);
	g_free(x);
}

/* Nothing found: no TSC (so no table lookup, no statistics, no patch), no
 * bad packet, no error line.  Replaying such a queue, or decoding it again
 * against the shared table, changes nothing. */
static gboolean dec_empty(const Dec *d)
{
	return !d->n_tsc && !d->n_bad && !d->errors->len && !d->assigns->len && !d->io_error &&
	       !d->ooc_unknown && !(d->patches && d->patches->len) && !g_hash_table_size(d->stats.h);
}

static QDec *qdec_keep(QDec *x)
{
	x->d.cur.buf = NULL;
	if (!dec_empty(&x->d))
		return x;
	qdec_free(x);
	return NULL;
}

typedef struct {
	VmcorrSession *s;
	const VmcorrOptions *opt;
	AuxMaps *maps;
	uint64_t tolerance;
	QDec **qd;                  /* per queue: NULL if it found nothing */
	gint next;                  /* the next unit of work */
	guint n;
	guint pairs;                /* units 0..pairs-1: queues 2u and 2u+1 together */
} Work;

/* How many pairs of queues to decode together (dec_run_pair) when `jobs`
 * threads decode n queues: a pair gains from the overlap of two streams,
 * but a thread of its own gains more, so pairs are made only of the
 * queues beyond one per thread (with 2 queues and 2 threads, each thread
 * takes one; with 4 or more, two each). */
static guint work_pairs(guint n, guint jobs)
{
	if (n >= 2 * jobs)
		return n / 2;
	return n > jobs ? n - jobs : 0;
}

/* What a worker decodes at once: one queue, or two together. */
typedef struct {
	Dec *a, *b;
} Unit;

static void unit_run(void *p)
{
	Unit *u = p;

	if (u->b)
		dec_run_pair(u->a, u->b);
	else
		dec_run(u->a);
}

/* Decode a unit; a file that shrank under the mapping stops it with an
 * error. */
static void unit_run_guarded(const VmcorrSession *s, Dec *a, Dec *b)
{
	Unit u = { a, b };
	GError *e = NULL;

	if (vt_perf_file_guarded(s->f, unit_run, &u, &e))
		return;
	if (b)
		dec_io_failed(b, g_error_copy(e));
	dec_io_failed(a, e);
}

static QDec *work_queue(Work *w, gint i)
{
	return qdec_new(w->s, &g_array_index(w->s->queues, VmcorrQueue, i), w->opt, w->tolerance);
}

static gpointer worker(gpointer p)
{
	Work *w = p;
	AuxBuf buf[2];
	Near *near = g_new(Near, 1);
	gint u;

	near->len = 0;
	auxbuf_init(&buf[0], w->maps, w->opt->aux_window, w->opt->aux_pread);
	auxbuf_init(&buf[1], w->maps, w->opt->aux_window, w->opt->aux_pread);
	buf[0].progress = buf[1].progress = w->opt->progress;   /* (not the reruns': counted once) */
	if (!w->opt->aux_window)
		buf[0].near = buf[1].near = near;
	while ((u = g_atomic_int_add(&w->next, 1)) < (gint)(w->n - w->pairs)) {
		gint i = u < (gint)w->pairs ? 2 * u : u + (gint)w->pairs;
		gint j = u < (gint)w->pairs ? i + 1 : -1;
		QDec *a = work_queue(w, i), *b = j >= 0 ? work_queue(w, j) : NULL;

		dec_attach(&a->d, &buf[0]);
		if (b)
			dec_attach(&b->d, &buf[1]);
		unit_run_guarded(w->s, &a->d, b ? &b->d : NULL);
		if (b)
			w->qd[j] = qdec_keep(b);
		w->qd[i] = qdec_keep(a);
	}
	auxbuf_free(&buf[0]);
	auxbuf_free(&buf[1]);
	g_free(near);
	return NULL;
}

/* Can queue d's speculative decode stand, given the shared table? */
static gboolean speculation_holds(Dec *d, Table *shared, const VmcorrOptions *opt)
{
	GHashTableIter it;
	gpointer v;

	g_hash_table_iter_init(&it, d->table->h);
	while (g_hash_table_iter_next(&it, NULL, &v)) {
		Entry *local = v, *sh = table_get(shared, local->vmcs);
		uint64_t known, init_off;
		gboolean init_rel;

		table_initial(shared, opt, local->vmcs, &init_off, &init_rel);
		if (!sh || (sh->tsc_offset == init_off && sh->reliable == init_rel))
			continue;          /* untouched by earlier queues */
		if (!sh->reliable)
			return FALSE;
		known = sh->tsc_offset & SEVEN_BYTES;
		if (local->untranslated || local->used_mixed || (local->used_set && local->used7 != known))
			return FALSE;
		for (guint i = 0; i < d->assigns->len; i++) {
			Assign *a = &g_array_index(d->assigns, Assign, i);

			if (a->vmcs == local->vmcs && (a->offset & SEVEN_BYTES) != known)
				return FALSE;
		}
	}
	return TRUE;
}

static void replay(Dec *d, Table *shared, GPtrArray *lines)
{
	for (guint i = 0; i < d->assigns->len; i++) {
		Assign *a = &g_array_index(d->assigns, Assign, i);
		Entry *e = table_findnew(shared, a->vmcs);

		if (e->reliable && e->tsc_offset)
			continue;      /* known reliably before: perf keeps it */
		if (e->tsc_offset != a->offset)
			g_ptr_array_add(lines, g_strdup_printf("VMCS: %#" G_GINT64_MODIFIER "x  TSC Offset %#"
							       G_GINT64_MODIFIER "x", a->vmcs, a->offset));
		e->tsc_offset = a->offset;
		e->reliable = a->reliable;
	}
	/* VMCS entries created without assignment */
	GHashTableIter it;
	gpointer v;

	g_hash_table_iter_init(&it, d->table->h);
	while (g_hash_table_iter_next(&it, NULL, &v))
		if (((Entry *)v)->seen)
			table_findnew(shared, ((Entry *)v)->vmcs)->seen = TRUE;
}

static gint cmp_est(gconstpointer a, gconstpointer b)
{
	const VmcorrEst *x = a, *y = b;

	return x->time < y->time ? -1 : x->time > y->time;
}

static int64_t sdiff56(uint64_t a, uint64_t b)
{
	return (int64_t)(((a - b) & SEVEN_BYTES) << 8) >> 8;
}

/* See vmcorr.h. */
gboolean vmcorr_epochs_believed(const GArray *epochs, uint64_t tol)
{
	for (guint k = 0; k < epochs->len; k++) {
		const VmcorrEpoch *e = &g_array_index(epochs, VmcorrEpoch, k);
		gboolean edge = k == 0 || k == epochs->len - 1;

		if ((uint64_t)e->spread > tol || e->n < (edge ? 1u : 2u))
			return FALSE;
	}
	return TRUE;
}

GArray *vmcorr_segment_epochs(const GArray *ests, uint64_t tol)
{
	GArray *ep = g_array_new(FALSE, TRUE, sizeof(VmcorrEpoch));
	VmcorrEpoch *cur = NULL;
	int64_t lo = 0, hi = 0;

	for (guint i = 0; i < ests->len; i++) {
		const VmcorrEst *e = &g_array_index(ests, VmcorrEst, i);
		gboolean same = cur && (uint64_t)ABS(sdiff56(e->est, cur->offset)) <= tol;

		if (cur && !same && i + 1 < ests->len) {
			const VmcorrEst *nx = &g_array_index(ests, VmcorrEst, i + 1);

			if ((uint64_t)ABS(sdiff56(nx->est, cur->offset)) <= tol &&
			    (uint64_t)ABS(sdiff56(nx->est, e->est)) > tol)
				same = TRUE;      /* outlier */
		}
		if (!same) {
			VmcorrEpoch n = { e->est, e->time, e->time, 0, 0 };

			g_array_append_val(ep, n);
			cur = &g_array_index(ep, VmcorrEpoch, ep->len - 1);
			lo = hi = 0;
		}
		lo = MIN(lo, sdiff56(e->est, cur->offset));
		hi = MAX(hi, sdiff56(e->est, cur->offset));
		cur->spread = hi - lo;
		cur->t_last = e->time;
		cur->n++;
	}
	return ep;
}

static gint cmp_vmcs(gconstpointer a, gconstpointer b)
{
	const VmcorrVmcs *x = a, *y = b;

	return x->vmcs < y->vmcs ? -1 : x->vmcs > y->vmcs;
}

static void add_errors(GPtrArray *dst, GPtrArray *src)
{
	for (guint i = 0; i < src->len; i++) {
		gboolean dup = FALSE;

		for (guint j = 0; j < dst->len && !dup; j++)
			dup = strcmp(dst->pdata[j], src->pdata[i]) == 0;
		if (!dup)
			g_ptr_array_add(dst, g_strdup(src->pdata[i]));
	}
}

void vmcorr_result_free(VmcorrResult *r)
{
	if (!r)
		return;
	for (guint i = 0; i < r->vmcs->len; i++)
		if (g_array_index(r->vmcs, VmcorrVmcs, i).epochs)
			g_array_free(g_array_index(r->vmcs, VmcorrVmcs, i).epochs, TRUE);
	g_array_free(r->vmcs, TRUE);
	g_ptr_array_free(r->perf_lines, TRUE);
	g_ptr_array_free(r->perf_errors, TRUE);
	g_array_free(r->unknown_vmcs, TRUE);
	if (r->patches)
		g_array_free(r->patches, TRUE);
	g_free(r);
}

static gboolean check_time(const VmcorrSession *s, GError **error)
{
	const char *p = vt_perf_file_path(s->f);

	if (!s->have_tsc) {
		g_set_error(error, VMCORR_ERROR, VMCORR_ERROR_NO_TIME,
			    "%s: the trace has no time information (recorded without TSC packets, e.g. "
			    "intel_pt/tsc=0/); VM time correlation is impossible - decode it timeless, per "
			    "thread, instead", p);
		return FALSE;
	}
	if (!s->have_mtc) {
		g_set_error(error, VMCORR_ERROR, VMCORR_ERROR_NO_TIME,
			    "%s: MTC packets were not enabled (intel_pt/mtc=0/); VM time correlation needs "
			    "them - re-record with mtc=1 or decode timeless, per thread", p);
		return FALSE;
	}
	if (!s->tsc_ctc_d || !s->tsc_ctc_n) {
		g_set_error(error, VMCORR_ERROR, VMCORR_ERROR_NO_TIME,
			    "%s: the recording has no TSC:CTC ratio (CPUID leaf 0x15 was 0), so MTC "
			    "packets cannot be converted to TSC time; decode timeless instead", p);
		return FALSE;
	}
	return TRUE;
}

static gint cmp_patch(gconstpointer a, gconstpointer b)
{
	const VmcorrPatch *x = a, *y = b;

	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static void result_identity(VmcorrResult *r, const VtPerfFile *f)
{
	struct stat st;

	if (!vt_perf_file_stat(f, &st))
		return;      /* all zero: no correction will match it */
	r->file_dev = st.st_dev;
	r->file_ino = st.st_ino;
	r->file_size = st.st_size;
	r->file_mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
}

VmcorrResult *vmcorr_run_session(VmcorrSession *s, const VmcorrOptions *opt, GError **error)
{
	VmcorrResult *r;
	Table shared;
	guint nq, *order, jobs;
	QDec **qd;
	GHashTable *agg;
	AuxBuf rerun_buf;
	AuxMaps maps;
	GError *io = NULL;

	if (!check_time(s, error))
		return NULL;
	auxmaps_init(&maps, s->f);
	auxbuf_init(&rerun_buf, &maps, opt->aux_window, opt->aux_pread);
	nq = s->queues->len;
	r = g_new0(VmcorrResult, 1);
	r->vmcs = g_array_new(FALSE, TRUE, sizeof(VmcorrVmcs));
	r->perf_lines = g_ptr_array_new_with_free_func(g_free);
	r->perf_errors = g_ptr_array_new_with_free_func(g_free);
	r->unknown_vmcs = g_array_new(FALSE, FALSE, sizeof(uint64_t));
	if (opt->collect_patches)
		r->patches = g_array_new(FALSE, FALSE, sizeof(VmcorrPatch));
	r->nqueues = nq;
	r->per_cpu = s->per_cpu;
	r->pipe = vt_perf_file_is_pipe(s->f);
	result_identity(r, s->f);
	r->aux_bytes = s->aux_bytes;
	r->tsc_ctc_n = s->tsc_ctc_n;
	r->tsc_ctc_d = s->tsc_ctc_d;
	r->mtc_period = s->mtc_period;
	r->tolerance = opt->tolerance ? opt->tolerance
				      : 2 * ((s->tsc_ctc_n + s->tsc_ctc_d - 1) / s->tsc_ctc_d) + 2;

	qd = g_new0(QDec *, MAX(nq, 1));
	jobs = opt->jobs ? opt->jobs : g_get_num_processors();
	jobs = MIN(jobs, MAX(nq, 1));
	{
		Work w = { s, opt, &maps, r->tolerance, qd, 0, nq, work_pairs(nq, jobs) };
		GThread **th = g_new0(GThread *, jobs);

		for (guint j = 1; j < jobs; j++)
			th[j] = g_thread_new("vmcorr", worker, &w);
		worker(&w);
		for (guint j = 1; j < jobs; j++)
			g_thread_join(th[j]);
		g_free(th);
	}

	/* Replay in perf's order against the shared table. */
	table_init(&shared, opt);
	order = g_new(guint, MAX(nq, 1));
	perf_queue_order(nq, order);
	for (guint k = 0; k < nq; k++) {
		Dec *d = qd[order[k]] ? &qd[order[k]]->d : NULL;

		if (!d)
			continue;
		if (speculation_holds(d, &shared, opt)) {
			replay(d, &shared, r->perf_lines);
		} else {
			Dec again;

			dec_init(&again, s, d->q, &shared, TRUE, r->perf_lines, opt->collect_patches);
			again.tolerance = r->tolerance;
			dec_attach(&again, &rerun_buf);
			unit_run_guarded(s, &again, NULL);
			dec_free(d);
			*d = again;
			r->reruns++;
		}
		add_errors(r->perf_errors, d->errors);
	}

	/* Aggregate statistics per VMCS. */
	agg = g_hash_table_new(g_int64_hash, g_int64_equal);
	{
		GHashTableIter it;
		gpointer v;

		g_hash_table_iter_init(&it, shared.h);
		while (g_hash_table_iter_next(&it, NULL, &v)) {
			Entry *e = v;
			VmcorrVmcs m = { 0 };

			if (!e->seen) {
				/* given on the command line, never in the trace */
				g_array_append_val(r->unknown_vmcs, e->vmcs);
				continue;
			}
			m.vmcs = e->vmcs;
			m.offset = e->tsc_offset;
			m.reliable = e->reliable;
			m.vcpu = -1;
			g_array_append_val(r->vmcs, m);
		}
	}
	g_array_sort(r->vmcs, cmp_vmcs);
	for (guint i = 0; i < r->vmcs->len; i++) {
		VmcorrVmcs *m = &g_array_index(r->vmcs, VmcorrVmcs, i);

		g_hash_table_insert(agg, &m->vmcs, m);
	}
	for (guint k = 0; k < nq; k++) {
		Dec *d = qd[order[k]] ? &qd[order[k]]->d : NULL;
		GHashTableIter it;
		gpointer v;

		if (!d)
			continue;
		if (r->patches && d->patches)
			g_array_append_vals(r->patches, d->patches->data, d->patches->len);
		r->n_tsc += d->n_tsc;
		r->n_guest_tsc += d->n_guest;
		r->n_host_tsc += d->n_host;
		r->ooc_unknown = r->ooc_unknown || d->ooc_unknown;
		if (d->n_bad && (!r->n_bad_packets || d->first_bad < r->first_bad_offset))
			r->first_bad_offset = d->first_bad;
		r->n_bad_packets += d->n_bad;
		g_hash_table_iter_init(&it, d->stats.h);
		while (g_hash_table_iter_next(&it, NULL, &v)) {
			Entry *st = v;
			VmcorrVmcs *m = g_hash_table_lookup(agg, &st->vmcs);

			if (!m)
				continue;
			m->n_guest_tsc += st->n_guest_tsc;
			/* translations, for reusing these patches as the correction's */
			m->trans_missing = m->trans_missing || st->untranslated || st->used_mixed ||
					   (st->used_set && m->trans_set && (st->used7 != m->trans7));
			if (st->used_set && !m->trans_set) {
				m->trans_set = TRUE;
				m->trans7 = st->used7;
			}
			if (st->ests) {
				if (!m->epochs)
					m->epochs = g_array_new(FALSE, FALSE, sizeof(VmcorrEst));
				g_array_append_vals(m->epochs, st->ests->data, st->ests->len);
			}
			if (st->have_est) {
				int64_t lo = (int64_t)(st->est_first - m->offset) + st->est_lo;
				int64_t hi = (int64_t)(st->est_first - m->offset) + st->est_hi;

				if (!m->n_est) {
					m->est_min = lo;
					m->est_max = hi;
				} else {
					m->est_min = MIN(m->est_min, lo);
					m->est_max = MAX(m->est_max, hi);
				}
				m->n_est += st->n_est;
			}
			if (!m->tid && st->have_time) {
				uint32_t tid = s->per_cpu ? vmcorr_session_thread_at(s, d->q->cpu, st->first_time)
							  : d->q->tid;
				const VmcorrThread *t = tid && tid != (uint32_t)-1 ? vmcorr_session_thread(s, tid)
										   : NULL;

				if (t) {
					m->tid = tid;
					m->pid = t->pid;
					m->vcpu = t->vcpu;
				}
			}
		}
	}
	for (guint i = 0; i < r->vmcs->len; i++) {
		VmcorrVmcs *m = &g_array_index(r->vmcs, VmcorrVmcs, i);

		m->spread = m->n_est ? m->est_max - m->est_min : 0;
		if (m->epochs) {
			/* m->epochs held the raw estimates until here */
			GArray *ests = m->epochs;

			g_array_sort(ests, cmp_est);
			m->epochs = vmcorr_segment_epochs(ests, r->tolerance);
			g_array_free(ests, TRUE);
		} else {
			m->epochs = g_array_new(FALSE, TRUE, sizeof(VmcorrEpoch));
		}
		if (m->epochs->len > 1)
			m->status = vmcorr_epochs_believed(m->epochs, r->tolerance) ? VMCORR_CHANGES : VMCORR_INCONSISTENT;
		else if (!m->offset && m->n_est && (uint64_t)ABS(m->est_min) <= r->tolerance &&
		    (uint64_t)ABS(m->est_max) <= r->tolerance)
			m->status = VMCORR_ZERO;  /* e.g. corrected already */
		else if (!m->offset)
			m->status = VMCORR_UNDETERMINED;
		else if ((uint64_t)m->spread > r->tolerance)
			m->status = VMCORR_INCONSISTENT;
		else
			m->status = VMCORR_OK;
	}
	g_hash_table_destroy(agg);
	for (guint i = 0; i < nq; i++) {
		if (!io && qd[i] && qd[i]->d.io_error)
			io = g_steal_pointer(&qd[i]->d.io_error);
		qdec_free(qd[i]);
	}
	g_free(qd);
	g_free(order);
	auxbuf_free(&rerun_buf);
	auxmaps_clear(&maps);
	table_clear(&shared);
	/* what was read is what the file still holds */
	if (io || !vt_perf_file_check_size(s->f, &io)) {
		g_propagate_error(error, io);
		vmcorr_result_free(r);
		return NULL;
	}
	if (r->patches)
		g_array_sort(r->patches, cmp_patch);
	return r;
}

gboolean vmcorr_patches_reusable(const VmcorrResult *disc, const VmcorrOptions *apply)
{
	if (!disc->patches || disc->ooc_unknown || apply->epochs || apply->scales || apply->have_default)
		return FALSE;
	for (guint i = 0; i < disc->vmcs->len; i++) {
		const VmcorrVmcs *m = &g_array_index(disc->vmcs, VmcorrVmcs, i);
		gboolean listed = FALSE;

		for (guint k = 0; apply->offsets && k < apply->offsets->len; k++) {
			const VmcorrOffset *o = &g_array_index(apply->offsets, VmcorrOffset, k);

			if (o->vmcs != m->vmcs)
				continue;
			listed = TRUE;
			if (m->trans_missing || (m->trans_set && m->trans7 != (o->offset & SEVEN_BYTES)))
				return FALSE;
		}
		if (!listed && m->offset)
			return FALSE;       /* learned but not applied: not the same run */
	}
	return TRUE;
}

VmcorrResult *vmcorr_dry_run(const char *path, const VmcorrOptions *opt, GError **error)
{
	VmcorrSession *s = vmcorr_session_open(path, VT_PERF_OPEN_RDONLY, error);
	VmcorrResult *r;

	if (!s)
		return NULL;
	r = vmcorr_run_session(s, opt, error);
	vmcorr_session_free(s);
	return r;
}
