/* qry.c - a query decoder of our own: what walk.c asked of libipt 2.0.5's
 * (pt_qry_*), the same answers to the same questions - statuses, branch
 * directions and targets, events in the same order with the same fields,
 * the same time model (TSC, TMA, MTC, CYC with calibration, as 2.0.5 keeps
 * them) and the same errors at the same offsets - without a call through
 * a function table per packet or the checks libipt's API makes on every
 * query: a conditional branch whose bit is in the cache is a shift.
 *
 * The rules are libipt's, taken as facts (its decoder is the reference:
 * VMTRACE_DECODER=qry uses it, VMTRACE_QRY_CHECK=1 runs both side by side
 * and aborts on the first answer that differs - tests/t0149 runs the
 * decoding tests' recordings so):
 *  - The decoder reads ahead to the next packet that answers a query (TNT,
 *    TIP) or makes an event; status packets on the way apply at once.
 *  - Events wait for the packet they bind to: a FUP's asynchronous branch,
 *    a PIP's or VMCS's asynchronous paging, a MODE.Exec's mode wait for the
 *    TIP (or TIP.PGE, TIP.PGD); a TSX, EXSTOP, MWAIT or PTWRITE with an IP
 *    for the FUP; a PSB+'s status for its PSBEND.  A packet with more than
 *    one event bound to it is read again until all are out.
 *  - pts_event_pending and pts_eos only once the TNT cache is empty.
 *  - An OVF resets the decoder but for its time; tracing goes on at the
 *    FUP after it when one follows before any packet that says tracing is
 *    off (else the overflow event has no IP).
 *  - libipt's errata here: BDM70 (a PSB+'s FUP before TIP.PGE while off),
 *    SKD007 (a CYC before OVF), SKL168 (calibration), SKZ84 (TMA).
 * Not here: the errata SKD010, APL11 and APL12 (how an OVF ends on some
 * Skylake client and Goldmont parts: a thousand lines of libipt's).
 * vt_qry_new() returns NULL for a CPU that has them (and for a config
 * libipt would refuse, or an MTC period over 15, which no CPU has: its
 * shifts are undefined), and walk.c takes libipt's decoder there.  (2.0.5
 * sets SKD007 and SKL168 only with SKD010: ours handles them for the
 * tests' sake.) */
#include "config.h"

#include <string.h>

#include "src/decode/internal.h"

/* packet kinds */
enum {
	K_NONE, K_UNKNOWN, K_PAD, K_PSB, K_PSBEND, K_TIP, K_PGE, K_PGD, K_FUP, K_TNT8, K_TNT64, K_PIP, K_MODE,
	K_OVF, K_TSC, K_TMA, K_MTC, K_CYC, K_CBR, K_STOP, K_VMCS, K_MNT, K_EXSTOP, K_MWAIT, K_PWRE, K_PWRX, K_PTW,
	K_EXT,                           /* (first bytes only: look at the second) */
	K_INVALID                        /* (packet_size: a TMA that SKZ84 spoiled) */
};

/* what a kind is to the query decoder */
enum { P_TIP = 1, P_TNT = 2, P_EVENT = 4, P_PSBEND = 8, P_FUP = 16 };

static const guint8 props[] = {
	[K_TIP] = P_TIP, [K_TNT8] = P_TNT, [K_TNT64] = P_TNT, [K_FUP] = P_FUP, [K_PSBEND] = P_PSBEND,
	[K_OVF] = P_PSBEND | P_EVENT, [K_PGE] = P_EVENT, [K_PGD] = P_EVENT, [K_PIP] = P_EVENT, [K_MODE] = P_EVENT,
	[K_CBR] = P_EVENT, [K_STOP] = P_EVENT, [K_VMCS] = P_EVENT, [K_MNT] = P_EVENT, [K_EXSTOP] = P_EVENT,
	[K_MWAIT] = P_EVENT, [K_PWRE] = P_EVENT, [K_PWRX] = P_EVENT, [K_PTW] = P_EVENT,
};

/* where an event waits */
enum { B_PSBEND, B_TIP, B_FUP, B_MAX };
#define EVQ_SIZE 8                       /* a ring: 6 events wait at most */
#define FCR_SHIFT 8                      /* calibration's fixed point */
#define PSB_SIZE 16

typedef struct {
	guint64 ip;
	gboolean have, suppressed;
} LastIp;

typedef struct {
	guint64 tsc, base, fc;
	guint32 ctc, ctc_cyc, lost_mtc, lost_cyc;
	guint8 cbr;
	gboolean have_tsc, have_cbr, have_tma, have_mtc;
} Time;

typedef struct {
	guint64 fcr, min_fcr, max_fcr, tsc, cyc_tsc, cyc_mtc;
	guint32 ctc, lost_mtc;
	gboolean have_mtc, check_skl168;
} Tcal;

struct VtQry {
	VtQryNow now;                    /* (first: internal.h reads it) where it stands, the last answer's time */
	struct pt_config cfg;
	const guint8 *sync;
	int next;                        /* the packet read ahead to (K_NONE: none) */
	LastIp ip;
	guint64 tnt, tnt_bit;            /* the TNT cache: bits left from tnt_bit down */
	Time time;
	Tcal tcal;
	struct pt_event evq[B_MAX][EVQ_SIZE], standalone;
	guint8 evq_begin[B_MAX], evq_end[B_MAX];
	struct pt_event *event;          /* the last packet's */
	gboolean enabled, consume;
};

static guint8 kind_of[256];              /* the first byte's */

static void kinds_init(void)
{
	for (int b = 0; b < 256; b++) {
		int k = K_UNKNOWN;

		if (!(b & 1))
			k = K_TNT8;
		else if ((b & 3) == 3)
			k = K_CYC;
		else if ((b & 0x1f) == 0x0d)
			k = K_TIP;
		else if ((b & 0x1f) == 0x1d)
			k = K_FUP;
		else if ((b & 0x1f) == 0x11)
			k = K_PGE;
		else if ((b & 0x1f) == 0x01)
			k = K_PGD;
		kind_of[b] = (guint8)k;
	}
	kind_of[0x00] = K_PAD;
	kind_of[0x02] = K_EXT;
	kind_of[0x99] = K_MODE;
	kind_of[0x19] = K_TSC;
	kind_of[0x59] = K_MTC;
}

static int ext_kind(guint8 ext)
{
	switch (ext) {
	case 0x82: return K_PSB;
	case 0xf3: return K_OVF;
	case 0xa3: return K_TNT64;
	case 0x23: return K_PSBEND;
	case 0x03: return K_CBR;
	case 0x43: return K_PIP;
	case 0x73: return K_TMA;
	case 0x83: return K_STOP;
	case 0xc8: return K_VMCS;
	case 0x62: case 0xe2: return K_EXSTOP;
	case 0xc2: return K_MWAIT;
	case 0x22: return K_PWRE;
	case 0xa2: return K_PWRX;
	default: return (ext & 0x1f) == 0x12 ? K_PTW : K_UNKNOWN;
	}
}

/* The kind of the packet at pos: 0, -pte_nosync outside the buffer or
 * -pte_eos at its end (*kind K_NONE). */
