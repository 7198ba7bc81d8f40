/* recording.c - every AUX queue of a recording decoded (in parallel
 * threads), the branches named (thread, vCPU, time) and ordered. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "src/decode/internal.h"
#include "vmcorr/session.h"

struct VtDecodeResult {
	GArray *events;          /* VtDecodeEvent */
	GStringChunk *strings;   /* comm names */
	gboolean timed, per_cpu;
	guint nerrors;
};

typedef struct {
	const guint8 *data;      /* the queue's AUX bytes, buffers joined */
	gsize len;
	guint8 *owned;
	const VmcorrQueue *q;
	GArray *out;             /* VtBranch */
	GError *error;
} Job;

typedef struct {
	const VtDecodeOptions *opts;
	VtDecodeCpu cpu;
} Shared;

static void run_job(gpointer data, gpointer user)
{
	Job *j = data;
	Shared *sh = user;

	vt_decode_buffer(j->data, j->len, &sh->cpu, sh->opts->host, sh->opts->guest, j->out, &j->error);
}

/* The queue's AUX bytes in one piece (buffers that follow each other). */
static gboolean join_buffers(const VmcorrSession *s, const VmcorrQueue *q, Job *j, GError **error)
{
	gsize total = 0, at = 0;

	for (guint i = 0; i < q->nbufs; i++)
		total += s->bufs[q->first + i].size;
	j->owned = g_malloc(total ? total : 1);
	for (guint i = 0; i < q->nbufs; i++) {
		const VmcorrBuffer *b = &s->bufs[q->first + i];

		/* read, not mapped: a file that shrinks is an error, not SIGBUS */
		if (!vt_perf_file_read(s->f, b->payload_off, j->owned + at, b->size, error))
			return FALSE;
		at += b->size;
	}
	j->data = j->owned;
	j->len = total;
	return TRUE;
}

/* CPU identity (errata), TSC:CTC ratio, MTC frequency, nominal ratio. */
static void cpu_of(const VmcorrSession *s, VtDecodeCpu *cpu)
{
	g_autofree char *id = vt_perf_file_feature_string(s->f, VT_PERF_FEAT_CPUID);
	unsigned fam, model, step;

	memset(cpu, 0, sizeof(*cpu));
	if (id && sscanf(id, "GenuineIntel,%u,%u,%u", &fam, &model, &step) == 3) {
		cpu->family = fam;
		cpu->model = model;
		cpu->stepping = step;
	}
	if (s->have_tsc) {
		cpu->cpuid_15_eax = (guint32)s->tsc_ctc_d;
		cpu->cpuid_15_ebx = (guint32)s->tsc_ctc_n;
		cpu->mtc_freq = (guint8)s->mtc_period;
		if (s->nr_priv > VT_PT_INFO_MAX_NONTURBO_RATIO)
			cpu->nom_freq = (guint8)s->priv[VT_PT_INFO_MAX_NONTURBO_RATIO];
	}
}

static void name_event(VtDecodeResult *r, const VmcorrSession *s, const VmcorrQueue *q, VtDecodeEvent *e)
{
	const VmcorrThread *t;
	guint32 tid = q->tid;

	e->cpu = s->per_cpu ? (gint32)q->cpu : -1;
	if (s->per_cpu)
		tid = r->timed && e->b.tsc ? vmcorr_session_thread_at(s, q->cpu, e->b.tsc) : 0;
	e->tid = (gint32)tid;
	t = tid ? vmcorr_session_thread(s, tid) : NULL;
	e->pid = t ? (gint32)t->pid : -1;
	e->vcpu = t ? t->vcpu : -1;
	e->comm = t && t->comm ? g_string_chunk_insert_const(r->strings, t->comm) : NULL;
	e->time = r->timed && s->have_tc && e->b.tsc ? vt_perf_tsc_to_time(e->b.tsc, &s->tc) : 0;
}

static void add_event(VtDecodeResult *r, const VmcorrSession *s, const Job *j, guint k)
{
	VtDecodeEvent e = { 0 };

	e.b = g_array_index(j->out, VtBranch, k);
	e.queue = j->q->idx;
	name_event(r, s, j->q, &e);
	r->nerrors += e.b.kind == VT_BRANCH_ERROR;
	g_array_append_val(r->events, e);
}

/* Timed: the queues merged into one timeline (each queue keeps its own
 * order; of equal times the lower queue first); timeless: queue after
 * queue in trace order. */
