/* pt-crosscheck.h - compare vmtrace's packet scanner with libipt's packet
 * decoder, packet by packet (xc_run), and its last-IP reconstruction with
 * an independent model, and the skip API's reference walk.  Shared by
 * tests/test-pt-scan.c, tests/test-pt-skip.c and the libFuzzer
 * target; the includer defines
 *   XC_FAIL(fmt, ...)  fail with a message (does not return)
 *   XC_EQ(a, b)        fail unless a == b (as 64-bit values)
 */
#ifndef VT_PT_CROSSCHECK_H
#define VT_PT_CROSSCHECK_H

#include <inttypes.h>
#include <intel-pt.h>

#include "src/pt/pt-scan.h"
#include "tests/ipt-unknown.h"

/* Compare one successfully decoded packet. */
static inline void cmp_packet(const VtPtPacket *v, const struct pt_packet *l,
		       uint64_t off)
{
	uint64_t p;
	uint32_t x;

	if ((int)v->size != (int)l->size)
		XC_FAIL("offset %" PRIu64 ": size %u (%s) vs libipt %u (type %d)",
			off, v->size, vt_pt_packet_name(v->type), l->size,
			l->type);

#define EXPECT_TYPE(t)							\
	do {								\
		if (v->type != (t))					\
			XC_FAIL("offset %" PRIu64 ": type %s, libipt %d",	\
				off, vt_pt_packet_name(v->type), l->type); \
	} while (0)

	p = v->u.misc.payload;
	x = v->u.misc.extra;
	switch (l->type) {
	case ppt_pad:
		EXPECT_TYPE(VT_PT_PAD);
		break;
	case ppt_psb:
		EXPECT_TYPE(VT_PT_PSB);
		break;
	case ppt_psbend:
		EXPECT_TYPE(VT_PT_PSBEND);
		break;
	case ppt_ovf:
		EXPECT_TYPE(VT_PT_OVF);
		break;
	case ppt_stop:
		EXPECT_TYPE(VT_PT_STOP);
		break;
	case ppt_fup:
	case ppt_tip:
	case ppt_tip_pge:
	case ppt_tip_pgd:
		EXPECT_TYPE(l->type == ppt_fup ? VT_PT_FUP :
			    l->type == ppt_tip ? VT_PT_TIP :
			    l->type == ppt_tip_pge ? VT_PT_TIP_PGE :
			    VT_PT_TIP_PGD);
		XC_EQ(v->u.ip.ipc, l->payload.ip.ipc);
		XC_EQ(v->u.ip.raw, l->payload.ip.ip);
		break;
	case ppt_tnt_8:
	case ppt_tnt_64:
		EXPECT_TYPE(l->type == ppt_tnt_8 ? VT_PT_TNT_8 : VT_PT_TNT_64);
		XC_EQ(v->u.tnt.bit_size, l->payload.tnt.bit_size);
		XC_EQ(v->u.tnt.payload, l->payload.tnt.payload);
		break;
	case ppt_mode:
		if (l->payload.mode.leaf == pt_mol_exec) {
			EXPECT_TYPE(VT_PT_MODE_EXEC);
			XC_EQ(v->u.mode.bits & 1, l->payload.mode.bits.exec.csl);
			XC_EQ((v->u.mode.bits >> 1) & 1, l->payload.mode.bits.exec.csd);
		} else {
			EXPECT_TYPE(VT_PT_MODE_TSX);
			XC_EQ(v->u.mode.bits & 1, l->payload.mode.bits.tsx.intx);
			XC_EQ((v->u.mode.bits >> 1) & 1, l->payload.mode.bits.tsx.abrt);
		}
		break;
	case ppt_pip:
		EXPECT_TYPE(VT_PT_PIP);
		XC_EQ(v->u.pip.cr3, l->payload.pip.cr3);
		XC_EQ(v->u.pip.nr, l->payload.pip.nr);
		break;
	case ppt_vmcs:
		EXPECT_TYPE(VT_PT_VMCS);
		XC_EQ(v->u.vmcs << 12, l->payload.vmcs.base);
		break;
	case ppt_cbr:
		EXPECT_TYPE(VT_PT_CBR);
		XC_EQ(v->u.cbr, l->payload.cbr.ratio);
		break;
	case ppt_tsc:
		EXPECT_TYPE(VT_PT_TSC);
		XC_EQ(v->u.tsc, l->payload.tsc.tsc);
		break;
	case ppt_tma:
		EXPECT_TYPE(VT_PT_TMA);
		XC_EQ(v->u.tma.ctc, l->payload.tma.ctc);
		XC_EQ(v->u.tma.fc, l->payload.tma.fc);
		break;
	case ppt_mtc:
		EXPECT_TYPE(VT_PT_MTC);
		XC_EQ(v->u.mtc, l->payload.mtc.ctc);
		break;
	case ppt_cyc:
		EXPECT_TYPE(VT_PT_CYC);
		XC_EQ(v->u.cyc, l->payload.cyc.value);
		break;
	case ppt_mnt:
		EXPECT_TYPE(VT_PT_MNT);
		XC_EQ(p, l->payload.mnt.payload);
		break;
	case ppt_exstop:
		EXPECT_TYPE(VT_PT_EXSTOP);
		XC_EQ(x >> 7, l->payload.exstop.ip);
		break;
	case ppt_mwait:
		EXPECT_TYPE(VT_PT_MWAIT);
		XC_EQ((uint32_t)p, l->payload.mwait.hints);
		XC_EQ(p >> 32, l->payload.mwait.ext);
		break;
	case ppt_pwre:
		EXPECT_TYPE(VT_PT_PWRE);
		XC_EQ((p >> 12) & 0xf, l->payload.pwre.state);
		XC_EQ((p >> 8) & 0xf, l->payload.pwre.sub_state);
		/* libipt's HW mask is 0x8, perf's 0x80; we keep the raw
		 * payload. */
		XC_EQ(!!(p & 0x8), l->payload.pwre.hw);
		break;
	case ppt_pwrx:
		EXPECT_TYPE(VT_PT_PWRX);
		XC_EQ((p >> 4) & 0xf, l->payload.pwrx.last);
		XC_EQ(p & 0xf, l->payload.pwrx.deepest);
		XC_EQ(!!(p & 0x100), l->payload.pwrx.interrupt);
		XC_EQ(!!(p & 0x400), l->payload.pwrx.store);
		XC_EQ(!!(p & 0x800), l->payload.pwrx.autonomous);
		break;
	case ppt_ptw:
		EXPECT_TYPE(VT_PT_PTW);
		XC_EQ(p, l->payload.ptw.payload);
		XC_EQ((x >> 5) & 3, l->payload.ptw.plc);
		XC_EQ(x >> 7, l->payload.ptw.ip);
		break;
	case ppt_unknown:
		if (v->type != VT_PT_CFE && v->type != VT_PT_EVD &&
		    v->type != VT_PT_BBP && v->type != VT_PT_BEP)
			XC_FAIL("offset %" PRIu64 ": %s vs libipt unknown", off,
				vt_pt_packet_name(v->type));
		break;
	default:
		XC_FAIL("offset %" PRIu64 ": unexpected libipt type %d", off,
			l->type);
	}
#undef EXPECT_TYPE
}

