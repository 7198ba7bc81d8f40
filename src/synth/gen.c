/* gen.c - synthetic Intel PT recordings of KVM guests (see synth.h). */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <intel-pt.h>
#include <glib/gstdio.h>

#include "src/cli/json.h"
#include "src/fs/output.h"
#include "src/perf/perf-data.h"
#include "src/perf/perf-encode.h"
#include "src/synth/code.h"
#include "src/synth/synth.h"

G_DEFINE_QUARK(vt-synth-error-quark, vt_synth_error)

#define SEVEN_BYTES 0x00ffffffffffffffULL
#define PT_PMU_TYPE 8
#define CBR_RATIO 30                 /* 3.0 GHz at a 100 MHz bus: CYC == TSC ticks */
#define TIME_SHIFT 10
#define TIME_MULT 341                /* perf time ~ TSC / 3 (a 3 GHz TSC) */
#define HOST_CR3 0x1000000ULL
#define HOST_IP_BASE 0xffffffffc0a00000ULL
#define GUEST_IP_BASE 0xffffffff81000000ULL
#define T0 0x100000000000ULL         /* host TSC at the start of the recording */

void vt_synth_config_init(VtSynthConfig *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->nvcpus = 4;
	cfg->nvms = 1;
	cfg->per_cpu = FALSE;
	cfg->ncpus = 0;              /* 0: min(nvcpus, 4) */
	cfg->cyc = FALSE;
	cfg->mtc = TRUE;
	cfg->mtc_period = 3;
	cfg->psb_period = 3;
	cfg->tsc_ctc_n = 168;
	cfg->tsc_ctc_d = 2;
	cfg->size = 4 << 20;
	cfg->buffer_size = 256 << 10;
	cfg->seed = 1;
	cfg->guest_percent = 60;
	cfg->guest_user_percent = 50;
	cfg->tip_percent = 25;
}

guint64 vt_synth_vmcs(guint v)
{
	return 0x12340ULL + 0x111ULL * v;
}

guint vt_synth_vm_of_vcpu(const VtSynthConfig *cfg, guint v)
{
	guint per = (cfg->nvcpus + cfg->nvms - 1) / cfg->nvms;

	return MIN(v / per, cfg->nvms - 1);
}

guint64 vt_synth_vm_offset(const VtSynthConfig *cfg, guint vm)
{
	guint64 x;

	if (vm < VT_SYNTH_MAX_VMS && cfg->have_offset[vm])
		return cfg->vm_offset[vm];
	/* A negative offset (guest booted after the host), different per VM
	 * and per seed, as KVM gives: -(host TSC at VM creation). */
	x = (cfg->seed * 0x9e3779b97f4a7c15ULL + (vm + 1) * 0x2545f4914f6cdd1dULL) >> 24;
	return -(0x10000000000ULL + (x & 0xffffffffffULL));
}

guint64 vt_synth_vcpu_offset(const VtSynthConfig *cfg, guint v)
{
	if (v < VT_SYNTH_MAX_VCPUS && cfg->have_vcpu_offset[v])
		return cfg->vcpu_offset[v];
	return vt_synth_vm_offset(cfg, vt_synth_vm_of_vcpu(cfg, v));
}

gint vt_synth_vcpu_of(const VtSynthConfig *cfg, guint vm, guint idx)
{
	for (guint v = 0; v < cfg->nvcpus; v++)
		if (vt_synth_vm_of_vcpu(cfg, v) == vm && idx-- == 0)
			return (gint)v;
	return -1;
}

gboolean vt_synth_config_check(const VtSynthConfig *cfg, GError **error)
{
#define BAD(...) do { g_set_error(error, VT_SYNTH_ERROR, 0, __VA_ARGS__); return FALSE; } while (0)
	if (cfg->nvcpus < 1 || cfg->nvcpus > VT_SYNTH_MAX_VCPUS)
		BAD("--vcpus must be 1..%d (got %u)", VT_SYNTH_MAX_VCPUS, cfg->nvcpus);
	if (cfg->nvms < 1 || cfg->nvms > VT_SYNTH_MAX_VMS || cfg->nvms > cfg->nvcpus)
		BAD("--vms must be 1..%d and at most --vcpus (got %u)", VT_SYNTH_MAX_VMS, cfg->nvms);
	if (cfg->per_cpu && cfg->ncpus > cfg->nvcpus)
		BAD("--cpus (%u) must not exceed --vcpus (%u)", cfg->ncpus, cfg->nvcpus);
	if (cfg->t0 && (cfg->t0 < (1ULL << 20) || cfg->t0 >= (1ULL << 56) - (1ULL << 48)))
		BAD("--tsc-start must be 2^20..2^56-2^48 (TSC packets hold 7 bytes; got %#" G_GINT64_MODIFIER "x)",
		    (guint64)cfg->t0);
	if (cfg->cyc_thresh > 15 || (cfg->cyc_thresh && !cfg->cyc))
		BAD("--cyc-thresh must be 0..15 and needs --cyc (got %u)", cfg->cyc_thresh);
	if (cfg->mtc_period > 15)
		BAD("--mtc-period must be 0..15 (got %u)", cfg->mtc_period);
	if (cfg->psb_period > 15)
		BAD("--psb-period must be 0..15 (got %u)", cfg->psb_period);
	if (!cfg->tsc_ctc_d || !cfg->tsc_ctc_n)
		BAD("--tsc-ctc-ratio needs a non-zero numerator and denominator");
	if (cfg->tsc_ctc_n / cfg->tsc_ctc_d > 511 || cfg->tsc_ctc_n < cfg->tsc_ctc_d)
		BAD("--tsc-ctc-ratio must be between 1 and 511 TSC ticks per CTC tick");
	if (cfg->size < 4096 || cfg->size > (64ULL << 30))
		BAD("--size must be 4 KiB..64 GiB");
	if (cfg->buffer_size < 4096 || cfg->buffer_size > (1ULL << 30))
		BAD("--buffer-size must be 4 KiB..1 GiB");
	if (cfg->guest_percent > 95)
		BAD("--guest-percent must be 0..95");
	if (cfg->tip_percent > 100 || cfg->user_exit_percent > 100)
		BAD("--tip-percent and --user-exit-percent must be 0..100");
	if (cfg->host_steps > 100000)
		BAD("--host-steps must be 0..100000");
	if (cfg->call_depth && !cfg->host_code)
		BAD("--call-depth needs real code (--host-code)");
	if (cfg->call_depth > 100000)
		BAD("--call-depth must be 0..100000");
	if (cfg->ovf_every && !cfg->host_code)
		BAD("--ovf-every needs real code (--host-code)");
	if (cfg->guest_user[0] && !cfg->host_code)
		BAD("--guest-user needs real code (--host-code, --guest-code)");
	if (cfg->guest_user_percent > 100)
		BAD("--guest-user-percent must be 0..100");
	if (cfg->have_change && (cfg->change_vm >= cfg->nvms || cfg->change_at <= 0 || cfg->change_at >= 1))
		BAD("--offset-change needs a VM index < --vms and a fraction in (0,1)");
	return TRUE;
#undef BAD
}

/* ------------------------------------------------------------------ */

/* A guest TSC payload at `pos` in a chunk and the host TSC it stands for. */
typedef struct {
	gsize pos;
	guint64 host;
} Fix;

typedef struct {
	guint idx;
	guint32 cpu, tid;            /* AUXTRACE cpu/tid (-1 when n/a) */
	guint64 pt_id, dummy_id;
	GRand *rng;
	struct pt_encoder *enc;
	guint8 *buf;
	gsize cap, len;
	guint64 t;                   /* host TSC now */
	guint64 ctc_prev;            /* CTC at the previous packet */
	guint64 since_cyc;           /* TSC ticks since the last CYC */
	guint64 cyc_rem;             /* cycles' remainder (ticks x ratio) not yet in a CYC */
	guint8 cbr;                  /* core:bus ratio now (CBR_RATIO: cycles = ticks) */
	guint64 last_ip;
	gboolean have_last_ip;
	guint64 since_psb;
	guint npsb;                      /* PSB+ written (--cbr-vary) */
	guint64 psb_bytes;
	gboolean in_guest;
	gint vcpu;                   /* vCPU loaded on this queue, -1 none */
	guint64 ip_host, ip_guest;
	guint64 aux_offset;
	guint64 bytes, target;
	guint64 guest_tsc, host_tsc, entries;
	guint64 slice;
	gboolean done;
	/* real code (cfg->host_code): the host's walk on this CPU, TNT bits
	 * not yet written, a VMPTRLD to report */
	VtSynthCtx host;
	guint32 tnt_bits;
	guint tnt_n;
	gboolean vmcs_dirty;
	guint host_n, host_budget, guest_left;
	guint since_ovf;             /* flow decisions since the last OVF */
	guint64 chunks;              /* AUXTRACE chunks written */
	/* sideband generated while producing the current chunk */
	GByteArray *sb;              /* whole records */
	GArray *fix;                 /* Fix: guest TSC payloads of the current chunk */
	guint64 insns;               /* real code: instructions this queue ran (host and guest) */
} Queue;

