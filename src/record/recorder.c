/* recorder.c - drain a trace source and real sideband events into a
 * perf.data directory. */
#include "config.h"

#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/utsname.h>
#include <x86intrin.h>

#include "host/host.h"
#include "perf/perf-data.h"
#include "record/perfev.h"
#include "record/recorder.h"

G_DEFINE_QUARK(vt-recorder-error-quark, vt_recorder_error)

#define SIDEBAND_RING (256u << 10)
#define TRACEPOINT_RING (64u << 10)

typedef struct {
	guint off_vcpu, off_prev, off_next;   /* field offsets in the raw data */
	gboolean ok;
} TscFormat;

struct VtRecorder {
	VtCapture *cap;
	VtRecorderOptions o;
	char *out_dir;
	VtPerfWriter *w;
	GArray *sb;                 /* VtPerfEvent: sideband dummies */
	GArray *sb_rings;           /* guint: indexes of sb that own a ring */
	GArray *tp;                 /* VtPerfEvent: kvm_write_tsc_offset per CPU */
	GArray *tsc_writes;         /* VtTscWrite */
	char *tp_why;
	TscFormat tf;
	struct perf_event_attr sb_attr, tp_attr;
	VtPerfTimeConv tc;
	VtRecorderStats st;
	gboolean started, finished;
	GError *cb_error;
};

/* --- perf clock */

static gboolean read_time_conv(const struct perf_event_mmap_page *pg, VtPerfTimeConv *tc)
{
	uint32_t seq;

	memset(tc, 0, sizeof(*tc));
	tc->has_ext = TRUE;
	for (int tries = 0; tries < 1000; tries++) {
		seq = __atomic_load_n(&pg->lock, __ATOMIC_ACQUIRE);
		tc->time_shift = pg->time_shift;
		tc->time_mult = pg->time_mult;
		tc->time_zero = pg->time_zero;
		tc->time_cycles = pg->time_cycles;
		tc->time_mask = pg->time_mask;
		tc->cap_user_time_zero = pg->cap_user_time_zero;
		tc->cap_user_time_short = pg->cap_user_time_short;
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&pg->lock, __ATOMIC_ACQUIRE) == seq && !(seq & 1))
			return tc->cap_user_time_zero;
	}
	return FALSE;
}

/* The kernel exports no TSC <-> perf clock conversion on some machines
 * (cap_user_time_zero = 0: e.g. when sched_clock is not the TSC, as in many
 * VMs).  Measure it instead: the perf time of COMM records this thread
 * causes (prctl PR_SET_NAME) against the TSC read around them, 100 ms apart.
 * Good to a few microseconds. */
typedef struct {
	uint64_t tsc, time, width;
} CalPoint;

static gboolean cal_comm(const struct perf_event_header *h, void *user, GError **error)
{
	uint64_t *t = user;

	(void)error;
	if (h->type == PERF_RECORD_COMM && h->size >= 8 + 8 + 8 + 8)
		memcpy(t, (const uint8_t *)h + h->size - 8, 8);   /* sample_id: TIME only */
	return TRUE;
}

static gboolean cal_point(VtPerfEvent *ev, CalPoint *best, GError **error)
{
	char old[17] = { 0 };

	prctl(PR_GET_NAME, old);
	best->width = UINT64_MAX;
	for (int i = 0; i < 20; i++) {
		uint64_t t1, t2, time = 0;

		t1 = __rdtsc();
		prctl(PR_SET_NAME, i & 1 ? "vmtrace-cal1" : "vmtrace-cal2");
		t2 = __rdtsc();
		if (vt_ring_read(&ev->ring, cal_comm, &time, error) < 0)
			return FALSE;
		if (time && t2 - t1 < best->width) {
			best->width = t2 - t1;
			best->tsc = t1 + (t2 - t1) / 2;
			best->time = time;
		}
	}
	prctl(PR_SET_NAME, old);
	return best->width != UINT64_MAX;
}

