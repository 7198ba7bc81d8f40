/* pt-scan.c - fast Intel PT packet scanner.  See pt-scan.h.
 *
 * One packet per call.  The common packets (TNT-8, PAD, one-byte CYC,
 * TIP/TIP.PGE/TIP.PGD/FUP, MTC, TSC) take a branch-free path driven by a
 * 256-entry table indexed by the first byte (vt_pt_scan_fast in
 * pt-scan.h, also inlinable into callers).  Everything else goes through
 * scan_full: a 256-entry class table and a switch on the first byte, and a
 * second 256-entry table and switch for the byte after the 0x02 extended
 * opcode.  Nothing allocates, nothing prints.
 *
 * Packet boundaries, payloads and error codes follow libipt 2.0.5's packet
 * decoder (pt_pkt_next) byte for byte, including the order in which it
 * reports a truncated packet (-eos) versus an invalid one (-bad_packet):
 *
 *   - IP packets with IPBytes 5 or 7, and PTWRITE with a payload-size code
 *     of 2 or 3, are bad packets even when cut off (the size is unknown);
 *   - PSB, TNT-64, MODE and TMA are checked for completeness first;
 *   - TNT-64 with payload 0 or 1 (no branch bits) is a bad packet;
 *   - MODE with a leaf other than Exec/TSX is a bad packet; CS.L=CS.D=1 and
 *     TSX InTX=TXAbort=1 are accepted (perf rejects both);
 *   - TMA with a non-zero reserved byte or FC bits 15:9 is a bad packet;
 *   - CYC stops after 8 extension bytes: a 9th extension byte makes it a
 *     bad packet (perf accepts one more byte);
 *   - CBR's second payload byte is ignored.
 *
 * Packets libipt 2.0.5 does not know (BBP, BIP, BEP, CFE, EVD) are decoded
 * as perf does (intel-pt-pkt-decoder.c), including perf's packet context
 * for BIP: after a BBP, a byte with bits 2:0 = 100b is a BIP (not a TNT-8)
 * until a packet that ends the block context (see "BIP block context"
 * below).
 *
 * Payload layout of the "misc" packets (u.misc):
 *   MNT     payload = 8-byte payload                       extra = 0
 *   PTW     payload = 4- or 8-byte payload                 extra = 2nd byte
 *           (bit 7 = IP, bits 6:5 = payload size code)
 *   EXSTOP  payload = 0                                    extra = 2nd byte
 *           (0x62, or 0xe2 with IP)
 *   MWAIT   payload = hints (bits 31:0) | ext << 32        extra = 0
 *   PWRE    payload = 2-byte payload                       extra = 0
 *   PWRX    payload = 5-byte payload                       extra = 0
 *   BBP     payload = 3rd byte (bit 7: 4-byte items, bits 4:0 type)
 *                                                          extra = 0
 *   BIP     payload = 4- or 8-byte value                   extra = ID
 *   BEP     payload = 0                                    extra = 2nd byte
 *           (0x33, or 0xb3 with IP)
 *   CFE     payload = vector (4th byte)                    extra = 3rd byte
 *           (bit 7 = IP, bits 4:0 = type)
 *   EVD     payload = 8-byte payload                       extra = 3rd byte
 *           (bits 5:0 = type)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE		/* memmem */
#endif
#include "src/pt/pt-scan.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#if defined(__GNUC__)
#define likely(x)	__builtin_expect(!!(x), 1)
#define unlikely(x)	__builtin_expect(!!(x), 0)
#define HOT_INLINE	static inline __attribute__((always_inline))
#else
#define likely(x)	(x)
#define unlikely(x)	(x)
#define HOT_INLINE	static inline
#endif

/* ---------------------------------------------------------------------- */
/* Little-endian loads (the buffer may be unaligned).  Intel PT is x86-only
 * and the fast path writes the packet union as 64-bit words. */

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "pt-scan.c assumes a little-endian host"
#endif

static inline uint64_t ld64(const uint8_t *p)
{
	return vt_pt_fastpath_ld64(p);
}

/* n constant after inlining: the compiler emits one or two plain loads. */
static inline uint64_t ldn(const uint8_t *p, unsigned int n)
{
	uint64_t v = 0;

	memcpy(&v, p, n);
	return v;
}

