/* queue.c - one AUX queue through libipt's block decoder: host and guest
 * images swapped on every paging event's NR bit (strategy D), blocks and
 * events turned into branches, errors recorded and decoding resumed at the
 * next PSB.
 *
 * Windows.  A queue is read a window at a time (its reader: pread), so
 * memory does not grow with the AUX data: a window starts at a PSB (the
 * first at the queue's start) and ends at the first PSB (the seam) after
 * `window` bytes; its buffer also holds the bytes up to the PSB after the
 * seam.  The window's decoder runs through the seam's PSB+ until its first
 * status event (PIP, VMCS, ... restated) and stops there: everything before
 * the PSB has been delivered then, and a fresh decoder synchronised at the
 * seam delivers the same status events, blocks and events from there on -
 * libipt reports no trace begin when it synchronises at a PSB+ with a FUP,
 * as it reports none when it decodes through one.  What PSB+ does not
 * restate stays in this file's state across the seam: the pending branch
 * (its target is the next block's start), a pending asynchronous branch,
 * host/guest when PSB+ has no PIP and the VMCS when it has no VMCS packet.
 * libipt's own state that a fresh decoder lacks: the return-compression
 * stack (hardware compresses no return across a PSB) and the CYC
 * calibration (perf's files give nom_freq: CBR, in PSB+, calibrates).
 *
 * Ranges.  A queue may be decoded in pieces, each by a decoder of its own
 * in a thread of its own (recording.c): vt_decode_queue_range() decodes
 * from one boundary PSB to the next.  What a window's decoder takes over
 * from the one before it, a range's decoder makes itself: it decodes the
 * PSB segment before its start with all its state and emits nothing
 * (muted) - the pending branch, the last instruction count, host/guest,
 * the VMCS are then what they are in a decoder that came from the queue's
 * start - and it stops at its end's PSB+ as a window stops at its seam.
 * That holds where both PSB+s say what the decoder needs - a boundary's
 * and its warm-up's PSB+ end with PSBEND, have a FUP (tracing on) and a
 * PIP (host or guest: a guest's user code traced with intel_pt//k has
 * PSB+s with neither, and a range started after them would walk guest
 * code in the host's image) - and the segment between has a branch (not
 * checked: tracing is on at its start, and its packets are branches').
 * One thing reaches back further: monotonic()'s last time, the latest of
 * everything emitted before; a range counts its own (not its warm-up's)
 * and the reader takes the latest of the ranges before it
 * (vt_decode_queue_last_time).  Where the trace contradicts itself at a
 * PSB (corrupt data, a wrong image: the walk is not where the PSB+'s FUP
 * says), a range and one decoder can be out of step differently.  (Not
 * with cycles: cycles.c reads the queue from its start.) */
#include "config.h"

#include <string.h>

#include "src/decode/internal.h"

/* Blocks decoded without the trace moving on: libipt is walking code in
 * a loop no packet ends (only bad data does that). */
#define NO_PROGRESS_LIMIT 1000000

/* Blocks the walker may join into one (vt_walk_next_joined) where jumps
 * are dropped. */
#define JOIN_MAX 256


typedef struct VtDecodeQueue Dec;

#define MAX_PSB 8

/* Poked pages whose version walk_code() keeps at hand, per source (host,
 * guest) of a queue: the real boot's blocks on poked pages hop between a
 * few pages - with one memo 0.72 M of its --call-trace's 6.99 M reads
 * of them looked the version up again. */
#define POKE_MEMOS 8

/* The instructions that end blocks, decoded once: a direct-mapped cache
 * (bounded: a trace that visits the whole kernel does not grow it). */
#define CACHE_SIZE (1u << 15)
typedef struct {
	guint64 ip;                      /* 0: empty */
	guint64 tag;                     /* poked code: its versions (textpoke.c) */
	guint8 mode;                     /* VT_MODE_* it was decoded in */
	VtInsn insn;
} Cached;

struct VtDecodeQueue {
	VtWalk *dec;                     /* walk.c (libipt's block decoder with VMTRACE_DECODER=blk) */
	struct pt_image *pi[2];          /* host, guest */
	VtDecodeImage *img[2];
	VtDecodePokeView *view[2];       /* poked pages done with their pokes, in pi[] */
	struct PokeCtx { Dec *d; const VtDecodeImage *img; } poke[2];   /* poke_read()'s */
	VtDecodePokeMemo memo[2][POKE_MEMOS];   /* walk_code()'s poked pages read last (host, guest source; by page) */
	VtDecodeCodeFunc code;           /* guest code not in img[1] (vt_decode_queue_set_code) */
	gpointer code_ctx;
	Cached *cache[2];                /* CACHE_SIZE instructions each, by ip */
	gboolean guest;                  /* NR of the last paging event */
	guint64 vmcs;
	/* the last block's final instruction: a branch whose target the next
	 * block (or event) tells */
	gboolean have_pend;
	guint64 pend_ip;
	VtInsn pend;
	guint8 pend_mode;                /* its execution mode (the block's) */
	guint8 mode_now;                 /* the last block's */
	guint8 async_mode;               /* the interrupted code's (have_async) */
	gboolean pend_guest;
	guint64 pend_tsc;                /* time when its trace was read */
	guint64 pend_off;                /* AUX offset then (see emit_at()) */
	guint64 before;                  /* libipt's time before the current step */
	guint64 after;                   /* ... and the time of its last branch (step()) */
	/* an asynchronous branch waiting for its paging event (VM exit) */
	gboolean have_async;
	guint64 async_from, async_to;
	gboolean async_guest;
	guint64 async_tsc, async_off;
	guint64 last_ip;
	guint64 last_tsc;                /* the time of the last branch emitted (see monotonic()) */
	guint ovf;                       /* OVF packets since the last branch emitted */
	guint32 insns;                   /* instructions since then (VtBranch.insns) */
	/* power events (VtDecodeOptions.power): a PSB+ and a new core:bus
	 * ratio wait for the IP they bind to (the next block's) */
	gboolean power;
	gboolean drop_jumps;             /* vt_decode_queue_set_drop_jumps */
	guint64 joined;                  /* blocks the walker joined (vt_decode_queue_joined) */
	guint64 walk_ip;                 /* the walk's next IP before the event in process */
	gboolean resuming;               /* emitting the trace begin after an overflow */
	/* the branch before an overflow whose trace came before it (libipt's
	 * block decoder cannot say where it went: VMTRACE_DECODER=blk, and
	 * VMTRACE_OVF_BRANCH=0 for the walker in the test comparing them) */
	gboolean ovf_branch;
	/* a branch before an event that does not decide it: the time before
	 * the event's packets (libipt's block decoder cannot tell it:
	 * VMTRACE_EVENT_TIME=0 for the walker in the test comparing them) */
	gboolean time_before_event;
	VtDecodeCycles *cycles;          /* vt_decode_queue_set_cycles */
	/* flow end (VtDecodeOptions.flow_end): past the last conditional
	 * jump not taken since the last branch */
	gboolean flow_end, have_nt;
	gboolean flow_psb;               /* a PSB+ since the last block: the flow so far ran before it */
	guint64 flow_psb_ip, flow_psb_tsc;   /* the last PSB+'s IP and own time (its MODE.Exec's) */
	guint64 flow_tsc;                /* the time of the PSB+ the flow since then ran after (0: none) */
	guint64 nt_ip, nt_tsc, nt_off;
	guint32 nt_insns;                /* d->insns up to nt_ip */
	gboolean nt_guest;
	guint8 nt_mode;
	guint npsb;                      /* PSBs waiting (PSB+ after PSB+ binds to one IP) */
	guint64 psb_off[MAX_PSB], psb_tsc[MAX_PSB];
	guint64 last_psb;                /* queue offset; G_MAXUINT64: none yet */
	gboolean have_cbr;
	guint8 cbr, cbr_seen;
	guint64 cbr_off;                 /* AUX offset where the ratio was read */
	/* the source of the next branch emitted (see source()) */
	gboolean src_async;
	guint8 src_kind, src_len, src_mode;
	GArray *out;
	guint out_room;                  /* elements out has room for (out_add()) */
	guint out_len;                   /* out's length while a batch is made (out->len set at its end) */
	/* the queue's AUX data, read a window at a time */
	VtDecodeReadFunc read;
	gpointer read_ctx;
	GDestroyNotify read_free;
	guint64 total;                   /* bytes in the queue */
	guint64 window;                  /* a window's size (at least; it ends at a PSB) */
	VtDecodeCpu cpu;
	guint64 base;                    /* queue offset of buf[0] */
	guint64 seam;                    /* buffer offset of the next window's PSB; G_MAXUINT64: last */
	gsize len;                       /* of the buffer */
	guint8 *buf;                     /* the window's bytes (16 zeros after them) */
	gsize buf_size;
	gboolean at_seam;                /* the decoder reached the seam's PSB+ */
	guint64 begin;                   /* buffer offset of the window's first PSB */
	gboolean warming;                /* decoding the PSB segment before it, silently */
	gboolean muted;                  /* a range's start: that segment with all state, nothing emitted */
	guint64 stop_at;                 /* a range's end (a PSB's queue offset), else total */
	VtBranch scratch;                /* muted: where out_add() writes */
	GError *error;                   /* reading failed */
	/* where decoding stands, between calls of vt_decode_queue_next() */
	gboolean synced, done;
	int status;
	uint64_t prev_sync, last_off;
	guint stuck;
	gboolean time_known;             /* libipt's time is still d->now_tsc (step()) */
	guint64 now_tsc;                 /* libipt's time as last read */
	gboolean use_blk;                /* VMTRACE_DECODER=blk: libipt's block decoder */
};

