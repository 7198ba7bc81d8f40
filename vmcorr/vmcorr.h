/* vmcorr.h - VM time correlation: find each VMCS's TSC offset in a host
 * Intel PT recording (perf.data) from PIP/VMCS/TSC/TMA/MTC packets.
 *
 * The offset discovery reproduces perf's VM Time Correlation decisions
 * (tools/perf intel-pt decoder, perf 6.1) so `--format=perf` output matches
 * `perf inject --vm-time-correlation=dry-run` line for line, and adds
 * per-VMCS statistics (packets used, spread of the per-packet estimates,
 * vCPU mapping, status).  AUX queues are decoded in parallel; see
 * vmcorr/dryrun.c for how the result is kept identical to perf's
 * sequential queue order.
 *
 * No printing, no exiting: errors are GErrors (VMCORR_ERROR or
 * VT_PERF_ERROR).
 */
#ifndef VMCORR_H
#define VMCORR_H

#include <glib.h>
#include <stdint.h>

#include "src/perf/perf-data.h"

G_BEGIN_DECLS

#define VMCORR_ERROR (vmcorr_error_quark())
GQuark vmcorr_error_quark(void);

typedef enum {
	VMCORR_ERROR_NOT_PT,        /* no Intel PT AUXTRACE_INFO / attr */
	VMCORR_ERROR_NO_TIME,       /* timeless trace, no MTC, or no TSC:CTC ratio */
	VMCORR_ERROR_BAD_INPUT,     /* inconsistent queues etc. */
	VMCORR_ERROR_INTERNAL,
	VMCORR_ERROR_BAD_OFFSET,    /* an offset/VMCS string that does not parse */
	VMCORR_ERROR_CHANGED,       /* the file changed (replaced, written) during a correction */
	VMCORR_ERROR_BUSY,          /* another process is correcting the file */
	VMCORR_ERROR_JOURNAL,       /* a journal that is not this file's (or not a journal) */
} VmcorrErrorCode;

#define VMCORR_NO_VMCS 0xffffffffffULL
#define VMCORR_SEVEN_BYTES 0x00ffffffffffffffULL

typedef enum {
	VMCORR_OK = 0,
	VMCORR_UNDETERMINED,     /* guest TSCs seen, no offset learned */
	VMCORR_INCONSISTENT,     /* estimates spread more than the tolerance */
	VMCORR_ZERO,             /* guest TSCs already show host time (offset 0) */
	VMCORR_CHANGES,          /* the offset changes during the trace: epochs, each consistent */
} VmcorrStatus;

/* A reliable per-packet offset estimate and the host time it was made at. */
typedef struct {
	uint64_t time;
	uint64_t est;
} VmcorrEst;

/* A stretch of the trace in which a VMCS's offset was constant. */
typedef struct {
	uint64_t offset;
	uint64_t t_first, t_last;   /* host TSC of the first and last estimate */
	uint64_t n;                 /* estimates */
	int64_t spread;
} VmcorrEpoch;

/* TSC scaling of a VMCS (0: every VMCS): guest = (host * ratio >> frac) + offset. */
typedef struct {
	uint64_t vmcs;
	uint64_t ratio;
	guint frac;
} VmcorrScale;

const char *vmcorr_status_name(VmcorrStatus s);

typedef struct {
	uint64_t vmcs;           /* raw VMCS packet payload (VMCS address >> 12) */
	uint64_t offset;         /* learned TSC offset as perf prints it (0: unknown) */
	gboolean reliable;
	uint64_t n_guest_tsc;    /* TSC packets classified as this VMCS's guest */
	uint64_t n_est;          /* reliable per-packet estimates */
	int64_t spread;          /* max - min of the estimates (ticks) */
	int64_t est_min, est_max;/* estimates relative to `offset` */
	/* vCPU, from the sideband (COMM "CPU n/KVM", ITRACE_START, switches) */
	int vcpu;                /* -1: unknown */
	uint32_t pid, tid;       /* QEMU pid, vCPU thread tid (0: unknown) */
	VmcorrStatus status;
	GArray *epochs;          /* VmcorrEpoch in time order (at least one if n_est) */
	/* how its guest TSCs were translated (see vmcorr_patches_reusable) */
	gboolean trans_set, trans_missing;
	uint64_t trans7;
} VmcorrVmcs;

/* An offset given for a VMCS (perf's `off:vmcs`). */
typedef struct {
	uint64_t vmcs;
	uint64_t offset;
} VmcorrOffset;

/* One translated TSC packet: its 7 payload bytes at `offset` in the file
 * become the low 7 bytes of `value` (little-endian). */