/* Variable-length load for the rare tail case. */
static uint64_t ldvar(const uint8_t *p, unsigned int n)
{
	uint64_t v = 0;
	unsigned int i;

	for (i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* ---------------------------------------------------------------------- */
/* First-byte classes. */

enum {
	C_BAD = 0,
	C_PAD,
	C_EXT,
	C_TNT8,
	C_CYC,
	C_IP,
	C_TSC,
	C_MTC,
	C_MODE,
};

/* Same decision order as libipt's pt_df_fetch (and perf's decoder). */
#define CLS(b)								\
	((b) == 0x00 ? C_PAD :						\
	 (b) == 0x02 ? C_EXT :						\
	 (b) == 0x19 ? C_TSC :						\
	 (b) == 0x59 ? C_MTC :						\
	 (b) == 0x99 ? C_MODE :						\
	 !((b) & 1) ? C_TNT8 :						\
	 ((b) & 3) == 3 ? C_CYC :					\
	 (((b) & 0x1f) == 0x0d || ((b) & 0x1f) == 0x1d ||		\
	  ((b) & 0x1f) == 0x11 || ((b) & 0x1f) == 0x01) ? C_IP :	\
	 C_BAD)

#define T4(M, n)	M(n), M((n) + 1), M((n) + 2), M((n) + 3)
#define T16(M, n)	T4(M, n), T4(M, (n) + 4), T4(M, (n) + 8), T4(M, (n) + 12)
#define T64(M, n)	T16(M, n), T16(M, (n) + 16), T16(M, (n) + 32), T16(M, (n) + 48)
#define T256(M)		T64(M, 0), T64(M, 64), T64(M, 128), T64(M, 192)

static const uint8_t cls_tab[256] = { T256(CLS) };

/* Packet type of an IP-class header byte. */
#define IPT(b)								\
	(((b) & 0x1f) == 0x0d ? VT_PT_TIP :				\
	 ((b) & 0x1f) == 0x11 ? VT_PT_TIP_PGE :				\
	 ((b) & 0x1f) == 0x01 ? VT_PT_TIP_PGD :				\
	 ((b) & 0x1f) == 0x1d ? VT_PT_FUP : VT_PT_BAD)

static const uint8_t iptype_tab[256] = { T256(IPT) };

/* Second-byte classes after 0x02. */
enum {
	X_BAD = 0,
	X_PSB,
	X_PSBEND,
	X_TNT64,
	X_PIP,
	X_CBR,
	X_TMA,
	X_VMCS,
	X_OVF,
	X_STOP,
	X_EXT2,
	X_EXSTOP,
	X_MWAIT,
	X_PWRE,
	X_PWRX,
	X_PTW,
	X_BBP,
	X_BEP,
	X_CFE,
	X_EVD,
};

#define XCLS(b)								\
	((b) == 0x82 ? X_PSB :						\
	 (b) == 0x23 ? X_PSBEND :					\
	 (b) == 0xa3 ? X_TNT64 :					\
	 (b) == 0x43 ? X_PIP :						\
	 (b) == 0x03 ? X_CBR :						\
	 (b) == 0x73 ? X_TMA :						\
	 (b) == 0xc8 ? X_VMCS :						\
	 (b) == 0xf3 ? X_OVF :						\
	 (b) == 0x83 ? X_STOP :						\
	 (b) == 0xc3 ? X_EXT2 :						\
	 ((b) == 0x62 || (b) == 0xe2) ? X_EXSTOP :			\
	 (b) == 0xc2 ? X_MWAIT :					\
	 (b) == 0x22 ? X_PWRE :						\
	 (b) == 0xa2 ? X_PWRX :						\
	 ((b) & 0x1f) == 0x12 ? X_PTW :				\
	 (b) == 0x63 ? X_BBP :						\
	 ((b) == 0x33 || (b) == 0xb3) ? X_BEP :				\
	 (b) == 0x13 ? X_CFE :						\
	 (b) == 0x53 ? X_EVD :						\
	 X_BAD)

static const uint8_t xcls_tab[256] = { T256(XCLS) };

/* IP payload sizes by IPBytes; 0xff = invalid (5, 7). */
static const uint8_t ip_len[8] = { 0, 2, 4, 6, 6, 0xff, 8, 0xff };
/* Bits of the last IP kept by an update (ipc 3 is special-cased). */
static const uint64_t ip_keep[8] = {
	~0ULL, ~0xffffULL, ~0xffffffffULL, 0, ~0xffffffffffffULL,
	~0ULL, 0, ~0ULL,
};

#define PSB_WORD	0x8202820282028202ULL	/* 02 82 02 82 02 82 02 82 */

/* BIP block context (perf's INTEL_PT_BLK_4_CTX / _8_CTX): the packets
 * after which it ends.  PAD, TSC, TMA, MTC, FUP, CYC, CBR, MNT, EXSTOP,
 * PWRE, PWRX and BIP keep it; BBP sets it; everything else clears it. */

/* ---------------------------------------------------------------------- */

void vt_pt_scan_init(VtPtScanner *s, const uint8_t *buf, size_t len,
		     uint64_t base)
{
	if (!s)
		return;
	s->begin = buf;
	s->end = buf ? buf + len : buf;
	s->pos = buf;
	s->base = base;
	s->last_ip = 0;
	s->have_last_ip = 0;
	s->bip_ctx = 0;
}

/* Slow paths kept out of line so the hot function stays small. */
static int __attribute__((noinline, cold))
fail(VtPtPacket *pkt, int err)
{
	pkt->type = VT_PT_BAD;
	pkt->size = 0;
	return -err;
}

static int __attribute__((noinline))
scan_cyc_long(VtPtScanner *s, VtPtPacket *pkt,
	      const uint8_t *p, size_t left)
{
	uint64_t value = p[0] >> 3;
	unsigned int shl = 5, i = 1;
	uint8_t more = p[0] & 4;

	/* libipt: an extension byte that would start at bit 68 or above
	 * makes the packet bad; a missing byte is -eos first. */
	while (more) {
		uint64_t bits;

		if (i >= left)
			return fail(pkt, vt_pte_eos);
		bits = p[i++];
		more = bits & 1;
		bits >>= 1;
		bits <<= shl;
		shl += 7;
		if (shl > 64)
			return fail(pkt, vt_pte_bad_packet);
		value |= bits;
	}
	pkt->type = VT_PT_CYC;
	pkt->size = (uint8_t)i;
	pkt->u.cyc = value;
	s->pos = p + i;
	return (int)i;
}

/* IP packets off the fast path (buffer tail, BIP context). */
static int __attribute__((noinline))
scan_ip(VtPtScanner *s, VtPtPacket *pkt,
	const uint8_t *p, size_t left)
{
	uint8_t b = p[0];
	unsigned int ipc = b >> 5, n = ip_len[ipc];
	uint64_t raw, ip, last;
	uint8_t have;

	if (n == 0xff)		/* checked before the size, as libipt */
		return fail(pkt, vt_pte_bad_packet);
	if (left < n + 1)
		return fail(pkt, vt_pte_eos);
	raw = ldvar(p + 1, n);
	last = s->last_ip;
	ip = ipc == 3 ? (uint64_t)((int64_t)(raw << 16) >> 16)
		      : (last & ip_keep[ipc]) | raw;
	have = s->have_last_ip | (ipc == 3 || ipc == 6);
	s->last_ip = ip;
	s->have_last_ip = have;
	pkt->type = (VtPtPacketType)iptype_tab[b];
	pkt->size = (uint8_t)(n + 1);
	pkt->u.ip.ipc = (uint8_t)ipc;
	pkt->u.ip.raw = raw;
	pkt->u.ip.ip = ipc ? ip : 0;
	pkt->u.ip.suppressed = !ipc || !have;
	if (pkt->type != VT_PT_FUP)
		s->bip_ctx = 0;
	s->pos = p + n + 1;
	return (int)(n + 1);
}

static int __attribute__((noinline))
scan_bip(VtPtScanner *s, VtPtPacket *pkt,
	 const uint8_t *p, size_t left)
{
	unsigned int n = s->bip_ctx;

	if (left < n + 1u)
		return fail(pkt, vt_pte_eos);
	pkt->type = VT_PT_BIP;
	pkt->size = (uint8_t)(n + 1);
	pkt->u.misc.payload = n == 8 ? ld64(p + 1) : ldn(p + 1, 4);
	pkt->u.misc.extra = p[0] >> 3;
	s->pos = p + n + 1;
	return (int)(n + 1);
}

static int scan_ext(VtPtScanner *s, VtPtPacket *pkt,
		    const uint8_t *p, size_t left);

/* The general decoder: every packet, every context, buffer tails.
 * Returns the packet size or a negative error; advances s->pos on success
 * only.  pkt->offset has been set by the caller. */
static int __attribute__((noinline))
scan_full(VtPtScanner *s, VtPtPacket *pkt)
{
	const uint8_t *p = s->pos;
	size_t left = (size_t)(s->end - p);
	uint8_t b;

	if (unlikely(!left))
		return fail(pkt, vt_pte_eos);
	b = p[0];
	if (unlikely(s->bip_ctx) && (b & 7) == 4)
		return scan_bip(s, pkt, p, left);

	switch (cls_tab[b]) {
	case C_TNT8: {
		unsigned int v = (unsigned int)b >> 1;	/* 2..127 */
		unsigned int hb = 31u - (unsigned int)__builtin_clz(v);

		pkt->type = VT_PT_TNT_8;
		pkt->size = 1;
		pkt->u.tnt.payload = v ^ (1u << hb);
		pkt->u.tnt.bit_size = (uint8_t)hb;
		s->bip_ctx = 0;
		s->pos = p + 1;
		return 1;
	}
	case C_PAD:
		pkt->type = VT_PT_PAD;
		pkt->size = 1;
		s->pos = p + 1;
		return 1;
	case C_IP:
		return scan_ip(s, pkt, p, left);
	case C_CYC:
		if (likely(!(b & 4))) {
			pkt->type = VT_PT_CYC;
			pkt->size = 1;
			pkt->u.cyc = b >> 3;
			s->pos = p + 1;
			return 1;
		}
		return scan_cyc_long(s, pkt, p, left);
	case C_MTC:
		if (unlikely(left < 2))
			return fail(pkt, vt_pte_eos);
		pkt->type = VT_PT_MTC;
		pkt->size = 2;
		pkt->u.mtc = p[1];
		s->pos = p + 2;
		return 2;
	case C_TSC:
		if (unlikely(left < 8))
			return fail(pkt, vt_pte_eos);
		pkt->type = VT_PT_TSC;
		pkt->size = 8;
		pkt->u.tsc = ld64(p) >> 8;
		s->pos = p + 8;
		return 8;
	case C_MODE: {
		uint8_t m;

		if (unlikely(left < 2))
			return fail(pkt, vt_pte_eos);
		m = p[1];
		switch (m >> 5) {
		case 0:
			pkt->type = VT_PT_MODE_EXEC;
			break;
		case 1:
			pkt->type = VT_PT_MODE_TSX;
			break;
		default:
			return fail(pkt, vt_pte_bad_packet);
		}
		pkt->size = 2;
		pkt->u.mode.bits = m & 0x1f;
		s->bip_ctx = 0;
		s->pos = p + 2;
		return 2;
	}
	case C_EXT:
		return scan_ext(s, pkt, p, left);
	default:
		return fail(pkt, vt_pte_bad_opc);
	}
}

/* ---------------------------------------------------------------------- */
/* Tables of the branch-free fast path (vt_pt_scan_fast in pt-scan.h).
 *
 * For the packets that dominate real traces and need no bounds checks
 * once 16 bytes are left (TNT-8, PAD, one-byte CYC, TIP/TIP.PGE/TIP.PGD/
 * FUP, MTC, TSC), everything is looked up from one table entry indexed by
 * the first byte: size, type, and masks that extract the payload from the
 * two unaligned words at p and p + 1.  The last-IP update is computed for
 * every packet (non-IP packets have an all-zero IP mask, which leaves it
 * unchanged), so the only data-dependent branch is "fast entry or not".
 * The union is written as four 64-bit words; the static asserts below pin
 * the layout this relies on.
 */
#define F_SEXT		VT_PT_FASTPATH_SEXT
#define F_FULL		VT_PT_FASTPATH_FULL
#define F_NOIP		VT_PT_FASTPATH_NOIP

/* Highest set bit of a 7-bit value >= 2 (TNT-8 stop bit). */
#define HB7(v)	((v) >= 64 ? 6 : (v) >= 32 ? 5 : (v) >= 16 ? 4 :	\
		 (v) >= 8 ? 3 : (v) >= 4 ? 2 : 1)
#define IPC(b)		((b) >> 5)
#define IPOK(b)		(IPC(b) != 5 && IPC(b) != 7)
#define IPLEN(b)	(IPC(b) == 1 ? 2 : IPC(b) == 2 ? 4 :		\
			 IPC(b) == 3 || IPC(b) == 4 ? 6 : IPC(b) == 6 ? 8 : 0)
#define IPMASK(b)	(IPLEN(b) == 8 ? ~0ULL :				\
			 (1ULL << (8 * (IPLEN(b) & 7))) - 1)

#define FSIZE(b)							\
	(CLS(b) == C_TNT8 || CLS(b) == C_PAD ? 1 :			\
	 CLS(b) == C_CYC ? (((b) & 4) ? 0 : 1) :			\
	 CLS(b) == C_IP ? (IPOK(b) ? 1 + IPLEN(b) : 0) :		\
	 CLS(b) == C_MTC ? 2 : CLS(b) == C_TSC ? 8 : 0)
#define FTYPE(b)							\
	(CLS(b) == C_TNT8 ? VT_PT_TNT_8 : CLS(b) == C_PAD ? VT_PT_PAD :	\
	 CLS(b) == C_CYC ? VT_PT_CYC : CLS(b) == C_IP ? IPT(b) :		\
	 CLS(b) == C_MTC ? VT_PT_MTC : CLS(b) == C_TSC ? VT_PT_TSC :	\
	 VT_PT_BAD)
#define FC0(b)								\
	(CLS(b) == C_TNT8 ? (uint64_t)(((b) >> 1) ^ (1 << HB7((b) >> 1))) : \
	 CLS(b) == C_CYC ? (uint64_t)((b) >> 3) :			\
	 CLS(b) == C_IP ? (uint64_t)IPC(b) : 0)
#define FM0(b)								\
	(CLS(b) == C_TSC ? 0x00ffffffffffffffULL :			\
	 CLS(b) == C_MTC ? 0xffULL : 0)
#define FM8(b)		(CLS(b) == C_IP ? IPMASK(b) : 0)
#define FKEEP(b)	(CLS(b) == C_IP && IPC(b) == 3 ? 0 : ~FM8(b))
#define FC8(b)		(CLS(b) == C_TNT8 ? HB7((b) >> 1) : 0)
#define FFLAGS(b)							\
	(CLS(b) != C_IP ? 0 :						\
	 IPC(b) == 0 ? F_NOIP :						\
	 IPC(b) == 3 ? F_SEXT | F_FULL :				\
	 IPC(b) == 6 ? F_FULL : 0)
#define FENT(b)								\
	{ FC0(b), FM0(b), FM8(b), FKEEP(b), FTYPE(b), FC8(b), FFLAGS(b) }

const uint8_t vt_pt_fastpath_size[256] = { T256(FSIZE) };
const VtPtFastpathEnt vt_pt_fastpath_tab[256] = { T256(FENT) };

_Static_assert(sizeof(((VtPtPacket *)0)->u) == 32, "union size");
_Static_assert(offsetof(VtPtPacket, u.ip.ipc) ==
	       offsetof(VtPtPacket, u), "ip.ipc");
_Static_assert(offsetof(VtPtPacket, u.ip.raw) ==
	       offsetof(VtPtPacket, u) + 8, "ip.raw");
_Static_assert(offsetof(VtPtPacket, u.ip.ip) ==
	       offsetof(VtPtPacket, u) + 16, "ip.ip");
_Static_assert(offsetof(VtPtPacket, u.ip.suppressed) ==
	       offsetof(VtPtPacket, u) + 24, "ip.suppressed");
_Static_assert(offsetof(VtPtPacket, u.tnt.bit_size) ==
	       offsetof(VtPtPacket, u) + 8, "tnt.bit_size");

/* The hot path.  Returns the packet size or a negative error; advances
 * s->pos on success only. */
HOT_INLINE int scan_next(VtPtScanner *s, VtPtPacket *pkt)
{
	int n = vt_pt_scan_fast(s, pkt);

	if (likely(n > 0))
		return n;
	pkt->offset = s->base + (uint64_t)(s->pos - s->begin);
	return scan_full(s, pkt);
}

/* 0x02-extended packets: less frequent, kept out of the hot function but
 * still a single table-driven switch. */