struct ip_model {
	uint64_t ip;
	int known;	/* all 64 bits known (PSB seen, or ipc 3/6) */
};

static inline void model_check(struct ip_model *m, const VtPtPacket *v)
{
	uint64_t raw = v->u.ip.raw, ip = m->ip;
	int suppressed = 0;

	switch (v->u.ip.ipc) {
	case 0:
		suppressed = 1;
		break;
	case 1:
		ip = (ip & 0xffffffffffff0000ULL) | (raw & 0xffff);
		break;
	case 2:
		ip = (ip & 0xffffffff00000000ULL) | (raw & 0xffffffffULL);
		break;
	case 3:
		ip = raw & 0xffffffffffffULL;
		if (ip & 0x800000000000ULL)
			ip |= 0xffff000000000000ULL;
		m->known = 1;
		break;
	case 4:
		ip = (ip & 0xffff000000000000ULL) | (raw & 0xffffffffffffULL);
		break;
	case 6:
		ip = raw;
		m->known = 1;
		break;
	default:
		XC_FAIL("unreachable");
	}
	if (!m->known)
		suppressed = 1;
	m->ip = ip;
	XC_EQ(v->u.ip.suppressed, suppressed);
	/* ip is 0 for a suppressed IP (IPBytes 0) */
	XC_EQ(v->u.ip.ip, v->u.ip.ipc ? ip : 0);
}

