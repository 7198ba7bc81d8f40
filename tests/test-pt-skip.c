/* test-pt-skip.c - vt_pt_scan_skip_flow / _flow2 agree with the full
 * scanner: they stop exactly at the first packet that is not skippable,
 * at a packet boundary, accumulate MTC ticks as perf's decoder does, and
 * forget the last IP exactly when they skipped an IP packet.  Every case
 * runs with each implementation this build and CPU have (scalar, SSE2
 * windows, AVX2 blocks and windows), on encoded streams, on streams made
 * to stress the windows (CYC sizes, payload bytes that look like headers,
 * 0x02 after them), on TIP-dense streams whose runs cross many windows,
 * and on random bytes. */
#include "config.h"

#include <string.h>
#include <glib.h>
#include <intel-pt.h>

#include "src/pt/pt-scan.h"
#define XC_FAIL(...) g_error(__VA_ARGS__)
#define XC_EQ(a, b) g_assert_cmphex((uint64_t)(a), ==, (uint64_t)(b))
#include "tests/pt-crosscheck.h"

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

/* with_mtc: 0 (no accumulator), 1 (MTCs), 2 (MTCs and PIPs).  The walk
 * with the full scanner is shared with the fuzzer (tests/pt-crosscheck.h). */
static const uint8_t *reference_stop(const uint8_t *buf, size_t len, const uint8_t *from, int with_mtc,
				     VtPtMtcAcc *acc, gboolean *ip_skipped)
{
	int ip;
	const uint8_t *stop = skip_reference(buf, len, from, with_mtc, acc, &ip);

	*ip_skipped = ip != 0;
	return stop;
}

static const char *const impl_name[] = { "auto", "scalar", "sse2", "avx2" };

static guint64 pgd_skipped;	/* TIP.PGD stretches check_single saw skipped */

/* Skip from every stop to the next through buf[0, len) (and, for `all`,
 * from every offset) with the implementation selected, against the
 * reference.  with_mtc | 4: vt_pt_scan_skip_timing.  Returns the number
 * of skips checked. */
static guint check_single(const uint8_t *buf, size_t len, int with_mtc, gboolean all)
{
	VtPtScanner s;
	VtPtPacket p;
	guint n = 0;
	int timing = with_mtc & 4, mode = with_mtc & 3;

	vt_pt_scan_init(&s, buf, len, 0);
	for (size_t off = 0; off + 32 < len; off++) {
		if (!all && off)
			break;
		s.pos = buf + off;
		while (s.end - s.pos > 32) {
			VtPtMtcAcc got = { .last = 0x42, .skip_pip = mode == 2, .pip_nr = 7,
					   .skip_pgd = (with_mtc & 8) != 0 };
			VtPtMtcAcc want = got;
			const uint8_t *from = s.pos;
			gboolean ip;
			const uint8_t *stop = reference_stop(buf, len, from, with_mtc, &want, &ip);

			s.have_last_ip = 1;
			if (timing)
				vt_pt_scan_skip_timing(&s, mode ? &got : NULL);
			else
				vt_pt_scan_skip_flow(&s, mode ? &got : NULL);
			if (s.pos != stop)
				g_error("skip from %zu: stopped at %zu, not %zu", (size_t)(from - buf),
					(size_t)(s.pos - buf), (size_t)(stop - buf));
			g_assert_cmpint(s.have_last_ip, ==, !ip);
			if (mode) {
				g_assert_cmpuint(got.ticks, ==, want.ticks);
				g_assert_cmpuint(got.count, ==, want.count);
				g_assert_cmpuint(got.last, ==, want.last);
				g_assert_cmpuint(got.pip_count, ==, want.pip_count);
				g_assert_cmpuint(got.pip_nr, ==, want.pip_nr);
				g_assert_cmpuint(got.pgd_count, ==, want.pgd_count);
				pgd_skipped += got.pgd_count;
			}
			n++;
			if (all)
				break;
			/* step over the stopping packet with the full scanner */
			if (vt_pt_scan_next(&s, &p) <= 0)
				break;
		}
	}
	return n;
}

/* The same for pairs of streams: a and b from their starts (pgd: both
 * skip TIP.PGD stretches). */
