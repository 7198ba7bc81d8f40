/* images.c - the kernel images a decoding command needs (script, report):
 * the options that name them, their checks, and loading them. */
#include "config.h"

#include <string.h>
#include <glib/gstdio.h>

#include "src/cmd/cmd.h"
#include "src/fs/fs.h"

const char *vt_cmd_images_check(const VtCmdImages *im)
{
	if (im->guest_dir && im->guestkallsyms)
		return "--guest and --guestkallsyms exclude each other";
	if (im->guestvmlinux && (im->guest_dir || im->guestkallsyms))
		return "--guestvmlinux excludes --guest and --guestkallsyms";
	if (!im->kcore != !im->kallsyms)
		return "--kcore and --kallsyms go together";
	if (im->vmlinux && im->kcore)
		return "--vmlinux excludes --kcore and --kallsyms";
	return NULL;
}

/* The guest snapshot (DIR, or FILE's directory) and its files, as far as
 * they exist, belong to the user or root and are writable by no one else
 * (vt_fs_check_trusted; links only where the user named them): a cache
 * others can write to could hand us any kcore. */
static gboolean guest_trusted(const char *gdir, const char *kallsyms_file, GError **error)
{
	static const char *const names[] = { "kallsyms", "modules", "kcore" };
	GError *e = NULL;

	if (!vt_fs_check_trusted(gdir, TRUE, &e) || (kallsyms_file && !vt_fs_check_trusted(kallsyms_file, TRUE, &e)))
		goto bad;
	for (guint i = 0; i < G_N_ELEMENTS(names); i++) {
		g_autofree char *f = g_build_filename(gdir, names[i], NULL);

		if (kallsyms_file && !strcmp(names[i], "kallsyms"))
			continue;
		if (!vt_fs_check_trusted(f, FALSE, &e) && !g_error_matches(e, G_FILE_ERROR, G_FILE_ERROR_NOENT))
			goto bad;
		g_clear_error(&e);
	}
	return TRUE;
bad:
	g_propagate_prefixed_error(error, e, "refusing the guest snapshot: ");
	return FALSE;
}

/* The image was given at all: REC/kcore_dir, --kcore or --vmlinux;
 * --guest or --guestkallsyms with a kcore beside it, or --guestvmlinux. */
static gboolean images_given(const VtCmdImages *im, const char *rec, const char *kcore_dir, const char *gdir,
			     GError **error)
{
	g_autofree char *gkcore = gdir ? g_build_filename(gdir, "kcore", NULL) : NULL;

	if (!im->kcore && !im->vmlinux && !kcore_dir) {
		g_set_error(error, VT_DECODE_ERROR, VT_DECODE_ERROR_BAD_IMAGE,
			    "%s has no kcore_dir/ with the host kernel's code (`vmtrace record --kcore` writes it); "
			    "give --kcore FILE --kallsyms FILE, or --vmlinux FILE", rec);
		return FALSE;
	}
	if (im->guestvmlinux)
		return TRUE;
	if (!gdir) {
		g_set_error(error, VT_DECODE_ERROR, VT_DECODE_ERROR_BAD_IMAGE,
			    "no guest kernel image: give --guest DIR (`vmtrace guest fetch` prints it), "
			    "--guestkallsyms FILE (with kcore beside it) or --guestvmlinux FILE");
		return FALSE;
	}
	if (!g_file_test(gkcore, G_FILE_TEST_EXISTS)) {
		g_set_error(error, VT_DECODE_ERROR, VT_DECODE_ERROR_BAD_IMAGE,
			    "%s is missing: the guest kernel's code (`vmtrace guest fetch` copies it, unless "
			    "given --no-kcore)", gkcore);
		return FALSE;
	}
	return TRUE;
}

/* The guest image, loaded in a thread of its own while the main thread
 * loads the host's: two kcore maps and kallsyms parses at once. */
typedef struct {
	char *kcore, *kallsyms;     /* kallsyms NULL: kcore is the snapshot's directory */
	char *vmlinux;              /* else this */
	VtDecodeImage *img;
	GError *error;
} GuestLoad;

static gpointer guest_load(gpointer data)
{
	GuestLoad *g = data;

	g->img = g->vmlinux ? vt_decode_image_load_vmlinux(g->vmlinux, "guest", &g->error)
		 : g->kallsyms ? vt_decode_image_load(g->kcore, g->kallsyms, "guest", &g->error)
			       : vt_decode_image_load_dir(g->kcore, "guest", &g->error);
	return NULL;
}

