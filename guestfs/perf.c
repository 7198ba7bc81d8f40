/* perf.c - `perf record` in the guest while the host records: started
 * over the SSH source's connection, stopped by the end of its workload's
 * input, its file copied back over the same connection. */
#include "config.h"

#include <string.h>

#include "guestfs/guestfs.h"

struct VtGuestPerf {
	VtGuestSource *src;
	VtGuestCommand *cmd;
	char *dir;              /* the guest directory (mktemp -d) */
};

#define DIR_LINE "VMTRACE-DIR "
#define READY_LINE "VMTRACE-PERF-READY"

gboolean vt_guest_perf_events_ok(const char *events)
{
	if (!events || !*events)
		return FALSE;
	for (const char *p = events; *p; p++)
		if (!g_ascii_isalnum(*p) && !strchr(",:/=._-", *p))
			return FALSE;
	return TRUE;
}

/* mktemp -d's answer: /tmp/vmtrace-perf.XXXXXX, nothing else. */
static gboolean dir_ok(const char *d)
{
	return g_str_has_prefix(d, "/tmp/vmtrace-perf.") && vt_guest_perf_events_ok(d) && !strstr(d, "..");
}

/* The workload prints the ready line once perf has enabled its events,
 * then reads its stdin (the SSH channel) until the end. */
static char *perf_command(const char *events)
{
	return g_strdup_printf("d=$(mktemp -d /tmp/vmtrace-perf.XXXXXX) || exit 1; echo \"" DIR_LINE "$d\"; "
			       "command -v perf >/dev/null || { rm -rf \"$d\"; exit 127; }; "
			       "exec perf record -q -a --sample-identifier --switch-events -e %s -o \"$d/perf.data\" -- "
			       "sh -c 'echo " READY_LINE "; exec cat >/dev/null'",
			       events ? events : "dummy");
}

static void remove_dir(VtGuestPerf *p)
{
	g_autofree char *rm = NULL;
	GBytes *out = NULL;
	int status;

	if (!p->dir)
		return;
	rm = g_strdup_printf("rm -rf %s", p->dir);
	if (vt_guest_source_run(p->src, rm, VT_GUEST_LINE_MAX, &out, &status, NULL))
		g_bytes_unref(out);
	g_clear_pointer(&p->dir, g_free);
}

/* The command ended before perf recorded: no perf (127), or why perf failed. */
static void start_failed(int status, GError **error)
{
	if (status == 127) {
		g_clear_error(error);
		g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_NO_PERF,
			    "no perf in the guest (install it there: Debian apt-get install linux-perf)");
	} else if (status >= 0 && *error && (*error)->code == VT_GUEST_ERROR_FAILED) {
		(*error)->code = VT_GUEST_ERROR_PERF_FAILED;
		g_prefix_error(error, "perf record in the guest failed: ");
	}
}

VtGuestPerf *vt_guest_perf_start(VtGuestSource *src, const char *events, GError **error)
{
	g_autofree char *cmd = NULL;
	VtGuestPerf *p;
	int status = -1;

	if (events && !vt_guest_perf_events_ok(events)) {
		g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_FAILED,
			    "guest events '%s': only letters, digits and ,:/=._- (e.g. cpu-clock,dummy)", events);
		return NULL;
	}
	cmd = perf_command(events);
	p = g_new0(VtGuestPerf, 1);
	p->src = src;
	p->cmd = vt_guest_command_start(src, cmd, error);
	if (!p->cmd)
		goto fail;
	if (!vt_guest_command_wait_line(p->cmd, DIR_LINE, &p->dir, &status, error))
		goto fail;
	if (!dir_ok(p->dir)) {
		g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_BAD_DATA, "mktemp -d in the guest said '%s'", p->dir);
		g_clear_pointer(&p->dir, g_free);
		goto fail;
	}
	{
		g_autofree char *rest = NULL;

		if (vt_guest_command_wait_line(p->cmd, READY_LINE, &rest, &status, error))
			return p;
	}
	start_failed(status, error);
fail:
	vt_guest_perf_free(p);
	return NULL;
}

gboolean vt_guest_perf_stop(VtGuestPerf *p, const char *dir, const char *name, guint64 *bytes, GError **error)
{
	g_autofree char *line = NULL, *path = NULL;
	g_autoptr(GBytes) data = NULL;
	int status;

	if (!vt_guest_command_finish(p->cmd, &status, &line, error))
		return FALSE;
	if (status != 0) {
		g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_PERF_FAILED,
			    "perf record in the guest failed (exit status %d)%s%s", status, line ? ": " : "",
			    line ? line : "");
		return FALSE;
	}
	path = g_strdup_printf("%s/perf.data", p->dir);
	data = vt_guest_source_read_file(p->src, path, VT_GUEST_PERF_MAX, error);
	if (!data || !vt_guest_cache_write(dir, name, data, error))
		return FALSE;
	*bytes = g_bytes_get_size(data);
	remove_dir(p);
	return TRUE;
}

void vt_guest_perf_free(VtGuestPerf *p)
{
	if (!p)
		return;
	vt_guest_command_free(p->cmd);      /* end of input: perf stops */
	remove_dir(p);
	g_free(p->dir);
	g_free(p);
}
