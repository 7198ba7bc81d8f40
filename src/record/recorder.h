/* recorder.h - record a trace source plus real sideband into a perf.data
 * directory that perf reads.
 *
 *   vt_recorder_new      open the sideband events (dummy: comm, task, mmap,
 *                        context switches; kvm:kvm_write_tsc_offset when the
 *                        kernel has it), then the trace source; write the
 *                        header records (TIME_CONV from the perf clock,
 *                        AUXTRACE_INFO, COMM of the QEMU threads, the
 *                        kernel's MMAP)
 *   vt_recorder_start    enable everything
 *   vt_recorder_poll     wait a little, then drain every ring into the file
 *   vt_recorder_snapshot snapshot mode: take the newest AUX data now
 *   vt_recorder_finish   disable, drain, write the features, rename into place
 */
#ifndef VT_RECORDER_H
#define VT_RECORDER_H

#include <glib.h>
#include <stdint.h>

#include "src/record/capture.h"

G_BEGIN_DECLS

#define VT_RECORDER_ERROR (vt_recorder_error_quark())
GQuark vt_recorder_error_quark(void);

typedef struct {
	const char *out_dir;         /* perf.data directory to create (DIR/data) */
	uint32_t qemu_pid;
	const int32_t *tids;         /* vCPU threads */
	guint ntids;
	gboolean tsc_tracepoint;     /* try kvm:kvm_write_tsc_offset */
	uint64_t snapshot_size;      /* snapshot mode: bytes per stream per snapshot (0: AUX size) */
	const char *const *argv;     /* HEADER_CMDLINE (NULL-terminated) */
} VtRecorderOptions;

typedef struct {
	uint64_t aux_bytes;          /* AUX bytes written */
	uint64_t trace_records;      /* records from the trace event rings */
	uint64_t sideband_records;   /* records from the sideband rings */
	uint64_t lost;               /* PERF_RECORD_LOST: lost records (sum of lost counts) */
	uint64_t truncated;          /* PERF_RECORD_AUX with the truncated flag */
	uint64_t snapshots;
	uint64_t file_bytes;
	gboolean time_calibrated;    /* the kernel gave no TSC conversion: measured */
} VtRecorderStats;

/* A kvm:kvm_write_tsc_offset event of the traced QEMU. */
typedef struct {
	uint64_t time;               /* perf clock, ns */
	uint32_t tid;
	uint32_t vcpu;
	uint64_t previous, next;     /* tsc offsets */
} VtRecorderTscWrite;

typedef struct VtRecorder VtRecorder;

VtRecorder *vt_recorder_new(VtCapture *cap, const VtRecorderOptions *o, GError **error);
gboolean vt_recorder_start(VtRecorder *r, GError **error);
gboolean vt_recorder_poll(VtRecorder *r, int timeout_ms, GError **error);
gboolean vt_recorder_snapshot(VtRecorder *r, GError **error);
gboolean vt_recorder_finish(VtRecorder *r, GError **error);
const VtRecorderStats *vt_recorder_stats(const VtRecorder *r);
/* kvm_write_tsc_offset events seen (VtRecorderTscWrite); NULL if the tracepoint
 * could not be opened (then *why says why). */
const GArray *vt_recorder_tsc_writes(const VtRecorder *r, const char **why);
/* Frees; an unfinished recording's temporary file is removed. */
void vt_recorder_free(VtRecorder *r);

G_END_DECLS

#endif
