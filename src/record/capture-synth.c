/* capture-synth.c - the synthetic trace source.
 *
 * Plays the kernel's part of an intel_pt event in memory: it generates a
 * `vmtrace synth` trace for the real QEMU process (its pid, its vCPU
 * threads, the current TSC and the real perf clock), then, each time the
 * recorder waits, writes the trace's bytes into the streams' AUX areas and
 * the records the kernel would write for the intel_pt event
 * (PERF_RECORD_AUX, ITRACE_START) into their data rings - respecting the consumer's tails, as the
 * kernel does.  The recorder reads those rings exactly as it reads the
 * hardware's.
 */
#include "config.h"

#include <string.h>
#include <unistd.h>
#include <x86intrin.h>

#include "src/perf/perf-data.h"
#include "src/record/capture.h"
#include "src/synth/synth.h"

#define SYNTH_ID_BASE (1ULL << 40)   /* far from the kernel's event ids */

typedef struct {
	struct perf_event_mmap_page *pg;
	uint8_t *data, *aux;
	uint64_t aux_pos;            /* bytes produced (aux_head, except in snapshot mode) */
	VtRing ring;
} SynthStream;

typedef struct {
	VtPerfFile *f;
	VtPerfIter it;
	VtPerfRecord pending;
	gboolean have_pending, done;
	VtPerfTimeConv synth_tc;
	SynthStream *ss;
	guint n;
	uint64_t last_time;
	uint64_t produced;
	gint64 t_open;
} SynthPriv;

static uint64_t ring_free(uint64_t head, uint64_t tail, uint64_t size)
{
	return size - (head - tail);
}

static void ring_put(uint8_t *ring, uint64_t size, uint64_t pos, const void *src, uint64_t len)
{
	uint64_t off = pos & (size - 1), first = MIN(len, size - off);

	memcpy(ring + off, src, first);
	memcpy(ring, (const uint8_t *)src + first, len - first);
}

/* Append a record to a stream's data ring; FALSE when it does not fit. */
static gboolean data_put(SynthStream *s, const void *rec, uint32_t size)
{
	uint64_t head = s->pg->data_head;

	if (ring_free(head, __atomic_load_n(&s->pg->data_tail, __ATOMIC_ACQUIRE), s->ring.data_size) < size)
		return FALSE;
	ring_put(s->data, s->ring.data_size, head, rec, size);
	__atomic_store_n(&s->pg->data_head, head + size, __ATOMIC_RELEASE);
	return TRUE;
}

static uint64_t real_time(const SynthPriv *p, const VtCapture *c, uint64_t synth_time)
{
	return vt_perf_tsc_to_time(vt_perf_time_to_tsc(synth_time, &p->synth_tc), &c->cfg.time_conv);
}

/* Which stream a synth sideband record belongs to: synth's event ids are
 * 1000 + queue (trace) and 2000 + queue (sideband). */
static gint stream_of(const SynthPriv *p, uint64_t id)
{
	if (id >= 1000 && id < 3000 && (id % 1000) < p->n)
		return (gint)(id % 1000);
	return -1;
}