static gboolean calibrate_time_conv(VtPerfTimeConv *tc, GError **error)
{
	struct perf_event_attr a = { 0 };
	VtPerfEvent ev;
	CalPoint p1, p2;
	long double ns_per_cyc;
	unsigned shift = 31;
	gboolean ok;

	a.type = PERF_TYPE_SOFTWARE;
	a.config = PERF_COUNT_SW_DUMMY;
	a.comm = 1;
	a.sample_id_all = 1;
	a.sample_type = PERF_SAMPLE_TIME;
	a.disabled = 1;
	if (!vt_perfev_open(&ev, &a, 0, -1, "perf clock calibration", error))
		return FALSE;
	ok = vt_perfev_map(&ev, 16384, 0, FALSE, error) && vt_perfev_enable(&ev, TRUE, error) &&
	     cal_point(&ev, &p1, error);
	if (ok) {
		g_usleep(100000);
		ok = cal_point(&ev, &p2, error);
	}
	vt_perfev_close(&ev);
	if (!ok || p2.tsc <= p1.tsc || p2.time <= p1.time) {
		if (error && !*error)
			g_set_error(error, VT_RECORDER_ERROR, 0, "cannot calibrate the perf clock against the TSC");
		return FALSE;
	}
	ns_per_cyc = (long double)(p2.time - p1.time) / (long double)(p2.tsc - p1.tsc);
	while (shift > 0 && ns_per_cyc * (1ULL << shift) >= 4294967295.0L)
		shift--;
	memset(tc, 0, sizeof(*tc));
	tc->has_ext = TRUE;
	tc->time_shift = shift;
	tc->time_mult = (uint64_t)(ns_per_cyc * (1ULL << shift) + 0.5L);
	tc->cap_user_time_zero = 1;
	tc->time_zero = 0;
	tc->time_zero = p2.time - vt_perf_tsc_to_time(p2.tsc, tc);
	return TRUE;
}

/* --- helpers writing records */

static void put(GByteArray *b, const void *p, guint len)
{
	g_byte_array_append(b, p, len);
}

