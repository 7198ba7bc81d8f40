/* synth.h - synthetic host-side Intel PT recordings of KVM guests.
 *
 * Generates, with libipt's packet encoder, the trace that Intel PT in
 * system-wide (pt_mode=0) host tracing would emit for a QEMU/KVM guest:
 * host KVM code, VM entries (PIP NR=1, MODE.Exec, TIP), guest kernel code,
 * VM exits (FUP, PIP NR=0, TIP), VMPTRLD (VMCS) on vCPU switches, PSB+
 * with TSC/TMA/CBR/PIP/VMCS/MODE/FUP, MTC and CYC.  Guest TSC packets carry
 * the VM's TSC offset.  The result is a perf.data that perf accepts plus a
 * ground truth.  Same configuration -> same bytes.
 */
#ifndef VT_SYNTH_H
#define VT_SYNTH_H

#include <glib.h>
#include <signal.h>
#include <stdint.h>

G_BEGIN_DECLS

#define VT_SYNTH_MAX_VMS 16
#define VT_SYNTH_MAX_VCPUS 256
#define VT_SYNTH_MAX_USER 4           /* --guest-user files */

typedef struct VtSynthConfig {
	guint nvcpus;              /* total vCPUs (over all VMs) */
	guint nvms;                /* VMs; vCPUs are split into contiguous blocks */
	gboolean per_cpu;          /* per-CPU AUX queues (else per-thread) */
	guint ncpus;               /* host CPUs traced in per-CPU mode (<= nvcpus) */
	gboolean cyc;
	guint cyc_thresh;          /* 0..15: a CYC only after 2^(n-1) cycles (IA32_RTIT_CTL.CycThresh; 0: every time) */
	gboolean mtc;              /* MTC packets (config bit mtc) */
	guint mtc_period;          /* 0..15: MTC every 2^n CTC ticks */
	guint psb_period;          /* 0..15: PSB every 2K << n bytes */
	guint32 tsc_ctc_n, tsc_ctc_d;   /* CPUID.15H EBX / EAX */
	guint64 size;              /* total AUX bytes, all queues */
	guint64 buffer_size;       /* bytes per AUXTRACE record */
	guint64 seed;
	gboolean timeless;         /* tsc=0, mtc=0 */
	gboolean cbr_vary;         /* the core:bus ratio in PSB+ changes (30, 30, 24, 36, ...) */
	guint64 vm_offset[VT_SYNTH_MAX_VMS];   /* VMX TSC offset per VM */
	gboolean have_offset[VT_SYNTH_MAX_VMS];
	/* VMX TSC offset of one vCPU (global index), instead of its VM's:
	 * the vCPUs of a VM with different offsets (each VMCS has its own) */
	guint64 vcpu_offset[VT_SYNTH_MAX_VCPUS];
	gboolean have_vcpu_offset[VT_SYNTH_MAX_VCPUS];
	/* Offset change: VM `change_vm` switches to `change_offset` at
	 * `change_at` (fraction 0..1 of the recording). */
	gboolean have_change;
	guint change_vm;
	guint64 change_offset;
	double change_at;
	guint guest_percent;       /* share of time spent in guests (0..100) */
	/* Packet mix of the random flow (not with real code): */
	guint tip_percent;         /* flow steps that are a TIP (else a TNT), 0..100 (default 25) */
	guint host_steps;          /* mean host flow steps per VM exit (0: the default, 20..220) */
	guint user_exit_percent;   /* VM exits handled in user space (QEMU): TIP.PGD ... TIP.PGE */
	/* Lost data (the decode-health counts of vmtrace report; 0: none):
	 * with real code, an OVF + FUP (as Intel PT writes when its internal
	 * buffer overflowed) after every ovf_every-th flow decision of a
	 * queue with a vCPU loaded; every aux_truncated_every-th AUXTRACE
	 * chunk of a queue followed by a PERF_RECORD_AUX flagged TRUNCATED
	 * (the AUX area was full).  The truth counts both per vCPU. */
	guint ovf_every;
	guint aux_truncated_every;
	/* With real code: call depths stay near call_depth (0: unbounded) -
	 * at that depth a walk heads for returns only, it avoids calls of code
	 * that never returns, and the guest's call stack survives injected
	 * events (their handlers return to the code they interrupted) - so
	 * call traces' indentation stays shallow. */
	guint call_depth;
	/* TSC scaling per VM: guest = (host * ratio >> frac) + offset; ratio 0: none */
	guint64 vm_ratio[VT_SYNTH_MAX_VMS];
	guint vm_frac[VT_SYNTH_MAX_VMS];
	/* Identity of the simulated processes (0: defaults 4000 + 100 * vm,
	 * pid + 10 + i, TSC 0x100000000000) - the synthetic capture source of
	 * `vmtrace record` sets them to the real QEMU's pid, threads and TSC. */
	guint64 t0;
	guint32 qemu_pid[VT_SYNTH_MAX_VMS];
	guint32 tids[VT_SYNTH_MAX_VCPUS];
	/* Real code (kcore_dir-style directories: kcore + kallsyms [+ modules]):
	 * with both set, the flow walks the host's and the guest's kernel code
	 * (src/synth/code.h) instead of random packets, the recording is a
	 * directory with the host's kcore_dir and a guest kernel MMAP (what
	 * `perf script --guestkallsyms GUEST/kallsyms` needs), and `branches`
	 * (if set) receives every branch taken: the ground truth of decoding. */
	const char *host_code, *guest_code;
	const char *branches;
	/* Guest user space (with real code): guest_user_percent of the VM
	 * entries go to the user code of the ELF file guest_user (its first
	 * executable PT_LOAD mapped at guest_user_start, 0: its link address;
	 * PIP with the process's own guest CR3), one process per VM; the branch
	 * list says where the file was mapped ("# guest-user PATH START LEN
	 * PGOFF"): what the guest's MMAP2 must say.  With n files vCPU v runs
	 * file v mod n, each file a process of its own (its own guest CR3), a
	 * "# guest-user" line each, in order. */
	const char *guest_user[VT_SYNTH_MAX_USER];   /* NULL-ended */
	guint64 guest_user_start[VT_SYNTH_MAX_USER];
	guint guest_user_percent;
	/* When set and non-zero (a signal handler's flag), generation stops
	 * with an error and writes nothing. */
	const volatile sig_atomic_t *stop;
} VtSynthConfig;