static int scan_ext(VtPtScanner *s, VtPtPacket *pkt,
		    const uint8_t *p, size_t left)
{
	unsigned int n;
	uint8_t b1;

	if (unlikely(left < 2))
		return fail(pkt, vt_pte_eos);
	b1 = p[1];

	switch (xcls_tab[b1]) {
	case X_PSB:
		if (left < 16)
			return fail(pkt, vt_pte_eos);
		if (ld64(p) != PSB_WORD || ld64(p + 8) != PSB_WORD)
			return fail(pkt, vt_pte_bad_packet);
		pkt->type = VT_PT_PSB;
		s->last_ip = 0;
		s->have_last_ip = 1;
		s->bip_ctx = 0;
		n = 16;
		break;
	case X_PSBEND:
		pkt->type = VT_PT_PSBEND;
		s->bip_ctx = 0;
		n = 2;
		break;
	case X_TNT64: {
		uint64_t v;
		unsigned int hb;

		if (left < 8)
			return fail(pkt, vt_pte_eos);
		v = ld64(p) >> 16;
		if (v < 2)
			return fail(pkt, vt_pte_bad_packet);
		hb = 63u - (unsigned int)__builtin_clzll(v);
		pkt->type = VT_PT_TNT_64;
		pkt->u.tnt.payload = v ^ (1ULL << hb);
		pkt->u.tnt.bit_size = (uint8_t)hb;
		s->bip_ctx = 0;
		n = 8;
		break;
	}
	case X_PIP: {
		uint64_t v;

		if (left < 8)
			return fail(pkt, vt_pte_eos);
		v = ld64(p) >> 16;
		pkt->type = VT_PT_PIP;
		pkt->u.pip.cr3 = (v >> 1) << 5;
		pkt->u.pip.nr = v & 1;
		s->bip_ctx = 0;
		n = 8;
		break;
	}
	case X_CBR:
		if (left < 4)
			return fail(pkt, vt_pte_eos);
		pkt->type = VT_PT_CBR;
		pkt->u.cbr = p[2];
		n = 4;
		break;
	case X_TMA:
		if (left < 7)
			return fail(pkt, vt_pte_eos);
		if (p[4] || (p[6] & 0xfe))
			return fail(pkt, vt_pte_bad_packet);
		pkt->type = VT_PT_TMA;
		pkt->u.tma.ctc = (uint16_t)(p[2] | p[3] << 8);
		pkt->u.tma.fc = (uint16_t)(p[5] | (p[6] & 1) << 8);
		n = 7;
		break;
	case X_VMCS:
		if (left < 7)
			return fail(pkt, vt_pte_eos);
		pkt->type = VT_PT_VMCS;
		pkt->u.vmcs = ldn(p + 2, 5);
		s->bip_ctx = 0;
		n = 7;
		break;
	case X_OVF:
		pkt->type = VT_PT_OVF;
		s->bip_ctx = 0;
		n = 2;
		break;
	case X_STOP:
		pkt->type = VT_PT_STOP;
		s->bip_ctx = 0;
		n = 2;
		break;
	case X_EXT2:
		if (left < 3)
			return fail(pkt, vt_pte_eos);
		if (p[2] != 0x88)
			return fail(pkt, vt_pte_bad_opc);
		if (left < 11)
			return fail(pkt, vt_pte_eos);
		pkt->type = VT_PT_MNT;
		pkt->u.misc.payload = ld64(p + 3);
		pkt->u.misc.extra = 0;
		n = 11;
		break;
	case X_EXSTOP:
		pkt->type = VT_PT_EXSTOP;
		pkt->u.misc.payload = 0;
		pkt->u.misc.extra = b1;
		n = 2;
		break;
	case X_MWAIT:
		if (left < 10)
			return fail(pkt, vt_pte_eos);
		pkt->type = VT_PT_MWAIT;
		pkt->u.misc.payload = ld64(p + 2);
		pkt->u.misc.extra = 0;
		s->bip_ctx = 0;
		n = 10;
		break;
	case X_PWRE:
		if (left < 4)
			return fail(pkt, vt_pte_eos);
		pkt->type = VT_PT_PWRE;
		pkt->u.misc.payload = ldn(p + 2, 2);
		pkt->u.misc.extra = 0;
		n = 4;
		break;
	case X_PWRX:
		if (left < 7)
			return fail(pkt, vt_pte_eos);
		pkt->type = VT_PT_PWRX;
		pkt->u.misc.payload = ldn(p + 2, 5);
		pkt->u.misc.extra = 0;
		n = 7;
		break;
	case X_PTW: {
		unsigned int plc = (b1 >> 5) & 3;

		if (plc > 1)
			return fail(pkt, vt_pte_bad_packet);
		n = plc ? 10 : 6;
		if (left < n)
			return fail(pkt, vt_pte_eos);
		pkt->type = VT_PT_PTW;
		pkt->u.misc.payload = plc ? ld64(p + 2) : ldn(p + 2, 4);
		pkt->u.misc.extra = b1;
		s->bip_ctx = 0;
		break;
	}
	case X_BBP:
		if (left < 3)
			return fail(pkt, vt_pte_eos);
		pkt->type = VT_PT_BBP;
		pkt->u.misc.payload = p[2];
		pkt->u.misc.extra = 0;
		s->bip_ctx = (p[2] & 0x80) ? 4 : 8;
		n = 3;
		break;
	case X_BEP:
		pkt->type = VT_PT_BEP;
		pkt->u.misc.payload = 0;
		pkt->u.misc.extra = b1;
		s->bip_ctx = 0;
		n = 2;
		break;
	case X_CFE:
		if (left < 4)
			return fail(pkt, vt_pte_eos);
		pkt->type = VT_PT_CFE;
		pkt->u.misc.payload = p[3];
		pkt->u.misc.extra = p[2];
		s->bip_ctx = 0;
		n = 4;
		break;
	case X_EVD:
		if (left < 11)
			return fail(pkt, vt_pte_eos);
		pkt->type = VT_PT_EVD;
		pkt->u.misc.payload = ld64(p + 3);
		pkt->u.misc.extra = p[2];
		s->bip_ctx = 0;
		n = 11;
		break;
	default:
		return fail(pkt, vt_pte_bad_opc);
	}
	pkt->size = (uint8_t)n;
	s->pos = p + n;
	return (int)n;
}

int vt_pt_scan_next(VtPtScanner *s, VtPtPacket *pkt)
{
	if (unlikely(!s || !pkt))
		return -vt_pte_invalid;
	return scan_next(s, pkt);
}

/* ---------------------------------------------------------------------- */
/* ---------------------------------------------------------------------- */
/* Skipping control-flow packets (see vt_pt_scan_skip_flow). */

#define FLOW_IPLEN(b)	((((b) >> 5) == 5 || ((b) >> 5) == 7) ? 0 : 1 + (0x08066420u >> (4 * ((b) >> 5)) & 0xf))
/* Bytes to skip for a packet starting with b, or 0 to stop; 0x80 marks IP
 * packets (whose skipping makes the last IP unknown), 0x40 MTC (skipped
 * only with an accumulator), 0x20 MODE (skipped if its leaf is valid),
 * 0x10 a CYC with extension bytes (length from cyc_long_len). */
#define SKIP(b)								\
	(CLS(b) == C_PAD || CLS(b) == C_TNT8 ? 1 :			\
	 CLS(b) == C_CYC ? (((b) & 4) ? 0x10 : 1) :			\
	 CLS(b) == C_IP && IPT(b) != VT_PT_TIP_PGD && FLOW_IPLEN(b) ?	\
		(0x80 | FLOW_IPLEN(b)) :				\
	 CLS(b) == C_MTC ? (0x40 | 2) :					\
	 CLS(b) == C_MODE ? (0x20 | 2) : 0)

static const uint8_t skip_tab[256] = { T256(SKIP) };
/* The same while tracing is disabled: TNT-8 and IP packets stop it. */
#define SKIP_OFF(b)	(CLS(b) == C_TNT8 || CLS(b) == C_IP ? 0 : SKIP(b))
static const uint8_t skip_tab_off[256] = { T256(SKIP_OFF) };

/* Length of a CYC with extension bytes, 0 if it is invalid (more than 8
 * extension bytes: scan_cyc_long's limit).  Reads at most p[8]. */
static inline unsigned int cyc_long_len(const uint8_t *p)
{
	unsigned int i = 1;

	while (p[i] & 1)
		if (++i > 8)
			return 0;
	return i + 1;
}

/* Length to skip for table entry t at p, or 0 to stop.  CYCs of up to four
 * bytes (the common case) are sized without branches; half the packets of
 * a cyc=1 trace are CYC, so a mispredicted branch here would dominate. */
static inline unsigned int skip_len(uint8_t t, const uint8_t *p, uint8_t mtc_mask)
{
	unsigned int e1 = p[1] & 1, e2 = e1 & p[2], e3 = e2 & p[3];
	unsigned int cyc = 2 + e1 + e2 + e3;
	unsigned int n = (t & 0x10) ? cyc : (t & 0x0f);

	if (__builtin_expect(!t || (t & mtc_mask) || ((t & 0x20) && (p[1] >> 5) > 1), 0))
		return 0;
	if (__builtin_expect((t & 0x10) && (e3 & p[4]), 0))
		return cyc_long_len(p);
	return n;
}

/* The size of a PIP at p if the accumulator asks for skipping PIPs, else
 * 0; skip_pip also notes it.  p has 16 bytes left at least. */
static inline unsigned int pip_len(const uint8_t *p, const VtPtMtcAcc *acc)
{
	return acc && acc->skip_pip && p[0] == 0x02 && p[1] == 0x43 ? 8 : 0;
}

static inline unsigned int skip_pip(const uint8_t *p, VtPtMtcAcc *acc)
{
	if (!pip_len(p, acc))
		return 0;
	acc->pip_nr = p[2] & 1;
	acc->pip_count++;
	return 8;
}

/* Add an MTC payload to the accumulator (a zero difference is a full wrap). */
static inline void mtc_add(VtPtMtcAcc *acc, uint8_t m)
{
	acc->ticks += m > acc->last ? (unsigned)(m - acc->last) : (unsigned)m + 256 - acc->last;
	acc->last = m;
	acc->count++;
}

static unsigned int pgd_skip(const uint8_t *p, const uint8_t *end, VtPtMtcAcc *acc, int commit);

/* Scalar skipping from p up to the first packet boundary at or after end
 * (or a packet that cannot be skipped), with table tab (skip_tab or
 * skip_tab_off; only with skip_tab a TIP.PGD stretch, see pgd_skip). */