typedef struct {
	uint64_t offset;
	uint64_t value;
} VmcorrPatch;

typedef struct {
	guint jobs;              /* worker threads; 0 = number of CPUs */
	uint64_t tolerance;      /* max spread for "ok"; 0 = default (2 CTC ticks) */
	/* Offsets as perf's --vm-time-correlation takes them. */
	GArray *offsets;         /* VmcorrOffset, or NULL */
	gboolean have_default;
	uint64_t default_offset; /* for every VMCS not in `offsets` (and "no VMCS") */
	GArray *epochs;          /* VmcorrOffset, several per VMCS: offsets of its epochs */
	GArray *scales;          /* VmcorrScale, or NULL */
	gboolean collect_patches;/* fill VmcorrResult.patches */
	gsize aux_window;        /* AUX bytes read (pread) at once per queue; 0: mapped windows (tests use small ones) */
	gboolean aux_pread;      /* read the AUX data with pread (1 MiB) instead of mapping it, to compare */
	guint64 *progress;       /* AUX bytes decoded are added here as they are (atomically; NULL: not counted) */
} VmcorrOptions;

void vmcorr_options_init(VmcorrOptions *o);

typedef struct {
	GArray *vmcs;            /* VmcorrVmcs, sorted by vmcs value */
	GPtrArray *perf_lines;   /* "VMCS: %#lx  TSC Offset %#lx" in perf's order */
	GPtrArray *perf_errors;  /* perf's ERROR lines that perf would print (deduplicated) */
	GArray *unknown_vmcs;    /* uint64_t: given in the options but not in the trace */
	GArray *patches;         /* VmcorrPatch sorted by offset (collect_patches) */
	uint64_t n_tsc, n_guest_tsc, n_host_tsc;
	uint64_t n_bad_packets;
	uint64_t first_bad_offset; /* file offset of the first bad packet */
	uint64_t aux_bytes;
	guint nqueues;
	guint reruns;            /* queues re-decoded sequentially (see dryrun.c) */
	gboolean ooc_unknown;    /* a TSC out of context met a VMCS of unknown offset */
	gboolean per_cpu;
	gboolean pipe;           /* a pipe-mode perf.data (no sections: no marker) */
	uint64_t tsc_ctc_n, tsc_ctc_d;
	guint mtc_period;
	uint64_t tolerance;
	/* The file the trace was read from, as it was: a correction writes
	 * only to this file, unchanged since (vmcorr_apply_patches). */
	uint64_t file_dev, file_ino, file_size;
	int64_t file_mtime_ns;
} VmcorrResult;

void vmcorr_result_free(VmcorrResult *r);

/* Dry run: discover every VMCS and its TSC offset.  Returns NULL with
 * `error` set for unreadable/malformed input (VT_PERF_ERROR), a file
 * without Intel PT (VMCORR_ERROR_NOT_PT) or without time information
 * (VMCORR_ERROR_NO_TIME). */
VmcorrResult *vmcorr_dry_run(const char *path, const VmcorrOptions *opt, GError **error);

/* A discovery run's patches (collect_patches) are exactly what a run with
 * `apply` would produce: every guest TSC of every VMCS was translated with
 * the offset `apply` gives it. */
gboolean vmcorr_patches_reusable(const VmcorrResult *disc, const VmcorrOptions *apply);

/* Split time-ordered estimates (VmcorrEst) into epochs (VmcorrEpoch) of a
 * constant offset: an estimate more than `tol` ticks (56-bit difference)
 * from the current epoch's offset - its first estimate - starts a new
 * epoch, unless it is a single outlier: the next estimate is back within
 * `tol` of the current epoch (and not within `tol` of the outlier).  An
 * outlier counts in its epoch's n and spread.  Returns a new array. */
GArray *vmcorr_segment_epochs(const GArray *ests, uint64_t tol);
/* Whether epochs (from vmcorr_segment_epochs) show a real change: every
 * epoch's spread is within `tol` and every epoch has two estimates or more -
 * except the first and the last, which the recording may cut short (an
 * offset set just before the trace ends leaves one guest TSC packet).  A
 * single estimate between two epochs is never believed. */
gboolean vmcorr_epochs_believed(const GArray *epochs, uint64_t tol);

struct VmcorrSession;
/* The same on an open session (vmcorr/session.h). */
VmcorrResult *vmcorr_run_session(struct VmcorrSession *s, const VmcorrOptions *opt, GError **error);