typedef struct {
	const VtSynthConfig *cfg;
	guint ncpus;
	guint64 t_end_est;           /* estimated end time, for the offset change */
	guint64 slice_ticks;         /* per-CPU scheduling slice */
	guint32 qemu_pid[VT_SYNTH_MAX_VMS];
	guint64 vcpu_guest_tsc[VT_SYNTH_MAX_VCPUS];
	guint64 vcpu_ovf[VT_SYNTH_MAX_VCPUS];           /* OVF packets written while it was loaded */
	guint64 vcpu_aux_truncated[VT_SYNTH_MAX_VCPUS]; /* PERF_RECORD_AUX TRUNCATED of its thread */
	guint vcpu_owner[VT_SYNTH_MAX_VCPUS];    /* per-CPU real code: queue index + 1 whose trace
						  * has its guest walk now, 0 none */
	guint64 vcpu_out[VT_SYNTH_MAX_VCPUS];    /* ... host TSC its owner switched it out */
	guint64 t_change;            /* host TSC of the offset change (0: not yet) */
	guint64 t0;                  /* host TSC at the start (cfg->t0 or T0) */
	GChecksum *corrected;        /* SHA-256 of the AUX data with host time in every TSC */
	GError *err;
	/* real code */
	VtDecodeImage *host_img, *guest_img;
	VtSynthCode *hc, *gc;
	VtSynthCtx guest[VT_SYNTH_MAX_VCPUS];  /* each vCPU's walk */
	/* --guest-user: each vCPU's walk of its user ELF (vCPU v: file v mod
	 * nuser, a process per file and VM) and whether the vCPU runs it
	 * (chosen at every VM entry) */
	guint nuser;
	VtSynthCode *uc[VT_SYNTH_MAX_USER];
	VtDecodeImage *uimg[VT_SYNTH_MAX_USER];    /* the guest image's */
	VtSynthCtx user[VT_SYNTH_MAX_VCPUS];
	gboolean in_user[VT_SYNTH_MAX_VCPUS];
	guint64 user_start[VT_SYNTH_MAX_USER], user_len[VT_SYNTH_MAX_USER], user_pgoff[VT_SYNTH_MAX_USER];
	guint64 vmexit_ip;           /* host RIP after a VM exit: vmx_vmexit */
	guint64 host_start;          /* where the host's walk starts: vmx_vcpu_run, else vmx_vmexit */
	guint64 host_home;           /* ... and restarts: where the exit handler it calls returns to */
	FILE *branches;
	VtFsOutput *branches_out;    /* where the branch list is built (src/fs/output.h) */
	guint64 nbranches;
} Gen;

static gboolean code_mode(const Gen *g)
{
	return g->hc != NULL;
}

static guint32 vcpu_tid(const Gen *g, guint v)
{
	guint vm = vt_synth_vm_of_vcpu(g->cfg, v);
	guint first = 0;

	if (g->cfg->tids[v])
		return g->cfg->tids[v];
	while (first < v && vt_synth_vm_of_vcpu(g->cfg, first) != vm)
		first++;
	return g->qemu_pid[vm] + 10 + (v - first);
}

static guint vcpu_index_in_vm(const Gen *g, guint v)
{
	guint vm = vt_synth_vm_of_vcpu(g->cfg, v), first = 0;

	while (first < v && vt_synth_vm_of_vcpu(g->cfg, first) != vm)
		first++;
	return v - first;
}

/* vCPU v's offset at host TSC t: after an offset change of its VM, the
 * new one (the guest wrote its TSC: every vCPU of the VM) */
static guint64 offset_at(const Gen *g, guint v, guint64 t)
{
	const VtSynthConfig *c = g->cfg;

	if (c->have_change && vt_synth_vm_of_vcpu(c, v) == c->change_vm && g->t_change && t >= g->t_change)
		return c->change_offset;
	return vt_synth_vcpu_offset(c, v);
}

/* The guest TSC vCPU v reads at host TSC t (VMX offsetting and scaling). */
static guint64 guest_tsc(const Gen *g, guint v, guint64 t)
{
	const VtSynthConfig *c = g->cfg;
	guint vm = vt_synth_vm_of_vcpu(c, v);
	guint64 scaled = t;

	if (c->vm_ratio[vm])
		scaled = (guint64)(((unsigned __int128)t * c->vm_ratio[vm]) >> c->vm_frac[vm]);
	return scaled + offset_at(g, v, t);
}

static guint64 ctc_of(const Gen *g, guint64 t)
{
	/* CTC = floor(t * d / n), computed without overflow */
	const VtSynthConfig *c = g->cfg;
	unsigned __int128 x = (unsigned __int128)t * c->tsc_ctc_d;

	return (guint64)(x / c->tsc_ctc_n);
}

static guint64 ctc_to_tsc(const Gen *g, guint64 ctc)
{
	const VtSynthConfig *c = g->cfg;
	unsigned __int128 x = (unsigned __int128)ctc * c->tsc_ctc_n;

	return (guint64)(x / c->tsc_ctc_d);
}

static gboolean emit(Gen *g, Queue *q, struct pt_packet *p);

/* The TNT bits gathered so far as one TNT-8 (oldest bit most significant). */
static void put_cyc(Gen *g, Queue *q);

/* The TNT bits gathered so far as one TNT-8 (oldest bit most significant),
 * after the CYC that times it (TNT is CYC-eligible). */
static void flush_tnt(Gen *g, Queue *q)
{
	struct pt_packet p = { .type = ppt_tnt_8 };

	if (!q->tnt_n)
		return;
	p.payload.tnt.bit_size = q->tnt_n;
	p.payload.tnt.payload = q->tnt_bits;
	q->tnt_n = 0;
	q->tnt_bits = 0;
	put_cyc(g, q);
	emit(g, q, &p);
}

static gboolean emit(Gen *g, Queue *q, struct pt_packet *p)
{
	int n;

	if (p->type != ppt_tnt_8 && q->tnt_n)
		flush_tnt(g, q);
	n = pt_enc_next(q->enc, p);

	if (n < 0) {
		if (!g->err)
			g_set_error(&g->err, VT_SYNTH_ERROR, 0, "libipt encoder: %s (packet type %d)",
				    pt_errstr(pt_errcode(n)), p->type);
		return FALSE;
	}
	q->len += n;
	q->since_psb += n;
	q->bytes += n;
	return TRUE;
}

static void pkt_simple(Gen *g, Queue *q, enum pt_packet_type type)
{
	struct pt_packet p = { .type = type };

	emit(g, q, &p);
}

/* Emit an IP packet with the smallest compression that the last-IP state allows. */
static void pkt_ip(Gen *g, Queue *q, enum pt_packet_type type, guint64 ip)
{
	struct pt_packet p = { .type = type };
	guint64 top = ip >> 47;

	if (q->have_last_ip && (ip >> 16) == (q->last_ip >> 16)) {
		p.payload.ip.ipc = pt_ipc_update_16;
		p.payload.ip.ip = ip & 0xffff;
	} else if (q->have_last_ip && (ip >> 32) == (q->last_ip >> 32)) {
		p.payload.ip.ipc = pt_ipc_update_32;
		p.payload.ip.ip = ip & 0xffffffff;
	} else if (top == 0 || top == 0x1ffff) {
		p.payload.ip.ipc = pt_ipc_sext_48;
		p.payload.ip.ip = ip & 0xffffffffffffULL;
	} else {
		p.payload.ip.ipc = pt_ipc_full;
		p.payload.ip.ip = ip;
	}
	q->last_ip = ip;
	q->have_last_ip = TRUE;
	emit(g, q, &p);
}

static void pkt_pip(Gen *g, Queue *q, guint64 cr3, gboolean nr)
{
	struct pt_packet p = { .type = ppt_pip };

	p.payload.pip.cr3 = cr3;
	p.payload.pip.nr = nr;
	emit(g, q, &p);
}

static void pkt_vmcs(Gen *g, Queue *q, guint64 payload)
{
	struct pt_packet p = { .type = ppt_vmcs };

	p.payload.vmcs.base = payload << 12;
	emit(g, q, &p);
}

static void pkt_mode64(Gen *g, Queue *q)
{
	struct pt_packet p = { .type = ppt_mode };

	p.payload.mode.leaf = pt_mol_exec;
	p.payload.mode.bits.exec.csl = 1;
	p.payload.mode.bits.exec.csd = 0;
	emit(g, q, &p);
}

static guint64 guest_cr3(guint vm)
{
	return 0x1a2b000ULL + ((guint64)vm << 20);
}

/* The guest CR3 of VM vm's user process of file `file` (--guest-user) */
static guint64 user_cr3(guint vm, guint file)
{
	return 0x3c4d000ULL + ((guint64)vm << 20) + ((guint64)file << 12);
}

static guint64 cur_cr3(const Gen *g, const Queue *q)
{
	guint vm;

	if (!q->in_guest)
		return HOST_CR3;
	vm = vt_synth_vm_of_vcpu(g->cfg, q->vcpu);
	return g->in_user[q->vcpu] ? user_cr3(vm, (guint)q->vcpu % g->nuser) : guest_cr3(vm);
}

/* The guest walk of vCPU v: its user process's or its kernel's. */
static VtSynthCtx *guest_ctx(Gen *g, gint v)
{
	return g->in_user[v] ? &g->user[v] : &g->guest[v];
}

/* With cyc: a CYC for the core cycles since the last one (the TSC ticks
 * scaled by the current core:bus ratio against the nominal one), written
 * right before the packet it times: a TNT, TIP, MTC, ... (as hardware does:
 * every CYC-eligible packet gets one when cycles passed, with a CycThresh
 * only once 2^(thresh-1) of them did - then a CYC can span MTCs). */
static void put_cyc(Gen *g, Queue *q)
{
	struct pt_packet p = { .type = ppt_cyc };
	guint64 cyc;

	if (!g->cfg->cyc || !q->since_cyc)
		return;
	cyc = (q->since_cyc * q->cbr + q->cyc_rem) / CBR_RATIO;
	if (g->cfg->cyc_thresh && cyc < (1u << (g->cfg->cyc_thresh - 1)))
		return;
	q->cyc_rem = (q->since_cyc * q->cbr + q->cyc_rem) % CBR_RATIO;
	q->since_cyc = 0;
	if (!cyc)
		return;
	p.payload.cyc.value = cyc;
	emit(g, q, &p);
}

/* The first TSC tick at which the CTC reads `ctc`. */
static guint64 ctc_edge(const Gen *g, guint64 ctc)
{
	const VtSynthConfig *c = g->cfg;
	unsigned __int128 x = (unsigned __int128)ctc * c->tsc_ctc_n;

	return (guint64)((x + c->tsc_ctc_d - 1) / c->tsc_ctc_d);
}

/* Advance time by `dt` ticks; emit an MTC at every CTC boundary crossed,
 * at its time (the TNT bits decided before it and, with cyc, a CYC up to
 * it first), and with cyc_now a CYC for the cycles after the last one. */
static void advance(Gen *g, Queue *q, guint64 dt, gboolean cyc_now)
{
	const VtSynthConfig *c = g->cfg;
	guint64 end = q->t + dt;

	if (!c->timeless && c->mtc) {
		guint64 b = (q->ctc_prev >> c->mtc_period) + 1;
		guint64 e = ctc_of(g, end) >> c->mtc_period;

		for (; b <= e; b++) {
			struct pt_packet p = { .type = ppt_mtc };
			guint64 tb = ctc_edge(g, b << c->mtc_period);

			flush_tnt(g, q);
			q->since_cyc += tb - q->t;
			q->t = tb;
			put_cyc(g, q);
			p.payload.mtc.ctc = (guint8)b;
			emit(g, q, &p);
		}
		q->ctc_prev = ctc_of(g, end);
	}
	q->since_cyc += end - q->t;
	q->t = end;
	if (cyc_now)
		put_cyc(g, q);
}