static void check_pair_pgd(const uint8_t *a, size_t la, const uint8_t *b, size_t lb, int pgd)
{
	VtPtScanner sa, sb;
	VtPtPacket p;
	int ma = 2 | (pgd ? 8 : 0), mb = 1 | (pgd ? 8 : 0);

	vt_pt_scan_init(&sa, a, la, 0);
	vt_pt_scan_init(&sb, b, lb, 0);
	while (sa.end - sa.pos > 32 && sb.end - sb.pos > 32) {
		VtPtMtcAcc ga = { .last = 1, .skip_pip = 1, .skip_pgd = pgd != 0 };
		VtPtMtcAcc gb = { .last = 2, .skip_pgd = pgd != 0 }, wa = ga, wb = gb;
		const uint8_t *fa = sa.pos, *fb = sb.pos;
		gboolean ipa, ipb;
		const uint8_t *stop_a = reference_stop(a, la, fa, ma, &wa, &ipa);
		const uint8_t *stop_b = reference_stop(b, lb, fb, mb, &wb, &ipb);
		int stopped;

		sa.have_last_ip = sb.have_last_ip = 1;
		stopped = vt_pt_scan_skip_flow2(&sa, &ga, &sb, &gb);
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
			g_assert_cmpuint(ga.count, ==, wa.count);
			g_assert_cmpuint(ga.last, ==, wa.last);
			g_assert_cmpuint(ga.pip_count, ==, wa.pip_count);
			g_assert_cmpuint(ga.pip_nr, ==, wa.pip_nr);
			g_assert_cmpuint(gb.pip_count, ==, 0);
			g_assert_cmpuint(ga.pgd_count, ==, wa.pgd_count);
			g_assert_cmpint(sa.have_last_ip, ==, !ipa);
			if (vt_pt_scan_next(&sa, &p) <= 0)
				break;
		} else {
			/* stopped in the middle: it resumes from a boundary,
			 * so finishing the run from there must agree too */
			VtPtMtcAcc ra = { .last = ga.last, .skip_pip = 1, .skip_pgd = pgd != 0 };
			gboolean ipr;
			const uint8_t *r = reference_stop(a, la, sa.pos, ma, &ra, &ipr);

			g_assert_true(r == stop_a);
			g_assert_cmpuint(ga.ticks + ra.ticks, ==, wa.ticks);
			g_assert_cmpuint(ga.count + ra.count, ==, wa.count);
			g_assert_cmpuint(ga.pip_count + ra.pip_count, ==, wa.pip_count);
			g_assert_cmpuint(ga.pgd_count + ra.pgd_count, ==, wa.pgd_count);
		}
		if (sb.pos == stop_b) {
			g_assert_cmpuint(gb.ticks, ==, wb.ticks);
			g_assert_cmpuint(gb.count, ==, wb.count);
			g_assert_cmpuint(gb.last, ==, wb.last);
			g_assert_cmpuint(gb.pgd_count, ==, wb.pgd_count);
			g_assert_cmpint(sb.have_last_ip, ==, !ipb);
			if (vt_pt_scan_next(&sb, &p) <= 0)
				break;
		} else {
			VtPtMtcAcc rb = { .last = gb.last, .skip_pgd = pgd != 0 };
			gboolean ipr;
			const uint8_t *r = reference_stop(b, lb, sb.pos, mb, &rb, &ipr);

			g_assert_true(r == stop_b);
			g_assert_cmpuint(gb.ticks + rb.ticks, ==, wb.ticks);
			g_assert_cmpuint(gb.count + rb.count, ==, wb.count);
			g_assert_cmpuint(gb.pgd_count + rb.pgd_count, ==, wb.pgd_count);
		}
	}
}

static void check_pair(const uint8_t *a, size_t la, const uint8_t *b, size_t lb)
{
	check_pair_pgd(a, la, b, lb, 0);
}

/* Runs fn once per implementation available. */
static void for_each_impl(void (*fn)(void))
{
	for (int impl = VT_PT_SKIP_SCALAR; impl <= VT_PT_SKIP_AVX2; impl++) {
		if (vt_pt_scan_skip_select((VtPtSkipImpl)impl) < 0) {
			g_test_message("%s: not available here", impl_name[impl]);
			continue;
		}
		g_test_message("%s", impl_name[impl]);
		fn();
	}
	g_assert_cmpint(vt_pt_scan_skip_select(VT_PT_SKIP_AUTO), ==, 0);
}

