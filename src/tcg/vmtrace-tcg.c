/* vmtrace-tcg.c - a QEMU TCG plugin (API version 1, QEMU 7.2) that records
 * the guest's execution as the Intel PT packets the hardware would have
 * written, one raw packet stream per vCPU, plus the bytes of every
 * translated block.  `vmtrace record --source tcg` loads it and turns its
 * directory into a perf.data (src/tcg/convert.c).
 *
 *   -plugin vmtrace-tcg.so,out=DIR[,filter=kernel][,skip=N][,limit=N][,psb=BYTES]
 *
 * skip: a vCPU's tracing starts at its first kernel instruction after N
 * instructions (or, without filter=kernel, at a real-mode block after N:
 * an AP started by INIT/SIPI); limit: it stops N instructions after it
 * started.
 *
 * How control flow is rebuilt, per vCPU, from one callback per executed
 * translated block (TB) and one inline counter per instruction:
 * - at translation, the TB's last instruction is classified with Zydis
 *   (conditional, direct jump/call, indirect, return, far, rep string);
 * - when the next TB of the vCPU starts, its address says what the last
 *   one did: a conditional branch gives a TNT bit, an indirect branch or a
 *   far transfer a TIP; an address that is neither fall-through nor
 *   target is an interrupt or exception: FUP + TIP;
 * - the inline counter (instructions started) tells how much of the TB
 *   ran: fewer than its length means an exception at the last one started
 *   (FUP = that instruction).
 * QEMU delivers interrupts only between TBs, so after a TB ending in a
 * branch whose outcome is unknown (conditional, indirect) - or whose last
 * instruction may have faulted - the interrupted address is only known
 * when the handler's IRET returns there: such FUPs (and the TNT/TIP before
 * them) are written as fixed-size placeholders and patched in place then.
 * Interrupt entry points are learnt from unambiguous interrupts; an
 * indirect branch or IRET landing on one that is no return site is an
 * interrupt.
 *
 * Tracing starts at the first instruction QEMU runs - the reset vector
 * 0xfffffff0 - (with skip=N: at the first kernel-half instruction after
 * N; with filter=kernel: at the first kernel-half one).  filter=kernel
 * traces only kernel-half addresses (bit 63 set; TIP.PGD/TIP.PGE around
 * user space, as Intel PT's CPL filter).
 *
 * Execution mode (16/32/64-bit; API v1 shows no CS.D/CS.L/CR0): QEMU
 * translates a block for one mode (it is in the TB flags), so all of its
 * instructions share it.  At translation each instruction is decoded with
 * Zydis in the three modes; the modes whose lengths equal QEMU's sizes
 * for every instruction remain (addresses above 4 GiB: 64-bit only).  Of
 * several, the ones whose register names (Zydis, AT&T) agree with
 * QEMU's own disassembly (qemu_plugin_insn_disas: made in the vCPU's mode,
 * %ax/%eax/%rax) on the most instructions remain.  A change of mode
 * writes MODE.Exec before the TIP/TIP.PGE that goes there (far jumps and
 * returns, IRET, interrupts: as the hardware).  A block still ambiguous
 * (e.g. "mov $0x10, %ecx; mov %ecx, %ds" in 32- or 64-bit mode) keeps the
 * vCPU's mode after a near branch or straight flow (they cannot change
 * it); after a transfer that may, a placeholder (PAD PAD) goes before its
 * TIP and becomes MODE.Exec when a later block decides (or the nearest
 * mode at the next PSB+, far transfer or the end).  A change where no TIP
 * went (a wrong guess; none on the test boot) is a TIP.PGD/TIP.PGE pair
 * at the block (meta: mode_resyncs).  IPs are QEMU's vaddr: the linear
 * address (CS base + EIP), what Intel PT's IP packets carry (LIP) and
 * libipt walks on (next IP = IP + size, no CS arithmetic).
 *
 * Time is an instruction clock: TSC = VT_TCG_T0 + instructions started by
 * all vCPUs so far (one tick per instruction: deterministic for the same
 * execution); TMA/MTC from the TSC:CTC ratio below; CBR constant.
 * PIP: CR3 is not visible in API v1: every PIP carries CR3 0 and NR=1
 * (the trace is of a guest).
 *
 * Files in DIR: vcpuN.pt (packets), code (per translation: u64 vaddr, u32
 * length, u32 0, u64 TSC, then the bytes), meta (key value lines, written
 * at exit).
 *
 * Counting: with one TCG thread (-smp 1, or -accel tcg,thread=single) the
 * counts are exact; multi-threaded TCG shares the inline counter between
 * threads (API v1 has no per-vCPU inline counters): meta says "mttcg 1".
 * With one thread the vCPUs take turns in it (round-robin): the
 * instructions started since the last TB callback are the previous
 * callback's vCPU's, so each vCPU's own count ("ran", traced or not) is
 * exact too.  Each vCPU has its own mode: an AP starts in real mode at
 * its SIPI vector (INIT/SIPI: an interrupt-like FUP + TIP from its HLT).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <Zydis/Zydis.h>

#include "src/tcg/qemu-plugin-api.h"
#include "src/tcg/tcg-format.h"

VT_QEMU_PLUGIN_EXPORT int qemu_plugin_version = VT_QEMU_PLUGIN_API;

enum { K_OTHER, K_REP, K_COND, K_JUMP, K_CALL, K_IND, K_RET, K_SYSCALL, K_FAR, K_IRET, K_INT };
enum { M16 = 1, M32 = 2, M64 = 4 };   /* execution modes; dec[]/mode_index: 0, 1, 2 */

typedef struct {
	uint64_t pc, last_ip, target;
	uint32_t n;
	uint8_t last_len, kind, kernel;
	uint8_t modes, mode;           /* candidate modes (M16|M32|M64), the chosen one */
	uint8_t vector, ret_site;      /* learnt: interrupt entry; return site of a call */
	uint64_t smc;                  /* TSC of its translation if its bytes changed code (else 0) */
	const void *cut;               /* the TB without its last instruction (see transition) */
	uint16_t off[];                /* instruction i at pc + off[i] */
} Tb;

/* A FUP whose address waits for the IRET that returns there. */
enum { P_EXACT, P_FUP2, P_COND, P_IND };
typedef struct {
	uint8_t type;
	uint64_t a, b, c;              /* candidates (see resolve) */
	uint64_t off_br, off_fup;      /* stream offsets of the placeholders */
} Pend;

