/* session.c - index an Intel PT perf.data into AUX queues and sideband. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "vmcorr/vmcorr.h"
#include "vmcorr/session.h"

static void thread_free(gpointer p)
{
	VmcorrThread *t = p;

	g_free(t->comm);
	g_free(t);
}

static void switches_free(gpointer p)
{
	g_array_free(p, TRUE);
}

static int parse_vcpu(const char *comm)
{
	unsigned v;
	char tail[8];

	/* QEMU names vCPU threads "CPU %u/KVM" (debug-threads=on); not an ABI. */
	if (sscanf(comm, "CPU %u/%7s", &v, tail) == 2 && strcmp(tail, "KVM") == 0)
		return (int)v;
	return -1;
}

static gint cmp_switch(gconstpointer a, gconstpointer b)
{
	const VmcorrSwitch *x = a, *y = b;

	return x->time < y->time ? -1 : x->time > y->time;
}

/* Remember that sid's task runs on sid's CPU from sid's time on. */
static void add_switch(VmcorrSession *s, const VtPerfSampleId *sid)
{
	GArray *a;
	VmcorrSwitch e;

	if (!sid->has_cpu || !sid->has_time || !sid->has_tid)
		return;
	a = g_hash_table_lookup(s->switches, GUINT_TO_POINTER(sid->cpu));
	if (!a) {
		a = g_array_new(FALSE, FALSE, sizeof(VmcorrSwitch));
		g_hash_table_insert(s->switches, GUINT_TO_POINTER(sid->cpu), a);
	}
	e.time = sid->time;
	e.pid = sid->pid;
	e.tid = sid->tid;
	g_array_append_val(a, e);
}

/* A record of the guest machine (perf inject --guest-data, vmtrace inject):
 * its tids and CPUs are the guest's, not the host's. */
static gboolean is_guest_record(const VtPerfRecord *rec)
{
	guint mode = rec->misc & PERF_RECORD_MISC_CPUMODE_MASK;

	return rec->type < 64 /* the kernel's record types */ &&
	       (mode == PERF_RECORD_MISC_GUEST_KERNEL || mode == PERF_RECORD_MISC_GUEST_USER);
}

/* AUXTRACE records are indexed flat, then grouped by queue (build_queues):
 * 40 bytes per record while reading, 32 per buffer and per queue after -
 * a file of a million one-packet queues needs no per-queue allocations. */
typedef struct {
	VmcorrBuffer b;
	uint32_t cpu, tid;
} AuxRec;

typedef struct {
	GArray *recs;               /* AuxRec in file order */
	GArray *keys;               /* uint64_t: queue index << 32 | record number */
} AuxIndex;