static void psb_plus(Gen *g, Queue *q)
{
	static const guint8 cbr_cycle[] = { CBR_RATIO, CBR_RATIO, 24, 36 };
	const VtSynthConfig *c = g->cfg;
	struct pt_packet p;

	if (code_mode(g)) {
		/* PSB+ restates the IP the walk is at; compressed RETs never
		 * reach across a PSB (perf clears its stack there) */
		flush_tnt(g, q);
		if (g->branches)      /* what ran before it (a flow end's) */
			fprintf(g->branches, "# psb %u %" G_GUINT64_FORMAT "\n", q->idx, q->insns);
		q->ip_host = q->host.ip;
		vt_synth_ctx_flush_comp(&q->host);
		if (q->vcpu >= 0) {
			q->ip_guest = guest_ctx(g, q->vcpu)->ip;
			vt_synth_ctx_flush_comp(guest_ctx(g, q->vcpu));
		}
	}
	put_cyc(g, q);               /* the cycles before the PSB, at the old ratio */
	pkt_simple(g, q, ppt_psb);
	q->have_last_ip = FALSE;
	if (!c->timeless) {
		guint64 tsc = q->t;

		if (q->in_guest) {
			tsc = guest_tsc(g, q->vcpu, q->t) & SEVEN_BYTES;
			/* remember where, and what a correction must write there */
			g_array_append_val(q->fix, ((Fix){ q->len + 1, q->t & SEVEN_BYTES }));
			q->guest_tsc++;
			g->vcpu_guest_tsc[q->vcpu]++;
		} else {
			q->host_tsc++;
		}
		memset(&p, 0, sizeof(p));
		p.type = ppt_tsc;
		p.payload.tsc.tsc = tsc & SEVEN_BYTES;
		emit(g, q, &p);
		if (c->mtc) {
			guint64 ctc = ctc_of(g, q->t);

			memset(&p, 0, sizeof(p));
			p.type = ppt_tma;
			p.payload.tma.ctc = (guint16)ctc;
			p.payload.tma.fc = (guint16)(q->t - ctc_to_tsc(g, ctc));
			emit(g, q, &p);
		}
	}
	memset(&p, 0, sizeof(p));
	p.type = ppt_cbr;
	p.payload.cbr.ratio = c->cbr_vary ? cbr_cycle[q->npsb++ % G_N_ELEMENTS(cbr_cycle)] : CBR_RATIO;
	q->cbr = p.payload.cbr.ratio;
	emit(g, q, &p);
	if (q->vcpu >= 0)
		pkt_vmcs(g, q, vt_synth_vmcs(q->vcpu));
	pkt_pip(g, q, cur_cr3(g, q), q->in_guest);
	pkt_mode64(g, q);
	pkt_ip(g, q, ppt_fup, q->in_guest ? q->ip_guest : q->ip_host);
	pkt_simple(g, q, ppt_psbend);
	q->since_psb = 0;
}

/* Whether a flow step with random bits r is a TIP (else a TNT); the
 * default 25% keeps the bytes of earlier versions' recordings. */
static gboolean is_tip(const VtSynthConfig *c, guint32 r)
{
	return c->tip_percent == 25 ? r % 4 == 0 : r % 100 < c->tip_percent;
}

/* One step of code: some cycles, then a TNT or a TIP. */
static void step(Gen *g, Queue *q)
{
	guint32 r = g_rand_int(q->rng);
	guint64 *ip = q->in_guest ? &q->ip_guest : &q->ip_host;
	guint64 base = q->in_guest ? GUEST_IP_BASE : HOST_IP_BASE;

	advance(g, q, 8 + (r & 0x3f), TRUE);
	if (!is_tip(g->cfg, r >> 8)) {
		struct pt_packet p = { .type = ppt_tnt_8 };

		p.payload.tnt.bit_size = 1 + (r >> 12) % 6;
		p.payload.tnt.payload = (r >> 16) & ((1u << p.payload.tnt.bit_size) - 1);
		emit(g, q, &p);
	} else {
		/* mostly near jumps (16-bit update), sometimes far (32-bit) */
		if ((r >> 16) % 8)
			*ip = (*ip & ~0xffffULL) | ((r >> 20) & 0xfff0);
		else
			*ip = base + ((guint64)((r >> 12) & 0xfff) << 12);
		pkt_ip(g, q, ppt_tip, *ip);
	}
	if (q->since_psb >= q->psb_bytes)
		psb_plus(g, q);
}

static guint64 perf_time(guint64 tsc)
{
	VtPerfTimeConv tc = { .time_shift = TIME_SHIFT, .time_mult = TIME_MULT, .time_zero = 0 };

	return vt_perf_tsc_to_time(tsc, &tc);
}

/* The sample_id trailer, its time from the TSC. */
static void put_sample_id(GByteArray *a, guint32 pid, guint32 tid, guint64 tsc, guint32 cpu, guint64 id)
{
	vt_perf_put_sample_id(a, pid, tid, perf_time(tsc), cpu, id);
}

static void rec_comm(GByteArray *a, guint32 pid, guint32 tid, const char *comm, guint64 tsc, guint64 id)
{
	gsize s = vt_perf_rec_begin(a);

	vt_perf_put_u32(a, pid);
	vt_perf_put_u32(a, tid);
	vt_perf_put_cstr(a, comm, 15);
	put_sample_id(a, pid, tid, tsc, 0, id);
	vt_perf_rec_end(a, s, PERF_RECORD_COMM, 0);
}

static void rec_itrace_start(GByteArray *a, guint32 pid, guint32 tid, guint64 tsc, guint32 cpu, guint64 id)
{
	gsize s = vt_perf_rec_begin(a);

	vt_perf_put_u32(a, pid);
	vt_perf_put_u32(a, tid);
	put_sample_id(a, pid, tid, tsc, cpu, id);
	vt_perf_rec_end(a, s, PERF_RECORD_ITRACE_START, 0);
}

/* PERF_RECORD_MMAP of a kernel: "[kernel.kallsyms]_text" (host, pid -1)
 * or "[guest.kernel.kallsyms]_text" (guest, pid 0), pgoff = _text, as
 * perf record writes them; perf attaches kcore/kallsyms to these maps. */
static void rec_mmap(GByteArray *a, gboolean guest, const char *name, guint64 start, guint64 len, guint64 pgoff,
		     guint64 tsc, guint64 id)
{
	gsize s = vt_perf_rec_begin(a);
	guint32 pid = guest ? 0 : (guint32)-1;

	vt_perf_put_u32(a, pid);
	vt_perf_put_u32(a, 0);
	vt_perf_put_u64(a, start);
	vt_perf_put_u64(a, len);
	vt_perf_put_u64(a, pgoff);
	vt_perf_put_cstr(a, name, G_MAXSIZE);
	put_sample_id(a, pid, 0, tsc, 0, id);
	vt_perf_rec_end(a, s, PERF_RECORD_MMAP, guest ? PERF_RECORD_MISC_GUEST_KERNEL : PERF_RECORD_MISC_KERNEL);
}

/* The kernel's MMAP ("[kernel.kallsyms]_text", pgoff _text) and one per
 * module of DIR/modules, as perf record writes them; perf attaches
 * kcore_dir's code (host) or --guestkallsyms's kcore (guest) to these maps. */
static void rec_kernel_mmaps(GByteArray *a, gboolean guest, const char *dir, guint64 text, guint64 tsc, guint64 id)
{
	g_autofree char *path = g_build_filename(dir, "modules", NULL);
	g_autofree char *mods = NULL;
	guint64 end = ~0ULL;
	GByteArray *a_mod = g_byte_array_new();

	if (!g_file_get_contents(path, &mods, NULL, NULL))
		mods = g_strdup("");
	for (char *l = mods, *nl; l && *l; l = nl ? nl + 1 : NULL) {
		char name[64];
		guint64 size, addr;

		nl = strchr(l, '\n');
		if (nl)
			*nl = '\0';
		/* "kvm_intel 4096 0 - Live 0xffffffffc0a00000" */
		if (sscanf(l, "%63s %" G_GUINT64_FORMAT " %*s %*s %*s %" G_GINT64_MODIFIER "x", name, &size, &addr) == 3) {
			g_autofree char *file = g_strdup_printf("/lib/modules/vmtrace-synth/%s.ko", name);

			rec_mmap(a_mod, guest, file, addr, size, 0, tsc, id);
			if (addr > text)
				end = MIN(end, addr);
		}
	}
	/* the kernel map ends where the first module starts (as perf's does) */
	rec_mmap(a, guest, guest ? "[guest.kernel.kallsyms]_text" : "[kernel.kallsyms]_text", text, end - text,
		 text, tsc, id);
	g_byte_array_append(a, a_mod->data, a_mod->len);
	g_byte_array_unref(a_mod);
}

static void rec_switch(GByteArray *a, gboolean out, guint32 pid, guint32 tid, guint32 np_pid, guint32 np_tid,
		       guint64 tsc, guint32 cpu, guint64 id)
{
	gsize s = vt_perf_rec_begin(a);

	vt_perf_put_u32(a, np_pid);
	vt_perf_put_u32(a, np_tid);
	put_sample_id(a, pid, tid, tsc, cpu, id);
	vt_perf_rec_end(a, s, PERF_RECORD_SWITCH_CPU_WIDE, out ? PERF_RECORD_MISC_SWITCH_OUT : 0);
}

static guint64 bytes_per_tick_inv(void)
{
	/* Rough ticks per trace byte of this model (for the offset-change
	 * time estimate only). */
	return 20;
}

/* Per-CPU real code: a vCPU's guest walk (g->guest[v]) goes on in the
 * trace of one CPU at a time.  The queues' chunks are made in turns, each
 * reaching past where the others are: a CPU whose slice boundary comes
 * earlier in its chunk would walk the vCPU while the CPU that ran it
 * before still does (in its next chunk); the two traces would each have
 * half of one walk.  So a CPU loads a vCPU only once the other CPU has
 * switched it out, and after that in time (the thread runs on one CPU at
 * a time: perf goes by it); until then it keeps its own (fill_chunk). */
