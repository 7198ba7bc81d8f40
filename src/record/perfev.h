/* perfev.h - perf_event_open(2) with a mapped ring: the one place that
 * talks to the kernel's perf events (software, tracepoint and AUX PMUs). */
#ifndef VT_PERFEV_H
#define VT_PERFEV_H

#include <glib.h>
#include <stdint.h>
#include <sys/types.h>
#include <linux/perf_event.h>

#include "src/record/ring.h"

G_BEGIN_DECLS

#define VT_PERFEV_ERROR (vt_perfev_error_quark())
GQuark vt_perfev_error_quark(void);
typedef enum {
	VT_PERFEV_ERROR_PERMISSION,  /* EACCES/EPERM: paranoid setting, capabilities */
	VT_PERFEV_ERROR_NO_TARGET,   /* ESRCH: the thread is gone */
	VT_PERFEV_ERROR_UNSUPPORTED, /* ENOENT/EOPNOTSUPP/EINVAL: no such PMU or config */
	VT_PERFEV_ERROR_FAILED,      /* anything else (mmap, ioctl) */
} VtPerfevErrorCode;

typedef struct {
	int fd;
	uint64_t id;              /* PERF_EVENT_IOC_ID */
	void *base;               /* control page + data ring (NULL: output redirected) */
	size_t base_len;
	void *aux;
	size_t aux_len;
	VtRing ring;              /* valid when base != NULL */
} VtPerfevEvent;

/* Open an event on thread `pid` (-1: all) and `cpu` (-1: any).  `what`
 * names it in errors ("intel_pt on thread 1234").  The event starts
 * disabled when attr->disabled is set. */
gboolean vt_perfev_open(VtPerfevEvent *ev, struct perf_event_attr *attr, pid_t pid, int cpu,
			const char *what, GError **error);
/* Map its control page and a data ring of `data_bytes` (power of two,
 * multiple of the page size), and an AUX area of `aux_bytes` (0: none;
 * power of two pages).  `aux_overwrite`: map the AUX area read-only, the
 * kernel's snapshot mode. */
gboolean vt_perfev_map(VtPerfevEvent *ev, uint64_t data_bytes, uint64_t aux_bytes, gboolean aux_overwrite,
		       GError **error);
/* Send ev's records to `to`'s ring (same CPU, or both per-thread). */
gboolean vt_perfev_redirect(VtPerfevEvent *ev, const VtPerfevEvent *to, GError **error);
gboolean vt_perfev_enable(VtPerfevEvent *ev, gboolean on, GError **error);
void vt_perfev_close(VtPerfevEvent *ev);

/* One ring for a stream: `attr` opened on each of `tids` (or all threads if
 * tids is NULL) on `cpu` (-1: any); the first event maps the ring (data
 * and AUX), the others send their records there (SET_OUTPUT).  The events
 * are appended to `events` (VtPerfevEvent *, owned by the array: use
 * vt_perfev_array_new); returns the ring's owner, NULL on error. */
VtPerfevEvent *vt_perfev_open_stream(GPtrArray *events, struct perf_event_attr *attr, const int32_t *tids,
				   guint ntids, int cpu, uint64_t data_bytes, uint64_t aux_bytes,
				   gboolean aux_overwrite, const char *what, GError **error);
/* An array for vt_perfev_open_stream: frees (closes) its events. */
GPtrArray *vt_perfev_array_new(void);
/* Enable or disable every event of the array. */
gboolean vt_perfev_array_enable(GPtrArray *events, gboolean on, GError **error);

/* A tracepoint's id from tracefs (events/SYSTEM/NAME/id), -1 if absent. */
gint64 vt_perfev_tracepoint_id(const char *system, const char *name);
/* A file of a tracepoint's tracefs directory (tracing/ or debug/tracing/),
 * e.g. "format"; NULL when neither has it. */
char *vt_perfev_tracepoint_file(const char *system, const char *name, const char *file);

G_END_DECLS

#endif