#define OUT_BUF (1u << 20)
#define MAX_PEND 256

typedef struct {
	int fd;
	uint8_t *buf;
	size_t len;
	uint64_t base;                 /* stream offset of buf[0] */
	uint64_t since_psb;
	uint64_t last_ip;
	int have_last_ip;
	uint32_t tnt_bits, tnt_n;
	const Tb *prev;
	uint64_t prev_d;               /* instructions started in prev */
	int started, enabled;
	uint8_t mode;                  /* the mode the stream says (at the last MODE.Exec) */
	uint8_t mode_pending;          /* mode changed: MODE.Exec before the next TIP/TIP.PGE */
	uint8_t lazy;                  /* ambiguous target: a placeholder before the next TIP */
	uint8_t undecided;             /* modes still possible since the placeholder at slot */
	uint64_t slot;
	uint64_t ctc_prev;
	uint64_t psb_tsc;              /* TSC of the last PSB+ */
	Pend pend[MAX_PEND];
	unsigned npend;
	long tid;
	uint64_t ran;                  /* instructions it started, traced or not (per-vCPU count) */
	uint64_t retired, asyncs, faults, rep_iters, unresolved, inflight, filtered, final_started, packets;
} Vcpu;

static struct {
	char *dir;
	int kernel_only;
	uint64_t limit, skip, psb_bytes;
	unsigned nvcpus;
	Vcpu *v;
	int code_fd;
	GMutex lock;                   /* translation: code log, learnt sets */
	GHashTable *vectors, *ret_sites;
	ZydisDecoder dec[3];           /* 16-, 32-, 64-bit */
	ZydisFormatter fmt;
	int kernel_seen;               /* a kernel-half block was translated */
	uint64_t started;              /* inline: instructions started (all vCPUs) */
	uint64_t mark;                 /* `started` at the last TB callback */
	int last_v;                    /* vCPU of the last TB callback (-1: none) */
	uint64_t before, trace_start, stopped_at;
	int stopped, mttcg;
	long first_tid;
	uint64_t translations, write_errors;
	uint64_t mode_changes, mode_resyncs, mode_ambiguous, mode_picked;   /* see write_meta */
	GString *code;
	GHashTable *pages;             /* page number -> Page: the code as last translated */
} g = { .last_v = -1, .code_fd = -1 };

typedef struct {
	uint8_t b[4096];
	uint8_t have[512];
} Page;

/* ------------------------------------------------------------ output */
static void out_flush(Vcpu *v)
{
	size_t done = 0;

	while (done < v->len) {
		ssize_t n = write(v->fd, v->buf + done, v->len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			g.write_errors++;  /* meta says so: the converter refuses */
			break;
		}
		done += (size_t)n;
	}
	v->base += v->len;
	v->len = 0;
}

static void out_put(Vcpu *v, const void *p, size_t n)
{
	if (v->len + n > OUT_BUF)
		out_flush(v);
	memcpy(v->buf + v->len, p, n);
	v->len += n;
	v->since_psb += n;
}

static uint64_t out_pos(const Vcpu *v)
{
	return v->base + v->len;
}

static void out_patch(Vcpu *v, uint64_t off, const void *p, size_t n)
{
	const uint8_t *s = p;

	for (size_t i = 0; i < n; i++, off++) {
		if (off >= v->base)
			v->buf[off - v->base] = s[i];
		else if (pwrite(v->fd, &s[i], 1, (off_t)off) != 1)
			return;
	}
}

/* ----------------------------------------------------------- packets */
static void tnt_flush(Vcpu *v)
{
	uint8_t b;

	if (!v->tnt_n)
		return;
	b = (uint8_t)(((1u << v->tnt_n) | v->tnt_bits) << 1);
	v->tnt_n = v->tnt_bits = 0;
	out_put(v, &b, 1);
	v->packets++;
}

static void put(Vcpu *v, const void *p, size_t n)
{
	tnt_flush(v);
	out_put(v, p, n);
	v->packets++;
}

static void tnt(Vcpu *v, int taken)
{
	v->tnt_bits = (v->tnt_bits << 1) | (taken != 0);
	if (++v->tnt_n == 6)
		tnt_flush(v);
}

/* MODE.Exec's payload: CS.L bit 0, CS.D bit 1 (16-bit: neither). */
static uint8_t mode_bits(uint8_t m)
{
	return m == M64 ? 0x01 : m == M32 ? 0x02 : 0x00;
}

/* Of the modes m: cur if it is one, else the nearest in width (the wider
 * of two). */
static uint8_t mode_pick(uint8_t cur, unsigned m)
{
	static const uint8_t near[5][3] = { [0] = { M64, M32, M16 }, [M16] = { M16, M32, M64 },
					    [M32] = { M32, M64, M16 }, [M64] = { M64, M32, M16 } };

	for (int i = 0; i < 3; i++)
		if (m & near[cur][i])
			return near[cur][i];
	return cur;
}

/* The placeholder at v->slot becomes MODE.Exec(m) (PAD PAD if m is the
 * mode before it). */
static void mode_decide(Vcpu *v, uint8_t m)
{
	uint8_t b[2] = { 0x99, mode_bits(m) };

	if (m == v->mode) {
		b[0] = b[1] = 0;
	} else {
		g.mode_changes++;
	}
	out_patch(v, v->slot, b, 2);
	v->mode = m;
	v->undecided = 0;
}

/* Undecided at a PSB+, a far transfer or the end: the likeliest mode. */
static void mode_settle(Vcpu *v)
{
	if (v->undecided) {
		g.mode_picked++;
		mode_decide(v, mode_pick(v->mode, v->undecided));
	}
}

/* An IP packet (opcode TIP 0x0d, FUP 0x1d, TIP.PGE 0x11, TIP.PGD 0x01),
 * compressed against the last IP; full: the 8-byte form (placeholders).
 * A pending MODE.Exec goes before a TIP/TIP.PGE (it binds to it). */
