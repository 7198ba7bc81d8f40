/* pt-scan.h - Intel PT packet scanner.
 *
 * A fast, allocation-free scanner over a contiguous buffer of Intel PT
 * bytes (an AUX payload, usually a read buffer holding it).  It
 * yields one packet at a time with its offset, size and decoded payload,
 * and reconstructs full IPs for TIP/TIP.PGE/TIP.PGD/FUP from the last-IP
 * state (reset at PSB).  Packet boundaries and payloads agree with libipt's
 * packet decoder (pt_pkt_next); tests/test-pt-scan cross-checks that.
 *
 * Errors follow libipt's convention: negative return codes
 * (VtPtErrorCode) with a string table (vt_pt_errstr).  Nothing here
 * prints, allocates or exits.
 */
#ifndef VT_PT_SCAN_H
#define VT_PT_SCAN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum VtPtErrorCode {
	vt_pte_ok = 0,
	vt_pte_eos = 1,          /* end of buffer (clean, or packet cut short) */
	vt_pte_bad_opc = 2,      /* unknown opcode */
	vt_pte_bad_packet = 3,   /* known opcode, invalid payload (e.g. TMA reserved bits) */
	vt_pte_nosync = 4,       /* no PSB found */
	vt_pte_invalid = 5,      /* bad argument */
} VtPtErrorCode;

const char *vt_pt_errstr(int code);   /* takes the positive or negative code */

typedef enum VtPtPacketType {
	VT_PT_BAD = 0,
	VT_PT_PAD,
	VT_PT_PSB,
	VT_PT_PSBEND,
	VT_PT_TNT_8,
	VT_PT_TNT_64,
	VT_PT_TIP,
	VT_PT_TIP_PGE,
	VT_PT_TIP_PGD,
	VT_PT_FUP,
	VT_PT_MODE_EXEC,
	VT_PT_MODE_TSX,
	VT_PT_TSC,
	VT_PT_TMA,
	VT_PT_MTC,
	VT_PT_CYC,
	VT_PT_CBR,
	VT_PT_PIP,
	VT_PT_VMCS,
	VT_PT_OVF,
	VT_PT_STOP,
	VT_PT_MNT,
	VT_PT_PTW,
	VT_PT_EXSTOP,
	VT_PT_MWAIT,
	VT_PT_PWRE,
	VT_PT_PWRX,
	VT_PT_BBP,
	VT_PT_BIP,
	VT_PT_BEP,
	VT_PT_CFE,
	VT_PT_EVD,
	VT_PT_NTYPES
} VtPtPacketType;

const char *vt_pt_packet_name(VtPtPacketType t);   /* "TSC", "PIP", ... */

typedef struct VtPtPacket VtPtPacket;
struct VtPtPacket {
	VtPtPacketType type;
	uint8_t size;            /* bytes of this packet */
	uint64_t offset;         /* offset of the first byte within the buffer (+ base) */
	union {
		/* TSC: 56-bit value */
		uint64_t tsc;
		/* TMA */
		struct { uint16_t ctc; uint16_t fc; } tma;
		/* MTC: 8-bit CTC payload */
		uint8_t mtc;
		/* CYC: cycle count */
		uint64_t cyc;
		/* CBR: core:bus ratio */
		uint8_t cbr;
		/* PIP: cr3 (bits 51:5, low 5 bits zero, as libipt) and NR bit */
		struct { uint64_t cr3; uint8_t nr; } pip;
		/* VMCS: raw 40-bit payload (= VMCS base >> 12, as perf prints it) */
		uint64_t vmcs;
		/* TIP / TIP.PGE / TIP.PGD / FUP */
		struct {
			uint8_t ipc;        /* IPBytes field: 0,1,2,3,4,6 */
			uint64_t raw;       /* payload as in the packet (libipt's ip.ip) */
			uint64_t ip;        /* reconstructed full IP (valid unless suppressed) */
			uint8_t suppressed; /* ipc 0 or last-IP not yet known for partial update */
		} ip;
		/* TNT-8 / TNT-64: bits excluding the stop bit; oldest branch is MSB */
		struct { uint64_t payload; uint8_t bit_size; } tnt;
		/* MODE.Exec: csl/csd bits (bit1:0 = CS.D/CS.L as in the packet), if: bit2 */
		struct { uint8_t bits; } mode;
		/* MNT, PTW, EXSTOP, MWAIT, PWRE, PWRX, BBP, BIP, BEP, CFE, EVD: raw */
		struct { uint64_t payload; uint32_t extra; } misc;
	} u;
};

/* Scanner state.  Initialise with vt_pt_scan_init; the buffer must stay
 * valid while scanning. */
typedef struct VtPtScanner VtPtScanner;
struct VtPtScanner {
	const uint8_t *begin, *end, *pos;
	uint64_t base;           /* added to every reported offset (e.g. file offset of begin) */
	uint64_t last_ip;        /* last-IP compression state */
	uint8_t have_last_ip;
	uint8_t bip_ctx;         /* 0, or 4/8: size of BIP items after a BBP */
};