/* The AUX offset of the decoder's position.  After a failed sync at the
 * very end, libipt 2.0.5 leaves it one byte past the buffer: never past. */
static guint64 position(const Dec *d)
{
	uint64_t off = 0;

	vt_walk_get_offset(d->dec, &off);
	return d->base + MIN(off, (guint64)d->len);
}

/* The decoder has read past the PSB at buffer offset `psb`. */
static gboolean past(const Dec *d, guint64 psb)
{
	uint64_t off = 0;

	vt_walk_get_offset(d->dec, &off);
	return psb != G_MAXUINT64 && off > psb;
}

/* Warming up: the events of the PSB segment before the window only switch
 * the image (libipt's timing state - CYC calibration - is what the warm-up
 * is for); TRUE when the window's first PSB+ is reached: the state is the
 * previous window's from there. */
static gboolean warm_event(Dec *d, const struct pt_event *ev)
{
	if (ev->status_update && past(d, d->begin)) {
		d->warming = FALSE;
		vt_walk_set_source(d->dec, d->guest, d->pi[d->guest ? 1 : 0]);
		return TRUE;
	}
	if (ev->type == ptev_paging)
		vt_walk_set_source(d->dec, ev->variant.paging.non_root, d->pi[ev->variant.paging.non_root ? 1 : 0]);
	else if (ev->type == ptev_async_paging)
		vt_walk_set_source(d->dec, ev->variant.async_paging.non_root,
				   d->pi[ev->variant.async_paging.non_root ? 1 : 0]);
	return FALSE;
}

static guint64 now(Dec *d);

/* Guest code that the guest image does not have (guest user space: the
 * lower half): the code hook's at the decoder's time; FALSE when there is
 * no hook or img has code at ip. */
static gboolean hooked_code(Dec *d, const VtDecodeImage *img, guint64 ip, const guint8 **code, gsize *avail)
{
	if (!d->code || img != d->img[1] || d->img[1] == d->img[0] || ip >> 47 ||
	    vt_decode_image_code_own(img, ip, avail))
		return FALSE;
	*code = d->code(d->code_ctx, now(d), ip, avail);
	return TRUE;
}

/* libipt's read of the guest image's code, guest user space through the
 * code hook (instead of image.c's read callback). */
static int guest_read(uint8_t *buffer, size_t size, const struct pt_asid *asid, uint64_t ip, void *context)
{
	Dec *d = context;
	gsize avail = 0;
	const guint8 *code = NULL;

	(void)asid;
	if (!hooked_code(d, d->img[1], ip, &code, &avail))
		code = vt_decode_image_code_own(d->img[1], ip, &avail);
	if (!code)
		return -pte_nomap;
	size = MIN(size, avail);
	memcpy(buffer, code, size);
	return (int)size;
}

/* libipt's read of a page that a TEXT_POKE changes, as long as it has no
 * section (textpoke.c): its bytes at the decoder's time (libipt's time
 * while it walks code: the last timing packet before the branch that it
 * will resolve next); guest user space through the code hook. */
static int poke_read(uint8_t *buffer, size_t size, const struct pt_asid *asid, uint64_t ip, void *context)
{
	const struct PokeCtx *c = context;
	gsize n = vt_decode_pokes_read(vt_decode_image_pokes(c->img), c->img, ip, now(c->d), buffer, size);
	const guint8 *code = NULL;
	gsize avail = 0;

	(void)asid;
	if (!n && hooked_code(c->d, c->img, ip, &code, &avail) && code) {
		n = MIN(size, avail);
		memcpy(buffer, code, n);
	}
	return n ? (int)n : -pte_nomap;
}

static const VtInsn *insn_at(Dec *d, guint64 ip, guint8 mode)
{
	int w = d->guest ? 1 : 0;
	Cached *c = &d->cache[w][(ip ^ (ip >> 15)) & (CACHE_SIZE - 1)];
	const VtDecodePokes *p = d->view[w] ? vt_decode_image_pokes(d->img[w]) : NULL;
	guint8 b[16];
	guint64 tag = 0;
	gsize n = p ? vt_decode_pokes_read_tag(p, d->img[w], ip, now(d), b, sizeof(b), &tag) : 0;
	const guint8 *user = NULL;
	gboolean hooked = !tag && hooked_code(d, d->img[w], ip, &user, &n);

	if (hooked)                      /* guest user code: a process's bytes (1: none) */
		tag = user ? (guint64)(guintptr)user : 1;
	if (c->ip == ip && ip && c->tag == tag && c->mode == mode)
		return &c->insn;
	c->ip = ip;
	c->tag = tag;
	c->mode = mode;
	if (hooked)
		vt_decode_insn_bytes_mode(user, user ? n : 0, ip, mode, &c->insn);
	else if (tag)                    /* poked code: its bytes now */
		vt_decode_insn_bytes_mode(n ? b : NULL, n, ip, mode, &c->insn);
	else
		vt_decode_insn_mode(d->img[w], ip, mode, &c->insn);
	return &c->insn;
}

/* The decoder's time now (0 when the trace has none yet). */
static guint64 now(Dec *d)
{
	uint64_t tsc = 0;

	return vt_walk_time(d->dec, &tsc) < 0 ? 0 : tsc;
}

/* Poked pages whose last poke the decoder's time has passed get their
 * section (textpoke.c), before it walks code. */
static void pokes_now(Dec *d)
{
	uint64_t tsc = 0;

	/* (libipt's block decoder reads the image's sections; the walker
	 * reads poked pages at its time itself: walk_code) */
	if ((d->view[0] || d->view[1]) && d->use_blk && vt_walk_time(d->dec, &tsc) >= 0)
		for (int i = 0; i < 2; i++)
			if (d->view[i])
				vt_decode_poke_view_at(d->view[i], tsc);
}

/* What the next emitted branch's source instruction is (pending
 * instruction) or that it is asynchronous. */
static void source(Dec *d, gboolean async, const VtInsn *in)
{
	d->src_async = async;
	d->src_kind = in ? in->kind : VT_INSN_OTHER;
	d->src_len = in ? in->len : 0;
	d->src_mode = in ? d->pend_mode : async ? d->async_mode : d->mode_now;
}

/* Time never goes back within a queue (one thread, or one CPU): perf's
 * rule - a sample earlier than the queue's last one gets the last one's
 * time.  libipt's estimate can step back: at a TSC that is not host time
 * (a guest's, not corrected), or where CYC packets span MTCs (CYC
 * threshold) and its estimate ran ahead of the next MTC.  Only what this
 * queue emitted counts, so every window size gives the same times. */
static guint64 monotonic(Dec *d, guint64 tsc)
{
	if (tsc < d->last_tsc)
		return d->last_tsc;
	d->last_tsc = tsc;
	return tsc;
}

/* The time of an event: its own (libipt's time at its packet) when it has
 * one; libipt's time now may already be a later packet's. */
