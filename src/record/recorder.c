/* recorder.c - drain a trace source and real sideband events into a
 * perf.data directory. */
#include "config.h"

#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/utsname.h>
#include <x86intrin.h>

#include "src/host/host.h"
#include "src/perf/perf-data.h"
#include "src/perf/perf-encode.h"
#include "src/record/perfev.h"
#include "src/record/recorder.h"

G_DEFINE_QUARK(vt-recorder-error-quark, vt_recorder_error)

#define SIDEBAND_RING (256u << 10)
#define TRACEPOINT_RING (64u << 10)

typedef struct {
	guint off_vcpu, off_prev, off_next;   /* field offsets in the raw data */
	gboolean ok;
} TscFormat;

typedef struct {
	uint64_t tsc, time, width;
} CalPoint;

/* Sideband events of one kind: their attr, every event, and the events
 * that own a ring (the others send their records there). */
typedef struct {
	const char *name;           /* HEADER_EVENT_DESC name */
	struct perf_event_attr attr;
	GPtrArray *events;          /* VtPerfevEvent * (owned) */
	GPtrArray *rings;           /* VtPerfevEvent * (not owned) */
} EvGroup;

static void group_init(EvGroup *g, const char *name)
{
	g->name = name;
	g->events = vt_perfev_array_new();
	g->rings = g_ptr_array_new();
}

static void group_clear(EvGroup *g)
{
	if (g->rings)
		g_ptr_array_free(g->rings, TRUE);
	if (g->events)
		g_ptr_array_free(g->events, TRUE);
	g->rings = g->events = NULL;
}

static uint64_t *group_ids(const EvGroup *g)
{
	uint64_t *ids = g_new0(uint64_t, MAX(g->events->len, 1));

	for (guint i = 0; i < g->events->len; i++)
		ids[i] = ((VtPerfevEvent *)g_ptr_array_index(g->events, i))->id;
	return ids;
}