static void skip_single(void)
{
	GRand *r = g_rand_new_with_seed(7);
	uint8_t *buf = g_malloc0(1 << 16);
	guint stops = 0;

	for (int round = 0; round < 200; round++) {
		size_t len = gen_stream(r, buf, 1 << 16);

		stops += check_single(buf, len, round % 3, FALSE);
	}
	g_assert_cmpuint(stops, >, 1000);
	g_free(buf);
	g_rand_free(r);
}

static void test_skip_single(void)
{
	for_each_impl(skip_single);
}

/* vt_pt_scan_skip_timing (one implementation): stops at TNT-8 and IP
 * packets too, the last IP stays known. */
static void test_skip_timing(void)
{
	GRand *r = g_rand_new_with_seed(17);
	uint8_t *buf = g_malloc0(1 << 16);
	guint stops = 0;

	for (int round = 0; round < 200; round++) {
		size_t len = gen_stream(r, buf, 1 << 16);

		stops += check_single(buf, len, 4 | round % 3, FALSE);
	}
	g_assert_cmpuint(stops, >, 1000);
	g_free(buf);
	g_rand_free(r);
}

static void skip_pair(void)
{
	GRand *r = g_rand_new_with_seed(11);
	uint8_t *a = g_malloc0(1 << 15), *b = g_malloc0(1 << 15);

	for (int round = 0; round < 100; round++) {
		size_t la = gen_stream(r, a, 1 << 15), lb = gen_stream(r, b, 1 << 15);

		check_pair(a, la, b, lb);
	}
	g_free(a);
	g_free(b);
	g_rand_free(r);
}

static void test_skip_pair(void)
{
	for_each_impl(skip_pair);
}

/* Byte streams made of what the windows treat specially, without the
 * encoder's regularity: one-byte packets, CYCs of 2..10 bytes (second byte
 * often 0x02), IP packets whose payload ends in bytes that look like CYC
 * headers, followed now and then by 0x02 (a PSB, PIP, ...) or by runs
 * longer than a window; plus MTC, MODE and a few random bytes. */
static size_t gen_tricky(GRand *r, uint8_t *buf, size_t cap)
{
	static const uint8_t ext[] = {
		0x02, 0x43, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,	/* PIP */
		0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82,	/* PSB */
		0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
	};
	size_t len = 0;

	/* at most 80 + 24 bytes a step */
	while (len + 128 < cap) {
		guint k = g_rand_int_range(r, 0, 100);

		if (k < 30) {			/* TNT-8 / PAD / short CYC */
			guint n = g_rand_int_range(r, 1, k < 3 ? 80 : 6);

			for (guint i = 0; i < n; i++) {
				uint8_t b = (uint8_t)(g_rand_int(r) & 0xfe);

				if (g_rand_boolean(r))
					b = (uint8_t)((g_rand_int(r) & 0xf8) | 3);
				buf[len++] = b == 0x02 ? 0x04 : b;
			}
		} else if (k < 60) {		/* CYC with extensions */
			guint n = g_rand_int_range(r, 0, 10) < 7 ? 1 : (guint)g_rand_int_range(r, 2, 10);

			buf[len++] = (uint8_t)((g_rand_int(r) & 0xf8) | 7);
			for (guint i = 0; i < n; i++) {
				uint8_t b = (uint8_t)(g_rand_int(r) & 0xfe);

				if (i == 0 && n == 1 && g_rand_boolean(r))
					b = 0x02;
				buf[len++] = (uint8_t)(b | (i + 1 < n));
			}
		} else if (k < 80) {		/* TIP/TIP.PGE/FUP/TIP.PGD, any IPBytes */
			static const uint8_t op[] = { 0x0d, 0x11, 0x1d, 0x01 };
			guint ipc = (guint)g_rand_int_range(r, 0, 8);
			static const uint8_t plen[] = { 0, 2, 4, 6, 6, 0, 8, 0 };

			buf[len++] = (uint8_t)(op[g_rand_int_range(r, 0, k < 79 ? 3 : 4)] | ipc << 5);
			for (guint i = 0; i < plen[ipc]; i++)
				buf[len++] = (uint8_t)g_rand_int(r);
			if (plen[ipc] && g_rand_boolean(r))
				buf[len - 1] = (uint8_t)((g_rand_int(r) & 0xf8) | 7);
			if (g_rand_int_range(r, 0, 4) == 0) {
				guint e = g_rand_int_range(r, 0, 2) ? 8 : 16;

				memcpy(buf + len, ext + (e == 8 ? 0 : 8), e);
				if (e == 8)
					buf[len + 2] = (uint8_t)g_rand_int(r);
				len += e;
			}
		} else if (k < 90) {		/* MTC */
			buf[len++] = 0x59;
			buf[len++] = (uint8_t)g_rand_int(r);
		} else if (k < 94) {		/* MODE, valid or not */
			buf[len++] = 0x99;
			buf[len++] = (uint8_t)(g_rand_int(r) & (g_rand_boolean(r) ? 0x3f : 0xff));
		} else {			/* anything */
			buf[len++] = (uint8_t)g_rand_int(r);
		}
	}
	return len;
}

