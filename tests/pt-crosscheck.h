/* pt-crosscheck.h - compare vmtrace's packet scanner with libipt's packet
 * decoder, packet by packet, and its last-IP reconstruction with an
 * independent model.  Shared by tests/test-pt-scan.c and the libFuzzer
 * target; the includer defines
 *   XC_FAIL(fmt, ...)  fail with a message (does not return)
 *   XC_EQ(a, b)        fail unless a == b (as 64-bit values)
 */
#ifndef VT_PT_CROSSCHECK_H
#define VT_PT_CROSSCHECK_H

#include <inttypes.h>
#include <intel-pt.h>

#include "pt/pt-scan.h"

/* Compare one successfully decoded packet. */
static inline void cmp_packet(const struct vt_pt_packet *v, const struct pt_packet *l,
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

static inline void model_check(struct ip_model *m, const struct vt_pt_packet *v)
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

#endif
