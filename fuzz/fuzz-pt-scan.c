/* fuzz-pt-scan.c - libFuzzer target for the Intel PT packet scanner.
 *
 * Scans the input like a consumer would (sync forward, next until -eos,
 * resync after errors) and checks, aborting on any violation:
 *   - the scanner's own invariants (bounds, sizes, offsets, no advance on
 *     errors, descriptions format);
 *   - the inline fast path and vt_pt_scan_next agree;
 *   - packet by packet agreement with libipt's packet decoder (offsets,
 *     sizes, payloads, error kinds, resync points), like tests/test-pt-scan;
 *   - the reconstructed IPs against an independent last-IP model;
 *   - vt_pt_scan_skip_flow/_flow2, with every implementation available
 *     (scalar, SSE2, AVX2), stop where walking with vt_pt_scan_next says,
 *     with the same MTC sums, PIP notes and last-IP state.
 *
 * Build: clang -fsanitize=fuzzer,address,undefined -Isrc \
 *        src/pt/pt-scan.c fuzz/fuzz-pt-scan.c -lipt
 * Without libFuzzer, link fuzz/standalone.c for a main() that runs the
 * files named on the command line.
 */
#include "src/pt/pt-scan.h"

#include <intel-pt.h>

#include "tests/ipt-unknown.h"

#define XC_FAIL(...) do { fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); abort(); } while (0)
#define XC_EQ(a, b) do { if ((uint64_t)(a) != (uint64_t)(b)) XC_FAIL("%s != %s", #a, #b); } while (0)
#include "tests/pt-crosscheck.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLACK 32	/* libipt 2.0.5 reads past config.end (fixed in 2.0.6) */

#define CHECK(cond)							\
	do {								\
		if (!(cond)) {						\
			fprintf(stderr, "%s:%d: check failed: %s\n",	\
				__FILE__, __LINE__, #cond);		\
			abort();					\
		}							\
	} while (0)

#define unknown_cb vt_ipt_unknown_cb

#define lib_code vt_ipt_code

static int same_packet(const VtPtPacket *a,
		       const VtPtPacket *b)
{
	if (a->type != b->type || a->size != b->size || a->offset != b->offset)
		return 0;
	switch (a->type) {
	case VT_PT_TIP:
	case VT_PT_TIP_PGE:
	case VT_PT_TIP_PGD:
	case VT_PT_FUP:
		return a->u.ip.ipc == b->u.ip.ipc && a->u.ip.raw == b->u.ip.raw &&
		       a->u.ip.ip == b->u.ip.ip &&
		       a->u.ip.suppressed == b->u.ip.suppressed;
	case VT_PT_TNT_8:
	case VT_PT_TNT_64:
		return a->u.tnt.payload == b->u.tnt.payload &&
		       a->u.tnt.bit_size == b->u.tnt.bit_size;
	case VT_PT_TSC:
	case VT_PT_CYC:
	case VT_PT_VMCS:
		return a->u.tsc == b->u.tsc;
	case VT_PT_MTC:
		return a->u.mtc == b->u.mtc;
	case VT_PT_CBR:
		return a->u.cbr == b->u.cbr;
	case VT_PT_MODE_EXEC:
	case VT_PT_MODE_TSX:
		return a->u.mode.bits == b->u.mode.bits;
	case VT_PT_TMA:
		return a->u.tma.ctc == b->u.tma.ctc && a->u.tma.fc == b->u.tma.fc;
	case VT_PT_PIP:
		return a->u.pip.cr3 == b->u.pip.cr3 && a->u.pip.nr == b->u.pip.nr;
	case VT_PT_PAD:
	case VT_PT_PSB:
	case VT_PT_PSBEND:
	case VT_PT_OVF:
	case VT_PT_STOP:
		return 1;
	default:
		return a->u.misc.payload == b->u.misc.payload &&
		       a->u.misc.extra == b->u.misc.extra;
	}
}



/* Scan alone; check invariants and inline/out-of-line agreement. */
static void scan_self(const uint8_t *buf, size_t len)
{
	VtPtScanner s, t;
	VtPtPacket v, w;
	uint64_t last_err = 0;
	int have_err = 0, r, q;
	char desc[160];

	vt_pt_scan_init(&s, buf, len, 0x1000);
	vt_pt_scan_init(&t, buf, len, 0x1000);
	r = vt_pt_scan_sync_forward(&s, 1);
	q = vt_pt_scan_sync_forward(&t, 1);
	CHECK(r == q && s.pos == t.pos);
	if (r < 0) {
		CHECK(r == -vt_pte_nosync && s.pos == s.end);
		return;
	}
	for (;;) {
		const uint8_t *before = s.pos;

		CHECK(s.pos >= s.begin && s.pos <= s.end);
		r = vt_pt_scan_next(&s, &v);
		q = vt_pt_scan_next_inline(&t, &w);
		CHECK(r == q);
		CHECK(s.pos == t.pos && s.last_ip == t.last_ip &&
		      s.have_last_ip == t.have_last_ip &&
		      s.bip_ctx == t.bip_ctx);
		CHECK(v.offset == 0x1000 + (uint64_t)(before - buf));
		CHECK(w.offset == v.offset);
		if (r > 0) {
			CHECK(same_packet(&v, &w));
			CHECK(r == v.size && v.size <= 16);
			CHECK(s.pos == before + r && s.pos <= s.end);
			CHECK(v.type > VT_PT_BAD && v.type < VT_PT_NTYPES);
			CHECK(vt_pt_packet_desc(&v, desc, sizeof(desc)) > 0);
			CHECK(strlen(desc) < sizeof(desc) - 1);
			continue;
		}
		CHECK(s.pos == before);
		CHECK(r == -vt_pte_eos || r == -vt_pte_bad_opc ||
		      r == -vt_pte_bad_packet);
		CHECK(vt_pt_errstr(r) != NULL);
		if (r == -vt_pte_eos)
			break;
		/* resync: never back before the previous failure */
		if (have_err)
			CHECK(v.offset > last_err);
		last_err = v.offset;
		have_err = 1;
		r = vt_pt_scan_sync_forward(&s, 0);
		q = vt_pt_scan_sync_forward(&t, 0);
		CHECK(r == q && s.pos == t.pos);
		if (r < 0) {
			CHECK(s.pos == s.end);
			break;
		}
		/* at most 15 bytes back, and the PSB reaches past it */
		CHECK(s.pos + 15 >= before);
		CHECK(s.pos != before);
	}
}

/* Skipping from some start offsets (the first 16, then 16 spread out),
 * alone and in pairs, with each implementation, against the reference
 * (computed once per offset: it is the slow part). */
static void skip_vs_scan(const uint8_t *buf, size_t len)
{
	size_t step = len / 16 + 1;

	for (size_t off = 0; off + 32 < len; off += off < 16 ? 1 : step) {
		int mode = (int)(off % 3), ip, ip2;
		int pgd = mode && ((off / 3) & 1);	/* TIP.PGD stretches too */
		VtPtMtcAcc want = { .last = 0x42, .skip_pip = mode == 2, .pip_nr = 5, .skip_pgd = pgd };
		VtPtMtcAcc w2 = { .last = 7, .skip_pip = 1 };
		const uint8_t *stop = skip_reference(buf, len, buf + off, mode | (pgd ? 8 : 0), &want, &ip);
		const uint8_t *from2 = buf + (len - 1 - off) / 2;
		const uint8_t *stop2 = skip_reference(buf, len, from2, 2, &w2, &ip2);

		for (int impl = VT_PT_SKIP_SCALAR; impl <= VT_PT_SKIP_AVX2; impl++) {
			VtPtMtcAcc got = { .last = 0x42, .skip_pip = mode == 2, .pip_nr = 5, .skip_pgd = pgd };
			VtPtMtcAcc g2 = { .last = 7, .skip_pip = 1 };
			VtPtScanner s, t;
			int st;

			if (vt_pt_scan_skip_select((VtPtSkipImpl)impl) < 0)
				continue;
			vt_pt_scan_init(&s, buf, len, 0);
			s.pos = buf + off;
			s.have_last_ip = 1;
			vt_pt_scan_skip_flow(&s, mode ? &got : NULL);
			CHECK(s.pos == stop);
			CHECK(s.have_last_ip == !ip);
			CHECK(got.ticks == want.ticks && got.count == want.count && got.last == want.last);
			CHECK(got.pip_count == want.pip_count && got.pip_nr == want.pip_nr);
			CHECK(got.pgd_count == want.pgd_count);

			/* a pair: this offset and the first half's mirror */
			if (len - (size_t)(from2 - buf) < 32)
				continue;	/* then _flow2 stops without moving */
			vt_pt_scan_init(&s, buf, len, 0);
			vt_pt_scan_init(&t, buf, len, 0);
			s.pos = buf + off;
			t.pos = from2;
			s.have_last_ip = t.have_last_ip = 1;
			got = (VtPtMtcAcc){ .last = 0x42, .skip_pip = mode == 2, .pip_nr = 5, .skip_pgd = pgd };
			st = vt_pt_scan_skip_flow2(&s, mode ? &got : NULL, &t, &g2);
			CHECK(st != 0 && s.pos <= stop && t.pos <= stop2);
			if (st & 1)
				CHECK(s.pos == stop && got.ticks == want.ticks && got.pip_count == want.pip_count &&
				      got.pgd_count == want.pgd_count && s.have_last_ip == !ip);
			if (st & 2)
				CHECK(t.pos == stop2 && g2.ticks == w2.ticks && g2.pip_count == w2.pip_count &&
				      t.have_last_ip == !ip2);
		}
	}
	CHECK(vt_pt_scan_skip_select(VT_PT_SKIP_AUTO) == 0);
}

/* Packet-by-packet comparison with libipt (as tests/test-pt-scan.c). */
static void scan_vs_libipt(uint8_t *buf, size_t len)
{
	struct pt_config cfg;
	struct pt_packet_decoder *d;
	struct xc_stats st = { 0 };

	pt_config_init(&cfg);
	cfg.begin = buf;
	cfg.end = buf + len;
	cfg.decode.callback = unknown_cb;
	d = pt_pkt_alloc_decoder(&cfg);
	CHECK(d);
	xc_run(d, buf, len, len & 1, &st);
	pt_pkt_free_decoder(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned int align = (unsigned int)(size % 8);
	uint8_t *mem;

	if (size > (1u << 20))
		return 0;
	/* An exact-size copy, so that ASan sees any read past the end. */
	mem = calloc(size ? size : 1, 1);
	CHECK(mem);
	if (size)
		memcpy(mem, data, size);
	scan_self(mem, size);
	skip_vs_scan(mem, size);
	free(mem);

	/* libipt needs slack after the end; vary the alignment, which its
	 * PSB search depends on (ours must not). */
	mem = calloc(1, size + SLACK + 8);
	CHECK(mem);
	if (size)
		memcpy(mem + align, data, size);
	scan_vs_libipt(mem + align, size);
	free(mem);
	return 0;
}