static void put_u32(GByteArray *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(GByteArray *b, uint64_t v) { put(b, &v, 8); }

/* sample_id trailer for IP|TID|TIME|CPU|IDENTIFIER: pid tid time cpu res id */
static void put_sample_id(GByteArray *b, uint32_t pid, uint32_t tid, uint64_t time, uint32_t cpu, uint64_t id)
{
	put_u32(b, pid);
	put_u32(b, tid);
	put_u64(b, time);
	put_u32(b, cpu);
	put_u32(b, 0);
	put_u64(b, id);
}

static gboolean write_rec(VtRecorder *r, GByteArray *b, uint32_t type, uint16_t misc, GError **error)
{
	struct perf_event_header *h = (void *)b->data;

	h->type = type;
	h->misc = misc;
	h->size = (uint16_t)b->len;
	return vt_perf_writer_write_record(r->w, b->data, error);
}

static GByteArray *rec_begin(void)
{
	struct perf_event_header h = { 0 };
	GByteArray *b = g_byte_array_sized_new(128);

	put(b, &h, sizeof(h));
	return b;
}

static gboolean write_time_conv(VtRecorder *r, GError **error)
{
	g_autoptr(GByteArray) b = rec_begin();
	uint8_t caps[8] = { r->tc.cap_user_time_zero, r->tc.cap_user_time_short };

	put_u64(b, r->tc.time_shift);
	put_u64(b, r->tc.time_mult);
	put_u64(b, r->tc.time_zero);
	put_u64(b, r->tc.time_cycles);
	put_u64(b, r->tc.time_mask);
	put(b, caps, 8);
	return write_rec(r, b, VT_PERF_RECORD_TIME_CONV, 0, error);
}

static gboolean write_auxtrace_info(VtRecorder *r, GError **error)
{
	g_autoptr(GByteArray) b = rec_begin();
	uint64_t priv[VT_PT_INFO_NR_FIXED + 1];

	memcpy(priv, r->cap->info, sizeof(r->cap->info));
	priv[VT_PT_INFO_TIME_SHIFT] = r->tc.time_shift;
	priv[VT_PT_INFO_TIME_MULT] = r->tc.time_mult;
	priv[VT_PT_INFO_TIME_ZERO] = r->tc.time_zero;
	priv[VT_PT_INFO_CAP_USER_TIME_ZERO] = r->tc.cap_user_time_zero;
	priv[VT_PT_INFO_FILTER_STR_LEN] = 0;
	priv[VT_PT_INFO_NR_FIXED] = 0;   /* cap_event_trace */
	put_u32(b, VT_PERF_AUXTRACE_INTEL_PT);
	put_u32(b, 0);
	put(b, priv, sizeof(priv));
	return write_rec(r, b, VT_PERF_RECORD_AUXTRACE_INFO, 0, error);
}

static gboolean write_comm(VtRecorder *r, uint32_t pid, uint32_t tid, const char *comm, GError **error)
{
	g_autoptr(GByteArray) b = rec_begin();
	char name[24] = { 0 };
	guint len = (guint)MIN(strlen(comm), 15u);

	memcpy(name, comm, len);
	put_u32(b, pid);
	put_u32(b, tid);
	put(b, name, (len + 1 + 7) & ~7u);
	/* time 0, as perf's synthesized events: they describe the state before the trace */
	put_sample_id(b, pid, tid, 0, 0, g_array_index(r->sb, VtPerfEvent, 0).id);
	return write_rec(r, b, PERF_RECORD_COMM, 0, error);
}

/* COMM records of the QEMU process's threads, as perf synthesizes them. */
static gboolean write_comms(VtRecorder *r, GError **error)
{
	g_autofree char *task = g_strdup_printf("/proc/%u/task", r->o.qemu_pid);
	g_autoptr(GDir) dir = g_dir_open(task, 0, NULL);
	const char *e;
	g_autofree char *pcomm = NULL;
	g_autofree char *pp = g_strdup_printf("/proc/%u/comm", r->o.qemu_pid);

	if (g_file_get_contents(pp, &pcomm, NULL, NULL) &&
	    !write_comm(r, r->o.qemu_pid, r->o.qemu_pid, g_strchomp(pcomm), error))
		return FALSE;
	while (dir && (e = g_dir_read_name(dir))) {
		g_autofree char *p = g_strdup_printf("%s/%s/comm", task, e);
		g_autofree char *comm = NULL;
		uint32_t tid = (uint32_t)g_ascii_strtoull(e, NULL, 10);

		if (tid == r->o.qemu_pid || !g_file_get_contents(p, &comm, NULL, NULL))
			continue;
		if (!write_comm(r, r->o.qemu_pid, tid, g_strchomp(comm), error))
			return FALSE;
	}
	return TRUE;
}

/* PERF_RECORD_MMAP of the kernel text, as perf synthesizes it, from the
 * addresses of _text and _etext in /proc/kallsyms (none when they are
 * hidden by kptr_restrict). */
static gboolean write_kernel_mmap(VtRecorder *r, GError **error)
{
	g_autofree char *ks = NULL;
	uint64_t text = 0, etext = 0;
	static const char name[] = "[kernel.kallsyms]_text";
	char fname[32] = { 0 };

	if (!g_file_get_contents("/proc/kallsyms", &ks, NULL, NULL))
		return TRUE;
	for (char *line = ks, *next; line && *line; line = next) {
		char *sp;
		uint64_t a;

		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		a = g_ascii_strtoull(line, &sp, 16);
		if (!sp || strlen(sp) < 4)
			continue;
		if (!strcmp(sp + 3, "_text"))
			text = a;
		else if (!strcmp(sp + 3, "_etext"))
			etext = a;
		if (text && etext)
			break;
	}
	if (!text || etext <= text)
		return TRUE;
	{
		g_autoptr(GByteArray) b = rec_begin();

		memcpy(fname, name, sizeof(name));
		put_u32(b, (uint32_t)-1);
		put_u32(b, 0);
		put_u64(b, text);
		put_u64(b, etext - text);
		put_u64(b, text);
		put(b, fname, 24);
		put_sample_id(b, (uint32_t)-1, 0, 0, 0, g_array_index(r->sb, VtPerfEvent, 0).id);
		return write_rec(r, b, PERF_RECORD_MMAP, PERF_RECORD_MISC_KERNEL, error);
	}
}

/* --- sideband events */

static void sideband_attr(struct perf_event_attr *a, uint64_t sample_type)
{
	memset(a, 0, sizeof(*a));
	a->type = PERF_TYPE_SOFTWARE;
	a->config = PERF_COUNT_SW_DUMMY;
	a->size = sizeof(*a);
	a->sample_period = 1;
	a->sample_type = sample_type;
	a->sample_id_all = 1;
	a->exclude_user = 1;
	a->exclude_hv = 1;
	a->comm = 1;
	a->comm_exec = 1;
	a->task = 1;
	a->mmap = 1;
	a->mmap2 = 1;
	a->context_switch = 1;
	a->disabled = 1;
}

static gboolean open_sideband(VtRecorder *r, GError **error)
{
	VtCapture *c = r->cap;

	sideband_attr(&r->sb_attr, PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU |
					   PERF_SAMPLE_IDENTIFIER);
	for (guint i = 0; i < c->streams->len; i++) {
		VtCaptureStream *s = vt_capture_stream(c, i);
		guint nev = c->cfg.per_cpu ? r->o.ntids : 1, first = r->sb->len;

		for (guint k = 0; k < nev; k++) {
			VtPerfEvent ev;
			pid_t pid = c->cfg.per_cpu ? r->o.tids[k] : s->tid;
			g_autofree char *what = g_strdup_printf("sideband on thread %d", (int)pid);

			if (!vt_perfev_open(&ev, &r->sb_attr, pid, s->cpu, what, error))
				return FALSE;
			g_array_append_val(r->sb, ev);
			if (k == 0) {
				if (!vt_perfev_map(&g_array_index(r->sb, VtPerfEvent, first), SIDEBAND_RING, 0, FALSE,
						   error))
					return FALSE;
				g_array_append_val(r->sb_rings, first);
			} else if (!vt_perfev_redirect(&g_array_index(r->sb, VtPerfEvent, r->sb->len - 1),
						       &g_array_index(r->sb, VtPerfEvent, first), error)) {
				return FALSE;
			}
		}
	}
	return TRUE;
}

static TscFormat tsc_format(void)
{
	static const char *const roots[] = { "/sys/kernel/tracing/events", "/sys/kernel/debug/tracing/events" };
	TscFormat f = { 0 };

	for (guint i = 0; i < G_N_ELEMENTS(roots) && !f.ok; i++) {
		g_autofree char *p = g_strdup_printf("%s/kvm/kvm_write_tsc_offset/format", roots[i]);
		g_autofree char *s = NULL;
		guint found = 0;

		if (!g_file_get_contents(p, &s, NULL, NULL))
			continue;
		g_auto(GStrv) lines = g_strsplit(s, "\n", -1);

		for (char **ll = lines; *ll; ll++) {
			const char *o = strstr(*ll, "offset:");
			guint off = o ? (guint)g_ascii_strtoull(o + 7, NULL, 10) : 0;

			if (!o)
				continue;
			if (strstr(*ll, " vcpu_id;"))
				f.off_vcpu = off, found |= 1;
			else if (strstr(*ll, " previous_tsc_offset;"))
				f.off_prev = off, found |= 2;
			else if (strstr(*ll, " next_tsc_offset;"))
				f.off_next = off, found |= 4;
		}
		f.ok = found == 7;
	}
	return f;
}

/* kvm:kvm_write_tsc_offset on every online CPU; a failure is not fatal. */
static void open_tracepoint(VtRecorder *r)
{
	gint64 id = vt_perfev_tracepoint_id("kvm", "kvm_write_tsc_offset");
	g_autoptr(GArray) cpus = vt_host_online_cpus();
	GError *e = NULL;

	r->tf = tsc_format();
	if (id < 0 || !r->tf.ok) {
		r->tp_why = g_strdup("kvm:kvm_write_tsc_offset not found in tracefs (is kvm loaded and tracefs "
				     "mounted? mount -t tracefs none /sys/kernel/tracing)");
		return;
	}
	memset(&r->tp_attr, 0, sizeof(r->tp_attr));
	r->tp_attr.type = PERF_TYPE_TRACEPOINT;
	r->tp_attr.config = (uint64_t)id;
	r->tp_attr.sample_period = 1;
	r->tp_attr.sample_type = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU |
				 PERF_SAMPLE_RAW;
	r->tp_attr.disabled = 1;
	for (guint i = 0; i < cpus->len; i++) {
		VtPerfEvent ev;
		int cpu = g_array_index(cpus, int, i);
		g_autofree char *what = g_strdup_printf("kvm:kvm_write_tsc_offset on CPU %d", cpu);

		if (!vt_perfev_open(&ev, &r->tp_attr, -1, cpu, what, &e) ||
		    (g_array_append_val(r->tp, ev), !vt_perfev_map(&g_array_index(r->tp, VtPerfEvent, r->tp->len - 1),
								   TRACEPOINT_RING, 0, FALSE, &e))) {
			r->tp_why = g_strdup(e->message);
			g_clear_error(&e);
			for (guint k = 0; k < r->tp->len; k++)
				vt_perfev_close(&g_array_index(r->tp, VtPerfEvent, k));
			g_array_set_size(r->tp, 0);
			return;
		}
	}
	r->tsc_writes = g_array_new(FALSE, TRUE, sizeof(VtTscWrite));
}

/* --- draining */

/* Count what the kernel says it lost: LOST records (sideband and trace
 * rings) and AUX records with the truncated flag (trace rings). */
static void count_losses(VtRecorder *r, const struct perf_event_header *h)
{
	uint64_t v;

	if (h->type == PERF_RECORD_AUX && h->size >= 32) {
		memcpy(&v, (const uint8_t *)h + 24, 8);   /* flags */
		if (v & PERF_AUX_FLAG_TRUNCATED)
			r->st.truncated++;
	} else if (h->type == PERF_RECORD_LOST && h->size >= 24) {
		memcpy(&v, (const uint8_t *)h + 16, 8);   /* lost */
		r->st.lost += v;
	}
}

static gboolean on_trace_record(const struct perf_event_header *h, void *user, GError **error)
{
	VtRecorder *r = user;

	count_losses(r, h);
	r->st.trace_records++;
	return vt_perf_writer_write_record(r->w, h, error);
}

static gboolean on_sideband_record(const struct perf_event_header *h, void *user, GError **error)
{
	VtRecorder *r = user;

	count_losses(r, h);
	r->st.sideband_records++;
	return vt_perf_writer_write_record(r->w, h, error);
}

/* PERF_RECORD_SAMPLE of kvm_write_tsc_offset: id, pid tid, time, cpu res, raw */
static gboolean on_tracepoint_record(const struct perf_event_header *h, void *user, GError **error)
{
	VtRecorder *r = user;
	const uint8_t *p = (const uint8_t *)(h + 1);
	uint32_t pid, tid, rawsize;
	VtTscWrite w = { 0 };
	const TscFormat *f = &r->tf;

	(void)error;
	if (h->type != PERF_RECORD_SAMPLE || h->size < 8 + 36)
		return TRUE;
	memcpy(&pid, p + 8, 4);
	memcpy(&tid, p + 12, 4);
	memcpy(&w.time, p + 16, 8);
	memcpy(&rawsize, p + 32, 4);
	if (36u + rawsize > h->size - 8u || rawsize < MAX(f->off_prev, f->off_next) + 8 || rawsize < f->off_vcpu + 4)
		return TRUE;
	if (r->o.qemu_pid && pid != r->o.qemu_pid)
		return TRUE;     /* another VM */
	w.tid = tid;
	memcpy(&w.vcpu, p + 36 + f->off_vcpu, 4);
	memcpy(&w.previous, p + 36 + f->off_prev, 8);
	memcpy(&w.next, p + 36 + f->off_next, 8);
	g_array_append_val(r->tsc_writes, w);
	return TRUE;
}

typedef struct {
	VtRecorder *r;
	VtCaptureStream *s;
} AuxCtx;

static gboolean on_aux(const uint8_t *a, uint64_t alen, const uint8_t *b, uint64_t blen, uint64_t offset,
		       void *user, GError **error)
{
	AuxCtx *x = user;
	VtPerfAuxtrace aux = {
		.offset = offset,
		.reference = __rdtsc(),
		.idx = x->s->idx,
		.tid = (uint32_t)x->s->tid,
		.cpu = (uint32_t)x->s->cpu,
	};

	x->s->aux_bytes += alen + blen;
	x->r->st.aux_bytes += alen + blen;
	return vt_perf_writer_write_auxtrace2(x->r->w, &aux, a, alen, b, blen, NULL, error);
}

static gboolean drain(VtRecorder *r, gboolean take_aux, GError **error)
{
	VtCapture *c = r->cap;
	uint64_t before = vt_perf_writer_tell(r->w);

	for (guint i = 0; i < c->streams->len; i++) {
		VtCaptureStream *s = vt_capture_stream(c, i);
		AuxCtx x = { r, s };

		if (vt_ring_read(s->ring, on_trace_record, r, error) < 0)
			return FALSE;
		if (take_aux && !c->cfg.snapshot && vt_ring_read_aux(s->ring, on_aux, &x, error) < 0)
			return FALSE;
	}
	for (guint i = 0; i < r->sb_rings->len; i++) {
		VtPerfEvent *ev = &g_array_index(r->sb, VtPerfEvent, g_array_index(r->sb_rings, guint, i));

		if (vt_ring_read(&ev->ring, on_sideband_record, r, error) < 0)
			return FALSE;
	}
	for (guint i = 0; i < r->tp->len; i++)
		if (vt_ring_read(&g_array_index(r->tp, VtPerfEvent, i).ring, on_tracepoint_record, r, error) < 0)
			return FALSE;
	if (vt_perf_writer_tell(r->w) != before) {
		struct perf_event_header fr = { .type = VT_PERF_RECORD_FINISHED_ROUND, .size = 8 };

		if (!vt_perf_writer_write_record(r->w, &fr, error))
			return FALSE;
	}
	r->st.file_bytes = vt_perf_writer_tell(r->w);
	return TRUE;
}

/* --- public */

VtRecorder *vt_recorder_new(VtCapture *cap, const VtRecorderOptions *o, GError **error)
{
	VtRecorder *r = g_new0(VtRecorder, 1);
	g_autofree uint64_t *pt_ids = NULL, *sb_ids = NULL;
	gboolean ok;

	r->cap = cap;
	r->o = *o;
	r->out_dir = g_strdup(o->out_dir);
	r->sb = g_array_new(FALSE, TRUE, sizeof(VtPerfEvent));
	r->sb_rings = g_array_new(FALSE, FALSE, sizeof(guint));
	r->tp = g_array_new(FALSE, TRUE, sizeof(VtPerfEvent));
	if (!o->ntids || !cap->streams->len) {
		g_set_error(error, VT_RECORDER_ERROR, 0, "nothing to trace: no vCPU threads");
		goto fail;
	}
	if (!open_sideband(r, error))
		goto fail;
	if (!read_time_conv(g_array_index(r->sb, VtPerfEvent, 0).ring.pg, &r->tc)) {
		if (!calibrate_time_conv(&r->tc, error))
			goto fail;
		r->st.time_calibrated = TRUE;
	}
	if (o->tsc_tracepoint)
		open_tracepoint(r);
	else
		r->tp_why = g_strdup("not requested");
	cap->cfg.time_conv = r->tc;
	if (!cap->ops->open(cap, error))
		goto fail;

	r->w = vt_perf_writer_new(o->out_dir, TRUE, error);
	if (!r->w)
		goto fail;
	pt_ids = g_new0(uint64_t, cap->streams->len);
	for (guint i = 0; i < cap->streams->len; i++)
		pt_ids[i] = vt_capture_stream(cap, i)->id;
	sb_ids = g_new0(uint64_t, r->sb->len);
	for (guint i = 0; i < r->sb->len; i++)
		sb_ids[i] = g_array_index(r->sb, VtPerfEvent, i).id;
	cap->attr.size = PERF_ATTR_SIZE_VER7;
	r->sb_attr.size = PERF_ATTR_SIZE_VER7;
	ok = vt_perf_writer_add_attr(r->w, &cap->attr, pt_ids, cap->streams->len, error) &&
	     vt_perf_writer_add_attr(r->w, &r->sb_attr, sb_ids, r->sb->len, error) &&
	     write_time_conv(r, error) && write_auxtrace_info(r, error) && write_comms(r, error) &&
	     write_kernel_mmap(r, error);
	if (ok) {
		struct perf_event_header fi = { .type = VT_PERF_RECORD_FINISHED_INIT, .size = 8 };

		ok = vt_perf_writer_write_record(r->w, &fi, error);
	}
	if (!ok)
		goto fail;
	return r;
fail:
	vt_recorder_free(r);
	return NULL;
}

static gboolean enable_all(VtRecorder *r, gboolean on, GError **error)
{
	for (guint i = 0; i < r->sb->len; i++)
		if (!vt_perfev_enable(&g_array_index(r->sb, VtPerfEvent, i), on, error))
			return FALSE;
	for (guint i = 0; i < r->tp->len; i++)
		if (!vt_perfev_enable(&g_array_index(r->tp, VtPerfEvent, i), on, error))
			return FALSE;
	return r->cap->ops->enable(r->cap, on, error);
}

gboolean vt_recorder_start(VtRecorder *r, GError **error)
{
	r->started = TRUE;
	return enable_all(r, TRUE, error);
}

gboolean vt_recorder_poll(VtRecorder *r, int timeout_ms, GError **error)
{
	r->cap->ops->wait(r->cap, timeout_ms);
	return drain(r, TRUE, error);
}

static gboolean take_snapshot(VtRecorder *r, GError **error)
{
	VtCapture *c = r->cap;

	for (guint i = 0; i < c->streams->len; i++) {
		VtCaptureStream *s = vt_capture_stream(c, i);
		AuxCtx x = { r, s };

		if (vt_ring_snapshot_aux(s->ring, r->o.snapshot_size ? r->o.snapshot_size : s->ring->aux_size, on_aux,
					 &x, error) < 0)
			return FALSE;
	}
	r->st.snapshots++;
	return drain(r, FALSE, error);
}

gboolean vt_recorder_snapshot(VtRecorder *r, GError **error)
{
	if (!r->cap->cfg.snapshot)
		return TRUE;
	/* as perf does: stop the trace while its buffer is copied */
	return r->cap->ops->enable(r->cap, FALSE, error) && drain(r, FALSE, error) && take_snapshot(r, error) &&
	       r->cap->ops->enable(r->cap, TRUE, error);
}

static gboolean write_features(VtRecorder *r, GError **error)
{
	struct utsname u;
	g_autoptr(GArray) cpus = vt_host_online_cpus();
	uint32_t nr[2] = { (uint32_t)sysconf(_SC_NPROCESSORS_CONF), cpus->len };
	const char *names[2] = { r->cap->event_name, "dummy:k" };
	const struct perf_event_attr *attrs[2] = { &r->cap->attr, &r->sb_attr };
	g_autoptr(GByteArray) b = g_byte_array_new();
	gboolean ok = TRUE;

	if (uname(&u) == 0)
		ok = vt_perf_writer_set_feature_string(r->w, VT_PERF_FEAT_HOSTNAME, u.nodename, error) &&
		     vt_perf_writer_set_feature_string(r->w, VT_PERF_FEAT_OSRELEASE, u.release, error) &&
		     vt_perf_writer_set_feature_string(r->w, VT_PERF_FEAT_ARCH, u.machine, error);
	ok = ok && vt_perf_writer_set_feature_string(r->w, VT_PERF_FEAT_VERSION, "vmtrace " PACKAGE_VERSION, error) &&
	     vt_perf_writer_set_feature(r->w, VT_PERF_FEAT_NRCPUS, nr, sizeof(nr), error);
	if (ok && r->o.cmdline) {
		/* HEADER_CMDLINE: u32 nr, then perf strings */
		uint32_t n = 1, len = (uint32_t)((strlen(r->o.cmdline) + 1 + 63) & ~63u);
		g_autofree char *pad = g_malloc0(len);

		memcpy(pad, r->o.cmdline, strlen(r->o.cmdline));
		g_byte_array_append(b, (void *)&n, 4);
		g_byte_array_append(b, (void *)&len, 4);
		g_byte_array_append(b, (void *)pad, len);
		ok = vt_perf_writer_set_feature(r->w, VT_PERF_FEAT_CMDLINE, b->data, b->len, error);
		g_byte_array_set_size(b, 0);
	}
	if (ok) {
		/* HEADER_EVENT_DESC: u32 nr, u32 attr size; per event: attr,
		 * u32 nr_ids, name (perf string), u64 ids[] */
		uint32_t nev = 2, asz = sizeof(struct perf_event_attr);
		VtCapture *c = r->cap;

		g_byte_array_append(b, (void *)&nev, 4);
		g_byte_array_append(b, (void *)&asz, 4);
		for (guint e = 0; e < 2; e++) {
			uint32_t nids = e == 0 ? c->streams->len : r->sb->len;
			uint32_t len = (uint32_t)((strlen(names[e]) + 1 + 63) & ~63u);
			g_autofree char *pad = g_malloc0(len);

			memcpy(pad, names[e], strlen(names[e]));
			g_byte_array_append(b, (const void *)attrs[e], asz);
			g_byte_array_append(b, (void *)&nids, 4);
			g_byte_array_append(b, (void *)&len, 4);
			g_byte_array_append(b, (void *)pad, len);
			for (guint i = 0; i < nids; i++) {
				uint64_t id = e == 0 ? vt_capture_stream(c, i)->id : g_array_index(r->sb, VtPerfEvent, i).id;

				g_byte_array_append(b, (void *)&id, 8);
			}
		}
		ok = vt_perf_writer_set_feature(r->w, VT_PERF_FEAT_EVENT_DESC, b->data, b->len, error);
		g_byte_array_set_size(b, 0);
	}
	if (ok) {
		/* HEADER_PMU_MAPPINGS: u32 nr; {u32 type; perf string name} */
		uint32_t n = 2, t = r->cap->pmu_type, sw = PERF_TYPE_SOFTWARE, l = 64;
		char s1[64] = "intel_pt", s2[64] = "software";

		g_byte_array_append(b, (void *)&n, 4);
		g_byte_array_append(b, (void *)&t, 4);
		g_byte_array_append(b, (void *)&l, 4);
		g_byte_array_append(b, (void *)s1, 64);
		g_byte_array_append(b, (void *)&sw, 4);
		g_byte_array_append(b, (void *)&l, 4);
		g_byte_array_append(b, (void *)s2, 64);
		ok = vt_perf_writer_set_feature(r->w, VT_PERF_FEAT_PMU_MAPPINGS, b->data, b->len, error);
	}
	return ok;
}

gboolean vt_recorder_finish(VtRecorder *r, GError **error)
{
	if (r->finished)
		return TRUE;
	if (r->started && !enable_all(r, FALSE, error))
		return FALSE;
	/* the synthetic source may still hold data: let it produce the rest */
	while (r->cap->ops->exhausted && !r->cap->ops->exhausted(r->cap) && !r->cap->cfg.snapshot)
		if (!vt_recorder_poll(r, 0, error))
			return FALSE;
	if (!drain(r, TRUE, error))
		return FALSE;
	if (r->cap->cfg.snapshot && !take_snapshot(r, error))
		return FALSE;
	if (!write_features(r, error) || !vt_perf_writer_finish(r->w, error))
		return FALSE;
	r->finished = TRUE;
	return TRUE;
}

const VtRecorderStats *vt_recorder_stats(const VtRecorder *r)
{
	return &r->st;
}

const GArray *vt_recorder_tsc_writes(const VtRecorder *r, const char **why)
{
	if (why)
		*why = r->tp_why;
	return r->tsc_writes;
}

void vt_recorder_free(VtRecorder *r)
{
	if (!r)
		return;
	if (r->w)
		vt_perf_writer_free(r->w);
	for (guint i = 0; i < r->sb->len; i++)
		vt_perfev_close(&g_array_index(r->sb, VtPerfEvent, i));
	for (guint i = 0; i < r->tp->len; i++)
		vt_perfev_close(&g_array_index(r->tp, VtPerfEvent, i));
	g_array_free(r->sb, TRUE);
	g_array_free(r->sb_rings, TRUE);
	g_array_free(r->tp, TRUE);
	if (r->tsc_writes)
		g_array_free(r->tsc_writes, TRUE);
	g_free(r->tp_why);
	g_free(r->out_dir);
	g_free(r);
}
