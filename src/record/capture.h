/* capture.h - the hardware boundary of `vmtrace record`.
 *
 * A trace source gives, for every stream (a vCPU thread, or a host CPU),
 * a perf mmap ring whose data ring carries the trace event's own records
 * (ITRACE_START, AUX, LOST, ...) and whose AUX area carries the Intel PT
 * bytes.  Everything the recorder does with those rings - reading, writing
 * the perf.data directory, sideband, metadata - is the same for both
 * sources:
 *
 *   "intel_pt"  perf_event_open on the intel_pt PMU (type and config bits
 *               from sysfs).  Needs Intel PT hardware.
 *   "synth"     plays the kernel's part in memory, with packets from
 *               `vmtrace synth` for the real QEMU's threads: lets the whole
 *               pipeline run (and be tested) on machines without Intel PT.
 */
#ifndef VT_CAPTURE_H
#define VT_CAPTURE_H

#include <glib.h>
#include <signal.h>
#include <stdint.h>
#include <linux/perf_event.h>

#include "src/perf/perf-data.h"
#include "src/record/ring.h"

G_BEGIN_DECLS

#define VT_CAPTURE_ERROR (vt_capture_error_quark())
GQuark vt_capture_error_quark(void);
typedef enum {
	VT_CAPTURE_ERROR_NO_PT,      /* no intel_pt PMU, or a feature it lacks */
	VT_CAPTURE_ERROR_CONFIG,     /* bad source options */
	VT_CAPTURE_ERROR_FAILED,
} VtCaptureErrorCode;

typedef struct {
	gboolean per_cpu;            /* one stream per host CPU (else per thread) */
	gboolean timeless;           /* tsc=0, mtc=0 */
	gboolean cyc;
	gint mtc_period;             /* -1: the PMU's default (3) */
	gboolean snapshot;           /* AUX area in overwrite mode */
	uint64_t aux_bytes;          /* AUX area per stream (power of two) */
	uint64_t data_bytes;         /* data ring per stream (power of two) */
	uint32_t qemu_pid;
	const int32_t *tids;         /* the traced threads (vCPUs) */
	guint ntids;
	const struct VtSynthConfig *synth;   /* "synth" source: its configuration */
	uint64_t synth_rate;         /* "synth" source: bytes per second (0: as fast as read) */
	VtPerfTimeConv time_conv;    /* the perf clock (for the synthetic source) */
	const volatile sig_atomic_t *stop;   /* a stop request (signal): long setup work gives up */
} VtCaptureConfig;

typedef struct {
	guint idx;                   /* AUX queue index */
	int32_t tid;                 /* per-thread: the thread; per-CPU: -1 */
	int32_t cpu;                 /* per-CPU: the CPU; per-thread: -1 */
	VtRing *ring;                /* the trace event's ring and AUX area */
	uint64_t id;                 /* the trace event's id (sample_id) */
	uint64_t aux_bytes;          /* AUX bytes taken */
	uint64_t truncated, lost;    /* PERF_RECORD_AUX truncated flags, LOST records */
} VtCaptureStream;

typedef struct VtCapture VtCapture;

typedef struct {
	const char *name;
	/* Can this source record with cfg on this machine?  Runs before
	 * anything is opened (cfg's threads may not be known yet). */
	gboolean (*probe)(const VtCaptureConfig *cfg, GError **error);
	/* How many streams the source takes (0: any number). */
	guint (*max_streams)(const VtCaptureConfig *cfg);
	/* Open and map every stream (disabled). */
	gboolean (*open)(VtCapture *c, GError **error);
	gboolean (*enable)(VtCapture *c, gboolean on, GError **error);
	/* Wait up to timeout_ms for data (the synthetic source produces some). */
	void (*wait)(VtCapture *c, int timeout_ms);
	/* TRUE when the source can produce no more data (synthetic source). */
	gboolean (*exhausted)(VtCapture *c);
	void (*close)(VtCapture *c);
} VtCaptureOps;

struct VtCapture {
	const VtCaptureOps *ops;
	VtCaptureConfig cfg;
	GArray *streams;             /* VtCaptureStream */
	struct perf_event_attr attr; /* the trace event */
	char *event_name;            /* "intel_pt/cyc=1/k" */
	uint32_t pmu_type;
	/* AUXTRACE_INFO priv[] (intel_pt layout); the time fields are the
	 * recorder's (it fills VT_PT_INFO_TIME_* from the perf clock). */
	uint64_t info[VT_PT_INFO_NR_FIXED];
	GArray *ids;                 /* uint64_t: every trace event's id (several
				      * per stream in per-CPU mode) */
	char *cpuid;                 /* HEADER_CPUID: "GenuineIntel,6,85,4" */
	void *priv;
};

/* Create a source: "intel_pt" or "synth".  Streams are added by the caller
 * (vt_capture_add_stream) before ops->open. */
VtCapture *vt_capture_new(const char *source, const VtCaptureConfig *cfg, GError **error);
/* The source's probe, without creating it: an error of code
 * VT_CAPTURE_ERROR_NO_PT means this machine cannot trace. */
gboolean vt_capture_probe(const char *source, const VtCaptureConfig *cfg, GError **error);
/* FALSE (nothing added) when the source takes no more streams. */
gboolean vt_capture_add_stream(VtCapture *c, int32_t tid, int32_t cpu);
VtCaptureStream *vt_capture_stream(VtCapture *c, guint i);
void vt_capture_free(VtCapture *c);

/* The event as perf names it: "intel_pt/tsc=1,mtc=1,mtc_period=3/k"
 * (the non-zero timing fields, in perf's order). */
char *vt_capture_event_name(gboolean tsc, gboolean mtc, guint mtc_period, gboolean cyc);
/* perf's HEADER_CPUID string of this CPU: "vendor,family,model,stepping". */
char *vt_capture_host_cpuid(void);
/* TSC:CTC ratio from CPUID leaf 0x15 (FALSE if the CPU has none). */
gboolean vt_capture_tsc_ctc(uint32_t *n, uint32_t *d);

/* The two sources (capture-pt.c, capture-synth.c). */
extern const VtCaptureOps vt_capture_pt_ops;
extern const VtCaptureOps vt_capture_synth_ops;

G_END_DECLS

#endif