static inline int fetch(const VtQry *q, const guint8 *pos, int *kind)
{
	const guint8 *end = q->cfg.end;
	int k;

	*kind = K_NONE;
	if (!pos || pos < q->cfg.begin || pos > end)
		return -pte_nosync;
	if (pos == end)
		return -pte_eos;
	k = kind_of[pos[0]];
	if (k == K_EXT) {
		if (pos + 1 == end)
			return -pte_eos;
		k = ext_kind(pos[1]);
		if (k == K_UNKNOWN && pos[1] == 0xc3) {   /* ext2 */
			if (pos + 2 == end)
				return -pte_eos;
			k = pos[2] == 0x88 ? K_MNT : K_UNKNOWN;
		}
	}
	*kind = k;
	return 0;
}

/* ------------------------------------------------------------ packets */
static guint64 le(const guint8 *p, int n)
{
	guint64 v = 0;

	if (n == 8)
		memcpy(&v, p, 8);
	else
		for (int i = 0; i < n; i++)
			v |= (guint64)p[i] << (8 * i);
	return v;
}

/* n < 8 bytes of payload from p when 8 can be read there (the buffer
 * goes on: its end at least 8 bytes on) */
static inline guint64 le_in(const VtQry *q, const guint8 *p, int n)
{
	guint64 v;

	if ((const guint8 *)q->cfg.end - p < 8)
		return le(p, n);
	memcpy(&v, p, 8);
	return v & ((G_GUINT64_CONSTANT(1) << (8 * n)) - 1);
}

/* a packet of fixed size n at pos: n or -pte_eos */
static inline int fixed(const VtQry *q, const guint8 *pos, int n)
{
	return q->cfg.end < pos + n ? -pte_eos : n;
}

static int read_unknown(const VtQry *q, const guint8 *pos)
{
	struct pt_packet_unknown u = { .packet = pos };
	int size;

	if (!q->cfg.decode.callback)
		return -pte_bad_opc;
	size = q->cfg.decode.callback(&u, &q->cfg, pos, q->cfg.decode.context);
	if (size < 0)
		return size;
	if (size > 255)
		return -pte_invalid;
	return q->cfg.end < pos + size ? -pte_eos : size;
}

static int read_psb(const VtQry *q, const guint8 *pos)
{
	if (q->cfg.end < pos + PSB_SIZE)
		return -pte_eos;
	for (int i = 2; i < PSB_SIZE; i += 2)
		if (pos[i] != 0x02 || pos[i + 1] != 0x82)
			return -pte_bad_packet;
	return PSB_SIZE;
}

static int read_ip(const VtQry *q, const guint8 *pos, struct pt_packet_ip *p)
{
	static const gint8 sizes[8] = { 0, 2, 4, 6, 6, -1, 8, -1 };
	guint8 ipc = pos[0] >> 5;
	int n = sizes[ipc];

	if (n < 0)
		return -pte_bad_packet;
	if (q->cfg.end < pos + 1 + n)
		return -pte_eos;
	p->ipc = (enum pt_ip_compression)ipc;
	p->ip = n == 8 ? le(pos + 1, 8) : n ? le_in(q, pos + 1, n) : 0;
	return n + 1;
}

static int tnt_bits(guint64 payload, struct pt_packet_tnt *p)
{
	guint8 n;

	if (payload < 2)                 /* (no bit below the stop bit) */
		return -pte_bad_packet;
	n = (guint8)(63 - __builtin_clzll(payload));
	p->bit_size = n;
	p->payload = payload & ~(G_GUINT64_CONSTANT(1) << n);
	return 0;
}

static int read_tnt(const VtQry *q, const guint8 *pos, int kind, struct pt_packet_tnt *p)
{
	int n = kind == K_TNT8 ? 1 : fixed(q, pos, 8);

	if (n < 0)
		return n;
	return tnt_bits(kind == K_TNT8 ? pos[0] >> 1 : le(pos + 2, 6), p) < 0 ? -pte_bad_packet : n;
}

static int read_mode(const VtQry *q, const guint8 *pos, struct pt_packet_mode *p)
{
	guint8 leaf, bits;

	if (q->cfg.end < pos + 2)
		return -pte_eos;
	leaf = pos[1] & 0xe0;
	bits = pos[1] & 0x1f;
	p->leaf = (enum pt_mode_leaf)leaf;
	if (leaf == pt_mol_exec) {
		p->bits.exec.csl = (bits & 1) != 0;
		p->bits.exec.csd = (bits & 2) != 0;
	} else if (leaf == pt_mol_tsx) {
		p->bits.tsx.intx = (bits & 1) != 0;
		p->bits.tsx.abrt = (bits & 2) != 0;
	} else {
		return -pte_bad_packet;
	}
	return 2;
}

static int read_tma(const VtQry *q, const guint8 *pos, struct pt_packet_tma *p)
{
	guint16 ctc, fc;

	if (q->cfg.end < pos + 7)
		return -pte_eos;
	ctc = (guint16)(pos[2] | pos[3] << 8);
	fc = (guint16)(pos[5] | pos[6] << 8);
	if ((fc & ~0x1ff) || pos[4])
		return -pte_bad_packet;
	p->ctc = ctc;
	p->fc = fc;
	return 7;
}

static int read_cyc(const VtQry *q, const guint8 *pos, guint64 *value)
{
	const guint8 *p = pos;
	guint8 ext = *p & 4;
	guint64 v = *p++ >> 3;
	int shl = 5;

	while (ext) {
		guint64 bits;

		if (q->cfg.end <= p)
			return -pte_eos;
		bits = *p++;
		ext = bits & 1;
		bits >>= 1;
		bits <<= shl;
		shl += 7;
		if (shl > 64)
			return -pte_bad_packet;
		v |= bits;
	}
	*value = v;
	return (int)(p - pos);
}

static int read_ptw(const VtQry *q, const guint8 *pos, struct pt_packet_ptw *p)
{
	guint8 plc = (pos[1] >> 5) & 3;
	int n = plc == 0 ? 4 : plc == 1 ? 8 : -pte_bad_packet;

	if (n < 0)
		return n;
	if (q->cfg.end < pos + 2 + n)
		return -pte_eos;
	p->payload = le(pos + 2, n);
	p->plc = plc;
	p->ip = (pos[1] & 0x80) != 0;
	return 2 + n;
}

/* pt_pkt_next()'s answer for the packet at pos (its size or an error) -
 * BDM70's scan reads packets so. */
