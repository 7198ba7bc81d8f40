/* timeline.c - `vmtrace timeline REC -o OUT`: the recording decoded
 * (src/decode) and drawn (src/timeline) as a Perfetto trace or a
 * self-contained HTML page. */
#include "config.h"

#include <string.h>

#include "src/cmd/cmd.h"
#include "src/decode/decode.h"
#include "src/fs/fs.h"
#include "src/fs/output.h"
#include "src/timeline/timeline.h"

typedef enum { FORMAT_PERFETTO, FORMAT_HTML } Format;

typedef struct {
	char *rec, *out, *format;
	VtCmdImages img;                 /* --guest, --guestkallsyms, --guestvmlinux, --kcore, --kallsyms, --vmlinux */
	gint jobs, max_slices;
	gboolean force, progress;
	Format fmt;
} TimelineOptions;

static const char tl_summary[] =
	"Decodes host and guest kernel code (as vmtrace script does) and draws it: per\n"
	"vCPU a guest lane and a host lane of nested function slices (call to return),\n"
	"VM exits as slices from exit to entry (named after the first host function\n"
	"called; reason, guest IP and exit target in their details) and a counter of\n"
	"VM exits per ms.  OUT is a Perfetto trace (protobuf TrackEvent: open it in\n"
	"ui.perfetto.dev or trace_processor) or a self-contained HTML page (canvas,\n"
	"no network: wheel zooms, drag pans, click shows details).";

static const char tl_description[] =
	"Examples:\n"
	"  vmtrace timeline vm.data --guest SNAP -o vm.perfetto-trace\n"
	"  vmtrace timeline vm.data --guest SNAP -o vm.html\n\n"
	"The format comes from OUT's name (.perfetto-trace, .pftrace, .pb: Perfetto;\n"
	".html, .htm: HTML) or --format.  The Perfetto trace is written as the branches\n"
	"are decoded (memory stays flat); the page holds a fixed-size summary per lane\n"
	"and the --max-slices longest slices, so it stays small and interactive for\n"
	"any recording: shorter slices are drawn aggregated per pixel.  Timeless\n"
	"recordings count instructions (per vCPU thread) instead of ns, as report does.\n\n"
	"Exit status: 0 ok; 1 failure; 2 usage error (also: a kernel image missing);\n"
	"3 bad input (unreadable recording or image, or decode errors in the trace: the\n"
	"output is still written); 24 no vCPU thread (\"CPU n/KVM\") in the recording.\n";

static gboolean parse(int *argc, char ***argv, TimelineOptions *o, GError **error)
{
	GOptionEntry entries[] = {
		{ "output", 'o', 0, G_OPTION_ARG_FILENAME, &o->out, "Write OUT (.perfetto-trace or .html)", "OUT" },
		{ "format", 0, 0, G_OPTION_ARG_STRING, &o->format, "perfetto or html (default: from OUT's name)", "FMT" },
		VT_CMD_IMAGE_ENTRIES(&o->img),
		{ "max-slices", 0, 0, G_OPTION_ARG_INT, &o->max_slices, "HTML: the longest N function slices and the longest N VM exits are kept (default 200000 each); shorter ones only in the summary", "N" },
		{ "force", 'f', 0, G_OPTION_ARG_NONE, &o->force, "Replace OUT if it is a regular file", NULL },
		{ "jobs", 0, 0, G_OPTION_ARG_INT, &o->jobs, "Queues decoding at once (default: all)", "N" },
		{ "progress", 0, 0, G_OPTION_ARG_NONE, &o->progress, "A progress line on stderr even when it is no terminal (by default: on a terminal)", NULL },
		G_OPTION_ENTRY_NULL
	};

	if (!vt_cli_parse("REC - draw a recording: Perfetto trace or HTML page", tl_summary, tl_description, entries,
			  argc, argv, error))
		return FALSE;
	return vt_cmd_take_rec(*argc, *argv, &o->rec, error);
}

static gboolean format_of(TimelineOptions *o, GError **error)
{
	static const char *const perfetto[] = { ".perfetto-trace", ".pftrace", ".pb" };
	static const char *const html[] = { ".html", ".htm" };
	const char *f = o->format;

	if (f && (!strcmp(f, "perfetto") || !strcmp(f, "html"))) {
		o->fmt = !strcmp(f, "html") ? FORMAT_HTML : FORMAT_PERFETTO;
		return TRUE;
	}
	if (f) {
		g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE, "--format '%s': perfetto or html", f);
		return FALSE;
	}
	for (gsize i = 0; i < G_N_ELEMENTS(perfetto); i++)
		if (g_str_has_suffix(o->out, perfetto[i])) {
			o->fmt = FORMAT_PERFETTO;
			return TRUE;
		}
	for (gsize i = 0; i < G_N_ELEMENTS(html); i++)
		if (g_str_has_suffix(o->out, html[i])) {
			o->fmt = FORMAT_HTML;
			return TRUE;
		}
	g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
		    "-o %s: name it .perfetto-trace or .html, or give --format", o->out);
	return FALSE;
}