static guint64 event_time(Dec *d, const struct pt_event *ev)
{
	return ev->has_tsc ? ev->tsc : now(d);
}

/* A branch decided at time tsc and AUX offset off: where the decoder
 * stood when it had read the packet that decided it (taken when it is read,
 * never later: how far libipt reads ahead by then depends on the shared
 * block cache - a block ends where another thread's decoder first filled
 * the cache - so a later position would differ from run to run). */
/* A new branch at the end of the batch, zeroed: written in place (the
 * batch grows a few times per batch, not per branch). */
static VtBranch *out_add(Dec *d)
{
	GArray *a = d->out;
	guint n = d->out_len;
	VtBranch *b;

	if (G_UNLIKELY(d->muted)) {
		memset(&d->scratch, 0, sizeof(d->scratch));
		return &d->scratch;
	}
	if (G_UNLIKELY(n >= d->out_room)) {
		g_array_set_size(a, n + MAX(n, 256u));
		d->out_room = a->len;
	}
	d->out_len = n + 1;
	b = &g_array_index(a, VtBranch, n);
	memset(b, 0, sizeof(*b));
	return b;
}

/* A plain jump not emitted (vt_decode_queue_set_drop_jumps): the state
 * moves on as emit_at() moves it. */
static void drop_jump(Dec *d, guint64 tsc)
{
	source(d, FALSE, NULL);
	(void)monotonic(d, tsc);
	d->ovf = 0;
	d->have_nt = FALSE;
}

/* What a branch of kind decided at AUX offset off does to the cycles
 * count (cond: a conditional jump; NOT_TAKEN: one not taken, kind
 * ignored); TRUE when it is an IPC sample (*cycles). */
#define NOT_TAKEN 2
static gboolean cycles_at(Dec *d, VtBranchKind kind, gboolean cond, guint64 off, guint64 *cycles)
{
	VtCyclesHow how;

	if (!d->cycles || kind >= VT_BRANCH_ERROR)
		return FALSE;            /* (not a branch) */
	if (!d->src_async && (d->src_kind == VT_INSN_CALL || d->src_kind == VT_INSN_JUMP))
		return FALSE;            /* direct: no packet */
	switch (kind) {
	case VT_BRANCH_JUMP: how = cond == NOT_TAKEN ? VT_CYCLES_NOT_TAKEN : cond ? VT_CYCLES_TAKEN : VT_CYCLES_TIP; break;
	case VT_BRANCH_RETURN: how = VT_CYCLES_RETURN; break;
	case VT_BRANCH_ASYNC: case VT_BRANCH_VMEXIT: how = VT_CYCLES_ASYNC; break;
	case VT_BRANCH_VMENTRY: how = VT_CYCLES_VMENTRY; break;
	case VT_BRANCH_TRACE_BEGIN: how = d->resuming ? VT_CYCLES_RESUME : VT_CYCLES_BEGIN; break;
	case VT_BRANCH_TRACE_END: how = d->src_async ? VT_CYCLES_ASYNC : VT_CYCLES_END; break;   /* FUP, TIP.PGD */
	default: how = VT_CYCLES_TIP; break;
	}
	return vt_decode_cycles_branch(d->cycles, off, how, cycles);
}

static void emit_at(Dec *d, VtBranchKind kind, guint64 from, guint64 to, gboolean from_guest, gboolean to_guest,
		    gboolean cond, guint64 tsc, guint64 off)
{
	VtBranch *b;
	guint64 cycles = 0;
	gboolean ipc = cycles_at(d, kind, cond, off, &cycles);   /* (a dropped jump's packet too) */

	if (G_UNLIKELY(d->drop_jumps) && kind == VT_BRANCH_JUMP) {
		drop_jump(d, tsc);
		return;
	}
	b = out_add(d);
	b->ipc = (guint8)ipc;
	b->cycles = cycles;

	b->async = d->src_async;
	b->insn_kind = d->src_kind;
	b->insn_len = d->src_len;
	b->mode = d->src_mode;
	source(d, FALSE, NULL);

	b->from = from;
	b->to = to;
	b->tsc = monotonic(d, tsc);
	b->vmcs = d->vmcs;
	b->kind = kind;
	b->from_guest = from_guest;
	b->to_guest = to_guest;
	b->conditional = cond;
	b->offset = off;
	b->overflows = (guint8)MIN(d->ovf, 255);
	d->ovf = 0;
	if (kind < VT_BRANCH_PSB)
		d->have_nt = FALSE;
	if (kind < VT_BRANCH_PSB || kind == VT_BRANCH_FLOW_END) {
		b->insns = d->insns;
		d->insns = 0;
	}
}

/* An OVF's error line (VT_DECODE_ERR_OVERFLOW), as perf prints it: at the
 * IP where tracing resumed (0: none), at the OVF's time; the OVF count and
 * the instructions before it stay for the branch after it. */
static void emit_overflow(Dec *d, const struct pt_event *ev)
{
	VtBranch b = { 0 };

	b.kind = VT_BRANCH_ERROR;
	b.code = VT_DECODE_ERR_OVERFLOW;
	b.tsc = monotonic(d, event_time(d, ev));
	b.from = ev->ip_suppressed ? 0 : ev->variant.overflow.ip;
	b.from_guest = b.to_guest = d->guest;
	b.offset = position(d);
	b.vmcs = d->vmcs;
	*out_add(d) = b;
}

static void emit_error(Dec *d, int status)
{
	VtBranch b = { 0 };

	b.kind = VT_BRANCH_ERROR;
	b.tsc = monotonic(d, now(d));    /* perf prints its decoder's time */
	b.from = d->last_ip;
	b.from_guest = b.to_guest = d->guest;
	b.code = (gint8)pt_errcode(status);
	b.offset = position(d);
	b.vmcs = d->vmcs;
	b.overflows = (guint8)MIN(d->ovf, 255);
	d->ovf = 0;
	b.insns = d->insns;
	d->insns = 0;
	*out_add(d) = b;
	d->have_pend = d->have_async = FALSE;
}

/* The pending instruction went to `to`: a branch if it is one (a
 * conditional one only when taken). */
static void resolve(Dec *d, guint64 to)
{
	static const guint8 kind_of[] = {
		[VT_INSN_JUMP] = VT_BRANCH_JUMP, [VT_INSN_CALL] = VT_BRANCH_CALL,
		[VT_INSN_JUMP_IND] = VT_BRANCH_JUMP, [VT_INSN_CALL_IND] = VT_BRANCH_CALL,
		[VT_INSN_RETURN] = VT_BRANCH_RETURN, [VT_INSN_SYSCALL] = VT_BRANCH_SYSCALL,
		[VT_INSN_SYSRET] = VT_BRANCH_SYSRET, [VT_INSN_IRET] = VT_BRANCH_IRET,
		[VT_INSN_INT] = VT_BRANCH_INT, [VT_INSN_FAR] = VT_BRANCH_JUMP,
	};
	const VtInsn *in = &d->pend;

	if (!d->have_pend)
		return;
	d->have_pend = FALSE;
	source(d, FALSE, in);
	switch (in->kind) {
	case VT_INSN_COND:
		if (to != d->pend_ip + in->len) {
			emit_at(d, VT_BRANCH_JUMP, d->pend_ip, to, d->pend_guest, d->guest, TRUE, d->pend_tsc,
				d->pend_off);
			return;
		}
		if (G_UNLIKELY(d->cycles)) {
			guint64 cycles;

			(void)cycles_at(d, VT_BRANCH_JUMP, NOT_TAKEN, d->pend_off, &cycles);
		}
		d->have_nt = TRUE;
		d->nt_ip = to;
		d->nt_guest = d->pend_guest;
		d->nt_tsc = d->pend_tsc;
		d->nt_off = d->pend_off;
		d->nt_mode = d->pend_mode;
		d->nt_insns = d->insns;
		return;
	case VT_INSN_VMENTRY:
		if (d->guest && !d->pend_guest)
			emit_at(d, VT_BRANCH_VMENTRY, d->pend_ip, to, FALSE, TRUE, FALSE, d->pend_tsc, d->pend_off);
		return;
	case VT_INSN_JUMP: case VT_INSN_CALL: case VT_INSN_JUMP_IND: case VT_INSN_CALL_IND:
	case VT_INSN_RETURN: case VT_INSN_SYSCALL: case VT_INSN_SYSRET: case VT_INSN_IRET:
	case VT_INSN_INT: case VT_INSN_FAR:
		emit_at(d, kind_of[in->kind], d->pend_ip, to, d->pend_guest, d->guest, FALSE, d->pend_tsc, d->pend_off);
		return;
	default:
		return;                  /* the block ended for another reason */
	}
}