static void skip_tricky(void)
{
	GRand *r = g_rand_new_with_seed(13);
	uint8_t *buf = g_malloc0(1 << 14), *b = g_malloc0(1 << 14);
	guint stops = 0;

	for (int round = 0; round < 150; round++) {
		size_t len = gen_tricky(r, buf, 1 << 14), lb = gen_tricky(r, b, 1 << 14);

		stops += check_single(buf, len, round % 3, FALSE);
		/* every start offset of a prefix: most are not boundaries of
		 * the stream, which is just another stream then; and every
		 * length, so that windows meet the end at every offset */
		stops += check_single(buf, MIN(len, 600), 1 + (round & 1), TRUE);
		stops += check_single(buf, 100 + (size_t)round, 1 + (round & 1), FALSE);
		check_pair(buf, len, b, lb);
		check_pair(buf, 100 + (size_t)round, b + round, lb - (size_t)round);
	}
	g_assert_cmpuint(stops, >, 10000);
	g_free(buf);
	g_free(b);
	g_rand_free(r);
}

static void test_skip_tricky(void)
{
	for_each_impl(skip_tricky);
}

/* Streams of an idle guest's exits to user space: runs of TNT-8, TIP and
 * MTC, and TIP.PGD (any IPBytes) followed by PAD, CYC, MODE, MTC and PIP
 * up to a TIP.PGE - or, now and then, by something that ends tracing-off
 * differently (TNT-8, TIP, FUP, TSC, a PSB, an invalid MODE, the buffer's
 * end) or a TIP.PGE with invalid IPBytes; stretches of every length, so
 * that they cross windows at every offset. */
