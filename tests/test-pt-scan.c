/* test-pt-scan.c - cross-check the Intel PT packet scanner against libipt.
 *
 *   /pt-scan/encoder        every packet libipt 2.0.5 can encode, in many
 *                           seeded random combinations: offsets, sizes and
 *                           payloads must match pt_pkt_next, and each packet
 *                           decoded alone (tail path) must match the stream
 *                           decode (fast path)
 *   /pt-scan/random         random bytes and corrupted valid streams: both
 *                           scanners must agree packet by packet, on where a
 *                           bad packet is, and after every resync
 *   /pt-scan/sync           PSB search corner cases (runs, swallowed PSBs)
 *   /pt-scan/last-ip        IP reconstruction against an independent model
 *   /pt-scan/desc           descriptions of perf's "Intel PT packet decoder"
 *                           test vectors (perf test 76)
 *   /pt-scan/eos            packets cut off at the end of the buffer
 *   /pt-scan/cyc-limit      libipt's 9-byte CYC limit
 *   /pt-scan/bip-context    BBP/BIP/BEP context handling
 *
 * libipt 2.0.5 reads past config.end in pt_sync_forward (fixed in 2.0.6),
 * so every buffer handed to it has 32 zero bytes of slack.  Packets that
 * 2.0.5 does not know (CFE, EVD, BBP, BEP) are sized for it by a decode
 * callback; BIP (only meaningful after a BBP) is skipped with
 * pt_pkt_sync_set, and libipt's "resync after sync_set" rule is modelled.
 */
#include "src/pt/pt-scan.h"

#include <glib.h>
#include <intel-pt.h>

#include "tests/ipt-unknown.h"

#define XC_FAIL(...) g_error(__VA_ARGS__)
#define XC_EQ(a, b) g_assert_cmphex((uint64_t)(a), ==, (uint64_t)(b))
#include "tests/pt-crosscheck.h"
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLACK 32

/* ---------------------------------------------------------------------- */
/* Deterministic PRNG (independent of the glib version). */

static uint64_t rng_state;

static void rng_seed(uint64_t seed)
{
	rng_state = seed * 0x9e3779b97f4a7c15ULL + 0x632be59bd9b4e019ULL;
}

