/* analyze.h - answers from the decoder's branch stream: per-vCPU guest/host
 * mode intervals, VM exits with their host handler and latency, function
 * slices from call/return flow, first calls, guest system calls and decode
 * health - streamed to a visitor one by one (vmtrace timeline draws them),
 * and aggregated per symbol and vCPU on top (vmtrace report).
 *
 * Clock.  Everything is placed on a per-context clock: perf time (ns) in
 * timed recordings; in timeless ones the number of instructions that
 * context (thread, or CPU for thread 0) has executed so far.  Instruction
 * counts are the decoder's (VtBranch.insns: what libipt's blocks ran
 * between branches), with the flow ends (VT_BRANCH_FLOW_END: instructions
 * after a queue's last branch its TNT bits prove ran) - nothing is walked
 * here.  The instructions up to a context's first branch count in its
 * first mode interval (timeless: the clock starts before them).
 *
 * Contexts.  A context is a thread (tid > 0), or a CPU when the recording
 * cannot name the thread (tid 0 per CPU).  Each has a guest and a host call
 * stack: a VM exit suspends the guest stack (its frames stay open while the
 * host runs) and starts the host's; a VM entry closes the host's frames.
 *
 * Definitions (the tests recompute them from synth's ground truth):
 *  - mode interval: from a VM entry to the next VM exit of the context
 *    (guest), from a VM exit, or the context's first branch, to the next
 *    VM entry (host); the last one ends at the context's last branch.
 *  - VM exit: exit time (the VM-exit branch), re-entry time (the next VM
 *    entry of the context; 0 and `reentered` FALSE when the trace ends or
 *    breaks first), exit IP (guest IP the exit left), handler (symbol of the
 *    exit's TIP target), first host function called after the exit before
 *    re-entry (NULL if none), latency = re-entry - exit on the clock, and
 *    the host instructions in between.
 *  - slice: a call (CALL branch, same machine) to the return that pops it.
 *    A return pops down to the frame whose return address (call + its
 *    length) is the return's target; one that matches no frame pops
 *    nothing.  A stack holds at most 1024 frames: a call that finds it
 *    full first closes the outermost 512 (complete FALSE; calls whose
 *    returns never came: longjmp-like flows, guest task switches).  A trace end, decode error or the end of the recording closes
 *    the context's open frames (complete FALSE).  inclusive = end - start;
 *    self = inclusive - children's inclusive - (guest frames) the time the
 *    context spent in host mode during the frame's own stretches.
 *  - first call: the first entry into each function (per machine), in
 *    order: a CALL (same machine), or a jump (same machine, conditional or
 *    not) to the function's first instruction from outside the function -
 *    a tail call, as `jmp start_kernel` in x86_64_start_reservations.
 *  - thunks (retpolines, return thunks; their code: analyze.c's
 *    thunks_find): branches within thunk code and jumps into it are
 *    nothing; a call into it opens a frame whose function - call, slice
 *    begin, first call - is where the thunk leaves to (the thunk itself if
 *    that is the call's return address); leaving it otherwise is a return
 *    when a frame returns there, else a jump.
 *  - system call (guest): a branch into entry_SYSCALL_64 opens one on the
 *    context; the first call after it into a function named __x64_sys_*
 *    (or __ia32_sys_*, __do_sys_*) names it; it lasts as that call's slice.
 *    Opened but unnamed when the trace breaks first: counted as unnamed.
 *  - health: decode errors (by libipt code), trace breaks (trace end /
 *    begin), branch targets outside any symbol, branches of unknown vCPUs;
 *    lost data: OVF packets (the decoder's VtBranch.overflows, on the
 *    branch after them) and the recording's PERF_RECORD_AUX flagged
 *    truncated / collision / partial and PERF_RECORD_LOST records
 *    (vt_analyze_read_lost); overall and per vCPU (the vCPU of the thread
 *    the branch or record names; -1: no vCPU thread).
 *
 * Memory: per context two call stacks of at most 1024 frames; first calls
 * and aggregates per function and vCPU; nothing per branch.
 *
 * No printing, no exiting.  May call: src/decode, glib. */
#ifndef VT_ANALYZE_H
#define VT_ANALYZE_H

#include <glib.h>

#include "src/decode/decode.h"

G_BEGIN_DECLS

/* --------------------------------------------------------- streamed items */
/* Where an item happened.  vcpu -1: not a vCPU thread ("CPU n/KVM"). */
typedef struct {
	gint32 vcpu, tid, cpu;
	guint64 vmcs;
} VtAnalyzeWhere;

/* A stretch of one mode of a context. */
typedef struct {
	VtAnalyzeWhere w;
	gboolean guest;
	guint64 start, end;         /* clock */
	guint64 insns;              /* instructions in it (0 unless counted) */
} VtAnalyzeMode;