static void vcpu_release(Gen *g, const Queue *q)
{
	if (q->vcpu >= 0 && g->vcpu_owner[q->vcpu] == q->idx + 1) {
		g->vcpu_owner[q->vcpu] = 0;
		g->vcpu_out[q->vcpu] = q->t;
	}
}

static gboolean vcpu_free(const Gen *g, const Queue *q, guint v)
{
	return g->vcpu_owner[v] == q->idx + 1 || (!g->vcpu_owner[v] && g->vcpu_out[v] < q->t);
}

static void load_vcpu(Gen *g, Queue *q, gint v)
{
	const VtSynthConfig *c = g->cfg;
	guint32 old = q->vcpu >= 0 ? vcpu_tid(g, q->vcpu) : 0;
	guint32 oldpid = q->vcpu >= 0 ? g->qemu_pid[vt_synth_vm_of_vcpu(c, q->vcpu)] : 0;
	guint32 nt = vcpu_tid(g, v), np = g->qemu_pid[vt_synth_vm_of_vcpu(c, v)];

	if (c->per_cpu && q->vcpu >= 0) {
		/* schedule out the old vCPU thread, in the new one */
		if (code_mode(g))
			flush_tnt(g, q);
		advance(g, q, 200 + (g_rand_int(q->rng) & 0x3ff), TRUE);
		rec_switch(q->sb, TRUE, oldpid, old, np, nt, q->t, q->cpu, q->dummy_id);
		vcpu_release(g, q);
		advance(g, q, 100, TRUE);
		rec_switch(q->sb, FALSE, np, nt, oldpid, old, q->t, q->cpu, q->dummy_id);
		if (!code_mode(g)) {
			pkt_ip(g, q, ppt_tip, HOST_IP_BASE + 0x8000);
			q->ip_host = HOST_IP_BASE + 0x8000;
		}
	}
	q->vcpu = v;
	g->vcpu_owner[v] = q->idx + 1;
	/* VMPTRLD; with real code it is reported at the next VM entry, an
	 * instruction libipt binds VMCS packets to */
	if (code_mode(g)) {
		/* the new thread's time starts at a TSC (PSB+), so that every
		 * branch decoded after the switch is timed after it */
		q->vmcs_dirty = TRUE;
		if (c->per_cpu && !c->timeless)
			psb_plus(g, q);
	} else
		pkt_vmcs(g, q, vt_synth_vmcs(v));
}

static void vm_entry(Gen *g, Queue *q)
{
	guint vm = vt_synth_vm_of_vcpu(g->cfg, q->vcpu);

	advance(g, q, 300 + (g_rand_int(q->rng) & 0xff), TRUE);
	q->in_guest = TRUE;
	pkt_pip(g, q, guest_cr3(vm), TRUE);
	pkt_mode64(g, q);
	pkt_ip(g, q, ppt_tip, q->ip_guest);
	q->entries++;
}

/* An exit handled in user space (QEMU): intel_pt//k stops at the return to
 * user mode (TIP.PGD, no IP) and starts again in the kernel (TIP.PGE). */
static void user_exit(Gen *g, Queue *q)
{
	struct pt_packet p = { .type = ppt_tip_pgd };

	advance(g, q, 60 + (g_rand_int(q->rng) & 0x3f), TRUE);
	p.payload.ip.ipc = pt_ipc_suppressed;
	emit(g, q, &p);
	advance(g, q, 800 + (g_rand_int(q->rng) & 0x7ff), FALSE);
	q->ip_host = HOST_IP_BASE + 0x4000 + (g_rand_int(q->rng) & 0xff0);
	pkt_ip(g, q, ppt_tip_pge, q->ip_host);
}

static void vm_exit(Gen *g, Queue *q)
{
	advance(g, q, 400 + (g_rand_int(q->rng) & 0xff), TRUE);
	pkt_ip(g, q, ppt_fup, q->ip_guest);
	q->in_guest = FALSE;
	pkt_pip(g, q, HOST_CR3, FALSE);
	q->ip_host = HOST_IP_BASE + 0x1230 + (g_rand_int(q->rng) & 0xff0);
	pkt_ip(g, q, ppt_tip, q->ip_host);
}

/* ---------------------------------------------------------- real code */

static guint32 queue_tid(const Gen *g, const Queue *q)
{
	return g->cfg->per_cpu ? vcpu_tid(g, q->vcpu) : q->tid;
}

/* One line of the ground truth: QUEUE TID KIND FROM TO WHERE VCPU INSNS RET
 * TSC (INSNS: instructions the queue has run, the branch's included when it
 * runs - not an exiting instruction's or an interrupted one's; RET: a
 * call's return address, else 0; TSC: the host TSC when it was taken). */
static void truth_branch_ret(Gen *g, Queue *q, VtBranchKind kind, guint64 from, guint64 to, gboolean guest,
			     guint64 ret)
{
	g->nbranches++;
	if (g->branches)
		fprintf(g->branches, "%u %u %s %#" G_GINT64_MODIFIER "x %#" G_GINT64_MODIFIER "x %s %d %" G_GUINT64_FORMAT
			" %#" G_GINT64_MODIFIER "x %" G_GUINT64_FORMAT "\n", q->idx, queue_tid(g, q),
			vt_branch_kind_name(kind), from, to, guest ? "guest" : "host", q->vcpu, q->insns, ret, q->t);
}

static void truth_branch(Gen *g, Queue *q, VtBranchKind kind, guint64 from, guint64 to, gboolean guest)
{
	truth_branch_ret(g, q, kind, from, to, guest, 0);
}

typedef struct {
	Gen *g;
	Queue *q;
	gboolean guest;
	const VtSynthCtx *ctx;       /* the walk's, and its instruction count so far */
	guint64 counted;
} WalkUser;

/* The instructions the walk ran since the last look go to the queue. */
static void walk_count(WalkUser *u)
{
	u->q->insns += u->ctx->insns - u->counted;
	u->counted = u->ctx->insns;
}

static void on_branch(VtBranchKind kind, guint64 from, guint64 to, gpointer user)
{
	WalkUser *u = user;
	VtInsn in = { 0 };

	walk_count(u);
	if (kind == VT_BRANCH_CALL && u->g->branches)
		vt_decode_insn(!u->guest ? u->g->host_img : u->g->in_user[u->q->vcpu] ?
			       u->g->uimg[(guint)u->q->vcpu % u->g->nuser] : u->g->guest_img, from, &in);
	truth_branch_ret(u->g, u->q, kind, from, to, u->guest, in.len ? from + in.len : 0);
}

/* Time passes before every decision (the MTCs it crosses are written
 * then): the branches of a walk step happen at its end (their truth). */
static void code_time(Gen *g, Queue *q)
{
	advance(g, q, 8 + (g_rand_int(q->rng) & 0x3f), FALSE);
}

/* The step's decision: a TNT bit waits for its packet (six of them, or the
 * next other packet), a TIP goes out now; each after its CYC. */
static void code_packet(Gen *g, Queue *q, const VtWalkStep *st)
{
	if (st->what == VT_WALK_TNT) {
		q->tnt_bits = (q->tnt_bits << 1) | (st->taken ? 1 : 0);
		if (++q->tnt_n == 6)
			flush_tnt(g, q);
		return;
	}
	flush_tnt(g, q);
	put_cyc(g, q);
	pkt_ip(g, q, ppt_tip, st->tip);
}

static void code_advance(Gen *g, Queue *q, guint64 dt)
{
	flush_tnt(g, q);
	advance(g, q, dt, TRUE);
}

/* The host cannot go on from its IP (ud2, hlt, ...) or lost its way back
 * (a loop it does not leave; a return whose address was replaced took
 * the handler's own): tracing stops there (FUP + TIP.PGD) and starts
 * again where the exit handler returns to (TIP.PGE at host_home: the
 * stub's VMRESUME path) - a decoder's call stack pops to that return
 * address at the trace's begin (perf's, vmtrace's), so the lost walk's
 * frames do not stay on it (restarting at the handler's call left them
 * there for good: 129 restarts on one vCPU of 1 MiB exit-heavy, its
 * deepest call 484 frames at its end). */
static void code_host_restart(Gen *g, Queue *q)
{
	struct pt_packet p = { .type = ppt_tip_pgd };

	code_advance(g, q, 50);
	pkt_ip(g, q, ppt_fup, q->host.ip);
	p.payload.ip.ipc = pt_ipc_suppressed;
	emit(g, q, &p);
	truth_branch(g, q, VT_BRANCH_TRACE_END, q->host.ip, 0, FALSE);
	code_advance(g, q, 500);
	g_array_set_size(q->host.stack, 0);
	vt_synth_ctx_flush_comp(&q->host);
	q->host.ip = g->host_home;
	pkt_mode64(g, q);
	pkt_ip(g, q, ppt_tip_pge, q->host.ip);
	truth_branch(g, q, VT_BRANCH_TRACE_BEGIN, 0, q->host.ip, FALSE);
}

/* Lost trace (cfg->ovf_every): the buffer overflowed - OVF, then a FUP
 * where packet generation resumes (the walk's IP; no IP compression and
 * no return compression reach across it).  The branch whose target the
 * lost packets told stays undecodable (the truth has it). */
static void code_ovf_check(Gen *g, Queue *q)
{
	VtSynthCtx *c = q->in_guest ? guest_ctx(g, q->vcpu) : &q->host;

	if (!g->cfg->ovf_every || q->vcpu < 0 || ++q->since_ovf < g->cfg->ovf_every)
		return;
	/* a branch of the same thread follows it (the decoder counts an OVF
	 * on the branch after it): not at the end of the queue or the slice */
	if (q->bytes + 64 >= q->target ||
	    (g->cfg->per_cpu && (q->t + 100 - g->t0) / g->slice_ticks != q->slice))
		return;
	q->since_ovf = 0;
	code_advance(g, q, 100);
	vt_synth_ctx_flush_comp(&q->host);
	vt_synth_ctx_flush_comp(guest_ctx(g, q->vcpu));
	pkt_simple(g, q, ppt_ovf);
	q->have_last_ip = FALSE;
	pkt_ip(g, q, ppt_fup, c->ip);
	g->vcpu_ovf[q->vcpu]++;
}