static uint64_t rng(void)
{
	/* splitmix64 */
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static unsigned int rng_n(unsigned int n)
{
	return (unsigned int)(rng() % n);
}

/* A value with a random number of significant bits (0..bits). */
static uint64_t rng_bits(unsigned int bits)
{
	unsigned int n = rng_n(bits + 1);

	if (!n)
		return 0;
	return rng() & (n >= 64 ? ~0ULL : (1ULL << n) - 1);
}

/* ---------------------------------------------------------------------- */
/* libipt side. */

#define unknown_cb vt_ipt_unknown_cb

static struct pt_packet_decoder *lib_alloc(uint8_t *buf, size_t len)
{
	struct pt_config cfg;
	struct pt_packet_decoder *d;

	pt_config_init(&cfg);
	cfg.begin = buf;
	cfg.end = buf + len;
	cfg.decode.callback = unknown_cb;
	d = pt_pkt_alloc_decoder(&cfg);
	g_assert_nonnull(d);
	return d;
}

#define lib_code vt_ipt_code

/* cmp_packet(), struct ip_model and model_check() are in pt-crosscheck.h */

/* ---------------------------------------------------------------------- */
/* Independent last-IP model (SDM "IP compression"; reset to 0 at PSB). */


/* ---------------------------------------------------------------------- */
/* The cross-check: sync both, compare packet by packet, resync on errors. */

#define xstats xc_stats

/* The cross-check of pt-crosscheck.h on a copy of data at `align`. */
static void cross_check(const uint8_t *data, size_t len, unsigned int align,
			int use_inline, struct xstats *st)
{
	uint8_t *mem = g_malloc0(len + SLACK + 8), *buf = mem + align;
	struct pt_packet_decoder *d;

	memcpy(buf, data, len);
	d = lib_alloc(buf, len);
	xc_run(d, buf, len, use_inline, st);
	pt_pkt_free_decoder(d);
	g_free(mem);
}

/* ---------------------------------------------------------------------- */
/* Stream generation with libipt's encoder. */

struct gen {
	struct pt_encoder *enc;
	uint8_t *buf;
	size_t cap;
	uint64_t ip;
};

static const enum pt_ip_compression ipcs[] = {
	pt_ipc_suppressed, pt_ipc_update_16, pt_ipc_update_32,
	pt_ipc_sext_48, pt_ipc_update_48, pt_ipc_full,
};

static int enc(struct gen *g, const struct pt_packet *p)
{
	int r = pt_enc_next(g->enc, p);

	g_assert_cmpint(r, >, 0);
	return r;
}

/* A random IP that exercises sign extension. */
static uint64_t random_ip(void)
{
	switch (rng_n(4)) {
	case 0:
		return 0xffffffff80000000ULL | (rng() & 0x7fffffff);
	case 1:
		return rng() & 0x7fffffffffffULL;
	case 2:
		return rng();
	default:
		return rng_bits(48);
	}
}

/* Raw bytes for packets libipt 2.0.5 cannot encode.  Returns size. */
static int raw_packet(uint8_t *p, unsigned int which)
{
	uint64_t v = rng();

	switch (which) {
	case 0:	/* CFE */
		p[0] = 0x02;
		p[1] = 0x13;
		p[2] = (uint8_t)rng();
		p[3] = (uint8_t)rng();
		return 4;
	case 1:	/* EVD */
		p[0] = 0x02;
		p[1] = 0x53;
		p[2] = (uint8_t)rng();
		memcpy(p + 3, &v, 8);
		return 11;
	case 2: {	/* BBP + BIPs + BEP */
		int n = 3, i, items = (int)rng_n(4), sz;

		p[0] = 0x02;
		p[1] = 0x63;
		p[2] = (uint8_t)rng();
		sz = (p[2] & 0x80) ? 4 : 8;
		for (i = 0; i < items; i++) {
			p[n] = (uint8_t)((rng_n(32) << 3) | 4);
			v = rng();
			memcpy(p + n + 1, &v, (size_t)sz);
			n += 1 + sz;
		}
		p[n++] = 0x02;
		p[n++] = rng_n(2) ? 0x33 : 0xb3;
		return n;
	}
	default:	/* BEP alone */
		p[0] = 0x02;
		p[1] = rng_n(2) ? 0x33 : 0xb3;
		return 2;
	}
}

/* Append one random packet; returns bytes written (0: no space). */
static int gen_packet(struct gen *g, int allow_raw)
{
	struct pt_packet p;
	uint64_t off;

	g_assert_cmpint(pt_enc_get_offset(g->enc, &off), ==, 0);
	if (g->cap - off < 64)
		return 0;
	memset(&p, 0, sizeof(p));
	switch (rng_n(allow_raw ? 27 : 26)) {
	case 0:
		p.type = ppt_pad;
		break;
	case 1:
		p.type = ppt_psb;
		break;
	case 2:
		p.type = ppt_psbend;
		break;
	case 3:
	case 4:
	case 5:
	case 6: {
		static const enum pt_packet_type t[] = {
			ppt_fup, ppt_tip, ppt_tip_pge, ppt_tip_pgd,
		};

		p.type = t[rng_n(4)];
		p.payload.ip.ipc = ipcs[rng_n(6)];
		p.payload.ip.ip = rng_n(2) ? random_ip() : g->ip + rng_bits(20);
		g->ip = p.payload.ip.ip;
		break;
	}
	case 7:
	case 8:
		p.type = ppt_tnt_8;
		p.payload.tnt.bit_size = (uint8_t)(1 + rng_n(6));
		p.payload.tnt.payload = rng() &
			((1ULL << p.payload.tnt.bit_size) - 1);
		break;
	case 9:
		p.type = ppt_tnt_64;
		p.payload.tnt.bit_size = (uint8_t)(1 + rng_n(47));
		p.payload.tnt.payload = rng() &
			((1ULL << p.payload.tnt.bit_size) - 1);
		break;
	case 10:
		p.type = ppt_mode;
		if (rng_n(2)) {
			p.payload.mode.leaf = pt_mol_exec;
			p.payload.mode.bits.exec.csl = rng_n(2);
			p.payload.mode.bits.exec.csd = rng_n(2);
		} else {
			p.payload.mode.leaf = pt_mol_tsx;
			p.payload.mode.bits.tsx.intx = rng_n(2);
			p.payload.mode.bits.tsx.abrt = rng_n(2);
		}
		break;
	case 11:
		p.type = ppt_pip;
		p.payload.pip.cr3 = rng_n(8) ? rng() & 0xfffffffffffe0ULL :
			(rng_n(2) ? 0xfffffffffffe0ULL : 0);
		p.payload.pip.nr = rng_n(2);
		break;
	case 12:
		p.type = ppt_vmcs;
		p.payload.vmcs.base = rng_n(8) ? rng() & 0xffffffffff000ULL :
			(rng_n(2) ? 0xffffffffff000ULL : 0);
		break;
	case 13:
		p.type = ppt_cbr;
		p.payload.cbr.ratio = (uint8_t)rng();
		break;
	case 14:
		p.type = ppt_tsc;
		p.payload.tsc.tsc = rng() & 0xffffffffffffffULL;
		break;
	case 15:
		p.type = ppt_tma;
		p.payload.tma.ctc = rng_n(8) ? (uint16_t)rng() :
			(rng_n(2) ? 0xffff : 0);
		p.payload.tma.fc = rng_n(8) ? (uint16_t)(rng() & 0x1ff) :
			(rng_n(2) ? 0x1ff : 0);
		break;
	case 16:
		p.type = ppt_mtc;
		p.payload.mtc.ctc = (uint8_t)rng();
		break;
	case 17:
	case 18:
		/* All lengths libipt decodes: up to 61 value bits. */
		p.type = ppt_cyc;
		p.payload.cyc.value = rng_bits(61);
		break;
	case 19:
		p.type = ppt_stop;
		break;
	case 20:
		p.type = ppt_ovf;
		break;
	case 21:
		p.type = ppt_mnt;
		p.payload.mnt.payload = rng();
		break;
	case 22:
		p.type = ppt_exstop;
		p.payload.exstop.ip = rng_n(2);
		break;
	case 23:
		p.type = ppt_mwait;
		p.payload.mwait.hints = (uint32_t)rng();
		p.payload.mwait.ext = (uint32_t)rng();
		break;
	case 24:
		if (rng_n(2)) {
			p.type = ppt_pwre;
			p.payload.pwre.state = (uint8_t)rng_n(16);
			p.payload.pwre.sub_state = (uint8_t)rng_n(16);
			p.payload.pwre.hw = rng_n(2);
		} else {
			p.type = ppt_pwrx;
			p.payload.pwrx.last = (uint8_t)rng_n(16);
			p.payload.pwrx.deepest = (uint8_t)rng_n(16);
			p.payload.pwrx.interrupt = rng_n(2);
			p.payload.pwrx.store = rng_n(2);
			p.payload.pwrx.autonomous = rng_n(2);
		}
		break;
	case 25:
		p.type = ppt_ptw;
		p.payload.ptw.plc = (uint8_t)rng_n(2);
		p.payload.ptw.payload = p.payload.ptw.plc ? rng() :
			(uint32_t)rng();
		p.payload.ptw.ip = rng_n(2);
		break;
	default: {
		int n = raw_packet(g->buf + off, rng_n(4));

		g_assert_cmpint(pt_enc_sync_set(g->enc, off + (uint64_t)n),
				==, 0);
		return n;
	}
	}
	return enc(g, &p);
}

static void gen_psb_plus(struct gen *g)
{
	struct pt_packet p;

	memset(&p, 0, sizeof(p));
	p.type = ppt_psb;
	enc(g, &p);
	p.type = ppt_tsc;
	p.payload.tsc.tsc = rng() & 0xffffffffffffffULL;
	enc(g, &p);
	memset(&p, 0, sizeof(p));
	p.type = ppt_tma;
	p.payload.tma.ctc = (uint16_t)rng();
	p.payload.tma.fc = (uint16_t)(rng() & 0x1ff);
	enc(g, &p);
	memset(&p, 0, sizeof(p));
	p.type = ppt_cbr;
	p.payload.cbr.ratio = (uint8_t)rng();
	enc(g, &p);
	memset(&p, 0, sizeof(p));
	p.type = ppt_pip;
	p.payload.pip.cr3 = rng() & 0xfffffffffffe0ULL;
	p.payload.pip.nr = rng_n(2);
	enc(g, &p);
	memset(&p, 0, sizeof(p));
	p.type = ppt_vmcs;
	p.payload.vmcs.base = rng() & 0xffffffffff000ULL;
	enc(g, &p);
	memset(&p, 0, sizeof(p));
	p.type = ppt_mode;
	p.payload.mode.leaf = pt_mol_exec;
	p.payload.mode.bits.exec = pt_set_exec_mode(ptem_64bit);
	enc(g, &p);
	memset(&p, 0, sizeof(p));
	p.type = ppt_fup;
	p.payload.ip.ipc = rng_n(2) ? pt_ipc_sext_48 : pt_ipc_full;
	p.payload.ip.ip = g->ip = random_ip();
	enc(g, &p);
	memset(&p, 0, sizeof(p));
	p.type = ppt_psbend;
	enc(g, &p);
}

/* Generate a stream of about @cap bytes: PSB+ first, then random packets
 * with a PSB+ every ~@psb_every bytes.  Returns the length. */
static size_t gen_stream(uint8_t *buf, size_t cap, size_t psb_every,
			 int allow_raw)
{
	struct pt_config cfg;
	struct gen g;
	uint64_t off = 0, next = 0;

	memset(buf, 0, cap);
	pt_config_init(&cfg);
	cfg.begin = buf;
	cfg.end = buf + cap;
	g.enc = pt_alloc_encoder(&cfg);
	g_assert_nonnull(g.enc);
	g.buf = buf;
	g.cap = cap;
	g.ip = random_ip();
	for (;;) {
		g_assert_cmpint(pt_enc_get_offset(g.enc, &off), ==, 0);
		if (off >= next) {
			if (cap - off < 128)
				break;
			gen_psb_plus(&g);
			next = off + psb_every / 2 + rng_n((unsigned int)psb_every);
			continue;
		}
		if (!gen_packet(&g, allow_raw))
			break;
	}
	g_assert_cmpint(pt_enc_get_offset(g.enc, &off), ==, 0);
	pt_free_encoder(g.enc);
	return (size_t)off;
}

/* ---------------------------------------------------------------------- */
/* (a) encoder round trip. */

/* Decode every packet of a valid stream twice: in the stream (fast path
 * wherever 16 bytes are left) and alone from an exact-size buffer (always
 * the general decoder for packets shorter than 16 bytes). */
static void check_alone(const uint8_t *buf, size_t len)
{
	VtPtScanner s, a;
	VtPtPacket v, w;
	int r;

	vt_pt_scan_init(&s, buf, len, 1000);
	for (;;) {
		uint8_t tmp[32], ctx = s.bip_ctx;

		r = vt_pt_scan_next(&s, &v);
		if (r <= 0)
			break;
		g_assert_cmpuint(v.offset, >=, 1000);
		memcpy(tmp, buf + v.offset - 1000, v.size);
		vt_pt_scan_init(&a, tmp, v.size, 0);
		a.bip_ctx = ctx;
		r = vt_pt_scan_next(&a, &w);
		g_assert_cmpint(r, ==, v.size);
		g_assert_cmpint(w.type, ==, v.type);
		g_assert_cmpuint(w.offset, ==, 0);
		if (v.type >= VT_PT_TIP && v.type <= VT_PT_FUP) {
			g_assert_cmpuint(w.u.ip.ipc, ==, v.u.ip.ipc);
			g_assert_cmphex(w.u.ip.raw, ==, v.u.ip.raw);
		} else if (v.type == VT_PT_TNT_8 || v.type == VT_PT_TNT_64) {
			g_assert_cmphex(w.u.tnt.payload, ==, v.u.tnt.payload);
			g_assert_cmpuint(w.u.tnt.bit_size, ==, v.u.tnt.bit_size);
		} else if (v.type == VT_PT_MTC) {
			g_assert_cmphex(w.u.mtc, ==, v.u.mtc);
		} else if (v.type == VT_PT_MODE_EXEC ||
			   v.type == VT_PT_MODE_TSX) {
			g_assert_cmphex(w.u.mode.bits, ==, v.u.mode.bits);
		} else if (v.type == VT_PT_TMA) {
			g_assert_cmphex(w.u.tma.ctc, ==, v.u.tma.ctc);
			g_assert_cmphex(w.u.tma.fc, ==, v.u.tma.fc);
		} else if (v.type == VT_PT_PIP) {
			g_assert_cmphex(w.u.pip.cr3, ==, v.u.pip.cr3);
			g_assert_cmpuint(w.u.pip.nr, ==, v.u.pip.nr);
		} else if (v.type == VT_PT_CBR) {
			g_assert_cmphex(w.u.cbr, ==, v.u.cbr);
		} else if (v.type != VT_PT_PAD && v.type != VT_PT_PSB &&
			   v.type != VT_PT_PSBEND && v.type != VT_PT_OVF &&
			   v.type != VT_PT_STOP) {
			/* tsc, cyc, vmcs and misc share the first word */
			g_assert_cmphex(w.u.tsc, ==, v.u.tsc);
			if (v.type >= VT_PT_MNT)
				g_assert_cmphex(w.u.misc.extra, ==,
						v.u.misc.extra);
		}
	}
	g_assert_cmpint(r, ==, -vt_pte_eos);
	g_assert_true(s.pos == s.end);
}

static void test_encoder(void)
{
	size_t cap = 64 * 1024;
	uint8_t *buf = g_malloc(cap);
	struct xstats st = { 0 };
	int i;

	for (i = 0; i < 300; i++) {
		size_t len;

		rng_seed(1000 + (uint64_t)i);
		len = gen_stream(buf, 512 + rng_n((unsigned int)cap - 512),
				 i % 3 ? 4096 : 256, i % 4 == 3);
		cross_check(buf, len, (unsigned int)i % 8, i & 1, &st);
		check_alone(buf, len);
		/* A valid stream never has errors. */
		g_assert_cmpuint(st.errors, ==, 0);
	}
	g_assert_cmpuint(st.packets, >, 100000);
	g_test_message("encoder: %" PRIu64 " packets, %" PRIu64 " BIPs",
		       st.packets, st.bips);
	g_free(buf);
}

/* ---------------------------------------------------------------------- */
/* (b) random bytes and corruptions. */

static const uint8_t psb_bytes[16] = {
	0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
	0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
};

static uint8_t interesting_byte(void)
{
	static const uint8_t b[] = {
		0x00, 0x02, 0x82, 0x23, 0x03, 0x73, 0x43, 0xc8, 0xa3, 0xf3,
		0x83, 0xc3, 0x88, 0x62, 0xe2, 0xc2, 0x22, 0xa2, 0x12, 0x32,
		0x52, 0x72, 0x92, 0xb2, 0x63, 0x33, 0xb3, 0x13, 0x53, 0x19,
		0x59, 0x99, 0x0d, 0x1d, 0x11, 0x01, 0xad, 0xed, 0x07, 0x04,
		0x0c, 0xff, 0xfe, 0x20, 0x21, 0x40,
	};

	return rng_n(3) ? (uint8_t)rng() : b[rng_n(sizeof(b))];
}

static void corrupt(uint8_t *buf, size_t len)
{
	unsigned int k, n = 1 + rng_n(8);

	for (k = 0; k < n && len; k++) {
		size_t at = rng_n((unsigned int)len);

		switch (rng_n(6)) {
		case 0:
			buf[at] ^= (uint8_t)(1u << rng_n(8));
			break;
		case 1:
			buf[at] = interesting_byte();
			break;
		case 2: {	/* overwrite a short span */
			size_t i, m = 1 + rng_n(16);

			for (i = 0; i < m && at + i < len; i++)
				buf[at + i] = interesting_byte();
			break;
		}
		case 3: {	/* stray PSB pattern pairs or a (partial) PSB */
			size_t i, m = 2 * (1 + rng_n(10));

			for (i = 0; i < m && at + i < len; i++)
				buf[at + i] = psb_bytes[i & 1];
			break;
		}
		case 4:	/* duplicate a span (splices packets) */
			if (at + 32 < len) {
				size_t src = rng_n((unsigned int)(len - 32));

				memmove(buf + at, buf + src, 1 + rng_n(31));
			}
			break;
		default:
			buf[at] = 0;
			break;
		}
	}
}

static void test_random(void)
{
	size_t cap = 16 * 1024;
	uint8_t *buf = g_malloc(cap);
	struct xstats st = { 0 };
	int i;

	/* Random bytes with planted PSBs. */
	for (i = 0; i < 3000; i++) {
		size_t len, j, np;

		rng_seed(5000 + (uint64_t)i);
		len = 1 + rng_n(i < 1500 ? 300 : (unsigned int)cap);
		for (j = 0; j < len; j++)
			buf[j] = i % 2 ? interesting_byte() : (uint8_t)rng();
		np = rng_n(6);
		for (j = 0; j < np && len > 16; j++) {
			size_t at = rng_n((unsigned int)(len - 15));

			memcpy(buf + at, psb_bytes, 16);
			if (rng_n(4) == 0 && at + 18 <= len)
				memcpy(buf + at + 16, psb_bytes, 2);
		}
		cross_check(buf, len, rng_n(8), i & 1, &st);
	}
	/* Corrupted valid streams, with and without the packets libipt does
	 * not know. */
	for (i = 0; i < 2000; i++) {
		size_t len;

		rng_seed(9000 + (uint64_t)i);
		len = gen_stream(buf, 256 + rng_n((unsigned int)cap - 256),
				 i % 2 ? 1024 : 200, i % 3 == 0);
		corrupt(buf, len);
		if (rng_n(4) == 0)
			len -= rng_n((unsigned int)(len < 20 ? len : 20));
		cross_check(buf, len, rng_n(8), i & 1, &st);
	}
	g_test_message("random: %" PRIu64 " packets, %" PRIu64 " errors, %"
		       PRIu64 " resyncs, %" PRIu64 " BIPs", st.packets,
		       st.errors, st.resyncs, st.bips);
	g_assert_cmpuint(st.errors, >, 1000);
	g_assert_cmpuint(st.resyncs, >, 500);
	g_free(buf);
}

/* ---------------------------------------------------------------------- */
/* Sync corner cases. */

static void test_sync(void)
{
	VtPtScanner s;
	VtPtPacket v;
	struct xstats st = { 0 };
	uint8_t b[96];
	int r;

	/* A TSC swallows the start of a PSB: the next "02 82" is read as a
	 * bad PSB; libipt (and we) resync back to the swallowed one. */
	memset(b, 0, sizeof(b));
	memcpy(b, psb_bytes, 16);
	b[16] = 0x19;			/* TSC: bytes 17..23 = payload */
	memcpy(b + 20, psb_bytes, 16);	/* PSB at 20, inside the TSC */
	b[36] = 0x02;
	b[37] = 0x23;			/* PSBEND */
	vt_pt_scan_init(&s, b, 40, 0);
	g_assert_cmpint(vt_pt_scan_sync_forward(&s, 1), ==, 0);
	g_assert_cmpuint(vt_pt_scan_offset(&s), ==, 0);
	g_assert_cmpint(vt_pt_scan_next(&s, &v), ==, 16);
	g_assert_cmpint(vt_pt_scan_next(&s, &v), ==, 8);	/* TSC */
	g_assert_cmpint(v.type, ==, VT_PT_TSC);
	r = vt_pt_scan_next(&s, &v);				/* at 24 */
	g_assert_cmpint(r, ==, -vt_pte_bad_packet);
	g_assert_cmpuint(v.offset, ==, 24);
	g_assert_cmpint(vt_pt_scan_sync_forward(&s, 0), ==, 0);
	g_assert_cmpuint(vt_pt_scan_offset(&s), ==, 20);
	g_assert_cmpint(vt_pt_scan_next(&s, &v), ==, 16);
	g_assert_cmpint(v.type, ==, VT_PT_PSB);
	g_assert_cmpint(vt_pt_scan_next(&s, &v), ==, 2);
	g_assert_cmpint(v.type, ==, VT_PT_PSBEND);
	cross_check(b, 40, 0, 0, &st);
	cross_check(b, 40, 3, 1, &st);

	/* 18 bytes of pattern: the PSB is the last 16. */
	memset(b, 0x04, sizeof(b));
	memcpy(b + 5, psb_bytes, 16);
	memcpy(b + 21, psb_bytes, 2);
	vt_pt_scan_init(&s, b, sizeof(b), 0);
	g_assert_cmpint(vt_pt_scan_sync_forward(&s, 1), ==, 0);
	g_assert_cmpuint(vt_pt_scan_offset(&s), ==, 7);
	cross_check(b, sizeof(b), 0, 0, &st);
	cross_check(b, sizeof(b), 5, 0, &st);

	/* Two PSBs back to back (32 bytes of pattern): the sync point is
	 * the second; sync_forward without at_ok from a PSB finds the next
	 * one, never the same. */
	memset(b, 0x04, sizeof(b));
	memcpy(b + 8, psb_bytes, 16);
	memcpy(b + 24, psb_bytes, 16);
	memcpy(b + 60, psb_bytes, 16);
	vt_pt_scan_init(&s, b, sizeof(b), 0);
	g_assert_cmpint(vt_pt_scan_sync_forward(&s, 1), ==, 0);
	g_assert_cmpuint(vt_pt_scan_offset(&s), ==, 24);
	g_assert_cmpint(vt_pt_scan_sync_forward(&s, 1), ==, 0);
	g_assert_cmpuint(vt_pt_scan_offset(&s), ==, 24);
	g_assert_cmpint(vt_pt_scan_sync_forward(&s, 0), ==, 0);
	g_assert_cmpuint(vt_pt_scan_offset(&s), ==, 60);
	g_assert_cmpint(vt_pt_scan_sync_forward(&s, 0), ==, -vt_pte_nosync);
	g_assert_true(s.pos == s.end);
	cross_check(b, sizeof(b), 0, 0, &st);

	/* Without at_ok the search starts 15 bytes back (libipt), so a
	 * position inside a PSB syncs back to it ... */
	memset(b, 0x04, sizeof(b));
	memcpy(b + 20, psb_bytes, 16);
	memcpy(b + 60, psb_bytes, 16);
	vt_pt_scan_init(&s, b, sizeof(b), 0);
	s.pos = b + 35;
	g_assert_cmpint(vt_pt_scan_sync_forward(&s, 0), ==, 0);
	g_assert_cmpuint(vt_pt_scan_offset(&s), ==, 20);
	/* ... but not from 16 bytes past its start, nor with at_ok. */
	s.pos = b + 36;
	g_assert_cmpint(vt_pt_scan_sync_forward(&s, 0), ==, 0);
	g_assert_cmpuint(vt_pt_scan_offset(&s), ==, 60);
	s.pos = b + 21;
	g_assert_cmpint(vt_pt_scan_sync_forward(&s, 1), ==, 0);
	g_assert_cmpuint(vt_pt_scan_offset(&s), ==, 60);
	/* libipt does the same: a TNT-8 (0x82) inside the PSB moves its
	 * position to 34, resp. 36, without a sync point there. */
	{
		uint8_t lb[sizeof(b) + SLACK];
		struct pt_packet_decoder *d;
		struct pt_packet l;
		uint64_t off;
		int k;

		memset(lb, 0, sizeof(lb));
		memcpy(lb, b, sizeof(b));
		d = lib_alloc(lb, sizeof(b));
		for (k = 0; k < 2; k++) {
			g_assert_cmpint(pt_pkt_sync_set(d, k ? 35 : 33), ==, 0);
			g_assert_cmpint(pt_pkt_next(d, &l, sizeof(l)), ==, 1);
			g_assert_cmpint(pt_pkt_sync_forward(d), ==, 0);
			g_assert_cmpint(pt_pkt_get_offset(d, &off), ==, 0);
			g_assert_cmpuint(off, ==, k ? 60 : 20);
			s.pos = b + (k ? 36 : 34);
			g_assert_cmpint(vt_pt_scan_sync_forward(&s, 0), ==, 0);
			g_assert_cmpuint(vt_pt_scan_offset(&s), ==, off);
		}
		pt_pkt_free_decoder(d);
	}

	/* A PSB cut by the end of the buffer is not a sync point. */
	vt_pt_scan_init(&s, psb_bytes, 15, 0);
	g_assert_cmpint(vt_pt_scan_sync_forward(&s, 1), ==, -vt_pte_nosync);
	vt_pt_scan_init(&s, psb_bytes, 16, 0);
	g_assert_cmpint(vt_pt_scan_sync_forward(&s, 1), ==, 0);
	cross_check(psb_bytes, 15, 0, 0, &st);
	cross_check(psb_bytes, 16, 1, 0, &st);

	/* Empty buffers. */
	vt_pt_scan_init(&s, NULL, 0, 0);
	g_assert_cmpint(vt_pt_scan_sync_forward(&s, 1), ==, -vt_pte_nosync);
	g_assert_cmpint(vt_pt_scan_next(&s, &v), ==, -vt_pte_eos);
	g_assert_cmpint(vt_pt_scan_next(NULL, &v), ==, -vt_pte_invalid);
}

/* ---------------------------------------------------------------------- */
/* (c) last IP. */

static void test_last_ip(void)
{
	static const uint8_t fup_sext[] = {
		0x7d, 0x00, 0x00, 0x00, 0x81, 0xff, 0xff,
	};
	uint8_t buf[4096];
	VtPtScanner s;
	VtPtPacket v;
	struct ip_model m;
	struct pt_config cfg;
	struct pt_encoder *e;
	struct pt_packet p;
	size_t len;
	int i, r;

	/* fup(3: 0xffffffff81000000) has payload 0xffff81000000. */
	vt_pt_scan_init(&s, fup_sext, sizeof(fup_sext), 0);
	g_assert_cmpint(vt_pt_scan_next(&s, &v), ==, 7);
	g_assert_cmpint(v.type, ==, VT_PT_FUP);
	g_assert_cmphex(v.u.ip.raw, ==, 0xffff81000000ULL);
	g_assert_cmphex(v.u.ip.ip, ==, 0xffffffff81000000ULL);
	g_assert_cmpuint(v.u.ip.suppressed, ==, 0);

	/* Unknown base (no PSB): partial updates are suppressed, but keep
	 * the known bits; a full IP makes later updates valid; a PSB resets
	 * to a known zero base (hardware compresses against zero). */
	{
		static const uint8_t b[] = {
			0x2d, 0x34, 0x12,		/* TIP 16: 0x1234 */
			0x4d, 0x78, 0x56, 0x34, 0x12,	/* TIP 32 */
			0x0d,				/* TIP no ip */
			0xcd, 1, 2, 3, 4, 5, 6, 7, 8,	/* TIP 64 */
			0x2d, 0xcd, 0xab,		/* TIP 16 */
			0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
			0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
			0x3d, 0x00, 0x10,		/* FUP 16: 0x1000 */
		};

		vt_pt_scan_init(&s, b, sizeof(b), 0);
		g_assert_cmpint(vt_pt_scan_next(&s, &v), ==, 3);
		g_assert_cmpuint(v.u.ip.suppressed, ==, 1);
		g_assert_cmphex(v.u.ip.ip, ==, 0x1234);
		g_assert_cmpint(vt_pt_scan_next(&s, &v), ==, 5);
		g_assert_cmpuint(v.u.ip.suppressed, ==, 1);
		g_assert_cmphex(v.u.ip.ip, ==, 0x12345678);
		g_assert_cmpint(vt_pt_scan_next(&s, &v), ==, 1);
		g_assert_cmpuint(v.u.ip.suppressed, ==, 1);
		g_assert_cmpuint(v.u.ip.ipc, ==, 0);
		g_assert_cmpint(vt_pt_scan_next(&s, &v), ==, 9);
		g_assert_cmpuint(v.u.ip.suppressed, ==, 0);
		g_assert_cmphex(v.u.ip.ip, ==, 0x0807060504030201ULL);
		g_assert_cmpint(vt_pt_scan_next(&s, &v), ==, 3);
		g_assert_cmpuint(v.u.ip.suppressed, ==, 0);
		g_assert_cmphex(v.u.ip.ip, ==, 0x080706050403abcdULL);
		g_assert_cmpint(vt_pt_scan_next(&s, &v), ==, 16);
		g_assert_cmpint(vt_pt_scan_next(&s, &v), ==, 3);
		g_assert_cmpuint(v.u.ip.suppressed, ==, 0);
		g_assert_cmphex(v.u.ip.ip, ==, 0x1000);
	}

	/* Random IP streams against the model, through both entry points
	 * and buffer tails. */
	for (i = 0; i < 400; i++) {
		rng_seed(20000 + (uint64_t)i);
		pt_config_init(&cfg);
		cfg.begin = buf;
		cfg.end = buf + sizeof(buf);
		e = pt_alloc_encoder(&cfg);
		memset(&p, 0, sizeof(p));
		if (i % 4) {
			p.type = ppt_psb;
			g_assert_cmpint(pt_enc_next(e, &p), ==, 16);
		}
		for (;;) {
			uint64_t off;

			g_assert_cmpint(pt_enc_get_offset(e, &off), ==, 0);
			if (off > sizeof(buf) - 32)
				break;
			memset(&p, 0, sizeof(p));
			switch (rng_n(12)) {
			case 0:
				p.type = ppt_psb;
				break;
			case 1:
				p.type = ppt_tnt_8;
				p.payload.tnt.bit_size = 1;
				break;
			default:
				p.type = rng_n(2) ? ppt_tip : ppt_fup;
				p.payload.ip.ipc = ipcs[rng_n(6)];
				p.payload.ip.ip = random_ip();
				break;
			}
			g_assert_cmpint(pt_enc_next(e, &p), >, 0);
		}
		{
			uint64_t off;

			pt_enc_get_offset(e, &off);
			len = (size_t)off;
		}
		pt_free_encoder(e);

		vt_pt_scan_init(&s, buf, len, 0);
		m.ip = 0;
		m.known = 0;
		while ((r = (i & 1) ? vt_pt_scan_next_inline(&s, &v)
				    : vt_pt_scan_next(&s, &v)) > 0) {
			if (v.type == VT_PT_PSB) {
				m.ip = 0;
				m.known = 1;
			} else if (v.type >= VT_PT_TIP && v.type <= VT_PT_FUP) {
				model_check(&m, &v);
			}
		}
		g_assert_cmpint(r, ==, -vt_pte_eos);
		g_assert_true(s.pos == s.end);
	}
}

/* ---------------------------------------------------------------------- */
/* (d) perf test 76 vectors. */

struct perf_vec {
	uint8_t ctx;		/* 0, or 4/8: BIP context (a BBP first) */
	uint8_t len;
	uint8_t bytes[16];
	const char *desc;
};

static const struct perf_vec perf_vecs[] = {
	{ 0, 1, { 0x00 }, "PAD" },
	{ 0, 1, { 0x04 }, "TNT N (1)" },
	{ 0, 1, { 0x06 }, "TNT T (1)" },
	{ 0, 1, { 0x80 }, "TNT NNNNNN (6)" },
	{ 0, 1, { 0xfe }, "TNT TTTTTT (6)" },
	{ 0, 8, { 0x02, 0xa3, 0x02, 0, 0, 0, 0, 0 }, "TNT N (1)" },
	{ 0, 8, { 0x02, 0xa3, 0x03, 0, 0, 0, 0, 0 }, "TNT T (1)" },
	{ 0, 8, { 0x02, 0xa3, 0, 0, 0, 0, 0, 0x80 },
	  "TNT NNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNNN (47)" },
	{ 0, 8, { 0x02, 0xa3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff },
	  "TNT TTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTTT (47)" },
	{ 0, 1, { 0x0d }, "TIP no ip" },
	{ 0, 3, { 0x2d, 1, 2 }, "TIP 0x201" },
	{ 0, 5, { 0x4d, 1, 2, 3, 4 }, "TIP 0x4030201" },
	{ 0, 7, { 0x6d, 1, 2, 3, 4, 5, 6 }, "TIP 0x60504030201" },
	{ 0, 7, { 0x8d, 1, 2, 3, 4, 5, 6 }, "TIP 0x60504030201" },
	{ 0, 9, { 0xcd, 1, 2, 3, 4, 5, 6, 7, 8 }, "TIP 0x807060504030201" },
	{ 0, 1, { 0x11 }, "TIP.PGE no ip" },
	{ 0, 3, { 0x31, 1, 2 }, "TIP.PGE 0x201" },
	{ 0, 5, { 0x51, 1, 2, 3, 4 }, "TIP.PGE 0x4030201" },
	{ 0, 7, { 0x71, 1, 2, 3, 4, 5, 6 }, "TIP.PGE 0x60504030201" },
	{ 0, 7, { 0x91, 1, 2, 3, 4, 5, 6 }, "TIP.PGE 0x60504030201" },
	{ 0, 9, { 0xd1, 1, 2, 3, 4, 5, 6, 7, 8 },
	  "TIP.PGE 0x807060504030201" },
	{ 0, 1, { 0x01 }, "TIP.PGD no ip" },
	{ 0, 3, { 0x21, 1, 2 }, "TIP.PGD 0x201" },
	{ 0, 5, { 0x41, 1, 2, 3, 4 }, "TIP.PGD 0x4030201" },
	{ 0, 7, { 0x61, 1, 2, 3, 4, 5, 6 }, "TIP.PGD 0x60504030201" },
	{ 0, 7, { 0x81, 1, 2, 3, 4, 5, 6 }, "TIP.PGD 0x60504030201" },
	{ 0, 9, { 0xc1, 1, 2, 3, 4, 5, 6, 7, 8 },
	  "TIP.PGD 0x807060504030201" },
	{ 0, 1, { 0x1d }, "FUP no ip" },
	{ 0, 3, { 0x3d, 1, 2 }, "FUP 0x201" },
	{ 0, 5, { 0x5d, 1, 2, 3, 4 }, "FUP 0x4030201" },
	{ 0, 7, { 0x7d, 1, 2, 3, 4, 5, 6 }, "FUP 0x60504030201" },
	{ 0, 7, { 0x9d, 1, 2, 3, 4, 5, 6 }, "FUP 0x60504030201" },
	{ 0, 9, { 0xdd, 1, 2, 3, 4, 5, 6, 7, 8 }, "FUP 0x807060504030201" },
	{ 0, 8, { 0x02, 0x43, 2, 4, 6, 8, 10, 12 },
	  "PIP 0x60504030201 (NR=0)" },
	{ 0, 8, { 0x02, 0x43, 3, 4, 6, 8, 10, 12 },
	  "PIP 0x60504030201 (NR=1)" },
	{ 0, 2, { 0x99, 0x00 }, "MODE.Exec IF:0 16" },
	{ 0, 2, { 0x99, 0x01 }, "MODE.Exec IF:0 64" },
	{ 0, 2, { 0x99, 0x02 }, "MODE.Exec IF:0 32" },
	{ 0, 2, { 0x99, 0x04 }, "MODE.Exec IF:1 16" },
	{ 0, 2, { 0x99, 0x05 }, "MODE.Exec IF:1 64" },
	{ 0, 2, { 0x99, 0x06 }, "MODE.Exec IF:1 32" },
	{ 0, 2, { 0x99, 0x20 }, "MODE.TSX TXAbort:0 InTX:0" },
	{ 0, 2, { 0x99, 0x21 }, "MODE.TSX TXAbort:0 InTX:1" },
	{ 0, 2, { 0x99, 0x22 }, "MODE.TSX TXAbort:1 InTX:0" },
	{ 0, 2, { 0x02, 0x83 }, "TraceSTOP" },
	{ 0, 4, { 0x02, 0x03, 0x12, 0x00 }, "CBR 0x12" },
	{ 0, 8, { 0x19, 1, 2, 3, 4, 5, 6, 7 }, "TSC 0x7060504030201" },
	{ 0, 2, { 0x59, 0x12 }, "MTC 0x12" },
	{ 0, 7, { 0x02, 0x73, 0, 0, 0, 0, 0 }, "TMA CTC 0x0 FC 0x0" },
	{ 0, 7, { 0x02, 0x73, 1, 2, 0, 0, 0 }, "TMA CTC 0x201 FC 0x0" },
	{ 0, 7, { 0x02, 0x73, 0, 0, 0, 0xff, 1 }, "TMA CTC 0x0 FC 0x1ff" },
	{ 0, 7, { 0x02, 0x73, 0x80, 0xc0, 0, 0xff, 1 },
	  "TMA CTC 0xc080 FC 0x1ff" },
	{ 0, 1, { 0x03 }, "CYC 0x0" },
	{ 0, 1, { 0x0b }, "CYC 0x1" },
	{ 0, 1, { 0xfb }, "CYC 0x1f" },
	{ 0, 2, { 0x07, 0x02 }, "CYC 0x20" },
	{ 0, 2, { 0xff, 0xfe }, "CYC 0xfff" },
	{ 0, 3, { 0x07, 1, 2 }, "CYC 0x1000" },
	{ 0, 3, { 0xff, 0xff, 0xfe }, "CYC 0x7ffff" },
	{ 0, 4, { 0x07, 1, 1, 2 }, "CYC 0x80000" },
	{ 0, 4, { 0xff, 0xff, 0xff, 0xfe }, "CYC 0x3ffffff" },
	{ 0, 5, { 0x07, 1, 1, 1, 2 }, "CYC 0x4000000" },
	{ 0, 5, { 0xff, 0xff, 0xff, 0xff, 0xfe }, "CYC 0x1ffffffff" },
	{ 0, 6, { 0x07, 1, 1, 1, 1, 2 }, "CYC 0x200000000" },
	{ 0, 6, { 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe }, "CYC 0xffffffffff" },
	{ 0, 7, { 0x07, 1, 1, 1, 1, 1, 2 }, "CYC 0x10000000000" },
	{ 0, 7, { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe },
	  "CYC 0x7fffffffffff" },
	{ 0, 8, { 0x07, 1, 1, 1, 1, 1, 1, 2 }, "CYC 0x800000000000" },
	{ 0, 8, { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe },
	  "CYC 0x3fffffffffffff" },
	{ 0, 9, { 0x07, 1, 1, 1, 1, 1, 1, 1, 2 }, "CYC 0x40000000000000" },
	{ 0, 9, { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe },
	  "CYC 0x1fffffffffffffff" },
	/* perf's 10-byte CYC vectors ("07 01 .. 02" = 0x2000000000000000,
	 * "ff .. ff 0e" = 0xffffffffffffffff) exceed libipt's limit: see
	 * test_cyc_limit. */
	{ 0, 7, { 0x02, 0xc8, 1, 2, 3, 4, 5 }, "VMCS 0x504030201" },
	{ 0, 2, { 0x02, 0xf3 }, "OVF" },
	{ 0, 16, { 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
		   0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82 }, "PSB" },
	{ 0, 2, { 0x02, 0x23 }, "PSBEND" },
	{ 0, 11, { 0x02, 0xc3, 0x88, 1, 2, 3, 4, 5, 6, 7, 0 },
	  "MNT 0x7060504030201" },
	{ 0, 6, { 0x02, 0x12, 1, 2, 3, 4 }, "PTWRITE 0x4030201 IP:0" },
	{ 0, 10, { 0x02, 0x32, 1, 2, 3, 4, 5, 6, 7, 8 },
	  "PTWRITE 0x807060504030201 IP:0" },
	{ 0, 6, { 0x02, 0x92, 1, 2, 3, 4 }, "PTWRITE 0x4030201 IP:1" },
	{ 0, 10, { 0x02, 0xb2, 1, 2, 3, 4, 5, 6, 7, 8 },
	  "PTWRITE 0x807060504030201 IP:1" },
	{ 0, 2, { 0x02, 0x62 }, "EXSTOP IP:0" },
	{ 0, 2, { 0x02, 0xe2 }, "EXSTOP IP:1" },
	{ 0, 10, { 0x02, 0xc2, 0, 0, 0, 0, 0, 0, 0, 0 },
	  "MWAIT 0x0 Hints 0x0 Extensions 0x0" },
	{ 0, 10, { 0x02, 0xc2, 1, 2, 3, 4, 5, 6, 7, 8 },
	  "MWAIT 0x807060504030201 Hints 0x1 Extensions 0x1" },
	{ 0, 10, { 0x02, 0xc2, 0xff, 2, 3, 4, 7, 6, 7, 8 },
	  "MWAIT 0x8070607040302ff Hints 0xff Extensions 0x3" },
	{ 0, 4, { 0x02, 0x22, 0, 0 },
	  "PWRE 0x0 HW:0 CState:0 Sub-CState:0" },
	{ 0, 4, { 0x02, 0x22, 1, 2 },
	  "PWRE 0x201 HW:0 CState:0 Sub-CState:2" },
	{ 0, 4, { 0x02, 0x22, 0x80, 0x34 },
	  "PWRE 0x3480 HW:1 CState:3 Sub-CState:4" },
	{ 0, 4, { 0x02, 0x22, 0x00, 0x56 },
	  "PWRE 0x5600 HW:0 CState:5 Sub-CState:6" },
	{ 0, 7, { 0x02, 0xa2, 0, 0, 0, 0, 0 },
	  "PWRX 0x0 Last CState:0 Deepest CState:0 Wake Reason 0x0" },
	{ 0, 7, { 0x02, 0xa2, 1, 2, 3, 4, 5 },
	  "PWRX 0x504030201 Last CState:0 Deepest CState:1 Wake Reason 0x2" },
	{ 0, 7, { 0x02, 0xa2, 0xff, 0xff, 0xff, 0xff, 0xff },
	  "PWRX 0xffffffffff Last CState:15 Deepest CState:15 Wake Reason 0xf" },
	{ 0, 3, { 0x02, 0x63, 0x00 }, "BBP SZ 8-byte Type 0x0" },
	{ 0, 3, { 0x02, 0x63, 0x80 }, "BBP SZ 4-byte Type 0x0" },
	{ 0, 3, { 0x02, 0x63, 0x1f }, "BBP SZ 8-byte Type 0x1f" },
	{ 0, 3, { 0x02, 0x63, 0x9f }, "BBP SZ 4-byte Type 0x1f" },
	{ 4, 5, { 0x04, 0, 0, 0, 0 }, "BIP ID 0x00 Value 0x0" },
	{ 4, 5, { 0xfc, 0, 0, 0, 0 }, "BIP ID 0x1f Value 0x0" },
	{ 4, 5, { 0x04, 1, 2, 3, 4 }, "BIP ID 0x00 Value 0x4030201" },
	{ 4, 5, { 0xfc, 1, 2, 3, 4 }, "BIP ID 0x1f Value 0x4030201" },
	{ 8, 9, { 0x04, 0, 0, 0, 0, 0, 0, 0, 0 }, "BIP ID 0x00 Value 0x0" },
	{ 8, 9, { 0xfc, 0, 0, 0, 0, 0, 0, 0, 0 }, "BIP ID 0x1f Value 0x0" },
	{ 8, 9, { 0x04, 1, 2, 3, 4, 5, 6, 7, 8 },
	  "BIP ID 0x00 Value 0x807060504030201" },
	{ 8, 9, { 0xfc, 1, 2, 3, 4, 5, 6, 7, 8 },
	  "BIP ID 0x1f Value 0x807060504030201" },
	{ 0, 2, { 0x02, 0x33 }, "BEP IP:0" },
	{ 0, 2, { 0x02, 0xb3 }, "BEP IP:1" },
	{ 4, 2, { 0x02, 0x33 }, "BEP IP:0" },
	{ 8, 2, { 0x02, 0xb3 }, "BEP IP:1" },
	{ 0, 4, { 0x02, 0x13, 0x01, 0x03 }, "CFE IP:0 Type 0x01 Vector 0x3" },
	{ 0, 4, { 0x02, 0x13, 0x81, 0x03 }, "CFE IP:1 Type 0x01 Vector 0x3" },
	{ 0, 4, { 0x02, 0x13, 0x1f, 0x00 }, "CFE IP:0 Type 0x1f Vector 0x0" },
	{ 0, 4, { 0x02, 0x13, 0x9f, 0xff }, "CFE IP:1 Type 0x1f Vector 0xff" },
	{ 0, 11, { 0x02, 0x53, 0x09, 1, 2, 3, 4, 5, 6, 7, 0 },
	  "EVD Type 0x09 Payload 0x7060504030201" },
	{ 0, 11, { 0x02, 0x53, 0x3f, 2, 3, 4, 5, 6, 7, 8, 0 },
	  "EVD Type 0x3f Payload 0x8070605040302" },
};

static void test_desc(void)
{
	size_t i;

	for (i = 0; i < G_N_ELEMENTS(perf_vecs); i++) {
		const struct perf_vec *t = &perf_vecs[i];
		uint8_t buf[64];
		VtPtScanner s;
		VtPtPacket v;
		char desc[128];
		size_t n = 0, pad;
		int r;

		/* Also embedded before 16 bytes of padding: fast path. */
		for (pad = 0; pad <= 16; pad += 16) {
			n = 0;
			if (t->ctx) {
				buf[n++] = 0x02;
				buf[n++] = 0x63;
				buf[n++] = t->ctx == 4 ? 0x80 : 0x00;
			}
			memcpy(buf + n, t->bytes, t->len);
			memset(buf + n + t->len, 0, pad);
			vt_pt_scan_init(&s, buf, n + t->len + pad, 0);
			if (t->ctx) {
				g_assert_cmpint(vt_pt_scan_next(&s, &v), ==, 3);
				g_assert_cmpint(v.type, ==, VT_PT_BBP);
			}
			r = vt_pt_scan_next(&s, &v);
			if (r != t->len)
				g_error("vector %zu (%s): returned %d", i,
					t->desc, r);
			g_assert_cmpuint(v.offset, ==, n);
			r = vt_pt_packet_desc(&v, desc, sizeof(desc));
			g_assert_cmpint(r, ==, (int)strlen(t->desc));
			if (strcmp(desc, t->desc))
				g_error("vector %zu: \"%s\", perf \"%s\"", i,
					desc, t->desc);
		}
		/* snprintf semantics */
		g_assert_cmpint(vt_pt_packet_desc(&v, NULL, 0), ==,
				(int)strlen(t->desc));
		g_assert_cmpint(vt_pt_packet_desc(&v, desc, 4), ==,
				(int)strlen(t->desc));
		g_assert_cmpuint(strlen(desc), ==, 3);
	}

	/* Names and error strings. */
	g_assert_cmpstr(vt_pt_packet_name(VT_PT_TSC), ==, "TSC");
	g_assert_cmpstr(vt_pt_packet_name(VT_PT_PIP), ==, "PIP");
	g_assert_cmpstr(vt_pt_packet_name(VT_PT_NTYPES), ==, "unknown");
	for (i = 0; i < VT_PT_NTYPES; i++)
		g_assert_nonnull(vt_pt_packet_name((VtPtPacketType)i));
	g_assert_cmpstr(vt_pt_errstr(-vt_pte_eos), ==,
			vt_pt_errstr(vt_pte_eos));
	g_assert_cmpstr(vt_pt_errstr(12345), ==, "unknown error");
}

/* ---------------------------------------------------------------------- */
/* (e) packets cut off at the end of the buffer. */

static void test_eos(void)
{
	uint8_t stream[4096], buf[64 + SLACK];
	size_t len;
	int i;

	rng_seed(777);
	len = gen_stream(stream, sizeof(stream), 100000, 1);

	/* Every prefix of every packet, after two PADs. */
	{
		VtPtScanner s;
		VtPtPacket v;
		int r;

		vt_pt_scan_init(&s, stream, len, 0);
		while ((r = vt_pt_scan_next(&s, &v)) > 0) {
			const uint8_t *pk = stream + v.offset;
			unsigned int cut;

			if (v.type == VT_PT_BIP)
				continue;	/* needs its BBP */
			for (cut = 1; cut < v.size; cut++) {
				VtPtScanner t;
				VtPtPacket w;
				struct pt_packet_decoder *d;
				struct pt_packet l;

				memset(buf, 0, sizeof(buf));
				buf[0] = buf[1] = 0x00;
				memcpy(buf + 2, pk, cut);
				vt_pt_scan_init(&t, buf, 2 + cut, 500);
				g_assert_cmpint(vt_pt_scan_next(&t, &w), ==, 1);
				g_assert_cmpint(vt_pt_scan_next_inline(&t, &w),
						==, 1);
				g_assert_cmpint(vt_pt_scan_next(&t, &w), ==,
						-vt_pte_eos);
				g_assert_cmpuint(w.offset, ==, 502);
				g_assert_cmpuint(vt_pt_scan_offset(&t), ==, 502);
				g_assert_cmpint(vt_pt_scan_next_inline(&t, &w),
						==, -vt_pte_eos);
				g_assert_cmpuint(w.offset, ==, 502);

				d = lib_alloc(buf, 2 + cut);
				g_assert_cmpint(pt_pkt_sync_set(d, 2), ==, 0);
				g_assert_cmpint(pt_pkt_next(d, &l, sizeof(l)),
						==, -pte_eos);
				pt_pkt_free_decoder(d);
			}
		}
		g_assert_cmpint(r, ==, -vt_pte_eos);
	}

	/* Packets whose invalid header wins over truncation (as libipt):
	 * IPBytes 5/7 and PTWRITE size codes 2/3. */
	{
		static const uint8_t hdr[][2] = {
			{ 0xad, 0 }, { 0xed, 0 }, { 0xb1, 0 }, { 0xfd, 0 },
			{ 0x02, 0x52 }, { 0x02, 0xf2 },
		};

		for (i = 0; i < (int)G_N_ELEMENTS(hdr); i++) {
			VtPtScanner t;
			VtPtPacket w;
			size_t n = hdr[i][0] == 0x02 ? 2 : 1;

			vt_pt_scan_init(&t, hdr[i], n, 0);
			g_assert_cmpint(vt_pt_scan_next(&t, &w), ==,
					-vt_pte_bad_packet);
			g_assert_cmpuint(w.offset, ==, 0);
		}
	}

	/* A lone 0x02, and "02 c3" (MNT's second byte), are -eos; an
	 * unknown third byte after "02 c3" is a bad opcode even when the
	 * packet would be cut off. */
	{
		static const uint8_t b[] = { 0x02, 0xc3, 0x88 };
		static const uint8_t c[] = { 0x02, 0xc3, 0x89 };
		VtPtScanner t;
		VtPtPacket w;
		size_t n;

		for (n = 1; n <= 3; n++) {
			vt_pt_scan_init(&t, b, n, 0);
			g_assert_cmpint(vt_pt_scan_next(&t, &w), ==,
					-vt_pte_eos);
		}
		vt_pt_scan_init(&t, c, 3, 0);
		g_assert_cmpint(vt_pt_scan_next(&t, &w), ==, -vt_pte_bad_opc);
	}

	/* TNT-64 without branch bits (payload 0 or just a stop bit at bit
	 * 0) is a bad packet in libipt; the first real bit is fine. */
	{
		static const uint8_t t0[] = { 0x02, 0xa3, 0, 0, 0, 0, 0, 0 };
		static const uint8_t t1[] = { 0x02, 0xa3, 1, 0, 0, 0, 0, 0 };
		static const uint8_t t2[] = { 0x02, 0xa3, 2, 0, 0, 0, 0, 0 };
		VtPtScanner t;
		VtPtPacket w;

		vt_pt_scan_init(&t, t0, 8, 0);
		g_assert_cmpint(vt_pt_scan_next(&t, &w), ==,
				-vt_pte_bad_packet);
		vt_pt_scan_init(&t, t1, 8, 0);
		g_assert_cmpint(vt_pt_scan_next(&t, &w), ==,
				-vt_pte_bad_packet);
		vt_pt_scan_init(&t, t2, 8, 0);
		g_assert_cmpint(vt_pt_scan_next(&t, &w), ==, 8);
		g_assert_cmpuint(w.u.tnt.bit_size, ==, 1);
		g_assert_cmpuint(w.u.tnt.payload, ==, 0);
		vt_pt_scan_init(&t, t0, 7, 0);
		g_assert_cmpint(vt_pt_scan_next(&t, &w), ==, -vt_pte_eos);
		/* and libipt agrees */
		{
			uint8_t lb[8 + SLACK];
			struct pt_packet_decoder *d;
			struct pt_packet l;

			memset(lb, 0, sizeof(lb));
			memcpy(lb, t1, 8);
			d = lib_alloc(lb, 8);
			pt_pkt_sync_set(d, 0);
			g_assert_cmpint(pt_pkt_next(d, &l, sizeof(l)), ==,
					-pte_bad_packet);
			pt_pkt_free_decoder(d);
		}
	}
}

/* ---------------------------------------------------------------------- */

static void test_cyc_limit(void)
{
	static const uint8_t v10a[] = { 0x07, 1, 1, 1, 1, 1, 1, 1, 1, 2 };
	static const uint8_t v10b[] = {
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0e,
	};
	VtPtScanner s;
	VtPtPacket v;
	uint8_t buf[64];
	struct pt_packet_decoder *d;
	struct pt_packet l;
	int k;

	/* perf decodes 10-byte CYC packets (0x2000000000000000 and
	 * 0xffffffffffffffff in perf test 76); libipt 2.0.5 stops at 9 bytes
	 * and reports a bad packet, and so do we. */
	for (k = 0; k < 2; k++) {
		const uint8_t *b = k ? v10b : v10a;

		memset(buf, 0, sizeof(buf));
		memcpy(buf, b, 10);
		vt_pt_scan_init(&s, buf, 10, 0);
		g_assert_cmpint(vt_pt_scan_next(&s, &v), ==,
				-vt_pte_bad_packet);
		g_assert_cmpuint(v.offset, ==, 0);
		vt_pt_scan_init(&s, buf, 9, 0);		/* cut: eos first */
		g_assert_cmpint(vt_pt_scan_next(&s, &v), ==, -vt_pte_eos);
		d = lib_alloc(buf, 10);
		pt_pkt_sync_set(d, 0);
		g_assert_cmpint(pt_pkt_next(d, &l, sizeof(l)), ==,
				-pte_bad_packet);
		pt_pkt_free_decoder(d);
	}

	/* The encoder writes such packets for values >= 2^61. */
	{
		struct pt_config cfg;
		struct pt_encoder *e;
		struct pt_packet p;

		pt_config_init(&cfg);
		cfg.begin = buf;
		cfg.end = buf + sizeof(buf);
		e = pt_alloc_encoder(&cfg);
		memset(&p, 0, sizeof(p));
		p.type = ppt_cyc;
		p.payload.cyc.value = 1ULL << 61;
		g_assert_cmpint(pt_enc_next(e, &p), ==, 10);
		pt_free_encoder(e);
		vt_pt_scan_init(&s, buf, 10, 0);
		g_assert_cmpint(vt_pt_scan_next(&s, &v), ==,
				-vt_pte_bad_packet);
	}
}

static void test_bip_context(void)
{
	static const uint8_t b[] = {
		0x02, 0x63, 0x80,		/* BBP, 4-byte items */
		0x0c, 1, 2, 3, 4,		/* BIP id 1 */
		0x59, 0x10,			/* MTC keeps the context */
		0x14, 5, 6, 7, 8,		/* BIP id 2 */
		0x02, 0x33,			/* BEP ends it */
		0x0c,				/* TNT-8 again */
		0x02, 0x63, 0x05,		/* BBP, 8-byte items */
		0x04, 1, 2, 3, 4, 5, 6, 7, 8,	/* BIP */
		0x06,				/* TNT-8 ends it */
		0x04,				/* TNT-8 */
	};
	static const VtPtPacketType want[] = {
		VT_PT_BBP, VT_PT_BIP, VT_PT_MTC, VT_PT_BIP, VT_PT_BEP,
		VT_PT_TNT_8, VT_PT_BBP, VT_PT_BIP, VT_PT_TNT_8, VT_PT_TNT_8,
	};
	VtPtScanner s;
	VtPtPacket v;
	size_t i;

	vt_pt_scan_init(&s, b, sizeof(b), 0);
	for (i = 0; i < G_N_ELEMENTS(want); i++) {
		g_assert_cmpint(vt_pt_scan_next(&s, &v), >, 0);
		g_assert_cmpint(v.type, ==, want[i]);
	}
	g_assert_cmpint(vt_pt_scan_next(&s, &v), ==, -vt_pte_eos);

	/* Which packets end the context (perf's intel_pt_upd_pkt_ctx):
	 * BBP(4), <packet>, then 0x0c is a BIP if the context survived. */
	{
		static const struct {
			uint8_t len, bytes[16], keeps;
		} k[] = {
			{ 1, { 0x00 }, 1 },				/* PAD */
			{ 8, { 0x19, 1, 2, 3, 4, 5, 6, 7 }, 1 },	/* TSC */
			{ 7, { 0x02, 0x73, 1, 2, 0, 3, 0 }, 1 },	/* TMA */
			{ 2, { 0x59, 1 }, 1 },				/* MTC */
			{ 3, { 0x3d, 1, 2 }, 1 },			/* FUP */
			{ 1, { 0x03 }, 1 },				/* CYC */
			{ 2, { 0x07, 0x02 }, 1 },			/* CYC */
			{ 4, { 0x02, 0x03, 9, 0 }, 1 },			/* CBR */
			{ 11, { 0x02, 0xc3, 0x88 }, 1 },		/* MNT */
			{ 2, { 0x02, 0x62 }, 1 },			/* EXSTOP */
			{ 2, { 0x02, 0xe2 }, 1 },			/* EXSTOP */
			{ 4, { 0x02, 0x22, 0, 0 }, 1 },			/* PWRE */
			{ 7, { 0x02, 0xa2 }, 1 },			/* PWRX */
			{ 1, { 0x06 }, 0 },				/* TNT */
			{ 8, { 0x02, 0xa3, 2 }, 0 },			/* TNT */
			{ 3, { 0x2d, 1, 2 }, 0 },			/* TIP */
			{ 1, { 0x11 }, 0 },				/* PGE */
			{ 1, { 0x01 }, 0 },				/* PGD */
			{ 2, { 0x99, 0x01 }, 0 },			/* MODE */
			{ 2, { 0x99, 0x20 }, 0 },			/* MODE */
			{ 8, { 0x02, 0x43 }, 0 },			/* PIP */
			{ 2, { 0x02, 0xf3 }, 0 },			/* OVF */
			{ 7, { 0x02, 0xc8 }, 0 },			/* VMCS */
			{ 2, { 0x02, 0x83 }, 0 },			/* STOP */
			{ 16, { 0x02, 0x82, 0x02, 0x82, 0x02, 0x82, 0x02,
				0x82, 0x02, 0x82, 0x02, 0x82, 0x02, 0x82,
				0x02, 0x82 }, 0 },			/* PSB */
			{ 2, { 0x02, 0x23 }, 0 },			/* PSBEND */
			{ 6, { 0x02, 0x12 }, 0 },			/* PTW */
			{ 10, { 0x02, 0xc2 }, 0 },			/* MWAIT */
			{ 2, { 0x02, 0x33 }, 0 },			/* BEP */
			{ 4, { 0x02, 0x13 }, 0 },			/* CFE */
			{ 11, { 0x02, 0x53 }, 0 },			/* EVD */
		};
		uint8_t buf[64];

		for (i = 0; i < G_N_ELEMENTS(k); i++) {
			size_t n;

			memset(buf, 0, sizeof(buf));
			buf[0] = 0x02;
			buf[1] = 0x63;
			buf[2] = 0x80;
			memcpy(buf + 3, k[i].bytes, k[i].len);
			n = 3 + k[i].len;
			buf[n] = 0x0c;
			vt_pt_scan_init(&s, buf, sizeof(buf), 0);
			g_assert_cmpint(vt_pt_scan_next(&s, &v), ==, 3);
			g_assert_cmpint(vt_pt_scan_next(&s, &v), ==,
					k[i].len);
			g_assert_cmpint(vt_pt_scan_next(&s, &v), >, 0);
			if (v.type != (k[i].keeps ? VT_PT_BIP : VT_PT_TNT_8))
				g_error("BIP context after %02x %02x: %s", k[i].bytes[0],
					k[i].bytes[1], vt_pt_packet_name(v.type));
		}
	}

	/* Only bytes with bits 2:0 = 100b are BIPs in the context. */
	for (i = 0; i < 256; i++) {
		uint8_t buf[32] = { 0x02, 0x63, 0x00 };

		buf[3] = (uint8_t)i;
		vt_pt_scan_init(&s, buf, sizeof(buf), 0);
		g_assert_cmpint(vt_pt_scan_next(&s, &v), ==, 3);
		if (vt_pt_scan_next(&s, &v) <= 0)
			continue;
		if ((i & 7) == 4)
			g_assert_cmpint(v.type, ==, VT_PT_BIP);
		else
			g_assert_cmpint(v.type, !=, VT_PT_BIP);
	}

	/* A resync drops the context. */
	vt_pt_scan_init(&s, b, 3, 0);
	g_assert_cmpint(vt_pt_scan_next(&s, &v), ==, 3);
	g_assert_cmpuint(s.bip_ctx, ==, 4);
	g_assert_cmpint(vt_pt_scan_sync_forward(&s, 0), ==, -vt_pte_nosync);
	g_assert_cmpuint(s.bip_ctx, ==, 0);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);

	g_test_add_func("/pt-scan/encoder", test_encoder);
	g_test_add_func("/pt-scan/random", test_random);
	g_test_add_func("/pt-scan/sync", test_sync);
	g_test_add_func("/pt-scan/last-ip", test_last_ip);
	g_test_add_func("/pt-scan/desc", test_desc);
	g_test_add_func("/pt-scan/eos", test_eos);
	g_test_add_func("/pt-scan/cyc-limit", test_cyc_limit);
	g_test_add_func("/pt-scan/bip-context", test_bip_context);

	return g_test_run();
}