static void ip_pkt(Vcpu *v, uint8_t op, uint64_t ip, int full)
{
	uint8_t b[9];
	unsigned ipc, n;

	if ((v->mode_pending || v->lazy) && (op == 0x0d || op == 0x11)) {
		uint8_t m[2] = { 0x99, mode_bits(v->mode) };

		if (!v->mode_pending) {       /* PAD PAD until the mode is known */
			m[0] = m[1] = 0;
			tnt_flush(v);
			v->slot = out_pos(v);
			v->undecided = v->lazy;
		}
		put(v, m, 2);
		v->mode_pending = v->lazy = 0;
	}
	if (full)
		ipc = 6, n = 8;
	else if (v->have_last_ip && (ip >> 16) == (v->last_ip >> 16))
		ipc = 1, n = 2;
	else if (v->have_last_ip && (ip >> 32) == (v->last_ip >> 32))
		ipc = 2, n = 4;
	else if ((ip >> 47) == 0 || (ip >> 47) == 0x1ffff)
		ipc = 3, n = 6;
	else
		ipc = 6, n = 8;
	b[0] = (uint8_t)(op | ipc << 5);
	for (unsigned i = 0; i < n; i++)
		b[1 + i] = (uint8_t)(ip >> (8 * i));
	v->last_ip = ip;
	v->have_last_ip = 1;
	put(v, b, 1 + n);
}

static void ip_suppressed(Vcpu *v, uint8_t op)
{
	put(v, &op, 1);
}

static uint64_t now_tsc(void)
{
	return VT_TCG_T0 + g.started;
}

static uint64_t ctc_of(uint64_t tsc)
{
	return (uint64_t)((unsigned __int128)tsc * VT_TCG_CTC_D / VT_TCG_CTC_N);
}

/* MTC packets for every CTC period boundary crossed since the last. */
static void mtc(Vcpu *v, uint64_t tsc)
{
	uint64_t ctc = ctc_of(tsc);
	uint64_t b = (v->ctc_prev >> VT_TCG_MTC_PERIOD) + 1, e = ctc >> VT_TCG_MTC_PERIOD;

	for (; b <= e; b++) {
		uint8_t p[2] = { 0x59, (uint8_t)b };

		put(v, p, 2);
	}
	v->ctc_prev = ctc;
}

/* PSB+: TSC, TMA, CBR, PIP (CR3 0, NR=1), MODE.Exec 64-bit, FUP(ip) when
 * tracing is on. */
static void psb_plus(Vcpu *v, uint64_t ip, int with_fup)
{
	static const uint8_t psb[16] = { 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82 };
	uint64_t tsc = now_tsc(), ctc = ctc_of(tsc);
	uint64_t fc = tsc - (uint64_t)((unsigned __int128)ctc * VT_TCG_CTC_N / VT_TCG_CTC_D);
	uint8_t t[8] = { 0x19 }, tma[7] = { 2, 0x73, (uint8_t)ctc, (uint8_t)(ctc >> 8), 0, (uint8_t)fc,
					     (uint8_t)((fc >> 8) & 1) };
	uint8_t cbr[4] = { 2, 0x03, VT_TCG_CBR, 0 }, pip[8] = { 2, 0x43, 1 /* NR, CR3 0 */ };
	uint8_t mode[2] = { 0x99, mode_bits(v->mode) };
	uint8_t end[2] = { 2, 0x23 };

	for (int i = 0; i < 7; i++)
		t[1 + i] = (uint8_t)(tsc >> (8 * i));
	mode_settle(v);
	if (v->lazy) {                 /* a PSB+ before an ambiguous block's TIP.PGE */
		uint8_t m = mode_pick(v->mode, v->lazy);

		g.mode_picked++;
		g.mode_changes += m != v->mode;
		v->mode = m;
	}
	mode[1] = mode_bits(v->mode);
	put(v, psb, sizeof(psb));
	v->have_last_ip = 0;
	put(v, t, sizeof(t));
	put(v, tma, sizeof(tma));
	put(v, cbr, sizeof(cbr));
	put(v, pip, sizeof(pip));
	put(v, mode, sizeof(mode));
	v->mode_pending = v->lazy = 0;
	if (with_fup)
		ip_pkt(v, 0x1d, ip, 0);
	put(v, end, sizeof(end));
	v->ctc_prev = ctc;
	v->since_psb = 0;
	v->psb_tsc = tsc;
}

/* ------------------------------------------------ interrupt bookkeeping */
static uint64_t fall_of(const Tb *t)
{
	return t->last_ip + t->last_len;
}

/* A placeholder never filled in keeps its default: the expected address
 * (the last instruction retired) or, after an indirect branch, the branch
 * itself (not retired: counted with the restarted ones). */
static void pend_default(Vcpu *v, const Pend *p)
{
	if (p->type == P_FUP2 || p->type == P_COND)
		v->retired++;
	else if (p->type == P_IND)
		v->faults++;
}

static void pend_push(Vcpu *v, const Pend *p)
{
	if (v->npend == MAX_PEND) {
		v->unresolved += v->pend[0].type != P_EXACT;
		pend_default(v, &v->pend[0]);
		memmove(&v->pend[0], &v->pend[1], sizeof(Pend) * (MAX_PEND - 1));
		v->npend--;
	}
	v->pend[v->npend++] = *p;
}

static int pend_match(const Pend *p, uint64_t l)
{
	switch (p->type) {
	case P_EXACT: return l == p->a;
	case P_FUP2: return l == p->a || l == p->b;
	case P_COND: return l == p->a || l == p->b || l == p->c;
	default: return l == p->c;
	}
}

static void put_full_ip(uint8_t b[9], uint8_t op, uint64_t ip)
{
	b[0] = (uint8_t)(op | 6 << 5);
	for (int i = 0; i < 8; i++)
		b[1 + i] = (uint8_t)(ip >> (8 * i));
}

/* Fill a placeholder in with what the IRET to l says. */
static void pend_apply(Vcpu *v, const Pend *p, uint64_t l)
{
	uint8_t b[9];
	int faulted = 0;

	switch (p->type) {
	case P_FUP2:
		faulted = l == p->b;
		break;
	case P_COND: {
		uint8_t t = l == p->a ? 0x06 : l == p->b ? 0x04 : 0x00;   /* TNT taken / not / PAD */

		faulted = l == p->c;
		out_patch(v, p->off_br, &t, 1);
		break;
	}
	case P_IND:
		faulted = l == p->c;
		if (faulted) {
			memset(b, 0, sizeof(b));
		} else {
			put_full_ip(b, 0x0d, l);
		}
		out_patch(v, p->off_br, b, 9);
		break;
	default:
		return;
	}
	put_full_ip(b, 0x1d, l);
	out_patch(v, p->off_fup, b, 9);
	if (faulted) {
		v->faults++;
	} else {
		v->retired++;
	}
}

/* An IRET landed at l: the newest interrupt that returns there, else the
 * newest whose indirect branch target is unknown (same address half). */
