/* capture-pt.c - the hardware trace source: perf_event_open on intel_pt.
 *
 * Everything here needs Intel PT hardware and cannot run on the machines
 * vmtrace is tested on (see README, "What was verified how"): the config
 * is built from sysfs format/ and caps/ (tested on prepared trees through
 * vt_capture_pt_config), the events are opened and mapped with perfev.c,
 * whose data-ring path is exercised by the real sideband events. */
#include "config.h"

#include <string.h>
#include <errno.h>
#include <poll.h>
#include <unistd.h>

#include "src/host/host.h"
#include "src/record/capture.h"
#include "src/record/capture-pt.h"
#include "src/record/perfev.h"

typedef struct {
	GPtrArray *events;  /* VtPerfevEvent *: every intel_pt event */
} PtPriv;

static gboolean set_field(const VtHostIntelPt *pt, uint64_t *config, const char *name, uint64_t value,
			  GError **error)
{
	uint64_t mask;
	guint shift;

	if (!vt_host_intel_pt_field(pt, name, &mask, &shift)) {
		if (!value)
			return TRUE;
		g_set_error(error, VT_CAPTURE_ERROR, VT_CAPTURE_ERROR_NO_PT,
			    "the intel_pt PMU has no '%s' format field (%s/sys/bus/event_source/devices/"
			    "intel_pt/format/%s): this CPU or kernel cannot do it", name, vt_host_root(), name);
		return FALSE;
	}
	if ((value << shift) & ~mask || value > (mask >> shift)) {
		g_set_error(error, VT_CAPTURE_ERROR, VT_CAPTURE_ERROR_CONFIG,
			    "intel_pt %s=%" G_GUINT64_FORMAT " does not fit its format field", name, value);
		return FALSE;
	}
	*config = (*config & ~mask) | (value << shift);
	return TRUE;
}

static uint64_t field_mask(const VtHostIntelPt *pt, const char *name)
{
	uint64_t mask = 0;
	guint shift;

	return vt_host_intel_pt_field(pt, name, &mask, &shift) ? mask : 0;
}

static gboolean cap_bool(const VtHostIntelPt *pt, const char *name)
{
	const char *v = pt->caps ? g_hash_table_lookup(pt->caps, name) : NULL;

	return v && strcmp(v, "0") != 0;
}

gboolean vt_capture_pt_config(const VtCaptureConfig *cfg, struct perf_event_attr *attr, uint64_t *info,
			      char **event_name, GError **error)
{
	VtHostIntelPt pt = { 0 };
	uint64_t config = 0, mtc_period = cfg->mtc_period >= 0 ? (uint64_t)cfg->mtc_period : 3;
	gboolean mtc, ok;
	const char *v;
	uint32_t n = 0, d = 0;

	if (!vt_host_intel_pt(&pt)) {
		g_set_error(error, VT_CAPTURE_ERROR, VT_CAPTURE_ERROR_NO_PT,
			    "this machine has no Intel PT: no intel_pt PMU in %s/sys/bus/event_source/devices "
			    "(run `vmtrace check` for what is missing)", vt_host_root());
		return FALSE;
	}
	mtc = !cfg->timeless && cap_bool(&pt, "mtc");
	if (cfg->cyc && !cap_bool(&pt, "psb_cyc")) {
		g_set_error(error, VT_CAPTURE_ERROR, VT_CAPTURE_ERROR_NO_PT,
			    "--cyc: this CPU's Intel PT has no cycle-accurate mode (caps/psb_cyc is 0)");
		vt_host_intel_pt_clear(&pt);
		return FALSE;
	}
	if (cfg->mtc_period >= 0 && !cfg->timeless) {
		v = pt.caps ? g_hash_table_lookup(pt.caps, "mtc_periods") : NULL;
		if (!mtc || !v || !((g_ascii_strtoull(v, NULL, 16) >> mtc_period) & 1)) {
			g_set_error(error, VT_CAPTURE_ERROR, VT_CAPTURE_ERROR_NO_PT,
				    "--mtc-period %d: not supported by this CPU (caps/mtc=%s, caps/mtc_periods=%s)",
				    cfg->mtc_period, mtc ? "1" : "0", v ? v : "missing");
			vt_host_intel_pt_clear(&pt);
			return FALSE;
		}
	}
	ok = set_field(&pt, &config, "pt", 1, error) &&
	     set_field(&pt, &config, "branch", 1, error) &&
	     set_field(&pt, &config, "tsc", !cfg->timeless, error) &&
	     set_field(&pt, &config, "mtc", mtc, error) &&
	     (!mtc || set_field(&pt, &config, "mtc_period", mtc_period, error)) &&
	     set_field(&pt, &config, "cyc", cfg->cyc, error);
	if (!ok) {
		vt_host_intel_pt_clear(&pt);
		return FALSE;
	}
	memset(attr, 0, sizeof(*attr));
	attr->type = pt.type;
	attr->size = sizeof(*attr);
	attr->config = config;
	attr->sample_period = 1;
	attr->sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU |
			    PERF_SAMPLE_IDENTIFIER;
	attr->exclude_user = 1;   /* intel_pt//k */
	attr->exclude_hv = 1;
	attr->sample_id_all = 1;
	attr->disabled = 1;
	attr->aux_watermark = (uint32_t)MIN(cfg->aux_bytes / 4, (uint64_t)G_MAXUINT32);   /* wake us early */

	memset(info, 0, VT_PT_INFO_NR_FIXED * sizeof(*info));
	info[VT_PT_INFO_PMU_TYPE] = pt.type;
	info[VT_PT_INFO_TSC_BIT] = field_mask(&pt, "tsc");
	info[VT_PT_INFO_NORETCOMP_BIT] = field_mask(&pt, "noretcomp");
	info[VT_PT_INFO_HAVE_SCHED_SWITCH] = cfg->per_cpu ? 3 : 0;
	info[VT_PT_INFO_SNAPSHOT_MODE] = cfg->snapshot;
	info[VT_PT_INFO_PER_CPU_MMAPS] = cfg->per_cpu;
	info[VT_PT_INFO_MTC_BIT] = field_mask(&pt, "mtc");
	info[VT_PT_INFO_MTC_FREQ_BITS] = field_mask(&pt, "mtc_period");
	if (vt_capture_tsc_ctc(&n, &d)) {
		info[VT_PT_INFO_TSC_CTC_N] = n;
		info[VT_PT_INFO_TSC_CTC_D] = d;
	}
	info[VT_PT_INFO_CYC_BIT] = field_mask(&pt, "cyc");
	v = pt.caps ? g_hash_table_lookup(pt.caps, "max_nonturbo_ratio") : NULL;
	info[VT_PT_INFO_MAX_NONTURBO_RATIO] = v ? g_ascii_strtoull(v, NULL, 0) : 0;
	*event_name = vt_capture_event_name(!cfg->timeless, mtc, (guint)mtc_period, cfg->cyc);
	vt_host_intel_pt_clear(&pt);
	return TRUE;
}