static void code_psb_check(Gen *g, Queue *q)
{
	if (q->since_psb >= q->psb_bytes)
		psb_plus(g, q);
}

static void code_vm_entry(Gen *g, Queue *q)
{
	VtSynthCtx *gc;

	if (g->nuser)  /* the vCPU runs its process's user code this time, or the kernel */
		g->in_user[q->vcpu] = g_rand_int_range(q->rng, 0, 100) < (gint32)g->cfg->guest_user_percent;
	gc = guest_ctx(g, q->vcpu);
	code_advance(g, q, 300 + (g_rand_int(q->rng) & 0xff));
	if (q->vmcs_dirty)
		pkt_vmcs(g, q, vt_synth_vmcs(q->vcpu));
	q->vmcs_dirty = FALSE;
	q->in_guest = TRUE;
	vt_synth_ctx_flush_comp(&q->host);
	vt_synth_ctx_flush_comp(gc);
	pkt_pip(g, q, cur_cr3(g, q), TRUE);
	pkt_mode64(g, q);
	pkt_ip(g, q, ppt_tip, gc->ip);
	truth_branch(g, q, VT_BRANCH_VMENTRY, q->host.ip, gc->ip, FALSE);
	q->entries++;
}

/* The host's decisions after a VM exit before its handler heads back to
 * VMRESUME: --host-steps N gives N/2..3N/2, as in the random flow (small:
 * exit-heavy), else 20..220. */
static guint code_host_budget(Gen *g, Queue *q)
{
	guint n = g->cfg->host_steps;

	return n ? 1 + n / 2 + (guint)g_rand_int_range(q->rng, 0, (gint32)n)
		 : 20 + (guint)g_rand_int_range(q->rng, 0, 200);
}

/* FUP(guest IP) PIP(NR=0) TIP(vmx_vmexit); the guest goes on at `resume`
 * next time (its IP for asynchronous exits, past an emulated instruction,
 * elsewhere after an injected event).  Elsewhere, the guest's call stack
 * is dropped - but with --call-depth kept: the event's handler runs on the
 * interrupted code's stack and its last return goes to a caller that waits
 * there, as a real guest's handlers end in the code they interrupted; a
 * stack dropped at every event left its entries on a decoder's call stack
 * (perf's --call-trace indentation) for good (session 32: the guest's
 * depth in the ground truth of a 1 MiB tnt-dense recording, returns
 * popping to the frame they match as perf's do, 286 on average and
 * growing along the trace; 40 with the stack kept). */
static void code_vm_exit(Gen *g, Queue *q, guint64 resume)
{
	VtSynthCtx *gc = guest_ctx(g, q->vcpu);

	code_advance(g, q, 400 + (g_rand_int(q->rng) & 0xff));
	pkt_ip(g, q, ppt_fup, gc->ip);
	q->in_guest = FALSE;
	pkt_pip(g, q, HOST_CR3, FALSE);
	pkt_ip(g, q, ppt_tip, g->vmexit_ip);
	truth_branch(g, q, VT_BRANCH_VMEXIT, gc->ip, g->vmexit_ip, TRUE);
	if (!g->cfg->call_depth && resume != gc->ip && resume != gc->ip + 1)
		g_array_set_size(gc->stack, 0);
	gc->ip = resume;
	/* the host's call stack as at the entry (the VMCS's host RSP: nothing
	 * ran on it meanwhile), so vmx_vmexit's return finds its caller */
	q->host.top_replaced = FALSE;
	q->host.ip = g->vmexit_ip;
	vt_synth_ctx_flush_comp(&q->host);
	vt_synth_ctx_flush_comp(gc);
	q->host_n = 0;
	q->host_budget = code_host_budget(g, q);
	/* --host-steps: the exit's handler (the stub's `call *%rax`) a
	 * function that can return within a few instructions per step */
	if (g->cfg->host_steps)
		q->host.next_indirect = vt_synth_code_pick_short(g->hc, q->rng, 8 * g->cfg->host_steps);
}

/* One decision of the host's code (from a VM exit, or the start, to
 * VMRESUME: the exit handler, leaning harder towards returns the deeper
 * and the longer it runs) or of the guest's (until an instruction exits or
 * the time slice ends). */
static void code_step(Gen *g, Queue *q)
{
	const VtSynthConfig *c = g->cfg;
	VtSynthCtx *gc = guest_ctx(g, q->vcpu);
	WalkUser u = { g, q, q->in_guest, q->in_guest ? gc : &q->host, q->in_guest ? gc->insns : q->host.insns };
	VtWalkStep st;

	if (!q->in_guest) {
		double bias = MIN(0.97, 0.3 + 0.05 * q->host.stack->len + (q->host_n > q->host_budget ? 0.6 : 0));

		/* a loop it does not leave (--host-steps: a handler that runs
		 * on long past its budget, the exit-heavy mix's few stragglers) */
		if (q->host_n > (c->host_steps ? MIN(50000, 200 + 20 * q->host_budget) : 50000)) {
			code_host_restart(g, q);
			q->host_n = 0;
			return;
		}
		code_time(g, q);
		/* --host-steps: a short handler, past its budget without calls */
		q->host.hurry = c->host_steps && q->host_n > q->host_budget;
		vt_synth_walk(g->hc, &q->host, q->rng, bias, FALSE, &st, on_branch, &u);
		walk_count(&u);
		q->host_n++;
		if (st.what == VT_WALK_VMENTRY) {
			code_vm_entry(g, q);
			/* the guest's share of decisions (the host's are about 20..220) */
			/* (--host-steps: as the random flow, in proportion to the
			 * host's budget) */
			guint base = c->host_steps ? q->host_budget : (guint)g_rand_int_range(q->rng, 20, 420);

			q->guest_left = 2 + base * c->guest_percent / (100 - MIN(c->guest_percent, 95));
			return;
		}
		if (st.what == VT_WALK_STUCK) {
			code_host_restart(g, q);
			q->host_n = 0;
			return;
		}
	} else {
		if (!q->guest_left) {
			code_vm_exit(g, q, gc->ip);   /* an interrupt or the preemption timer */
			return;
		}
		q->guest_left--;
		code_time(g, q);
		vt_synth_walk(g->in_user[q->vcpu] ? g->uc[(guint)q->vcpu % g->nuser] : g->gc, gc, q->rng, MIN(0.9, 0.2 + 0.05 * gc->stack->len), TRUE, &st, on_branch, &u);
		walk_count(&u);
		if (st.what == VT_WALK_EXIT) {
			code_vm_exit(g, q, st.resume);
			return;
		}
	}
	code_packet(g, q, &st);
	code_ovf_check(g, q);
	code_psb_check(g, q);
}

/* Produce trace into q->buf until the chunk is full or the queue is done.
 * Chunks end at packet boundaries outside PSB+. */
static void fill_chunk(Gen *g, Queue *q)
{
	const VtSynthConfig *c = g->cfg;
	gsize limit = g->cfg->buffer_size;

	while (!q->done && q->len + 256 < limit && !g->err) {
		/* a host stretch: KVM run loop */
		if (q->bytes >= q->target) {
			flush_tnt(g, q);      /* the last decisions reach the trace */
			if (g->branches)      /* what they prove ran (a flow end's) */
				fprintf(g->branches, "# end %u %" G_GUINT64_FORMAT "\n", q->idx, q->insns);
			vcpu_release(g, q);
			q->done = TRUE;
			break;
		}
		if (c->have_change && !g->t_change && q->bytes >= c->change_at * q->target)
			g->t_change = q->t;
		if (c->per_cpu && !(code_mode(g) && q->in_guest)) {
			guint64 slice = (q->t - g->t0) / g->slice_ticks;
			guint v = (q->cpu + slice) % c->nvcpus;

			if (slice != q->slice && (!code_mode(g) || vcpu_free(g, q, v))) {
				q->slice = slice;
				load_vcpu(g, q, v);
			}
		}
		if (code_mode(g)) {
			code_step(g, q);
			continue;
		}
		/* A few hundred branches of KVM code, then (share permitting)
		 * the guest for about guest_percent of the time. */
		guint nhost = c->host_steps ? 1 + c->host_steps / 2 + (guint)g_rand_int_range(q->rng, 0, c->host_steps)
					    : 20 + (guint)g_rand_int_range(q->rng, 0, 200);
		for (guint i = 0; i < nhost; i++)
			step(g, q);
		if (c->guest_percent) {
			guint nguest = 2 + nhost * c->guest_percent / (100 - c->guest_percent);

			vm_entry(g, q);
			for (guint i = 0; i < nguest; i++)
				step(g, q);
			vm_exit(g, q);
			if (c->user_exit_percent && (guint)g_rand_int_range(q->rng, 0, 100) < c->user_exit_percent)
				user_exit(g, q);
		}
	}
}

/* cfg->aux_truncated_every: a PERF_RECORD_AUX for the chunk just written,
 * flagged TRUNCATED, from the vCPU thread that ran (none without one). */
static gboolean write_aux_record(Gen *g, VtPerfWriter *w, Queue *q, guint64 offset, guint64 size, GError **error)
{
	g_autoptr(GByteArray) a = NULL;
	gsize s;

	q->chunks++;
	if (!g->cfg->aux_truncated_every || q->vcpu < 0 || q->chunks % g->cfg->aux_truncated_every)
		return TRUE;
	a = g_byte_array_new();
	s = vt_perf_rec_begin(a);
	vt_perf_put_u64(a, offset);
	vt_perf_put_u64(a, size);
	vt_perf_put_u64(a, PERF_AUX_FLAG_TRUNCATED);
	put_sample_id(a, g->qemu_pid[vt_synth_vm_of_vcpu(g->cfg, q->vcpu)], queue_tid(g, q), q->t,
		      q->cpu == (guint32)-1 ? 0 : q->cpu, q->pt_id);
	vt_perf_rec_end(a, s, PERF_RECORD_AUX, 0);
	g->vcpu_aux_truncated[q->vcpu]++;
	return vt_perf_writer_write_record(w, a->data, error);
}