static void add_aux(AuxIndex *ix, const VtPerfAuxtrace *aux)
{
	AuxRec r = { { aux->payload_file_offset, aux->size, aux->reference, aux->offset }, aux->cpu, aux->tid };
	uint64_t key = (uint64_t)aux->idx << 32 | ix->recs->len;

	g_array_append_val(ix->recs, r);
	g_array_append_val(ix->keys, key);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Put recs in key order, in place (following the permutation's cycles;
 * a key's record number is replaced by its new position when placed). */
static void permute(AuxRec *recs, uint64_t *keys, guint n)
{
	for (guint i = 0; i < n; i++) {
		AuxRec tmp;
		guint at = i;

		if ((uint32_t)keys[i] == i)
			continue;
		/* the cycle through i: position at takes the record keys[at] names */
		tmp = recs[i];
		for (;;) {
			guint src = (uint32_t)keys[at];

			keys[at] = (keys[at] & ~(uint64_t)G_MAXUINT32) | at;
			if (src == i) {
				recs[at] = tmp;
				break;
			}
			recs[at] = recs[src];
			at = src;
		}
	}
}

/* Group the records by queue (file order within each), check that each
 * queue keeps one cpu/tid, and keep the buffers with data. */
static gboolean build_queues(VmcorrSession *s, AuxIndex *ix, GError **error)
{
	guint n = ix->recs->len, nb = 0;
	AuxRec *recs = (AuxRec *)(void *)ix->recs->data;
	uint64_t *keys = (uint64_t *)(void *)ix->keys->data;
	VmcorrBuffer *bufs;

	if (n != ix->recs->len || n >= G_MAXUINT32)
		return FALSE;      /* unreachable: records are >= 48 bytes of a file */
	qsort(keys, n, sizeof(*keys), cmp_u64);
	permute(recs, keys, n);
	for (guint i = 0; i < n; i++) {
		guint idx = (guint)(keys[i] >> 32);
		VmcorrQueue *q = s->queues->len ? &g_array_index(s->queues, VmcorrQueue, s->queues->len - 1) : NULL;
		VmcorrBuffer b = recs[i].b;

		if (!i || (guint)(keys[i - 1] >> 32) != idx) {
			VmcorrQueue nq = { .idx = idx, .cpu = recs[i].cpu, .tid = recs[i].tid, .first = nb };

			if (q && !q->nbufs)
				*q = nq;            /* the last queue had no data: drop it */
			else
				g_array_append_val(s->queues, nq);
			q = &g_array_index(s->queues, VmcorrQueue, s->queues->len - 1);
		} else if (q->cpu != recs[i].cpu || q->tid != recs[i].tid) {
			g_set_error(error, VMCORR_ERROR, VMCORR_ERROR_BAD_INPUT,
				    "%s: AUX queue %u conflict: cpu %d, tid %d vs cpu %d, tid %d",
				    vt_perf_file_path(s->f), idx, (int)q->cpu, (int)q->tid, (int)recs[i].cpu,
				    (int)recs[i].tid);
			return FALSE;
		}
		if (!b.size)
			continue;
		/* compact in place: a VmcorrBuffer is smaller than an AuxRec */
		memcpy((VmcorrBuffer *)(void *)recs + nb++, &b, sizeof(b));
		q->nbufs++;
		q->bytes += b.size;
		s->aux_bytes += b.size;
	}
	if (s->queues->len && !g_array_index(s->queues, VmcorrQueue, s->queues->len - 1).nbufs)
		g_array_set_size(s->queues, s->queues->len - 1);
	g_array_free(ix->keys, TRUE);
	ix->keys = NULL;
	bufs = g_realloc(g_array_free(ix->recs, FALSE), MAX(nb, 1) * sizeof(VmcorrBuffer));
	ix->recs = NULL;
	s->bufs = bufs;
	return TRUE;
}

/* TSC ticks per crystal (ART) tick: real parts run 1-6 GHz over 19.2-38.4 MHz */
#define MAX_TSC_CTC 10000u

G_GNUC_PRINTF(3, 4)
static gboolean bad_info(GError **error, const char *path, const char *fmt, ...)
{
	va_list ap;
	g_autofree char *msg = NULL;

	va_start(ap, fmt);
	msg = g_strdup_vprintf(fmt, ap);
	va_end(ap);
	g_set_error(error, VMCORR_ERROR, VMCORR_ERROR_BAD_INPUT, "%s: Intel PT AUXTRACE_INFO: %s", path, msg);
	return FALSE;
}

/* A word of AUXTRACE_INFO that selects a bit of the event's config: none or one bit. */
static gboolean info_bit_ok(uint64_t bit)
{
	return (bit & (bit - 1)) == 0;
}

/* The AUXTRACE_INFO words hold what the hardware and the kernel reported;
 * refuse values neither can produce, before anything divides or shifts by
 * them (an absurd TSC:CTC ratio would make every spread look consistent). */
static gboolean check_info(const VmcorrSession *s, GError **error)
{
	static const struct { guint word; const char *name; } bits[] = {
		{ VT_PT_INFO_TSC_BIT, "TSC bit" }, { VT_PT_INFO_NORETCOMP_BIT, "noretcomp bit" },
		{ VT_PT_INFO_MTC_BIT, "MTC bit" }, { VT_PT_INFO_CYC_BIT, "CYC bit" },
	};
	const char *p = vt_perf_file_path(s->f);
	uint64_t freq = s->nr_priv > VT_PT_INFO_MTC_FREQ_BITS ? s->priv[VT_PT_INFO_MTC_FREQ_BITS] : 0;
	uint64_t n = s->nr_priv > VT_PT_INFO_TSC_CTC_D ? s->priv[VT_PT_INFO_TSC_CTC_N] : 0;
	uint64_t d = s->nr_priv > VT_PT_INFO_TSC_CTC_D ? s->priv[VT_PT_INFO_TSC_CTC_D] : 0;

	for (guint i = 0; i < G_N_ELEMENTS(bits); i++) {
		if (s->nr_priv > bits[i].word && !info_bit_ok(s->priv[bits[i].word]))
			return bad_info(error, p, "%s %#" G_GINT64_MODIFIER "x is not a single config bit",
					bits[i].name, s->priv[bits[i].word]);
	}
	/* MTCFreq is a 4-bit field of IA32_RTIT_CTL */
	if (freq && (!info_bit_ok((freq >> __builtin_ctzll(freq)) + 1) || __builtin_popcountll(freq) > 4))
		return bad_info(error, p, "MTC frequency bits %#" G_GINT64_MODIFIER "x are not a field of at most 4 bits",
				freq);
	/* CPUID.15H: EBX/EAX, 32-bit registers; the TSC runs faster than the crystal */
	if (n && d && (n > G_MAXUINT32 || d > G_MAXUINT32 || n < d || n / d > MAX_TSC_CTC))
		return bad_info(error, p, "TSC:CTC ratio %" G_GUINT64_FORMAT "/%" G_GUINT64_FORMAT
				" is not one CPUID leaf 0x15 gives (32-bit words, 1 to %u TSC ticks per crystal tick)",
				n, d, MAX_TSC_CTC);
	if (s->priv[VT_PT_INFO_CAP_USER_TIME_ZERO] && s->priv[VT_PT_INFO_TIME_SHIFT] > 63)
		return bad_info(error, p, "time shift %" G_GUINT64_FORMAT " is not below 64",
				s->priv[VT_PT_INFO_TIME_SHIFT]);
	if (s->nr_priv > VT_PT_INFO_MAX_NONTURBO_RATIO && s->priv[VT_PT_INFO_MAX_NONTURBO_RATIO] > 255)
		return bad_info(error, p, "maximum non-turbo ratio %" G_GUINT64_FORMAT " is not an 8-bit value",
				s->priv[VT_PT_INFO_MAX_NONTURBO_RATIO]);
	if (s->have_tc && s->tc.time_shift > 63) {
		g_set_error(error, VMCORR_ERROR, VMCORR_ERROR_BAD_INPUT, "%s: TIME_CONV time shift %" G_GUINT64_FORMAT
			    " is not below 64", p, (guint64)s->tc.time_shift);
		return FALSE;
	}
	return TRUE;
}

/* The records of a recording, looked at once: the AUX index, the
 * sideband.  Run under vt_perf_file_guarded (its iterator maps the file). */
typedef struct {
	VmcorrSession *s;
	AuxIndex *ix;
	gboolean have_info;
	gboolean failed, named;     /* named: the error gets the file's name */
	GError *error;
	VtPerfIter it;
} Scan;

static void scan_records(void *p)
{
	Scan *sc = p;
	VmcorrSession *s = sc->s;
	AuxIndex *ix = sc->ix;
	GError **error = &sc->error;
	VtPerfRecord rec;
	int r;

	while ((r = vt_perf_iter_next(&sc->it, &rec, error)) > 0) {
		if (is_guest_record(&rec))
			continue;   /* an injected guest sideband: src/decode/guest-threads.c */
		switch (rec.type) {
		case VT_PERF_RECORD_AUXTRACE_INFO: {
			VtPerfAuxtraceInfo info;

			if (!vt_perf_record_auxtrace_info(&rec, &info, error))
				goto fail_named;
			if (info.type != VT_PERF_AUXTRACE_INTEL_PT) {
				g_set_error(error, VMCORR_ERROR, VMCORR_ERROR_NOT_PT,
					    "%s: AUXTRACE_INFO type %u is not Intel PT", vt_perf_file_path(s->f),
					    info.type);
				goto fail;
			}
			if (info.nr_priv < 10) {
				g_set_error(error, VMCORR_ERROR, VMCORR_ERROR_BAD_INPUT,
					    "%s: Intel PT AUXTRACE_INFO has %u words, need at least 10",
					    vt_perf_file_path(s->f), info.nr_priv);
				goto fail;
			}
			s->nr_priv = MIN(info.nr_priv, G_N_ELEMENTS(s->priv));
			memcpy(s->priv, info.priv, s->nr_priv * 8);
			sc->have_info = TRUE;
			break;
		}
		case VT_PERF_RECORD_AUXTRACE: {
			VtPerfAuxtrace aux;

			if (!vt_perf_record_auxtrace(&rec, &aux, error))
				goto fail_named;
			add_aux(ix, &aux);
			break;
		}
		case VT_PERF_RECORD_TIME_CONV:
			if (!vt_perf_record_time_conv(&rec, &s->tc, error))
				goto fail_named;
			s->have_tc = TRUE;
			break;
		case PERF_RECORD_COMM: {
			VtPerfComm c;
			VmcorrThread *t;

			if (!vt_perf_record_comm(&rec, &c, NULL))
				break;     /* sideband problems are not fatal */
			t = g_new0(VmcorrThread, 1);
			t->pid = c.pid;
			t->comm = g_strdup(c.comm);
			t->vcpu = parse_vcpu(c.comm);
			g_hash_table_replace(s->threads, GUINT_TO_POINTER(c.tid), t);
			break;
		}
		case PERF_RECORD_ITRACE_START: {
			/* the task on the CPU when tracing started (per-CPU mode) */
			VtPerfSampleId sid;

			if (vt_perf_record_sample_id(s->f, &rec, &sid))
				add_switch(s, &sid);
			break;
		}
		case PERF_RECORD_SWITCH_CPU_WIDE:
		case PERF_RECORD_SWITCH: {
			VtPerfSwitch sw;
			VtPerfSampleId sid;

			if (vt_perf_record_switch(&rec, &sw, NULL) && !sw.out &&
			    vt_perf_record_sample_id(s->f, &rec, &sid))
				add_switch(s, &sid);
			break;
		}
		default:
			break;
		}
	}
	if (r == 0)
		return;
fail:
	sc->failed = TRUE;
	return;
fail_named:
	sc->failed = sc->named = TRUE;
}

VmcorrSession *vmcorr_session_open(const char *path, VtPerfOpenFlags flags, GError **error)
{
	VmcorrSession *s = g_new0(VmcorrSession, 1);
	AuxIndex ix = { g_array_new(FALSE, FALSE, sizeof(AuxRec)), g_array_new(FALSE, FALSE, sizeof(uint64_t)) };
	Scan sc;                    /* (not zeroed: its iterator's window is 128 KiB) */
	gboolean have_info, guarded;

	s->threads = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, thread_free);
	s->switches = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, switches_free);
	s->queues = g_array_new(FALSE, FALSE, sizeof(VmcorrQueue));
	s->f = vt_perf_file_open(path, flags, error);
	if (!s->f)
		goto fail;

	sc.s = s;
	sc.ix = &ix;
	sc.have_info = sc.failed = sc.named = FALSE;
	sc.error = NULL;
	vt_perf_iter_init_mapped(&sc.it, s->f);
	guarded = vt_perf_file_guarded(s->f, scan_records, &sc, error);
	vt_perf_iter_clear(&sc.it);
	have_info = sc.have_info;
	if (guarded && sc.failed) {
		g_propagate_error(error, sc.error);
		if (sc.named)
			goto fail_named;
		goto fail;
	}
	if (!guarded) {
		g_clear_error(&sc.error);
		goto fail;
	}
	if (!have_info) {
		g_set_error(error, VMCORR_ERROR, VMCORR_ERROR_NOT_PT,
			    "%s: no Intel PT data (no AUXTRACE_INFO record); record with -e intel_pt//",
			    vt_perf_file_path(s->f));
		goto fail;
	}
	for (guint i = 0; i < vt_perf_file_n_attrs(s->f); i++) {
		const VtPerfAttr *a = vt_perf_file_attr(s->f, i);

		if (a->attr.type == s->priv[VT_PT_INFO_PMU_TYPE]) {
			s->pt_attr = a;
			break;
		}
	}
	if (!s->pt_attr) {
		g_set_error(error, VMCORR_ERROR, VMCORR_ERROR_NOT_PT,
			    "%s: no event of the intel_pt PMU type %" G_GUINT64_FORMAT " in the attrs",
			    vt_perf_file_path(s->f), s->priv[VT_PT_INFO_PMU_TYPE]);
		goto fail;
	}
	{
		uint64_t cfg = s->pt_attr->attr.config;
		uint64_t tsc_bit = s->priv[VT_PT_INFO_TSC_BIT];
		gboolean have_cyc_words = s->nr_priv > VT_PT_INFO_CYC_BIT;
		uint64_t mtc_bit = have_cyc_words ? s->priv[VT_PT_INFO_MTC_BIT] : 0;
		uint64_t freq_bits = have_cyc_words ? s->priv[VT_PT_INFO_MTC_FREQ_BITS] : 0;

		s->have_tsc = (cfg & tsc_bit) && s->priv[VT_PT_INFO_CAP_USER_TIME_ZERO] &&
			      (s->pt_attr->attr.sample_type & PERF_SAMPLE_TIME);
		s->have_mtc = mtc_bit && (cfg & mtc_bit);
		s->mtc_period = freq_bits ? (guint)((cfg & freq_bits) >> __builtin_ctzll(freq_bits)) : 0;
		s->tsc_ctc_n = have_cyc_words ? s->priv[VT_PT_INFO_TSC_CTC_N] : 0;
		s->tsc_ctc_d = have_cyc_words ? s->priv[VT_PT_INFO_TSC_CTC_D] : 0;
		s->per_cpu = s->priv[VT_PT_INFO_PER_CPU_MMAPS] != 0;
		s->snapshot = s->priv[VT_PT_INFO_SNAPSHOT_MODE] != 0;
	}
	if (!check_info(s, error))
		goto fail;
	if (!build_queues(s, &ix, error))
		goto fail;
	{
		GHashTableIter hi;
		gpointer v;

		g_hash_table_iter_init(&hi, s->switches);
		while (g_hash_table_iter_next(&hi, NULL, &v))
			g_array_sort(v, cmp_switch);
	}
	return s;
fail_named:
	g_prefix_error(error, "%s: ", vt_perf_file_path(s->f));
fail:
	if (ix.recs)
		g_array_free(ix.recs, TRUE);
	if (ix.keys)
		g_array_free(ix.keys, TRUE);
	vmcorr_session_free(s);
	return NULL;
}

void vmcorr_session_free(VmcorrSession *s)
{
	if (!s)
		return;
	g_array_free(s->queues, TRUE);
	g_free(s->bufs);
	g_hash_table_destroy(s->threads);
	g_hash_table_destroy(s->switches);
	if (s->f)
		vt_perf_file_close(s->f);
	g_free(s);
}

uint32_t vmcorr_session_thread_at(const VmcorrSession *s, uint32_t cpu, uint64_t tsc)
{
	GArray *a = g_hash_table_lookup(s->switches, GUINT_TO_POINTER(cpu));
	uint64_t t;
	guint lo = 0, hi;

	if (!a || !a->len || !s->have_tc)
		return 0;
	t = vt_perf_tsc_to_time(tsc, &s->tc);
	/* last switch-in at or before t */
	hi = a->len;
	while (lo < hi) {
		guint mid = (lo + hi) / 2;

		if (g_array_index(a, VmcorrSwitch, mid).time <= t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? g_array_index(a, VmcorrSwitch, lo - 1).tid : 0;
}

const VmcorrThread *vmcorr_session_thread(const VmcorrSession *s, uint32_t tid)
{
	return g_hash_table_lookup(s->threads, GUINT_TO_POINTER(tid));
}