HOT_INLINE const uint8_t *skip_scalar_tab(const uint8_t *p, const uint8_t *end,
					  VtPtMtcAcc *acc, uint8_t mtc_mask,
					  uint8_t *flags, const uint8_t *tab)
{
	uint8_t fl = 0;

	while (p < end) {
		uint8_t t = tab[*p];
		unsigned int n = skip_len(t, p, mtc_mask);

		if (unlikely(!n)) {
			n = skip_pip(p, acc);
			if (!n && tab == skip_tab && (n = pgd_skip(p, end, acc, 1)))
				fl |= 0x80;
			if (!n)
				break;
		}
		if (t & 0x40)
			mtc_add(acc, p[1]);
		fl |= t;
		p += n;
	}
	*flags |= fl;
	return p;
}

HOT_INLINE const uint8_t *skip_scalar(const uint8_t *p, const uint8_t *end,
				      VtPtMtcAcc *acc, uint8_t mtc_mask,
				      uint8_t *flags)
{
	return skip_scalar_tab(p, end, acc, mtc_mask, flags, skip_tab);
}

/* A TIP.PGD at p, then only packets that change nothing while tracing is
 * off (PAD, CYC, MODE, MTC and PIP through acc: skip_tab_off), then a
 * TIP.PGE, every one of them starting before end: the size of the whole,
 * else 0.  With `commit`, its MTCs and PIPs are added to acc (in order)
 * and pgd_count is incremented.  Only with acc->skip_pgd (see
 * VtPtMtcAcc). */
static unsigned int __attribute__((noinline))
pgd_skip(const uint8_t *p, const uint8_t *end, VtPtMtcAcc *acc, int commit)
{
	VtPtMtcAcc t;
	const uint8_t *q;
	uint8_t fl = 0;
	unsigned int n;

	if (!acc || !acc->skip_pgd || (p[0] & 0x1f) != 0x01 || !(n = FLOW_IPLEN(p[0])))
		return 0;
	t = *acc;
	/* mostly MTCs (an idle guest's stretch): those first, in a tight
	 * loop, then the table loop for anything else */
	for (q = p + n; q < end && q[0] == 0x59; q += 2)
		mtc_add(&t, q[1]);
	q = skip_scalar_tab(q, end, &t, 0, &fl, skip_tab_off);
	if (q >= end || (q[0] & 0x1f) != 0x11 || !(n = FLOW_IPLEN(q[0])))
		return 0;
	if (commit) {
		*acc = t;
		acc->pgd_count++;
	}
	return (unsigned int)(q - p) + n;
}

/* ---- Window skipping (SSE2; with AVX2 the block walk further below).
 *
 * The scalar loop is bound by latency: each packet's length needs its
 * first byte (a load) and a table entry (another load) before the next
 * packet can be looked at, ~10 cycles a packet.  With cyc=1 about half the
 * packets are CYC and most others TNT-8, nearly all of one or two bytes.
 *
 * Here a window of 64 bytes starting at a packet boundary is classified at
 * once into bit masks (bit k = byte k) and a table of sizes, as if every
 * byte started a packet:
 *   ends  where a run of "short" packets ends: not PAD, TNT-8, a CYC
 *         without extension, nor a two-byte CYC (see below),
 *   ip    a skippable IP packet (TIP, TIP.PGE, FUP with valid IPBytes),
 *   mtc   an MTC header (only when accumulating MTCs),
 *   lens  the size of such an IP packet or MTC, else 0,
 * and masks for the two-byte CYCs (cx2, stop02).  Only the boundaries
 * where a run of short packets ends are visited (a count of trailing zeros
 * in `ends`); the boundary after the packet at j is j + lens[j].  Any
 * other packet (MODE, PIP, a packet to stop at, a CYC of three bytes or
 * more) goes through skip_len (or skip_pip) like the scalar loop.  The
 * MTCs and IP packets among the visited boundaries are accounted for once
 * per window.
 *
 * A two-byte CYC (a header, then an extension byte with bit 0 clear) is
 * part of a run too: neither of its bytes is in `ends`.  Runs only start
 * at boundaries and only end at an `ends` bit, so a run stepping onto such
 * a header steps over both bytes, and ends where the real packets end.
 * Two cases need care: a run reaching the window limit right after such a
 * header (the next window then starts one byte later), and a boundary
 * found after a visited packet that is the second byte of such a
 * "header" (a payload byte looking like one) and is 0x02: a packet to stop
 * at (or a PIP), not in `ends` (`stop02`, checked after each visited
 * packet).
 *
 * Bytes that are not packet headers (payloads) are classified too but
 * never used: masks and sizes are only read at boundaries.  Boundaries
 * visited stay below WIN_LIM so that a packet found there (at most 9
 * bytes, and the extension bits a CYC there needs) lies in the window;
 * the walk then goes on with a window at the next boundary.  A window
 * starts at most WIN_ROOM bytes before the end of the buffer, so every
 * boundary the walk reaches lies before the scalar loop's limit (end -
 * 16); the scalar loop does the rest.
 *
 * Pairs: a 3-byte IP packet and the packet right after it are one step
 * (lens[j] is the sum) when the second has a size in lens and starts below
 * WIN_LIM; only an IP packet (its first one's IP bit stands for both).
 * p3 would mark pairs whose second packet is an MTC or PIP at +3
 * (win_vis); the SSE2 classifier makes none.
 *
 * A TIP.PGD stretch (acc->skip_pgd: TIP.PGD, PAD/CYC/MODE/MTC/PIP, TIP.PGE)
 * goes through the slow path (pgd_skip, after the window's visited MTCs
 * and PIPs are accounted for, so that they add up in order) and may end
 * beyond the window: the walk goes on with a window at its end.
 */
#if defined(__SSE2__)
#include <emmintrin.h>
#define HAVE_SKIP_WIN 1

#define WIN_LIM		55	/* visit boundaries at window offsets < 55 */
#define WIN_SENT	(~0ULL << WIN_LIM)
#define WIN_ROOM	80	/* bytes needed from a window's start to the end */

struct skip_win {
	uint64_t ends, cx2, stop02, ip, mtc, pip;
	/* 3-byte IP packets whose step takes the packet after them too
	 * (AVX2: any packet with a size in lens, so an MTC or a PIP) */
	uint64_t p3;
	uint8_t lens[64];
};

/* The masks from the per-byte classes (bit k = byte k). */
static inline void skip_win_finish(struct skip_win *W, uint64_t one, uint64_t cycx,
				   uint64_t odd, uint64_t e02, uint64_t ip, uint64_t mtc,
				   uint64_t pip)
{
	W->pip = pip;
	W->cx2 = cycx & ~(odd >> 1) & ~(1ULL << 63);	/* two-byte CYC headers */
	W->stop02 = (W->cx2 << 1) & e02 & ~WIN_SENT;
	W->ends = ~(one | W->cx2 | (W->cx2 << 1)) | WIN_SENT;
	W->ip = ip;
	W->mtc = mtc;
}

/* The classifiers' constants, made opaque to the compiler (an empty asm
 * "changes" them) once per walk: otherwise it rebuilds them at every
 * window instead of keeping them in registers or on the stack. */
#define SKW_OPAQUE(v)	__asm__("" : "+x"(v))
#define SKW_CONSTS(T)	T k01, k02, k03, k07, k0a, k0c, k0d, k0e, k0f, k11, k1f, k59, mtc_on, \
			  k08, k3f, k43, k99, pip_on, lim1
#define SKW_INIT(K, SET1, with_mtc, with_pip)				\
	do {								\
		SKW_LIM1(K);						\
		SKW_OPAQUE((K)->lim1);					\
		(K)->k08 = SET1(0x08); (K)->k3f = SET1(0x3f);		\
		(K)->k43 = SET1(0x43); (K)->k99 = SET1((char)0x99);	\
		(K)->pip_on = SET1((with_pip) ? -1 : 0);		\
		SKW_OPAQUE((K)->k08); SKW_OPAQUE((K)->k3f);		\
		SKW_OPAQUE((K)->k43); SKW_OPAQUE((K)->k99);		\
		SKW_OPAQUE((K)->pip_on);				\
		(K)->k01 = SET1(0x01); (K)->k02 = SET1(0x02);		\
		(K)->k03 = SET1(0x03); (K)->k07 = SET1(0x07);		\
		(K)->k0a = SET1(0x0a); (K)->k0c = SET1(0x0c);		\
		(K)->k0d = SET1(0x0d); (K)->k0e = SET1(0x0e);		\
		(K)->k0f = SET1(0x0f); (K)->k11 = SET1(0x11);		\
		(K)->k1f = SET1(0x1f); (K)->k59 = SET1(0x59);		\
		(K)->mtc_on = SET1((with_mtc) ? -1 : 0);		\
		SKW_OPAQUE((K)->k01); SKW_OPAQUE((K)->k02);		\
		SKW_OPAQUE((K)->k03); SKW_OPAQUE((K)->k07);		\
		SKW_OPAQUE((K)->k0a); SKW_OPAQUE((K)->k0c);		\
		SKW_OPAQUE((K)->k0d); SKW_OPAQUE((K)->k0e);		\
		SKW_OPAQUE((K)->k0f); SKW_OPAQUE((K)->k11);		\
		SKW_OPAQUE((K)->k1f); SKW_OPAQUE((K)->k59);		\
		SKW_OPAQUE((K)->mtc_on);				\
	} while (0)

struct skw_k_sse2 { SKW_CONSTS(__m128i); };
/* lim1: byte positions 0-15 (a quarter's offsets, compared per quarter) */
#define SKW_LIM1_SSE2(K)	((K)->lim1 = _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15))

HOT_INLINE void skip_win_kinit_sse2(struct skw_k_sse2 *K, int with_mtc, int with_pip)
{
#define SKW_LIM1 SKW_LIM1_SSE2
	SKW_INIT(K, _mm_set1_epi8, with_mtc, with_pip);
#undef SKW_LIM1
}

/* Per-byte classes of the window at w, 16 bytes at a time (SSE2).  Pairs
 * of IP packets: quarters 0-2 take the next quarter's IP sizes shifted in,
 * quarter 3 classifies the three bytes after it again. */