void vt_synth_config_init(VtSynthConfig *cfg);
/* Checks ranges and consistency; error names the bad option. */
gboolean vt_synth_config_check(const VtSynthConfig *cfg, GError **error);

/* VMCS payload (VMCS address >> 12) used for vCPU `v`. */
guint64 vt_synth_vmcs(guint v);
/* Guest TSC offset of VM `vm` (configured or derived from the seed). */
guint64 vt_synth_vm_offset(const VtSynthConfig *cfg, guint vm);
guint vt_synth_vm_of_vcpu(const VtSynthConfig *cfg, guint v);
/* Guest TSC offset of vCPU `v` (global index): its own, else its VM's. */
guint64 vt_synth_vcpu_offset(const VtSynthConfig *cfg, guint v);
/* The global index of vCPU `idx` of VM `vm` (-1: none). */
gint vt_synth_vcpu_of(const VtSynthConfig *cfg, guint vm, guint idx);

typedef struct {
	guint64 aux_bytes;
	guint64 records;
	guint64 guest_tsc_packets;
	guint64 host_tsc_packets;
	guint64 vm_entries;
	guint nqueues;
} VtSynthStats;

/* Write the perf.data to `out` (a file; a directory DIR/data when
 * `as_dir`) and the ground truth JSON to `truth` (NULL: none). */
gboolean vt_synth_generate(const VtSynthConfig *cfg, const char *out, gboolean as_dir,
			   const char *truth, VtSynthStats *stats, GError **error);

#define VT_SYNTH_ERROR (vt_synth_error_quark())
GQuark vt_synth_error_quark(void);

G_END_DECLS

#endif
