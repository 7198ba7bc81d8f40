/* guest.c - the guest's perf.data: its checks, its ids and its sideband
 * records in host time.  See inject.h. */
#include "config.h"

#include <string.h>

#include "src/inject/internal.h"

G_DEFINE_QUARK(vt-inject-error-quark, vt_inject_error)

/* The exact inverse of g = h * ratio >> frac: the smallest h that scales
 * to g (unique when ratio >= 2^frac), as vmcorr corrects TSC packets. */
static uint64_t unscale(uint64_t g, guint frac, uint64_t ratio)
{
	unsigned __int128 x = (unsigned __int128)g << frac;

	return (uint64_t)((x + ratio - 1) / ratio);
}

uint64_t vt_inject_host_tsc(uint64_t t, const VtPerfTimeConv *gtc, const VtInjectClock *c)
{
	uint64_t tsc = vt_perf_time_to_tsc(t, gtc) - c->offset;

	return c->ratio ? unscale(tsc, c->frac, c->ratio) : tsc;
}

uint64_t vt_inject_time(uint64_t t, const VtPerfTimeConv *gtc, const VtPerfTimeConv *htc, const VtInjectClock *c)
{
	return t ? vt_perf_tsc_to_time(vt_inject_host_tsc(t, gtc, c), htc) : 0;
}

static gboolean fail(GError **error, VtInjectErrorCode code, const char *path, const char *what)
{
	g_set_error(error, VT_INJECT_ERROR, code, "%s: %s", path, what);
	return FALSE;
}

/* Sample ids and sample_id_all on every attr. */
static gboolean guest_check_ids(const VtPerfFile *f, GError **error)
{
	const char *path = vt_perf_file_path(f);

	if (!vt_perf_file_n_attrs(f) || !vt_perf_file_attr(f, 0)->nr_ids)
		return fail(error, VT_INJECT_ERROR_GUEST_NO_IDS, path,
			    "guest data has no sample ids (record the guest with perf record -a --sample-identifier)");
	for (guint i = 0; i < vt_perf_file_n_attrs(f); i++)
		if (!vt_perf_file_attr(f, i)->attr.sample_id_all)
			return fail(error, VT_INJECT_ERROR_GUEST_NO_IDS, path,
				    "guest events have no sample_id_all: their records carry no ids "
				    "(record the guest with perf record -a --sample-identifier)");
	return TRUE;
}

static gboolean guest_id_index(InjGuest *g, const VtPerfRecord *rec, GError **error)
{
	guint n = 0;
	g_autofree VtPerfIdIndexEntry *e = vt_perf_record_id_index(rec, &n, error);

	if (!e)
		return FALSE;
	for (guint i = 0; i < n; i++)
		g_hash_table_insert(g->id_cpu, g_memdup2(&e[i].id, sizeof(uint64_t)), GUINT_TO_POINTER(e[i].cpu == (uint64_t)-1 ? 1u : (guint)e[i].cpu + 2));
	g->have_id_index = TRUE;
	return TRUE;
}

/* ID_INDEX and TIME_CONV, and the records to inject. */
static gboolean guest_scan(InjGuest *g, GError **error)
{
	VtPerfIter it;
	VtPerfRecord rec;
	int r;

	vt_perf_iter_init(&it, g->f);
	while ((r = vt_perf_iter_next(&it, &rec, error)) > 0) {
		if (rec.type == VT_PERF_RECORD_ID_INDEX && !guest_id_index(g, &rec, error))
			return FALSE;
		if (rec.type == VT_PERF_RECORD_TIME_CONV && !g->have_tc)
			g->have_tc = vt_perf_record_time_conv(&rec, &g->tc, NULL);
		if (inj_guest_kept(&rec)) {
			/* the iterator's window is reused: keep a copy of the bytes */
			uint8_t *copy = g_memdup2(rec.data, rec.size);

			g_ptr_array_add(g->rec_bytes, copy);
			rec.data = copy;
			g_array_append_val(g->recs, rec);
		}
		else if (rec.type < VT_PERF_RECORD_HEADER_ATTR)
			g->skipped++;
	}
	return r == 0;
}