/* An asynchronous branch no paging event followed: an interrupt. */
static void flush_async(Dec *d)
{
	if (!d->have_async)
		return;
	d->have_async = FALSE;
	source(d, TRUE, NULL);
	emit_at(d, VT_BRANCH_ASYNC, d->async_from, d->async_to, d->async_guest, d->guest, FALSE, d->async_tsc,
		d->async_off);
}

/* The queue offset of the PSB whose PSB+ the decoder is in: the last one
 * at or before its position (libipt delivers PSB+'s events at PSBEND). */
static guint64 psb_here(const Dec *d)
{
	static const guint8 psb[16] = { 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82 };
	guint64 end = position(d) - d->base;
	guint64 lo = end > 4096 ? end - 4096 : 0;

	for (guint64 at = end >= sizeof(psb) ? end - sizeof(psb) + 1 : 0; at-- > lo;)
		if (d->buf[at] == 2 && !memcmp(d->buf + at, psb, sizeof(psb)))
			return d->base + at;
	return G_MAXUINT64;
}

static void on_cbr(Dec *d, guint8 ratio)
{
	if (!d->have_cbr || ratio != d->cbr)
		d->cbr_off = position(d);
	d->cbr = ratio;
	d->have_cbr = d->power && ratio != d->cbr_seen;
}

/* The pending power events, bound to ip (in the current machine). */
static void flush_power(Dec *d, guint64 ip)
{
	guint64 tsc = d->npsb ? d->psb_tsc[d->npsb - 1] : now(d);

	for (guint i = 0; i < d->npsb; i++) {
		emit_at(d, VT_BRANCH_PSB, ip, 0, d->guest, d->guest, FALSE, d->psb_tsc[i], d->psb_off[i]);
	}
	d->npsb = 0;
	if (d->have_cbr) {
		d->have_cbr = FALSE;
		d->cbr_seen = d->cbr;
		emit_at(d, VT_BRANCH_CBR, ip, d->cbr, d->guest, d->guest, FALSE, tsc, d->cbr_off);
	}
}

/* Power events pending at an asynchronous branch or disable at ip, or at
 * the trace's end, with no instruction since they were read (on_block()
 * flushes them at every block): at the PSB+'s IP (ip), in the machine
 * it names - as perf - not where the trace goes on (a VM exit's target,
 * the host's vmx_vmexit; nowhere after a disable). */
static void flush_power_at(Dec *d, guint64 ip)
{
	if (!d->npsb && !d->have_cbr)
		return;
	d->src_mode = d->mode_now;
	flush_power(d, ip);
}

/* The TSC of the PSB+ at buffer offset psb (0: none, timeless). */
static guint64 psb_tsc(const Dec *d, guint64 psb)
{
	struct pt_config cfg;
	struct pt_packet_decoder *pd;
	struct pt_packet p;
	guint64 tsc = 0;

	pt_config_init(&cfg);
	cfg.begin = d->buf;
	cfg.end = d->buf + d->len;
	cfg.decode.callback = vt_decode_unknown_packet;
	pd = pt_pkt_alloc_decoder(&cfg);
	if (!pd)
		return 0;
	if (pt_pkt_sync_set(pd, psb) >= 0)
		for (int i = 0; i < 64 && pt_pkt_next(pd, &p, sizeof(p)) >= 0 && p.type != ppt_psbend; i++)
			if (p.type == ppt_tsc) {
				tsc = p.payload.tsc.tsc;
				break;
			}
	pt_pkt_free_decoder(pd);
	return tsc;
}

/* A status event of a PSB+: the PSB is an event once (perf's psb). */
static void on_status(Dec *d, const struct pt_event *ev)
{
	guint64 at, tsc;

	if (d->flow_end && ev->status_update)
		d->flow_psb = TRUE;
	if (d->flow_end && ev->status_update && ev->type == ptev_exec_mode) {
		/* (a PSB+'s CBR event can come before the block ahead of it) */
		d->flow_psb_ip = ev->variant.exec_mode.ip;
		d->flow_psb_tsc = ev->has_tsc ? ev->tsc : 0;
	}
	if (!d->power || !ev->status_update || (at = psb_here(d)) == G_MAXUINT64 || at == d->last_psb)
		return;
	d->last_psb = at;
	if (d->npsb == MAX_PSB)
		flush_power(d, 0);
	d->psb_off[d->npsb] = at;
	tsc = psb_tsc(d, at - d->base);
	d->psb_tsc[d->npsb++] = tsc ? tsc : now(d);
}

static void set_guest(Dec *d, gboolean guest)
{
	if (guest == d->guest)
		return;
	d->guest = guest;
	vt_walk_set_source(d->dec, guest, d->pi[guest ? 1 : 0]);
}

static void on_paging(Dec *d, gboolean non_root, gboolean status_update)
{
	gboolean was = d->guest;

	set_guest(d, non_root);
	if (status_update || !d->have_async)
		return;
	d->have_async = FALSE;
	source(d, TRUE, NULL);
	emit_at(d, was && !non_root ? VT_BRANCH_VMEXIT : VT_BRANCH_ASYNC, d->async_from, d->async_to, was, non_root,
		FALSE, d->async_tsc, d->async_off);
}

static void on_event(Dec *d, const struct pt_event *ev)
{
	on_status(d, ev);
	switch (ev->type) {
	case ptev_cbr:
		on_cbr(d, ev->variant.cbr.ratio);
		break;
	case ptev_enabled:
		flush_async(d);
		flush_power(d, 0);
		d->have_pend = FALSE;
		emit_at(d, VT_BRANCH_TRACE_BEGIN, 0, ev->variant.enabled.ip, d->guest, d->guest, FALSE,
			event_time(d, ev), position(d));
		d->last_ip = ev->variant.enabled.ip;
		break;
	case ptev_disabled:
		flush_async(d);
		if (d->have_pend) {
			guint64 from = d->pend_ip;

			d->have_pend = FALSE;
			source(d, FALSE, &d->pend);
			emit_at(d, VT_BRANCH_TRACE_END, from, 0, d->guest, d->guest, FALSE, event_time(d, ev),
				position(d));
		}
		break;
	case ptev_async_disabled:
		flush_async(d);
		resolve(d, ev->variant.async_disabled.at);
		flush_power_at(d, ev->variant.async_disabled.at);
		d->async_mode = d->mode_now;
		source(d, TRUE, NULL);
		emit_at(d, VT_BRANCH_TRACE_END, ev->variant.async_disabled.at, 0, d->guest, d->guest, FALSE,
			event_time(d, ev), position(d));
		break;
	case ptev_async_branch:
		flush_async(d);
		resolve(d, ev->variant.async_branch.from);
		flush_power_at(d, ev->variant.async_branch.from);
		d->have_async = TRUE;
		d->async_from = ev->variant.async_branch.from;
		d->async_to = ev->variant.async_branch.to;
		d->async_guest = d->guest;
		d->async_mode = d->mode_now;
		d->async_tsc = ev->has_tsc ? ev->tsc : now(d);
		d->async_off = position(d);
		d->last_ip = d->async_to;
		break;
	case ptev_paging:
		on_paging(d, ev->variant.paging.non_root, ev->status_update);
		break;
	case ptev_async_paging:
		on_paging(d, ev->variant.async_paging.non_root, FALSE);
		break;
	case ptev_vmcs:
		d->vmcs = ev->variant.vmcs.base;
		break;
	case ptev_async_vmcs:
		d->vmcs = ev->variant.async_vmcs.base;
		break;
	case ptev_overflow:
		/* as perf: the last block's branch if its trace came before the
		 * OVF (the walk went on to its target), then a trace begin where
		 * tracing resumed (with the instructions before the OVF) */
		flush_async(d);
		if (d->have_pend && d->ovf_branch && d->walk_ip && d->walk_ip != d->pend_ip)
			resolve(d, d->walk_ip);
		d->ovf++;
		d->have_pend = FALSE;
		emit_overflow(d, ev);
		if (!ev->ip_suppressed) {
			d->resuming = TRUE;
			emit_at(d, VT_BRANCH_TRACE_BEGIN, 0, ev->variant.overflow.ip, d->guest, d->guest, FALSE,
				event_time(d, ev), position(d));
			d->resuming = FALSE;
			d->last_ip = ev->variant.overflow.ip;
		}
		break;
	default:
		break;
	}
}