static gboolean validate(TimelineOptions *o, GError **error)
{
	const char *bad = vt_cmd_images_check(&o->img);

	if (!o->out) {
		g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_FAILED, "-o OUT is required");
		return FALSE;
	}
	if (bad) {
		g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_FAILED, "%s", bad);
		return FALSE;
	}
	if (o->jobs < 0 || o->max_slices < 1) {
		g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE,
			    o->jobs < 0 ? "--jobs: must be 0 or more" : "--max-slices: must be 1 or more");
		return FALSE;
	}
	return format_of(o, error);
}

static VtTimelineSink *open_sink(const TimelineOptions *o, gboolean timed, GError **error)
{
	g_autofree char *base = g_path_get_basename(o->rec);
	g_autofree char *title = g_strdup_printf("vmtrace timeline: %s", base);

	if (o->fmt == FORMAT_HTML)
		return vt_timeline_html_new(o->out, o->force, (guint)o->max_slices, title, timed, error);
	return vt_timeline_perfetto_new(o->out, o->force, timed, error);
}

/* Decode, draw, commit; the exit status. */
static int run(const TimelineOptions *o, VtDecodeImage *host, VtDecodeImage *guest)
{
	g_autoptr(GError) err = NULL;
	g_autoptr(VtDecodeResult) result = vt_decode_recording(&(VtDecodeOptions){ o->rec, host, guest,
								     (guint)o->jobs, NULL, FALSE }, &err);
	g_autoptr(VtTimelineSink) sink = NULL;
	g_autoptr(VtTimelineBuilder) b = NULL;
	const VtDecodeEvent *e;
	VtProgress p;

	if (!result) {
		vt_err("timeline", "%s", err->message);
		return err->domain == VT_DECODE_ERROR && err->code == VT_DECODE_ERROR_FAILED ? VT_EXIT_FAILURE
											  : VT_EXIT_BAD_INPUT;
	}
	vt_cmd_images_warn("timeline", o->rec, host, guest);
	if (!(sink = open_sink(o, vt_decode_result_timed(result), &err))) {
		vt_err("timeline", "%s", err->message);
		return VT_EXIT_FAILURE;
	}
	b = vt_timeline_builder_new(sink, host, guest, vt_decode_result_timed(result));
	vt_progress_init(&p, "timeline", o->progress, FALSE);   /* (its output: OUT) */
	for (guint i = 0; (e = vt_decode_result_next(result)); i++) {
		vt_timeline_builder_add(b, e);
		if (!(i & 4095))
			vt_cmd_progress(&p, result, FALSE);
	}
	vt_timeline_builder_finish(b);
	vt_cmd_progress(&p, result, TRUE);
	if (!vt_timeline_builder_n_vcpus(b)) {
		vt_err("timeline", "%s: no vCPU thread (\"CPU n/KVM\") in the recording: nothing to draw", o->rec);
		return VT_EXIT_NO_VCPU;
	}
	if (!sink->ops->finish(sink, &err)) {
		vt_err("timeline", "%s", err->message);
		return VT_EXIT_FAILURE;
	}
	fprintf(stderr, "vmtrace timeline: wrote %s: %u vCPUs, %" G_GUINT64_FORMAT " slices, %" G_GUINT64_FORMAT
		" VM exits\n", o->out, vt_timeline_builder_n_vcpus(b), vt_timeline_builder_n_slices(b),
		vt_timeline_builder_n_exits(b));
	if (vt_decode_result_n_errors(result)) {
		vt_err("timeline", "%s: %u decode errors (decoding resumed at the next PSB each time)", o->rec,
		       vt_decode_result_n_errors(result));
		return VT_EXIT_BAD_INPUT;
	}
	return VT_EXIT_OK;
}

static void options_clear(TimelineOptions *o)
{
	g_free(o->rec);
	g_free(o->out);
	g_free(o->format);
	vt_cmd_images_clear(&o->img);
}

int cmd_timeline(int argc, char **argv)
{
	TimelineOptions o = { .max_slices = 200000 };
	VtDecodeImage *host = NULL, *guest = NULL;
	g_autoptr(GError) err = NULL;
	gboolean usage = FALSE;
	int rc = VT_EXIT_USAGE;

	if (!parse(&argc, &argv, &o, &err) || !validate(&o, &err)) {
		vt_err("timeline", "%s (see vmtrace timeline --help)", err->message);
		goto out;
	}
	if (!vt_fs_output_check(o.out, o.force ? VT_FS_OUTPUT_REPLACE : VT_FS_OUTPUT_NEW, &err)) {
		vt_err("timeline", "%s%s", err->message, g_error_matches(err, G_FILE_ERROR, G_FILE_ERROR_EXIST)
		       ? " (--force replaces it)" : "");
		rc = VT_EXIT_FAILURE;
		goto out;
	}
	if (!vt_cmd_images_open(&o.img, o.rec, &host, &guest, &usage, &err)) {
		vt_err("timeline", "%s", err->message);
		rc = usage ? VT_EXIT_USAGE : VT_EXIT_BAD_INPUT;
		goto out;
	}
	rc = run(&o, host, guest);
out:
	vt_decode_image_free(host);
	vt_decode_image_free(guest);
	options_clear(&o);
	return rc;
}
