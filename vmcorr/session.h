/* session.h - an Intel PT recording as AUX queues plus the sideband that
 * names threads and vCPUs.  Used by the correlation code. */
#ifndef VMCORR_SESSION_H
#define VMCORR_SESSION_H

#include <glib.h>
#include <stdint.h>

#include "src/perf/perf-data.h"

typedef struct {
	uint64_t payload_off;    /* file offset of the AUX bytes */
	uint64_t size;
	uint64_t reference;      /* TSC when perf copied the buffer */
	uint64_t aux_offset;
} VmcorrBuffer;

typedef struct {
	guint idx;
	uint32_t cpu, tid;       /* from the first buffer (-1: n/a) */
	guint first, nbufs;      /* its buffers: session->bufs[first ..< first + nbufs], in file order */
	uint64_t bytes;
} VmcorrQueue;

typedef struct {
	uint32_t pid;
	int vcpu;                /* from "CPU n/KVM", else -1 */
	char *comm;
} VmcorrThread;

typedef struct {
	uint64_t time;           /* perf time */
	uint32_t pid, tid;       /* task switched in */
} VmcorrSwitch;

typedef struct VmcorrSession {
	VtPerfFile *f;
	uint64_t priv[32];
	guint nr_priv;
	const VtPerfAttr *pt_attr;
	GArray *queues;          /* VmcorrQueue sorted by idx; only queues with data */
	VmcorrBuffer *bufs;      /* every queue's buffers, queue after queue */
	GHashTable *threads;     /* tid -> VmcorrThread* */
	GHashTable *switches;    /* cpu -> GArray of VmcorrSwitch (time order) */
	VtPerfTimeConv tc;
	gboolean have_tc;
	gboolean per_cpu, snapshot;
	gboolean have_tsc, have_mtc;
	guint mtc_period;
	uint64_t tsc_ctc_n, tsc_ctc_d;
	uint64_t aux_bytes;
} VmcorrSession;

/* Open and index the file: AUXTRACE_INFO, queues, COMM/ITRACE_START/
 * SWITCH sideband.  Does not check time requirements. */
VmcorrSession *vmcorr_session_open(const char *path, VtPerfOpenFlags flags, GError **error);
void vmcorr_session_free(VmcorrSession *s);

/* Thread running on `cpu` at host TSC `tsc` per the switch sideband (0 if unknown). */
uint32_t vmcorr_session_thread_at(const VmcorrSession *s, uint32_t cpu, uint64_t tsc);
const VmcorrThread *vmcorr_session_thread(const VmcorrSession *s, uint32_t tid);

#endif