static void collect(VtDecodeResult *r, const VmcorrSession *s, Job *jobs, guint n)
{
	gsize total = 0;
	g_autofree guint *pos = g_new0(guint, n);

	for (guint i = 0; i < n; i++)
		total += jobs[i].out->len;
	r->events = g_array_sized_new(FALSE, FALSE, sizeof(VtDecodeEvent), (guint)total);
	if (!r->timed) {
		for (guint i = 0; i < n; i++)
			for (guint k = 0; k < jobs[i].out->len; k++)
				add_event(r, s, &jobs[i], k);
		return;
	}
	for (;;) {
		gint best = -1;
		guint64 t = 0;

		for (guint i = 0; i < n; i++) {
			guint64 ti;

			if (pos[i] >= jobs[i].out->len)
				continue;
			ti = g_array_index(jobs[i].out, VtBranch, pos[i]).tsc;
			if (best < 0 || ti < t) {
				best = (gint)i;
				t = ti;
			}
		}
		if (best < 0)
			break;
		add_event(r, s, &jobs[best], pos[best]++);
	}
}

static gboolean decode_all(const VtDecodeOptions *opts, VmcorrSession *s, Job *jobs, guint n, GError **error)
{
	Shared sh = { opts, { 0 } };
	GThreadPool *pool;
	guint threads = opts->jobs ? opts->jobs : g_get_num_processors();

	cpu_of(s, &sh.cpu);
	pool = g_thread_pool_new(run_job, &sh, (gint)MAX(1, MIN(threads, n)), TRUE, error);
	if (!pool)
		return FALSE;
	for (guint i = 0; i < n; i++)
		g_thread_pool_push(pool, &jobs[i], NULL);
	g_thread_pool_free(pool, FALSE, TRUE);
	for (guint i = 0; i < n; i++) {
		if (jobs[i].error) {
			g_propagate_error(error, jobs[i].error);
			jobs[i].error = NULL;
			return FALSE;
		}
	}
	return TRUE;
}

VtDecodeResult *vt_decode_recording(const VtDecodeOptions *opts, GError **error)
{
	VmcorrSession *s = vmcorr_session_open(opts->path, VT_PERF_OPEN_RDONLY, error);
	VtDecodeResult *r = NULL;
	Job *jobs = NULL;
	guint n;
	gboolean ok = FALSE;

	if (!s)
		return NULL;
	n = s->queues->len;
	jobs = g_new0(Job, n);
	for (guint i = 0; i < n; i++) {
		jobs[i].q = &g_array_index(s->queues, VmcorrQueue, i);
		jobs[i].out = g_array_new(FALSE, FALSE, sizeof(VtBranch));
		if (!join_buffers(s, jobs[i].q, &jobs[i], error))
			goto out;
	}
	if (!decode_all(opts, s, jobs, n, error))
		goto out;
	r = g_new0(VtDecodeResult, 1);
	r->strings = g_string_chunk_new(4096);
	r->timed = s->have_tsc;
	r->per_cpu = s->per_cpu;
	collect(r, s, jobs, n);
	ok = TRUE;
out:
	for (guint i = 0; jobs && i < n; i++) {
		g_free(jobs[i].owned);
		if (jobs[i].out)
			g_array_free(jobs[i].out, TRUE);
		g_clear_error(&jobs[i].error);
	}
	g_free(jobs);
	vmcorr_session_free(s);
	if (!ok && r) {
		vt_decode_result_free(r);
		r = NULL;
	}
	return r;
}

void vt_decode_result_free(VtDecodeResult *r)
{
	if (!r)
		return;
	g_array_free(r->events, TRUE);
	g_string_chunk_free(r->strings);
	g_free(r);
}

gsize vt_decode_result_len(const VtDecodeResult *r)
{
	return r->events->len;
}

const VtDecodeEvent *vt_decode_result_event(const VtDecodeResult *r, gsize i)
{
	return &g_array_index(r->events, VtDecodeEvent, i);
}

gboolean vt_decode_result_timed(const VtDecodeResult *r)
{
	return r->timed;
}

gboolean vt_decode_result_per_cpu(const VtDecodeResult *r)
{
	return r->per_cpu;
}

guint vt_decode_result_n_errors(const VtDecodeResult *r)
{
	return r->nerrors;
}

char *vt_decode_recording_kcore_dir(const char *path)
{
	g_autofree char *dir = g_build_filename(path, "kcore_dir", NULL);
	g_autofree char *kcore = g_build_filename(dir, "kcore", NULL);

	if (!g_file_test(path, G_FILE_TEST_IS_DIR) || !g_file_test(kcore, G_FILE_TEST_IS_REGULAR))
		return NULL;
	return g_steal_pointer(&dir);
}
