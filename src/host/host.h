/* host.h - facts about the host that recording depends on, read from
 * sysfs, procfs, debugfs and /dev through one root prefix (so tests can
 * point it at a prepared tree).  No printing, no exiting. */
#ifndef VT_HOST_H
#define VT_HOST_H

#include <glib.h>
#include <stdint.h>

G_BEGIN_DECLS

/* Root prefix for every path below ("" or NULL: the real system).  Also
 * taken from the environment variable VMTRACE_SYSROOT when not set. */
void vt_host_set_root(const char *root);
const char *vt_host_root(void);
/* root + path (path is absolute, like "/sys/bus/..."); newly allocated. */
char *vt_host_path(const char *path);
/* Read a small text file under the root, stripped; NULL if unreadable. */
char *vt_host_read(const char *path);
/* Read an integer file; FALSE if missing or not a number. */
gboolean vt_host_read_int(const char *path, gint64 *out);
/* Online CPUs (int), from /sys/devices/system/cpu/online under the root. */
GArray *vt_host_online_cpus(void);

typedef enum { VT_HOST_CHECK_OK, VT_HOST_CHECK_WARN, VT_HOST_CHECK_FAIL } VtHostCheckLevel;
const char *vt_host_check_level_name(VtHostCheckLevel l);

typedef struct {
	char *name;      /* "intel_pt", "pt_mode", ... */
	VtHostCheckLevel level;
	char *what;      /* one line: what was found */
	char *fix;       /* the exact fix, or NULL */
} VtHostCheck;

void vt_host_check_free(gpointer c);
/* Append a check (takes the strings' ownership via printf-style args). */
void vt_host_check_add(GPtrArray *checks, const char *name, VtHostCheckLevel level, const char *fix, const char *fmt, ...)
	G_GNUC_PRINTF(5, 6);

/* Host checks for Intel PT tracing of KVM guests (issue: record/check). */
void vt_host_readiness(GPtrArray *checks);

/* intel_pt PMU */
typedef struct {
	gboolean present;
	guint type;                 /* perf_event_attr.type */
	GHashTable *caps;           /* name -> value string */
	GHashTable *format;         /* name -> "config:a-b" */
} VtHostIntelPt;
gboolean vt_host_intel_pt(VtHostIntelPt *pt);
void vt_host_intel_pt_clear(VtHostIntelPt *pt);
/* Config bits of a format field ("config:10" or "config:14-17"): mask and shift. */
gboolean vt_host_intel_pt_field(const VtHostIntelPt *pt, const char *name, uint64_t *mask, guint *shift);

G_END_DECLS

#endif