HOT_INLINE void skip_win_load_sse2(const uint8_t *w, struct skip_win *W,
				   const struct skw_k_sse2 *K)
{
	const __m128i k01 = K->k01, k02 = K->k02, k03 = K->k03, k07 = K->k07;
	const __m128i k0a = K->k0a, k0c = K->k0c, k0d = K->k0d, k0e = K->k0e;
	const __m128i k0f = K->k0f, k11 = K->k11, k1f = K->k1f, k59 = K->k59;
	const __m128i mtc_on = K->mtc_on, k08 = K->k08, k3f = K->k3f, k43 = K->k43;
	const __m128i k99 = K->k99, pip_on = K->pip_on;
	uint64_t e02 = 0, c3 = 0, cycx = 0, odd = 0, ip = 0, mtc = 0, pip = 0;
	__m128i lens[4], ipl[4];

	for (int q = 0; q < 4; q++) {
		__m128i v = _mm_loadu_si128((const __m128i *)(const void *)(w + 16 * q));
		/* the next byte: MODE's leaf (valid: < 0x40), PIP's 0x43 */
		__m128i v1 = _mm_loadu_si128((const __m128i *)(const void *)(w + 16 * q + 1));
		__m128i is02 = _mm_cmpeq_epi8(v, k02);
		__m128i ismode = _mm_and_si128(_mm_cmpeq_epi8(v, k99),
					       _mm_cmpeq_epi8(_mm_min_epu8(v1, k3f), v1));
		__m128i ispip = _mm_and_si128(_mm_and_si128(is02, _mm_cmpeq_epi8(v1, k43)), pip_on);
		__m128i lo3 = _mm_and_si128(v, k07);
		__m128i ism = _mm_and_si128(_mm_cmpeq_epi8(v, k59), mtc_on);
		/* TIP 0x0d, FUP 0x1d (bits 3:0 = 0xd), TIP.PGE 0x11 in bits
		 * 4:0 (not TIP.PGD 0x01) */
		__m128i isip = _mm_or_si128(_mm_cmpeq_epi8(_mm_and_si128(v, k0f), k0d),
					    _mm_cmpeq_epi8(_mm_and_si128(v, k1f), k11));
		/* t = 2 * IPBytes; size 1 + {0,2,4,6,6,-,8,-}[IPBytes] */
		__m128i t = _mm_and_si128(_mm_srli_epi16(v, 4), k0e);
		__m128i len = _mm_min_epu8(_mm_or_si128(t, k01), k07);
		__m128i bad = _mm_cmpeq_epi8(_mm_and_si128(t, k0a), k0a);

		isip = _mm_andnot_si128(bad, isip);
		len = _mm_add_epi8(len, _mm_and_si128(_mm_cmpeq_epi8(t, k0c), k02));
		ipl[q] = _mm_and_si128(isip, len);
		len = _mm_or_si128(ipl[q], _mm_and_si128(_mm_or_si128(ism, ismode), k02));
		lens[q] = _mm_or_si128(len, _mm_and_si128(ispip, k08));
		e02 |= (uint64_t)(uint32_t)_mm_movemask_epi8(is02) << (16 * q);
		pip |= (uint64_t)(uint32_t)_mm_movemask_epi8(ispip) << (16 * q);
		c3 |= (uint64_t)(uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(lo3, k03)) << (16 * q);
		cycx |= (uint64_t)(uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(lo3, k07)) << (16 * q);
		ip |= (uint64_t)(uint32_t)_mm_movemask_epi8(isip) << (16 * q);
		mtc |= (uint64_t)(uint32_t)_mm_movemask_epi8(ism) << (16 * q);
		/* bit 0 of each byte to bit 7 (pmovmskb takes bit 7) */
		odd |= (uint64_t)(uint32_t)_mm_movemask_epi8(_mm_slli_epi16(v, 7)) << (16 * q);
	}
	/* a 3-byte IP packet right before another IP packet (TIP-dense code):
	 * one step over both, when the second starts before 52 + 3 = WIN_LIM
	 * (it has a boundary's room then); the first one's IP bit stands for
	 * both.  Only IP packets have size 3; s3 is the size of an IP packet
	 * three bytes on, 0 if none is there. */
	for (int q = 0; q < 3; q++) {
		__m128i s3 = _mm_or_si128(_mm_srli_si128(ipl[q], 3), _mm_slli_si128(ipl[q + 1], 13));

		lens[q] = _mm_add_epi8(lens[q], _mm_and_si128(_mm_cmpeq_epi8(lens[q], k03), s3));
	}
	{
		__m128i v3 = _mm_loadu_si128((const __m128i *)(const void *)(w + 51));
		__m128i ip3 = _mm_or_si128(_mm_cmpeq_epi8(_mm_and_si128(v3, k0f), k0d),
					   _mm_cmpeq_epi8(_mm_and_si128(v3, k1f), k11));
		__m128i t3 = _mm_and_si128(_mm_srli_epi16(v3, 4), k0e);
		__m128i len3 = _mm_min_epu8(_mm_or_si128(t3, k01), k07);
		__m128i lim = _mm_cmplt_epi8(K->lim1, _mm_set1_epi8(52 - 48));

		ip3 = _mm_andnot_si128(_mm_cmpeq_epi8(_mm_and_si128(t3, k0a), k0a), ip3);
		len3 = _mm_add_epi8(len3, _mm_and_si128(_mm_cmpeq_epi8(t3, k0c), k02));
		lens[3] = _mm_add_epi8(lens[3], _mm_and_si128(_mm_and_si128(_mm_cmpeq_epi8(lens[3], k03), lim),
							      _mm_and_si128(ip3, len3)));
	}
	for (int q = 0; q < 4; q++)
		_mm_storeu_si128((__m128i *)(void *)(W->lens + 16 * q), lens[q]);
	W->p3 = 0;	/* (its pairs are of IP packets only) */
	/* one-byte packets: PAD/TNT-8 (even, not 0x02), CYC without extension */
	skip_win_finish(W, (~odd & ~e02) | c3, cycx, odd, e02, ip, mtc, pip);
}

/* (With AVX2 the block walk below skips instead of these windows.) */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define HAVE_SKIP_WIN_AVX2 1
#endif

/* Size of the packet at window offset j (a boundary), or 0 if skip_len
 * must decide. */
HOT_INLINE unsigned int win_event(const struct skip_win *W, unsigned int j)
{
	return W->lens[j];
}

/* The window offset where a run of short packets from i stops at j
 * (>= WIN_LIM) can be left: one byte further if the run ended on the
 * header of a two-byte CYC. */
static inline unsigned int win_leave(const struct skip_win *W, unsigned int i, unsigned int j)
{
	return j + (i < j && ((W->cx2 >> (j - 1)) & 1));
}

/* The boundaries visited in window W: those in vis (where steps start)
 * and the second packets of the pairs among them. */
static inline uint64_t win_vis(const struct skip_win *W, uint64_t vis)
{
	return vis | (vis & W->p3) << 3;
}

/* The visited PIPs of window w (only when acc skips them): their count
 * and the last one's NR.  vis: from win_vis. */
static inline void win_pips(const struct skip_win *W, const uint8_t *w, uint64_t vis,
			    VtPtMtcAcc *acc)
{
	uint64_t y = W->pip & vis;

	if (y) {
		acc->pip_count += (uint32_t)__builtin_popcountll(y);
		acc->pip_nr = w[63 - __builtin_clzll(y) + 2] & 1;
	}
}

/* Add the MTCs of window w at the offsets in x to acc, in order. */
static inline void win_mtcs(const uint8_t *w, uint64_t x, VtPtMtcAcc *acc)
{
	/* Steps of (m - last) mod 256, a zero counting 256: they add up to
	 * m_last - last plus 256 per step that does not go up.  In locals,
	 * not through acc (the byte loads may alias it, which made every
	 * step a store and a reload). */
	unsigned int last = acc->last, m = last, wraps = 0, n = 0;

	do {
		m = w[__builtin_ctzll(x) + 1];
		wraps += m <= last;
		n++;
		last = m;
		x &= x - 1;
	} while (x);
	acc->ticks += (uint64_t)m - acc->last + 256u * wraps;
	acc->count += n;
	acc->last = (uint8_t)m;
}

/* Account for the visited boundaries `vis` of window w: MTCs (in order),
 * IP packets and PIPs. */
static inline void win_done(const struct skip_win *W, const uint8_t *w, uint64_t vis,
			    VtPtMtcAcc *acc, unsigned int *ip)
{
	uint64_t all = win_vis(W, vis), x = W->mtc & all;

	*ip |= (W->ip & vis) != 0;	/* (a pair's first packet is one) */
	win_pips(W, w, all, acc);
	if (x)
		win_mtcs(w, x, acc);
}

/* A packet the window walk leaves to skip_len (never an MTC that is to be
 * accumulated: those have a size in lens), skip_pip or pgd_skip (packets
 * starting before end).  Returns its size or 0. */
static inline unsigned int win_slow1(const uint8_t *q, const uint8_t *end, VtPtMtcAcc *acc,
				     uint8_t *flags)
{
	uint8_t t = skip_tab[*q];
	unsigned int n = skip_len(t, q, 0x40);

	if (n)
		*flags |= t;
	else if (!(n = skip_pip(q, acc)) && (n = pgd_skip(q, end, acc, 1)))
		*flags |= 0x80;
	return n;
}

/* win_slow1 for the packet at offset j of window w, which may be a PIP
 * (skip_pip notes it at once) or a TIP.PGD stretch (with its MTCs and
 * PIPs): the PIPs visited before it in the window (and, before a TIP.PGD,
 * the MTCs) are noted first and forgotten by the window, so that they
 * add up in order and the last NR is the last PIP's.  The size returned
 * may take the walk beyond the window (a TIP.PGD stretch). */
static inline unsigned int win_slow_at(struct skip_win *W, const uint8_t *w, unsigned int j,
				       const uint8_t *end, uint64_t *vis, VtPtMtcAcc *acc,
				       uint8_t *flags)
{
	uint64_t all = win_vis(W, *vis);

	if (unlikely(W->pip & all)) {
		win_pips(W, w, all, acc);
		W->pip &= ~all;
	}
	if (unlikely((w[j] & 0x1f) == 0x01) && acc && acc->skip_pgd && (W->mtc & all)) {
		win_mtcs(w, W->mtc & all, acc);
		W->mtc &= ~all;
	}
	return win_slow1(w + j, end, acc, flags);
}