static void pend_resolve(Vcpu *v, uint64_t l)
{
	int found = -1;

	for (int i = (int)v->npend - 1; i >= 0 && found < 0; i--)
		if (pend_match(&v->pend[i], l))
			found = i;
	for (int i = (int)v->npend - 1; i >= 0 && found < 0; i--)
		if (v->pend[i].type == P_IND && (v->pend[i].c >> 63) == (l >> 63))
			found = i;
	if (found < 0)
		return;
	pend_apply(v, &v->pend[found], l);
	memmove(&v->pend[found], &v->pend[found + 1], sizeof(Pend) * (v->npend - (unsigned)found - 1));
	v->npend--;
}

/* Interrupt or exception between prev and cur (prev fully started). */
static void async_after(Vcpu *v, const Tb *prev, Tb *cur, int type, uint64_t expected)
{
	Pend p = { .type = (uint8_t)type, .a = expected, .b = prev->last_ip, .c = prev->last_ip };
	uint8_t b[9];

	v->asyncs++;
	v->retired += prev->n - 1;   /* the last one: when the IRET tells */
	if (type == P_COND) {
		uint8_t t = 0x04;       /* not taken until known */

		p.a = prev->target;
		p.b = fall_of(prev);
		tnt_flush(v);
		p.off_br = out_pos(v);
		put(v, &t, 1);
		expected = p.b;
	} else if (type == P_IND) {
		memset(b, 0, sizeof(b));   /* PADs: as if the branch faulted, until known */
		tnt_flush(v);
		p.off_br = out_pos(v);
		put(v, b, 9);
		expected = prev->last_ip;
	} else {
		p.b = prev->last_ip;
	}
	tnt_flush(v);
	p.off_fup = out_pos(v);
	put_full_ip(b, 0x1d, expected);
	put(v, b, 9);
	v->last_ip = expected;
	ip_pkt(v, 0x0d, cur->pc, 1);
	pend_push(v, &p);
	if (!cur->vector) {
		cur->vector = 1;
		g_mutex_lock(&g.lock);
		g_hash_table_add(g.vectors, GSIZE_TO_POINTER(cur->pc));
		g_mutex_unlock(&g.lock);
	}
}

/* Exception at instruction i (< prev->n) of prev: exact. */
static void fault_at(Vcpu *v, const Tb *prev, uint32_t i, Tb *cur)
{
	Pend p = { .type = P_EXACT, .a = prev->pc + prev->off[i] };

	v->asyncs++;
	v->faults += i < prev->n;
	v->retired += i;
	ip_pkt(v, 0x1d, p.a, 0);
	ip_pkt(v, 0x0d, cur->pc, 0);
	pend_push(v, &p);
	cur->vector = 1;
}

/* ------------------------------------------------------------- flow */
static void transition(Vcpu *v, const Tb *prev, uint64_t d, Tb *cur)
{
	uint64_t pc = cur->pc;
	int looks_async = cur->vector && !cur->ret_site;

	/* QEMU 7.2 drops an instruction that crosses a page from the end of a
	 * TB after the plugin saw it (it starts the next TB): the TB ran
	 * without it */
	if (prev->cut && d == prev->n - 1)
		prev = prev->cut;
	if (d < prev->n) {
		if (pc == prev->pc + prev->off[d]) {   /* cut short, resumed right there */
			v->retired += d;
			return;
		}
		fault_at(v, prev, d ? (uint32_t)d - 1 : 0, cur);
		return;
	}
	switch (prev->kind) {
	case K_REP:
		if (pc == prev->last_ip) {         /* another iteration */
			v->retired += prev->n - 1;
			v->rep_iters++;
			return;
		}
		/* fall through */
	case K_OTHER:
		if (pc == fall_of(prev))
			break;
		async_after(v, prev, cur, P_FUP2, fall_of(prev));
		return;
	case K_JUMP:
	case K_CALL:
		if (pc == prev->target)
			break;
		async_after(v, prev, cur, P_FUP2, prev->target);
		return;
	case K_COND:
		if (pc == prev->target || pc == fall_of(prev)) {
			tnt(v, pc == prev->target && prev->target != fall_of(prev));
			break;
		}
		async_after(v, prev, cur, P_COND, 0);
		return;
	case K_SYSCALL:
		ip_pkt(v, 0x0d, pc, 0);
		break;
	case K_INT: {
		Pend p = { .type = P_EXACT, .a = fall_of(prev) };

		ip_pkt(v, 0x0d, pc, 0);
		pend_push(v, &p);
		cur->vector = 1;
		break;
	}
	default:                                   /* K_IND, K_RET, K_FAR, K_IRET */
		if (looks_async) {
			async_after(v, prev, cur, P_IND, 0);
			return;
		}
		ip_pkt(v, 0x0d, pc, 0);
		if (prev->kind == K_IRET)
			pend_resolve(v, pc);
		break;
	}
	v->retired += prev->n;
}

/* Is prev -> cur ordinary flow (prev ran in full; cur is where its last
 * instruction goes)?  Then a PSB+ for changed code goes before it, FUP =
 * that instruction: libipt takes the PSB+'s time there, before it walks
 * on into cur (a PSB+ after the transition is seen only at the next
 * packet the walk needs, after it read cur's bytes). */
static int plain_flow(const Tb *prev, uint64_t d, const Tb *cur)
{
	if ((prev->cut && d == prev->n - 1) || d < prev->n)
		return 0;
	switch (prev->kind) {
	case K_REP:
		return cur->pc == prev->last_ip || cur->pc == fall_of(prev);
	case K_OTHER:
		return cur->pc == fall_of(prev);
	case K_JUMP: case K_CALL:
		return cur->pc == prev->target;
	case K_COND:
		return cur->pc == prev->target || cur->pc == fall_of(prev);
	case K_IND: case K_RET: case K_FAR: case K_IRET:
		return !(cur->vector && !cur->ret_site);
	default:
		return 1;
	}
}

/* Is prev -> cur a transfer that may change the mode (far branch, IRET,
 * INT, SYSCALL, interrupt, exception, trace start)?  Near branches and
 * straight flow do not. */
static int mode_may_change(const Tb *prev, uint64_t d, const Tb *cur)
{
	if (!prev || !plain_flow(prev, d, cur))
		return 1;
	return prev->kind == K_FAR || prev->kind == K_IRET || prev->kind == K_INT || prev->kind == K_SYSCALL;
}

