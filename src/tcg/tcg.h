/* tcg.h - turn what the QEMU TCG plugin (vmtrace-tcg.so) wrote into a
 * recording: a perf.data directory with one AUX stream per vCPU (the same
 * attrs and sideband shape as a host Intel PT recording of a guest: PIP
 * NR=1, a guest kernel MMAP) and the image of every executed instruction
 * (OUT/guest/{kcore,kallsyms,modules}, kcore_dir-style; a copy in
 * OUT/kcore_dir for tools that want a host image too).
 *
 * No printing, no exiting: errors are GErrors in VT_TCG_ERROR.
 * Prefix: vt_tcg_ / VtTcg.  May call: src/perf, src/fs, glib. */
#ifndef VT_TCG_H
#define VT_TCG_H

#include <glib.h>
#include <stdint.h>

G_BEGIN_DECLS

#define VT_TCG_ERROR (vt_tcg_error_quark())
GQuark vt_tcg_error_quark(void);
typedef enum {
	VT_TCG_ERROR_INPUT,      /* the plugin's directory is missing or malformed */
	VT_TCG_ERROR_NO_TRACE,   /* the plugin traced nothing (no kernel-half code ran) */
	VT_TCG_ERROR_IO,
} VtTcgErrorCode;

typedef struct {
	const char *in_dir;          /* the plugin's out=DIR */
	const char *out_dir;         /* the recording (an existing, empty directory) */
	const char *kallsyms;        /* the guest's kallsyms or System.map (NULL: _text/_stext only) */
	const char *image_path;      /* where OUT/guest/kcore will be (absolute): perf's user maps (NULL: none) */
	uint32_t qemu_pid;
	const char *const *argv;     /* HEADER_CMDLINE */
} VtTcgConvertOptions;

#define VT_TCG_STATS_VCPUS 64

typedef struct {
	guint vcpus;
	gboolean kernel_only, mttcg;
	uint64_t started;            /* instructions QEMU started (all, plugin counter) */
	uint64_t before;             /* ... before tracing began (firmware, setup) */
	uint64_t after;              /* ... after it stopped (--tcg-limit) */
	uint64_t retired;            /* instructions in the trace (what a decoder walks) */
	uint64_t faults, rep_iters, filtered, final_started;
	uint64_t asyncs;
	uint64_t unresolved;         /* interrupted addresses never returned to: guessed */
	uint64_t inflight;           /* ... still in flight when tracing stopped: guessed */
	uint64_t packets, aux_bytes, file_bytes;
	uint64_t code_bytes, code_pages, translations;
	uint64_t smc_translations;   /* translations whose bytes differ from earlier ones */
	uint64_t smc_bytes;          /* code bytes seen with more than one value */
	uint64_t mode_changes;       /* MODE.Exec changes of 16/32/64-bit mode in the trace */
	uint64_t mode_resyncs;       /* ... where no TIP went: a TIP.PGD/TIP.PGE pair (a wrong guess) */
	uint64_t mode_ambiguous;     /* translations that ran alike in several modes */
	guint n_per_vcpu;            /* traced vCPUs (at most VT_TCG_STATS_VCPUS of them here): */
	struct {
		guint vcpu;
		uint32_t tid;            /* its stream's thread in the recording */
		uint64_t retired;        /* its instructions in the trace */
		uint64_t ran;            /* all it started, traced or not (0: plugin too old to say) */
	} per_vcpu[VT_TCG_STATS_VCPUS];
} VtTcgStats;

/* The plugin's meta file (for callers that want the counts only). */
gboolean vt_tcg_read_meta(const char *in_dir, VtTcgStats *st, GError **error);
gboolean vt_tcg_convert(const VtTcgConvertOptions *o, VtTcgStats *st, GError **error);

G_END_DECLS

#endif