/* Statistics of xc_run. */
struct xc_stats {
	uint64_t packets, errors, resyncs, bips;
};

/* The cross-check over buf[0, len): sync both, compare packet by packet
 * (offsets, payloads, last-IP model), and after an error check that both
 * report the same error at the same offset and resync to the same place.
 * `d` is a libipt packet decoder over the same buffer (the includer makes
 * it, with tests/ipt-unknown.h's callback); needs vt_ipt_code(). */
static inline void xc_run(struct pt_packet_decoder *d, const uint8_t *buf, size_t len, int use_inline,
			  struct xc_stats *st)
{
	VtPtScanner s;
	VtPtPacket v;
	struct pt_packet l;
	struct ip_model m = { 0, 1 };
	uint64_t lo, ls, sync_set_at = UINT64_MAX;
	int rl, rv;

	vt_pt_scan_init(&s, buf, len, 0);
	rl = pt_pkt_sync_forward(d);
	rv = vt_pt_scan_sync_forward(&s, 1);
	if (rl < 0) {
		XC_EQ(rl, -pte_eos);
		XC_EQ(rv, -vt_pte_nosync);
		return;
	}
	XC_EQ(rv, 0);
	for (;;) {
		XC_EQ(pt_pkt_get_offset(d, &lo), 0);
		if (lo != vt_pt_scan_offset(&s))
			XC_FAIL("position %" PRIu64 " vs libipt %" PRIu64, vt_pt_scan_offset(&s), lo);
		rv = use_inline ? vt_pt_scan_next_inline(&s, &v) : vt_pt_scan_next(&s, &v);
		if (rv > 0 && v.type == VT_PT_BIP) {
			/* libipt has no BIP: skip it there */
			sync_set_at = v.offset + v.size;
			XC_EQ(pt_pkt_sync_set(d, sync_set_at), 0);
			st->bips++;
			continue;
		}
		if (rv == -vt_pte_eos && s.bip_ctx && s.pos < s.end && (*s.pos & 7) == 4) {
			/* a BIP cut off at the end (libipt: TNT-8 ...) */
			XC_EQ(v.offset, lo);
			break;
		}
		rl = pt_pkt_next(d, &l, sizeof(l));
		if (rv > 0 && rl > 0) {
			XC_EQ(v.offset, lo);
			cmp_packet(&v, &l, lo);
			if (v.type == VT_PT_PSB) {
				m.ip = 0;
				m.known = 1;
			} else if (v.type >= VT_PT_TIP && v.type <= VT_PT_FUP) {
				model_check(&m, &v);
			}
			st->packets++;
			continue;
		}
		if (rv > 0 || rl > 0)
			XC_FAIL("offset %" PRIu64 ": vt %d (%s) vs libipt %d (%s)", lo, rv,
				rv > 0 ? vt_pt_packet_name(v.type) : vt_pt_errstr(rv), rl,
				rl > 0 ? "ok" : pt_errstr(pt_errcode(rl)));
		if (rv != vt_ipt_code(rl))
			XC_FAIL("offset %" PRIu64 ": vt %s vs libipt %s", lo, vt_pt_errstr(rv),
				pt_errstr(pt_errcode(rl)));
		XC_EQ(v.offset, lo);
		XC_EQ(vt_pt_scan_offset(&s), lo);
		if (rv == -vt_pte_eos)
			break;
		st->errors++;
		/* libipt restarts one byte after its last sync point if it has
		 * not moved since (here: only after a BIP skip), else up to 15
		 * bytes back */
		XC_EQ(pt_pkt_get_sync_offset(d, &ls), 0);
		rl = pt_pkt_sync_forward(d);
		if (ls == lo) {
			XC_EQ(ls, sync_set_at);
			s.pos = s.begin + lo + 1;
			rv = vt_pt_scan_sync_forward(&s, 1);
		} else {
			rv = vt_pt_scan_sync_forward(&s, 0);
		}
		if (rl < 0) {
			XC_EQ(rl, -pte_eos);
			XC_EQ(rv, -vt_pte_nosync);
			XC_EQ(s.pos == s.end, 1);
			break;
		}
		XC_EQ(rv, 0);
		st->resyncs++;
		m.ip = 0;
		m.known = 1;
	}
}