/* The instruction that ends a block, into d->pend (kind and length: all
 * that is read of it): a near branch - nearly every block - from the
 * image's bytes without Zydis; anything else, and poked code, through the
 * cache. */
static void block_end(Dec *d, guint64 ip, guint8 mode)
{
	int w = d->guest ? 1 : 0;
	gsize avail;
	const guint8 *code;
	/* the byte classifier knows 64-bit code only; a guest process's code
	 * (the code hook) is read by insn_at() */
	gboolean fast = mode == VT_MODE_64 && !(w == 1 && d->code && !(ip >> 47));

	/* the walker's decoding of it, of the bytes it walked (a poked page's
	 * at the walker's time): not read again */
	if (fast && vt_walk_last_branch(d->dec, ip, &d->pend.kind, &d->pend.len))
		return;
	if (fast && !d->view[w] && (code = vt_decode_image_code(d->img[w], ip, &avail)) &&
	    vt_decode_insn_branch(code, MIN(avail, (gsize)16), &d->pend.kind, &d->pend.len))
		return;
	d->pend = *insn_at(d, ip, mode);
}

/* The jumps between the blocks the walker joined into b (run): what
 * resolve() does with each - the taken ones dropped (drop_jump()), the
 * last conditional one not taken after them kept for the flow end - and
 * the instructions they ran, counted as on_block() counts them.  (No
 * cycles: where the queue counts them the walker joins only within a
 * packet, and none of the jumps was the first its packet decided.) */
static void joined(Dec *d, const VtWalkRun *run, const struct pt_block *b)
{
	if (run->taken) {
		(void)monotonic(d, d->before);
		d->ovf = 0;
		d->have_nt = FALSE;
	}
	if (run->have_nt) {
		d->have_nt = TRUE;
		d->nt_ip = run->nt_ip;
		d->nt_guest = d->guest;
		d->nt_tsc = d->before;
		d->nt_off = d->base + MIN(run->nt_off, (guint64)d->len);
		d->nt_mode = (guint8)b->mode;
		d->nt_insns = d->insns + run->nt_insns;
	}
	if (run->last_nt) {
		VtInsn cond = { .kind = VT_INSN_COND, .len = run->nt_len };

		d->pend_mode = (guint8)b->mode;
		source(d, FALSE, &cond);
	} else {
		source(d, FALSE, NULL);
	}
	d->insns += b->ninsn;
}

/* A block ending at AUX offset off (the decoder's position after it), and
 * blocks joined to it before (run). */
static void on_block(Dec *d, const struct pt_block *b, const VtWalkRun *run, guint64 off)
{
	flush_async(d);
	resolve(d, b->ip);
	d->mode_now = (guint8)b->mode;
	d->src_mode = d->mode_now;      /* power events bind to b->ip */
	if (d->npsb || d->have_cbr)
		flush_power(d, b->ip);
	if (d->flow_psb) {
		/* the instructions up to the PSB+'s IP ran before it (the thread
		 * may change at a PSB+): at the time of the last branch, or of
		 * the PSB+ before if they ran after it - code the kernel patched
		 * is read as of then (the plugin writes a PSB+ at a poke) */
		d->flow_psb = FALSE;
		d->src_mode = d->mode_now;
		emit_at(d, VT_BRANCH_FLOW_END, b->ip, 0, d->guest, d->guest, FALSE, MAX(d->last_tsc, d->flow_tsc),
			run->blocks ? d->base + MIN(run->first_off, (guint64)d->len) : off);   /* (its block's) */
		d->flow_tsc = d->flow_psb_ip == b->ip ? d->flow_psb_tsc : 0;
	}
	if (!b->ninsn)
		return;
	if (run->blocks)
		joined(d, run, b);
	else
		d->insns += b->ninsn;
	block_end(d, b->end_ip, (guint8)b->mode);
	d->pend_mode = (guint8)b->mode;
	d->pend_ip = b->end_ip;
	d->pend_guest = d->guest;
	d->pend_tsc = d->after;
	d->pend_off = off;
	d->have_pend = TRUE;
	d->last_ip = b->end_ip;
}

/* Where the error of pt_blk_next() (status) happened, into d->last_ip
 * (emit_error()'s ip), as perf names it: code that cannot be read or
 * decoded at the instruction libipt failed on - the block's start when it
 * has no instruction (where the last branch went: a corrupt TIP's target),
 * else the one after its last; any other error (a query: the trace does
 * not match, a bad packet) at the branch that asked, the block's last
 * instruction (on_block() set it). */
static void error_ip(Dec *d, const struct pt_block *b, int status)
{
	if (status != -pte_nomap && status != -pte_bad_insn)
		return;
	if (!b->ninsn) {
		flush_async(d);          /* as on_block(): perf prints the branch there, */
		resolve(d, b->ip);       /* then the error */
		d->last_ip = b->ip;
		return;
	}
	d->last_ip = b->end_ip + insn_at(d, b->end_ip, (guint8)b->mode)->len;
}

int vt_decode_unknown_packet(struct pt_packet_unknown *unknown, const struct pt_config *config, const uint8_t *pos,
			     void *context)
{
	(void)unknown;
	(void)config;
	(void)context;
	if (pos[0] == 0x02 && pos[1] == 0x13)
		return 4;
	if (pos[0] == 0x02 && pos[1] == 0x53)
		return 11;
	return -pte_bad_opc;
}

/* One step from a synchronisation point: the pending events and one block
 * (status: what the last call returned); negative at the end or an error. */
static int step(Dec *d, int status)
{
	struct pt_block blk;
	struct pt_event ev;
	VtWalkRun run;
	uint64_t off = 0;
	gboolean events = (status & pts_event_pending) != 0;
	/* jumps dropped: the walker joins blocks (as many as the stuck check allows) */
	guint join = d->drop_jumps && !d->use_blk ? MIN(JOIN_MAX, NO_PROGRESS_LIMIT - MIN(d->stuck, NO_PROGRESS_LIMIT)) : 0;

	while (status & pts_event_pending) {
		d->walk_ip = vt_walk_ip(d->dec);   /* (an overflow moves it) */
		status = vt_walk_event(d->dec, &ev);
		if (status < 0)
			return status;
		if (ev.status_update && past(d, d->seam)) {
			d->at_seam = TRUE;
			return -pte_eos;
		}
		if (d->warming && !warm_event(d, &ev))
			continue;
		if (d->muted && ev.status_update && past(d, d->begin)) {
			d->muted = FALSE;        /* the range's first PSB+: from here on, out; */
			d->last_tsc = 0;         /* the times before: the reader's (and the
						  * warm-up's are libipt's before its timing
						  * state is whole: a window's warm-up emits none) */
		}
		on_event(d, &ev);
	}
	pokes_now(d);             /* (pt_blk_next() clears blk) */
	if ((status & pts_eos) && !d->warming) {
		/* the trace has ended: the next block only tells where the last
		 * branch went (like perf, nothing after it) */
		memset(&blk, 0, sizeof(blk));
		if (vt_walk_next(d->dec, &blk) >= 0 || blk.ninsn) {
			flush_async(d);
			resolve(d, blk.ip);
		}
		/* (a PSB+ at the very end: perf's psb, at its IP) */
		flush_power_at(d, blk.ip ? blk.ip : vt_walk_ip(d->dec));
		return -pte_eos;
	}
	/* libipt's time (its last_time: at the packet that decided its last
	 * query, not the timing packets it read ahead after that) changes
	 * only when it decodes a TNT, TIP or event packet, which moves its
	 * position: when the step did not move it and no event came since,
	 * the time is the same (most blocks take their conditional branch's
	 * bit from a TNT packet read before: a query of the time per block
	 * was 3% of a call trace).  The step's last branch has the time of
	 * the packet that decided it - perf's: a branch whose TNT bit or TIP
	 * came after an MTC has the MTC's time (the time before the step,
	 * until session 26: 2.4% of the branches of synth's mixes ~224 ns
	 * early) - or, where the walk went on to read an event that does not
	 * decide it (a VM exit at the next IP), the time before that event. */
	if (!d->time_known || events)
		d->now_tsc = now(d);
	d->before = d->now_tsc;
	status = vt_walk_next_joined(d->dec, &blk, join, !d->cycles, &run);
	vt_walk_get_offset(d->dec, &off);  /* position(), once */
	if (d->time_before_event && vt_walk_branch_time(d->dec, &d->after)) {
		d->time_known = FALSE;   /* (libipt's is the event's) */
	} else {
		if (off != d->last_off || !d->time_known)
			d->now_tsc = now(d);
		d->time_known = TRUE;
		d->after = d->now_tsc;
	}
	if (blk.ninsn && !d->warming)
		on_block(d, &blk, &run, d->base + MIN(off, (guint64)d->len));
	if (status < 0) {
		error_ip(d, &blk, status);
		return status;
	}
	/* blocks walked since the trace last moved on, as one block a step
	 * counts them: none if the run's last block read on, those after the
	 * last that did (a run crosses packets), else all of them and the
	 * count before if the run began where the last step ended */
	if (run.blocks && off != run.last_off)
		d->stuck = 0;
	else if (run.blocks && run.last_off != run.off)
		d->stuck = run.blocks - run.moved_at;
	else if (run.blocks)
		d->stuck = (run.off == d->last_off ? d->stuck + 1 : 0) + run.blocks;
	else
		d->stuck = off == d->last_off ? d->stuck + 1 : 0;
	d->joined += run.blocks;
	d->last_off = off;
	return d->stuck > NO_PROGRESS_LIMIT ? -VT_DECODE_ERR_LOOP : status;
}

