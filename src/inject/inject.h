/* inject.h - merge a guest's own perf.data (its sideband: tasks, mmaps,
 * switches) into a host recording, as `perf inject --guest-data` does, with
 * exact integer time conversion and a vCPU -> host CPU map taken from the
 * switch records that really put each vCPU thread on a CPU.
 *
 * No printing, no exiting: errors are GErrors in VT_INJECT_ERROR (what the
 * inputs lack, one line each) or VT_PERF_ERROR / G_FILE_ERROR (unreadable
 * input, unwritable output).  The output is a perf.data directory built in
 * a temporary directory and renamed into place: nothing half-written is
 * left on any error.
 */
#ifndef VT_INJECT_H
#define VT_INJECT_H

#include <glib.h>
#include <stdint.h>

#include "src/perf/perf-data.h"

G_BEGIN_DECLS

#define VT_INJECT_ERROR (vt_inject_error_quark())
GQuark vt_inject_error_quark(void);

typedef enum {
	VT_INJECT_ERROR_GUEST_NO_IDS,      /* guest file: no sample ids / no sample_id_all */
	VT_INJECT_ERROR_GUEST_NO_ID_INDEX, /* guest file: no ID_INDEX, or an id missing from it */
	VT_INJECT_ERROR_GUEST_ID_NO_CPU,   /* guest file: an id whose CPU is -1 (not system-wide) */
	VT_INJECT_ERROR_GUEST_CLOCK,       /* guest file: no TIME_CONV with cap_user_time_zero */
	VT_INJECT_ERROR_GUEST_VCPU,        /* a guest CPU with no "CPU n/KVM" thread on the host */
	VT_INJECT_ERROR_HOST_NO_VCPUS,     /* host: no "CPU n/KVM" COMM (for that pid) */
	VT_INJECT_ERROR_HOST_PIDS,         /* host: several QEMU processes and no pid given */
	VT_INJECT_ERROR_HOST_NO_SWITCH,    /* host: no context-switch records with CPU */
	VT_INJECT_ERROR_HOST_NO_TIME,      /* host: no TIME_CONV with cap_user_time_zero */
	VT_INJECT_ERROR_HOST_INJECTED,     /* host: holds that VM's guest records already */
	VT_INJECT_ERROR_NO_CLOCK,          /* no offset given for a vCPU */
	VT_INJECT_ERROR_OFFSET_CHANGE,     /* a vCPU's offset changed and a record's time fits no epoch, or two */
	VT_INJECT_ERROR_OUTPUT,            /* OUT cannot be written (message names the file) */
} VtInjectErrorCode;

/* How a vCPU's guest TSC relates to the host TSC (VMX):
 * guest = (host * ratio >> frac) + offset; ratio 0: no scaling.
 * An offset that changed during the recording (the guest wrote its TSC,
 * save/restore) is one clock per epoch, each with the host TSC range in
 * which it may have been in force (from the last estimate of the epoch
 * before to the first of the epoch after): a record takes the one clock
 * whose host time for it lies in its range - of several, the one whose
 * guest range holds its guest TSC; none, or several still, is an error
 * (VT_INJECT_ERROR_OFFSET_CHANGE). */
typedef struct {
	int vcpu;                /* -1: every vCPU without an entry of its own */
	uint64_t offset;
	uint64_t ratio;
	guint frac;
	uint64_t host_from, host_to;   /* inclusive; host_to 0: no upper bound */
	/* where the guest's TSC went forward across a change (the epoch
	 * after's first guest TSC above the epoch before's last), the guest
	 * TSC range of the epoch: a record in two epochs' host ranges takes
	 * the one whose guest range holds its guest TSC (0, 0: none) */
	uint64_t guest_from, guest_to;
} VtInjectClock;

typedef struct {
	uint32_t machine_pid;    /* the QEMU process; 0: the recording's only one */
	GArray *clocks;          /* VtInjectClock; every vCPU needs one (or a -1 entry) */
	guint64 *progress;       /* bytes of REC's records written to OUT (with AUX data) are added
				  * here as they are (atomically; NULL: not counted) */
} VtInjectOptions;

typedef struct {
	uint32_t machine_pid;
	guint nvcpus;            /* "CPU n/KVM" threads of machine_pid */
	guint64 guest_ids;       /* guest sample ids mapped to new host ids */
	guint64 injected;        /* guest records written */
	guint64 skipped;         /* guest records not injected (samples, BPF ksymbols, ...) */
	guint64 host_records;
	guint64 first_host_id;   /* the first new id */
	guint64 unplaced_vcpus;  /* vCPUs never switched in on the host: CPU 0 */
	guint64 timed;           /* injected guest records with a time */
	guint64 in_host_span;    /* ... of them within the host records' first..last time */
	guint64 host_first, host_last;  /* that span (0, 0: no host record has a time) */
} VtInjectResult;

/* The QEMU processes of a host recording: pids of threads named "CPU n/KVM",
 * ascending (a new array of uint32_t, maybe empty). */
GArray *vt_inject_host_qemu_pids(const char *rec, GError **error);

/* *has: whether REC names a "CPU vcpu/KVM" thread of QEMU process pid. */
gboolean vt_inject_host_has_vcpu(const char *rec, uint32_t pid, guint vcpu, gboolean *has, GError **error);

/* The guest file's own checks (sample ids, sample_id_all, ID_INDEX, CPUs,
 * a TSC-based clock), as vt_inject_guest_data makes them first: cheap, for
 * callers with slow work to do before merging. */
gboolean vt_inject_guest_check(const char *guest, GError **error);
/* FALSE (VT_PERF_ERROR_FORMAT) if path is a perf.data directory of several
 * data files (perf record --threads: data.N beside data), of which only
 * DIR/data would be read; vt_inject_guest_data checks both inputs first. */
gboolean vt_inject_one_data_file(const char *path, GError **error);

/* Guest perf time -> host perf time, in integers: guest TSC from the
 * guest's TIME_CONV (perf_time_to_tsc), host TSC = guest TSC - offset (or,
 * scaled, the smallest host TSC h with (h * ratio >> frac) = guest - offset,
 * in 128 bits), host time from
 * the host's TIME_CONV (tsc_to_perf_time).  0 stays 0 (perf's "no time"). */
/* The host TSC of guest perf time t (not 0) by clock c: the middle step
 * of vt_inject_time. */
uint64_t vt_inject_host_tsc(uint64_t t, const VtPerfTimeConv *guest_tc, const VtInjectClock *c);
uint64_t vt_inject_time(uint64_t guest_time, const VtPerfTimeConv *guest_tc, const VtPerfTimeConv *host_tc,
			const VtInjectClock *c);

/* Merge: REC (a perf.data file or directory) + GUEST (a guest perf.data
 * recorded system-wide with sample ids) -> OUT, a new perf.data directory
 * (OUT/data; other files and directories of a REC directory - kcore_dir,
 * vmtrace-kvm.ini - are copied, and a GUEST directory's kcore_dir becomes
 * OUT/kcore_dir__PID as with perf).  OUT must not exist. */
gboolean vt_inject_guest_data(const char *rec, const char *guest, const char *out, const VtInjectOptions *opt,
			      VtInjectResult *res, GError **error);

G_END_DECLS

#endif
