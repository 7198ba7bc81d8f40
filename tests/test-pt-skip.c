/* test-pt-skip.c - vt_pt_scan_skip_flow / _flow2 agree with the full
 * scanner: they stop exactly at the first packet that is not skippable,
 * at a packet boundary, and accumulate MTC ticks as perf's decoder does. */
#include "config.h"

#include <string.h>
#include <glib.h>
#include <intel-pt.h>

#include "pt/pt-scan.h"

/* A random packet stream from libipt's encoder; returns its length. */
static size_t gen_stream(GRand *r, uint8_t *buf, size_t cap)
{
	struct pt_config cfg;
	struct pt_encoder *enc;
	size_t len = 0;

	pt_config_init(&cfg);
	cfg.begin = buf;
	cfg.end = buf + cap;
	enc = pt_alloc_encoder(&cfg);
	g_assert_nonnull(enc);
	while (len + 64 < cap) {
		struct pt_packet p;
		guint k = g_rand_int_range(r, 0, 100);
		int n;

		memset(&p, 0, sizeof(p));
		if (k < 30) {
			p.type = ppt_tnt_8;
			p.payload.tnt.bit_size = g_rand_int_range(r, 1, 7);
			p.payload.tnt.payload = g_rand_int(r) & ((1u << p.payload.tnt.bit_size) - 1);
		} else if (k < 50) {
			p.type = ppt_cyc;
			p.payload.cyc.value = g_rand_int_range(r, 0, 2) ? (guint64)g_rand_int_range(r, 0, 32)
					      : ((guint64)g_rand_int(r) << g_rand_int_range(r, 0, 24));
		} else if (k < 62) {
			static const enum pt_packet_type t[] = { ppt_tip, ppt_tip_pge, ppt_fup, ppt_tip_pgd };
			static const enum pt_ip_compression c[] = { pt_ipc_suppressed, pt_ipc_update_16,
								     pt_ipc_update_32, pt_ipc_sext_48,
								     pt_ipc_update_48, pt_ipc_full };

			p.type = t[g_rand_int_range(r, 0, k < 61 ? 3 : 4)];
			p.payload.ip.ipc = c[g_rand_int_range(r, 0, 6)];
			p.payload.ip.ip = ((guint64)g_rand_int(r) << 32) | g_rand_int(r);
		} else if (k < 72) {
			p.type = ppt_mtc;
			p.payload.mtc.ctc = g_rand_int(r);
		} else if (k < 76) {
			p.type = ppt_pad;
		} else if (k < 80) {
			p.type = ppt_mode;
			p.payload.mode.leaf = g_rand_int_range(r, 0, 2) ? pt_mol_exec : pt_mol_tsx;
			p.payload.mode.bits.exec.csl = 1;
		} else if (k < 84) {
			p.type = ppt_tsc;
			p.payload.tsc.tsc = g_rand_int(r);
		} else if (k < 87) {
			p.type = ppt_pip;
			p.payload.pip.cr3 = (guint64)g_rand_int(r) << 5;
		} else if (k < 89) {
			p.type = ppt_tma;
			p.payload.tma.ctc = g_rand_int(r);
			p.payload.tma.fc = g_rand_int_range(r, 0, 0x200);
		} else if (k < 91) {
			p.type = ppt_vmcs;
			p.payload.vmcs.base = (guint64)g_rand_int(r) << 12;
		} else if (k < 93) {
			p.type = ppt_psb;
		} else if (k < 95) {
			p.type = ppt_psbend;
		} else if (k < 97) {
			p.type = ppt_cbr;
			p.payload.cbr.ratio = g_rand_int(r);
		} else {
			p.type = ppt_ovf;
		}
		n = pt_enc_next(enc, &p);
		g_assert_cmpint(n, >, 0);
		len += n;
	}
	pt_free_encoder(enc);
	return len;
}

static gboolean skippable(const struct vt_pt_packet *p, gboolean with_mtc)
{
	switch (p->type) {
	case VT_PT_PAD: case VT_PT_TNT_8: case VT_PT_CYC: case VT_PT_TIP:
	case VT_PT_TIP_PGE: case VT_PT_FUP: case VT_PT_MODE_EXEC: case VT_PT_MODE_TSX:
		return TRUE;
	case VT_PT_MTC:
		return with_mtc;
	default:
		return FALSE;
	}
}

/* Reference: walk with the full scanner from `from`; return where skipping
 * must stop and the MTC ticks on the way (perf's rule: equal -> 256). */