struct VtRecorder {
	VtCapture *cap;
	struct perf_event_attr trace_attr;  /* the capture's event, as written to the file */
	VtRecorderOptions o;
	char *out_dir;
	VtPerfWriter *w;
	EvGroup sb;                 /* per-task dummy: comm, task, mmap (+ switches per-thread) */
	EvGroup sw;                 /* per-CPU mode: CPU-wide context switches */
	EvGroup tp;                 /* kvm_write_tsc_offset on every CPU (not in the file) */
	GArray *tsc_writes;         /* VtRecorderTscWrite */
	char *tp_why;
	TscFormat tf;
	VtPerfTimeConv tc;
	CalPoint cal_start;         /* calibrated clock: the first point */
	uint64_t time_conv_off, info_off;   /* where those records are in the file */
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
 * causes (prctl PR_SET_NAME) against the TSC read around them.  Two points
 * 100 ms apart start the recording (rate good to ~1e-5); at the end a third
 * point, taken over the whole recording, refines the rate, and the
 * TIME_CONV and AUXTRACE_INFO records are rewritten with it. */
static gboolean cal_comm(const struct perf_event_header *h, void *user, GError **error)
{
	uint64_t *t = user;

	(void)error;
	if (h->type == PERF_RECORD_COMM && h->size >= 8 + 8 + 8 + 8)
		memcpy(t, (const uint8_t *)h + h->size - 8, 8);   /* sample_id: TIME only */
	return TRUE;
}

/* RDTSC between LFENCEs: ordered with the code around it like RDTSCP, but
 * every x86-64 CPU has it (LFENCE is SSE2).  RDTSCP is not used: some CPUs
 * and VMs lack it, and valgrind advertises it without emulating it. */
static uint64_t tsc_ordered(void)
{
	uint64_t t;

	_mm_lfence();
	t = __rdtsc();
	_mm_lfence();
	return t;
}

/* The best of 20 (TSC, perf time) pairs: the narrowest window. */
static gboolean cal_point(CalPoint *best, GError **error)
{
	struct perf_event_attr a = { 0 };
	VtPerfevEvent ev;
	char old[17] = { 0 };
	gboolean ok;

	a.type = PERF_TYPE_SOFTWARE;
	a.config = PERF_COUNT_SW_DUMMY;
	a.comm = 1;
	a.sample_id_all = 1;
	a.sample_type = PERF_SAMPLE_TIME;
	a.disabled = 1;
	if (!vt_perfev_open(&ev, &a, 0, -1, "perf clock calibration", error))
		return FALSE;
	ok = vt_perfev_map(&ev, 16384, 0, FALSE, error) && vt_perfev_enable(&ev, TRUE, error);
	prctl(PR_GET_NAME, old);
	best->width = UINT64_MAX;
	for (int i = 0; ok && i < 20; i++) {
		uint64_t t1, t2, time = 0;

		t1 = tsc_ordered();
		prctl(PR_SET_NAME, i & 1 ? "vmtrace-cal1" : "vmtrace-cal2");
		t2 = tsc_ordered();
		ok = vt_ring_read(&ev.ring, cal_comm, &time, error) >= 0;
		if (ok && time && t2 - t1 < best->width) {
			best->width = t2 - t1;
			best->tsc = t1 + (t2 - t1) / 2;
			best->time = time;
		}
	}
	prctl(PR_SET_NAME, old);
	vt_perfev_close(&ev);
	if (ok && best->width == UINT64_MAX) {
		g_set_error(error, VT_RECORDER_ERROR, 0, "cannot calibrate the perf clock: no COMM records");
		ok = FALSE;
	}
	return ok;
}

/* time = time_zero + tsc * mult >> shift through points p1 and p2. */
static gboolean conv_from_points(const CalPoint *p1, const CalPoint *p2, VtPerfTimeConv *tc, GError **error)
{
	long double ns_per_cyc;
	unsigned shift = 31;

	if (p2->tsc <= p1->tsc || p2->time <= p1->time) {
		g_set_error(error, VT_RECORDER_ERROR, 0, "cannot calibrate the perf clock against the TSC "
			    "(they do not both advance)");
		return FALSE;
	}
	ns_per_cyc = (long double)(p2->time - p1->time) / (long double)(p2->tsc - p1->tsc);
	while (shift > 0 && ns_per_cyc * (1ULL << shift) >= 4294967295.0L)
		shift--;
	memset(tc, 0, sizeof(*tc));
	tc->has_ext = TRUE;
	tc->time_shift = shift;
	tc->time_mult = (uint64_t)(ns_per_cyc * (1ULL << shift) + 0.5L);
	tc->cap_user_time_zero = 1;
	tc->time_zero = 0;
	tc->time_zero = p2->time - vt_perf_tsc_to_time(p2->tsc, tc);
	return TRUE;
}

static uint64_t first_sb_id(const VtRecorder *r)
{
	return ((VtPerfevEvent *)g_ptr_array_index(r->sb.events, 0))->id;
}

/* --- writing records (built with src/perf/perf-encode.h) */

static gboolean write_rec(VtRecorder *r, GByteArray *b, gsize start, uint32_t type, uint16_t misc, GError **error)
{
	vt_perf_rec_end(b, start, type, misc);
	return vt_perf_writer_write_record(r->w, b->data + start, error);
}

static GByteArray *auxtrace_info_rec(const VtRecorder *r)
{
	GByteArray *b = g_byte_array_new();
	uint64_t priv[VT_PT_INFO_NR_FIXED + 1];

	memcpy(priv, r->cap->info, sizeof(r->cap->info));
	priv[VT_PT_INFO_TIME_SHIFT] = r->tc.time_shift;
	priv[VT_PT_INFO_TIME_MULT] = r->tc.time_mult;
	priv[VT_PT_INFO_TIME_ZERO] = r->tc.time_zero;
	priv[VT_PT_INFO_CAP_USER_TIME_ZERO] = r->tc.cap_user_time_zero;
	priv[VT_PT_INFO_FILTER_STR_LEN] = 0;
	priv[VT_PT_INFO_NR_FIXED] = 0;   /* cap_event_trace */
	vt_perf_put_auxtrace_info(b, priv, G_N_ELEMENTS(priv));
	return b;
}

/* TIME_CONV and AUXTRACE_INFO; at `off` (rewrite) or appended (off 0). */
static gboolean write_time_records(VtRecorder *r, gboolean patch, GError **error)
{
	g_autoptr(GByteArray) tc = g_byte_array_new();
	g_autoptr(GByteArray) info = auxtrace_info_rec(r);

	vt_perf_put_time_conv(tc, &r->tc);
	if (patch)
		return vt_perf_writer_patch(r->w, r->time_conv_off, tc->data, tc->len, error) &&
		       vt_perf_writer_patch(r->w, r->info_off, info->data, info->len, error);
	r->time_conv_off = vt_perf_writer_tell(r->w);
	r->info_off = r->time_conv_off + tc->len;
	return vt_perf_writer_write_record(r->w, tc->data, error) &&
	       vt_perf_writer_write_record(r->w, info->data, error);
}

static gboolean write_comm(VtRecorder *r, uint32_t pid, uint32_t tid, const char *comm, GError **error)
{
	g_autoptr(GByteArray) b = g_byte_array_new();
	gsize s = vt_perf_rec_begin(b);

	vt_perf_put_u32(b, pid);
	vt_perf_put_u32(b, tid);
	vt_perf_put_cstr(b, comm, 15);     /* TASK_COMM_LEN - 1 */
	/* time 0, as perf's synthesized events: they describe the state before the trace */
	vt_perf_put_sample_id(b, pid, tid, 0, 0, first_sb_id(r));
	return write_rec(r, b, s, PERF_RECORD_COMM, 0, error);
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

static gboolean write_mmap(VtRecorder *r, uint64_t start, uint64_t len, uint64_t pgoff, const char *name,
			   GError **error)
{
	g_autoptr(GByteArray) b = g_byte_array_new();
	gsize s = vt_perf_rec_begin(b);

	vt_perf_put_u32(b, (uint32_t)-1);
	vt_perf_put_u32(b, 0);
	vt_perf_put_u64(b, start);
	vt_perf_put_u64(b, len);
	vt_perf_put_u64(b, pgoff);
	vt_perf_put_cstr(b, name, G_MAXSIZE);
	vt_perf_put_sample_id(b, (uint32_t)-1, 0, 0, 0, first_sb_id(r));
	return write_rec(r, b, s, PERF_RECORD_MMAP, PERF_RECORD_MISC_KERNEL, error);
}

/* A module's file as perf names it: its path from modules.dep, else [name]. */
static char *module_file(const char *release, const char *deps, const char *name)
{
	g_autofree char *want = g_strdelimit(g_strdup(name), "-", '_');

	for (const char *l = deps; l && *l;) {
		const char *colon = strchr(l, ':'), *nl = strchr(l, '\n');
		g_autofree char *path = colon && (!nl || colon < nl) ? g_strndup(l, colon - l) : NULL;

		if (path) {
			g_autofree char *base = g_path_get_basename(path);
			char *dot = strstr(base, ".ko");

			if (dot) {
				*dot = '\0';
				g_strdelimit(base, "-", '_');
				if (!strcmp(base, want))
					return g_strdup_printf("/lib/modules/%s/%s", release, path);
			}
		}
		l = nl ? nl + 1 : NULL;
	}
	return g_strdup_printf("[%s]", name);
}

/* PERF_RECORD_MMAPs of the kernel text and the modules, as perf synthesizes
 * them: [kernel.kallsyms]_text from _text to _etext (/proc/kallsyms), and
 * each module from /proc/modules - kvm and kvm_intel are what a host trace
 * of guests spends its host time in.  None when kptr_restrict hides the
 * addresses. */
static gboolean write_kernel_mmaps(VtRecorder *r, GError **error)
{
	g_autofree char *ks = vt_host_read("/proc/kallsyms");
	g_autofree char *mods = vt_host_read("/proc/modules");
	uint64_t text = 0, etext = 0;
	struct utsname u;

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
	if (text && etext > text && !write_mmap(r, text, etext - text, text, "[kernel.kallsyms]_text", error))
		return FALSE;
	if (mods && uname(&u) == 0) {
		g_autofree char *dp = g_strdup_printf("/lib/modules/%s/modules.dep", u.release);
		g_autofree char *deps = vt_host_read(dp);
		g_auto(GStrv) lines = g_strsplit(mods, "\n", -1);

		for (guint i = 0; lines[i]; i++) {
			/* name size refcount deps state address */
			g_auto(GStrv) f = g_strsplit_set(lines[i], " \t", -1);
			uint64_t size, addr;
			g_autofree char *file = NULL;

			if (g_strv_length(f) < 6)
				continue;
			size = g_ascii_strtoull(f[1], NULL, 10);
			addr = g_ascii_strtoull(f[5], NULL, 16);
			if (!size || !addr)
				continue;
			file = module_file(u.release, deps, f[0]);
			if (!write_mmap(r, addr, size, 0, file, error))
				return FALSE;
		}
	}
	return TRUE;
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

/* The sideband, as perf records it: a dummy event on the traced threads
 * (comm, task, mmap; context switches too in per-thread mode), and in
 * per-CPU mode a dummy on every traced CPU recording all its context
 * switches CPU-wide - perf's intel_pt decoder (have_sched_switch = 3)
 * needs PERF_RECORD_SWITCH_CPU_WIDE to know which thread each per-CPU
 * buffer was tracing. */
static gboolean open_sideband(VtRecorder *r, GError **error)
{
	VtCapture *c = r->cap;
	uint64_t st = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_IDENTIFIER;

	sideband_attr(&r->sb.attr, st);
	r->sb.attr.context_switch = !c->cfg.per_cpu;
	for (guint i = 0; i < c->streams->len; i++) {
		VtCaptureStream *s = vt_capture_stream(c, i);
		VtPerfevEvent *o = vt_perfev_open_stream(r->sb.events, &r->sb.attr, c->cfg.per_cpu ? r->o.tids : &s->tid,
						       c->cfg.per_cpu ? r->o.ntids : 1, s->cpu, SIDEBAND_RING, 0, FALSE,
						       "sideband", error);

		if (!o)
			return FALSE;
		g_ptr_array_add(r->sb.rings, o);
	}
	if (!c->cfg.per_cpu)
		return TRUE;
	memset(&r->sw.attr, 0, sizeof(r->sw.attr));
	r->sw.attr.type = PERF_TYPE_SOFTWARE;
	r->sw.attr.config = PERF_COUNT_SW_DUMMY;
	r->sw.attr.sample_period = 1;
	r->sw.attr.sample_type = st;
	r->sw.attr.sample_id_all = 1;
	r->sw.attr.exclude_user = 1;
	r->sw.attr.exclude_hv = 1;
	r->sw.attr.context_switch = 1;
	r->sw.attr.disabled = 1;
	for (guint i = 0; i < c->streams->len; i++) {
		VtPerfevEvent *o = vt_perfev_open_stream(r->sw.events, &r->sw.attr, NULL, 0, vt_capture_stream(c, i)->cpu,
						       SIDEBAND_RING, 0, FALSE, "context switches", error);

		if (!o)
			return FALSE;
		g_ptr_array_add(r->sw.rings, o);
	}
	return TRUE;
}

static TscFormat tsc_format(void)
{
	TscFormat f = { 0 };
	g_autofree char *s = vt_perfev_tracepoint_file("kvm", "kvm_write_tsc_offset", "format");

	if (s) {
		guint found = 0;
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
	memset(&r->tp.attr, 0, sizeof(r->tp.attr));
	r->tp.attr.type = PERF_TYPE_TRACEPOINT;
	r->tp.attr.config = (uint64_t)id;
	r->tp.attr.sample_period = 1;
	r->tp.attr.sample_type = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU |
				 PERF_SAMPLE_RAW;
	r->tp.attr.disabled = 1;
	for (guint i = 0; i < cpus->len; i++) {
		VtPerfevEvent *o = vt_perfev_open_stream(r->tp.events, &r->tp.attr, NULL, 0, g_array_index(cpus, int, i),
						       TRACEPOINT_RING, 0, FALSE, "kvm:kvm_write_tsc_offset", &e);

		if (!o) {
			r->tp_why = g_strdup(e->message);
			g_clear_error(&e);
			g_ptr_array_set_size(r->tp.rings, 0);
			g_ptr_array_set_size(r->tp.events, 0);
			return;
		}
		g_ptr_array_add(r->tp.rings, o);
	}
	r->tsc_writes = g_array_new(FALSE, TRUE, sizeof(VtRecorderTscWrite));
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
	VtRecorderTscWrite w = { 0 };
	const TscFormat *f = &r->tf;

	(void)error;
	if (h->type != PERF_RECORD_SAMPLE || h->size < 8 + 36)
		return TRUE;
	memcpy(&pid, p + 8, 4);
	memcpy(&tid, p + 12, 4);
	memcpy(&w.time, p + 16, 8);
	memcpy(&rawsize, p + 32, 4);
	if (36ULL + rawsize > (uint64_t)h->size - 8 || rawsize < MAX(f->off_prev, f->off_next) + 8 || rawsize < f->off_vcpu + 4)
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
	for (guint i = 0; i < r->sb.rings->len; i++)
		if (vt_ring_read(&((VtPerfevEvent *)g_ptr_array_index(r->sb.rings, i))->ring, on_sideband_record, r,
				 error) < 0)
			return FALSE;
	for (guint i = 0; i < r->sw.rings->len; i++)
		if (vt_ring_read(&((VtPerfevEvent *)g_ptr_array_index(r->sw.rings, i))->ring, on_sideband_record, r,
				 error) < 0)
			return FALSE;
	for (guint i = 0; i < r->tp.rings->len; i++)
		if (vt_ring_read(&((VtPerfevEvent *)g_ptr_array_index(r->tp.rings, i))->ring, on_tracepoint_record, r,
				 error) < 0)
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
	g_autofree uint64_t *sb_ids = NULL, *sw_ids = NULL;
	gboolean ok;

	r->cap = cap;
	r->o = *o;
	r->out_dir = g_strdup(o->out_dir);
	group_init(&r->sb, "dummy:k");
	group_init(&r->sw, "dummy:k");
	group_init(&r->tp, "kvm:kvm_write_tsc_offset");
	if (!o->ntids || !cap->streams->len) {
		g_set_error(error, VT_RECORDER_ERROR, 0, "nothing to trace: no vCPU threads");
		goto fail;
	}
	if (!open_sideband(r, error))
		goto fail;
	if (!read_time_conv(((VtPerfevEvent *)g_ptr_array_index(r->sb.rings, 0))->ring.pg, &r->tc)) {
		CalPoint p2;

		if (!cal_point(&r->cal_start, error))
			goto fail;
		g_usleep(100000);
		if (!cal_point(&p2, error) || !conv_from_points(&r->cal_start, &p2, &r->tc, error))
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
	sb_ids = group_ids(&r->sb);
	sw_ids = group_ids(&r->sw);
	/* attrs go into the file in the size perf 6.1 knows */
	r->trace_attr = cap->attr;
	r->trace_attr.size = PERF_ATTR_SIZE_VER7;
	r->sb.attr.size = PERF_ATTR_SIZE_VER7;
	r->sw.attr.size = PERF_ATTR_SIZE_VER7;
	ok = vt_perf_writer_add_attr(r->w, &r->trace_attr, (const uint64_t *)cap->ids->data, cap->ids->len, error) &&
	     vt_perf_writer_add_attr(r->w, &r->sb.attr, sb_ids, r->sb.events->len, error) &&
	     (!r->sw.events->len || vt_perf_writer_add_attr(r->w, &r->sw.attr, sw_ids, r->sw.events->len, error)) &&
	     write_time_records(r, FALSE, error) && write_comms(r, error) &&
	     write_kernel_mmaps(r, error);
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
	return vt_perfev_array_enable(r->sb.events, on, error) && vt_perfev_array_enable(r->sw.events, on, error) &&
	       vt_perfev_array_enable(r->tp.events, on, error) && r->cap->ops->enable(r->cap, on, error);
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
	g_autoptr(GByteArray) b = g_byte_array_new();
	gboolean ok = TRUE;

	if (uname(&u) == 0)
		ok = vt_perf_writer_set_feature_string(r->w, VT_PERF_FEAT_HOSTNAME, u.nodename, error) &&
		     vt_perf_writer_set_feature_string(r->w, VT_PERF_FEAT_OSRELEASE, u.release, error) &&
		     vt_perf_writer_set_feature_string(r->w, VT_PERF_FEAT_ARCH, u.machine, error);
	ok = ok && vt_perf_writer_set_feature_string(r->w, VT_PERF_FEAT_VERSION, "vmtrace " PACKAGE_VERSION, error) &&
	     vt_perf_writer_set_feature(r->w, VT_PERF_FEAT_NRCPUS, nr, sizeof(nr), error) &&
	     (!r->cap->cpuid || vt_perf_writer_set_feature_string(r->w, VT_PERF_FEAT_CPUID, r->cap->cpuid, error));
	if (ok && r->o.argv) {
		vt_perf_put_cmdline(b, r->o.argv);
		ok = vt_perf_writer_set_feature(r->w, VT_PERF_FEAT_CMDLINE, b->data, b->len, error);
		g_byte_array_set_size(b, 0);
	}
	if (ok) {
		g_autofree uint64_t *sb_ids = group_ids(&r->sb), *sw_ids = group_ids(&r->sw);
		const VtPerfEventDesc ev[3] = {
			{ &r->trace_attr, r->cap->event_name, (const uint64_t *)r->cap->ids->data, r->cap->ids->len },
			{ &r->sb.attr, r->sb.name, sb_ids, r->sb.events->len },
			{ &r->sw.attr, r->sw.name, sw_ids, r->sw.events->len },
		};

		vt_perf_put_event_desc(b, ev, r->sw.events->len ? 3 : 2);
		ok = vt_perf_writer_set_feature(r->w, VT_PERF_FEAT_EVENT_DESC, b->data, b->len, error);
		g_byte_array_set_size(b, 0);
	}
	if (ok) {
		const uint32_t types[2] = { r->cap->pmu_type, PERF_TYPE_SOFTWARE };
		const char *const names[2] = { "intel_pt", "software" };

		vt_perf_put_pmu_mappings(b, types, names, 2);
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
	if (!drain(r, TRUE, error))
		return FALSE;
	if (r->cap->cfg.snapshot && !take_snapshot(r, error))
		return FALSE;
	if (r->st.time_calibrated) {
		/* refine the measured clock over the whole recording */
		CalPoint p3;
		VtPerfTimeConv tc;

		if (cal_point(&p3, error) && p3.time - r->cal_start.time > 1000000000ULL &&
		    conv_from_points(&r->cal_start, &p3, &tc, NULL)) {
			r->tc = tc;
			if (!write_time_records(r, TRUE, error))
				return FALSE;
		}
		g_clear_error(error);
	}
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
	group_clear(&r->sb);
	group_clear(&r->sw);
	group_clear(&r->tp);
	if (r->tsc_writes)
		g_array_free(r->tsc_writes, TRUE);
	g_free(r->tp_why);
	g_free(r->out_dir);
	g_free(r);
}