/* Synchronise at the next PSB; FALSE when there is none (or no progress). */
static gboolean sync_next(Dec *d)
{
	uint64_t off = 0;
	int status = vt_walk_sync_forward(d->dec);

	if (status == -pte_eos)
		return FALSE;
	vt_walk_get_sync_offset(d->dec, &off);
	if (status < 0 && off == d->prev_sync)
		return FALSE;            /* syncing makes no progress: give up on the rest */
	d->prev_sync = off;
	if (status < 0) {
		if (!d->warming)
			emit_error(d, status);
		return TRUE;
	}
	d->synced = TRUE;
	d->status = status;
	d->last_off = G_MAXUINT64;
	d->stuck = 0;
	d->time_known = FALSE;
	return TRUE;
}

/* walk_code()'s memos emptied. */
static void memo_clear(Dec *d)
{
	for (int i = 0; i < 2; i++)
		for (int k = 0; k < POKE_MEMOS; k++)
			d->memo[i][k].page = G_MAXUINT64;
}

/* The walker's code (walk.c): the bytes libipt's block decoder reads
 * through this queue's images (image.c's callback, guest_read(),
 * poke_read() and the poked pages' sections) at time tsc; *tag: 0 for an
 * image's own bytes, the versions of poked pages, a guest process's
 * mapping (hooked code). */
static const guint8 *walk_code(gpointer ctx, int src, guint64 ip, guint64 tsc, gsize *avail, guint64 *tag)
{
	Dec *d = ctx;
	const VtDecodeImage *img = d->img[src];
	const guint8 *code = NULL;

	*tag = 0;
	*avail = 0;
	if (d->view[src]) {
		const VtDecodePokes *p;
		VtDecodePokeMemo *memo = &d->memo[src][(ip / 4096) % POKE_MEMOS];

		/* a poked page: its version's bytes where they are kept, to the
		 * page's end (a copy of 16 bytes and a hash lookup per block and
		 * per instruction walked were a third of a real boot's decode) */
		if ((code = vt_decode_pokes_code_memo(memo, ip, tsc, avail, tag)))
			return code;
		p = vt_decode_image_pokes(img);
		if ((code = vt_decode_pokes_code(p, img, ip, tsc, avail, tag, memo)) || *tag)
			return code;
		if ((code = vt_decode_image_code(img, ip, avail))) {
			guint64 next = vt_decode_pokes_next_page(p, ip / 4096 + 1, (ip + *avail - 1) / 4096);

			if (next != G_MAXUINT64 && next * 4096 - ip < *avail)
				*avail = next * 4096 - ip;   /* the image's bytes up to the next poked page */
			return code;
		}
		if (!hooked_code(d, img, ip, &code, avail))
			return code;
	} else if (src == 1 && d->code && img != d->img[0]) {
		if (!hooked_code(d, img, ip, &code, avail))
			return vt_decode_image_code_own(img, ip, avail);
	} else {
		return vt_decode_image_code(img, ip, avail);
	}
	*tag = G_MAXUINT64;              /* a guest process's bytes: not kept */
	return code;
}

/* Where walk_code() gives an image's own unchanging bytes (tag 0): all of
 * an image (but its poked pages: walk_tables); the guest's upper half only
 * with the code hook (guest processes below). */
static guint64 plain_from(const Dec *d, int src)
{
	return src == 1 && d->code && d->img[1] != d->img[0] ? G_GUINT64_CONSTANT(1) << 47 : 0;
}

/* The walker's block tables, where code is plain, the poked pages. */
static void walk_tables(Dec *d)
{
	vt_walk_set_tables(d->dec, vt_decode_image_walk_table(d->img[0]), vt_decode_image_walk_table(d->img[1]),
			   plain_from(d, 0), plain_from(d, 1));
	vt_walk_set_pokes(d->dec, d->view[0] ? vt_decode_image_pokes(d->img[0]) : NULL,
			  d->view[1] ? vt_decode_image_pokes(d->img[1]) : NULL);
	vt_walk_set_memos(d->dec, d->view[0] ? d->memo[0] : NULL, d->view[1] ? d->memo[1] : NULL, POKE_MEMOS);
}

static gboolean decoder_new(Dec *d, GError **error)
{
	const VtDecodeCpu *cpu = &d->cpu;
	struct pt_config cfg;

	pt_config_init(&cfg);
	cfg.begin = d->buf;
	cfg.end = d->buf + d->len;
	if (cpu->family) {
		cfg.cpu.vendor = pcv_intel;
		cfg.cpu.family = cpu->family;
		cfg.cpu.model = cpu->model;
		cfg.cpu.stepping = cpu->stepping;
		(void)pt_cpu_errata(&cfg.errata, &cfg.cpu);   /* unknown CPU: no errata */
	}
	cfg.cpuid_0x15_eax = cpu->cpuid_15_eax;
	cfg.cpuid_0x15_ebx = cpu->cpuid_15_ebx;
	cfg.mtc_freq = cpu->mtc_freq;
	cfg.nom_freq = cpu->nom_freq;
	cfg.flags.variant.block.end_on_call = 1;
	cfg.flags.variant.block.end_on_jump = 1;
	cfg.decode.callback = vt_decode_unknown_packet;
	d->dec = vt_walk_new(&cfg, d->use_blk, walk_code, d);
	if (!d->dec) {
		g_set_error(error, VT_DECODE_ERROR, VT_DECODE_ERROR_FAILED, "cannot allocate a libipt block decoder");
		return FALSE;
	}
	if (!d->use_blk)
		walk_tables(d);
	return vt_walk_set_source(d->dec, d->guest, d->pi[d->guest ? 1 : 0]) >= 0;
}

/* The first PSB at or after queue offset `from` (d->total if none). */
static gboolean find_psb(Dec *d, guint64 from, guint64 *at, GError **error)
{
	static const guint8 psb[16] = { 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82 };
	guint8 chunk[65536];

	for (guint64 off = from; off < d->total; off += sizeof(chunk) - (sizeof(psb) - 1)) {
		gsize n = (gsize)MIN((guint64)sizeof(chunk), d->total - off);
		const guint8 *hit;

		if (n < sizeof(psb))
			break;
		if (!d->read(d->read_ctx, off, chunk, n, error))
			return FALSE;
		hit = memmem(chunk, n, psb, sizeof(psb));
		if (hit) {
			*at = off + (guint64)(hit - chunk);
			return TRUE;
		}
		if (n < sizeof(chunk))
			break;
	}
	*at = d->total;
	return TRUE;
}