typedef struct {
	VtAnalyzeWhere w;
	guint64 exit_time, entry_time;   /* clock; entry_time 0 unless reentered */
	gboolean reentered;
	guint64 exit_ip;                 /* guest IP the exit left */
	guint64 handler_ip;              /* host: the exit's TIP target */
	const char *handler;             /* its symbol (NULL: none) */
	const char *first_call;          /* first host function called (NULL: none) */
	guint64 latency;                 /* entry_time - exit_time (0 unless reentered) */
	guint64 host_insns;              /* host instructions from exit to re-entry (0 unless counted) */
	guint64 end;                     /* clock when it ended: entry_time if reentered, else the
					  * trace break, next exit or end of the recording */
} VtAnalyzeExit;

typedef struct {
	VtAnalyzeWhere w;
	gboolean guest;
	guint depth;                /* 0: outermost open frame of its stack */
	guint64 func;               /* the called address */
	const char *sym;            /* its symbol (NULL: none) */
	guint64 start, end;         /* clock */
	guint64 self;               /* clock units, see above */
	guint64 insns, self_insns;  /* 0 unless counted */
	gboolean complete;          /* ended by its return */
} VtAnalyzeSlice;

typedef struct {
	VtAnalyzeWhere w;
	gboolean guest;
	guint64 func;
	const char *sym;
	guint64 time;               /* clock of the call */
	guint index;                /* 0, 1, ... in order of first calls (per machine) */
} VtAnalyzeFirstCall;

typedef struct {
	VtAnalyzeWhere w;
	const char *name;           /* __x64_sys_* symbol; NULL: not seen */
	guint64 start, end;         /* clock: entry into entry_SYSCALL_64 .. the handler's return */
	gboolean complete;
} VtAnalyzeSyscall;

/* Callbacks (any may be NULL); items arrive in the order the analysis
 * completes them (a slice when it ends, an exit at re-entry or when it
 * ends unre-entered).  slice_begin and exit_begin announce an item when it
 * starts (the call; the VM-exit branch), so a sink can draw begin/end in
 * time order: slice_begin's slice has w, guest, depth, func, sym and start
 * (its end, self, insns 0, complete FALSE); exit_begin's exit has w,
 * exit_time, exit_ip, handler_ip and handler (first_call NULL, not
 * reentered).  Per context and machine, every begun slice later ends
 * through `slice`, begins and ends nesting by depth - except when a full
 * stack closes its outermost frames (analyze.h, "slice"): those end while
 * the inner ones stay open and renumber from depth 0.  Every begun exit
 * ends through `exit` before the context's next exit begins. */
typedef struct {
	void (*mode)(const VtAnalyzeMode *m, gpointer user);
	void (*exit)(const VtAnalyzeExit *x, gpointer user);
	void (*slice)(const VtAnalyzeSlice *s, gpointer user);
	void (*slice_begin)(const VtAnalyzeSlice *s, gpointer user);
	void (*exit_begin)(const VtAnalyzeExit *x, gpointer user);
	void (*first_call)(const VtAnalyzeFirstCall *f, gpointer user);
	void (*syscall)(const VtAnalyzeSyscall *s, gpointer user);
	gpointer user;
} VtAnalyzeVisitor;

/* --------------------------------------------------------------- analysis */
typedef struct {
	const VtDecodeImage *host, *guest;   /* borrowed: symbols */
	gboolean timed;             /* vt_decode_result_timed() */
	gint vcpu;                  /* only this vCPU's thread; -1: all */
} VtAnalyzeOptions;

typedef struct {
	guint64 branches;           /* events seen */
	guint64 errors;             /* decode errors */
	guint64 error_codes[32];    /* by libipt code (positive; 31: other) */
	guint64 trace_breaks;       /* trace ends */
	guint64 unresolved;         /* branch targets without a symbol */
	guint64 unknown_vcpu;       /* branches of threads that are no vCPU */
	guint64 unmatched_returns;  /* returns that popped nothing */
	/* lost data */
	guint64 overflows;          /* OVF packets: the processor's buffer overflowed, trace lost */
	guint64 aux_records;        /* PERF_RECORD_AUX records (AUX data written) */
	guint64 aux_truncated;      /* ... flagged TRUNCATED: the AUX area was full, data lost */
	guint64 aux_collision;      /* ... flagged COLLISION: a sample collided, data lost */
	guint64 aux_partial;        /* ... flagged PARTIAL: the record has gaps */
	guint64 lost_records;       /* PERF_RECORD_LOST: sideband records the kernel dropped (their sum) */
} VtAnalyzeHealth;

typedef struct {
	gint32 vcpu;                /* -1: threads that are no vCPU */
	VtAnalyzeHealth h;          /* error_codes, unknown_vcpu: as overall */
} VtAnalyzeVcpuHealth;

typedef struct VtAnalyze VtAnalyze;