#ifdef HAVE_SKIP_WIN_AVX2
/* ---- Block walk (AVX2): the windows' walk without a serial chain of
 * boundaries.
 *
 * The walks above visit the boundaries one after the other: each step
 * needs the previous one's position (a shift, a count of trailing zeros,
 * a load), ~10 cycles a step, and the next window starts where the walk
 * left the last one.  Here windows lie at fixed 64-byte steps from the
 * start, so classifying them does not wait for the walk, and within each
 * 16-byte block (a lane of vpshufb) the walk is done for every entry
 * offset at once by pointer jumping: next[k] = k + size of a packet at k
 * (k itself if that packet is not skipped here: the walk stops there),
 * then four rounds of next = next[next], visited = visited | visited[next]
 * (16-bit masks as two bytes) give, for each offset, where a walk entering
 * the block there leaves it (16 + the next block's entry offset, a packet
 * being at most 9 bytes) or stops, and the offsets it visits.  The walk
 * itself is then one load per block.
 *
 * Skipped here: PAD, TNT-8, CYC of one or two bytes, IP packets as in the
 * windows (not TIP.PGD), MTC and PIP (with an accumulator, as there), valid
 * MODE.  Anything else ends a block walk: skip_blk_run skips a longer CYC
 * or a TIP.PGD stretch with the slow path (win_slow1) and walks on, and
 * returns at a packet to stop at. */

/* Per-byte classes by nibble lookups (vpshufb): a byte's class bits are
 * LO[low nibble] & HI[high nibble] (at most one bit is set), kept where
 * the next byte allows them: C_LO[its low nibble] & C_HI[its high nibble]. */
enum {
	BLK_IPD = 0x01,		/* TIP, FUP: low nibble 0xd (IPBytes not 5, 7) */
	BLK_PGE = 0x02,		/* TIP.PGE: low five bits 0x11 */
	BLK_ONE = 0x04,		/* PAD, TNT-8, CYC without extension */
	BLK_EV2 = 0x08,		/* TNT-8 with low nibble 2 (not 0x02) */
	BLK_PIP = 0x10,		/* 0x02, then 0x43 (with_pip) */
	BLK_MTC = 0x20,		/* 0x59 (with_mtc) */
	BLK_MODE = 0x40,	/* 0x99, then a leaf < 0x40 */
	BLK_CYX = 0x80,		/* CYC with an extension byte, bit 0 clear */
};
#define BLK_ALL		(BLK_IPD | BLK_PGE | BLK_ONE | BLK_EV2 | BLK_MTC)

struct skw_b_avx2 {
	__m256i lo, hi, clo, chi, ipsz, szhi, k0f, k01, k03, k0c, kpos, k70, mlo0, mhi0;
};

#define BLK_T16(a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p)	\
	_mm256_setr_epi8(a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p, \
			 a, b, c, d, e, f, g, h, i, j, k, l, m, n, o, p)

__attribute__((target("avx2,bmi,bmi2"), always_inline))
static inline void skip_blk_kinit(struct skw_b_avx2 *B, int with_mtc, int with_pip)
{
	const char O = BLK_ONE, C = (char)BLK_CYX, A = BLK_ONE | (char)BLK_CYX;
	const char I = BLK_IPD | BLK_ONE | (char)BLK_CYX, G = I | BLK_PGE;
	const char E = BLK_EV2, P = with_pip ? BLK_PIP : 0, M = with_mtc ? BLK_MTC : 0;
	const char W = BLK_ALL | (char)BLK_CYX;	/* what any next byte allows */

	B->lo = BLK_T16(O, BLK_PGE, E | BLK_PIP, O, O, 0, O, C, O, BLK_MTC | BLK_MODE, O, O, O, BLK_IPD, O, C);
	B->hi = BLK_T16(I | P, G | E, I | E, G | E, I | E, G | E | M, I | E, G | E, I | E,
			G | E | BLK_MODE, A | E, A | E, I | E, G | E, A | E, A | E);
	B->clo = BLK_T16(W | BLK_MODE, W | BLK_MODE, W | BLK_MODE, W | BLK_MODE | BLK_PIP, W | BLK_MODE,
			 W | BLK_MODE, W | BLK_MODE, W | BLK_MODE, W | BLK_MODE, W | BLK_MODE, W | BLK_MODE,
			 W | BLK_MODE, W | BLK_MODE, W | BLK_MODE, W | BLK_MODE, W | BLK_MODE);
	/* (CYX needs an even next byte: cleared below for odd low nibbles) */
	B->chi = BLK_T16(W | BLK_MODE, W | BLK_MODE, W | BLK_MODE, W | BLK_MODE, W | BLK_PIP,
			 W, W, W, W, W, W, W, W, W, W, W);
	for (int i = 1; i < 16; i += 2)
		((char *)&B->clo)[i] &= (char)~BLK_CYX, ((char *)&B->clo)[i + 16] &= (char)~BLK_CYX;
	B->ipsz = BLK_T16(1, 1, 3, 3, 5, 5, 7, 7, 7, 7, 0, 0, 9, 9, 0, 0);
	B->szhi = BLK_T16(0, 8, 2, 0, 2, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0);
	B->k0f = _mm256_set1_epi8(0x0f);
	B->k01 = _mm256_set1_epi8(0x01);
	B->k03 = _mm256_set1_epi8(0x03);
	B->k0c = _mm256_set1_epi8(0x0c);
	B->kpos = BLK_T16(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
	B->k70 = _mm256_set1_epi8(0x70);
	B->mlo0 = BLK_T16(1, 2, 4, 8, 16, 32, 64, -128, 0, 0, 0, 0, 0, 0, 0, 0);
	B->mhi0 = BLK_T16(0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 4, 8, 16, 32, 64, -128);
	SKW_OPAQUE(B->lo); SKW_OPAQUE(B->hi); SKW_OPAQUE(B->clo); SKW_OPAQUE(B->chi);
	SKW_OPAQUE(B->ipsz); SKW_OPAQUE(B->szhi); SKW_OPAQUE(B->k0f); SKW_OPAQUE(B->k01);
	SKW_OPAQUE(B->k03); SKW_OPAQUE(B->k0c);
	SKW_OPAQUE(B->kpos); SKW_OPAQUE(B->k70);
	SKW_OPAQUE(B->mlo0); SKW_OPAQUE(B->mhi0);
}

/* Sizes of the packets the block walk skips, as if each of the 32 bytes
 * at w started one (0: stop); their IP, MTC and PIP headers in *ip, *mtc,
 * *pip.  Reads w[0..32]. */
__attribute__((target("avx2,bmi,bmi2"), always_inline))
static inline __m256i skip_blk_sizes(const uint8_t *w, const struct skw_b_avx2 *B,
				     uint32_t *ip, uint32_t *mtc, uint32_t *pip)
{
	const __m256i k0f = B->k0f;
	__m256i v = _mm256_loadu_si256((const __m256i *)(const void *)w);
	__m256i v1 = _mm256_loadu_si256((const __m256i *)(const void *)(w + 1));
	__m256i hn = _mm256_and_si256(_mm256_srli_epi16(v, 4), k0f);
	__m256i c = _mm256_and_si256(_mm256_shuffle_epi8(B->lo, _mm256_and_si256(v, k0f)),
				     _mm256_shuffle_epi8(B->hi, hn));
	__m256i ok = _mm256_and_si256(_mm256_shuffle_epi8(B->clo, _mm256_and_si256(v1, k0f)),
				      _mm256_shuffle_epi8(B->chi, _mm256_and_si256(_mm256_srli_epi16(v1, 4), k0f)));
	__m256i cls = _mm256_and_si256(c, ok);
	__m256i notip = _mm256_cmpeq_epi8(_mm256_and_si256(cls, B->k03), _mm256_setzero_si256());
	__m256i sz = _mm256_or_si256(_mm256_min_epu8(_mm256_and_si256(cls, B->k0c), B->k01),
				     _mm256_shuffle_epi8(B->szhi, _mm256_and_si256(_mm256_srli_epi16(cls, 4), k0f)));

	*ip = ~(uint32_t)_mm256_movemask_epi8(notip);
	*mtc = (uint32_t)_mm256_movemask_epi8(_mm256_slli_epi16(cls, 2));
	*pip = (uint32_t)_mm256_movemask_epi8(_mm256_slli_epi16(cls, 3));
	return _mm256_or_si256(sz, _mm256_andnot_si256(notip, _mm256_shuffle_epi8(B->ipsz, hn)));
}

/* For the two 16-byte blocks of the 32 bytes at w (window offset base):
 * per entry offset k, where the walk leaves (the next block's window
 * offset) or stops (its own offset: a fixed point), into n[k], and the
 * offsets of its block that it visits (bit j = offset j of the block) into
 * vis[k]. */
__attribute__((target("avx2,bmi,bmi2"), always_inline))
static inline void skip_blk_jump(const uint8_t *w, const struct skw_b_avx2 *B, __m256i base,
				 uint8_t *n, uint16_t *vis, uint32_t *ip, uint32_t *mtc, uint32_t *pip)
{
	__m256i nx = _mm256_add_epi8(B->kpos, skip_blk_sizes(w, B, ip, mtc, pip));
	__m256i ml = B->mlo0, mh = B->mhi0, lo, hi;

#pragma GCC unroll 4
	for (int r = 0; r < 4; r++) {
		/* offsets 0-15 index their lane, 16 and more give 0 */
		__m256i idx = _mm256_adds_epu8(nx, B->k70);

		ml = _mm256_or_si256(ml, _mm256_shuffle_epi8(ml, idx));
		mh = _mm256_or_si256(mh, _mm256_shuffle_epi8(mh, idx));
		nx = _mm256_max_epu8(nx, _mm256_shuffle_epi8(nx, idx));
	}
	_mm256_storeu_si256((__m256i *)(void *)n, _mm256_add_epi8(nx, base));
	lo = _mm256_unpacklo_epi8(ml, mh);	/* offsets 0-7 of each block */
	hi = _mm256_unpackhi_epi8(ml, mh);	/* 8-15 */
	_mm256_storeu_si256((__m256i *)(void *)vis, _mm256_permute2x128_si256(lo, hi, 0x20));
	_mm256_storeu_si256((__m256i *)(void *)(vis + 16), _mm256_permute2x128_si256(lo, hi, 0x31));
}

/* Account for the visited offsets `vis` of the window at w. */
static inline void skip_blk_note(const uint8_t *w, uint64_t vis, uint64_t ip, uint64_t mtc,
				 uint64_t pip, VtPtMtcAcc *acc, unsigned int *ipv)
{
	uint64_t x;

	*ipv |= (ip & vis) != 0;
	if (!acc)
		return;
	x = pip & vis;
	if (unlikely(x)) {
		acc->pip_count += (uint32_t)__builtin_popcountll(x);
		acc->pip_nr = w[63 - __builtin_clzll(x) + 2] & 1;
	}
	x = mtc & vis;
	if (x)
		win_mtcs(w, x, acc);
}

/* Skip from p (a boundary) with windows starting at most at `last`; the
 * visited IP packets set *ipf.  Returns the boundary where the caller
 * goes on: a packet not skipped here, or after `last`.  The walk is
 * k1 = n[k0], ..., k4 = n[k3] (window offsets: a stop is a fixed point),
 * so a window without a stop costs four dependent loads. */
__attribute__((target("avx2,bmi,bmi2")))
static const uint8_t *skip_blk_avx2(const uint8_t *p, const uint8_t *last, VtPtMtcAcc *acc,
				    unsigned int *ipf)
{
	struct skw_b_avx2 B;
	uint8_t n[64];
	uint16_t vb[64];
	unsigned int e = 0, ipv = 0;
	__m256i base0, base1;

	/* (window offsets of the blocks: 0, 16 | 32, 48) */
	base0 = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
				 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16, 16);
	base1 = _mm256_add_epi8(base0, _mm256_set1_epi8(32));
	SKW_OPAQUE(base0);
	SKW_OPAQUE(base1);
	skip_blk_kinit(&B, acc != NULL, acc && acc->skip_pip);
	for (; p <= last; p += 64) {
		uint32_t ip0, ip1, m0, m1, pp0, pp1;
		unsigned int k1, k2, k3, k4;
		uint64_t vis;

		skip_blk_jump(p, &B, base0, n, vb, &ip0, &m0, &pp0);
		skip_blk_jump(p + 32, &B, base1, n + 32, vb + 32, &ip1, &m1, &pp1);
		k1 = n[e];
		k2 = n[k1];
		k3 = n[k2];
		k4 = n[k3];
		if (likely(k4 >= 64)) {
			vis = vb[e] | (uint64_t)vb[k1] << 16 | (uint64_t)vb[k2] << 32 | (uint64_t)vb[k3] << 48;
			skip_blk_note(p, vis, ip0 | (uint64_t)ip1 << 32, m0 | (uint64_t)m1 << 32,
				      pp0 | (uint64_t)pp1 << 32, acc, &ipv);
			e = k4 - 64;
			continue;
		}
		/* stopped at k4: only the blocks entered count (after the
		 * stop, k stays in its block) */
		vis = vb[e];
		vis |= k1 >= 16 ? (uint64_t)vb[k1] << 16 : 0;
		vis |= k2 >= 32 ? (uint64_t)vb[k2] << 32 : 0;
		vis |= k3 >= 48 ? (uint64_t)vb[k3] << 48 : 0;
		vis &= ~(1ULL << k4);
		skip_blk_note(p, vis, ip0 | (uint64_t)ip1 << 32, m0 | (uint64_t)m1 << 32,
			      pp0 | (uint64_t)pp1 << 32, acc, &ipv);
		*ipf |= ipv;
		return p + k4;
	}
	*ipf |= ipv;
	return p + e;
}