/* Route one synth record; FALSE when a ring is full (try again later). */
static gboolean route(VtCapture *c, SynthPriv *p, const VtPerfRecord *rec)
{
	VtPerfSampleId sid;
	gint q;

	if (rec->type == VT_PERF_RECORD_AUXTRACE) {
		VtPerfAuxtrace a;
		SynthStream *s;
		uint64_t head;
		struct {
			struct perf_event_header h;
			uint64_t aux_offset, aux_size, flags;
			uint32_t pid, tid;
			uint64_t time;
			uint32_t cpu, res;
			uint64_t id;
		} ar;
		const uint8_t *payload;

		if (!vt_perf_record_auxtrace(rec, &a, NULL) || a.idx >= p->n)
			return TRUE;
		s = &p->ss[a.idx];
		head = s->aux_pos;
		if (!c->cfg.snapshot &&
		    ring_free(head, __atomic_load_n(&s->pg->aux_tail, __ATOMIC_ACQUIRE), s->ring.aux_size) < a.size)
			return FALSE;
		if (ring_free(s->pg->data_head, __atomic_load_n(&s->pg->data_tail, __ATOMIC_ACQUIRE),
			      s->ring.data_size) < sizeof(ar))
			return FALSE;
		payload = vt_perf_file_map(p->f, a.payload_file_offset, a.size);
		if (!payload || a.size > s->ring.aux_size)
			return TRUE;
		ring_put(s->aux, s->ring.aux_size, head, payload, a.size);
		s->aux_pos = head + a.size;
		/* Intel PT in snapshot (overwrite) mode reports the offset in the area */
		__atomic_store_n(&s->pg->aux_head, c->cfg.snapshot ? s->aux_pos & (s->ring.aux_size - 1) : s->aux_pos,
				 __ATOMIC_RELEASE);
		memset(&ar, 0, sizeof(ar));
		ar.h.type = PERF_RECORD_AUX;
		ar.h.size = sizeof(ar);
		ar.aux_offset = head;
		ar.aux_size = a.size;
		ar.flags = c->cfg.snapshot ? PERF_AUX_FLAG_OVERWRITE : 0;
		ar.pid = c->cfg.qemu_pid;
		ar.tid = c->cfg.per_cpu ? (uint32_t)-1 : (uint32_t)vt_capture_stream(c, a.idx)->tid;
		ar.time = p->last_time;
		ar.cpu = c->cfg.per_cpu ? (uint32_t)vt_capture_stream(c, a.idx)->cpu : 0;
		ar.id = vt_capture_stream(c, a.idx)->id;
		data_put(s, &ar, sizeof(ar));
		p->produced += a.size;
		return TRUE;
	}
	if (rec->type != PERF_RECORD_ITRACE_START)
		return TRUE;     /* COMM, context switches: the recorder records the real ones */
	if (!vt_perf_record_sample_id(p->f, rec, &sid) || !sid.has_time || rec->size < 32 ||
	    (q = stream_of(p, sid.identifier)) < 0)
		return TRUE;
	{
		uint8_t buf[256];
		uint64_t t = real_time(p, c, sid.time), id = vt_capture_stream(c, (guint)q)->id;

		if (rec->size > sizeof(buf))
			return TRUE;
		memcpy(buf, rec->data, rec->size);
		/* sample_id trailer: pid tid | time | cpu res | identifier */
		memcpy(buf + rec->size - 24, &t, 8);
		memcpy(buf + rec->size - 8, &id, 8);
		if (!data_put(&p->ss[q], buf, rec->size))
			return FALSE;
		p->last_time = t;
	}
	return TRUE;
}

/* The synth configuration for cfg: one VM, the traced threads as its vCPUs
 * (one when they are not known yet), one CPU per vCPU in per-CPU mode. */
static void synth_config(const VtCaptureConfig *cfg, guint nstreams, VtSynthConfig *sc)
{
	*sc = *cfg->synth;
	sc->nvms = 1;
	sc->nvcpus = CLAMP(cfg->ntids, 1, VT_SYNTH_MAX_VCPUS);
	sc->per_cpu = cfg->per_cpu;
	sc->ncpus = cfg->per_cpu ? CLAMP(nstreams, 1, sc->nvcpus) : 0;
	sc->cyc = sc->cyc || cfg->cyc;
	sc->timeless = cfg->timeless;
	if (cfg->mtc_period >= 0)
		sc->mtc_period = (guint)cfg->mtc_period;
	sc->qemu_pid[0] = cfg->qemu_pid;
	for (guint i = 0; i < cfg->ntids && i < sc->nvcpus; i++)
		sc->tids[i] = (guint32)cfg->tids[i];
	sc->buffer_size = MIN(sc->buffer_size, cfg->aux_bytes / 2);
	sc->stop = cfg->stop;
}

static gboolean synth_probe(const VtCaptureConfig *cfg, GError **error)
{
	VtSynthConfig sc;

	if (!cfg->synth) {
		g_set_error(error, VT_CAPTURE_ERROR, VT_CAPTURE_ERROR_CONFIG, "the synthetic source needs a configuration");
		return FALSE;
	}
	synth_config(cfg, 1, &sc);
	if (!vt_synth_config_check(&sc, error)) {
		g_prefix_error(error, "--source synth: ");
		return FALSE;
	}
	return TRUE;
}

/* At most one CPU per vCPU thread (and no more vCPUs than synth has). */
static guint synth_max_streams(const VtCaptureConfig *cfg)
{
	return CLAMP(cfg->ntids, 1, VT_SYNTH_MAX_VCPUS);
}