/* The last PSB in the 64 KiB before queue offset `before` (`before` if none). */
static gboolean find_psb_before(Dec *d, guint64 before, guint64 *at, GError **error)
{
	static const guint8 psb[16] = { 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82 };
	guint64 from = before > 65536 ? before - 65536 : 0;
	gsize n = (gsize)(before - from);
	g_autofree guint8 *chunk = g_malloc(n + 1);
	const guint8 *p = chunk, *hit;

	*at = before;
	if (!d->read(d->read_ctx, from, chunk, n, error))
		return FALSE;
	while (n >= sizeof(psb) && (hit = memmem(p, n, psb, sizeof(psb)))) {
		*at = from + (guint64)(hit - chunk);
		n -= (gsize)(hit - p) + 2;       /* PSBs overlap themselves by pairs */
		p = hit + 2;
	}
	return TRUE;
}

/* A window's seam: the first PSB at or after `from` whose PSB+ ends
 * (d->total if none). */
static gboolean psb_check(Dec *d, guint64 psb, gboolean state, gboolean *full, GError **error);

static gboolean find_seam(Dec *d, guint64 from, guint64 *at, GError **error)
{
	gboolean whole = FALSE;

	for (*at = d->total; from < d->total; from = *at + 1) {
		if (!find_psb(d, from, at, error))
			return FALSE;
		if (*at >= d->total)
			return TRUE;
		if (!psb_check(d, *at, FALSE, &whole, error))
			return FALSE;
		if (whole)
			return TRUE;
	}
	*at = d->total;
	return TRUE;
}

/* Poked pages of image i read through poke_read(), each until its last
 * poke (a view). */
static void pokes_attach(Dec *d, int i)
{
	d->view[i] = vt_decode_poke_view_new(d->img[i], vt_decode_image_iscache(d->img[i]), d->pi[i]);
	if (!d->view[i])
		return;
	d->poke[i] = (struct PokeCtx){ d, d->img[i] };
	pt_image_set_callback(d->pi[i], poke_read, &d->poke[i]);
}

/* A new window starts earlier than where the last one's decoder stopped
 * (its warm-up): libipt images that gained poked pages' sections are made
 * anew (a section cannot be taken out again). */
static gboolean pokes_rewind(Dec *d, GError **error)
{
	for (int i = 0; i < 2; i++) {
		struct pt_image *pi;

		if (!vt_decode_poke_view_moved(d->view[i]))
			continue;
		pi = vt_decode_image_new_pt(d->img[i], error);
		if (!pi)
			return FALSE;
		pt_image_free(d->pi[i]);
		d->pi[i] = pi;
		vt_decode_poke_view_reset(d->view[i], pi);
		pt_image_set_callback(pi, poke_read, &d->poke[i]);
	}
	return TRUE;
}

/* Read the window starting at queue offset `start` (and the bytes up to
 * the PSB after its seam) and put a fresh decoder on it. */
static gboolean window_open(Dec *d, guint64 start, gboolean mute, GError **error)
{
	guint64 seam = d->stop_at, end = d->total, warm = start;

	/* the PSB segment before the window is decoded too (silently): libipt
	 * then has the timing state a continuous decoder has there */
	if (start && !find_psb_before(d, start, &warm, error))
		return FALSE;
	if (d->window < d->stop_at - start && !find_seam(d, start + d->window, &seam, error))
		return FALSE;
	seam = MIN(seam, d->stop_at);
	if (seam < d->total && !find_psb(d, seam + 1, &end, error))
		return FALSE;
	vt_walk_free(d->dec);
	d->dec = NULL;
	d->base = warm;
	d->begin = start - warm;
	d->muted = mute && warm < start;
	d->warming = !d->muted && warm < start;
	d->len = (gsize)(end - warm);
	d->seam = seam < d->total ? seam - warm : G_MAXUINT64;
	if (d->buf_size < d->len + 16) {
		vt_decode_buf_free(d->buf, d->buf_size);   /* (grown by half at least: a range's decoder reads window after window) */
		d->buf_size = vt_decode_buf_size(MAX(d->len + 16, d->buf_size + d->buf_size / 2));
		d->buf = vt_decode_buf_new(d->buf_size);   /* (huge pages: written at once) */
	}
	/* libipt 2.0.5 reads a byte past a PSB cut at the end: keep 16 zeros */
	memset(d->buf + d->len, 0, 16);
	if (!d->read(d->read_ctx, warm, d->buf, d->len, error))
		return FALSE;
	d->at_seam = d->synced = d->have_nt = FALSE;
	d->prev_sync = G_MAXUINT64;
	return pokes_rewind(d, error) && decoder_new(d, error);
}

/* A decoder of the queue (read(ctx), len bytes) on host and guest, with
 * no window open yet. */
static Dec *dec_new(VtDecodeReadFunc read, gpointer ctx, GDestroyNotify ctx_free, guint64 len, guint64 window,
		    const VtDecodeCpu *cpu, VtDecodeImage *host, VtDecodeImage *guest, GError **error)
{
	Dec *d = g_new0(Dec, 1);

	d->read = read;
	d->read_ctx = ctx;
	d->read_free = ctx_free;
	d->total = d->stop_at = len;
	d->window = window ? window : G_MAXUINT64;
	d->cpu = *cpu;
	d->img[0] = host;
	d->img[1] = guest ? guest : host;
	memo_clear(d);
	d->pi[0] = vt_decode_image_new_pt(host, error);
	d->pi[1] = d->pi[0] ? vt_decode_image_new_pt(d->img[1], error) : NULL;
	for (int i = 0; i < 2 && d->pi[1]; i++)
		pokes_attach(d, i);
	d->last_psb = G_MAXUINT64;
	d->use_blk = vt_walk_use_blk();
	d->ovf_branch = !d->use_blk && g_strcmp0(g_getenv("VMTRACE_OVF_BRANCH"), "0");
	d->time_before_event = g_strcmp0(g_getenv("VMTRACE_EVENT_TIME"), "0");
	d->cache[0] = g_new0(Cached, CACHE_SIZE);
	d->cache[1] = g_new0(Cached, CACHE_SIZE);
	if (!d->pi[1]) {
		vt_decode_queue_free(d);
		return NULL;
	}
	return d;
}

VtDecodeQueue *vt_decode_queue_new_reader(VtDecodeReadFunc read, gpointer ctx, GDestroyNotify ctx_free,
					  guint64 len, guint64 window, const VtDecodeCpu *cpu, VtDecodeImage *host,
					  VtDecodeImage *guest, GError **error)
{
	Dec *d = dec_new(read, ctx, ctx_free, len, window, cpu, host, guest, error);

	if (d && !window_open(d, 0, FALSE, error)) {
		vt_decode_queue_free(d);
		return NULL;
	}
	return d;
}

gboolean vt_decode_queue_splits(const VtDecodeQueue *d)
{
	return !d->cycles && !d->use_blk;
}

VtDecodeQueue *vt_decode_queue_clone(const VtDecodeQueue *proto, GError **error)
{
	Dec *d;

	g_return_val_if_fail(vt_decode_queue_splits(proto), NULL);
	d = dec_new(proto->read, proto->read_ctx, NULL, proto->total, proto->window, &proto->cpu, proto->img[0],
		    proto->img[1], error);
	if (d) {
		d->power = proto->power;
		d->flow_end = proto->flow_end;
		d->drop_jumps = proto->drop_jumps;
	}
	return d;
}

/* Everything a decoding leaves behind cleared; what the decoder is made
 * of and set to kept (its images, tables, buffer and settings). */
static void state_reset(Dec *d)
{
	Dec k;

	g_clear_error(&d->error);
	k = *d;
	memset(d, 0, sizeof(*d));
	d->dec = k.dec;
	memcpy(d->pi, k.pi, sizeof(d->pi));
	memcpy(d->img, k.img, sizeof(d->img));
	memcpy(d->view, k.view, sizeof(d->view));
	memcpy(d->poke, k.poke, sizeof(d->poke));
	memcpy(d->cache, k.cache, sizeof(d->cache));
	memo_clear(d);
	d->last_psb = G_MAXUINT64;
	d->power = k.power;
	d->flow_end = k.flow_end;
	d->drop_jumps = k.drop_jumps;
	d->code = k.code;
	d->code_ctx = k.code_ctx;
	d->read = k.read;
	d->read_ctx = k.read_ctx;
	d->read_free = k.read_free;
	d->total = k.total;
	d->window = k.window;
	d->cpu = k.cpu;
	d->buf = k.buf;
	d->buf_size = k.buf_size;
	d->use_blk = k.use_blk;
	d->ovf_branch = k.ovf_branch;
	d->time_before_event = k.time_before_event;
}