static int packet_size(const VtQry *q, const guint8 *pos, int *kind)
{
	union {
		struct pt_packet_ip ip;
		struct pt_packet_tnt tnt;
		struct pt_packet_mode mode;
		struct pt_packet_tma tma;
		struct pt_packet_ptw ptw;
		guint64 v;
	} p;
	int status = fetch(q, pos, kind);

	if (status < 0)
		return status;
	switch (*kind) {
	case K_UNKNOWN: return read_unknown(q, pos);
	case K_PAD: case K_TNT8: return 1;
	case K_PSB: return read_psb(q, pos);
	case K_PSBEND: case K_OVF: case K_STOP: return 2;
	case K_TIP: case K_PGE: case K_PGD: case K_FUP: return read_ip(q, pos, &p.ip);
	case K_TNT64: return read_tnt(q, pos, K_TNT64, &p.tnt);
	case K_PIP: case K_TSC: return fixed(q, pos, 8);
	case K_MODE: return read_mode(q, pos, &p.mode);
	case K_TMA: {
		int size = read_tma(q, pos, &p.tma);

		if (size == -pte_bad_packet && q->cfg.errata.skz84) {
			*kind = K_INVALID;   /* (and a bogus byte after it) */
			return 8;
		}
		return size;
	}
	case K_MTC: case K_EXSTOP: return fixed(q, pos, 2);
	case K_CYC: return read_cyc(q, pos, &p.v);
	case K_CBR: case K_PWRE: return fixed(q, pos, 4);
	case K_VMCS: case K_PWRX: return fixed(q, pos, 7);
	case K_MNT: return fixed(q, pos, 11);
	case K_MWAIT: return fixed(q, pos, 10);
	case K_PTW: return read_ptw(q, pos, &p.ptw);
	default: return -pte_internal;
	}
}

/* ------------------------------------------------------------- the IP */
static int ip_query(guint64 *ip, const LastIp *l)
{
	if (!l->have || l->suppressed) {
		if (ip)
			*ip = 0;
		return l->have ? -pte_ip_suppressed : -pte_noip;
	}
	if (ip)
		*ip = l->ip;
	return 0;
}

static void ip_update(LastIp *l, const struct pt_packet_ip *p)
{
	static const guint64 keep[8] = { 0, ~G_GUINT64_CONSTANT(0xffff), ~G_GUINT64_CONSTANT(0xffffffff),
					 0, ~G_GUINT64_CONSTANT(0xffffffffffff), 0, 0, 0 };

	switch (p->ipc) {
	case pt_ipc_suppressed:
		l->suppressed = TRUE;
		return;
	case pt_ipc_sext_48:
		l->ip = p->ip & (G_GUINT64_CONSTANT(1) << 47) ? p->ip | ~G_GUINT64_CONSTANT(0xffffffffffff)
							      : p->ip & G_GUINT64_CONSTANT(0xffffffffffff);
		break;
	case pt_ipc_full:
		l->ip = p->ip;
		break;
	default:                         /* update 16, 32, 48 */
		l->ip = (l->ip & keep[p->ipc]) | (p->ip & ~keep[p->ipc]);
		break;
	}
	l->have = TRUE;
	l->suppressed = FALSE;
}

/* ---------------------------------------------------------- the events */
static guint8 ring_next(guint8 i)
{
	return (guint8)((i + 1) % EVQ_SIZE);
}

static struct pt_event *standalone(VtQry *q)
{
	memset(&q->standalone, 0, sizeof(q->standalone));
	return &q->standalone;
}

static struct pt_event *enqueue(VtQry *q, int b)
{
	guint8 i = q->evq_end[b], end = ring_next(i);

	if (q->evq_begin[b] == ring_next(end))
		return NULL;
	q->evq_end[b] = end;
	memset(&q->evq[b][i], 0, sizeof(q->evq[b][i]));
	return &q->evq[b][i];
}

static struct pt_event *dequeue(VtQry *q, int b)
{
	guint8 i = q->evq_begin[b];

	if (i == q->evq_end[b])
		return NULL;
	q->evq_begin[b] = ring_next(i);
	return &q->evq[b][i];
}

static inline gboolean pending(const VtQry *q, int b)
{
	return q->evq_begin[b] != q->evq_end[b];
}

static struct pt_event *find(VtQry *q, int b, enum pt_event_type type)
{
	for (guint8 i = q->evq_begin[b]; i != q->evq_end[b]; i = ring_next(i))
		if (q->evq[b][i].type == type)
			return &q->evq[b][i];
	return NULL;
}

static void event_time(struct pt_event *ev, const Time *t)
{
	ev->tsc = t->tsc;
	ev->lost_mtc = t->lost_mtc;
	ev->lost_cyc = t->lost_cyc;
	if (t->have_tsc)
		ev->has_tsc = 1;
}

/* the event's IP from the last IP (none: suppressed) */
static void event_ip(VtQry *q, struct pt_event *ev, uint64_t *ip)
{
	guint64 v;

	if (ip_query(&v, &q->ip) < 0)
		ev->ip_suppressed = 1;
	*ip = v;
}

/* ------------------------------------------------------------- timing */
static int ctc_delta(const VtQry *q, guint32 *delta, guint32 ctc, guint32 last)
{
	if (ctc < last) {
		ctc += 1u << (q->cfg.mtc_freq + 8);
		if (ctc < last)
			return -pte_bad_packet;
	}
	*delta = ctc - last;
	return 0;
}

static int ctc_fc(const VtQry *q, guint64 *fc, guint64 ctc)
{
	if (!q->cfg.cpuid_0x15_eax || !q->cfg.cpuid_0x15_ebx)
		return -pte_bad_config;
	*fc = ctc * q->cfg.cpuid_0x15_ebx / q->cfg.cpuid_0x15_eax;
	return 0;
}

static gboolean have_fcr(const Tcal *c)
{
	return c->min_fcr <= c->max_fcr;
}

static void set_fcr(Tcal *c, guint64 fcr)
{
	c->fcr = fcr;
	c->min_fcr = MIN(c->min_fcr, fcr);
	c->max_fcr = MAX(c->max_fcr, fcr);
}

static void tcal_init(Tcal *c)
{
	memset(c, 0, sizeof(*c));
	c->min_fcr = G_MAXUINT64;
}

static void time_tsc(Time *t, guint64 tsc)
{
	t->have_tsc = TRUE;
	t->have_tma = t->have_mtc = FALSE;
	t->tsc = t->base = tsc;
	t->ctc = 0;
	t->fc = 0;
	t->lost_mtc = t->lost_cyc = 0;
}

static int tcal_header_tsc(Tcal *c, guint64 tsc)
{
	guint64 last = c->tsc, cyc = c->cyc_tsc, delta;

	c->tsc = tsc;
	c->cyc_tsc = 0;
	if (!last || !cyc || c->have_mtc)
		return 0;
	if (tsc < last) {
		tsc += G_GUINT64_CONSTANT(1) << 56;
		if (tsc < last)
			return -pte_bad_packet;
	}
	delta = tsc - last;
	if (delta & ~(~G_GUINT64_CONSTANT(0) >> FCR_SHIFT))
		return -pte_internal;
	set_fcr(c, (delta << FCR_SHIFT) / cyc);
	return 0;
}

static int tcal_cbr(const VtQry *q, Tcal *c, guint8 cbr)
{
	guint64 p1 = q->cfg.nom_freq;

	if (!p1)
		return 0;
	if (!cbr)
		return -pte_bad_packet;
	set_fcr(c, (p1 << FCR_SHIFT) / cbr);
	return 0;
}

static int time_cbr(Time *t, guint8 cbr)
{
	if (!cbr)
		return -pte_bad_packet;
	t->have_cbr = TRUE;
	t->cbr = cbr;
	return 0;
}