static gboolean pt_probe(const VtCaptureConfig *cfg, GError **error)
{
	struct perf_event_attr attr;
	uint64_t info[VT_PT_INFO_NR_FIXED];
	g_autofree char *name = NULL;

	return vt_capture_pt_config(cfg, &attr, info, &name, error);
}

static gboolean pt_open(VtCapture *c, GError **error)
{
	PtPriv *p = g_new0(PtPriv, 1);
	const VtCaptureConfig *cfg = &c->cfg;

	c->priv = p;
	p->events = vt_perfev_array_new();
	if (!vt_capture_pt_config(cfg, &c->attr, c->info, &c->event_name, error))
		return FALSE;
	c->pmu_type = c->attr.type;
	c->cpuid = vt_capture_host_cpuid();
	for (guint i = 0; i < c->streams->len; i++) {
		VtCaptureStream *s = vt_capture_stream(c, i);
		/* per-thread: the vCPU thread; per-CPU: every vCPU thread on that CPU */
		VtPerfevEvent *o = vt_perfev_open_stream(p->events, &c->attr, cfg->per_cpu ? cfg->tids : &s->tid,
						       cfg->per_cpu ? cfg->ntids : 1, s->cpu, cfg->data_bytes,
						       cfg->aux_bytes, cfg->snapshot, c->event_name, error);

		if (!o)
			return FALSE;
		s->ring = &o->ring;     /* the event is heap-allocated: the pointer stays valid */
		s->id = o->id;
	}
	for (guint i = 0; i < p->events->len; i++) {
		uint64_t id = ((VtPerfevEvent *)g_ptr_array_index(p->events, i))->id;

		g_array_append_val(c->ids, id);
	}
	return TRUE;
}

static gboolean pt_enable(VtCapture *c, gboolean on, GError **error)
{
	return vt_perfev_array_enable(((PtPriv *)c->priv)->events, on, error);
}

/* Sleep until a ring's watermark wakes us (the kernel signals POLLIN when
 * a quarter of the AUX area is full, or the data ring has data), or timeout_ms. */
static void pt_wait(VtCapture *c, int timeout_ms)
{
	PtPriv *p = c->priv;
	g_autofree struct pollfd *fds = g_new0(struct pollfd, p->events->len);
	nfds_t n = 0;

	for (guint i = 0; i < p->events->len; i++) {
		const VtPerfevEvent *ev = g_ptr_array_index(p->events, i);

		if (ev->base) {
			fds[n].fd = ev->fd;
			fds[n++].events = POLLIN;
		}
	}
	int rc = n ? poll(fds, n, timeout_ms) : -1;
	gboolean data = FALSE;

	if (rc < 0 && errno == EINTR)
		return;                 /* a signal: let the caller look at it */
	for (nfds_t i = 0; rc > 0 && i < n; i++)
		data = data || (fds[i].revents & POLLIN);
	if (!data && rc != 0)      /* only POLLHUP of exited threads */
		g_usleep((gulong)timeout_ms * 1000);
}

static gboolean pt_exhausted(VtCapture *c)
{
	(void)c;
	return FALSE;
}

static void pt_close(VtCapture *c)
{
	PtPriv *p = c->priv;

	if (!p)
		return;
	g_ptr_array_free(p->events, TRUE);
	g_free(p);
	c->priv = NULL;
}

const VtCaptureOps vt_capture_pt_ops = {
	.name = "intel_pt",
	.probe = pt_probe,
	.open = pt_open,
	.enable = pt_enable,
	.wait = pt_wait,
	.exhausted = pt_exhausted,
	.close = pt_close,
};