/* The block walk from p, each packet it leaves that the window walk would
 * skip (a longer CYC, a TIP.PGD stretch, ...) skipped by win_slow1, and on
 * (end: the scalar loop's limit).  Returns a packet to stop at, or a
 * boundary after `last` (near the end: the scalar loop goes on there). */
__attribute__((target("avx2,bmi,bmi2")))
static const uint8_t *skip_blk_run(const uint8_t *p, const uint8_t *last, const uint8_t *end,
				   VtPtMtcAcc *acc, uint8_t *flags)
{
	for (;;) {
		unsigned int ip = 0, n;

		p = skip_blk_avx2(p, last, acc, &ip);
		*flags |= ip ? 0x80 : 0;
		if (p > last || !(n = win_slow1(p, end, acc, flags)))
			return p;
		p += n;
	}
}
#endif

/* The walks, once per instruction set. */
#define SKW(name)	name##_sse2
#define SKW_ATTR
#include "src/pt/pt-skip-win.h"
#undef SKW
#undef SKW_ATTR

#endif

/* Implementation selection (vt_pt_scan_skip_select). */
static int skip_impl = VT_PT_SKIP_AUTO;

static int skip_have(int impl)
{
	switch (impl) {
	case VT_PT_SKIP_AUTO:
	case VT_PT_SKIP_SCALAR:
		return 1;
#ifdef HAVE_SKIP_WIN
	case VT_PT_SKIP_SSE2:
		return 1;
#endif
#ifdef HAVE_SKIP_WIN_AVX2
	case VT_PT_SKIP_AVX2:
		return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi2");
#endif
	default:
		return 0;
	}
}

int vt_pt_scan_skip_select(VtPtSkipImpl impl)
{
	if (!skip_have(impl))
		return -1;
	skip_impl = impl;
	return 0;
}

/* The implementation to use now. */
static inline int skip_impl_now(void)
{
	int impl = skip_impl;

	if (impl != VT_PT_SKIP_AUTO)
		return impl;
#ifdef HAVE_SKIP_WIN_AVX2
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi2"))
		return VT_PT_SKIP_AVX2;
#endif
#ifdef HAVE_SKIP_WIN
	return VT_PT_SKIP_SSE2;
#else
	return VT_PT_SKIP_SCALAR;
#endif
}

size_t vt_pt_scan_skip_flow(VtPtScanner *s, VtPtMtcAcc *acc)
{
	const uint8_t *p = s->pos, *end;
	const uint8_t *start = p;
	uint8_t flags = 0;
	uint8_t mtc_mask = acc ? 0 : 0x40;

	if (s->bip_ctx || s->end - p < 32)
		return 0;
	end = s->end - 16;
#ifdef HAVE_SKIP_WIN
# ifdef HAVE_SKIP_WIN_AVX2
	if (skip_impl_now() == VT_PT_SKIP_AVX2 && s->end - p >= WIN_ROOM) {
		p = skip_blk_run(p, s->end - WIN_ROOM, end, acc, &flags);
		if (p <= s->end - WIN_ROOM)
			end = p;	/* a packet to stop at */
	} else
# endif
	if (s->end - p >= WIN_ROOM) {
		int impl = skip_impl_now(), stop = 0;

		if (impl == VT_PT_SKIP_SSE2)
			p = skip_win1_sse2(p, s->end - WIN_ROOM, acc, &flags, &stop);
		if (stop)
			end = p;
	}
#endif
	p = skip_scalar(p, end, acc, mtc_mask, &flags);
	if (flags & 0x80)
		s->have_last_ip = 0;
	s->pos = p;
	return (size_t)(p - start);
}

size_t vt_pt_scan_skip_timing(VtPtScanner *s, VtPtMtcAcc *acc)
{
	const uint8_t *p = s->pos;
	uint8_t flags = 0;

	if (s->bip_ctx || s->end - p < 32)
		return 0;
	s->pos = skip_scalar_tab(p, s->end - 16, acc, acc ? 0 : 0x40, &flags, skip_tab_off);
	return (size_t)(s->pos - p);
}

/* _flow2's end: both scanners at their stops (an IP packet skipped: the
 * last IP is gone); returns STOPPED */
static int flow2_stop(VtPtScanner *a, const uint8_t *pa, uint8_t fa,
		      VtPtScanner *b, const uint8_t *pb, uint8_t fb, int stopped)
{
	if (fa & 0x80)
		a->have_last_ip = 0;
	if (fb & 0x80)
		b->have_last_ip = 0;
	a->pos = pa;
	b->pos = pb;
	return stopped;
}

int vt_pt_scan_skip_flow2(VtPtScanner *a, VtPtMtcAcc *acca,
			  VtPtScanner *b, VtPtMtcAcc *accb)
{
	const uint8_t *pa = a->pos, *pb = b->pos, *ea, *eb;
	uint8_t fa = 0, fb = 0;
	uint8_t ma = acca ? 0 : 0x40, mb = accb ? 0 : 0x40;
	unsigned int na = 0, nb = 0;
	int stopped = 0;

	if (a->bip_ctx || a->end - pa < 32)
		stopped |= 1;
	if (b->bip_ctx || b->end - pb < 32)
		stopped |= 2;
	if (stopped)
		return stopped;
#ifdef HAVE_SKIP_WIN_AVX2
	if (skip_impl_now() == VT_PT_SKIP_AVX2 && a->end - pa >= WIN_ROOM && b->end - pb >= WIN_ROOM) {
		/* one after the other: the block walk's chain is short, its
		 * windows do not wait for it; each to its stop */
		ea = a->end - 16;
		eb = b->end - 16;
		pa = skip_blk_run(pa, a->end - WIN_ROOM, ea, acca, &fa);
		pb = skip_blk_run(pb, b->end - WIN_ROOM, eb, accb, &fb);
		if (pa > a->end - WIN_ROOM)
			pa = skip_scalar(pa, ea, acca, ma, &fa);
		if (pb > b->end - WIN_ROOM)
			pb = skip_scalar(pb, eb, accb, mb, &fb);
		return flow2_stop(a, pa, fa, b, pb, fb, 3);
	}
#endif
#ifdef HAVE_SKIP_WIN
	if (a->end - pa >= WIN_ROOM && b->end - pb >= WIN_ROOM) {
		int impl = skip_impl_now();

		if (impl == VT_PT_SKIP_SSE2)
			return skip_win2_sse2(a, acca, b, accb);
	}
#endif
	ea = a->end - 16;
	eb = b->end - 16;
	/* Two independent dependency chains: the CPU overlaps their loads. */
	for (;;) {
		uint8_t ta = skip_tab[*pa], tb = skip_tab[*pb];

		na = skip_len(ta, pa, ma);
		nb = skip_len(tb, pb, mb);
		if (unlikely(!na || !nb)) {
			/* PIPs, TIP.PGD stretches: only counted once both go on */
			if (!na && !(na = pip_len(pa, acca)) && (na = pgd_skip(pa, ea, acca, 0)))
				ta = 0x80;
			if (!nb && !(nb = pip_len(pb, accb)) && (nb = pgd_skip(pb, eb, accb, 0)))
				tb = 0x80;
			if (!na || !nb)
				break;
			if (!ta)
				skip_pip(pa, acca);
			else if (ta == 0x80)
				pgd_skip(pa, ea, acca, 1);
			if (!tb)
				skip_pip(pb, accb);
			else if (tb == 0x80)
				pgd_skip(pb, eb, accb, 1);
		}
		if (__builtin_expect(((ta | tb) & 0x40) != 0, 0)) {
			if (ta & 0x40)
				mtc_add(acca, pa[1]);
			if (tb & 0x40)
				mtc_add(accb, pb[1]);
		}
		fa |= ta;
		fb |= tb;
		pa += na;
		pb += nb;
		if (pa >= ea || pb >= eb)
			break;
	}
	if (!na || pa >= ea)
		stopped |= 1;
	if (!nb || pb >= eb)
		stopped |= 2;
	return flow2_stop(a, pa, fa, b, pb, fb, stopped);
}

