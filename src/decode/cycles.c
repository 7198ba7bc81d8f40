/* cycles.c - a queue's CYC cycles where perf takes them for IPC (script
 * -F ipc).
 *
 * perf 6.1's decoder adds every CYC packet's count to a running total
 * while tracing is on (after TIP.PGE or a PSB+'s FUP, until TIP.PGD or
 * OVF) and notes that cycles came; a branch takes the total as its IPC
 * sample when it is the first decided by its packet - a TIP (indirect
 * branch, return without compression, asynchronous branch, VM entry and
 * exit, trace begin) or a TNT's first bit taken (a conditional jump or a
 * compressed return) - and cycles came since the last sample; a first bit
 * not taken forgets them.  Branches decided by a packet read before (a
 * TNT's later bits, direct branches) take no sample.
 *
 * libipt consumes those packets itself, so this file reads the queue's
 * packets once more, behind the decoder: a branch comes with the offset
 * where the decoder stood after its packet (VtBranch.offset: libipt has
 * read on through timing packets up to the next decision), its packet is
 * the last deciding one before there, and the CYCs after that packet
 * count for the next one (perf reads them only then).  The state up to
 * the last deciding packet is kept; what lies after it is read again at
 * the next branch. */
#include "config.h"

#include <intel-pt.h>
#include <string.h>

#include "src/decode/internal.h"

#define CHUNK (64 * 1024)

typedef struct {
	guint64 pos;                     /* queue offset of the next packet */
	guint64 total;                   /* CYC counts while tracing was on */
	gboolean came;                   /* CYCs since the last sample (perf's sample_cyc) */
	gboolean on;                     /* tracing on (perf's pge) */
	gboolean in_psb;
	gboolean in_fup;                 /* between an asynchronous FUP and its TIP */
	gboolean after_cyc;              /* the last packet was a CYC */
	gboolean thresh;                 /* CYC threshold set: cycles count only just before a packet */
} State;

struct VtDecodeCycles {
	VtDecodeReadFunc read;
	gpointer ctx;
	guint64 len;                     /* bytes in the queue */
	State s;                         /* up to the last deciding packet */
	guint8 *chunk;
	guint64 chunk_off;
	gsize chunk_len;
	struct pt_packet_decoder *pkt;
};

VtDecodeCycles *vt_decode_cycles_new(VtDecodeReadFunc read, gpointer ctx, guint64 len, gboolean thresh)
{
	VtDecodeCycles *c = g_new0(VtDecodeCycles, 1);

	c->s.thresh = thresh;
	c->read = read;
	c->ctx = ctx;
	c->len = len;
	c->chunk = g_malloc(CHUNK + 16);
	return c;
}

void vt_decode_cycles_free(VtDecodeCycles *c)
{
	if (!c)
		return;
	if (c->pkt)
		pt_pkt_free_decoder(c->pkt);
	g_free(c->chunk);
	g_free(c);
}

/* The chunk read from queue offset off on (a packet decoder on it). */
static gboolean load(VtDecodeCycles *c, guint64 off)
{
	struct pt_config cfg;

	c->chunk_off = off;
	c->chunk_len = (gsize)MIN((guint64)CHUNK, c->len - off);
	memset(c->chunk + c->chunk_len, 0, 16);
	if (!c->read(c->ctx, off, c->chunk, c->chunk_len, NULL))
		return FALSE;
	if (c->pkt)
		pt_pkt_free_decoder(c->pkt);
	pt_config_init(&cfg);
	cfg.begin = c->chunk;
	cfg.end = c->chunk + c->chunk_len;
	cfg.decode.callback = vt_decode_unknown_packet;
	c->pkt = pt_pkt_alloc_decoder(&cfg);
	return c->pkt != NULL;
}

/* The packet at queue offset off: its size, 0 at the end or where none
 * can be read. */
static int packet_at(VtDecodeCycles *c, guint64 off, struct pt_packet *p)
{
	for (int again = 0; again < 2; again++) {
		int size;

		if (off >= c->len)
			return 0;
		if ((!c->pkt || off < c->chunk_off || off >= c->chunk_off + c->chunk_len) && !load(c, off))
			return 0;
		if (pt_pkt_sync_set(c->pkt, off - c->chunk_off) < 0)
			return 0;
		size = pt_pkt_next(c->pkt, p, sizeof(*p));
		if (size > 0)
			return size;
		if (size != -pte_eos || c->chunk_off + c->chunk_len >= c->len || !load(c, off))
			return 0;              /* cut at the chunk's end: read from the packet on */
	}
	return 0;
}

/* The next PSB after queue offset from (c->len: none): where libipt goes
 * on after data it cannot read. */