static gboolean write_chunk(Gen *g, VtPerfWriter *w, Queue *q, GError **error)
{
	VtPerfAuxtrace aux = { 0 };

	if (!q->len)
		return TRUE;
	aux.offset = q->aux_offset;
	aux.reference = q->t + 1000;    /* perf record's rdtsc when it copied the data */
	aux.idx = q->idx;
	aux.tid = q->tid;
	aux.cpu = q->cpu;
	if (!vt_perf_writer_write_auxtrace(w, &aux, q->buf, q->len, NULL, error) ||
	    !write_aux_record(g, w, q, q->aux_offset, q->len, error))
		return FALSE;
	{
		/* the same chunk as a correct correction leaves it (padded to 8 like the file) */
		guint8 *fixed = g_malloc0((q->len + 7) & ~7UL);

		memcpy(fixed, q->buf, q->len);
		for (guint i = 0; i < q->fix->len; i++) {
			const Fix *f = &g_array_index(q->fix, Fix, i);

			for (int k = 0; k < 7; k++)
				fixed[f->pos + k] = (guint8)(f->host >> (8 * k));
		}
		g_checksum_update(g->corrected, fixed, (q->len + 7) & ~7UL);
		g_free(fixed);
		g_array_set_size(q->fix, 0);
	}
	q->aux_offset += (q->len + 7) & ~7UL;
	q->len = 0;
	pt_enc_sync_set(q->enc, 0);
	return TRUE;
}

static guint64 sext56(guint64 v)
{
	v &= SEVEN_BYTES;
	return (v & (1ULL << 55)) ? (v | ~SEVEN_BYTES) : v;
}

static void truth_config(VtJson *j, const Gen *g)
{
	const VtSynthConfig *c = g->cfg;

	vt_json_key(j, "config");
	vt_json_begin_object(j);
	vt_json_kv_uint(j, "vcpus", c->nvcpus);
	vt_json_kv_uint(j, "vms", c->nvms);
	vt_json_kv_string(j, "mode", c->per_cpu ? "per-cpu" : "per-thread");
	vt_json_kv_uint(j, "cpus", c->per_cpu ? g->ncpus : 0);
	vt_json_kv_bool(j, "cyc", c->cyc);
	vt_json_kv_uint(j, "cyc_thresh", c->cyc_thresh);
	vt_json_kv_bool(j, "mtc", c->mtc);
	vt_json_kv_uint(j, "mtc_period", c->mtc_period);
	vt_json_kv_uint(j, "psb_period", c->psb_period);
	vt_json_kv_uint(j, "tsc_ctc_n", c->tsc_ctc_n);
	vt_json_kv_uint(j, "tsc_ctc_d", c->tsc_ctc_d);
	vt_json_kv_uint(j, "size", c->size);
	vt_json_kv_uint(j, "buffer_size", c->buffer_size);
	vt_json_kv_uint(j, "seed", c->seed);
	vt_json_kv_bool(j, "timeless", c->timeless);
	vt_json_end_object(j);
}

static void truth_vms(VtJson *j, const Gen *g)
{
	const VtSynthConfig *c = g->cfg;

	vt_json_key(j, "vms");
	vt_json_begin_array(j);
	for (guint vm = 0; vm < c->nvms; vm++) {
		vt_json_begin_object(j);
		vt_json_kv_uint(j, "vm", vm);
		vt_json_kv_uint(j, "qemu_pid", g->qemu_pid[vm]);
		vt_json_kv_hex(j, "tsc_offset", vt_synth_vm_offset(c, vm));
		vt_json_kv_hex(j, "tsc_offset56", sext56(vt_synth_vm_offset(c, vm)));
		if (c->vm_ratio[vm]) {
			vt_json_kv_uint(j, "tsc_scaling_ratio", c->vm_ratio[vm]);
			vt_json_kv_uint(j, "tsc_scaling_frac_bits", c->vm_frac[vm]);
		}
		if (c->have_change && vm == c->change_vm) {
			vt_json_key(j, "offset_change");
			vt_json_begin_object(j);
			vt_json_kv_hex(j, "new_tsc_offset", c->change_offset);
			vt_json_kv_hex(j, "at_tsc", g->t_change);
			vt_json_end_object(j);
		}
		vt_json_end_object(j);
	}
	vt_json_end_array(j);
}

static void truth_vcpus(VtJson *j, Gen *g)
{
	const VtSynthConfig *c = g->cfg;

	vt_json_key(j, "vcpus");
	vt_json_begin_array(j);
	for (guint v = 0; v < c->nvcpus; v++) {
		guint vm = vt_synth_vm_of_vcpu(c, v);

		vt_json_begin_object(j);
		vt_json_kv_uint(j, "vcpu", vcpu_index_in_vm(g, v));
		vt_json_kv_uint(j, "vm", vm);
		vt_json_key(j, "comm");
		vt_json_printf(j, "CPU %u/KVM", vcpu_index_in_vm(g, v));
		vt_json_kv_uint(j, "tid", vcpu_tid(g, v));
		vt_json_kv_hex(j, "vmcs", vt_synth_vmcs(v));
		vt_json_kv_hex(j, "tsc_offset", vt_synth_vcpu_offset(c, v));
		vt_json_kv_hex(j, "tsc_offset56", sext56(vt_synth_vcpu_offset(c, v)));
		vt_json_kv_uint(j, "guest_tsc_packets", g->vcpu_guest_tsc[v]);
		vt_json_kv_uint(j, "overflows", g->vcpu_ovf[v]);
		vt_json_kv_uint(j, "aux_truncated", g->vcpu_aux_truncated[v]);
		vt_json_end_object(j);
	}
	vt_json_end_array(j);
}

static void truth_queues(VtJson *j, const Queue *qs, guint nq)
{
	vt_json_key(j, "queues");
	vt_json_begin_array(j);
	for (guint i = 0; i < nq; i++) {
		const Queue *q = &qs[i];

		vt_json_begin_object(j);
		vt_json_kv_uint(j, "idx", q->idx);
		vt_json_kv_int(j, "cpu", (gint32)q->cpu);
		vt_json_kv_int(j, "tid", (gint32)q->tid);
		vt_json_kv_uint(j, "bytes", q->bytes);
		vt_json_kv_uint(j, "guest_tsc_packets", q->guest_tsc);
		vt_json_kv_uint(j, "host_tsc_packets", q->host_tsc);
		vt_json_kv_uint(j, "vm_entries", q->entries);
		vt_json_end_object(j);
	}
	vt_json_end_array(j);
}

static gboolean write_truth(Gen *g, const char *path, Queue *qs, guint nq, const VtSynthStats *st,
			    GError **error)
{
	g_autoptr(GString) s = g_string_new(NULL);
	VtJson *j = vt_json_new_string(s);

	vt_json_begin_object(j);
	vt_json_kv_string(j, "generator", "vmtrace synth");
	truth_config(j, g);
	truth_vms(j, g);
	truth_vcpus(j, g);
	truth_queues(j, qs, nq);
	if (g->hc) {
		vt_json_kv_uint(j, "branches", g->nbranches);
		vt_json_kv_hex(j, "host_vmexit", g->vmexit_ip);
	}
	vt_json_kv_string(j, "corrected_aux_sha256", g_checksum_get_string(g->corrected));
	vt_json_key(j, "totals");
	vt_json_begin_object(j);
	vt_json_kv_uint(j, "aux_bytes", st->aux_bytes);
	vt_json_kv_uint(j, "guest_tsc_packets", st->guest_tsc_packets);
	vt_json_kv_uint(j, "host_tsc_packets", st->host_tsc_packets);
	vt_json_kv_uint(j, "vm_entries", st->vm_entries);
	vt_json_end_object(j);
	vt_json_end_object(j);
	vt_json_free(j);
	return vt_fs_output_write_file(path, VT_FS_OUTPUT_REPLACE, 0666, s->str, s->len, error);
}

static void perf_attrs(const Gen *g, struct perf_event_attr *pt, struct perf_event_attr *dummy)
{
	const VtSynthConfig *c = g->cfg;

	memset(pt, 0, sizeof(*pt));
	pt->type = PT_PMU_TYPE;
	pt->size = PERF_ATTR_SIZE_VER7;
	pt->config = 0x1 | 0x2000 | ((guint64)c->psb_period << 24);
	if (c->cyc)
		pt->config |= 0x2 | ((guint64)c->cyc_thresh << 19);
	if (!c->timeless) {
		pt->config |= 0x400;
		if (c->mtc)
			pt->config |= 0x200 | ((guint64)c->mtc_period << 14);
	}
	pt->sample_period = 1;
	pt->sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU |
			  PERF_SAMPLE_IDENTIFIER;
	pt->exclude_user = 1;
	pt->exclude_hv = 1;
	pt->sample_id_all = 1;
	pt->disabled = 1;
	pt->enable_on_exec = 0;
	pt->aux_watermark = 0;

	memset(dummy, 0, sizeof(*dummy));
	dummy->type = PERF_TYPE_SOFTWARE;
	dummy->config = PERF_COUNT_SW_DUMMY;
	dummy->size = PERF_ATTR_SIZE_VER7;
	dummy->sample_period = 1;
	dummy->sample_type = pt->sample_type;
	dummy->exclude_user = 1;
	dummy->exclude_hv = 1;
	dummy->sample_id_all = 1;
	dummy->comm = 1;
	dummy->task = 1;
	dummy->mmap = 1;
	dummy->mmap2 = 1;
	dummy->comm_exec = 1;
	dummy->context_switch = g->cfg->per_cpu;
}

/* --guest-user: each ELF's first executable PT_LOAD mapped at its start
 * (0: its link address), attached to the guest image (which then decodes
 * it, as vmtrace script's does), and a walk per vCPU of its file. */
static gboolean code_user_open(Gen *g, GRand *rng, GError **error)
{
	const VtSynthConfig *c = g->cfg;

	for (guint i = 0; i < VT_SYNTH_MAX_USER && c->guest_user[i]; i++, g->nuser++) {
		guint64 vaddr, offset, size, start = c->guest_user_start[i];

		if (!vt_decode_guest_user_exec_load(c->guest_user[i], &vaddr, &offset, &size, error))
			return FALSE;
		g->user_pgoff[i] = offset & ~0xfffULL;
		g->user_start[i] = start ? start & ~0xfffULL : vaddr & ~0xfffULL;
		g->user_len[i] = (offset - g->user_pgoff[i] + size + 0xfff) & ~0xfffULL;
		g->uimg[i] = vt_decode_guest_user_image(c->guest_user[i], g->user_start[i], g->user_len[i],
							g->user_pgoff[i], error);
		if (!g->uimg[i])
			return FALSE;
		g->uc[i] = vt_synth_code_new(g->uimg[i]);
		vt_decode_image_attach(g->guest_img, g->uimg[i]);
	}
	for (guint v = 0; v < c->nvcpus; v++) {
		vt_synth_ctx_init(&g->user[v], vt_synth_code_pick(g->uc[v % g->nuser], rng));
		if (!g->user[v].ip) {
			g_set_error(error, VT_SYNTH_ERROR, 0, "--guest-user %s has no function symbols in its code",
				    c->guest_user[v % g->nuser]);
			return FALSE;
		}
	}
	return TRUE;
}