static gboolean synth_open(VtCapture *c, GError **error)
{
	const VtCaptureConfig *cfg = &c->cfg;
	SynthPriv *p = g_new0(SynthPriv, 1);
	VtSynthConfig sc;
	g_autofree char *tmp = NULL;
	int fd;
	gboolean ok;
	VtPerfRecord rec;
	int r;

	c->priv = p;
	if (!cfg->ntids || !c->streams->len) {
		g_set_error(error, VT_CAPTURE_ERROR, VT_CAPTURE_ERROR_CONFIG, "the synthetic source needs vCPU threads");
		return FALSE;
	}
	synth_config(cfg, c->streams->len, &sc);
	sc.t0 = __rdtsc();
	fd = g_file_open_tmp("vmtrace-record-synth-XXXXXX.data", &tmp, error);
	if (fd < 0)
		return FALSE;
	close(fd);
	ok = vt_synth_generate(&sc, tmp, FALSE, NULL, NULL, error);
	if (ok)
		p->f = vt_perf_file_open(tmp, VT_PERF_OPEN_RDONLY, error);
	unlink(tmp);
	if (!ok || !p->f)
		return FALSE;

	c->attr = vt_perf_file_attr(p->f, 0)->attr;
	c->pmu_type = c->attr.type;
	c->event_name = vt_capture_event_name(!sc.timeless, sc.mtc && !sc.timeless, sc.mtc_period, sc.cyc);
	c->cpuid = vt_perf_file_feature_string(p->f, VT_PERF_FEAT_CPUID);
	/* the synth file's TIME_CONV and AUXTRACE_INFO */
	vt_perf_iter_init(&p->it, p->f);
	while ((r = vt_perf_iter_next(&p->it, &rec, error)) > 0 && rec.type != VT_PERF_RECORD_FINISHED_INIT) {
		VtPerfAuxtraceInfo ai;

		if (rec.type == VT_PERF_RECORD_TIME_CONV && !vt_perf_record_time_conv(&rec, &p->synth_tc, error))
			return FALSE;
		if (rec.type == VT_PERF_RECORD_AUXTRACE_INFO) {
			if (!vt_perf_record_auxtrace_info(&rec, &ai, error))
				return FALSE;
			memcpy(c->info, ai.priv, MIN(ai.nr_priv, (uint32_t)VT_PT_INFO_NR_FIXED) * sizeof(uint64_t));
		}
	}
	if (r < 0)
		return FALSE;
	vt_perf_iter_init(&p->it, p->f);
	p->t_open = g_get_monotonic_time();

	p->n = c->streams->len;
	p->ss = g_new0(SynthStream, p->n);
	for (guint i = 0; i < p->n; i++) {
		SynthStream *s = &p->ss[i];
		VtCaptureStream *cs = vt_capture_stream(c, i);

		s->pg = g_malloc0(sysconf(_SC_PAGESIZE));
		s->data = g_malloc0(cfg->data_bytes);
		s->aux = g_malloc0(cfg->aux_bytes);
		s->pg->data_size = cfg->data_bytes;
		s->pg->aux_size = cfg->aux_bytes;
		vt_ring_init(&s->ring, s->pg, s->data, cfg->data_bytes, s->aux, cfg->aux_bytes, cfg->snapshot);
		cs->ring = &s->ring;
		cs->id = SYNTH_ID_BASE + i;
		g_array_append_val(c->ids, cs->id);
	}
	return TRUE;
}

static gboolean synth_enable(VtCapture *c, gboolean on, GError **error)
{
	(void)c;
	(void)on;
	(void)error;
	return TRUE;
}

static void synth_wait(VtCapture *c, int timeout_ms)
{
	SynthPriv *p = c->priv;
	uint64_t before = p->produced, budget = c->cfg.aux_bytes / 2 * MAX(p->n, 1);

	if (c->cfg.synth_rate) {
		uint64_t allowed = (uint64_t)((g_get_monotonic_time() - p->t_open) / 1e6 * c->cfg.synth_rate);

		budget = MIN(budget, allowed > p->produced ? allowed - p->produced : 0);
	}

	while (!p->done && budget && p->produced - before < budget) {
		if (!p->have_pending) {
			int r = vt_perf_iter_next(&p->it, &p->pending, NULL);

			if (r <= 0) {
				p->done = TRUE;
				break;
			}
			p->have_pending = TRUE;
		}
		if (!route(c, p, &p->pending))
			break;       /* a ring is full: the consumer must drain first */
		p->have_pending = FALSE;
	}
	if (p->produced == before && timeout_ms > 0)
		g_usleep((gulong)MIN(timeout_ms, 10) * 1000);
}

static gboolean synth_exhausted(VtCapture *c)
{
	SynthPriv *p = c->priv;

	return p && p->done && !p->have_pending;
}

static void synth_close(VtCapture *c)
{
	SynthPriv *p = c->priv;

	if (!p)
		return;
	for (guint i = 0; p->ss && i < p->n; i++) {
		vt_ring_clear(&p->ss[i].ring);
		g_free(p->ss[i].pg);
		g_free(p->ss[i].data);
		g_free(p->ss[i].aux);
	}
	g_free(p->ss);
	if (p->f)
		vt_perf_file_close(p->f);
	g_free(p);
	c->priv = NULL;
}

const VtCaptureOps vt_capture_synth_ops = {
	.name = "synth",
	.probe = synth_probe,
	.max_streams = synth_max_streams,
	.open = synth_open,
	.enable = synth_enable,
	.wait = synth_wait,
	.exhausted = synth_exhausted,
	.close = synth_close,
};