/* The skip API's reference (tests/test-pt-skip.c and the fuzzer). */

/* Whether the packet p (at `at`, tracing off) may be skipped while tracing
 * is off (mode as skip_reference's); adds it to acc. */
static inline int skip_reference_off(const VtPtPacket *p, int mode, VtPtMtcAcc *acc)
{
	switch (p->type) {
	case VT_PT_PAD: case VT_PT_MODE_EXEC: case VT_PT_MODE_TSX:
		return 1;
	case VT_PT_CYC:
		return p->size <= 9;
	case VT_PT_MTC:
		if (!mode)
			return 0;
		acc->ticks += p->u.mtc > acc->last ? (unsigned)(p->u.mtc - acc->last)
						   : (unsigned)p->u.mtc + 256 - acc->last;
		acc->last = p->u.mtc;
		acc->count++;
		return 1;
	case VT_PT_PIP:
		if (mode != 2)
			return 0;
		acc->pip_nr = p->u.pip.nr;
		acc->pip_count++;
		return 1;
	default:
		return 0;
	}
}

/* A TIP.PGD stretch from the scanner's position (after the TIP.PGD):
 * packets skip_reference_off takes, then a TIP.PGE, each starting more
 * than 16 bytes before the end.  Returns 1 and adds them to acc (then the
 * scanner is after the TIP.PGE), or 0 (acc unchanged). */
static inline int skip_reference_pgd(VtPtScanner *s, int mode, VtPtMtcAcc *acc)
{
	VtPtMtcAcc t = *acc;
	VtPtPacket p;

	for (;;) {
		if (s->end - s->pos <= 16 || vt_pt_scan_next(s, &p) <= 0)
			return 0;
		if (p.type == VT_PT_TIP_PGE)
			break;
		if (!skip_reference_off(&p, mode, &t))
			return 0;
	}
	t.pgd_count++;
	*acc = t;
	return 1;
}

/* Where vt_pt_scan_skip_flow must stop from `from` (mode 0: no
 * accumulator, 1: MTCs, 2: MTCs and PIPs; | 4: vt_pt_scan_skip_timing;
 * | 8: acc->skip_pgd, TIP.PGD stretches), walking with vt_pt_scan_next. */
static inline const uint8_t *skip_reference(const uint8_t *buf, size_t len, const uint8_t *from, int mode,
				     VtPtMtcAcc *acc, int *ip)
{
	VtPtScanner s;
	VtPtPacket p;

	int off = mode & 4;	/* vt_pt_scan_skip_timing: TNT, TIP, TIP.PGE, FUP stop */
	int pgd = (mode & 8) && !off && (mode & 3);

	mode &= 3;
	vt_pt_scan_init(&s, buf, len, 0);
	s.pos = from;
	*ip = 0;
	for (;;) {
		const uint8_t *at = s.pos;
		int ok;

		if (s.end - at <= 16 || vt_pt_scan_next(&s, &p) <= 0)
			return at;
		switch (p.type) {
		case VT_PT_TNT_8: case VT_PT_TIP: case VT_PT_TIP_PGE: case VT_PT_FUP:
			ok = !off;
			break;
		case VT_PT_TIP_PGD:
			ok = pgd && skip_reference_pgd(&s, mode, acc);
			break;
		default:
			ok = skip_reference_off(&p, mode, acc);
		}
		if (!ok)
			return at;
		if (p.type == VT_PT_TIP || p.type == VT_PT_TIP_PGE || p.type == VT_PT_FUP ||
		    p.type == VT_PT_TIP_PGD)
			*ip = 1;
	}
}

#endif
