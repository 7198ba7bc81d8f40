/* progress.c - a long command's progress line on stderr (progress.h). */
#include "config.h"

#include <stdio.h>
#include <unistd.h>

#include "src/cli/cli.h"
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
	vt_cli_line_open(!final);
}

struct VtProgressTicker {
	VtProgress *p;
	const guint64 *done;
	guint64 total;
	GMutex lock;
	GCond cond;
	gboolean stop;
	GThread *thread;
};

static gpointer ticker_run(gpointer data)
{
	VtProgressTicker *t = data;

	g_mutex_lock(&t->lock);
	while (!t->stop) {
		if (!g_cond_wait_until(&t->cond, &t->lock, g_get_monotonic_time() + t->p->every) && !t->stop)
			vt_progress_show(t->p, __atomic_load_n(t->done, __ATOMIC_RELAXED), t->total, FALSE);
	}
	g_mutex_unlock(&t->lock);
	return NULL;
}

VtProgressTicker *vt_progress_ticker_start(VtProgress *p, const guint64 *done, guint64 total)
{
	VtProgressTicker *t;

	if (!p->on)
		return NULL;
	t = g_new0(VtProgressTicker, 1);
	t->p = p;
	t->done = done;
	t->total = total;
	g_mutex_init(&t->lock);
	g_cond_init(&t->cond);
	t->thread = g_thread_new("vmtrace-progress", ticker_run, t);
	return t;
}

void vt_progress_ticker_stop(VtProgressTicker *t, gboolean final)
{
	if (!t)
		return;
	g_mutex_lock(&t->lock);
	t->stop = TRUE;
	g_cond_signal(&t->cond);
	g_mutex_unlock(&t->lock);
	g_thread_join(t->thread);
	vt_progress_show(t->p, __atomic_load_n(t->done, __ATOMIC_RELAXED), t->total, final);
	g_mutex_clear(&t->lock);
	g_cond_clear(&t->cond);
	g_free(t);
}
