/* progress.h - a long command's progress line on stderr ("[ vmtrace
 * script: 37% of 1.2 GiB of trace, 4.1 s ]"): every half second while it
 * runs ($VMTRACE_PROGRESS_MS) and once at its end - on a terminal while
 * the output goes elsewhere (a terminal showing both would mix them), or
 * always when asked (--progress).
 * May call: glib, stdio, cli.h (a message after an open line starts a
 * new one).  Prints on stderr only. */
#ifndef VT_CLI_PROGRESS_H
#define VT_CLI_PROGRESS_H

#include <glib.h>

typedef struct {
	const char *cmd;         /* "script" */
	gboolean on;
	gint64 start, last, every;   /* monotonic us */
} VtProgress;

/* Starts the clock; on: force, or stderr a terminal and (stdout_out: the
 * output goes to stdout) stdout not. */
void vt_progress_init(VtProgress *p, const char *cmd, gboolean force, gboolean stdout_out);
/* Is an update due (on, and the interval passed)?  Cheap: a clock read. */
gboolean vt_progress_due(VtProgress *p);
/* The line: done of total bytes of trace (final: 100%, and a newline). */
void vt_progress_show(VtProgress *p, guint64 done, guint64 total, gboolean final);

/* A thread that shows *done of total every interval (for commands whose
 * work runs in a library call: correlate), until stopped; stop shows the
 * last line (final: 100%).  NULL (nothing started) when p is off. */
typedef struct VtProgressTicker VtProgressTicker;
VtProgressTicker *vt_progress_ticker_start(VtProgress *p, const guint64 *done, guint64 total);
void vt_progress_ticker_stop(VtProgressTicker *t, gboolean final);

#endif