static const uint8_t *reference_stop(const uint8_t *buf, size_t len, const uint8_t *from, gboolean with_mtc,
				     struct vt_pt_mtc_acc *acc)
{
	struct vt_pt_scanner s;
	struct vt_pt_packet p;

	vt_pt_scan_init(&s, buf, len, 0);
	s.pos = from;
	for (;;) {
		const uint8_t *at = s.pos;

		if (s.end - at <= 16 || vt_pt_scan_next(&s, &p) <= 0 || !skippable(&p, with_mtc) ||
		    (p.type == VT_PT_CYC && p.size > 9))
			return at;
		if (p.type == VT_PT_MTC) {
			acc->ticks += p.u.mtc > acc->last ? (unsigned)(p.u.mtc - acc->last)
							 : (unsigned)p.u.mtc + 256 - acc->last;
			acc->last = p.u.mtc;
			acc->count++;
		}
	}
}

static void test_skip_single(void)
{
	GRand *r = g_rand_new_with_seed(7);
	uint8_t *buf = g_malloc0(1 << 16);
	guint stops = 0;

	for (int round = 0; round < 200; round++) {
		size_t len = gen_stream(r, buf, 1 << 16);
		struct vt_pt_scanner s;
		struct vt_pt_packet p;
		gboolean with_mtc = round & 1;

		vt_pt_scan_init(&s, buf, len, 0);
		while (s.end - s.pos > 32) {
			struct vt_pt_mtc_acc got = { .last = 0x42 }, want = { .last = 0x42 };
			const uint8_t *from = s.pos;
			const uint8_t *stop = reference_stop(buf, len, from, with_mtc, &want);

			vt_pt_scan_skip_flow(&s, with_mtc ? &got : NULL);
			g_assert_true(s.pos == stop);
			if (with_mtc) {
				g_assert_cmpuint(got.ticks, ==, want.ticks);
				g_assert_cmpuint(got.count, ==, want.count);
				g_assert_cmpuint(got.last, ==, want.last);
			}
			stops++;
			/* step over the stopping packet with the full scanner */
			if (vt_pt_scan_next(&s, &p) <= 0)
				break;
		}
	}
	g_assert_cmpuint(stops, >, 1000);
	g_free(buf);
	g_rand_free(r);
}

static void test_skip_pair(void)
{
	GRand *r = g_rand_new_with_seed(11);
	uint8_t *a = g_malloc0(1 << 15), *b = g_malloc0(1 << 15);

	for (int round = 0; round < 100; round++) {
		size_t la = gen_stream(r, a, 1 << 15), lb = gen_stream(r, b, 1 << 15);
		struct vt_pt_scanner sa, sb;
		struct vt_pt_packet p;

		vt_pt_scan_init(&sa, a, la, 0);
		vt_pt_scan_init(&sb, b, lb, 0);
		while (sa.end - sa.pos > 32 && sb.end - sb.pos > 32) {
			struct vt_pt_mtc_acc ga = { .last = 1 }, gb = { .last = 2 }, wa = { .last = 1 }, wb = { .last = 2 };
			const uint8_t *fa = sa.pos, *fb = sb.pos;
			const uint8_t *stop_a = reference_stop(a, la, fa, TRUE, &wa);
			const uint8_t *stop_b = reference_stop(b, lb, fb, TRUE, &wb);
			int stopped = vt_pt_scan_skip_flow2(&sa, &ga, &sb, &gb);

			/* each moved forward to at most its reference stop */
			g_assert_true(sa.pos >= fa && sa.pos <= stop_a);
			g_assert_true(sb.pos >= fb && sb.pos <= stop_b);
			/* a scanner reported as stopped is at its stop; at least one stopped */
			g_assert_true(stopped != 0);
			if (stopped & 1)
				g_assert_true(sa.pos == stop_a);
			if (stopped & 2)
				g_assert_true(sb.pos == stop_b);
			if (sa.pos == stop_a) {
				g_assert_cmpuint(ga.ticks, ==, wa.ticks);
				if (vt_pt_scan_next(&sa, &p) <= 0)
					break;
			}
			if (sb.pos == stop_b) {
				g_assert_cmpuint(gb.ticks, ==, wb.ticks);
				if (vt_pt_scan_next(&sb, &p) <= 0)
					break;
			}
		}
	}
	g_free(a);
	g_free(b);
	g_rand_free(r);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/pt-skip/single", test_skip_single);
	g_test_add_func("/pt-skip/pair", test_skip_pair);
	return g_test_run();
}