/* The vCPU enters cur (traced): a known mode change is a MODE.Exec before
 * the next TIP; a block that runs alike in several modes keeps them
 * open - after a transfer that may change the mode, behind a placeholder
 * before its TIP - until a later block decides. */
static void mode_enter(Vcpu *v, const Tb *prev, uint64_t d, const Tb *cur)
{
	unsigned m = cur->modes;

	if (v->undecided) {
		if (!(v->undecided & m) || mode_may_change(prev, d, cur)) {
			mode_settle(v);
		} else {
			v->undecided &= m;
			if (!(v->undecided & (v->undecided - 1)))
				mode_decide(v, v->undecided);
			return;
		}
	}
	if (!(m & (m - 1))) {
		if (m != v->mode) {
			v->mode = (uint8_t)m;
			v->mode_pending = 1;
			g.mode_changes++;
		}
	} else if (!(m & v->mode) || mode_may_change(prev, d, cur)) {
		v->lazy = (uint8_t)m;
	}
}

/* A mode change where no TIP went (it cannot happen on hardware: the
 * block was given a wrong mode): tracing stops before cur and starts
 * again at it, MODE.Exec before the TIP.PGE. */
static void mode_resync(Vcpu *v, const Tb *cur)
{
	if (!v->mode_pending && !v->lazy)
		return;
	if (v->lazy && (v->lazy & v->mode)) {   /* may stay: it does */
		v->lazy = 0;
		return;
	}
	g.mode_resyncs++;
	ip_pkt(v, 0x1d, cur->pc, 0);
	ip_suppressed(v, 0x01);
	ip_pkt(v, 0x11, cur->pc, 0);
}

/* Of several modes, the first block picks the nearest to 16-bit: a vCPU
 * starts in real mode (reset, INIT/SIPI); a kernel-half start is 64-bit. */
static void trace_begin(Vcpu *v, Tb *cur)
{
	v->mode = mode_pick(M16, cur->modes);
	psb_plus(v, 0, 0);
	ip_pkt(v, 0x11, cur->pc, 0);           /* TIP.PGE */
	v->enabled = 1;
}

/* Tracing stops before prev (none of it counted as retired). */
static void trace_end(Vcpu *v)
{
	if (!v->enabled || !v->prev)
		return;
	mode_settle(v);
	ip_pkt(v, 0x1d, v->prev->pc, 0);
	ip_suppressed(v, 0x01);                 /* TIP.PGD */
	v->enabled = 0;
}

static int in_filter(const Tb *t)
{
	return !g.kernel_only || t->kernel;
}

static void step(Vcpu *v, Tb *cur)
{
	const Tb *prev = v->prev;
	uint64_t d = v->prev_d;

	if (v->enabled) {
		mtc(v, now_tsc());
		if (in_filter(cur)) {
			if (cur->smc > v->psb_tsc && plain_flow(prev, d, cur))
				psb_plus(v, prev->last_ip, 1);
			mode_enter(v, prev, d, cur);
			transition(v, prev, d, cur);
			mode_resync(v, cur);
		} else {                           /* leaving the filter: far transfer to user */
			v->retired += MIN(d, prev->n);
			ip_suppressed(v, 0x01);
			v->enabled = 0;
		}
	} else {
		v->filtered += d;
		if (in_filter(cur)) {
			mode_enter(v, NULL, 0, cur);
			if (ctc_of(now_tsc()) - v->ctc_prev >= (128ULL << VT_TCG_MTC_PERIOD))
				psb_plus(v, 0, 0);
			else
				mtc(v, now_tsc());
			ip_pkt(v, 0x11, cur->pc, 0);
			v->enabled = 1;
		}
	}
	/* code that changed (a TEXT_POKE at its translation's time) starts after
	 * a PSB+: its TSC puts a decoder's time at or past the poke before it
	 * reads the new bytes */
	if (v->enabled && (v->since_psb >= g.psb_bytes || cur->smc > v->psb_tsc))
		psb_plus(v, cur->pc, 1);
}

static void stop_all(void)
{
	for (unsigned i = 0; i < g.nvcpus; i++) {
		Vcpu *v = &g.v[i];

		if (!v->started)
			continue;
		if ((int)i == g.last_v)
			v->prev_d = g.started - g.mark;
		if (v->enabled)
			v->final_started += v->prev_d;
		else
			v->filtered += v->prev_d;
		trace_end(v);
		tnt_flush(v);
		out_flush(v);
	}
	g.stopped = 1;
	g.stopped_at = g.started;
}

/* Does a vCPU not traced yet start at cur?  At its first block (in the
 * filter); with skip=N at its first kernel-half block after N, or - all
 * traced - at a real-mode block after N: an AP that INIT/SIPI started
 * (Linux's trampoline), so that its startup is traced from its first
 * instruction (16-, 32-, 64-bit) as the boot CPU's is from the reset
 * vector. */
static int start_here(const Tb *cur)
{
	if (!g.skip)
		return in_filter(cur);
	return g.started >= g.skip && (cur->kernel || (!g.kernel_only && cur->modes == M16));
}

static void vcpu_tb_exec(unsigned int vi, void *udata)
{
	Tb *cur = udata;
	Vcpu *v;
	uint64_t d;

	if (vi >= g.nvcpus)
		return;
	v = &g.v[vi];
	d = g.started - g.mark;
	g.mark = g.started;
	if (g.last_v >= 0)
		g.v[g.last_v].ran += d;
	if (g.stopped) {
		g.last_v = (int)vi;
		return;
	}
	if (g.last_v >= 0 && g.v[g.last_v].started)
		g.v[g.last_v].prev_d = d;
	else
		g.before += d;
	g.last_v = (int)vi;
	if (!v->started) {
		if (!start_here(cur))
			return;
		v->started = 1;
		v->tid = gettid();
		if (!g.trace_start)
			g.trace_start = g.started;
		if (!g.first_tid)
			g.first_tid = v->tid;
		trace_begin(v, cur);
	} else {
		step(v, cur);
	}
	if (v->tid != g.first_tid)
		g.mttcg = 1;
	v->prev = cur;
	if (g.limit && g.started - g.trace_start >= g.limit)
		stop_all();
}

/* -------------------------------------------------------- translation */
static int mode_index(uint8_t m)
{
	return m == M16 ? 0 : m == M32 ? 1 : 2;
}