gboolean vt_cmd_images_open(const VtCmdImages *im, const char *rec, VtDecodeImage **host, VtDecodeImage **guest,
			    gboolean *usage, GError **error)
{
	g_autofree char *kcore_dir = vt_decode_recording_kcore_dir(rec);
	g_autofree char *gdir = im->guest_dir ? g_strdup(im->guest_dir)
				: im->guestkallsyms ? g_path_get_dirname(im->guestkallsyms) : NULL;
	GuestLoad g = { 0 };
	GThread *t;

	*usage = TRUE;
	if (!images_given(im, rec, kcore_dir, gdir, error))
		return FALSE;
	*usage = FALSE;
	if (im->guestvmlinux ? !vt_fs_check_trusted(im->guestvmlinux, TRUE, error)
			     : !guest_trusted(gdir, im->guestkallsyms, error)) {
		g_prefix_error(error, "%s", im->guestvmlinux ? "refusing the guest vmlinux: " : "");
		return FALSE;
	}
	g.vmlinux = im->guestvmlinux;
	g.kcore = im->guestkallsyms ? g_build_filename(gdir, "kcore", NULL) : g_strdup(gdir);
	g.kallsyms = im->guestkallsyms;
	t = g_thread_new("guest-image", guest_load, &g);
	*host = im->vmlinux ? vt_decode_image_load_vmlinux(im->vmlinux, "host", error)
		: im->kcore ? vt_decode_image_load(im->kcore, im->kallsyms, "host", error)
			    : vt_decode_image_load_dir(kcore_dir, "host", error);
	g_thread_join(t);
	g_free(g.kcore);
	if (!*host) {               /* the host's error first, as when loaded one after the other */
		vt_decode_image_free(g.img);
		g_clear_error(&g.error);
		return FALSE;
	}
	*guest = g.img;
	if (!g.img)
		g_propagate_error(error, g.error);
	return *guest != NULL;
}

void vt_cmd_images_clear(VtCmdImages *im)
{
	g_clear_pointer(&im->guest_dir, g_free);
	g_clear_pointer(&im->guestkallsyms, g_free);
	g_clear_pointer(&im->guestvmlinux, g_free);
	g_clear_pointer(&im->vmlinux, g_free);
	g_clear_pointer(&im->kcore, g_free);
	g_clear_pointer(&im->kallsyms, g_free);
}

void vt_cmd_images_warn(const char *cmd, const char *rec, const VtDecodeImage *host, const VtDecodeImage *guest)
{
	for (int g = 0; g < 2; g++)
		if (vt_decode_image_unplaced(g ? guest : host))
			vt_warn(cmd, "%s has no %s kernel MMAP record with _text's address (or one naming a symbol the "
				"vmlinux lacks): the %s vmlinux is taken at its link addresses (right only if that "
				"kernel ran there, without KASLR)", rec, g ? "guest" : "host", g ? "guest" : "host");
}

void vt_cmd_progress(VtProgress *p, const VtDecodeResult *r, gboolean final)
{
	guint64 done, total;

	if (!final && !vt_progress_due(p))
		return;
	vt_decode_result_progress(r, &done, &total);
	vt_progress_show(p, done, total, final);
}

guint64 vt_cmd_data_size(const char *rec)
{
	g_autofree char *data = vt_perf_data_path(rec);
	GStatBuf st;

	return g_stat(data, &st) == 0 ? (guint64)st.st_size : 0;
}

/* seconds[.fraction] -> ns */
static gboolean parse_seconds(const char *t, guint64 *ns)
{
	char *end;
	guint64 sec = g_ascii_strtoull(t, &end, 10), frac = 0, scale = 1000000000;

	if (end == t || *t == '-' || *t == '+')
		return FALSE;
	if (*end == '.') {
		for (end++; g_ascii_isdigit(*end) && scale > 1; end++) {
			scale /= 10;
			frac += (guint64)(*end - '0') * scale;
		}
	}
	*ns = sec * 1000000000 + frac;
	return *end == 0 && sec < G_MAXUINT64 / 1000000000;
}

const char *vt_cmd_parse_time_range(const char *arg, guint64 *start, guint64 *end)
{
	const char *comma = strchr(arg, ',');
	g_autofree char *a = comma ? g_strndup(arg, comma - arg) : NULL;

	if (!comma || strchr(comma + 1, ','))
		return "--time: give START,END (seconds.nanoseconds, either may be empty)";
	*start = 0;
	*end = G_MAXUINT64;
	if ((*a && !parse_seconds(a, start)) || (comma[1] && !parse_seconds(comma + 1, end)))
		return "--time: START and END are seconds.nanoseconds";
	if (*start > *end)
		return "--time: START is after END";
	return NULL;
}

gboolean vt_cmd_take_rec(int argc, char **argv, char **rec, GError **error)
{
	if (argc != 2) {
		g_set_error(error, G_OPTION_ERROR, G_OPTION_ERROR_FAILED, argc < 2 ? "REC (a recording) is required"
			    : "unexpected argument '%s'", argv[MIN(argc - 1, 2)]);
		return FALSE;
	}
	*rec = g_strdup(argv[1]);
	return TRUE;
}
