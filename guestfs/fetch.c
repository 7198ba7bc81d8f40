/* fetch.c - one guest sideband snapshot: osrelease, build-id, kallsyms,
 * modules and the trimmed kcore, checked for consistency (kallsyms and
 * modules read again after the copy must not have changed) and stored in
 * the perf-compatible cache. */
#include "config.h"

#include <string.h>

#include "guestfs/guestfs.h"

void vt_guest_fetch_result_clear(VtGuestFetchResult *r)
{
	g_free(r->build_id);
	g_free(r->osrelease);
	g_free(r->dir);
	g_free(r->kallsyms);
	if (r->ranges)
		g_array_free(r->ranges, TRUE);
	memset(r, 0, sizeof(*r));
}

/* /proc/modules is missing on kernels without module support: empty. */
static GBytes *read_modules(VtGuestSource *src, GError **error)
{
	GError *err = NULL;
	GBytes *b = vt_guest_source_read_file(src, "/proc/modules", VT_GUEST_MODULES_MAX, &err);

	if (!b && g_error_matches(err, VT_GUEST_ERROR, VT_GUEST_ERROR_NOT_FOUND)) {
		g_error_free(err);
		return g_bytes_new(NULL, 0);
	}
	if (!b)
		g_propagate_error(error, err);
	return b;
}

gboolean vt_guest_read_symbols(VtGuestSource *src, GBytes **kallsyms, GBytes **modules, GError **error)
{
	*kallsyms = vt_guest_source_read_file(src, "/proc/kallsyms", VT_GUEST_KALLSYMS_MAX, error);
	if (!*kallsyms)
		return FALSE;
	*modules = read_modules(src, error);
	if (!*modules) {
		g_clear_pointer(kallsyms, g_bytes_unref);
		return FALSE;
	}
	return TRUE;
}

gboolean vt_guest_symbols_unchanged(VtGuestSource *src, GBytes *kallsyms, GBytes *modules, GError **error)
{
	g_autoptr(GBytes) ks = NULL, mods = NULL;

	if (!vt_guest_read_symbols(src, &ks, &mods, error))
		return FALSE;
	if (!g_bytes_equal(kallsyms, ks) || !g_bytes_equal(modules, mods)) {
		g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_CHANGED,
			    "%s changed during the copy (modules or BPF programs loaded or unloaded): try again",
			    g_bytes_equal(modules, mods) ? "kallsyms" : "modules");
		return FALSE;
	}
	return TRUE;
}

static gboolean fetch_once(VtGuestSource *src, const VtGuestFetchOptions *opts, VtGuestFetchResult *res,
			   GError **error)
{
	g_autoptr(GBytes) osrel = NULL, notes = NULL, ks = NULL, mods = NULL;
	VtGuestKallsyms sym = { 0 };
	g_autoptr(VtTempfile) tmp = NULL;
	GError *err = NULL;
	gboolean ok = FALSE;

	memset(res, 0, sizeof(*res));
	if (!(osrel = vt_guest_source_read_file(src, "/proc/sys/kernel/osrelease", VT_GUEST_LINE_MAX, error)) ||
	    !(notes = vt_guest_source_read_file(src, "/sys/kernel/notes", VT_GUEST_NOTES_MAX, error)))
		return FALSE;
	res->osrelease = vt_guest_bytes_text(osrel);
	if (!res->osrelease) {
		g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_BAD_DATA,
			    "/proc/sys/kernel/osrelease is not a kernel release (%zu bytes, not one printable line)",
			    g_bytes_get_size(osrel));
		return FALSE;
	}
	res->build_id = vt_guest_build_id_parse(g_bytes_get_data(notes, NULL), g_bytes_get_size(notes), error);
	if (!res->build_id || !vt_guest_read_symbols(src, &ks, &mods, error) || !vt_guest_kallsyms_parse(ks, mods, &sym, error))
		goto out;
	res->nsyms = sym.nsyms;
	res->ranges = vt_guest_kallsyms_ranges(&sym);
	if (sym.all_zero) {
		g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_PERMISSION,
			    "every kallsyms address is 0: log in as root, and set kernel.kptr_restrict to 0 or 1 in the guest");
		goto out;
	}
	if (opts->kcore && (!sym.stext || !sym.etext)) {
		g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_BAD_DATA, "kallsyms has no _stext/_etext");
		goto out;
	}
	res->dir = vt_guest_cache_find(opts->cache, res->build_id, ks, mods, opts->kcore, &err);
	if (err) {
		g_propagate_error(error, err);
		goto out;
	}
	if (res->dir) {
		g_autofree char *kc = g_build_filename(res->dir, "kcore", NULL);

		res->reused = TRUE;
		res->has_kcore = g_file_test(kc, G_FILE_TEST_IS_REGULAR);   /* also with --no-kcore */
		ok = TRUE;
		goto out;
	}
	if (!(tmp = vt_guest_cache_tmpdir(opts->cache, res->build_id, error)))
		goto out;
	if (opts->kcore) {
		g_autofree char *kpath = g_build_filename(vt_tempfile_path(tmp), "kcore", NULL);

		if (!vt_guest_kcore_copy(src, "/proc/kcore", res->ranges, kpath, opts->stop, &res->kcore_bytes, error))
			goto out;
		res->has_kcore = TRUE;
	}
	if (!vt_guest_symbols_unchanged(src, ks, mods, error) ||
	    !vt_guest_cache_write(vt_tempfile_path(tmp), "kallsyms", ks, error) ||
	    !vt_guest_cache_write(vt_tempfile_path(tmp), "modules", mods, error))
		goto out;
	res->dir = vt_guest_cache_commit(tmp, error);
	ok = res->dir != NULL;
out:     /* tmp, unless renamed, is removed */
	if (ok)
		res->kallsyms = g_build_filename(res->dir, "kallsyms", NULL);
	vt_guest_kallsyms_clear(&sym);
	return ok;
}

gboolean vt_guest_fetch(VtGuestSource *src, const VtGuestFetchOptions *opts, VtGuestFetchResult *res,
			GError **error)
{
	/* Processes that start or end load and unload BPF programs (seccomp
	 * filters, systemd): kallsyms changes often on a busy guest.  Try
	 * again a few times before giving up. */
	for (guint attempt = 0;; attempt++) {
		GError *e = NULL;

		if (fetch_once(src, opts, res, &e))
			return TRUE;
		if (attempt >= opts->retries || !g_error_matches(e, VT_GUEST_ERROR, VT_GUEST_ERROR_CHANGED)) {
			if (attempt)
				g_prefix_error(&e, "%u attempts: ", attempt + 1);
			g_propagate_error(error, e);
			return FALSE;
		}
		g_error_free(e);
		vt_guest_fetch_result_clear(res);
	}
}