/* The last instruction's kind, decoded in mode m.  A direct target is IP
 * + size + displacement (no 16/32-bit wrap: libipt's arithmetic too). */
static uint8_t classify(const uint8_t *code, size_t len, uint64_t ip, uint8_t m, uint64_t *target)
{
	ZydisDecodedInstruction in;
	ZydisDecodedOperand op[ZYDIS_MAX_OPERAND_COUNT];
	int direct;

	*target = 0;
	if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&g.dec[mode_index(m)], code, len, &in, op)))
		return K_OTHER;
	direct = in.operand_count_visible > 0 && op[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE && op[0].imm.is_relative;
	if (direct)
		*target = ip + in.length + (uint64_t)op[0].imm.value.s;
	if (in.mnemonic == ZYDIS_MNEMONIC_IRET || in.mnemonic == ZYDIS_MNEMONIC_IRETD ||
	    in.mnemonic == ZYDIS_MNEMONIC_IRETQ)
		return K_IRET;           /* before the categories: Zydis files IRET under RET */
	switch (in.meta.category) {
	case ZYDIS_CATEGORY_COND_BR:
		return K_COND;
	case ZYDIS_CATEGORY_UNCOND_BR:
		return in.meta.branch_type == ZYDIS_BRANCH_TYPE_FAR ? K_FAR : direct ? K_JUMP : K_IND;
	case ZYDIS_CATEGORY_CALL:
		return in.meta.branch_type == ZYDIS_BRANCH_TYPE_FAR ? K_FAR : direct ? K_CALL : K_IND;
	case ZYDIS_CATEGORY_RET:
		return in.meta.branch_type == ZYDIS_BRANCH_TYPE_FAR ? K_FAR : K_RET;
	default:
		break;
	}
	switch (in.mnemonic) {
	case ZYDIS_MNEMONIC_SYSCALL: case ZYDIS_MNEMONIC_SYSENTER:
		return K_SYSCALL;
	case ZYDIS_MNEMONIC_SYSRET: case ZYDIS_MNEMONIC_SYSEXIT:
		return K_FAR;
	case ZYDIS_MNEMONIC_INT: case ZYDIS_MNEMONIC_INT1: case ZYDIS_MNEMONIC_INT3: case ZYDIS_MNEMONIC_INTO:
		return K_INT;
	default:
		break;
	}
	if (in.attributes & (ZYDIS_ATTRIB_HAS_REP | ZYDIS_ATTRIB_HAS_REPE | ZYDIS_ATTRIB_HAS_REPNE))
		return K_REP;
	return K_OTHER;
}

/* Did the bytes at a..a+n change since they were last translated?  (The
 * converter emits a TEXT_POKE for it.)  Under g.lock. */
static int code_changed(uint64_t a, const uint8_t *b, size_t n)
{
	int changed = 0;

	for (size_t i = 0; i < n; i++, a++) {
		Page *p = g_hash_table_lookup(g.pages, GSIZE_TO_POINTER(a >> 12));
		unsigned o = a & 4095;

		if (!p) {
			p = g_new0(Page, 1);
			g_hash_table_insert(g.pages, GSIZE_TO_POINTER(a >> 12), p);
		}
		if ((p->have[o / 8] >> (o % 8)) & 1)
			changed |= p->b[o] != b[i];
		p->b[o] = b[i];
		p->have[o / 8] |= (uint8_t)(1u << (o % 8));
	}
	return changed;
}

static void code_log(Tb *t, struct qemu_plugin_tb *tb)
{
	VtTcgCodeHeader h = { .vaddr = t->pc, .tsc = now_tsc() };
	size_t start = g.code->len;

	g_string_set_size(g.code, start + sizeof(h));
	for (uint32_t i = 0; i < t->n; i++) {
		struct qemu_plugin_insn *in = qemu_plugin_tb_get_insn(tb, i);

		g_string_append_len(g.code, qemu_plugin_insn_data(in), (gssize)qemu_plugin_insn_size(in));
	}
	if (t->kernel || !g.kernel_seen || t->mode != M64)
		h.flags = VT_TCG_CODE_POKE;
	if (h.flags && code_changed(t->pc, (const uint8_t *)g.code->str + start + sizeof(h),
				    g.code->len - start - sizeof(h)))
		t->smc = h.tsc;
	h.len = (uint32_t)(g.code->len - start - sizeof(h));
	memcpy(g.code->str + start, &h, sizeof(h));
	if (g.code->len >= OUT_BUF) {
		if (write(g.code_fd, g.code->str, g.code->len) != (ssize_t)g.code->len)
			g.write_errors++;
		g_string_set_size(g.code, 0);
	}
}

/* The TB without its last instruction when that one crosses a page (and
 * is not the only one): what QEMU 7.2 runs. */
static const Tb *cut_of(const Tb *t)
{
	Tb *c;

	if (t->n < 2 || (t->last_ip >> 12) == ((t->last_ip + t->last_len - 1) >> 12))
		return NULL;
	c = g_malloc0(sizeof(Tb) + (t->n - 1) * sizeof(uint16_t));
	*c = *t;
	c->n = t->n - 1;
	memcpy(c->off, t->off, c->n * sizeof(uint16_t));
	c->last_ip = t->pc + t->off[c->n - 1];
	c->last_len = (uint8_t)(t->off[c->n] - t->off[c->n - 1]);
	c->kind = K_OTHER;             /* else the TB would have ended there */
	c->target = 0;
	c->cut = NULL;
	return c;
}

/* The modes in which Zydis decodes every instruction of tb to QEMU's
 * size (an instruction no mode decodes to it is left out). */
static unsigned modes_by_size(const struct qemu_plugin_tb *tb, size_t n)
{
	unsigned m = M16 | M32 | M64;

	for (size_t i = 0; i < n && (m & (m - 1)); i++) {
		const struct qemu_plugin_insn *in = qemu_plugin_tb_get_insn(tb, i);
		size_t size = qemu_plugin_insn_size(in);
		unsigned ok = 0;

		for (int k = 0; k < 3; k++) {
			ZydisDecodedInstruction zi;

			if ((m >> k & 1) &&
			    ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&g.dec[k], NULL, qemu_plugin_insn_data(in), size, &zi)) &&
			    zi.length == size)
				ok |= 1u << k;
		}
		if (ok)
			m = ok;
	}
	return m;
}

