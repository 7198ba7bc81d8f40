/* progress.c - a long command's progress line on stderr (progress.h). */
#include "config.h"

#include <stdio.h>
#include <unistd.h>

#include "src/cli/progress.h"

void vt_progress_init(VtProgress *p, const char *cmd, gboolean force, gboolean stdout_out)
{
	const char *ms = g_getenv("VMTRACE_PROGRESS_MS");
	guint64 v = ms ? g_ascii_strtoull(ms, NULL, 10) : 0;

	p->cmd = cmd;
	p->on = force || (isatty(2) && (!stdout_out || !isatty(1)));
	p->every = v && v < 3600000 ? (gint64)v * 1000 : 500000;   /* (not a number: the default) */
	p->start = p->last = g_get_monotonic_time();
}

gboolean vt_progress_due(VtProgress *p)
{
	return p->on && g_get_monotonic_time() - p->last >= p->every;
}

void vt_progress_show(VtProgress *p, guint64 done, guint64 total, gboolean final)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double size = (double)total;
	guint u = 0;
	gint64 now;

	if (!p->on)
		return;
	now = p->last = g_get_monotonic_time();
	if (final || done > total)
		done = total;
	for (; size >= 1024 && u + 1 < G_N_ELEMENTS(units); u++)
		size /= 1024;            /* (ASCII: glib's sizes have a no-break space) */
	fprintf(stderr, "\r[ vmtrace %s: %3u%% of %.1f %s of trace, %.1f s ]%s", p->cmd,
		total ? (guint)(done * 100 / total) : 100, size, units[u], (double)(now - p->start) / 1e6,
		final ? "\n" : "");
	fflush(stderr);
}