/* --- offsets given on the command line (offsets.c) */
/* One `OFF` or `OFF:VMCS[,VMCS...]` token into opt (default or per VMCS). */
gboolean vmcorr_parse_offset_token(const char *tok, VmcorrOptions *opt, GError **error);
/* TSC scaling: RATIO[/FRAC][:VMCS[,VMCS...]] (FRAC defaults to 48, VMX's). */
gboolean vmcorr_parse_scale_token(const char *tok, VmcorrOptions *opt, GError **error);
/* perf's --vm-time-correlation string: [dry-run] [OFF[:VMCS[,VMCS]...]]... */
gboolean vmcorr_parse_perf_arg(const char *arg, gboolean *dry_run, VmcorrOptions *opt, GError **error);

/* --- writing the correction (apply.c) */
/* Hold the recording at path (a file, or DIR/data) for a correction: open
 * it and lock it - exclusively (read-write) to correct it in place, shared
 * (read-only) to read it into a copy - so that two corrections never
 * interleave.  Returns the descriptor (the hold lasts until it is closed),
 * or -1: VMCORR_ERROR_BUSY names the PID of the run that holds it. */
int vmcorr_hold(const char *path, gboolean exclusive, GError **error);
/* Write r->patches, read from fd (vmcorr_hold's descriptor of path, which
 * must still be the file r was computed from - same inode, size and mtime -
 * else VMCORR_ERROR_CHANGED and nothing written): to `out` (a new file -
 * with `replace`, an existing regular file is replaced - or a new directory
 * for directory input; see src/fs/output.h), or in place with a journal
 * when out is NULL (fd then held exclusively).  Appends the "corrected"
 * marker with `offsets`.  In place, space for the marker is reserved before
 * the first byte changes; a failure after that names --recover. */
gboolean vmcorr_apply_patches(const char *path, int fd, const char *out, gboolean replace, const VmcorrResult *r,
			      const GArray *offsets, GError **error);
/* The marker JSON if vmtrace corrected the file, else NULL. */
char *vmcorr_marker_read(const char *path, GError **error);
/* An interrupted in-place correction left a journal. */
gboolean vmcorr_journal_pending(const char *path);
/* Complete an interrupted in-place correction (roll the journal forward),
 * holding the file exclusively; refused (VMCORR_ERROR_JOURNAL) when the
 * journal is not a regular file or was written for another file (another
 * inode or size, or bytes at a patch that are neither old nor new). */
gboolean vmcorr_recover(const char *path, gboolean *found, uint64_t *npatches, GError **error);

/* --- KVM time metadata stored with a recording (kvmmeta.c) */
typedef struct {
	int vcpu;
	uint32_t tid;
	uint32_t end_tid;        /* KVM's vcpuN/pid at the end, when it changed (else 0) */
	gboolean have_start, have_end, have_scaling;
	int64_t tsc_offset_start, tsc_offset_end;   /* KVM debugfs tsc-offset */
	uint64_t tsc_scaling_ratio;
	guint tsc_scaling_frac_bits;
	gboolean have_guest_mode_start, have_guest_mode_end;
	int guest_mode_start, guest_mode_end;
} VmcorrKvmVcpu;

/* A kvm:kvm_write_tsc_offset event recorded with the trace. */
typedef struct {
	uint64_t time;           /* perf clock, ns */
	uint32_t tid, vcpu;
	uint64_t previous, next;
} VmcorrTscWrite;

typedef struct {
	char *path;
	char *domain;
	uint32_t qemu_pid;
	GArray *vcpus;           /* VmcorrKvmVcpu */
	gboolean have_writes;    /* the tracepoint was recorded (writes may be empty) */
	GArray *writes;          /* VmcorrTscWrite */
} VmcorrKvmMeta;

/* Load DIR/vmtrace-kvm.ini or FILE.vmtrace-kvm.ini (or explicit_path).
 * NULL without error when there is none. */
VmcorrKvmMeta *vmcorr_kvm_meta_load(const char *trace, const char *explicit_path, GError **error);
void vmcorr_kvm_meta_free(VmcorrKvmMeta *m);
VmcorrKvmMeta *vmcorr_kvm_meta_new(void);
/* Write the metadata to `path` (GKeyFile, format in kvmmeta.c), mode 0644. */
gboolean vmcorr_kvm_meta_save(const VmcorrKvmMeta *m, const char *path, GError **error);
const VmcorrKvmVcpu *vmcorr_kvm_meta_vcpu(const VmcorrKvmMeta *m, uint32_t tid);
/* The vCPUs' TSC scaling, if any vCPU is scaled; *uniform: all the same. */
gboolean vmcorr_kvm_meta_scaling(const VmcorrKvmMeta *m, uint64_t *ratio, guint *frac, gboolean *uniform);

G_END_DECLS

#endif