/* The register names of an AT&T text ("%ax,%bx" -> "ax,bx,"). */
static void regs_of(const char *s, char *out, size_t n)
{
	size_t k = 0;

	for (; *s; s++) {
		if (*s != '%')
			continue;
		while (g_ascii_isalnum(s[1]) && k + 2 < n)
			out[k++] = *++s;
		if (k + 1 < n)
			out[k++] = ',';
	}
	out[k] = 0;
}

/* Of the modes m, those in which Zydis names the registers QEMU's own
 * disassembly names (made in the translating vCPU's mode) for the most
 * instructions. */
static unsigned modes_by_disas(const struct qemu_plugin_tb *tb, size_t n, unsigned m)
{
	unsigned score[3] = { 0 }, best = 0, keep = 0;

	for (size_t i = 0; i < n; i++) {
		const struct qemu_plugin_insn *in = qemu_plugin_tb_get_insn(tb, i);
		char *q = qemu_plugin_insn_disas(in);
		char qr[128], zr[128], text[256];

		if (!q)
			continue;
		regs_of(q, qr, sizeof(qr));
		g_free(q);
		for (int k = 0; k < 3; k++) {
			ZydisDecodedInstruction zi;
			ZydisDecodedOperand op[ZYDIS_MAX_OPERAND_COUNT];

			if (!(m >> k & 1) ||
			    !ZYAN_SUCCESS(ZydisDecoderDecodeFull(&g.dec[k], qemu_plugin_insn_data(in), qemu_plugin_insn_size(in),
								 &zi, op)) ||
			    !ZYAN_SUCCESS(ZydisFormatterFormatInstruction(&g.fmt, &zi, op, zi.operand_count_visible, text,
									  sizeof(text), qemu_plugin_insn_vaddr(in), NULL)))
				continue;
			regs_of(text, zr, sizeof(zr));
			score[k] += !strcmp(qr, zr);
		}
	}
	for (int k = 0; k < 3; k++)
		if (m >> k & 1)
			best = MAX(best, score[k]);
	for (int k = 0; k < 3; k++)
		if ((m >> k & 1) && score[k] == best)
			keep |= 1u << k;
	return keep;
}

/* tb's candidate modes and the likely one (of several: the nearest to the
 * mode of the vCPU that ran last - the one that translates). */
static void tb_modes(Tb *t, const struct qemu_plugin_tb *tb)
{
	unsigned m = M64;

	if (!(t->pc >> 32)) {
		m = modes_by_size(tb, t->n);
		if (m & (m - 1))
			m = modes_by_disas(tb, t->n, m);
	}
	t->modes = (uint8_t)m;
	if (!(m & (m - 1))) {
		t->mode = (uint8_t)m;
		return;
	}
	g.mode_ambiguous++;
	t->mode = mode_pick(g.last_v >= 0 ? g.v[g.last_v].mode : 0, m);
}

static void vcpu_tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	size_t n = qemu_plugin_tb_n_insns(tb);
	Tb *t;
	struct qemu_plugin_insn *last;

	(void)id;
	if (!n)
		return;
	t = g_malloc0(sizeof(Tb) + n * sizeof(uint16_t));
	t->pc = qemu_plugin_tb_vaddr(tb);
	t->n = (uint32_t)n;
	t->kernel = t->pc >> 63;
	for (size_t i = 0; i < n; i++) {
		struct qemu_plugin_insn *in = qemu_plugin_tb_get_insn(tb, i);

		t->off[i] = (uint16_t)(qemu_plugin_insn_vaddr(in) - t->pc);
		qemu_plugin_register_vcpu_insn_exec_inline(in, QEMU_PLUGIN_INLINE_ADD_U64, &g.started, 1);
	}
	last = qemu_plugin_tb_get_insn(tb, n - 1);
	t->last_ip = qemu_plugin_insn_vaddr(last);
	t->last_len = (uint8_t)qemu_plugin_insn_size(last);
	tb_modes(t, tb);
	t->kind = classify(qemu_plugin_insn_data(last), t->last_len, t->last_ip, t->mode, &t->target);
	t->cut = cut_of(t);
	g_mutex_lock(&g.lock);
	g.kernel_seen |= t->kernel;
	if (t->kind == K_CALL || (t->kind == K_IND && t->last_len))
		g_hash_table_add(g.ret_sites, GSIZE_TO_POINTER(fall_of(t)));
	t->vector = g_hash_table_contains(g.vectors, GSIZE_TO_POINTER(t->pc));
	t->ret_site = g_hash_table_contains(g.ret_sites, GSIZE_TO_POINTER(t->pc));
	/* user code from the start too: QEMU keeps a translation for as long as
	 * the code stays, so code a process translated before tracing began
	 * (--tcg-skip) runs again later with no translation to log it */
	if (t->kernel || !g.kernel_only)
		code_log(t, tb);
	g.translations++;
	g_mutex_unlock(&g.lock);
	qemu_plugin_register_vcpu_tb_exec_cb(tb, vcpu_tb_exec, QEMU_PLUGIN_CB_NO_REGS, t);
}

/* ---------------------------------------------------------------- exit */
static void write_meta(void)
{
	g_autofree char *path = g_build_filename(g.dir, "meta", NULL);
	GString *s = g_string_new(NULL);

	g_string_append_printf(s, "format %d\napi %d\nvcpus %u\nfilter %s\nmttcg %d\nskip %" G_GUINT64_FORMAT
			       "\nlimit %" G_GUINT64_FORMAT "\n", VT_TCG_FORMAT, VT_QEMU_PLUGIN_API, g.nvcpus,
			       g.kernel_only ? "kernel" : "all", g.mttcg, g.skip, g.limit);
	g_string_append_printf(s, "started %" G_GUINT64_FORMAT "\nbefore %" G_GUINT64_FORMAT "\nafter %" G_GUINT64_FORMAT
			       "\ntranslations %" G_GUINT64_FORMAT "\nwrite_errors %" G_GUINT64_FORMAT "\n", g.started, g.before,
			       g.started - g.stopped_at, g.translations, g.write_errors);
	/* MODE.Exec changes written; of them by a TIP.PGD/TIP.PGE pair; blocks
	 * translated with several possible modes; placeholders decided by
	 * preference (not by a later block) */
	g_string_append_printf(s, "mode_changes %" G_GUINT64_FORMAT "\nmode_resyncs %" G_GUINT64_FORMAT
			       "\nmode_ambiguous %" G_GUINT64_FORMAT "\nmode_picked %" G_GUINT64_FORMAT "\n", g.mode_changes,
			       g.mode_resyncs, g.mode_ambiguous, g.mode_picked);
	for (unsigned i = 0; i < g.nvcpus; i++) {
		const Vcpu *v = &g.v[i];

		if (!v->started)
			continue;
		g_string_append_printf(s, "vcpu %u tid %ld bytes %" G_GUINT64_FORMAT " packets %" G_GUINT64_FORMAT
				       " retired %" G_GUINT64_FORMAT " async %" G_GUINT64_FORMAT " faults %"
				       G_GUINT64_FORMAT " rep %" G_GUINT64_FORMAT " unresolved %" G_GUINT64_FORMAT
				       " filtered %" G_GUINT64_FORMAT " final %" G_GUINT64_FORMAT " inflight %"
				       G_GUINT64_FORMAT " ran %" G_GUINT64_FORMAT "\n", i, v->tid, out_pos(v), v->packets,
				       v->retired, v->asyncs, v->faults, v->rep_iters, v->unresolved, v->filtered,
				       v->final_started, v->inflight, v->ran);
	}
	g_file_set_contents(path, s->str, (gssize)s->len, NULL);
	g_string_free(s, TRUE);
}