/* *full: the PSB+ at queue offset psb ends (PSBEND: no OVF cut it short -
 * a window's decoder stops at its seam's first status event, which an OVF
 * takes away) and, with state, restates what a range's decoder takes from
 * it: tracing is on (a FUP: under intel_pt//k a guest's user code runs
 * with PacketEn=0, and its PSB+s have no FUP and no PIP) and host or guest
 * (a PIP). */
static gboolean psb_check(Dec *d, guint64 psb, gboolean state, gboolean *full, GError **error)
{
	guint8 buf[512];
	gsize n = (gsize)MIN((guint64)sizeof(buf), d->total - psb);
	struct pt_config cfg;
	struct pt_packet_decoder *pd;
	struct pt_packet p;
	gboolean fup = FALSE, pip = FALSE;

	*full = FALSE;
	if (!d->read(d->read_ctx, psb, buf, n, error))
		return FALSE;
	pt_config_init(&cfg);
	cfg.begin = buf;
	cfg.end = buf + n;
	cfg.decode.callback = vt_decode_unknown_packet;
	pd = pt_pkt_alloc_decoder(&cfg);
	if (!pd)
		return TRUE;
	if (pt_pkt_sync_set(pd, 0) >= 0 && pt_pkt_next(pd, &p, sizeof(p)) >= 0 && p.type == ppt_psb)
		for (int i = 0; i < 64 && pt_pkt_next(pd, &p, sizeof(p)) >= 0; i++) {
			if (p.type == ppt_psbend) {
				*full = !state || (fup && pip);
				break;
			}
			if (p.type == ppt_ovf || p.type == ppt_psb)
				break;
			fup = fup || p.type == ppt_fup;
			pip = pip || p.type == ppt_pip;
		}
	pt_pkt_free_decoder(pd);
	return TRUE;
}

gboolean vt_decode_queue_boundary(VtDecodeQueue *d, guint64 from, guint64 *at, GError **error)
{
	guint64 psb = 0, before;
	gboolean full, full_before;

	for (*at = d->total; from < d->total; from = psb + 1) {
		if (!find_psb(d, from, &psb, error))
			return FALSE;
		if (psb >= d->total)
			return TRUE;
		if (!psb_check(d, psb, TRUE, &full, error) || (full && !find_psb_before(d, psb, &before, error)))
			return FALSE;
		/* (a PSB before it to warm up at, both PSB+s whole) */
		if (full && before < psb && psb_check(d, before, TRUE, &full_before, error) && full_before) {
			*at = psb;
			return TRUE;
		}
	}
	return TRUE;
}

gboolean vt_decode_queue_range(VtDecodeQueue *d, guint64 start, guint64 end, GError **error)
{
	g_return_val_if_fail(vt_decode_queue_splits(d) && start <= end && end <= d->total, FALSE);
	state_reset(d);
	d->stop_at = end;
	if (start >= end) {
		d->done = TRUE;
		return TRUE;
	}
	return window_open(d, start, TRUE, error);
}

guint64 vt_decode_queue_last_time(const VtDecodeQueue *d)
{
	return d->last_tsc;
}

static gboolean read_memory(gpointer ctx, guint64 off, guint8 *dst, gsize len, GError **error)
{
	(void)error;
	if (len)                         /* an empty queue's data is NULL (g_memdup2 of 0 bytes) */
		memcpy(dst, (const guint8 *)ctx + off, len);
	return TRUE;
}

VtDecodeQueue *vt_decode_queue_new(const guint8 *data, gsize len, const VtDecodeCpu *cpu, VtDecodeImage *host,
				   VtDecodeImage *guest, GError **error)
{
	return vt_decode_queue_new_reader(read_memory, g_memdup2(data, len), g_free, len, 0, cpu, host, guest,
					  error);
}

void vt_decode_queue_free(VtDecodeQueue *d)
{
	if (!d)
		return;
	vt_walk_free(d->dec);
	vt_decode_cycles_free(d->cycles);
	for (int i = 0; i < 2; i++) {
		if (d->pi[i])
			pt_image_free(d->pi[i]);
		vt_decode_poke_view_free(d->view[i]);
		g_free(d->cache[i]);
	}
	if (d->read_free)
		d->read_free(d->read_ctx);
	g_clear_error(&d->error);
	vt_decode_buf_free(d->buf, d->buf_size);
	g_free(d);
}

/* This window is done: on to the next one, FALSE at the queue's end (or
 * when it cannot be read: d->error). */
static gboolean window_next(Dec *d)
{
	if (d->seam == G_MAXUINT64 || d->base + d->seam >= d->stop_at)
		return FALSE;            /* (a range's end) */
	return window_open(d, d->base + d->seam, FALSE, &d->error);
}

void vt_decode_queue_set_power(VtDecodeQueue *d, gboolean power)
{
	d->power = power;
}

void vt_decode_queue_set_flow_end(VtDecodeQueue *d, gboolean flow_end)
{
	d->flow_end = flow_end;
}

void vt_decode_queue_set_cycles(VtDecodeQueue *d, gboolean cycles)
{
	vt_decode_cycles_free(d->cycles);
	d->cycles = cycles ? vt_decode_cycles_new(d->read, d->read_ctx, d->total, d->cpu.cyc_thresh != 0) : NULL;
}

guint64 vt_decode_queue_joined(const VtDecodeQueue *d)
{
	return d->joined;
}

void vt_decode_queue_set_drop_jumps(VtDecodeQueue *d, gboolean drop)
{
	d->drop_jumps = drop;
}

/* The queue's data has ended: the conditional jumps not taken after its
 * last branch ran (their TNT bits say so), up to d->nt_ip. */
static void emit_flow_end(Dec *d)
{
	if (!d->flow_end || !d->have_nt)
		return;
	d->src_mode = d->nt_mode;
	d->insns = d->nt_insns;          /* blocks after it: not proven */
	emit_at(d, VT_BRANCH_FLOW_END, d->nt_ip, 0, d->nt_guest, d->nt_guest, FALSE, d->nt_tsc, d->nt_off);
	d->have_nt = FALSE;
}

void vt_decode_queue_set_code(VtDecodeQueue *d, VtDecodeCodeFunc code, gpointer ctx)
{
	d->code = code;
	d->code_ctx = ctx;
	if (code && !d->view[1] && d->img[1] != d->img[0])
		pt_image_set_callback(d->pi[1], guest_read, d);
	if (d->dec && !d->use_blk)
		walk_tables(d);
}

const GError *vt_decode_queue_error(const VtDecodeQueue *d)
{
	return d->error;
}

gboolean vt_decode_queue_next(VtDecodeQueue *d, GArray *out, guint max)
{
	d->out = out;
	d->out_len = d->out_room = out->len;   /* room unknown: out_add() makes it */
	while (!d->done && d->out_len < max) {
		if (!d->synced) {
			if (!sync_next(d))
				d->done = !window_next(d);
			continue;
		}
		d->status = step(d, d->status);
		if (d->status >= 0)
			continue;
		d->synced = FALSE;
		if (d->at_seam || d->status == -pte_eos) {
			if (!d->at_seam && !d->warming)
				emit_flow_end(d);
			d->done = !window_next(d);
		}
		else if (!d->warming)
			emit_error(d, d->status);
	}
	g_array_set_size(out, d->out_len);
	d->out = NULL;
	return !d->done;
}

gboolean vt_decode_buffer(const guint8 *data, gsize len, const VtDecodeCpu *cpu, VtDecodeImage *host,
			  VtDecodeImage *guest, GArray *out, GError **error)
{
	VtDecodeQueue *d = vt_decode_queue_new(data, len, cpu, host, guest, error);

	if (!d)
		return FALSE;
	while (vt_decode_queue_next(d, out, G_MAXUINT))
		;
	vt_decode_queue_free(d);
	return TRUE;
}