void vt_pt_scan_init(VtPtScanner *s, const uint8_t *buf, size_t len, uint64_t base);

/* Decode the packet at the current position.  Returns the packet size
 * (> 0) and advances, or a negative vt_pt_error_code:
 *   -vt_pte_eos        no more bytes (or the last packet is cut off: then
 *                      pkt->offset is set to where it starts),
 *   -vt_pte_bad_opc / -vt_pte_bad_packet   at pkt->offset; the scanner
 *                      does not advance: call vt_pt_scan_sync_forward.
 * Unlike perf, PAD bytes are returned as separate 1-byte packets. */
int vt_pt_scan_next(VtPtScanner *s, VtPtPacket *pkt);

/* Move to the next PSB.  With `at_ok`, the first PSB at or after the
 * current position.  Without, the next PSB other than one at the current
 * position, searching (like libipt's pt_pkt_sync_forward after an error)
 * from up to 15 bytes *before* the current position, so that a PSB that a
 * mis-decoded packet partially swallowed is found; the new position can
 * therefore be slightly below the failing offset, but always beyond it
 * once the PSB has been read.  In a run of more than eight "02 82" pairs
 * the PSB is the last 16 bytes (as libipt).  Resets last-IP (to zero and
 * known, as at a PSB) and the BIP context.  Returns 0 or -vt_pte_nosync
 * (position is then at end). */
int vt_pt_scan_sync_forward(VtPtScanner *s, int at_ok);

/* Accumulator for vt_pt_scan_skip_flow.  MTC: the sum of the CTC steps
 * of skipped MTC packets, in MTC periods, each step being (payload -
 * previous payload) mod 256 with a zero difference counted as 256 (a full
 * wrap, as perf's decoder assumes).  Set `last` to the previous MTC
 * payload first.  PIP: with `skip_pip` set, PIP packets are skipped too;
 * `pip_count` counts them and `pip_nr` is the NR bit of the last one (for
 * consumers that only need the current NR at the next packet that stops
 * the skipping). */
typedef struct VtPtMtcAcc VtPtMtcAcc;
struct VtPtMtcAcc {
	uint8_t last;
	uint64_t ticks;
	uint32_t count;
	uint8_t skip_pip;
	uint8_t pip_nr;
	uint32_t pip_count;
	/* vt_pt_scan_skip_flow/_flow2 with `skip_pgd` set also skip a
	 * TIP.PGD followed by nothing but PAD, CYC, MODE, MTC (and PIP with
	 * skip_pip) up to a TIP.PGE, accumulating those MTCs and PIPs in
	 * order: tracing was off in between and is on again after it (an
	 * exit to user space and back).  `pgd_count` counts them.  A stretch
	 * that does not end so (or not 16 bytes before the end) is not
	 * skipped: the skipping stops at its TIP.PGD. */
	uint8_t skip_pgd;
	uint32_t pgd_count;
};

/* Skip, without decoding, packets that only report control flow: PAD,
 * TNT-8, CYC, TIP, TIP.PGE and FUP (not TIP.PGD, but a whole TIP.PGD
 * stretch with acc->skip_pgd), valid MODE, and MTC when `acc` is given
 * (accumulating them; PIP too with acc->skip_pip), stopping before any
 * other packet,
 * before an invalid one, or 16 bytes before the end.  For consumers that
 * only track timing and context (VM time correlation) while tracing is
 * known to be enabled.  If an IP packet was skipped, the last IP becomes
 * unknown (later partial IPs report suppressed).  Returns the number of
 * bytes skipped. */
size_t vt_pt_scan_skip_flow(VtPtScanner *s, VtPtMtcAcc *acc);
/* The same while tracing is known to be disabled (after TIP.PGD): only
 * PAD, CYC, valid MODE, and MTC (PIP) through `acc`; TNT-8 and IP
 * packets stop it, as everything else.  The last IP is unchanged.  One
 * packet at a time (such stretches are short). */
size_t vt_pt_scan_skip_timing(VtPtScanner *s, VtPtMtcAcc *acc);
/* The same on two independent streams at once (their load chains overlap),
 * until either stops.  Returns a bit mask of the scanners that stopped
 * (1: a, 2: b); the other may be in the middle of a run of skippable
 * packets, which is fine to resume.  Accumulators may be NULL. */
int vt_pt_scan_skip_flow2(VtPtScanner *a, VtPtMtcAcc *acca,
			  VtPtScanner *b, VtPtMtcAcc *accb);

/* The implementations of vt_pt_scan_skip_flow/_flow2: all give the same
 * results (the windowed ones classify 64 bytes at a time with SIMD).  By
 * default (AUTO) the fastest one this build and CPU have is used; tests
 * and benchmarks can pick one.  Returns 0, or -1 (and changes nothing) if
 * it is not available here.  Not thread-safe: call it before scanning. */
typedef enum VtPtSkipImpl {
	VT_PT_SKIP_AUTO = 0,
	VT_PT_SKIP_SCALAR,	/* one packet at a time */
	VT_PT_SKIP_SSE2,	/* 64-byte windows, SSE2 (x86-64 baseline) */
	VT_PT_SKIP_AVX2,	/* 64-byte windows, AVX2 + BMI2 */
} VtPtSkipImpl;
int vt_pt_scan_skip_select(VtPtSkipImpl impl);