/* Synchronisation.
 *
 * libipt's pt_sync_forward looks at aligned 8-byte words of PSB pattern,
 * extends the in-phase run of "02 82" pairs containing the word to its end
 * and takes the last 16 bytes of that run as the PSB.  The equivalent
 * here: find the first run of at least eight "02 82" pairs whose last 16
 * bytes start at or after @start; the PSB is the last 16 bytes of the run
 * (a longer run is a PSB preceded by stray pattern bytes).
 */
static const uint8_t *find_psb(const uint8_t *q, const uint8_t *end,
			       const uint8_t *excl)
{
	static const uint8_t pat[4] = { 0x02, 0x82, 0x02, 0x82 };

	while (end - q >= 16) {
		const uint8_t *x, *e;

		x = memmem(q, (size_t)(end - q), pat, sizeof(pat));
		if (!x)
			return NULL;
		e = x + 4;
		while (end - e >= 2 && e[0] == 0x02 && e[1] == 0x82)
			e += 2;
		if (e - x >= 16 && e - 16 != excl)
			return e - 16;
		q = e;
	}
	return NULL;
}

int vt_pt_scan_sync_forward(VtPtScanner *s, int at_ok)
{
	const uint8_t *start, *r;

	if (!s)
		return -vt_pte_invalid;

	if (at_ok) {
		start = s->pos;
		r = find_psb(start, s->end, NULL);
	} else {
		/* Like pt_pkt_sync_forward: also find a PSB that a
		 * mis-decoded packet before s->pos partially consumed. */
		size_t back = (size_t)(s->pos - s->begin);

		if (back > 15)
			back = 15;
		start = s->pos - back;
		r = find_psb(start, s->end, s->pos);
	}

	s->last_ip = 0;
	s->bip_ctx = 0;
	if (!r) {
		s->pos = s->end;
		s->have_last_ip = 0;
		return -vt_pte_nosync;
	}
	s->pos = r;
	s->have_last_ip = 1;
	return 0;
}

/* ---------------------------------------------------------------------- */
/* Names and descriptions. */

const char *vt_pt_errstr(int code)
{
	if (code < 0)
		code = -code;
	switch (code) {
	case vt_pte_ok:
		return "success";
	case vt_pte_eos:
		return "end of trace buffer";
	case vt_pte_bad_opc:
		return "unknown opcode";
	case vt_pte_bad_packet:
		return "unknown packet payload";
	case vt_pte_nosync:
		return "no PSB found";
	case vt_pte_invalid:
		return "invalid argument";
	default:
		return "unknown error";
	}
}

static const char *const pkt_names[VT_PT_NTYPES] = {
	[VT_PT_BAD] = "Bad Packet!",
	[VT_PT_PAD] = "PAD",
	[VT_PT_PSB] = "PSB",
	[VT_PT_PSBEND] = "PSBEND",
	[VT_PT_TNT_8] = "TNT.8",
	[VT_PT_TNT_64] = "TNT.64",
	[VT_PT_TIP] = "TIP",
	[VT_PT_TIP_PGE] = "TIP.PGE",
	[VT_PT_TIP_PGD] = "TIP.PGD",
	[VT_PT_FUP] = "FUP",
	[VT_PT_MODE_EXEC] = "MODE.Exec",
	[VT_PT_MODE_TSX] = "MODE.TSX",
	[VT_PT_TSC] = "TSC",
	[VT_PT_TMA] = "TMA",
	[VT_PT_MTC] = "MTC",
	[VT_PT_CYC] = "CYC",
	[VT_PT_CBR] = "CBR",
	[VT_PT_PIP] = "PIP",
	[VT_PT_VMCS] = "VMCS",
	[VT_PT_OVF] = "OVF",
	[VT_PT_STOP] = "TraceSTOP",
	[VT_PT_MNT] = "MNT",
	[VT_PT_PTW] = "PTWRITE",
	[VT_PT_EXSTOP] = "EXSTOP",
	[VT_PT_MWAIT] = "MWAIT",
	[VT_PT_PWRE] = "PWRE",
	[VT_PT_PWRX] = "PWRX",
	[VT_PT_BBP] = "BBP",
	[VT_PT_BIP] = "BIP",
	[VT_PT_BEP] = "BEP",
	[VT_PT_CFE] = "CFE",
	[VT_PT_EVD] = "EVD",
};

const char *vt_pt_packet_name(VtPtPacketType t)
{
	if ((unsigned int)t >= VT_PT_NTYPES)
		return "unknown";
	return pkt_names[t];
}

/* snprintf that tolerates len == 0 / NULL buffer like snprintf itself. */
#define DESC(...)	snprintf(buf, len, __VA_ARGS__)

int vt_pt_packet_desc(const VtPtPacket *pkt, char *buf, size_t len)
{
	const char *name;
	uint64_t v;

	if (!pkt)
		return -vt_pte_invalid;
	if (!buf)
		len = 0;
	name = vt_pt_packet_name(pkt->type);

	switch (pkt->type) {
	case VT_PT_BAD:
	case VT_PT_PAD:
	case VT_PT_PSB:
	case VT_PT_PSBEND:
	case VT_PT_STOP:
	case VT_PT_OVF:
		return DESC("%s", name);
	case VT_PT_TNT_8:
	case VT_PT_TNT_64: {
		/* "TNT TNNT (4)": oldest (most significant) branch first. */
		char bits[64];
		unsigned int i, n = pkt->u.tnt.bit_size;

		if (n > 63)
			n = 63;
		for (i = 0; i < n; i++)
			bits[i] = (pkt->u.tnt.payload >> (n - 1 - i)) & 1 ?
				  'T' : 'N';
		bits[n] = '\0';
		return DESC("TNT %s (%u)", bits, n);
	}
	case VT_PT_TIP:
	case VT_PT_TIP_PGE:
	case VT_PT_TIP_PGD:
	case VT_PT_FUP:
		if (!pkt->u.ip.ipc)
			return DESC("%s no ip", name);
		return DESC("%s 0x%" PRIx64, name, pkt->u.ip.raw);
	case VT_PT_CYC:
		return DESC("%s 0x%" PRIx64, name, pkt->u.cyc);
	case VT_PT_VMCS:
		return DESC("%s 0x%" PRIx64, name, pkt->u.vmcs);
	case VT_PT_MTC:
		return DESC("%s 0x%x", name, (unsigned int)pkt->u.mtc);
	case VT_PT_MNT:
		return DESC("%s 0x%" PRIx64, name, pkt->u.misc.payload);
	case VT_PT_CBR:
		return DESC("%s 0x%x", name, (unsigned int)pkt->u.cbr);
	case VT_PT_TSC:
		return DESC("%s 0x%" PRIx64, name, pkt->u.tsc);
	case VT_PT_TMA:
		return DESC("%s CTC 0x%x FC 0x%x", name,
			    (unsigned int)pkt->u.tma.ctc,
			    (unsigned int)pkt->u.tma.fc);
	case VT_PT_MODE_EXEC: {
		/* CS.L=CS.D=1 is reserved: perf rejects it, libipt calls it
		 * "unknown"; print 0 bits then. */
		static const int width[4] = { 16, 64, 32, 0 };

		return DESC("%s IF:%d %d", name, (pkt->u.mode.bits >> 2) & 1,
			    width[pkt->u.mode.bits & 3]);
	}
	case VT_PT_MODE_TSX:
		return DESC("%s TXAbort:%u InTX:%u", name,
			    (unsigned int)(pkt->u.mode.bits >> 1) & 1,
			    (unsigned int)pkt->u.mode.bits & 1);
	case VT_PT_PIP:
		return DESC("%s 0x%" PRIx64 " (NR=%d)", name,
			    pkt->u.pip.cr3 >> 5, pkt->u.pip.nr ? 1 : 0);
	case VT_PT_PTW:
		return DESC("%s 0x%" PRIx64 " IP:%u", name,
			    pkt->u.misc.payload,
			    (unsigned int)(pkt->u.misc.extra >> 7) & 1);
	case VT_PT_EXSTOP:
	case VT_PT_BEP:
		return DESC("%s IP:%u", name,
			    (unsigned int)(pkt->u.misc.extra >> 7) & 1);
	case VT_PT_MWAIT:
		v = pkt->u.misc.payload;
		return DESC("%s 0x%" PRIx64 " Hints 0x%x Extensions 0x%x", name,
			    v, (unsigned int)(v & 0xff),
			    (unsigned int)((v >> 32) & 0x3));
	case VT_PT_PWRE:
		v = pkt->u.misc.payload;
		return DESC("%s 0x%" PRIx64 " HW:%u CState:%u Sub-CState:%u",
			    name, v, (unsigned int)!!(v & 0x80),
			    (unsigned int)((v >> 12) & 0xf),
			    (unsigned int)((v >> 8) & 0xf));
	case VT_PT_PWRX:
		v = pkt->u.misc.payload;
		return DESC("%s 0x%" PRIx64
			    " Last CState:%u Deepest CState:%u Wake Reason 0x%x",
			    name, v, (unsigned int)((v >> 4) & 0xf),
			    (unsigned int)(v & 0xf),
			    (unsigned int)((v >> 8) & 0xf));
	case VT_PT_BBP:
		v = pkt->u.misc.payload;
		return DESC("%s SZ %s-byte Type 0x%x", name,
			    (v & 0x80) ? "4" : "8", (unsigned int)(v & 0x1f));
	case VT_PT_BIP:
		return DESC("%s ID 0x%02x Value 0x%" PRIx64, name,
			    (unsigned int)pkt->u.misc.extra,
			    pkt->u.misc.payload);
	case VT_PT_CFE:
		return DESC("%s IP:%u Type 0x%02x Vector 0x%" PRIx64, name,
			    (unsigned int)(pkt->u.misc.extra >> 7) & 1,
			    (unsigned int)(pkt->u.misc.extra & 0x1f),
			    pkt->u.misc.payload);
	case VT_PT_EVD:
		return DESC("%s Type 0x%02x Payload 0x%" PRIx64, name,
			    (unsigned int)(pkt->u.misc.extra & 0x3f),
			    pkt->u.misc.payload);
	default:
		return DESC("%s", name);
	}
}
