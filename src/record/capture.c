/* capture.c - trace sources: common part. */
#include "config.h"

#include <string.h>
#include <cpuid.h>

#include "src/record/capture.h"

G_DEFINE_QUARK(vt-capture-error-quark, vt_capture_error)

static const VtCaptureOps *source_ops(const char *source, GError **error)
{
	if (!g_strcmp0(source, "intel_pt"))
		return &vt_capture_pt_ops;
	if (!g_strcmp0(source, "synth"))
		return &vt_capture_synth_ops;
	g_set_error(error, VT_CAPTURE_ERROR, VT_CAPTURE_ERROR_CONFIG, "unknown trace source '%s' (intel_pt or synth)",
		    source);
	return NULL;
}

gboolean vt_capture_probe(const char *source, const VtCaptureConfig *cfg, GError **error)
{
	const VtCaptureOps *ops = source_ops(source, error);

	return ops && ops->probe(cfg, error);
}

VtCapture *vt_capture_new(const char *source, const VtCaptureConfig *cfg, GError **error)
{
	VtCapture *c;
	const VtCaptureOps *ops = source_ops(source, error);

	if (!ops || !ops->probe(cfg, error))
		return NULL;
	c = g_new0(VtCapture, 1);
	c->ops = ops;
	c->cfg = *cfg;
	c->streams = g_array_new(FALSE, TRUE, sizeof(VtCaptureStream));
	c->ids = g_array_new(FALSE, FALSE, sizeof(uint64_t));
	return c;
}

gboolean vt_capture_add_stream(VtCapture *c, int32_t tid, int32_t cpu)
{
	VtCaptureStream s = { .idx = c->streams->len, .tid = tid, .cpu = cpu };
	guint max = c->ops->max_streams ? c->ops->max_streams(&c->cfg) : 0;

	if (max && c->streams->len >= max)
		return FALSE;
	g_array_append_val(c->streams, s);
	return TRUE;
}

char *vt_capture_event_name(gboolean tsc, gboolean mtc, guint mtc_period, gboolean cyc)
{
	GString *s = g_string_new("intel_pt/");
	gsize n = s->len;

	if (tsc)
		g_string_append(s, "tsc=1");
	if (mtc)
		g_string_append_printf(s, "%smtc=1,mtc_period=%u", s->len > n ? "," : "", mtc_period);
	if (cyc)
		g_string_append_printf(s, "%scyc=1", s->len > n ? "," : "");
	g_string_append(s, "/k");
	return g_string_free(s, FALSE);
}

VtCaptureStream *vt_capture_stream(VtCapture *c, guint i)
{
	return &g_array_index(c->streams, VtCaptureStream, i);
}

void vt_capture_free(VtCapture *c)
{
	if (!c)
		return;
	if (c->ops && c->ops->close)
		c->ops->close(c);
	g_array_free(c->streams, TRUE);
	g_array_free(c->ids, TRUE);
	g_free(c->event_name);
	g_free(c->cpuid);
	g_free(c);
}

char *vt_capture_host_cpuid(void)
{
	unsigned int a, b, c, d, family, model;
	char vendor[13];

	__cpuid(0, a, b, c, d);
	memcpy(vendor, &b, 4);
	memcpy(vendor + 4, &d, 4);
	memcpy(vendor + 8, &c, 4);
	vendor[12] = '\0';
	__cpuid(1, a, b, c, d);
	family = (a >> 8) & 0xf;
	model = (a >> 4) & 0xf;
	if (family == 0xf)
		family += (a >> 20) & 0xff;
	if (family == 0x6 || family >= 0xf)
		model += ((a >> 16) & 0xf) << 4;
	return g_strdup_printf("%s,%u,%u,%u", vendor, family, model, a & 0xf);
}

gboolean vt_capture_tsc_ctc(uint32_t *n, uint32_t *d)
{
	unsigned int a, b, cx, dx;

	if (__get_cpuid_max(0, NULL) < 0x15)
		return FALSE;
	__cpuid_count(0x15, 0, a, b, cx, dx);
	(void)cx;
	(void)dx;
	if (!a || !b)
		return FALSE;
	*d = a;
	*n = b;
	return TRUE;
}