VtAnalyze *vt_analyze_new(const VtAnalyzeOptions *opts, const VtAnalyzeVisitor *visitor);
void vt_analyze_free(VtAnalyze *a);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(VtAnalyze, vt_analyze_free)
/* One decoded branch (in the decoder's order). */
void vt_analyze_event(VtAnalyze *a, const VtDecodeEvent *e);
/* The end of the recording: closes every open slice, exit and interval. */
void vt_analyze_finish(VtAnalyze *a);
const VtAnalyzeHealth *vt_analyze_health(VtAnalyze *a);
/* The health per vCPU (VtAnalyzeVcpuHealth, by vCPU; -1 first), owned by a. */
const GArray *vt_analyze_health_vcpus(VtAnalyze *a);
/* After the branches: the recording's PERF_RECORD_AUX and PERF_RECORD_LOST
 * records counted into the health (src/analyze/lost.c; the vCPU from the
 * record's thread as the branches named it).  FALSE when the file cannot
 * be read. */
gboolean vt_analyze_read_lost(VtAnalyze *a, const char *path, GError **error);
/* One such record of thread tid: PERF_RECORD_AUX flags (aux TRUE), or n
 * records lost (aux FALSE). */
void vt_analyze_lost(VtAnalyze *a, gint32 tid, gboolean aux, guint64 flags, guint64 n);

/* ----------------------------------------------- aggregation (report) */
typedef struct {
	gboolean timed;
	gboolean have_range;        /* only items starting in [start, end] (clock) */
	guint64 range_start, range_end;
	guint longest;              /* longest exits kept per vCPU (0: 10) */
} VtAnalyzeSummaryOptions;

/* Latency distributions, in memory flat however many exits: a vCPU's
 * percentiles (nearest rank) are exact while it has at most
 * VT_ANALYZE_EXACT values, then from a log-linear histogram (a bucket's
 * low end: at most 1/128 below).  The exit groups' (handler x first call:
 * a few in life, tens of thousands in synth's random walks) are exact
 * while all groups together have at most VT_ANALYZE_GROUP_EXACT values,
 * then from log-linear histograms that keep only the buckets in use: 1/128
 * while all groups together use at most VT_ANALYZE_GROUP_BUCKETS, else
 * coarser for all (1/64, 1/32 ... down to one bucket per power of two)
 * until they do.  Counts, totals, min and max are always exact. */
#define VT_ANALYZE_EXACT 65536
#define VT_ANALYZE_GROUP_EXACT (1u << 18)
#define VT_ANALYZE_GROUP_BUCKETS (1u << 18)
typedef struct {
	guint64 count, total, min, max, p50, p90, p99;
} VtAnalyzeStats;

typedef struct {
	gint32 vcpu, tid;
	guint64 first, last;        /* clock of its first and last branch */
	guint64 guest, host;        /* clock units in guest and host mode */
	guint64 guest_insns, host_insns;
	guint64 exits;              /* VM exits (re-entered or not) */
	VtAnalyzeStats latency;     /* re-entered exits */
	GArray *longest;            /* VtAnalyzeExit, longest first */
} VtAnalyzeVcpu;

typedef struct {
	gint32 vcpu;                /* -1: all vCPUs */
	const char *handler, *first_call;
	VtAnalyzeStats latency;
} VtAnalyzeExitGroup;

typedef struct {
	gint32 vcpu;                /* -1: all vCPUs */
	gboolean guest;
	guint64 func;
	const char *sym;
	guint64 calls;
	guint64 self, inclusive;    /* clock units; inclusive counts a recursive function's frames each */
	guint64 self_insns, insns;
} VtAnalyzeFunction;

typedef struct {
	const char *name;           /* NULL: unnamed (trace broke first) */
	guint64 count, complete, total;   /* total: clock units of the complete ones */
	guint64 first, last;        /* clock of the first and last entry */
} VtAnalyzeSyscallStats;

typedef struct VtAnalyzeSummary VtAnalyzeSummary;

VtAnalyzeSummary *vt_analyze_summary_new(const VtAnalyzeSummaryOptions *opts);
void vt_analyze_summary_free(VtAnalyzeSummary *s);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(VtAnalyzeSummary, vt_analyze_summary_free)
/* The visitor that feeds s (a visitor's user is s). */
VtAnalyzeVisitor vt_analyze_summary_visitor(VtAnalyzeSummary *s);
/* After vt_analyze_finish(): the results, owned by s, sorted -
 * vCPUs by number; exit groups by vCPU then count (descending);
 * functions by vCPU, machine, then self (descending); first calls by
 * index (per machine: guest first); syscalls by count (descending). */
const GArray *vt_analyze_summary_vcpus(VtAnalyzeSummary *s);        /* VtAnalyzeVcpu */
const GArray *vt_analyze_summary_exit_groups(VtAnalyzeSummary *s);  /* VtAnalyzeExitGroup */
const GArray *vt_analyze_summary_functions(VtAnalyzeSummary *s);    /* VtAnalyzeFunction */
const GArray *vt_analyze_summary_first_calls(VtAnalyzeSummary *s);  /* VtAnalyzeFirstCall */
const GArray *vt_analyze_summary_syscalls(VtAnalyzeSummary *s);     /* VtAnalyzeSyscallStats */

G_END_DECLS

#endif