/* Load the real code (both images) and open the ground-truth branch list. */
static gboolean code_open(Gen *g, GError **error)
{
	const VtSynthConfig *c = g->cfg;
	GRand *rng;

	if (!c->host_code || !c->guest_code) {
		g_set_error(error, VT_SYNTH_ERROR, 0, "--host-code and --guest-code go together");
		return FALSE;
	}
	g->host_img = vt_decode_image_load_dir(c->host_code, "host", error);
	g->guest_img = g->host_img ? vt_decode_image_load_dir(c->guest_code, "guest", error) : NULL;
	if (!g->guest_img)
		return FALSE;
	g->vmexit_ip = vt_decode_image_lookup(g->host_img, "vmx_vmexit");
	if (!g->vmexit_ip) {
		g_set_error(error, VT_SYNTH_ERROR, 0, "host code %s has no vmx_vmexit symbol (KVM's VM-exit "
			    "entry, kvm_intel): a VM exit needs somewhere to go", c->host_code);
		return FALSE;
	}
	g->host_start = vt_decode_image_lookup(g->host_img, "vmx_vcpu_run");
	if (!g->host_start)
		g->host_start = g->vmexit_ip;
	g->hc = vt_synth_code_new(g->host_img);
	g->host_home = vt_synth_code_after_call(g->hc, g->host_start);
	if (!g->host_home)
		g->host_home = g->host_start;
	/* KVM's own code is entered only from the run loop: never a random
	 * function (an indirect call into vmx_vcpu_run nested a run loop that
	 * never returned, one into __vmx_vcpu_run entered the guest from any
	 * depth) */
	vt_synth_code_exclude(g->hc, g->vmexit_ip);
	vt_synth_code_exclude(g->hc, g->host_start);
	vt_synth_code_exclude(g->hc, vt_decode_image_lookup(g->host_img, "__vmx_vcpu_run"));
	g->gc = vt_synth_code_new(g->guest_img);
	if (c->call_depth) {
		vt_synth_code_bound_depth(g->hc, c->call_depth);
		vt_synth_code_bound_depth(g->gc, c->call_depth);
	}
	rng = g_rand_new_with_seed((guint32)c->seed ^ 0x5eed);
	for (guint v = 0; v < c->nvcpus; v++)
		vt_synth_ctx_init(&g->guest[v], vt_synth_code_pick(g->gc, rng));
	if (c->guest_user[0] && !code_user_open(g, rng, error)) {
		g_rand_free(rng);
		return FALSE;
	}
	g_rand_free(rng);
	if (!g->guest[0].ip) {
		g_set_error(error, VT_SYNTH_ERROR, 0, "guest code %s has no function symbols (T/t) in its code",
			    c->guest_code);
		return FALSE;
	}
	if (c->branches) {
		int fd;

		g->branches_out = vt_fs_output_new(c->branches, VT_FS_OUTPUT_REPLACE, 0666, error);
		if (!g->branches_out)
			return FALSE;
		fd = dup(vt_fs_output_fd(g->branches_out));
		g->branches = fd >= 0 ? fdopen(fd, "w") : NULL;
		if (!g->branches) {
			g_set_error(error, VT_SYNTH_ERROR, 0, "cannot write %s: %s", c->branches, g_strerror(errno));
			if (fd >= 0)
				close(fd);
			return FALSE;
		}
		fprintf(g->branches, "# vmtrace synth ground truth: every branch taken\n"
				     "# QUEUE TID KIND FROM TO WHERE VCPU INSNS RET TSC\n"
				     "# (at a PSB+ and a queue's end: # psb|end QUEUE INSNS, what ran before)\n");
		for (guint i = 0; i < g->nuser; i++)
			fprintf(g->branches, "# guest-user %s %#" G_GINT64_MODIFIER "x %#" G_GINT64_MODIFIER "x %#"
				G_GINT64_MODIFIER "x\n", c->guest_user[i], g->user_start[i], g->user_len[i],
				g->user_pgoff[i]);
	}
	return TRUE;
}

/* Finish the branch list (rename into place) or drop it. */
static gboolean code_close(Gen *g, gboolean keep, GError **error)
{
	const VtSynthConfig *c = g->cfg;
	gboolean ok = TRUE;

	for (guint v = 0; v < VT_SYNTH_MAX_VCPUS; v++) {
		vt_synth_ctx_clear(&g->guest[v]);
		vt_synth_ctx_clear(&g->user[v]);
	}
	if (g->branches) {
		ok = fclose(g->branches) == 0;
		g->branches = NULL;
		if (!ok && keep)
			g_set_error(error, VT_SYNTH_ERROR, 0, "cannot write %s: %s", c->branches, g_strerror(errno));
		ok = ok && keep && vt_fs_output_commit(g->branches_out, keep && ok ? error : NULL);
	}
	g_clear_pointer(&g->branches_out, vt_fs_output_free);   /* the temporary, unless committed */
	vt_synth_code_free(g->hc);
	vt_synth_code_free(g->gc);
	for (guint i = 0; i < g->nuser; i++) {
		vt_synth_code_free(g->uc[i]);    /* its image is the guest image's */
		g->uc[i] = NULL;
		g->uimg[i] = NULL;
	}
	g->nuser = 0;
	vt_decode_image_free(g->host_img);
	vt_decode_image_free(g->guest_img);
	g->hc = g->gc = NULL;
	g->host_img = g->guest_img = NULL;
	return ok || !keep;
}

/* OUT/kcore_dir: the host's kcore, kallsyms and modules (perf record --kcore). */
static gboolean code_kcore_dir(const Gen *g, const char *out, GError **error)
{
	static const char *const files[] = { "kcore", "kallsyms", "modules" };
	g_autofree char *dir = g_build_filename(out, "kcore_dir", NULL);

	if (g_mkdir_with_parents(dir, 0755) < 0) {
		g_set_error(error, VT_SYNTH_ERROR, 0, "cannot create %s: %s", dir, g_strerror(errno));
		return FALSE;
	}
	for (guint i = 0; i < G_N_ELEMENTS(files); i++) {
		g_autofree char *from = g_build_filename(g->cfg->host_code, files[i], NULL);
		g_autofree char *to = g_build_filename(dir, files[i], NULL);
		g_autofree char *data = NULL;
		gsize len = 0;

		if (!g_file_get_contents(from, &data, &len, NULL) && i < 2) {
			g_set_error(error, VT_SYNTH_ERROR, 0, "cannot read %s", from);
			return FALSE;
		}
		if (!g_file_set_contents(to, data ? data : "", len, error))
			return FALSE;
	}
	return TRUE;
}