static size_t gen_pgd(GRand *r, uint8_t *buf, size_t cap)
{
	static const uint8_t plen[] = { 0, 2, 4, 6, 6, 0, 8, 0 };
	static const uint8_t ipcs[] = { 0, 1, 2, 3, 4, 6 };
	size_t len = 0;

	while (len + 200 < cap) {
		guint k = g_rand_int_range(r, 0, 100), ipc, n;

		if (k < 40) {			/* TNT-8, TIP, MTC */
			for (n = g_rand_int_range(r, 1, 12); n; n--) {
				guint x = g_rand_int_range(r, 0, 4);

				if (x == 0) {
					buf[len++] = (uint8_t)((g_rand_int(r) & 0x7c) | 4);
				} else if (x == 1) {
					buf[len++] = 0x59;
					buf[len++] = (uint8_t)g_rand_int(r);
				} else {
					ipc = ipcs[g_rand_int_range(r, 0, 6)];
					buf[len++] = (uint8_t)(0x0d | ipc << 5);
					for (guint i = 0; i < plen[ipc]; i++)
						buf[len++] = (uint8_t)g_rand_int(r);
				}
			}
			continue;
		}
		/* TIP.PGD */
		ipc = g_rand_int_range(r, 0, 20) ? ipcs[g_rand_int_range(r, 0, 6)] : 5;
		buf[len++] = (uint8_t)(0x01 | ipc << 5);
		for (guint i = 0; i < plen[ipc]; i++)
			buf[len++] = (uint8_t)g_rand_int(r);
		for (n = g_rand_int_range(r, 0, k < 45 ? 40 : 10); n; n--) {
			guint x = g_rand_int_range(r, 0, 10);

			if (x < 5) {
				buf[len++] = 0x59;
				buf[len++] = (uint8_t)g_rand_int(r);
			} else if (x < 6) {
				buf[len++] = 0x00;
			} else if (x < 7) {
				buf[len++] = (uint8_t)((g_rand_int(r) & 0xf8) | 3);
			} else if (x < 8) {
				buf[len++] = 0x99;
				buf[len++] = (uint8_t)(g_rand_int(r) & (g_rand_int_range(r, 0, 8) ? 0x3f : 0xff));
			} else {
				static const uint8_t pip[] = { 0x02, 0x43, 0x10, 0x20, 0x30, 0x40, 0x50, 0x60 };

				memcpy(buf + len, pip, 8);
				buf[len + 2] = (uint8_t)g_rand_int(r);
				len += 8;
			}
		}
		switch (g_rand_int_range(r, 0, 12)) {
		case 0:
			buf[len++] = 0x04;				/* TNT-8 */
			break;
		case 1:
			buf[len++] = 0x3d; buf[len++] = 1; buf[len++] = 2;	/* FUP */
			break;
		case 2:
			buf[len++] = 0x19;				/* TSC */
			for (guint i = 0; i < 7; i++)
				buf[len++] = (uint8_t)g_rand_int(r);
			break;
		case 3:
			buf[len++] = 0xb1;				/* TIP.PGE, IPBytes 5 */
			break;
		default:
			ipc = ipcs[g_rand_int_range(r, 0, 6)];
			buf[len++] = (uint8_t)((g_rand_boolean(r) ? 0x11 : 0x0d) | ipc << 5);
			for (guint i = 0; i < plen[ipc]; i++)
				buf[len++] = (uint8_t)g_rand_int(r);
		}
	}
	return len;
}

/* TIP.PGD stretches (acc->skip_pgd) against the reference, alone and in
 * pairs, from every stop and (a prefix) every offset; without skip_pgd
 * a TIP.PGD stops as before. */
static void skip_pgd(void)
{
	GRand *r = g_rand_new_with_seed(23);
	uint8_t *buf = g_malloc0(1 << 14), *b = g_malloc0(1 << 14);
	guint stops = 0;

	pgd_skipped = 0;
	for (int round = 0; round < 200; round++) {
		size_t len = gen_pgd(r, buf, 1 << 14), lb = gen_pgd(r, b, 1 << 14);

		stops += check_single(buf, len, 8 | (1 + (round & 1)), FALSE);
		stops += check_single(buf, len, 1 + (round & 1), FALSE);
		stops += check_single(buf, MIN(len, 400), 8 | (1 + (round & 1)), TRUE);
		stops += check_single(buf, 100 + (size_t)round, 8 | 2, FALSE);
		check_pair_pgd(buf, len, b, lb, 1);
		check_pair_pgd(buf, 100 + (size_t)round * 3, b + round, lb - (size_t)round, 1);
	}
	g_assert_cmpuint(stops, >, 10000);
	g_test_message("%u stops, %" G_GUINT64_FORMAT " stretches skipped", stops, pgd_skipped);
	g_assert_cmpuint(pgd_skipped, >, 5000);
	g_free(buf);
	g_free(b);
	g_rand_free(r);
}

static void test_skip_pgd(void)
{
	for_each_impl(skip_pgd);
}

/* Random bytes, from every offset (mostly short runs, bad packets). */
static void skip_random(void)
{
	GRand *r = g_rand_new_with_seed(17);
	uint8_t *buf = g_malloc0(4096);

	for (int round = 0; round < 40; round++) {
		for (size_t i = 0; i < 4096; i++) {
			/* biased towards short packets, so that runs get long */
			guint k = g_rand_int_range(r, 0, 4);

			buf[i] = (uint8_t)(k == 0 ? g_rand_int(r) : k == 1 ? (g_rand_int(r) & 0xfe) | (g_rand_boolean(r) ? 0 : 3)
					   : k == 2 ? (g_rand_int(r) & 0xf8) | 7 : g_rand_int(r) & 0xfe);
		}
		check_single(buf, 4096, round % 3, TRUE);
		check_single(buf, 4096, 2, FALSE);
		check_pair(buf, 2048, buf + 2048, 2048);
	}
	g_free(buf);
	g_rand_free(r);
}