static int time_tma(const VtQry *q, Time *t, const struct pt_packet_tma *p)
{
	guint32 hi = q->cfg.mtc_freq + 8u;

	if (!t->have_tsc || t->have_tma)
		return -pte_bad_context;
	if (t->have_mtc)
		return -pte_internal;
	t->have_tma = TRUE;
	t->base -= p->fc;
	t->fc += p->fc;
	if (hi <= 16)
		t->have_mtc = TRUE;
	t->ctc = t->ctc_cyc = p->ctc & ((1u << hi) - 1u);
	return 0;
}

static int tcal_mtc(const VtQry *q, Tcal *c, guint8 payload)
{
	guint32 last = c->ctc, ctc = (guint32)payload << q->cfg.mtc_freq, delta;
	guint64 cyc = c->cyc_mtc, fc, fcr;
	gboolean skl168 = c->check_skl168;
	int status;

	c->check_skl168 = FALSE;
	if (!c->have_mtc) {
		c->cyc_mtc = 0;
		c->ctc = ctc;
		c->have_mtc = TRUE;
		return 0;
	}
	if (!cyc)
		return 0;
	c->cyc_mtc = 0;
	c->ctc = ctc;
	c->lost_mtc += 1;
	if ((status = ctc_delta(q, &delta, ctc, last)) < 0 || (status = ctc_fc(q, &fc, delta)) < 0)
		return status;
	if (fc & ~(~G_GUINT64_CONSTANT(0) >> FCR_SHIFT))
		return -pte_internal;
	fcr = (fc << FCR_SHIFT) / cyc;
	if (skl168) {
		if ((1u << q->cfg.mtc_freq) < delta)
			return 0;
		if (q->cfg.mtc_freq < 10 && have_fcr(c) && ((c->fcr * (cyc + 0xf00)) >> FCR_SHIFT) < fc)
			return 0;
	}
	set_fcr(c, fcr);
	c->lost_mtc = 0;
	return 0;
}

static int time_mtc(const VtQry *q, Time *t, guint8 payload)
{
	guint32 last = t->ctc, ctc = (guint32)payload << q->cfg.mtc_freq, delta;
	gboolean had_mtc = t->have_mtc;
	guint64 tsc;
	int status;

	if (t->have_tsc && !t->have_tma)
		return 0;
	if (t->fc || t->lost_cyc || !had_mtc)
		t->ctc_cyc = ctc;
	t->have_mtc = TRUE;
	t->fc = 0;
	t->ctc = ctc;
	t->lost_cyc = 0;
	if (!had_mtc) {
		guint32 hi = ctc & ~0xffffu;

		if (!t->have_tma)
			return 0;
		if (last & ~0xffffu)
			return -pte_internal;
		if ((ctc & 0xffffu) < last) {
			hi -= 1u << 16;
			hi &= 0xffu << q->cfg.mtc_freq;
		}
		last |= hi;
	}
	if (ctc_delta(q, &delta, ctc, last) < 0) {
		t->lost_mtc += 1;
		return -pte_bad_packet;
	}
	if ((status = ctc_fc(q, &tsc, delta)) < 0)
		return status;
	t->tsc = t->base = t->base + tsc;
	return 0;
}

static int time_cyc(const VtQry *q, Time *t, guint64 cyc, guint64 fcr)
{
	guint64 fc = t->fc;

	if (!fcr) {
		t->lost_cyc += 1;
		return 0;
	}
	if (!fc && t->ctc != t->ctc_cyc) {   /* cycles since the last CTC (MTC or TMA) only */
		guint32 delta;
		guint64 old_fc, old;
		int status;

		if ((status = ctc_delta(q, &delta, t->ctc, t->ctc_cyc)) < 0 || (status = ctc_fc(q, &old_fc, delta)) < 0)
			return status;
		old = (old_fc << FCR_SHIFT) / fcr;
		cyc = cyc < old ? 0 : cyc - old;
	}
	fc += (cyc * fcr) >> FCR_SHIFT;
	t->fc = fc;
	t->tsc = t->base + fc;
	return 0;
}

/* a status of the time model: configuration errors are not errors */
static inline int ok(int status)
{
	return status < 0 && status != -pte_bad_config ? status : 0;
}

/* ----------------------------------------------------- packet by packet */
static int decode_ip(VtQry *q)
{
	struct pt_packet_ip p;
	int size = read_ip(q, q->now.pos, &p);

	if (size >= 0)
		ip_update(&q->ip, &p);
	return size;
}

static int decode_psb_header(VtQry *q);

static int decode_psb(VtQry *q)
{
	const guint8 *at = q->now.pos;
	int size = read_psb(q, at), status;

	if (size < 0)
		return size;
	if (q->cfg.errata.skl168)
		q->tcal.check_skl168 = TRUE;
	q->now.pos += size;
	status = decode_psb_header(q);
	if (status < 0) {                /* back to the PSB */
		q->now.pos = at;
		q->evq_begin[B_PSBEND] = q->evq_end[B_PSBEND] = 0;
		q->next = K_PSB;
	}
	return status;
}

static int decode_tip(VtQry *q)
{
	struct pt_event *ev;
	int size = decode_ip(q);

	if (size < 0)
		return size;
	if ((ev = dequeue(q, B_TIP))) {
		switch (ev->type) {
		case ptev_async_branch:
			q->consume = TRUE;
			event_ip(q, ev, &ev->variant.async_branch.to);
			break;
		case ptev_async_paging: event_ip(q, ev, &ev->variant.async_paging.ip); break;
		case ptev_async_vmcs: event_ip(q, ev, &ev->variant.async_vmcs.ip); break;
		case ptev_exec_mode: event_ip(q, ev, &ev->variant.exec_mode.ip); break;
		default: return -pte_bad_context;
		}
		q->event = ev;
		if (pending(q, B_TIP) || !q->consume)
			return 0;        /* read again for the next event, or the branch */
		q->consume = FALSE;
	}
	q->now.pos += size;
	return 0;
}

static int decode_tnt(VtQry *q, int kind)
{
	struct pt_packet_tnt p;
	int size = read_tnt(q, q->now.pos, kind, &p);

	if (size < 0)
		return size;
	if (q->tnt_bit)
		return -pte_bad_context;
	q->tnt = p.payload;
	q->tnt_bit = G_GUINT64_CONSTANT(1) << (p.bit_size - 1);
	q->now.pos += size;
	return 0;
}

static int decode_pge(VtQry *q)
{
	struct pt_event *ev;
	int size = decode_ip(q);

	if (size < 0)
		return size;
	if (!q->consume) {
		ev = standalone(q);
		ev->type = ptev_enabled;
		if (ip_query(&ev->variant.enabled.ip, &q->ip) < 0)
			return -pte_bad_packet;
		event_time(ev, &q->time);
		q->tnt = q->tnt_bit = 0;
		q->consume = TRUE;
		q->enabled = TRUE;
	} else {
		ev = dequeue(q, B_TIP);
		if (ev) {
			if (ev->type != ptev_exec_mode)
				return -pte_bad_context;
			event_ip(q, ev, &ev->variant.exec_mode.ip);
		}
	}
	if (!ev)
		return -pte_internal;
	q->event = ev;
	if (pending(q, B_TIP))
		return 0;
	q->consume = FALSE;
	q->now.pos += size;
	return 0;
}