static guint64 next_psb(VtDecodeCycles *c, guint64 from)
{
	while (from < c->len && load(c, from)) {
		uint64_t at = 0;

		if (pt_pkt_sync_forward(c->pkt) >= 0 && pt_pkt_get_sync_offset(c->pkt, &at) >= 0)
			return c->chunk_off + at;
		if (c->chunk_off + c->chunk_len >= c->len || c->chunk_len <= 16)
			break;
		from = c->chunk_off + c->chunk_len - 15;   /* a PSB across the chunks' seam */
	}
	return c->len;
}

/* The packets that decide branches. */
enum { P_TNT = 1, P_TIP = 2, P_PGE = 4, P_PGD = 8, P_FUP = 16 };

/* p applied to s; what kind of deciding packet it is (0: none).  With a
 * CYC threshold (the CPU writes CYC packets only after that many cycles)
 * perf forgets cycles at every packet that no CYC packet came right
 * before - but not inside PSB+ nor between a FUP and its TIP, which it
 * reads elsewhere. */
static int apply(State *s, const struct pt_packet *p)
{
	gboolean after_cyc = s->after_cyc;

	s->after_cyc = p->type == ppt_cyc;
	if (p->type == ppt_tnt_8 || p->type == ppt_tnt_64)
		s->in_fup = FALSE;               /* (a FUP of its own: after an overflow) */
	if (s->thresh && !after_cyc && !s->in_psb && !s->in_fup)
		s->came = FALSE;
	switch (p->type) {
	case ppt_cyc:
		if (s->on)
			s->total += p->payload.cyc.value;
		s->came = TRUE;
		return 0;
	case ppt_psb:
		s->in_psb = TRUE;
		s->in_fup = FALSE;
		return 0;
	case ppt_psbend:
		s->in_psb = FALSE;
		return 0;
	case ppt_ovf:
		s->on = FALSE;
		return 0;
	case ppt_fup:                    /* in PSB+ (none), after an overflow, before an asynchronous TIP */
		s->on = TRUE;
		s->in_fup = !s->in_psb;
		return s->in_psb ? 0 : P_FUP;
	case ppt_tip_pge:
		s->on = TRUE;
		return P_PGE;
	case ppt_tip_pgd:
		s->on = FALSE;
		s->in_fup = FALSE;
		return P_PGD;
	case ppt_tip:
		s->in_fup = FALSE;
		return P_TIP;
	case ppt_tnt_8: case ppt_tnt_64:
		return P_TNT;
	default:
		return 0;
	}
}

/* The packets up to the next one of the kinds in want that starts before
 * queue offset off, deciding packets of other kinds on the way skipped
 * (nothing else consumed them: an overflow's, ...) - or with any_off the
 * next deciding packet wherever it starts, if it is of those kinds:
 * TRUE when there is one - it decides the branch at off (the first its
 * packet decides).  Else nothing is consumed: the next deciding packet is
 * a later branch's (libipt read through it to see events coming). */
static gboolean take(VtDecodeCycles *c, guint64 off, int want, gboolean any_off)
{
	State t = c->s, u;

	while (t.pos < c->len) {
		struct pt_packet p;
		int size = packet_at(c, t.pos, &p), kind;

		if (size <= 0) {         /* bad data: on from the next PSB, as libipt */
			t.pos = next_psb(c, t.pos + 1);
			continue;
		}
		u = t;                   /* (what it is depends on the state: a FUP in PSB+ decides nothing) */
		kind = apply(&u, &p);
		if (kind && !any_off && t.pos >= off)
			return FALSE;
		t = u;
		t.pos += (guint64)size;
		if (kind & want) {
			c->s = t;
			return TRUE;
		}
		if (kind && any_off)
			return FALSE;            /* not the one expected: consume nothing */
	}
	return FALSE;
}

gboolean vt_decode_cycles_branch(VtDecodeCycles *c, guint64 off, VtCyclesHow how, guint64 *cycles)
{
	static const int want[] = {
		[VT_CYCLES_TAKEN] = P_TNT, [VT_CYCLES_NOT_TAKEN] = P_TNT, [VT_CYCLES_RETURN] = P_TNT | P_TIP,
		[VT_CYCLES_TIP] = P_TIP, [VT_CYCLES_ASYNC] = P_TIP | P_PGD, [VT_CYCLES_VMENTRY] = P_TIP,
		[VT_CYCLES_BEGIN] = P_PGE, [VT_CYCLES_RESUME] = P_FUP | P_PGE, [VT_CYCLES_END] = P_PGD,
	};

	if (!take(c, off, want[how], how == VT_CYCLES_VMENTRY))
		return FALSE;
	if (how == VT_CYCLES_END)
		return FALSE;
	if (how == VT_CYCLES_NOT_TAKEN || !c->s.came) {
		c->s.came = FALSE;
		return FALSE;
	}
	c->s.came = FALSE;
	*cycles = c->s.total;
	return TRUE;
}