static void test_skip_random(void)
{
	for_each_impl(skip_random);
}

/* TIP-dense streams: long runs of what the block walk skips - IP packets
 * of every size (1-9 bytes, so that packets cross 16-byte blocks and enter
 * the next one at every offset 0-8), TNT-8, PAD, one- and two-byte CYCs,
 * MTC, valid MODE, PIP - with a packet to stop at only now and then, so
 * that walks cross many windows; checked from every offset of a prefix
 * too, so that every packet boundary meets every window offset. */
static size_t gen_dense(GRand *r, uint8_t *buf, size_t cap)
{
	static const uint8_t plen[] = { 0, 2, 4, 6, 6, 0, 8, 0 };
	size_t len = 0;

	while (len + 32 < cap) {
		guint k = g_rand_int_range(r, 0, 1000);

		if (k < 450) {			/* TIP/TIP.PGE/FUP, valid IPBytes */
			static const uint8_t op[] = { 0x0d, 0x11, 0x1d };
			static const uint8_t ipc[] = { 0, 1, 2, 3, 4, 6, 1, 1 };
			guint c = ipc[g_rand_int_range(r, 0, 8)];

			buf[len++] = (uint8_t)(op[g_rand_int_range(r, 0, 3)] | c << 5);
			for (guint i = 0; i < plen[c]; i++)
				buf[len++] = (uint8_t)g_rand_int(r);
		} else if (k < 650) {		/* TNT-8, PAD, one-byte CYC */
			uint8_t b = (uint8_t)(g_rand_int(r) & 0xfe);

			if (g_rand_boolean(r))
				b = (uint8_t)((g_rand_int(r) & 0xf8) | 3);
			buf[len++] = b == 0x02 ? 0x00 : b;
		} else if (k < 750) {		/* two-byte CYC */
			buf[len++] = (uint8_t)((g_rand_int(r) & 0xf8) | 7);
			buf[len++] = (uint8_t)(g_rand_int(r) & 0xfe);
		} else if (k < 900) {		/* MTC */
			buf[len++] = 0x59;
			buf[len++] = (uint8_t)g_rand_int(r);
		} else if (k < 950) {		/* MODE.Exec / TSX */
			buf[len++] = 0x99;
			buf[len++] = (uint8_t)(g_rand_int(r) & 0x23);
		} else if (k < 995) {		/* PIP */
			buf[len++] = 0x02;
			buf[len++] = 0x43;
			for (guint i = 0; i < 6; i++)
				buf[len++] = (uint8_t)g_rand_int(r);
		} else {			/* a stop: TSC, TIP.PGD, OVF */
			static const uint8_t stop[][2] = { { 0x19, 0x00 }, { 0x01, 0x00 }, { 0x02, 0xf3 } };
			guint s = g_rand_int_range(r, 0, 3);

			buf[len++] = stop[s][0];
			if (s == 2)
				buf[len++] = stop[s][1];
		}
	}
	return len;
}

static void skip_dense(void)
{
	GRand *r = g_rand_new_with_seed(19);
	uint8_t *buf = g_malloc0(1 << 14), *b = g_malloc0(1 << 14);
	guint stops = 0;

	for (int round = 0; round < 60; round++) {
		size_t len = gen_dense(r, buf, 1 << 14), lb = gen_dense(r, b, 1 << 14);

		stops += check_single(buf, len, round % 3, FALSE);
		stops += check_single(buf, MIN(len, 400), 1 + (round & 1), TRUE);
		check_pair(buf, len, b, lb);
	}
	g_assert_cmpuint(stops, >, 10000);
	g_free(buf);
	g_free(b);
	g_rand_free(r);
}

static void test_skip_dense(void)
{
	for_each_impl(skip_dense);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/pt-skip/single", test_skip_single);
	g_test_add_func("/pt-skip/pair", test_skip_pair);
	g_test_add_func("/pt-skip/timing", test_skip_timing);
	g_test_add_func("/pt-skip/tricky", test_skip_tricky);
	g_test_add_func("/pt-skip/random", test_skip_random);
	g_test_add_func("/pt-skip/pgd", test_skip_pgd);
	g_test_add_func("/pt-skip/dense", test_skip_dense);
	return g_test_run();
}