gboolean vt_synth_generate(const VtSynthConfig *cfg, const char *out, gboolean as_dir_arg, const char *truth,
			   VtSynthStats *stats_out, GError **error)
{
	gboolean as_dir = as_dir_arg;
	Gen g = { .cfg = cfg };
	VtSynthStats st = { 0 };
	VtPerfWriter *w = NULL;
	Queue *qs = NULL;
	guint nq, i;
	struct perf_event_attr pt_attr, dummy_attr;
	guint64 *pt_ids, *dummy_ids;
	GByteArray *sb = g_byte_array_new();
	gboolean ok = FALSE;

	if (!vt_synth_config_check(cfg, error))
		goto out_free;
	if ((cfg->host_code || cfg->guest_code) && !code_open(&g, error))
		goto out_free;
	if (code_mode(&g))
		as_dir = TRUE;         /* the host code goes into OUT/kcore_dir */
	g.ncpus = cfg->per_cpu ? (cfg->ncpus ? cfg->ncpus : MIN(cfg->nvcpus, 4)) : 0;
	g.corrected = g_checksum_new(G_CHECKSUM_SHA256);
	nq = cfg->per_cpu ? g.ncpus : cfg->nvcpus;
	for (i = 0; i < cfg->nvms; i++)
		g.qemu_pid[i] = cfg->qemu_pid[i] ? cfg->qemu_pid[i] : 4000 + 100 * i;
	g.t0 = cfg->t0 ? cfg->t0 : T0;
	g.t_end_est = g.t0 + cfg->size / nq * bytes_per_tick_inv();
	/* each CPU runs every vCPU about three times */
	g.slice_ticks = MAX((g.t_end_est - g.t0) / (3 * cfg->nvcpus), 1ULL << 16);

	qs = g_new0(Queue, nq);
	pt_ids = g_new0(guint64, nq);
	dummy_ids = g_new0(guint64, nq);
	for (i = 0; i < nq; i++) {
		Queue *q = &qs[i];
		struct pt_config pc;
		guint32 seed[3] = { (guint32)cfg->seed, (guint32)(cfg->seed >> 32), i };

		q->idx = i;
		q->pt_id = pt_ids[i] = 1000 + i;
		q->dummy_id = dummy_ids[i] = 2000 + i;
		q->cpu = cfg->per_cpu ? i : (guint32)-1;
		q->rng = g_rand_new_with_seed_array(seed, 3);
		q->cap = cfg->buffer_size + 4096;
		q->buf = g_malloc0(q->cap);
		pt_config_init(&pc);
		pc.begin = q->buf;
		pc.end = q->buf + q->cap;
		q->enc = pt_alloc_encoder(&pc);
		q->t = g.t0 + g_rand_int_range(q->rng, 0, 5000);
		q->ctc_prev = ctc_of(&g, q->t);
		q->cbr = CBR_RATIO;
		q->psb_bytes = 2048ULL << cfg->psb_period;
		q->target = cfg->size / nq;
		q->vcpu = -1;
		q->ip_host = HOST_IP_BASE + 0x1000;
		q->ip_guest = GUEST_IP_BASE + 0x2000 + 0x1000 * (i % 16);
		q->sb = g_byte_array_new();
		q->fix = g_array_new(FALSE, FALSE, sizeof(Fix));
		q->slice = 0;
		if (code_mode(&g)) {
			vt_synth_ctx_init(&q->host, g.host_start);
			q->host_budget = code_host_budget(&g, q);
		}
		if (!q->enc) {
			g_set_error(error, VT_SYNTH_ERROR, 0, "cannot allocate libipt encoder");
			goto out_free;
		}
	}

	w = vt_perf_writer_new(out, as_dir, error);
	if (!w)
		goto out_free;
	perf_attrs(&g, &pt_attr, &dummy_attr);
	if (!vt_perf_writer_add_attr(w, &pt_attr, pt_ids, nq, error) ||
	    !vt_perf_writer_add_attr(w, &dummy_attr, dummy_ids, nq, error))
		goto out_free;

	/* TIME_CONV */
	{
		gsize s = vt_perf_rec_begin(sb);

		vt_perf_put_u64(sb, TIME_SHIFT);
		vt_perf_put_u64(sb, TIME_MULT);
		vt_perf_put_u64(sb, 0);
		vt_perf_put_u64(sb, 0);
		vt_perf_put_u64(sb, 0);
		vt_perf_put_u64(sb, 1);   /* cap_user_time_zero=1, cap_user_time_short=0, reserved */
		vt_perf_rec_end(sb, s, VT_PERF_RECORD_TIME_CONV, 0);
	}
	/* AUXTRACE_INFO for intel_pt */
	{
		guint64 priv[18] = { 0 };

		priv[VT_PT_INFO_PMU_TYPE] = PT_PMU_TYPE;
		priv[VT_PT_INFO_TIME_SHIFT] = TIME_SHIFT;
		priv[VT_PT_INFO_TIME_MULT] = TIME_MULT;
		priv[VT_PT_INFO_TIME_ZERO] = 0;
		priv[VT_PT_INFO_CAP_USER_TIME_ZERO] = 1;
		priv[VT_PT_INFO_TSC_BIT] = 0x400;
		priv[VT_PT_INFO_NORETCOMP_BIT] = 0x800;
		priv[VT_PT_INFO_HAVE_SCHED_SWITCH] = cfg->per_cpu ? 3 : 0;
		priv[VT_PT_INFO_SNAPSHOT_MODE] = 0;
		priv[VT_PT_INFO_PER_CPU_MMAPS] = cfg->per_cpu;
		priv[VT_PT_INFO_MTC_BIT] = 0x200;
		priv[VT_PT_INFO_MTC_FREQ_BITS] = 0x3c000;
		priv[VT_PT_INFO_TSC_CTC_N] = cfg->tsc_ctc_n;
		priv[VT_PT_INFO_TSC_CTC_D] = cfg->tsc_ctc_d;
		priv[VT_PT_INFO_CYC_BIT] = 0x2;
		priv[VT_PT_INFO_MAX_NONTURBO_RATIO] = CBR_RATIO;
		priv[VT_PT_INFO_FILTER_STR_LEN] = 0;
		priv[17] = 0;     /* cap_event_trace */
		vt_perf_put_auxtrace_info(sb, priv, G_N_ELEMENTS(priv));
	}
	/* COMM of the QEMU processes and their vCPU threads */
	for (guint vm = 0; vm < cfg->nvms; vm++)
		rec_comm(sb, g.qemu_pid[vm], g.qemu_pid[vm], "qemu-system-x86", g.t0 - 100000, dummy_ids[0]);
	for (guint v = 0; v < cfg->nvcpus; v++) {
		char name[32];

		g_snprintf(name, sizeof(name), "CPU %u/KVM", vcpu_index_in_vm(&g, v));
		rec_comm(sb, g.qemu_pid[vt_synth_vm_of_vcpu(cfg, v)], vcpu_tid(&g, v), name, g.t0 - 90000,
			 dummy_ids[0]);
	}
	if (code_mode(&g)) {
		rec_kernel_mmaps(sb, FALSE, cfg->host_code, vt_decode_image_text(g.host_img), g.t0 - 110000,
				 dummy_ids[0]);
		rec_kernel_mmaps(sb, TRUE, cfg->guest_code, vt_decode_image_text(g.guest_img), g.t0 - 110000,
				 dummy_ids[0]);
	}
	/* Queues start with their vCPU loaded, in the host, PSB+ first. */
	for (i = 0; i < nq; i++) {
		Queue *q = &qs[i];
		guint v = cfg->per_cpu ? i % cfg->nvcpus : i;
		guint32 pid = g.qemu_pid[vt_synth_vm_of_vcpu(cfg, v)];

		q->vcpu = v;
		g.vcpu_owner[v] = cfg->per_cpu ? i + 1 : 0;
		q->tid = cfg->per_cpu ? (guint32)-1 : vcpu_tid(&g, v);
		rec_itrace_start(sb, pid, vcpu_tid(&g, v), q->t, cfg->per_cpu ? q->cpu : 0, q->pt_id);
		psb_plus(&g, q);
	}
	{
		gsize s = vt_perf_rec_begin(sb);

		vt_perf_rec_end(sb, s, VT_PERF_RECORD_FINISHED_INIT, 0);
	}
	for (gsize off = 0; off < sb->len;) {
		const struct perf_event_header *h = (const void *)(sb->data + off);

		if (!vt_perf_writer_write_record(w, h, error))
			goto out_free;
		off += h->size;
	}
	g_byte_array_set_size(sb, 0);

	/* Rounds: each queue produces one chunk; its sideband goes first. */
	for (;;) {
		gboolean any = FALSE;

		if (cfg->stop && *cfg->stop) {
			g_set_error(error, VT_SYNTH_ERROR, 0, "interrupted");
			goto out_free;
		}
		for (i = 0; i < nq; i++) {
			Queue *q = &qs[i];

			fill_chunk(&g, q);
			if (g.err) {
				g_propagate_error(error, g.err);
				g.err = NULL;
				goto out_free;
			}
			for (gsize off = 0; off < q->sb->len;) {
				const struct perf_event_header *h = (const void *)(q->sb->data + off);

				if (!vt_perf_writer_write_record(w, h, error))
					goto out_free;
				off += h->size;
			}
			g_byte_array_set_size(q->sb, 0);
			if (q->len) {
				any = TRUE;
				if (!write_chunk(&g, w, q, error))
					goto out_free;
			}
		}
		if (!any)
			break;
		{
			struct perf_event_header fr = { .type = VT_PERF_RECORD_FINISHED_ROUND, .size = 8 };

			if (!vt_perf_writer_write_record(w, &fr, error))
				goto out_free;
		}
	}

	if (!vt_perf_writer_set_feature_string(w, VT_PERF_FEAT_OSRELEASE, "6.1.0-synthetic", error) ||
	    !vt_perf_writer_set_feature_string(w, VT_PERF_FEAT_HOSTNAME, "vmtrace-synth", error) ||
	    !vt_perf_writer_set_feature_string(w, VT_PERF_FEAT_ARCH, "x86_64", error) ||
	    !vt_perf_writer_set_feature_string(w, VT_PERF_FEAT_CPUID, "GenuineIntel,6,85,4", error) ||
	    !vt_perf_writer_set_feature_string(w, VT_PERF_FEAT_VERSION, "vmtrace synth " PACKAGE_VERSION, error))
		goto out_free;
	{
		const VtPerfEventDesc ev[2] = { { &pt_attr, "intel_pt//k", pt_ids, nq },
						{ &dummy_attr, "dummy:k", dummy_ids, nq } };
		const uint32_t types[2] = { PT_PMU_TYPE, PERF_TYPE_SOFTWARE };
		const char *const pmus[2] = { "intel_pt", "software" };
		GByteArray *fa = g_byte_array_new();
		gboolean fok;

		vt_perf_put_event_desc(fa, ev, 2);
		fok = vt_perf_writer_set_feature(w, VT_PERF_FEAT_EVENT_DESC, fa->data, fa->len, error);
		g_byte_array_set_size(fa, 0);
		vt_perf_put_pmu_mappings(fa, types, pmus, 2);
		fok = fok && vt_perf_writer_set_feature(w, VT_PERF_FEAT_PMU_MAPPINGS, fa->data, fa->len, error);
		g_byte_array_unref(fa);
		if (!fok)
			goto out_free;
	}
	{
		guint32 nr[2] = { MAX(g.ncpus, 1), MAX(g.ncpus, 1) };

		if (!cfg->per_cpu)
			nr[0] = nr[1] = 2;
		if (!vt_perf_writer_set_feature(w, VT_PERF_FEAT_NRCPUS, nr, sizeof(nr), error))
			goto out_free;
	}
	st.nqueues = nq;
	for (i = 0; i < nq; i++) {
		st.aux_bytes += qs[i].bytes;
		st.guest_tsc_packets += qs[i].guest_tsc;
		st.host_tsc_packets += qs[i].host_tsc;
		st.vm_entries += qs[i].entries;
	}
	/* The ground truth first (written atomically): if it fails, the
	 * unfinished recording is removed; if the recording then fails, the
	 * truth goes too.  Either both appear or neither. */
	if (truth && !write_truth(&g, truth, qs, nq, &st, error))
		goto out_free;
	if (!vt_perf_writer_finish(w, error) || (code_mode(&g) && !code_kcore_dir(&g, out, error)) ||
	    (code_mode(&g) && !code_close(&g, TRUE, error))) {
		if (truth)
			g_unlink(truth);
		goto out_free;
	}
	if (stats_out)
		*stats_out = st;
	ok = TRUE;
out_free:
	if (w)
		vt_perf_writer_free(w);
	if (qs) {
		for (i = 0; i < nq; i++) {
			if (qs[i].enc)
				pt_free_encoder(qs[i].enc);
			g_free(qs[i].buf);
			if (qs[i].rng)
				g_rand_free(qs[i].rng);
			if (qs[i].sb)
				g_byte_array_unref(qs[i].sb);
			if (qs[i].fix)
				g_array_free(qs[i].fix, TRUE);
			vt_synth_ctx_clear(&qs[i].host);
		}
		g_free(qs);
		g_free(pt_ids);
		g_free(dummy_ids);
	}
	g_byte_array_unref(sb);
	if (g.corrected)
		g_checksum_free(g.corrected);
	if (g.err)
		g_error_free(g.err);
	code_close(&g, FALSE, NULL);
	return ok;
}