/* Every id has an ID_INDEX entry with a CPU (the guest's vCPU). */
static gboolean guest_check_index(InjGuest *g, GError **error)
{
	const char *path = vt_perf_file_path(g->f);

	if (!g->have_id_index)
		return fail(error, VT_INJECT_ERROR_GUEST_NO_ID_INDEX, path,
			    "guest data has no ID_INDEX (which CPU each sample id belongs to); record it with perf 5.x "
			    "or later, system-wide (-a)");
	for (guint i = 0; i < vt_perf_file_n_attrs(g->f); i++) {
		const VtPerfAttr *a = vt_perf_file_attr(g->f, i);

		for (uint64_t k = 0; k < a->nr_ids; k++) {
			gpointer v = g_hash_table_lookup(g->id_cpu, &a->ids[k]);

			if (!v) {
				g_set_error(error, VT_INJECT_ERROR, VT_INJECT_ERROR_GUEST_NO_ID_INDEX,
					    "%s: sample id %" G_GUINT64_FORMAT " is not in the guest's ID_INDEX", path,
					    a->ids[k]);
				return FALSE;
			}
			if (GPOINTER_TO_UINT(v) == 1) {
				g_set_error(error, VT_INJECT_ERROR, VT_INJECT_ERROR_GUEST_ID_NO_CPU,
					    "%s: sample id %" G_GUINT64_FORMAT " has CPU -1 (a per-thread event): record "
					    "the guest system-wide (perf record -a)", path, a->ids[k]);
				return FALSE;
			}
		}
	}
	return TRUE;
}

static gboolean guest_check_clock(const InjGuest *g, GError **error)
{
	if (g->have_tc && g->tc.cap_user_time_zero && g->tc.time_mult)
		return TRUE;
	return fail(error, VT_INJECT_ERROR_GUEST_CLOCK, vt_perf_file_path(g->f),
		    g->have_tc ? "the guest's perf clock is not TSC-based (TIME_CONV without cap_user_time_zero: "
				 "kvm-clock); boot the guest with no-kvmclock"
			       : "guest data has no TIME_CONV (its perf clock is not TSC-based: kvm-clock?); boot the "
				 "guest with no-kvmclock");
}

InjGuest *inj_guest_open(const char *path, GError **error)
{
	InjGuest *g = g_new0(InjGuest, 1);

	g->id_cpu = g_hash_table_new_full(g_int64_hash, g_int64_equal, g_free, NULL);
	g->recs = g_array_new(FALSE, FALSE, sizeof(VtPerfRecord));
	g->rec_bytes = g_ptr_array_new_with_free_func(g_free);
	if (!(g->f = vt_perf_file_open(path, VT_PERF_OPEN_RDONLY, error)) || !guest_check_ids(g->f, error) ||
	    !guest_scan(g, error) || !guest_check_index(g, error) || !guest_check_clock(g, error)) {
		inj_guest_free(g);
		return NULL;
	}
	return g;
}

gboolean vt_inject_guest_check(const char *guest, GError **error)
{
	InjGuest *g = inj_guest_open(guest, error);
	gboolean ok = g != NULL;

	inj_guest_free(g);
	return ok;
}

void inj_guest_free(InjGuest *g)
{
	if (!g)
		return;
	g_hash_table_unref(g->id_cpu);
	g_array_free(g->recs, TRUE);
	g_ptr_array_unref(g->rec_bytes);
	vt_perf_file_close(g->f);
	g_free(g);
}

gboolean inj_guest_kept(const VtPerfRecord *rec)
{
	switch (rec->type) {
	case PERF_RECORD_MMAP: case PERF_RECORD_MMAP2: case PERF_RECORD_COMM: case PERF_RECORD_FORK:
	case PERF_RECORD_EXIT: case PERF_RECORD_LOST: case PERF_RECORD_SWITCH: case PERF_RECORD_SWITCH_CPU_WIDE:
	case PERF_RECORD_TEXT_POKE:
		return TRUE;
	case PERF_RECORD_KSYMBOL:    /* out-of-line code only: BPF programs cannot be decoded */
		return rec->size >= 24 && (rec->data[20] | rec->data[21] << 8) == PERF_RECORD_KSYMBOL_TYPE_OOL;
	default:
		return FALSE;
	}
}

/* The guest CPU (vCPU) of sample id id. */
guint inj_guest_id_cpu(const InjGuest *g, uint64_t id)
{
	guint v = GPOINTER_TO_UINT(g_hash_table_lookup(g->id_cpu, &id));

	return v >= 2 ? v - 2 : (guint)-1;
}