static int decode_pgd(VtQry *q)
{
	struct pt_event *ev;
	int size = decode_ip(q);

	if (size < 0)
		return size;
	if ((ev = dequeue(q, B_TIP))) {
		switch (ev->type) {
		case ptev_async_branch: {
			guint64 at = ev->variant.async_branch.from;

			ev->type = ptev_async_disabled;
			ev->variant.async_disabled.at = at;
			event_ip(q, ev, &ev->variant.async_disabled.ip);
			break;
		}
		case ptev_async_paging: case ptev_async_vmcs: case ptev_exec_mode:
			ev->ip_suppressed = 1;   /* tracing stops: no IP to bind to */
			break;
		default:
			return -pte_bad_context;
		}
	} else {
		ev = standalone(q);
		ev->type = ptev_disabled;
		event_ip(q, ev, &ev->variant.disabled.ip);
		event_time(ev, &q->time);
	}
	q->event = ev;
	if (pending(q, B_TIP))
		return 0;
	q->enabled = FALSE;
	q->now.pos += size;
	return 0;
}

static int decode_fup(VtQry *q)
{
	struct pt_event *ev;
	int size = decode_ip(q), status;

	if (size < 0)
		return size;
	if ((ev = dequeue(q, B_FUP))) {
		switch (ev->type) {
		case ptev_tsx:
			if (!ev->variant.tsx.aborted)
				q->consume = TRUE;
			event_ip(q, ev, &ev->variant.tsx.ip);
			break;
		case ptev_exstop: q->consume = TRUE; event_ip(q, ev, &ev->variant.exstop.ip); break;
		case ptev_mwait: q->consume = TRUE; event_ip(q, ev, &ev->variant.mwait.ip); break;
		case ptev_ptwrite: q->consume = TRUE; event_ip(q, ev, &ev->variant.ptwrite.ip); break;
		case ptev_overflow:
			q->consume = TRUE;
			if ((status = ip_query(&ev->variant.overflow.ip, &q->ip)) < 0)
				return status;
			break;
		default: return -pte_internal;
		}
		q->event = ev;
		if (pending(q, B_FUP) || !q->consume)
			return 0;
		q->consume = FALSE;
	} else {
		guint64 ip;

		if ((status = ip_query(&ip, &q->ip)) < 0)
			return status;
		if (!(ev = enqueue(q, B_TIP)))
			return -pte_nomem;
		ev->type = ptev_async_branch;
		ev->variant.async_branch.from = ip;
		event_time(ev, &q->time);
	}
	q->now.pos += size;
	return 0;
}

/* A PIP's paging event (paging or async_paging) from its payload v */
static void paging_event(struct pt_event *ev, enum pt_event_type type, guint64 v)
{
	ev->type = type;
	if (type == ptev_paging) {
		ev->variant.paging.cr3 = v >> 1 << 5;
		ev->variant.paging.non_root = v & 1;
	} else {
		ev->variant.async_paging.cr3 = v >> 1 << 5;
		ev->variant.async_paging.non_root = v & 1;
	}
}

/* A MODE's event: the exec mode or TSX state */
static void mode_event(struct pt_event *ev, const struct pt_packet_mode *p)
{
	if (p->leaf == pt_mol_exec) {
		ev->type = ptev_exec_mode;
		ev->variant.exec_mode.mode = pt_get_exec_mode(&p->bits.exec);
	} else {
		ev->type = ptev_tsx;
		ev->variant.tsx.speculative = p->bits.tsx.intx;
		ev->variant.tsx.aborted = p->bits.tsx.abrt;
	}
}

/* A PIP: paging now, or with the asynchronous branch it follows, or (in
 * a PSB+: header) at its PSBEND. */
static int decode_pip(VtQry *q, gboolean header)
{
	const guint8 *pos = q->now.pos;
	struct pt_event *ev;
	guint64 v;
	int size = fixed(q, pos, 8);

	if (size < 0)
		return size;
	v = le(pos + 2, 6);
	if (header) {
		if (!(ev = enqueue(q, B_PSBEND)))
			return -pte_nomem;
		paging_event(ev, ptev_async_paging, v);
		q->now.pos += size;
		return 0;        /* (its time: the PSBEND's) */
	}
	if (!find(q, B_TIP, ptev_async_branch)) {
		ev = standalone(q);
		paging_event(ev, ptev_paging, v);
		q->event = ev;
	} else {
		if (!(ev = enqueue(q, B_TIP)))
			return -pte_nomem;
		paging_event(ev, ptev_async_paging, v);
	}
	event_time(ev, &q->time);
	q->now.pos += size;
	return 0;
}

/* A MODE: the exec mode at the next TIP, TSX at the next FUP (now while
 * tracing is off), or (header) at its PSBEND. */
static int decode_mode(VtQry *q, gboolean header)
{
	struct pt_packet_mode p;
	struct pt_event *ev;
	int size = read_mode(q, q->now.pos, &p);

	if (size < 0)
		return size;
	if (header) {
		if (!(ev = enqueue(q, B_PSBEND)))
			return -pte_nomem;
		mode_event(ev, &p);
		q->now.pos += size;
		return 0;
	}
	if (p.leaf == pt_mol_exec) {
		if (!(ev = enqueue(q, B_TIP)))
			return -pte_nomem;
	} else if (!q->enabled) {        /* (TSX while off: now, without an IP) */
		ev = standalone(q);
		ev->ip_suppressed = 1;
		q->event = ev;
	} else if (!(ev = enqueue(q, B_FUP))) {
		return -pte_nomem;
	}
	mode_event(ev, &p);
	event_time(ev, &q->time);
	q->now.pos += size;
	return 0;
}

/* a PSB+'s status events, one at a time at its PSBEND: 1 (one out), 0 */
static int psbend_event(VtQry *q)
{
	struct pt_event *ev = dequeue(q, B_PSBEND);

	if (!ev)
		return 0;
	ev->status_update = 1;
	event_time(ev, &q->time);
	switch (ev->type) {
	case ptev_async_paging: event_ip(q, ev, &ev->variant.async_paging.ip); break;
	case ptev_exec_mode: event_ip(q, ev, &ev->variant.exec_mode.ip); break;
	case ptev_tsx: event_ip(q, ev, &ev->variant.tsx.ip); break;
	case ptev_async_vmcs: event_ip(q, ev, &ev->variant.async_vmcs.ip); break;
	case ptev_cbr: break;
	case ptev_mnt: ev->status_update = 0; break;
	default: return -pte_internal;
	}
	q->event = ev;
	return 1;
}

static int decode_psbend(VtQry *q)
{
	int status = psbend_event(q);

	if (status < 0)
		return status;
	if (!status)
		q->now.pos += 2;
	return 0;
}

static int decode_tsc(VtQry *q, gboolean header)
{
	int size = fixed(q, q->now.pos, 8), status;
	guint64 tsc;

	if (size < 0)
		return size;
	tsc = le(q->now.pos + 1, 7);
	if (header) {
		if ((status = ok(tcal_header_tsc(&q->tcal, tsc))) < 0)
			return status;
	} else {
		q->tcal.tsc = tsc;
		q->tcal.cyc_tsc = 0;
	}
	time_tsc(&q->time, tsc);
	q->now.pos += size;
	return 0;
}

static int decode_cbr(VtQry *q, gboolean header)
{
	int size = fixed(q, q->now.pos, 4), status;
	guint8 cbr;
	struct pt_event *ev;

	if (size < 0)
		return size;
	cbr = q->now.pos[2];
	if (!header)
		tcal_init(&q->tcal);
	if ((status = ok(tcal_cbr(q, &q->tcal, cbr))) < 0 || (status = ok(time_cbr(&q->time, cbr))) < 0)
		return status;
	if (header) {
		if (!(ev = enqueue(q, B_PSBEND)))
			return -pte_nomem;
	} else {
		ev = standalone(q);
		q->event = ev;
	}
	ev->type = ptev_cbr;
	ev->variant.cbr.ratio = cbr;
	if (!header)
		event_time(ev, &q->time);
	q->now.pos += size;
	return 0;
}

static int decode_tma(VtQry *q)
{
	struct pt_packet_tma p;
	int size = read_tma(q, q->now.pos, &p), status;

	if (size < 0) {
		if (q->cfg.errata.skz84 && size == -pte_bad_packet) {
			q->now.pos += 8;     /* a bogus byte after it */
			return 0;
		}
		return size;
	}
	if ((status = ok(time_tma(q, &q->time, &p))) < 0)
		return status;
	q->now.pos += size;
	return 0;
}

static int decode_mtc(VtQry *q)
{
	int size = fixed(q, q->now.pos, 2), status;

	if (size < 0)
		return size;
	if ((status = ok(tcal_mtc(q, &q->tcal, q->now.pos[1]))) < 0 || (status = ok(time_mtc(q, &q->time, q->now.pos[1]))) < 0)
		return status;
	q->now.pos += size;
	return 0;
}

static int decode_cyc(VtQry *q)
{
	guint64 cyc, fcr;
	int size = read_cyc(q, q->now.pos, &cyc), status;

	if (size < 0)
		return size;
	/* SKD007: a CYC of two bytes before an OVF may be one byte */
	if (q->cfg.errata.skd007 && size == 2 && ((guint16)cyc & ~0x1f) == 0x20 && q->now.pos + 2 < q->cfg.end &&
	    q->now.pos[2] == 0xf3) {
		q->now.pos += 1;
		return 0;
	}
	q->tcal.cyc_mtc += cyc;
	q->tcal.cyc_tsc += cyc;
	fcr = have_fcr(&q->tcal) ? q->tcal.fcr : 0;
	if ((status = ok(time_cyc(q, &q->time, cyc, fcr))) < 0)
		return status;
	q->now.pos += size;
	return 0;
}

static int decode_vmcs(VtQry *q, gboolean header)
{
	struct pt_event *ev, *paging;
	int size = fixed(q, q->now.pos, 7);
	guint64 base;

	if (size < 0)
		return size;
	base = le(q->now.pos + 2, 5) << 12;
	if (header) {
		if (!(ev = enqueue(q, B_PSBEND)))
			return -pte_nomem;
		ev->type = ptev_async_vmcs;
		ev->variant.async_vmcs.base = base;
	} else if ((ev = find(q, B_TIP, ptev_async_paging))) {
		/* the VMCS goes before the paging it came with */
		if (!(paging = enqueue(q, B_TIP)))
			return -pte_nomem;
		*paging = *ev;
		ev->type = ptev_async_vmcs;
		ev->variant.async_vmcs.base = base;
	} else if (find(q, B_TIP, ptev_async_branch)) {
		if (!(ev = enqueue(q, B_TIP)))
			return -pte_nomem;
		ev->type = ptev_async_vmcs;
		ev->variant.async_vmcs.base = base;
	} else {
		ev = standalone(q);
		ev->type = ptev_vmcs;
		ev->variant.vmcs.base = base;
		q->event = ev;
		event_time(ev, &q->time);
	}
	q->now.pos += size;
	return 0;
}

static int decode_mnt(VtQry *q, gboolean header)
{
	struct pt_event *ev;
	int size = fixed(q, q->now.pos, 11);

	if (size < 0)
		return size;
	if (header) {
		if (!(ev = enqueue(q, B_PSBEND)))
			return -pte_nomem;
	} else {
		ev = standalone(q);
		q->event = ev;
		event_time(ev, &q->time);
	}
	ev->type = ptev_mnt;
	ev->variant.mnt.payload = le(q->now.pos + 3, 8);
	q->now.pos += size;
	return 0;
}

/* EXSTOP, MWAIT, PTWRITE: with an IP, the FUP after them has it */
static int decode_power(VtQry *q, int kind)
{
	struct pt_packet_ptw ptw;
	struct pt_event *ev;
	gboolean fup = FALSE;
	int size;

	switch (kind) {
	case K_EXSTOP: size = 2; fup = (q->now.pos[1] & 0x80) != 0; break;
	case K_MWAIT: size = fixed(q, q->now.pos, 10); fup = TRUE; break;
	case K_PWRE: size = fixed(q, q->now.pos, 4); break;
	case K_PWRX: size = fixed(q, q->now.pos, 7); break;
	default: size = read_ptw(q, q->now.pos, &ptw); fup = size >= 0 && ptw.ip; break;
	}
	if (size < 0)
		return size;
	if (fup) {
		if (!(ev = enqueue(q, B_FUP)))
			return -pte_internal;
	} else {
		ev = standalone(q);
		q->event = ev;
		if (kind == K_EXSTOP || kind == K_PTW)
			ev->ip_suppressed = 1;
	}
	switch (kind) {
	case K_EXSTOP:
		ev->type = ptev_exstop;
		break;
	case K_MWAIT:
		ev->type = ptev_mwait;
		ev->variant.mwait.hints = (guint32)le(q->now.pos + 2, 4);
		ev->variant.mwait.ext = (guint32)le(q->now.pos + 6, 4);
		break;
	case K_PWRE: {
		guint64 v = le(q->now.pos + 2, 2);

		ev->type = ptev_pwre;
		ev->variant.pwre.state = (guint8)((v & 0xf000) >> 12);
		ev->variant.pwre.sub_state = (guint8)((v & 0xf00) >> 8);
		ev->variant.pwre.hw = (v & 0x8) != 0;
		break;
	}
	case K_PWRX: {
		guint64 v = le(q->now.pos + 2, 5);

		ev->type = ptev_pwrx;
		ev->variant.pwrx.last = (guint8)((v & 0xf0) >> 4);
		ev->variant.pwrx.deepest = (guint8)(v & 0xf);
		ev->variant.pwrx.interrupt = (v & 0x100) != 0;
		ev->variant.pwrx.store = (v & 0x400) != 0;
		ev->variant.pwrx.autonomous = (v & 0x800) != 0;
		break;
	}
	default:
		ev->type = ptev_ptwrite;
		ev->variant.ptwrite.size = ptw.plc ? 8 : 4;
		ev->variant.ptwrite.payload = ptw.payload;
		break;
	}
	q->now.pos += size;
	return 0;
}

static int decode_stop(VtQry *q)
{
	struct pt_event *ev = standalone(q);

	ev->type = ptev_stop;
	q->event = ev;
	event_time(ev, &q->time);
	q->now.pos += 2;
	return 0;
}

static int decode_unknown(VtQry *q)
{
	int size = read_unknown(q, q->now.pos);

	if (size < 0)
		return size;
	q->now.pos += size;
	return 0;
}

static void reset(VtQry *q)
{
	q->enabled = q->consume = FALSE;
	q->event = NULL;
	memset(&q->ip, 0, sizeof(q->ip));
	q->tnt = q->tnt_bit = 0;
	memset(&q->time, 0, sizeof(q->time));
	q->now.tsc = 0;
	q->now.lost_mtc = q->now.lost_cyc = 0;
	q->now.have_tsc = FALSE;
	tcal_init(&q->tcal);
	memset(q->evq_begin, 0, sizeof(q->evq_begin));
	memset(q->evq_end, 0, sizeof(q->evq_end));
}

/* After an OVF: a FUP before anything that says tracing is off (1), none
 * (0) or an error (-pte_bad_context: a branch or PSBEND first). */
static int ovf_fup(const VtQry *q)
{
	for (const guint8 *pos = q->now.pos;;) {
		int kind, size = packet_size(q, pos, &kind);

		if (size < 0)
			return size;
		switch (kind) {
		case K_FUP:
			return 1;
		case K_UNKNOWN: case K_PAD: case K_MNT: case K_CBR: case K_TSC: case K_TMA: case K_MTC: case K_CYC:
			pos += size;
			break;
		case K_PSBEND: case K_TIP: case K_PGD: case K_TNT8: case K_TNT64:
			return -pte_bad_context;
		case K_INVALID:
			return -pte_bad_opc;
		default:
			return 0;
		}
	}
}

static int decode_ovf(VtQry *q)
{
	struct pt_event *ev;
	Time now;
	int status = psbend_event(q);

	if (status)                      /* a PSB+'s events first */
		return status < 0 ? status : 0;
	now = q->time;
	reset(q);
	q->time = now;
	q->now.pos += 2;
	status = ovf_fup(q);
	if (status > 0) {
		if (!(ev = enqueue(q, B_FUP)))
			return -pte_internal;
		q->enabled = TRUE;
	} else {
		if (status < 0 && status != -pte_eos)
			return status;
		ev = standalone(q);
		ev->ip_suppressed = 1;
		q->enabled = FALSE;
		q->event = ev;
	}
	ev->type = ptev_overflow;
	event_time(ev, &q->time);
	return 0;
}

/* The packet q->next (at q->now.pos) applied: 0 or an error. */
static int decode(VtQry *q, int kind)
{
	switch (kind) {
	case K_UNKNOWN: return decode_unknown(q);
	case K_PAD: q->now.pos += 1; return 0;
	case K_PSB: return decode_psb(q);
	case K_PSBEND: return decode_psbend(q);
	case K_TIP: return decode_tip(q);
	case K_PGE: return decode_pge(q);
	case K_PGD: return decode_pgd(q);
	case K_FUP: return decode_fup(q);
	case K_TNT8: case K_TNT64: return decode_tnt(q, kind);
	case K_PIP: return decode_pip(q, FALSE);
	case K_MODE: return decode_mode(q, FALSE);
	case K_TSC: return decode_tsc(q, FALSE);
	case K_TMA: return decode_tma(q);
	case K_MTC: return decode_mtc(q);
	case K_CYC: return decode_cyc(q);
	case K_CBR: return decode_cbr(q, FALSE);
	case K_STOP: return decode_stop(q);
	case K_VMCS: return decode_vmcs(q, FALSE);
	case K_MNT: return decode_mnt(q, FALSE);
	case K_EXSTOP: case K_MWAIT: case K_PWRE: case K_PWRX: case K_PTW: return decode_power(q, kind);
	case K_OVF: return decode_ovf(q);
	default: return -pte_internal;
	}
}

/* ----------------------------------------------------------- the PSB+ */
/* BDM70: a FUP in a PSB+ while tracing is off, followed by TIP.PGE with
 * only status packets between, is not where tracing is: 1; 0 or error. */
static int bdm70_pge_follows(const VtQry *q, const guint8 *pos)
{
	for (;;) {
		int kind, size = packet_size(q, pos, &kind);

		if (size < 0)
			return size == -pte_eos ? 0 : size;
		switch (kind) {
		case K_PGE:
			return 1;
		case K_PAD: case K_TSC: case K_CBR: case K_PSBEND: case K_PIP: case K_MODE: case K_VMCS:
		case K_TMA: case K_MTC: case K_CYC: case K_MNT:
			pos += size;
			break;
		default:
			return 0;
		}
	}
}

static int header_fup(VtQry *q)
{
	struct pt_packet_ip p;
	int size = read_ip(q, q->now.pos, &p), status;

	if (size < 0)
		return size;
	if (q->cfg.errata.bdm70 && !q->enabled) {
		status = bdm70_pge_follows(q, q->now.pos + size);
		if (status < 0)
			return status;
		if (status) {
			q->now.pos += size;
			return 0;
		}
	}
	ip_update(&q->ip, &p);
	if (p.ipc != pt_ipc_suppressed)
		q->enabled = TRUE;
	q->now.pos += size;
	return 0;
}

/* A packet inside a PSB+: 0, an error; -pte_bad_context for one that has
 * no place there. */
static int header(VtQry *q, int kind)
{
	switch (kind) {
	case K_UNKNOWN: return decode_unknown(q);
	case K_PAD: q->now.pos += 1; return 0;
	case K_FUP: return header_fup(q);
	case K_PIP: return decode_pip(q, TRUE);
	case K_MODE: return decode_mode(q, TRUE);
	case K_TSC: return decode_tsc(q, TRUE);
	case K_CBR: return decode_cbr(q, TRUE);
	case K_TMA: return decode_tma(q);
	case K_MTC: return decode_mtc(q);
	case K_CYC: return decode_cyc(q);
	case K_VMCS: return decode_vmcs(q, TRUE);
	case K_MNT: return decode_mnt(q, TRUE);
	default: return -pte_bad_context;
	}
}

static int decode_psb_header(VtQry *q)
{
	memset(&q->ip, 0, sizeof(q->ip));
	for (;;) {
		int status = fetch(q, q->now.pos, &q->next);

		if (status < 0)
			return status;
		if (props[q->next] & P_PSBEND)
			return 0;
		if ((status = header(q, q->next)) < 0)
			return status;
	}
}

/* ----------------------------------------------------- reading ahead */
static inline gboolean will_event(const VtQry *q)
{
	guint8 p = props[q->next];

	if (p & P_EVENT)
		return TRUE;
	if (p & P_PSBEND)
		return pending(q, B_PSBEND);
	if (p & P_TIP)
		return pending(q, B_TIP);
	if (p & P_FUP)
		return pending(q, B_FUP);
	return FALSE;
}

static gboolean will_eos(const VtQry *q)
{
	int kind;

	return q->next == K_NONE && fetch(q, q->now.pos, &kind) == -pte_eos;
}

static inline int status_flags(const VtQry *q)
{
	int flags = 0;

	if (!q->tnt_bit) {
		if (will_event(q))
			flags |= pts_event_pending;
		if (will_eos(q))
			flags |= pts_eos;
	}
	return flags;
}

/* the error that reading the next packet gives */
static int fetch_error(const VtQry *q)
{
	int kind, status = fetch(q, q->now.pos, &kind);

	return status < 0 ? status : -pte_internal;
}