static inline uint64_t vt_pt_scan_offset(const VtPtScanner *s)
{
	return s->base + (uint64_t)(s->pos - s->begin);
}

/* ---- Inline fast path (implementation detail; use vt_pt_scan_next_inline).
 *
 * TNT-8, PAD, one-byte CYC, TIP/TIP.PGE/TIP.PGD/FUP, MTC and TSC are
 * decoded from one table entry indexed by the first byte, without
 * data-dependent branches, when at least 16 bytes are left and no BIP
 * context is active; everything else goes to vt_pt_scan_next.  Inlined
 * into the caller's loop this saves the call and lets the compiler keep
 * the position in a register (10-20% faster than vt_pt_scan_next in a
 * tight loop).  The tables live in pt-scan.c.  Little-endian hosts only
 * (checked in pt-scan.c). */
typedef struct VtPtFastpathEnt VtPtFastpathEnt;
struct VtPtFastpathEnt {
	uint64_t c0;	/* constant part of union word 0 */
	uint64_t m0;	/* mask applied to (load64(p) >> 8) for word 0 */
	uint64_t m8;	/* mask applied to load64(p + 1): IP payload */
	uint64_t keep;	/* bits of the last IP that survive the update */
	uint8_t type;
	uint8_t c8;	/* constant union word 1 (TNT bit size) */
	uint8_t flags;	/* VT_PT_FASTPATH_* */
};
enum {
	VT_PT_FASTPATH_SEXT = 1,	/* IPBytes 3: sign-extend 48-bit payload */
	VT_PT_FASTPATH_FULL = 2,	/* IPBytes 3 or 6: last IP fully known */
	VT_PT_FASTPATH_NOIP = 4,	/* IPBytes 0: IP suppressed */
};
extern const uint8_t vt_pt_fastpath_size[256];	/* 0: not on the fast path */
extern const VtPtFastpathEnt vt_pt_fastpath_tab[256];

static inline uint64_t vt_pt_fastpath_ld64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/* Decode the packet at s->pos if it is on the fast path: returns its size
 * (> 0) and advances, exactly like vt_pt_scan_next; returns 0 (pkt and s
 * untouched) otherwise. */
static inline int vt_pt_scan_fast(VtPtScanner *s,
				  VtPtPacket *pkt)
{
	const uint8_t *p = s->pos;
	const VtPtFastpathEnt *e;
	uint64_t raw, ip, sx, sel, noip, w;
	unsigned char *u;
	unsigned int n;
	uint8_t f, have;

	if (s->end - p < 16 || s->bip_ctx)
		return 0;
	n = vt_pt_fastpath_size[p[0]];
	if (!n)
		return 0;
	e = &vt_pt_fastpath_tab[p[0]];
	f = e->flags;
	u = (unsigned char *)&pkt->u;
	/* Masks instead of conditionals, so that the compiler does not
	 * branch on the packet type; the chain through the last IP is just
	 * an AND and an OR. */
	sel = 0 - (uint64_t)(f & VT_PT_FASTPATH_SEXT);
	noip = 0 - (uint64_t)((f & VT_PT_FASTPATH_NOIP) >> 2);
	raw = vt_pt_fastpath_ld64(p + 1) & e->m8;
	sx = (uint64_t)((int64_t)(raw << 16) >> 16);
	ip = (s->last_ip & e->keep) | raw | (sx & sel);
	have = (uint8_t)(s->have_last_ip | ((f & VT_PT_FASTPATH_FULL) >> 1));
	s->last_ip = ip;
	s->have_last_ip = have;
	pkt->offset = s->base + (uint64_t)(p - s->begin);
	pkt->type = (VtPtPacketType)e->type;
	pkt->size = (uint8_t)n;
	/* The union as four 64-bit words (layout asserted in pt-scan.c). */
	w = e->c0 | ((vt_pt_fastpath_ld64(p) >> 8) & e->m0);
	memcpy(u, &w, 8);
	w = e->c8 | raw;
	memcpy(u + 8, &w, 8);
	w = ip & ~noip;
	memcpy(u + 16, &w, 8);
	w = (noip | (uint64_t)(have ^ 1)) & 1;
	memcpy(u + 24, &w, 8);
	s->pos = p + n;
	return (int)n;
}

/* Same contract as vt_pt_scan_next (but s and pkt must not be NULL); use
 * this in scanning loops. */
static inline int vt_pt_scan_next_inline(VtPtScanner *s,
					 VtPtPacket *pkt)
{
	int n = vt_pt_scan_fast(s, pkt);

	return n > 0 ? n : vt_pt_scan_next(s, pkt);
}

/* Format a packet as one line like perf script -D's description part
 * ("TSC 0x1234", "PIP 0x... (NR=1)", "VMCS 0x...", "TMA CTC 0x.. FC 0x..").
 * Returns bytes written (snprintf semantics). */
int vt_pt_packet_desc(const VtPtPacket *pkt, char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif
