/* test-qry.c - our query decoder (src/decode/qry.c) against libipt 2.0.5's
 * (pt_qry_*) on random packet streams: every packet kind libipt's encoder
 * writes, alone and in the sequences real traces have (VM entries and
 * exits, enables and disables, PSB+ with its status packets, overflows),
 * with random payloads and random bytes corrupted, under configurations
 * with and without the errata qry.c handles and with and without the
 * timing parameters; bytes libipt's encoder does not write go in as raw
 * bytes (packets only the decode callback knows, SKD007's CYC before an
 * OVF).  A driver asks both decoders the same random
 * questions - events while one is pending, conditional and indirect
 * branches, and now and then the wrong one - and every answer must be the
 * same: status, direction, target, the whole event, time, offsets. */
#include "config.h"

#include <string.h>
#include <intel-pt.h>

#include "src/decode/internal.h"

#define BUF_SIZE (64 * 1024)
#define STEPS 3000

typedef struct {
	struct pt_encoder *enc;
	guint8 *buf;                     /* the encoder's */
	GRand *rand;
	guint64 ip;                      /* the last IP written (for compressed ones) */
	guint64 tsc;                     /* the last TSC written */
	gboolean full;                   /* the buffer is full */
} Gen;

typedef struct {
	guint answers, events, branches, errors, resyncs;
	guint event_types[ptev_mnt + 1];
	guint codes[pte_bad_retcomp + 1];   /* errors answered, by code */
} Seen;

/* ------------------------------------------------------------ streams */
static void put(Gen *g, struct pt_packet p)
{
	if (!g->full && pt_enc_next(g->enc, &p) < 0) {
		uint64_t off = 0;

		(void)pt_enc_get_offset(g->enc, &off);
		if (off + 64 > BUF_SIZE)
			g->full = TRUE;  /* (else a packet the encoder refused: left out) */
	}
}

/* n raw bytes (written as PADs, then overwritten) */
static void put_raw(Gen *g, const guint8 *bytes, gsize n)
{
	uint64_t off = 0;

	(void)pt_enc_get_offset(g->enc, &off);
	if (g->full || off + n + 64 > BUF_SIZE) {
		g->full = TRUE;
		return;
	}
	for (gsize i = 0; i < n; i++)
		put(g, (struct pt_packet){ .type = ppt_pad });
	memcpy(g->buf + off, bytes, n);
}

static guint64 rnd64(Gen *g)
{
	return (guint64)g_rand_int(g->rand) << 32 | g_rand_int(g->rand);
}

static void put_ip(Gen *g, enum pt_packet_type type)
{
	static const enum pt_ip_compression ipcs[] = { pt_ipc_suppressed, pt_ipc_update_16, pt_ipc_update_32,
						       pt_ipc_sext_48, pt_ipc_update_48, pt_ipc_full };
	struct pt_packet p = { .type = type };
	guint r = g_rand_int_range(g->rand, 0, 20);

	/* mostly sign-extended kernel addresses, near the last one */
	p.payload.ip.ipc = r < 12 ? pt_ipc_sext_48 : ipcs[r % G_N_ELEMENTS(ipcs)];
	if (g_rand_int_range(g->rand, 0, 4))
		g->ip = (g->ip & ~0xfffffULL) | (rnd64(g) & 0xfffff);
	else
		g->ip = rnd64(g);
	if (p.payload.ip.ipc == pt_ipc_sext_48)
		g->ip = g_rand_boolean(g->rand) ? (g->ip | 0xffff800000000000ULL) : (g->ip & 0x00007fffffffffffULL);
	p.payload.ip.ip = g->ip;
	put(g, p);
}

static void put_tnt(Gen *g)
{
	struct pt_packet p = { .type = g_rand_boolean(g->rand) ? ppt_tnt_8 : ppt_tnt_64 };
	guint n = p.type == ppt_tnt_8 ? g_rand_int_range(g->rand, 1, 7) : g_rand_int_range(g->rand, 1, 48);

	p.payload.tnt.bit_size = (uint8_t)n;
	p.payload.tnt.payload = rnd64(g) & ((1ULL << n) - 1);
	put(g, p);
}

static void put_pip(Gen *g, gboolean nr)
{
	struct pt_packet p = { .type = ppt_pip };

	p.payload.pip.cr3 = rnd64(g) & 0xfffffffff000ULL;
	p.payload.pip.nr = nr;
	put(g, p);
}

static void put_vmcs(Gen *g)
{
	struct pt_packet p = { .type = ppt_vmcs };

	p.payload.vmcs.base = rnd64(g) & 0xffffffffff000ULL;
	put(g, p);
}

static void put_mode(Gen *g, gboolean tsx)
{
	struct pt_packet p = { .type = ppt_mode };

	if (tsx) {
		p.payload.mode.leaf = pt_mol_tsx;
		p.payload.mode.bits.tsx.intx = g_rand_boolean(g->rand);
		p.payload.mode.bits.tsx.abrt = g_rand_boolean(g->rand);
	} else {
		p.payload.mode.leaf = pt_mol_exec;
		p.payload.mode.bits.exec = pt_set_exec_mode(g_rand_int_range(g->rand, 0, 6) ? ptem_64bit : ptem_32bit);
	}
	put(g, p);
}

/* a timing packet: TSC (and TMA), MTC, CYC or CBR */
static void put_timing(Gen *g)
{
	struct pt_packet p = { .type = ppt_pad };

	switch (g_rand_int_range(g->rand, 0, 8)) {
	case 0:
		p.type = ppt_tsc;
		g->tsc += g_rand_int_range(g->rand, 0, 100000);
		p.payload.tsc.tsc = g_rand_int_range(g->rand, 0, 50) ? g->tsc : rnd64(g) & 0xffffffffffffffULL;
		if (g_rand_int_range(g->rand, 0, 12))   /* (now and then a TMA without its TSC) */
			put(g, p);
		if (g_rand_int_range(g->rand, 0, 3)) {
			p.type = ppt_tma;
			p.payload.tma.ctc = (uint16_t)g_rand_int(g->rand);
			p.payload.tma.fc = (uint16_t)g_rand_int_range(g->rand, 0, 512);
			put(g, p);
		}
		return;
	case 1: case 2: case 3:
		p.type = ppt_mtc;
		p.payload.mtc.ctc = (uint8_t)g_rand_int(g->rand);
		break;
	case 4: case 5: case 6:
		p.type = ppt_cyc;
		p.payload.cyc.value = g_rand_int_range(g->rand, 0, 8) ? (guint64)g_rand_int_range(g->rand, 1, 4096) : rnd64(g) >> 20;
		break;
	default:
		p.type = ppt_cbr;
		p.payload.cbr.ratio = (uint8_t)g_rand_int_range(g->rand, 0, 60);
		break;
	}
	put(g, p);
}

static void put_psb_plus(Gen *g)
{
	/* (now and then more status events than libipt queues: 6) */
	guint n = g_rand_int_range(g->rand, 0, 10) ? g_rand_int_range(g->rand, 0, 7) : g_rand_int_range(g->rand, 6, 12);

	put(g, (struct pt_packet){ .type = ppt_psb });
	for (guint i = 0; i < n; i++) {
		switch (g_rand_int_range(g->rand, 0, 9)) {
		case 0: case 1: put_timing(g); break;
		case 2: put_pip(g, g_rand_boolean(g->rand)); break;
		case 3: put_vmcs(g); break;
		case 4: put_mode(g, g_rand_int_range(g->rand, 0, 5) == 0); break;
		case 5: case 6: put_ip(g, ppt_fup); break;
		case 7: put(g, (struct pt_packet){ .type = ppt_mnt, .payload.mnt.payload = rnd64(g) }); break;
		default: put(g, (struct pt_packet){ .type = ppt_pad }); break;
		}
	}
	if (g_rand_int_range(g->rand, 0, 30))
		put(g, (struct pt_packet){ .type = ppt_psbend });
}

static void put_power(Gen *g)
{
	struct pt_packet p = { .type = ppt_pad };

	switch (g_rand_int_range(g->rand, 0, 7)) {
	case 0:
		p.type = ppt_exstop;
		p.payload.exstop.ip = g_rand_boolean(g->rand);
		break;
	case 1:
		p.type = ppt_mwait;
		p.payload.mwait.hints = g_rand_int(g->rand);
		p.payload.mwait.ext = g_rand_int_range(g->rand, 0, 2);
		break;
	case 2:
		p.type = ppt_pwre;
		p.payload.pwre.state = (uint8_t)g_rand_int_range(g->rand, 0, 16);
		p.payload.pwre.sub_state = (uint8_t)g_rand_int_range(g->rand, 0, 16);
		p.payload.pwre.hw = g_rand_boolean(g->rand);
		break;
	case 3:
		p.type = ppt_pwrx;
		p.payload.pwrx.last = (uint8_t)g_rand_int_range(g->rand, 0, 16);
		p.payload.pwrx.deepest = (uint8_t)g_rand_int_range(g->rand, 0, 16);
		p.payload.pwrx.interrupt = g_rand_boolean(g->rand);
		p.payload.pwrx.store = g_rand_boolean(g->rand);
		p.payload.pwrx.autonomous = g_rand_boolean(g->rand);
		break;
	case 4:
		p.type = ppt_ptw;
		p.payload.ptw.plc = (uint8_t)g_rand_int_range(g->rand, 0, 2);
		p.payload.ptw.ip = g_rand_boolean(g->rand);
		p.payload.ptw.payload = rnd64(g);
		break;
	case 5:
		p.type = ppt_stop;
		break;
	default:
		p.type = ppt_mnt;
		p.payload.mnt.payload = rnd64(g);
		break;
	}
	put(g, p);
	if (g_rand_int_range(g->rand, 0, 3))
		put_ip(g, ppt_fup);      /* (the IP of EXSTOP, MWAIT, PTW) */
}

/* One piece of trace: what real traces have, or any packet. */
static void put_piece(Gen *g)
{
	guint r = g_rand_int_range(g->rand, 0, 100);

	if (r < 30) {
		put_tnt(g);
	} else if (r < 42) {
		put_ip(g, ppt_tip);
	} else if (r < 50) {
		put_timing(g);
	} else if (r < 56) {                       /* a VM exit */
		put_ip(g, ppt_fup);
		put_pip(g, FALSE);
		if (g_rand_boolean(g->rand))
			put_vmcs(g);
		put_ip(g, ppt_tip);
	} else if (r < 62) {                       /* a VM entry */
		put_pip(g, TRUE);
		if (g_rand_boolean(g->rand))
			put_mode(g, FALSE);
		put_ip(g, ppt_tip);
	} else if (r < 66) {                       /* disable, enable */
		if (g_rand_boolean(g->rand))
			put_ip(g, ppt_fup);
		put_ip(g, ppt_tip_pgd);
		if (g_rand_boolean(g->rand))
			put_pip(g, g_rand_boolean(g->rand));
		if (g_rand_boolean(g->rand))
			put_mode(g, FALSE);
		put_ip(g, ppt_tip_pge);
	} else if (r < 70) {
		put_psb_plus(g);
	} else if (r < 73) {                       /* an overflow */
		put(g, (struct pt_packet){ .type = ppt_ovf });
		if (g_rand_int_range(g->rand, 0, 3))
			put_timing(g);
		if (g_rand_int_range(g->rand, 0, 4))
			put_ip(g, g_rand_int_range(g->rand, 0, 4) ? ppt_fup : ppt_tip_pge);
	} else if (r < 76) {
		put_power(g);
	} else if (r < 79) {
		put_mode(g, g_rand_boolean(g->rand));
		put_ip(g, g_rand_boolean(g->rand) ? ppt_fup : ppt_tip);
	} else if (r < 82) {
		put_pip(g, g_rand_boolean(g->rand));
	} else if (r < 84) {
		put_vmcs(g);
	} else if (r < 86) {
		put_ip(g, ppt_fup);
	} else if (r < 88) {                       /* what only the decode callback knows */
		static const guint8 cfe[4] = { 0x02, 0x13, 0x81, 0x00 }, bad[2] = { 0x02, 0xee };
		guint8 evd[11] = { 0x02, 0x53 };

		switch (g_rand_int_range(g->rand, 0, 4)) {
		case 0: put_raw(g, cfe, sizeof(cfe)); break;
		case 1: put_raw(g, evd, sizeof(evd)); break;
		case 2: put_raw(g, bad, sizeof(bad)); break;
		default:                           /* SKD007: CYC, OVF */
			put_raw(g, (const guint8 *)"\x07", 1);
			put(g, (struct pt_packet){ .type = ppt_ovf });
			put_ip(g, ppt_fup);
			break;
		}
	} else if (r < 90) {
		put_ip(g, g_rand_boolean(g->rand) ? ppt_tip_pge : ppt_tip_pgd);
	} else {
		put(g, (struct pt_packet){ .type = ppt_pad });
	}
}

/* A random stream into buf (BUF_SIZE + 16 bytes, the rest zero): its length. */
static gsize gen_stream(guint32 seed, guint8 *buf, struct pt_config *cfg)
{
	Gen g = { .rand = g_rand_new_with_seed(seed), .ip = 0xffffffff81000000ULL, .buf = buf, .tsc = 1000000 };
	guint pieces = g_rand_int_range(g.rand, 1, 400), flips;
	uint64_t len = 0;

	memset(buf, 0, BUF_SIZE + 16);
	pt_config_init(cfg);
	cfg->begin = buf;
	cfg->end = buf + BUF_SIZE;
	g.enc = pt_alloc_encoder(cfg);
	g_assert_nonnull(g.enc);
	if (g_rand_int_range(g.rand, 0, 8))      /* (now and then, packets before the first PSB) */
		put_psb_plus(&g);
	for (guint i = 0; i < pieces && !g.full; i++)
		put_piece(&g);
	g_assert_cmpint(pt_enc_get_offset(g.enc, &len), >=, 0);
	pt_free_encoder(g.enc);
	/* bytes corrupted in a third of the streams */
	flips = g_rand_int_range(g.rand, 0, 3) ? 0 : g_rand_int_range(g.rand, 1, 8);
	for (guint i = 0; i < flips && len; i++)
		buf[g_rand_int_range(g.rand, 0, (gint32)len)] = (guint8)g_rand_int(g.rand);
	if (len && g_rand_int_range(g.rand, 0, 6) == 0)   /* cut */
		len = g_rand_int_range(g.rand, 0, (gint32)len) + 1;
	/* the configuration */
	cfg->end = buf + len;
	cfg->errata.bdm70 = g_rand_boolean(g.rand);
	cfg->errata.skd007 = g_rand_boolean(g.rand);
	cfg->errata.skl168 = g_rand_boolean(g.rand);
	cfg->errata.skz84 = g_rand_boolean(g.rand);
	if (g_rand_int_range(g.rand, 0, 4))
		cfg->decode.callback = vt_decode_unknown_packet;   /* (as queue.c decodes) */
	if (g_rand_int_range(g.rand, 0, 4)) {
		cfg->cpuid_0x15_eax = g_rand_boolean(g.rand) ? 2 : 1;
		cfg->cpuid_0x15_ebx = g_rand_boolean(g.rand) ? 168 : 100;
	}
	cfg->mtc_freq = (uint8_t)(g_rand_int_range(g.rand, 0, 4) ? 3 : g_rand_int_range(g.rand, 0, 16));
	cfg->nom_freq = (uint8_t)(g_rand_boolean(g.rand) ? 0 : g_rand_int_range(g.rand, 1, 60));
	g_rand_free(g.rand);
	return (gsize)len;
}

/* ------------------------------------------------------------- driver */
typedef struct {
	guint32 seed;
	guint step;
	VtQry *own;
	struct pt_query_decoder *lib;
} Pair;

static void same(const Pair *p, const char *what, gint64 ours, gint64 libs)
{
	if (ours != libs)
		g_error("seed %u step %u: %s: ours %" G_GINT64_FORMAT " (%#" G_GINT64_MODIFIER "x), libipt's %"
			G_GINT64_FORMAT " (%#" G_GINT64_MODIFIER "x)", p->seed, p->step, what, ours, ours, libs, libs);
}

/* time and offsets after each answer */
static void same_state(const Pair *p)
{
	uint64_t a = 0, b = 0;
	uint32_t ma = 0, mb = 0, ca = 0, cb = 0;

	same(p, "time status", vt_qry_time(p->own, &a, &ma, &ca), pt_qry_time(p->lib, &b, &mb, &cb));
	same(p, "time", (gint64)a, (gint64)b);
	same(p, "lost mtc", ma, mb);
	same(p, "lost cyc", ca, cb);
	a = b = 0;
	same(p, "offset status", vt_qry_get_offset(p->own, &a), pt_qry_get_offset(p->lib, &b));
	same(p, "offset", (gint64)a, (gint64)b);
	a = b = 0;
	same(p, "sync offset status", vt_qry_get_sync_offset(p->own, &a), pt_qry_get_sync_offset(p->lib, &b));
	same(p, "sync offset", (gint64)a, (gint64)b);
}

static int ask_sync(Pair *p)
{
	uint64_t a = 1, b = 1;
	int status = vt_qry_sync_forward(p->own, &a);

	same(p, "sync_forward", status, pt_qry_sync_forward(p->lib, &b));
	same(p, "sync ip", (gint64)a, (gint64)b);
	return status;
}

static int ask_event(Pair *p, Seen *seen)
{
	struct pt_event a, b;
	int status;

	memset(&a, 0x5a, sizeof(a));     /* (fields an event leaves alone stay as they were) */
	memset(&b, 0x5a, sizeof(b));
	status = vt_qry_event(p->own, &a);
	same(p, "event", status, pt_qry_event(p->lib, &b, sizeof(b)));
	if (status >= 0) {
		same(p, "event type", a.type, b.type);
		if (memcmp(&a, &b, sizeof(a)))
			g_error("seed %u step %u: event %d: fields differ", p->seed, p->step, a.type);
		seen->events++;
		if ((guint)a.type < G_N_ELEMENTS(seen->event_types))
			seen->event_types[a.type]++;
	}
	return status;
}

static int ask_cond(Pair *p, Seen *seen)
{
	int a = 7, b = 7, status = vt_qry_cond_branch(p->own, &a);

	same(p, "cond_branch", status, pt_qry_cond_branch(p->lib, &b));
	same(p, "taken", a, b);
	seen->branches += status >= 0;
	return status;
}

static int ask_indirect(Pair *p, Seen *seen)
{
	uint64_t a = 3, b = 3;
	int status = vt_qry_indirect_branch(p->own, &a);

	same(p, "indirect_branch", status, pt_qry_indirect_branch(p->lib, &b));
	same(p, "target", (gint64)a, (gint64)b);
	seen->branches += status >= 0;
	return status;
}

/* Both decoders through a stream; the questions random (seeded). */
static void drive(guint32 seed, const guint8 *buf, const struct pt_config *cfg, Seen *seen)
{
	GRand *r = g_rand_new_with_seed(seed ^ 0x9e3779b9u);
	Pair p = { .seed = seed, .own = vt_qry_new(cfg), .lib = pt_qry_alloc_decoder(cfg) };
	int status;

	(void)buf;
	g_assert_nonnull(p.own);
	g_assert_nonnull(p.lib);
	status = ask_sync(&p);
	for (p.step = 0; p.step < STEPS; p.step++) {
		guint q = g_rand_int_range(r, 0, 100);

		same_state(&p);
		if (status < 0) {
			seen->errors += status != -pte_eos;
			if ((guint)-status < G_N_ELEMENTS(seen->codes))
				seen->codes[-status]++;
			if (status == -pte_eos && g_rand_int_range(r, 0, 4))
				break;
			seen->resyncs++;
			status = ask_sync(&p);
			if (status == -pte_eos)
				break;
			continue;
		}
		seen->answers++;
		if ((status & pts_event_pending) ? q < 90 : q < 8) {
			status = ask_event(&p, seen);
		} else if (q < 70) {
			status = ask_cond(&p, seen);
			if (status == -pte_bad_query && g_rand_int_range(r, 0, 8))
				status = ask_indirect(&p, seen);
		} else {
			status = ask_indirect(&p, seen);
			if (status == -pte_bad_query && g_rand_int_range(r, 0, 8))
				status = ask_cond(&p, seen);
		}
	}
	vt_qry_free(p.own);
	pt_qry_free_decoder(p.lib);
	g_rand_free(r);
}

static void test_random_streams(void)
{
	guint8 *buf = g_malloc(BUF_SIZE + 16);
	static const guint want_codes[] = { pte_bad_opc, pte_bad_packet, pte_bad_context, pte_bad_query,
					    pte_nomem, pte_noip, pte_ip_suppressed };
	guint streams = g_test_slow() ? 200000 : 20000;
	Seen seen = { 0 };

	for (guint32 seed = 1; seed <= streams; seed++) {
		struct pt_config cfg;

		gen_stream(seed, buf, &cfg);
		drive(seed, buf, &cfg, &seen);
	}
	g_test_message("%u answers: %u branches, %u events, %u errors, %u resyncs", seen.answers, seen.branches,
		       seen.events, seen.errors, seen.resyncs);
	/* the streams reach what they are meant to */
	g_assert_cmpuint(seen.branches, >, 100000);
	g_assert_cmpuint(seen.errors, >, 1000);
	for (enum pt_event_type t = ptev_enabled; t <= ptev_mnt; t++) {
		if (t == ptev_tick || t == ptev_cbr)
			continue;        /* (no ticks asked for; CBR below) */
		if (!seen.event_types[t])
			g_error("no event of type %d in %u streams", t, streams);
	}
	g_assert_cmpuint(seen.event_types[ptev_cbr], >, 0);
	for (guint i = 0; i < G_N_ELEMENTS(seen.codes); i++)
		if (seen.codes[i])
			g_test_message("error %d (%s): %u", -(int)i, pt_errstr((enum pt_error_code)i), seen.codes[i]);
	/* and the errors of every kind a decoder's packets give */
	for (guint i = 0; i < G_N_ELEMENTS(want_codes); i++)
		if (!seen.codes[want_codes[i]])
			g_error("no error %d (%s) in %u streams", -(int)want_codes[i],
				pt_errstr((enum pt_error_code)want_codes[i]), streams);
	g_free(buf);
}

/* The CPUs whose OVF errata qry.c does not handle go to libipt's decoder. */
static void test_errata_refused(void)
{
	struct pt_config cfg;
	guint8 buf[32] = { 0 };
	VtQry *q;

	pt_config_init(&cfg);
	cfg.begin = buf;
	cfg.end = buf + 16;
	q = vt_qry_new(&cfg);
	g_assert_nonnull(q);
	vt_qry_free(q);
	cfg.errata.skd010 = 1;
	g_assert_null(vt_qry_new(&cfg));
	cfg.errata.skd010 = 0;
	cfg.errata.apl12 = 1;
	g_assert_null(vt_qry_new(&cfg));
	cfg.errata.apl12 = 0;
	cfg.errata.apl11 = 1;
	g_assert_null(vt_qry_new(&cfg));
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/qry/random-streams", test_random_streams);
	g_test_add_func("/qry/errata-refused", test_errata_refused);
	return g_test_run();
}