/* On to the next packet that answers a query or makes an event, status
 * packets applied on the way. */
static int read_ahead(VtQry *q)
{
	for (;;) {
		int status = fetch(q, q->now.pos, &q->next);

		if (status < 0)
			return status;
		if ((props[q->next] & (P_TIP | P_TNT)) || will_event(q))
			return 0;
		status = decode(q, q->next);
		if (status < 0) {
			if (status == -pte_eos) {   /* a status packet cut at the end */
				q->now.pos = q->cfg.end;
				q->next = K_NONE;
			}
			return status;
		}
	}
}

/* after a query's packet: its time kept, on to the next */
static inline int answered(VtQry *q)
{
	int status;

	q->now.tsc = q->time.tsc;
	q->now.lost_mtc = q->time.lost_mtc;
	q->now.lost_cyc = q->time.lost_cyc;
	q->now.have_tsc = q->time.have_tsc;
	status = read_ahead(q);
	return status < 0 && status != -pte_eos ? status : 0;
}

/* ------------------------------------------------------------ queries */
static gsize kinds_once;

VtQry *vt_qry_new(const struct pt_config *config)
{
	VtQry *q;

	if (config->errata.skd010 || config->errata.apl11 || config->errata.apl12)
		return NULL;
	if (!config->begin || !config->end || config->end < config->begin || config->mtc_freq > 15)
		return NULL;
	if (g_once_init_enter(&kinds_once)) {
		kinds_init();
		g_once_init_leave(&kinds_once, 1);
	}
	q = g_new0(VtQry, 1);
	q->cfg = *config;
	q->now.begin = config->begin;    /* (cfg.flags: none of them the query decoder's) */
	tcal_init(&q->tcal);
	return q;
}

void vt_qry_free(VtQry *q)
{
	g_free(q);
}

static int start(VtQry *q, const guint8 *at, uint64_t *ip)
{
	int status;

	reset(q);
	q->sync = q->now.pos = at;
	if ((status = fetch(q, at, &q->next)) < 0)
		return status;
	if (q->next != K_PSB)
		return -pte_nosync;
	if ((status = decode_psb(q)) < 0)
		return status;
	if (ip && ip_query(ip, &q->ip) == 0)
		ip = NULL;               /* (an adjacent PSB+ read ahead may change it) */
	if ((status = read_ahead(q)) < 0)
		return status;
	status = status_flags(q);
	if (ip_query(ip, &q->ip) < 0 && ip)
		status |= pts_ip_suppressed;
	return status;
}

/* the PSB that pos is in or after (libipt's search: 8-byte steps) */
static const guint8 *psb_at(const VtQry *q, const guint8 *pos)
{
	const guint8 *begin = q->cfg.begin, *end = q->cfg.end;

	if (*pos != 0x02)
		pos++;
	for (; pos + 1 < end; pos += 2)
		if (pos[0] != 0x02 || pos[1] != 0x82)
			break;
	pos -= PSB_SIZE;
	if (pos < begin || pos[0] != 0x02 || pos[1] != 0x82 || read_psb(q, pos) < 0)
		return NULL;
	return pos;
}

static int find_psb(const VtQry *q, const guint8 *from, const guint8 **sync)
{
	static const guint64 lohi = 0x0282028202820282ull, hilo = 0x8202820282028202ull;
	const guint8 *pos = (const guint8 *)(((guintptr)from + 7) & ~(guintptr)7);

	if (from < q->cfg.begin || from > q->cfg.end)
		return -pte_internal;
	for (;;) {
		const guint8 *at = pos;
		guint64 v;

		pos += 8;
		if (q->cfg.end < pos)
			return -pte_eos;
		memcpy(&v, at, sizeof(v));
		if (v != lohi && v != hilo)
			continue;
		at = psb_at(q, pos);
		if (!at || at < from)
			continue;
		*sync = at;
		return 0;
	}
}

int vt_qry_sync_forward(VtQry *q, uint64_t *ip)
{
	const guint8 *begin = q->cfg.begin, *pos = q->now.pos ? q->now.pos : begin, *sync;
	gsize back;
	int status;

	if (pos == q->sync)
		pos += PSB_SIZE;
	if (pos < begin)
		return -pte_internal;
	back = MIN((gsize)(pos - begin), (gsize)PSB_SIZE - 1);   /* (a PSB cut by the last sync) */
	if ((status = find_psb(q, pos - back, &sync)) < 0)
		return status;
	return start(q, sync, ip);
}

static int cache_tnt(VtQry *q)
{
	for (;;) {
		int kind = q->next, status;

		if (kind == K_NONE)
			return fetch_error(q);
		if (will_event(q) || (props[kind] & P_TIP))
			return -pte_bad_query;
		q->event = NULL;
		if ((status = decode(q, kind)) < 0)
			return status;
		if (q->event)
			return -pte_event_ignored;
		if (props[kind] & P_TNT)
			break;
		if ((status = read_ahead(q)) < 0)
			return status;
	}
	return answered(q);
}

int vt_qry_cond_branch(VtQry *q, int *taken)
{
	int status;

	if (!q->tnt_bit && (status = cache_tnt(q)) < 0)
		return status;
	*taken = (q->tnt & q->tnt_bit) != 0;
	q->tnt_bit >>= 1;
	return q->tnt_bit ? 0 : status_flags(q);
}

int vt_qry_indirect_branch(VtQry *q, uint64_t *ip)
{
	int flags = 0, status;

	for (;;) {
		int kind = q->next;

		if (kind == K_NONE)
			return fetch_error(q);
		if (will_event(q))
			return -pte_bad_query;
		q->event = NULL;
		if ((props[kind] & P_TNT) && q->tnt_bit)
			return -pte_bad_query;
		if ((status = decode(q, kind)) < 0)
			return status;
		if (q->event)
			return -pte_event_ignored;
		if (props[kind] & P_TIP) {
			guint64 v;

			if (ip_query(&v, &q->ip) < 0)
				flags |= pts_ip_suppressed;
			else
				*ip = v;
			break;
		}
		if ((status = read_ahead(q)) < 0)
			return status;
	}
	if ((status = answered(q)) < 0)
		return status;
	return flags | status_flags(q);
}

int vt_qry_event(VtQry *q, struct pt_event *ev)
{
	int status;

	if (q->tnt_bit)
		return -pte_bad_query;
	for (;;) {
		int kind = q->next;

		if (kind == K_NONE)
			return fetch_error(q);
		if ((props[kind] & (P_TIP | P_TNT)) && !will_event(q))
			return -pte_bad_query;
		q->event = NULL;
		if ((status = decode(q, kind)) < 0)
			return status;
		if (q->event) {
			memcpy(ev, q->event, sizeof(*ev));
			break;
		}
		if ((status = read_ahead(q)) < 0)
			return status;
	}
	if ((status = answered(q)) < 0)
		return status;
	return status_flags(q);
}

int vt_qry_get_sync_offset(const VtQry *q, uint64_t *off)
{
	if (!q->sync)
		return -pte_nosync;
	*off = (uint64_t)(q->sync - (const guint8 *)q->cfg.begin);
	return 0;
}