static void plugin_exit(qemu_plugin_id_t id, void *p)
{
	(void)id;
	(void)p;
	if (!g.stopped)
		stop_all();   /* after: 0 */
	if (g.last_v >= 0)
		g.v[g.last_v].ran += g.started - g.mark;
	g.mark = g.started;
	/* interrupts still in flight when tracing stopped keep their defaults */
	for (unsigned i = 0; i < g.nvcpus; i++)
		for (unsigned k = 0; k < g.v[i].npend; k++) {
			g.v[i].inflight += g.v[i].pend[k].type != P_EXACT;
			pend_default(&g.v[i], &g.v[i].pend[k]);
		}
	if (g.code->len && write(g.code_fd, g.code->str, g.code->len) != (ssize_t)g.code->len)
		g.write_errors++;
	write_meta();
	for (unsigned i = 0; i < g.nvcpus; i++)
		if (g.v[i].fd >= 0)
			close(g.v[i].fd);
	close(g.code_fd);
}

static int refuse(const char *fmt, ...) G_GNUC_PRINTF(1, 2);
static int refuse(const char *fmt, ...)
{
	va_list ap;
	g_autofree char *msg = NULL;
	g_autofree char *line = NULL;

	va_start(ap, fmt);
	msg = g_strdup_vprintf(fmt, ap);
	va_end(ap);
	line = g_strdup_printf("vmtrace-tcg: %s\n", msg);
	/* qemu_plugin_outs goes to QEMU's log (-d plugin), unseen at install */
	fputs(line, stderr);
	return -1;
}

static int parse_args(int argc, char **argv)
{
	g.psb_bytes = 16384;
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];

		if (g_str_has_prefix(a, "out="))
			g.dir = g_strdup(a + 4);
		else if (!strcmp(a, "filter=kernel"))
			g.kernel_only = 1;
		else if (!strcmp(a, "filter=all"))
			g.kernel_only = 0;
		else if (g_str_has_prefix(a, "limit="))
			g.limit = g_ascii_strtoull(a + 6, NULL, 0);
		else if (g_str_has_prefix(a, "skip="))
			g.skip = g_ascii_strtoull(a + 5, NULL, 0);
		else if (g_str_has_prefix(a, "psb="))
			g.psb_bytes = MAX(g_ascii_strtoull(a + 4, NULL, 0), 256);
		else
			return refuse("unknown argument '%s' (out=DIR, filter=kernel|all, skip=N, limit=N, psb=BYTES)", a);
	}
	if (!g.dir)
		return refuse("%s", "needs out=DIR");
	return 0;
}

static int open_files(void)
{
	g_autofree char *cp = g_build_filename(g.dir, "code", NULL);

	if (g_mkdir_with_parents(g.dir, 0700) < 0)
		return refuse("cannot create %s: %s", g.dir, g_strerror(errno));
	g.code_fd = open(cp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (g.code_fd < 0)
		return refuse("cannot create %s: %s", cp, g_strerror(errno));
	for (unsigned i = 0; i < g.nvcpus; i++) {
		g_autofree char *name = g_strdup_printf("vcpu%u.pt", i);
		g_autofree char *p = g_build_filename(g.dir, name, NULL);

		g.v[i].fd = open(p, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (g.v[i].fd < 0)
			return refuse("cannot create %s: %s", p, g_strerror(errno));
		g.v[i].buf = g_malloc(OUT_BUF);
	}
	return 0;
}

VT_QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
	if (info->version.min > VT_QEMU_PLUGIN_API || info->version.cur < VT_QEMU_PLUGIN_API)
		return refuse("QEMU speaks plugin API versions %d to %d; this plugin speaks only version %d (QEMU 7.2)",
			      info->version.min, info->version.cur, VT_QEMU_PLUGIN_API);
	if (!info->system_emulation || strcmp(info->target_name, "x86_64"))
		return refuse("records x86_64 system emulation only (this QEMU: %s%s)", info->target_name,
			      info->system_emulation ? "" : " user mode");
	if (parse_args(argc, argv))
		return -1;
	g.nvcpus = (unsigned)MAX(info->system.max_vcpus, 1);
	g.v = g_new0(Vcpu, g.nvcpus);
	for (unsigned i = 0; i < g.nvcpus; i++)
		g.v[i].fd = -1;
	if (open_files())
		return -1;
	g.vectors = g_hash_table_new(NULL, NULL);
	g.ret_sites = g_hash_table_new(NULL, NULL);
	g.code = g_string_sized_new(OUT_BUF + 65536);
	g.pages = g_hash_table_new_full(NULL, NULL, NULL, g_free);
	g_mutex_init(&g.lock);
	ZydisDecoderInit(&g.dec[0], ZYDIS_MACHINE_MODE_LEGACY_16, ZYDIS_STACK_WIDTH_16);
	ZydisDecoderInit(&g.dec[1], ZYDIS_MACHINE_MODE_LEGACY_32, ZYDIS_STACK_WIDTH_32);
	ZydisDecoderInit(&g.dec[2], ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
	ZydisFormatterInit(&g.fmt, ZYDIS_FORMATTER_STYLE_ATT);
	qemu_plugin_register_vcpu_tb_trans_cb(id, vcpu_tb_trans);
	qemu_plugin_register_atexit_cb(id, plugin_exit, NULL);
	return 0;
}
