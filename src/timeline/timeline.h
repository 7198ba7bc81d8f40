/* timeline.h - a recording as a picture: per vCPU a guest lane and a host
 * lane of nested slices (functions from call/return, VM exits from exit to
 * entry with their reason and handler) and a counter (VM exits per ms),
 * written as a Perfetto trace (native protobuf TrackEvent) or as a
 * self-contained HTML page.
 *
 * The model is a stream of events handed to a sink: a vCPU appears, a
 * slice begins or ends on a lane, a counter takes a value.  Events of one
 * lane come in time order and nest (every end closes the innermost open
 * slice of its lane).  Lanes: vCPU i has lane 2i (guest) and 2i+1 (host).
 * Sinks keep what they need: the Perfetto writer streams packets as they
 * come (memory flat); the HTML writer keeps a fixed-size level-of-detail
 * summary per lane and the longest slices (its `max_slices`), so a page
 * of a huge recording stays small and interactive.
 *
 * Times are perf times in ns; a timeless recording's are instruction counts
 * per vCPU (the builder says which in vt_timeline_builder_timed).
 *
 * No printing, no exiting: errors are GErrors (G_FILE_ERROR from the
 * output, VT_TIMELINE_ERROR otherwise).
 * May call: src/analyze and src/decode (the builder), src/fs (outputs), src/cli/json.h
 * (into a GString), protobuf-c. */
#ifndef VT_TIMELINE_H
#define VT_TIMELINE_H

#include <glib.h>
#include <stdint.h>

#include "src/decode/decode.h"

G_BEGIN_DECLS

#define VT_TIMELINE_ERROR (vt_timeline_error_quark())
GQuark vt_timeline_error_quark(void);

typedef enum {
	VT_TIMELINE_ERROR_FAILED,
} VtTimelineErrorCode;

typedef enum {
	VT_TIMELINE_GUEST = 0,
	VT_TIMELINE_HOST = 1,
} VtTimelineMode;

typedef enum {
	VT_TIMELINE_FUNCTION = 0,  /* a function, call to return */
	VT_TIMELINE_EXIT = 1,      /* a VM exit, exit to entry (host lane) */
} VtTimelineKind;

#define VT_TIMELINE_LANE(vcpu, mode) ((vcpu) * 2u + (guint)(mode))

/* ---------------------------------------------------------------- sinks */
typedef struct VtTimelineSink VtTimelineSink;

/* A sink's operations.  Write errors are kept by the sink (the first one)
 * and returned by finish, so the event calls cannot fail. */
typedef struct {
	/* vCPU `index` (0, 1, ... in order of appearance): its display name
	 * ("vCPU 0"), QEMU's pid and the thread's tid and comm. */
	void (*vcpu)(VtTimelineSink *s, guint index, const char *name, gint32 pid, gint32 tid, const char *comm);
	/* details: "key=value" lines separated by '\n' (may be NULL) */
	void (*begin)(VtTimelineSink *s, guint lane, guint64 ts, VtTimelineKind kind, const char *name,
		      const char *details);
	/* details are added to the slice's (may be NULL) */
	void (*end)(VtTimelineSink *s, guint lane, guint64 ts, const char *details);
	void (*counter)(VtTimelineSink *s, guint vcpu, guint64 ts, gint64 value);
	/* Complete the output (commit it); FALSE with the first error. */
	gboolean (*finish)(VtTimelineSink *s, GError **error);
	void (*free)(VtTimelineSink *s);
} VtTimelineSinkOps;

struct VtTimelineSink {
	const VtTimelineSinkOps *ops;
};

void vt_timeline_sink_free(VtTimelineSink *s);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(VtTimelineSink, vt_timeline_sink_free)

/* The Perfetto writer: OUT (created as output.h does: a temporary renamed
 * at finish; replace: an existing regular file may be replaced).  One
 * packet sequence; names and annotation keys interned; a process track
 * per QEMU pid, a thread track per vCPU with child tracks "guest", "host"
 * and the counter track "VM exits/ms" (timeless: "VM exits/1000 instructions"). */
VtTimelineSink *vt_timeline_perfetto_new(const char *path, gboolean replace, gboolean timed, GError **error);

/* The HTML writer: a page with the lanes drawn on a canvas (zoom, pan,
 * click for details) from an embedded summary; timed: times are ns, else
 * instruction counts.  Slices beyond max_slices
 * (the longest are kept) are shown only aggregated. */
VtTimelineSink *vt_timeline_html_new(const char *path, gboolean replace, guint max_slices, const char *title,
				     gboolean timed, GError **error);

/* The HTML page's code (page.js, page.css, embedded at build time). */
extern const char vt_timeline_page_js[];
extern const char vt_timeline_page_css[];

/* -------------------------------------------------------------- builder */
/* Turns decoded branches into sink events through src/analyze, so the
 * timeline draws what vmtrace report counts: per vCPU thread (threads whose
 * name is not "CPU n/KVM" are not drawn) analyze's slices on the guest and
 * host lanes, its VM exits from exit to the next entry (named after the
 * first host function called, its reason the guest instruction that
 * exited; host slices still drawn end when an exit begins or ends, those
 * called in it are nested inside), and VM exits per ms.  Guest slices stay
 * open over VM exits (the guest lane is the guest's view); a trace end ends
 * the open slices of its machine (a VM exit goes on: QEMU's handling in user
 * space is part of it), a decode error every open slice of the vCPU.  When
 * a full stack drops its outer frames, the inner slices are drawn again
 * (details: continued=...).  Times: analyze's clock (timeless: instructions). */
typedef struct VtTimelineBuilder VtTimelineBuilder;

VtTimelineBuilder *vt_timeline_builder_new(VtTimelineSink *sink, const VtDecodeImage *host,
					   const VtDecodeImage *guest, gboolean timed);
void vt_timeline_builder_add(VtTimelineBuilder *b, const VtDecodeEvent *e);
/* End every open slice, flush the counters. */
void vt_timeline_builder_finish(VtTimelineBuilder *b);
void vt_timeline_builder_free(VtTimelineBuilder *b);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(VtTimelineBuilder, vt_timeline_builder_free)
guint vt_timeline_builder_n_vcpus(const VtTimelineBuilder *b);
guint64 vt_timeline_builder_n_slices(const VtTimelineBuilder *b);
guint64 vt_timeline_builder_n_exits(const VtTimelineBuilder *b);

G_END_DECLS

#endif
