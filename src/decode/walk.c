/* walk.c - our own block walker on a query decoder: what queue.c
 * used of libipt's block decoder (pt_blk_*), with the same blocks and
 * events, but the code between two decisions decoded once per (code
 * source, ip, mode) and kept in a bounded table.
 *
 * libipt's block decoder read every instruction it walked through the
 * read-memory callback and decoded it anew (no block cache without
 * sections; with sections its caches cost more than they saved - image.c).
 * Here a query decoder does the packets, the timing and the events and
 * their order - our own (qry.c), which answers as libipt's pt_qry_* do
 * (VMTRACE_DECODER=qry: libipt's; VMTRACE_QRY_CHECK=1: both, compared) -
 * and this file walks the code: a block is the run
 * of instructions from an IP up to the first that needs trace (conditional
 * branch, indirect branch, return, far transfer) or a direct call or jump,
 * and it ends there as pt_blk's does (end_on_call, end_on_jump).  Events
 * bind to instructions by libipt 2.0.5's rules (facts from its block
 * decoder: async branches at their `from` IP, paging at MOV CR3, VMLAUNCH,
 * VMRESUME or a far branch, VMCS at VMPTRLD or those, a synchronous
 * disable at the next branch that needs trace, return compression through
 * a 64-entry return stack).  The differential test t0105 compares the two
 * on a matrix of recordings; VMTRACE_DECODER=blk selects libipt's.
 *
 * Code comes from the walker's code function: its bytes at ip for code
 * source `src` (host, guest) at the decoder's time, with a tag that says
 * which bytes they are (0: the image's own; a poked page's versions;
 * TAG_MIXED: a guest process's code, or bytes of two sources - never
 * kept).  A block is kept only when all its instructions came with its
 * first one's tag, and it is found again only with that tag: a text poke
 * gives another tag, so a kept block never outlives its bytes.  The table
 * belongs to the image (all queues' walkers share it, in any thread) and
 * is bounded: 2^17 slots of 32 bytes (4 MiB, touched as used; a block
 * whose last instruction starts 64 KiB or more after its first is not kept).
 *
 * Instructions: the common 64-bit ones by a length decoder of our own
 * (fastinsn.h: one-byte and 0x0f maps, the classes pt_ild gives them),
 * everything else by Zydis (minimal mode: length, mnemonic, raw fields). */
#include "config.h"

#include <string.h>

#include "src/decode/fastinsn.h"
#include "src/decode/internal.h"
#include "src/decode/seqlock.h"

#define TABLE_BITS 17                    /* blocks kept per image (2 ways a set) */
#define RET_SIZE 64                      /* libipt's return stack */
#define TAG_MIXED G_MAXUINT64            /* bytes from two sources, or a process's: not kept */
#define ZCACHE_BITS 4                    /* Zydis's decodings kept per walker */
#define NEAR_BITS 10                     /* blocks kept per walker (besides the image's table) */

enum { F_CR3 = 1, F_VMPTRLD = 2, F_VMENTRY = 4, F_DIRECT = 8 /* (WSlot.flags only) */ };

typedef struct {
	guint64 ip, target;              /* target: direct branches */
	guint8 size, iclass, flags, direct;
} WInsn;

typedef struct {
	guint64 ip, tag;                 /* ip 0: empty */
	guint16 ninsn;
	guint8 mode;
	WInsn last;
} WBlock;

/* An image's blocks, shared by the walkers of all its queues (threads): a
 * slot is written under its sequence number (odd while written; a writer
 * that finds it odd or loses the race skips), a reader keeps what it read
 * only if the number is even and did not change meanwhile (a seqlock).
 * A block in 32 bytes - its last instruction as offsets from its start -
 * so that a set's two ways are one cache line: a lookup is one miss. */
typedef struct {
	guint32 seq;
	guint16 ninsn;
	guint16 end;                     /* the last instruction's ip - ip */
	guint64 ip, tag;                 /* ip 0: empty */
	gint32 disp;                     /* its target - its end (cond. and direct branches) */
	guint8 mode, size, iclass, flags;   /* flags: the last instruction's F_*, F_DIRECT: direct */
} WSlot;

G_STATIC_ASSERT(sizeof(WSlot) == 32);

/* An instruction Zydis decoded (one the fast decoder leaves to it): its
 * bytes as given, its mode and ip, and the answer. */
typedef struct {
	guint8 bytes[ZYDIS_MAX_INSTRUCTION_LENGTH];
	guint8 avail;                    /* 0: empty */
	guint8 mode;
	WInsn in;
} ZSlot;

/* The blocks a walker found last, its own (no other thread writes them,
 * unpacked): real code runs through a few thousand blocks again and again,
 * and the shared table's lookup (hash, seqlock copy, unpacking) was ~80
 * instructions a block of the real boot's 540.  Same key as the table's
 * (src, ip, tag, mode): a kept block is right for its bytes whatever the
 * table did with it since; emptied when the tables change. */
typedef struct {
	guint64 ip, tag;                 /* ip 0: empty */
	WInsn last;
	guint16 ninsn;
	guint8 mode, src;
} NearSlot;

/* Beside the slots, a 16-bit hash of each slot's block (0: empty) in an
 * array small enough to stay in the cache (256 KiB): a lookup reads its
 * set only where a way's hash matches.  A block seen for the first time
 * (most of them, where the trace runs through more code than the table
 * keeps) is then known to be missing without waiting for its set, and
 * the walk decodes its instructions while the set (prefetched at the
 * block before) is on its way for table_put().  The hashes are hints: a
 * lookup checks the slot itself, a stale hash costs a refill at most. */
struct VtWalkTable {
	WSlot *slots;                    /* 2^TABLE_BITS */
	guint16 *hashes;                 /* 2^TABLE_BITS, slot by slot */
};

struct VtWalk {
	struct pt_block_decoder *blk;    /* libipt's walker (VMTRACE_DECODER=blk) */
	VtQry *own;                      /* else ours on our query decoder (qry.c), */
	struct pt_query_decoder *qry;    /* or libipt's (VMTRACE_DECODER=qry, or vt_qry_new() refused the config) */
	gboolean qry_check;              /* VMTRACE_QRY_CHECK: both, answers compared */
	struct pt_errata errata;
	VtWalkCodeFunc code;
	gpointer ctx;
	int src;
	VtWalkTable *tables[2];          /* host, guest */
	guint64 plain_from[2];           /* code at or above: the image's own, never changed, */
	VtDecodePokedPages poked[2];     /* but on these pages */
	const VtDecodePokeMemo *memos[2];   /* the code function's memos of poked pages (vt_walk_set_memos) */
	guint nmemos;
	/* the decoder's state (pt_blk's) */
	guint64 ip;
	int mode, status;
	gboolean enabled, process_event, process_insn;
	gboolean bound_paging, bound_vmcs, bound_ptwrite;
	struct pt_event event;
	WInsn insn;                      /* the postponed instruction */
	WInsn last;                      /* the last block's last instruction (vt_walk_last_branch) */
	guint64 ret[RET_SIZE + 1];
	guint8 top, bottom;
	ZydisDecoder zy[4];
	ZSlot zcache[1 << ZCACHE_BITS];
	NearSlot *near;                  /* 2^NEAR_BITS (made on first use) */
	gboolean check;                  /* VMTRACE_WALK_CHECK */
	gboolean joinable;               /* the last block: no_event()'s, nothing pending after it */
	guint64 event_before;            /* the time before the event in process was read */
};

gboolean vt_walk_use_blk(void)
{
	const char *e = g_getenv("VMTRACE_DECODER");

	return e && !strcmp(e, "blk");
}

/* ------------------------------------------------- the query decoders */
/* VMTRACE_QRY_CHECK=1: ours and libipt's side by side, every answer
 * compared - the first that differs aborts with both. */
static void G_GNUC_NORETURN qry_differs(VtWalk *w, const char *what, int own, int lib, guint64 a, guint64 b)
{
	uint64_t off = 0;

	(void)pt_qry_get_offset(w->qry, &off);
	g_error("query decoders differ: %s at offset %#" G_GINT64_MODIFIER "x: ours %d %#" G_GINT64_MODIFIER
		"x, libipt's %d %#" G_GINT64_MODIFIER "x", what, off, own, a, lib, b);
}

static int check_cond_branch(VtWalk *w, int *taken)
{
	int t = 0, status = vt_qry_cond_branch(w->own, taken), lib = pt_qry_cond_branch(w->qry, &t);

	if (status != lib || (status >= 0 && *taken != t))
		qry_differs(w, "cond_branch", status, lib, (guint64)*taken, (guint64)t);
	return status;
}

static int check_indirect_branch(VtWalk *w, uint64_t *ip)
{
	uint64_t a = *ip, b = *ip;
	int status = vt_qry_indirect_branch(w->own, &a), lib = pt_qry_indirect_branch(w->qry, &b);

	if (status != lib || a != b)
		qry_differs(w, "indirect_branch", status, lib, a, b);
	*ip = a;
	return status;
}

static int check_event(VtWalk *w, struct pt_event *ev)
{
	struct pt_event lib_ev;
	int status, lib;

	memset(ev, 0, sizeof(*ev));
	memset(&lib_ev, 0, sizeof(lib_ev));
	status = vt_qry_event(w->own, ev);
	lib = pt_qry_event(w->qry, &lib_ev, sizeof(lib_ev));
	if (status != lib || (status >= 0 && memcmp(ev, &lib_ev, sizeof(lib_ev))))
		qry_differs(w, "event", status, lib, ev->type, lib_ev.type);
	return status;
}

static int check_sync_forward(VtWalk *w, uint64_t *ip)
{
	uint64_t a = 0, b = 0;
	int status = vt_qry_sync_forward(w->own, &a), lib = pt_qry_sync_forward(w->qry, &b);

	if (status != lib || a != b)
		qry_differs(w, "sync_forward", status, lib, a, b);
	*ip = a;
	return status;
}

static int check_time(const VtWalk *w, uint64_t *tsc, uint32_t *lost_mtc, uint32_t *lost_cyc)
{
	uint64_t b = 0;
	uint32_t mtc = 0, cyc = 0;
	int status = vt_qry_time(w->own, tsc, lost_mtc, lost_cyc), lib = pt_qry_time(w->qry, &b, &mtc, &cyc);

	if (status != lib || *tsc != b || *lost_mtc != mtc || *lost_cyc != cyc)
		qry_differs((VtWalk *)w, "time", status, lib, *tsc, b);
	return status;
}

static int check_offset(const VtWalk *w, uint64_t *off, gboolean sync)
{
	uint64_t b = 0;
	int status = sync ? vt_qry_get_sync_offset(w->own, off) : vt_qry_get_offset(w->own, off);
	int lib = sync ? pt_qry_get_sync_offset(w->qry, &b) : pt_qry_get_offset(w->qry, &b);

	if (status != lib || (status >= 0 && *off != b))
		qry_differs((VtWalk *)w, sync ? "sync offset" : "offset", status, lib, *off, b);
	return status;
}

static inline int qry_cond_branch(VtWalk *w, int *taken)
{
	if (G_UNLIKELY(w->qry_check))
		return check_cond_branch(w, taken);
	return w->own ? vt_qry_cond_branch(w->own, taken) : pt_qry_cond_branch(w->qry, taken);
}

static inline int qry_indirect_branch(VtWalk *w, uint64_t *ip)
{
	if (G_UNLIKELY(w->qry_check))
		return check_indirect_branch(w, ip);
	return w->own ? vt_qry_indirect_branch(w->own, ip) : pt_qry_indirect_branch(w->qry, ip);
}

static int qry_event(VtWalk *w, struct pt_event *ev)
{
	if (G_UNLIKELY(w->qry_check))
		return check_event(w, ev);
	return w->own ? vt_qry_event(w->own, ev) : pt_qry_event(w->qry, ev, sizeof(*ev));
}

static int qry_sync_forward(VtWalk *w, uint64_t *ip)
{
	if (G_UNLIKELY(w->qry_check))
		return check_sync_forward(w, ip);
	return w->own ? vt_qry_sync_forward(w->own, ip) : pt_qry_sync_forward(w->qry, ip);
}

static inline int qry_time(const VtWalk *w, uint64_t *tsc, uint32_t *lost_mtc, uint32_t *lost_cyc)
{
	if (G_UNLIKELY(w->qry_check))
		return check_time(w, tsc, lost_mtc, lost_cyc);
	return w->own ? vt_qry_time(w->own, tsc, lost_mtc, lost_cyc) : pt_qry_time(w->qry, tsc, lost_mtc, lost_cyc);
}

static inline int qry_get_offset(const VtWalk *w, uint64_t *off)
{
	if (G_UNLIKELY(w->qry_check))
		return check_offset(w, off, FALSE);
	return w->own ? vt_qry_get_offset(w->own, off) : pt_qry_get_offset(w->qry, off);
}

static int qry_get_sync_offset(const VtWalk *w, uint64_t *off)
{
	if (G_UNLIKELY(w->qry_check))
		return check_offset(w, off, TRUE);
	return w->own ? vt_qry_get_sync_offset(w->own, off) : pt_qry_get_sync_offset(w->qry, off);
}

static guint64 walks_own, walks_libipt;   /* query decoders made (all threads) */

void vt_decode_query_decoders(guint64 *own, guint64 *libipt)
{
	*own = __atomic_load_n(&walks_own, __ATOMIC_RELAXED);
	*libipt = __atomic_load_n(&walks_libipt, __ATOMIC_RELAXED);
}

VtWalk *vt_walk_new(const struct pt_config *config, gboolean blk, VtWalkCodeFunc code, gpointer ctx)
{
	VtWalk *w = g_new0(VtWalk, 1);
	struct pt_config cfg = *config;

	if (blk) {
		w->blk = pt_blk_alloc_decoder(&cfg);
	} else {
		const char *e = g_getenv("VMTRACE_DECODER");
		gboolean lib = e && !strcmp(e, "qry");

		memset(&cfg.flags, 0, sizeof(cfg.flags));   /* the query decoder's: none */
		w->own = lib ? NULL : vt_qry_new(&cfg);
		w->qry_check = w->own && g_getenv("VMTRACE_QRY_CHECK") != NULL;
		if (!w->own || w->qry_check)
			w->qry = pt_qry_alloc_decoder(&cfg);
	}
	if (!w->blk && !w->own && !w->qry) {
		g_free(w);
		return NULL;
	}
	if (!blk)
		__atomic_fetch_add(w->own ? &walks_own : &walks_libipt, 1, __ATOMIC_RELAXED);
	w->errata = config->errata;
	w->check = g_getenv("VMTRACE_WALK_CHECK") != NULL;
	w->plain_from[0] = w->plain_from[1] = G_MAXUINT64;
	w->poked[0] = w->poked[1] = vt_decode_pokes_pages(NULL);
	vt_fast_insn_init();
	w->code = code;
	w->ctx = ctx;
	for (int m = 0; m < 4; m++) {
		vt_decode_zydis_init(&w->zy[m], (guint8)m);
		/* length, mnemonic, raw fields: all classify() reads */
		ZydisDecoderEnableMode(&w->zy[m], ZYDIS_DECODER_MODE_MINIMAL, ZYAN_TRUE);
	}
	return w;
}

void vt_walk_free(VtWalk *w)
{
	if (!w)
		return;
	if (w->blk)
		pt_blk_free_decoder(w->blk);
	if (w->qry)
		pt_qry_free_decoder(w->qry);
	vt_qry_free(w->own);
	g_free(w->near);
	g_free(w);
}

int vt_walk_set_source(VtWalk *w, int src, struct pt_image *pi)
{
	w->src = src;
	return w->blk ? pt_blk_set_image(w->blk, pi) : 0;
}

int vt_walk_get_offset(const VtWalk *w, uint64_t *off)
{
	return w->blk ? pt_blk_get_offset(w->blk, off) : qry_get_offset(w, off);
}

int vt_walk_get_sync_offset(const VtWalk *w, uint64_t *off)
{
	return w->blk ? pt_blk_get_sync_offset(w->blk, off) : qry_get_sync_offset(w, off);
}

int vt_walk_time(VtWalk *w, uint64_t *tsc)
{
	uint32_t lost_mtc, lost_cyc;

	return w->blk ? pt_blk_time(w->blk, tsc, &lost_mtc, &lost_cyc) : qry_time(w, tsc, &lost_mtc, &lost_cyc);
}

guint64 vt_walk_ip(const VtWalk *w)
{
	return w->blk ? 0 : w->ip;
}

static inline guint64 now(VtWalk *w)
{
	uint64_t tsc = 0;

	if (G_LIKELY(w->own && !w->qry_check))
		return vt_qry_time(w->own, &tsc, NULL, NULL) < 0 ? 0 : tsc;
	return vt_walk_time(w, &tsc) < 0 ? 0 : tsc;
}

/* ------------------------------------------------------- instructions */
/* Does in have a target from its bytes (conditional and direct branches)? */
static gboolean has_target(const WInsn *in)
{
	return in->iclass == ptic_cond_jump || in->direct;
}

/* libipt's class of the instruction Zydis decoded (pt_ild's: the same
 * instructions are branches, far transfers and event bindings). */
static void classify(const ZydisDecodedInstruction *zi, guint64 ip, WInsn *in)
{
	gboolean rel = zi->raw.imm[0].is_relative;   /* (not RIP-relative memory) */
	/* far: call 9a, jmp ea, call/jmp ff /3 /5, ret ca/cb (pt_ild's) */
	gboolean map0 = zi->opcode_map == ZYDIS_OPCODE_MAP_DEFAULT;
	gboolean far = map0 && (zi->opcode == 0x9a || zi->opcode == 0xea || zi->opcode == 0xca || zi->opcode == 0xcb ||
				(zi->opcode == 0xff && (zi->raw.modrm.reg == 3 || zi->raw.modrm.reg == 5)));

	in->iclass = vt_decode_mnemonic_is_cond(zi->mnemonic) ? ptic_cond_jump : ptic_other;
	switch (zi->mnemonic) {
	case ZYDIS_MNEMONIC_JMP:
		in->iclass = far ? ptic_far_jump : ptic_jump;
		in->direct = !far && rel;
		break;
	case ZYDIS_MNEMONIC_CALL:
		in->iclass = far ? ptic_far_call : ptic_call;
		in->direct = !far && rel;
		break;
	case ZYDIS_MNEMONIC_RET:
		in->iclass = far ? ptic_far_return : ptic_return;
		break;
	case ZYDIS_MNEMONIC_SYSCALL: case ZYDIS_MNEMONIC_SYSENTER: case ZYDIS_MNEMONIC_VMCALL:
	case ZYDIS_MNEMONIC_INT: case ZYDIS_MNEMONIC_INT1: case ZYDIS_MNEMONIC_INT3: case ZYDIS_MNEMONIC_INTO:
		in->iclass = ptic_far_call;
		break;
	case ZYDIS_MNEMONIC_SYSRET: case ZYDIS_MNEMONIC_SYSEXIT: case ZYDIS_MNEMONIC_UIRET:
	case ZYDIS_MNEMONIC_IRET: case ZYDIS_MNEMONIC_IRETD: case ZYDIS_MNEMONIC_IRETQ:
		in->iclass = ptic_far_return;
		break;
	case ZYDIS_MNEMONIC_VMLAUNCH: case ZYDIS_MNEMONIC_VMRESUME:
		in->iclass = ptic_far_return;
		in->flags = F_VMENTRY;
		break;
	case ZYDIS_MNEMONIC_VMPTRLD:
		in->flags = F_VMPTRLD;
		break;
	case ZYDIS_MNEMONIC_PTWRITE:
		in->iclass = ptic_ptwrite;
		break;
	case ZYDIS_MNEMONIC_MOV:
		if (zi->opcode_map == ZYDIS_OPCODE_MAP_0F && zi->opcode == 0x22 && zi->raw.modrm.reg == 3 &&
		    !zi->raw.rex.R)
			in->flags = F_CR3;
		break;
	default:
		break;
	}
	if (has_target(in))              /* ip + size + displacement (no wrap: libipt's) */
		in->target = ip + zi->length + (guint64)zi->raw.imm[0].value.s;
}

/* ------------------------------------------------ 64-bit length decoder */
/* The fast decoder's answer f for the instruction at ip as a WInsn. */
static inline void fast_insn(const VtFastInsn *f, guint64 ip, WInsn *in)
{
	memset(in, 0, sizeof(*in));
	in->ip = ip;
	in->size = f->len;
	in->iclass = f->iclass;
	in->direct = f->direct;
	if (has_target(in))              /* rel8 or rel32 */
		in->target = ip + f->len + (guint64)(gint64)f->disp;
}

/* The 64-bit instruction at code, if it is a common one (fastinsn.h):
 * TRUE and *in (pt_ild's class); FALSE: ask Zydis. */
static inline gboolean fast_decode(const guint8 *code, gsize avail, guint64 ip, WInsn *in)
{
	VtFastInsn f;

	if (!vt_fast_insn_decode(code, avail, &f))
		return FALSE;
	fast_insn(&f, ip, in);
	return TRUE;
}

/* VMTRACE_WALK_CHECK=1: every fast decode against Zydis's (abort if they differ). */
static void check_fast(VtWalk *w, const guint8 *code, gsize avail, const WInsn *in)
{
	ZydisDecodedInstruction zi;
	WInsn z;

	memset(&z, 0, sizeof(z));
	if (ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&w->zy[ptem_64bit], NULL, code, avail, &zi))) {
		z.ip = in->ip;
		z.size = zi.length;
		classify(&zi, in->ip, &z);
	}
	if (memcmp(&z, in, sizeof(z)))
		g_error("walk: fast decode at %#" G_GINT64_MODIFIER "x: size %u class %u, Zydis: size %u class %u",
			in->ip, in->size, in->iclass, z.size, z.iclass);
}

/* The instruction at ip in mode from its bytes at code (avail of them, at
 * most an instruction's length): 0 or -pte_bad_insn.  What only Zydis
 * decodes is kept per walker by ip (the same bytes, mode and ip give the
 * same answer): the instructions events bind to - VMRESUME, MOV CR3,
 * VMPTRLD - are walked one by one at every VM entry and exit, each a
 * Zydis decode of ~930 instructions (1 MiB exit-heavy: 16,000 of them). */
static int insn_bytes(VtWalk *w, const guint8 *code, gsize avail, guint64 ip, int mode, WInsn *in)
{
	ZydisDecodedInstruction zi;
	ZSlot *z;

	if (mode == ptem_64bit && fast_decode(code, avail, ip, in)) {
		if (G_UNLIKELY(w->check))
			check_fast(w, code, avail, in);
		return 0;
	}
	avail = MIN(avail, (gsize)ZYDIS_MAX_INSTRUCTION_LENGTH);
	z = &w->zcache[(ip ^ ip >> ZCACHE_BITS) & ((1u << ZCACHE_BITS) - 1)];
	if (z->avail && z->avail == avail && z->mode == mode && z->in.ip == ip && !memcmp(z->bytes, code, avail)) {
		*in = z->in;
		return 0;
	}
	memset(in, 0, sizeof(*in));
	if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&w->zy[mode & 3], NULL, code, avail, &zi)))
		return -pte_bad_insn;
	in->ip = ip;
	in->size = zi.length;
	classify(&zi, ip, in);
	memcpy(z->bytes, code, avail);
	z->avail = (guint8)avail;
	z->mode = (guint8)mode;
	z->in = *in;
	return 0;
}

/* Is the code at ip the image's own bytes, the same at any time (a page
 * the kernel never poked: the code function need not be asked, a kept
 * block of it - tag 0 - never reaches a poked page)? */
static inline gboolean is_plain(const VtWalk *w, guint64 ip)
{
	return ip >= w->plain_from[w->src] && !vt_decode_poked(&w->poked[w->src], ip >> 12);
}

/* The instruction at ip in mode (the walker's code source, time now):
 * 0, -pte_nomap (no code) or -pte_bad_insn; *tag: its bytes' (TAG_MIXED:
 * from two reads). */
static int insn_decode(VtWalk *w, guint64 ip, int mode, WInsn *in, guint64 *tag)
{
	guint64 tsc = is_plain(w, ip) ? 0 : now(w);   /* (plain code: any time) */
	gsize avail = 0, first;
	const guint8 *code = w->code(w->ctx, w->src, ip, tsc, &avail, tag);
	guint8 buf[ZYDIS_MAX_INSTRUCTION_LENGTH];

	if (!code || !avail)
		return -pte_nomap;
	first = avail;
	if (avail < sizeof(buf)) {       /* the rest from the next piece of code (libipt's retry) */
		memcpy(buf, code, avail);
		while (avail < sizeof(buf)) {
			gsize more = 0;
			guint64 t;
			const guint8 *c = w->code(w->ctx, w->src, ip + avail, tsc, &more, &t);

			if (!c || !more)
				break;
			more = MIN(more, sizeof(buf) - avail);
			memcpy(buf + avail, c, more);
			avail += more;
		}
		code = buf;
	}
	if (insn_bytes(w, code, MIN(avail, sizeof(buf)), ip, mode, in) < 0)
		return -pte_bad_insn;
	if (in->size > first)
		*tag = TAG_MIXED;
	return 0;
}

/* pt_insn_next_ip(): the next IP without trace. */
static int next_ip(const WInsn *in, guint64 *ip)
{
	switch (in->iclass) {
	case ptic_other: case ptic_ptwrite:
		*ip = in->ip + in->size;
		return 0;
	case ptic_call: case ptic_jump:
		if (in->direct) {
			*ip = in->target;
			return 0;
		}
		return -pte_bad_query;
	default:
		return -pte_bad_query;
	}
}

static gboolean ends_block(const WInsn *in)
{
	return in->iclass == ptic_call || in->iclass == ptic_jump;   /* end_on_call, end_on_jump */
}

static gboolean is_far(const WInsn *in)
{
	return in->iclass == ptic_far_call || in->iclass == ptic_far_return || in->iclass == ptic_far_jump;
}

static int binds_to_pip(const WInsn *in)
{
	return (in->flags & (F_CR3 | F_VMENTRY)) || is_far(in);
}

static int binds_to_vmcs(const WInsn *in)
{
	return (in->flags & (F_VMPTRLD | F_VMENTRY)) || is_far(in);
}

static int changes_cr3(const WInsn *in)
{
	return (in->flags & F_CR3) != 0;
}

static int is_ptwrite(const WInsn *in)
{
	return in->iclass == ptic_ptwrite;
}

/* ------------------------------------------------------- return stack */
static void ret_push(VtWalk *w, guint64 ip)
{
	w->ret[w->top] = ip;
	w->top = w->top == RET_SIZE ? 0 : w->top + 1;
	if (w->bottom == w->top)
		w->bottom = w->bottom == RET_SIZE ? 0 : w->bottom + 1;
}

static int ret_pop(VtWalk *w, guint64 *ip)
{
	if (w->top == w->bottom)
		return -pte_retstack_empty;
	w->top = w->top ? w->top - 1 : RET_SIZE;
	*ip = w->ret[w->top];
	return 0;
}

/* A near call's return address (not a call to the next instruction:
 * position independent code). */
static inline void log_call(VtWalk *w, const WInsn *in)
{
	if (in->iclass == ptic_call && !(in->direct && in->target == in->ip + in->size))
		ret_push(w, in->ip + in->size);
}

/* ---------------------------------------------------- the walk (pt_blk's) */
static int status_flags(const VtWalk *w, int flags)
{
	if (!w->enabled)
		flags |= pts_ip_suppressed;
	if ((w->status & pts_eos) && !w->process_event)
		flags |= pts_eos;
	return flags;
}

static int fetch_event(VtWalk *w)
{
	uint32_t lost_mtc, lost_cyc;
	int status;

	if (w->process_event)
		return 1;
	if (!(w->status & pts_event_pending))
		return 0;
	/* the time of the branches until the event applies: its packets move
	 * libipt's on (vt_walk_branch_time) */
	if (qry_time(w, &w->event_before, &lost_mtc, &lost_cyc) < 0)
		w->event_before = 0;
	status = qry_event(w, &w->event);
	if (status < 0)
		return status;
	w->process_event = TRUE;
	w->status = status;
	return 1;
}

/* The next IP of in from trace (in needs it). */
static inline int next_ip_trace(VtWalk *w, const WInsn *in, guint64 *ip)
{
	int status, taken;

	switch (in->iclass) {
	case ptic_cond_jump:
		status = qry_cond_branch(w, &taken);
		if (status >= 0)
			*ip = taken ? in->target : in->ip + in->size;
		return status;
	case ptic_return:
		status = qry_cond_branch(w, &taken);   /* a compressed return? */
		if (status < 0) {
			if (status != -pte_bad_query)
				return status;
			break;
		}
		if (!taken)
			return -pte_bad_retcomp;
		return ret_pop(w, ip) < 0 ? -pte_retstack_empty : status;
	case ptic_jump: case ptic_call:
		if (in->direct)
			return -pte_internal;
		break;
	case ptic_far_call: case ptic_far_return: case ptic_far_jump:
		break;
	default:
		return -pte_internal;
	}
	return qry_indirect_branch(w, ip);
}

static inline int proceed_with_trace(VtWalk *w, const WInsn *in)
{
	int status = next_ip_trace(w, in, &w->ip);

	if (status < 0)
		return status;
	if (G_UNLIKELY(w->process_event)) {
		uint32_t lost_mtc, lost_cyc;

		/* decided by a packet after the event in process (MODE.Exec,
		 * then the TIP of the far branch it binds to): that packet's
		 * time is the branch's */
		if (qry_time(w, &w->event_before, &lost_mtc, &lost_cyc) < 0)
			w->event_before = 0;
	}
	w->status = status;
	return status & pts_ip_suppressed ? -pte_noip : 0;
}

/* One instruction at w->ip into block: 1, 0 (block full) or an error. */
static int one_insn(VtWalk *w, struct pt_block *block, WInsn *in)
{
	guint16 n = (guint16)(block->ninsn + 1);
	guint64 tag;
	int status;

	if (!n)
		return 0;
	status = insn_decode(w, w->ip, w->mode, in, &tag);
	if (status < 0)
		return status;
	log_call(w, in);
	block->iclass = in->iclass;
	block->end_ip = in->ip;
	block->ninsn = n;
	w->last = *in;
	return 1;
}

/* To the first instruction that pred() accepts (1), a block end (0), or
 * -pte_bad_query where trace is needed (w->ip: that instruction). */
static int to_insn(VtWalk *w, struct pt_block *block, WInsn *in, int (*pred)(const WInsn *))
{
	for (;;) {
		int status = one_insn(w, block, in);

		if (status <= 0)
			return status;
		if (pred(in))
			return 1;
		status = next_ip(in, &w->ip);
		if (status < 0)
			return status;
		if (ends_block(in))
			return 0;
	}
}

/* To ip (1), a block end (0) or -pte_bad_query. */
static int to_ip(VtWalk *w, struct pt_block *block, WInsn *in, guint64 ip)
{
	for (;;) {
		int status;

		if (w->ip == ip)
			return 1;
		status = one_insn(w, block, in);
		if (status <= 0)
			return status;
		status = next_ip(in, &w->ip);
		if (status < 0)
			return status;
		if (ends_block(in))
			return w->ip == ip;
	}
}

static int to_ip_with_trace(VtWalk *w, struct pt_block *block, guint64 ip)
{
	WInsn in;
	int status = to_ip(w, block, &in, ip);

	if (status != -pte_bad_query)
		return status;
	return proceed_with_trace(w, &in);
}

/* async paging, async VMCS, exec mode: at ip (or at once without one) */
static int to_event_ip(VtWalk *w, struct pt_block *block, const struct pt_event *ev, guint64 ip)
{
	int status;

	if (ev->ip_suppressed)
		return 1;
	status = to_ip_with_trace(w, block, ip);
	if (status < 0)
		return status;
	return w->ip == ip;
}

static void clear_postponed(VtWalk *w)
{
	w->process_insn = w->bound_paging = w->bound_vmcs = w->bound_ptwrite = FALSE;
}

static int postpone(VtWalk *w, const WInsn *in)
{
	if (w->process_insn)
		return -pte_internal;
	w->process_insn = TRUE;
	w->insn = *in;
	return status_flags(w, pts_event_pending);
}

static int proceed_postponed(VtWalk *w)
{
	int status;

	if (!w->process_insn)
		return 0;
	if (w->enabled && next_ip(&w->insn, &w->ip) < 0) {
		status = proceed_with_trace(w, &w->insn);
		if (status < 0)
			return status;
	}
	clear_postponed(w);
	return 0;
}

/* A synchronous disable's IP is where tracing should resume: after a call. */
static void disable_resume_ip(VtWalk *w, const WInsn *in)
{
	w->ip = in->iclass == ptic_call || in->iclass == ptic_far_call ? in->ip + in->size : 0;
}

/* Erratum SKD022: an async disable at VMLAUNCH/VMRESUME is a sync one. */
static gboolean skd022(VtWalk *w, struct pt_event *ev)
{
	WInsn in;
	guint64 tag;

	if (!w->errata.skd022 || insn_decode(w, ev->variant.async_disabled.at, w->mode, &in, &tag) < 0 ||
	    !(in.flags & F_VMENTRY))
		return FALSE;
	ev->type = ptev_disabled;
	ev->variant.disabled.ip = ev->variant.async_disabled.ip;
	return TRUE;
}

static int proceed_event(VtWalk *w, struct pt_block *block);

static int event_disabled(VtWalk *w, struct pt_block *block, const struct pt_event *ev)
{
	WInsn in;
	int status;

	memset(&in, 0, sizeof(in));
	if (ev->ip_suppressed)
		status = to_insn(w, block, &in, changes_cr3);
	else
		status = to_ip(w, block, &in, ev->variant.disabled.ip);
	if (status > 0)
		return 1;
	if (status != -pte_bad_query)
		return status;
	disable_resume_ip(w, &in);     /* it binds to the branch that needs trace */
	return 1;
}

static int event_bound(VtWalk *w, struct pt_block *block, int (*pred)(const WInsn *), gboolean *bound)
{
	WInsn in;
	int status;

	if (!w->enabled)
		return 1;
	status = to_insn(w, block, &in, pred);
	if (status <= 0)
		return status;
	*bound = TRUE;
	status = postpone(w, &in);
	return status < 0 ? status : 1;
}

static int event_ptwrite(VtWalk *w, struct pt_block *block, struct pt_event *ev)
{
	WInsn in;
	int status;

	if (!w->enabled)
		return 1;
	if (ev->ip_suppressed) {
		status = to_insn(w, block, &in, is_ptwrite);
		if (status <= 0)
			return status;
		ev->variant.ptwrite.ip = in.ip;
		ev->ip_suppressed = 0;
	} else {
		status = to_ip(w, block, &in, ev->variant.ptwrite.ip);
		if (status <= 0)
			return status;
		status = one_insn(w, block, &in);
		if (status <= 0)
			return status;
	}
	w->bound_ptwrite = TRUE;
	status = postpone(w, &in);
	return status < 0 ? status : 1;
}

/* To the pending event's place: its status (pts_event_pending), 0 when the
 * block ended first, or an error. */
static int proceed_event(VtWalk *w, struct pt_block *block)
{
	struct pt_event *ev = &w->event;
	WInsn in;
	int status = 1;

	switch (ev->type) {
	case ptev_disabled:
		status = event_disabled(w, block, ev);
		break;
	case ptev_async_disabled:
		status = to_ip(w, block, &in, ev->variant.async_disabled.at);
		if (status > 0 && skd022(w, ev))
			return proceed_event(w, block);
		break;
	case ptev_async_branch:
		status = to_ip(w, block, &in, ev->variant.async_branch.from);
		break;
	case ptev_paging:
		status = event_bound(w, block, binds_to_pip, &w->bound_paging);
		break;
	case ptev_async_paging:
		status = to_event_ip(w, block, ev, ev->variant.async_paging.ip);
		break;
	case ptev_vmcs:
		status = event_bound(w, block, binds_to_vmcs, &w->bound_vmcs);
		break;
	case ptev_async_vmcs:
		status = to_event_ip(w, block, ev, ev->variant.async_vmcs.ip);
		break;
	case ptev_exec_mode:
		status = to_event_ip(w, block, ev, ev->variant.exec_mode.ip);
		break;
	case ptev_tsx:
		if (!ev->ip_suppressed)
			status = to_ip(w, block, &in, ev->variant.tsx.ip);
		break;
	case ptev_exstop:
		if (w->enabled && !ev->ip_suppressed)
			status = to_ip(w, block, &in, ev->variant.exstop.ip);
		break;
	case ptev_mwait:
		if (w->enabled && !ev->ip_suppressed)
			status = to_ip(w, block, &in, ev->variant.mwait.ip);
		break;
	case ptev_ptwrite:
		status = event_ptwrite(w, block, ev);
		break;
	default:
		break;
	}
	if (status <= 0)
		return status;
	return status_flags(w, pts_event_pending);
}

/* ---------------------------------------------------------- the table */
VtWalkTable *vt_walk_table_new(void)
{
	VtWalkTable *t = g_new0(VtWalkTable, 1);

	t->slots = vt_decode_table_new(sizeof(WSlot) << TABLE_BITS);   /* (pages touched when used) */
	t->hashes = vt_decode_table_new_small(sizeof(guint16) << TABLE_BITS);
	return t;
}

void vt_walk_table_free(VtWalkTable *t)
{
	if (!t)
		return;
	vt_decode_table_free(t->slots, sizeof(WSlot) << TABLE_BITS);
	vt_decode_table_free_small(t->hashes, sizeof(guint16) << TABLE_BITS);
	g_free(t);
}

void vt_walk_set_tables(VtWalk *w, VtWalkTable *host, VtWalkTable *guest, guint64 host_plain, guint64 guest_plain)
{
	w->tables[0] = host;
	w->tables[1] = guest;
	w->plain_from[0] = host_plain;
	w->plain_from[1] = guest_plain;
	g_clear_pointer(&w->near, g_free);   /* (other images' blocks) */
}

void vt_walk_set_memos(VtWalk *w, const VtDecodePokeMemo *host, const VtDecodePokeMemo *guest, guint n)
{
	w->memos[0] = host;
	w->memos[1] = guest;
	w->nmemos = n;
}

void vt_walk_set_pokes(VtWalk *w, const VtDecodePokes *host_pokes, const VtDecodePokes *guest_pokes)
{
	w->poked[0] = vt_decode_pokes_pages(host_pokes);
	w->poked[1] = vt_decode_pokes_pages(guest_pokes);
}

static guint set_index(guint64 ip, guint64 tag)
{
	guint64 h = ip ^ (ip >> TABLE_BITS) ^ (tag * 0x9e3779b97f4a7c15ull);

	return (guint)(h & ((1u << TABLE_BITS) - 2));
}

/* The block's hash in t->hashes: never 0 (empty), other bits of the
 * block than its set's. */
static guint16 hash_of(guint64 ip, guint64 tag)
{
	return (guint16)(((ip + tag) * 0x9e3779b97f4a7c15ull) >> 48) | 1;
}

/* b as a slot (FALSE: its last instruction is too far from its start, or
 * its target from its end, to be kept). */
static gboolean slot_pack(const WBlock *b, WSlot *s)
{
	guint64 end = b->last.ip - b->ip, next = b->last.ip + b->last.size;
	gint64 disp = has_target(&b->last) ? (gint64)(b->last.target - next) : 0;

	if (end > G_MAXUINT16 || disp != (gint32)disp)
		return FALSE;
	s->ninsn = b->ninsn;
	s->end = (guint16)end;
	s->ip = b->ip;
	s->tag = b->tag;
	s->disp = (gint32)disp;
	s->mode = b->mode;
	s->size = b->last.size;
	s->iclass = b->last.iclass;
	s->flags = (guint8)(b->last.flags | (b->last.direct ? F_DIRECT : 0));
	return TRUE;
}

/* The last instruction of the block in slot s. */
static void slot_last(const WSlot *s, WInsn *in)
{
	in->ip = s->ip + s->end;
	in->size = s->size;
	in->iclass = s->iclass;
	in->flags = s->flags & ~F_DIRECT;
	in->direct = (s->flags & F_DIRECT) != 0;
	in->target = has_target(in) ? in->ip + in->size + (guint64)(gint64)s->disp : 0;
}

/* The block at (ip, tag, mode) if the table has it: its instructions and
 * its last one. */
static gboolean table_get(const VtWalkTable *t, guint64 ip, guint64 tag, int mode, guint16 *ninsn, WInsn *last)
{
	guint i = set_index(ip, tag);
	guint16 hash = hash_of(ip, tag);
	WSlot *set = &t->slots[i], s;

	for (int k = 0; k < 2; k++) {
		if (__atomic_load_n(&t->hashes[i + k], __ATOMIC_RELAXED) != hash)
			continue;
		if (vt_seq_read(&s, &set[k], sizeof(s)) && s.ip == ip && s.tag == tag && s.mode == mode && ip) {
			*ninsn = s.ninsn;
			slot_last(&s, last);
			return TRUE;
		}
	}
	return FALSE;
}

static void table_put(VtWalkTable *t, const WBlock *b)
{
	guint i = set_index(b->ip, b->tag), k;
	WSlot *s, in;
	guint32 seq;

	if (!slot_pack(b, &in))
		return;
	/* an empty way, else the second (the first keeps what came first) */
	k = __atomic_load_n(&t->hashes[i], __ATOMIC_RELAXED) ? 1 : 0;
	s = &t->slots[i + k];
	if (!vt_seq_lock(&s->seq, &seq))
		return;
	memcpy((guint8 *)s + sizeof(s->seq), (const guint8 *)&in + sizeof(in.seq), sizeof(in) - sizeof(in.seq));
	vt_seq_unlock(&s->seq, seq);
	__atomic_store_n(&t->hashes[i + k], hash_of(b->ip, b->tag), __ATOMIC_RELAXED);
}

static inline NearSlot *near_slot(VtWalk *w, guint64 ip, guint64 tag)
{
	return &w->near[(ip ^ (ip >> NEAR_BITS) ^ tag) & ((1u << NEAR_BITS) - 1)];
}

static void near_put(VtWalk *w, guint64 ip, guint64 tag, int mode, guint16 ninsn, const WInsn *last)
{
	NearSlot *s;

	if (!w->near)
		w->near = g_new0(NearSlot, 1u << NEAR_BITS);
	s = near_slot(w, ip, tag);
	s->ip = ip;
	s->tag = tag;
	s->mode = (guint8)mode;
	s->src = (guint8)w->src;
	s->ninsn = ninsn;
	s->last = *last;
}

/* The block at ip (bytes tagged tag) in mode: the walker's own, else the
 * image's table (and then the walker's). */
static inline gboolean block_get(VtWalk *w, guint64 ip, guint64 tag, int mode, guint16 *ninsn, WInsn *last)
{
	if (w->near) {
		const NearSlot *s = near_slot(w, ip, tag);

		if (s->ip == ip && s->tag == tag && s->mode == mode && s->src == w->src && ip) {
			*ninsn = s->ninsn;
			*last = s->last;
			return TRUE;
		}
	}
	if (!w->tables[w->src] || !table_get(w->tables[w->src], ip, tag, mode, ninsn, last))
		return FALSE;
	near_put(w, ip, tag, mode, *ninsn, last);
	return TRUE;
}

/* The set of the block at ip (bytes tagged tag) on its way into the
 * cache: a table that does not fit in it misses on nearly every lookup,
 * and the next block's set is known (or one of two) before libipt has
 * read the trace that decides it and queue.c has handled this block.
 * (Always inlined: GCC finds a function that only prefetches without
 * effect and drops its calls.)  It hides part of the miss, not all
 * (session 15, decode-only run of the 1 MiB synth bench files, 2.44 M
 * lookups: 99.8% of them had their set prefetched, yet about half of
 * vt_walk_next's samples wait on that set): it leads the lookup by one
 * block's work (~900 instructions), about as long as a miss to memory
 * takes on the shared machine.  A table of 1 MiB (in L2) waited far
 * less but kept fewer blocks, and cost the same in all; prefetching the
 * next block's code as well (for the table's misses) did not pay. */
static inline __attribute__((always_inline)) void prefetch_block(const VtWalk *w, guint64 ip, guint64 tag)
{
	const VtWalkTable *t = w->tables[w->src];

	if (t) {
		guint i = set_index(ip, tag);

		__builtin_prefetch(&t->hashes[i]);
		__builtin_prefetch(&t->slots[i]);
	}
}

/* The block's end in (w->ip at it): the next IP from it, with trace when
 * it needs some (the next block's set prefetched: both ways of a
 * conditional branch and the return address on the stack before, where
 * the trace went after).  Inlined into both callers, with the trace
 * query it makes: it runs at every block (callgrind: 2% fewer
 * instructions in a decode-only run than as a call). */
static inline __attribute__((always_inline)) int block_end(VtWalk *w, const WInsn *in, guint64 tag)
{
	int status;

	log_call(w, in);
	if (next_ip(in, &w->ip) == 0) {
		prefetch_block(w, w->ip, tag);
		return 0;                /* a direct call or jump */
	}
	if (in->iclass == ptic_cond_jump) {
		prefetch_block(w, in->target, tag);
		prefetch_block(w, in->ip + in->size, tag);
	} else if (in->iclass == ptic_return && w->top != w->bottom) {
		prefetch_block(w, w->ret[w->top ? w->top - 1 : RET_SIZE], tag);
	}
	w->ip = in->ip;
	status = proceed_with_trace(w, in);
	if (status == 0 && in->iclass != ptic_cond_jump)
		prefetch_block(w, w->ip, tag);
	return status;
}

/* Plain code at ip (the image's own bytes, never changed): the piece of
 * it one read gives, *len bytes (0: not plain, or none) - what reading
 * each of its addresses again would give. */
static const guint8 *plain_piece(VtWalk *w, guint64 ip, gsize *len)
{
	guint64 tag = 0;
	const guint8 *code;

	*len = 0;
	if (!is_plain(w, ip))
		return NULL;
	code = w->code(w->ctx, w->src, ip, 0, len, &tag);
	if (!code || tag)
		*len = 0;
	return code;
}

/* The instructions from w->ip on (at piece + off, len bytes from the
 * block's start) that the fast decoder knows and that only lead to the
 * next (ptic_other: no flags, fastinsn.h never gives any), counted into
 * block, w->ip after them, the last of them block's end and w->last -
 * what fill() does with each, but for the WInsn it made and dropped each
 * time (a third of a fresh block's cost: synth's mixes walk ~160,000 of
 * them a MiB) - and TRUE with *in if the fast decoder knows the one
 * after them too (as insn_bytes() gives it).  Stops a block short of
 * full: the general path ends it.  Not in VMTRACE_WALK_CHECK mode (each
 * instruction checked there). */
static inline gboolean plain_run(VtWalk *w, struct pt_block *block, const guint8 *piece, gsize len, guint64 off,
				 WInsn *in)
{
	guint64 ip = w->ip;
	guint16 n = block->ninsn, n0 = n;
	guint8 last_len = 0;
	VtFastInsn f;
	gboolean known = FALSE;

	while (len - off >= ZYDIS_MAX_INSTRUCTION_LENGTH && n < G_MAXUINT16 - 1 &&
	       (known = vt_fast_insn_decode(piece + off, ZYDIS_MAX_INSTRUCTION_LENGTH, &f)) && f.iclass == ptic_other) {
		ip += f.len;
		off += f.len;
		last_len = f.len;
		n++;
		known = FALSE;
	}
	w->ip = ip;
	block->ninsn = n;
	if (n != n0) {               /* the last one counted, as fill() leaves it (where the next fails) */
		memset(&w->last, 0, sizeof(w->last));
		w->last.ip = block->end_ip = ip - last_len;
		w->last.size = last_len;
		w->last.iclass = block->iclass = ptic_other;
	}
	if (known)
		fast_insn(&f, ip, in);
	return known;
}

/* Walk a block not in the table (and keep it if its bytes have one tag);
 * its instructions out of one read while it holds them whole: plain
 * code's, or code0 (avail0 bytes, tagged tag0: what the code function gave
 * for the block's start at this time - a poked page's version). */
static int fill(VtWalk *w, struct pt_block *block, guint64 tag0, const guint8 *code0, gsize avail0)
{
	guint64 start = w->ip, tag = tag0;
	gboolean one = tag0 != TAG_MIXED;
	gsize len = avail0;
	const guint8 *piece = code0 && tag0 != TAG_MIXED ? code0 : plain_piece(w, start, &len);
	WInsn in;

	for (;;) {
		guint64 nip, off = w->ip - start;
		/* the plain instructions first (w->ip moves past them), and the
		 * one after them if the fast decoder knows it */
		gboolean known = w->mode == ptem_64bit && !w->check && off < len &&
				 plain_run(w, block, piece, len, off, &in);
		guint16 n = (guint16)(block->ninsn + 1);
		int status = 0;

		if (!n)
			return 0;
		off = w->ip - start;
		if (!known)
			status = off < len && len - off >= ZYDIS_MAX_INSTRUCTION_LENGTH ?
				 insn_bytes(w, piece + off, ZYDIS_MAX_INSTRUCTION_LENGTH, w->ip, w->mode, &in) :
				 insn_decode(w, w->ip, w->mode, &in, &tag);
		if (status < 0)
			return status;
		one = one && tag == tag0;
		block->iclass = in.iclass;
		block->end_ip = in.ip;
		block->ninsn = n;
		w->last = in;
		if (next_ip(&in, &nip) < 0 || ends_block(&in))
			break;
		w->ip = nip;
	}
	if (one && w->tables[w->src]) {
		WBlock b = { .ip = start, .tag = tag0, .ninsn = block->ninsn, .mode = (guint8)w->mode, .last = in };

		table_put(w->tables[w->src], &b);
		near_put(w, start, tag0, w->mode, block->ninsn, &in);
	}
	/* a block seen for the first time mostly leads to others: their first
	 * code bytes on their way (the same read's bytes at their offsets -
	 * prefetching never faults, wherever it points) */
	if (piece && has_target(&in))
		__builtin_prefetch((const void *)((guintptr)piece + (in.target - start)));
	if (piece && in.iclass == ptic_cond_jump)
		__builtin_prefetch((const void *)((guintptr)piece + (in.ip + in.size - start)));
	return block_end(w, &in, tag0);
}

/* The code function's answer for a block's start at ip now, from its
 * memo of the page without a call where it has one. */
static inline const guint8 *code_at(VtWalk *w, guint64 ip, gsize *avail, guint64 *tag)
{
	const VtDecodePokeMemo *m = w->memos[w->src];
	guint64 tsc = now(w);
	const guint8 *code;

	if (m && (code = vt_decode_pokes_code_memo(&m[(ip / 4096) % w->nmemos], ip, tsc, avail, tag)))
		return code;
	return w->code(w->ctx, w->src, ip, tsc, avail, tag);
}

static int no_event(VtWalk *w, struct pt_block *block)
{
	gsize avail = 0;
	guint64 tag = 0;
	guint16 ninsn;
	const guint8 *code = NULL;

	/* a kept block of plain code was read from the image (no need to ask) */
	if (!is_plain(w, w->ip) && (!(code = code_at(w, w->ip, &avail, &tag)) || !avail))
		return -pte_nomap;
	if (tag != TAG_MIXED && block_get(w, w->ip, tag, w->mode, &ninsn, &w->last)) {
		block->ninsn = ninsn;
		block->end_ip = w->last.ip;
		block->iclass = w->last.iclass;
		return block_end(w, &w->last, tag);
	}
	return fill(w, block, tag, code, avail);
}

/* pt_blk_proceed_trailing_event(): events at the IP reached. */
static int trailing_event_slow(VtWalk *w)
{
	struct pt_event *ev = &w->event;
	int status = fetch_event(w);

	if (status <= 0) {
		if (status < 0)
			return status;
		status = proceed_postponed(w);
		return status < 0 ? status : status_flags(w, 0);
	}
	switch (ev->type) {
	case ptev_disabled:
		if (!w->process_insn)
			break;
		if (ev->ip_suppressed && changes_cr3(&w->insn))
			return status_flags(w, pts_event_pending);
		if (next_ip(&w->insn, &w->ip) < 0) {
			disable_resume_ip(w, &w->insn);
			return status_flags(w, pts_event_pending);
		}
		clear_postponed(w);
		if (!ev->ip_suppressed && w->ip == ev->variant.disabled.ip)
			return status_flags(w, pts_event_pending);
		break;
	case ptev_paging: case ptev_vmcs: {
		gboolean paging = ev->type == ptev_paging;
		gboolean *bound = paging ? &w->bound_paging : &w->bound_vmcs;

		if (!w->enabled)
			return status_flags(w, pts_event_pending);
		if (!w->process_insn || *bound || !(paging ? binds_to_pip : binds_to_vmcs)(&w->insn))
			break;
		*bound = TRUE;
		return status_flags(w, pts_event_pending);
	}
	case ptev_ptwrite:
		if (!w->enabled)
			return status_flags(w, pts_event_pending);
		if (!w->process_insn || w->bound_ptwrite || !ev->ip_suppressed || !is_ptwrite(&w->insn))
			break;
		w->bound_ptwrite = TRUE;
		return status_flags(w, pts_event_pending);
	default: {
		guint64 at = 0;
		gboolean has_ip = FALSE;

		status = proceed_postponed(w);
		if (status < 0)
			return status;
		switch (ev->type) {
		case ptev_async_disabled: at = ev->variant.async_disabled.at; has_ip = TRUE; break;
		case ptev_async_branch: at = ev->variant.async_branch.from; has_ip = TRUE; break;
		case ptev_async_paging: at = ev->variant.async_paging.ip; has_ip = !ev->ip_suppressed; break;
		case ptev_async_vmcs: at = ev->variant.async_vmcs.ip; has_ip = !ev->ip_suppressed; break;
		case ptev_exec_mode: at = ev->variant.exec_mode.ip; has_ip = !ev->ip_suppressed; break;
		case ptev_tsx: at = ev->variant.tsx.ip; has_ip = !ev->ip_suppressed; break;
		case ptev_exstop: at = ev->variant.exstop.ip; has_ip = !ev->ip_suppressed && w->enabled; break;
		case ptev_mwait: at = ev->variant.mwait.ip; has_ip = !ev->ip_suppressed && w->enabled; break;
		default: break;
		}
		if (has_ip && w->ip != at)
			break;
		if (ev->type == ptev_async_disabled && skd022(w, ev))
			break;
		return status_flags(w, pts_event_pending);
	}
	}
	status = proceed_postponed(w);
	return status < 0 ? status : status_flags(w, 0);
}

/* trailing_event_slow() where nearly every block ends: no event in
 * process or pending, no postponed instruction. */
static inline int trailing_event(VtWalk *w)
{
	if (!w->process_event && !(w->status & pts_event_pending) && !w->process_insn)
		return status_flags(w, 0);
	return trailing_event_slow(w);
}

static int proceed(VtWalk *w, struct pt_block *block)
{
	int status = fetch_event(w);

	if (status)
		return status < 0 ? status : proceed_event(w, block);
	if (!w->enabled)
		return w->status & pts_eos ? -pte_eos : -pte_no_enable;
	status = no_event(w, block);
	if (status < 0)
		return status;
	status = trailing_event(w);
	w->joinable = status == 0 && !w->process_event;   /* (an event waits for an IP ahead: walk to it) */
	return status;
}

gboolean vt_walk_last_branch(const VtWalk *w, guint64 ip, guint8 *kind, guint8 *len)
{
	const WInsn *in = &w->last;

	if (w->blk || in->ip != ip || !in->size)
		return FALSE;
	switch (in->iclass) {
	case ptic_cond_jump: *kind = VT_INSN_COND; break;
	case ptic_call: *kind = in->direct ? VT_INSN_CALL : VT_INSN_CALL_IND; break;
	case ptic_jump: *kind = in->direct ? VT_INSN_JUMP : VT_INSN_JUMP_IND; break;
	case ptic_return: *kind = VT_INSN_RETURN; break;
	default: return FALSE;
	}
	*len = in->size;
	return TRUE;
}

gboolean vt_walk_branch_time(const VtWalk *w, guint64 *tsc)
{
	if (w->blk || !w->process_event || w->bound_paging || w->bound_vmcs || w->bound_ptwrite)
		return FALSE;            /* (an event bound to the instruction decides it: its time) */
	*tsc = w->event_before;
	return TRUE;
}

int vt_walk_next(VtWalk *w, struct pt_block *block)
{
	if (w->blk)
		return pt_blk_next(w->blk, block, sizeof(*block));
	memset(block, 0, sizeof(*block));
	block->ip = w->ip;
	block->mode = w->mode;
	return proceed(w, block);
}

/* The decoder's time as the queue reads it (0: none yet). */
static guint64 walk_tsc(const VtWalk *w)
{
	uint64_t tsc;
	uint32_t lost_mtc, lost_cyc;

	return qry_time(w, &tsc, &lost_mtc, &lost_cyc) < 0 ? 0 : tsc;
}

/* The block after the last one (a conditional or direct jump, taken or
 * not), joined to block (its bytes' tag: *tag): FALSE when it may not be -
 * the jump is another branch, the decoder read trace for it (its time may
 * have changed; with cross: did change), or the table does not have the
 * next block. */
static gboolean join_one(VtWalk *w, struct pt_block *block, VtWalkRun *run, gboolean cross, guint32 *insns,
			 guint64 *tag)
{
	const WInsn *in = &w->last;
	uint64_t off = 0;
	guint16 ninsn;
	gsize avail = 0;
	WInsn last;
	gboolean taken;

	if (in->iclass != ptic_cond_jump && !(in->iclass == ptic_jump && in->direct))
		return FALSE;
	if (qry_get_offset(w, &off) < 0)
		return FALSE;
	if (off != run->last_off) {      /* the trace moved on (by the block before): a packet crossed */
		if (!cross || walk_tsc(w) != run->tsc)
			return FALSE;    /* (the time asked once a position: at last_off it was the same) */
		run->moved_at = run->blocks;   /* (a step's progress) */
		run->last_off = off;
	}
	*tag = 0;                        /* as no_event() finds it */
	if (!is_plain(w, w->ip) && (!code_at(w, w->ip, &avail, tag) || !avail || *tag == TAG_MIXED))
		return FALSE;
	if (!block_get(w, w->ip, *tag, w->mode, &ninsn, &last) || *insns + ninsn > G_MAXUINT16)
		return FALSE;
	taken = in->iclass == ptic_jump || w->ip != in->ip + in->size;
	if (taken) {
		run->taken = TRUE;
		run->have_nt = FALSE;
	} else {
		run->have_nt = TRUE;
		run->nt_ip = w->ip;
		run->nt_off = off;
		run->nt_insns = *insns;
		run->nt_len = in->size;
	}
	run->last_nt = !taken;
	if (!run->blocks++)
		run->first_off = off;
	*insns += ninsn;
	w->last = last;
	block->ninsn = (uint16_t)*insns;
	block->end_ip = last.ip;
	block->iclass = last.iclass;
	return TRUE;
}

/* run emptied field by field: a memset of its size is GCC's rep stos,
 * whose start-up cost at every step was ~8% of the real boot's decoding
 * (two fields more turned the inlined stores into it) */
static inline void run_clear(VtWalkRun *run)
{
	run->blocks = run->moved_at = run->nt_insns = 0;
	run->off = run->first_off = run->last_off = run->nt_ip = run->nt_off = run->tsc = 0;
	run->taken = run->have_nt = run->last_nt = FALSE;
	run->nt_len = 0;
}

int vt_walk_next_joined(VtWalk *w, struct pt_block *block, guint max, gboolean cross, VtWalkRun *run)
{
	uint64_t off = 0;
	guint64 tag;
	guint32 insns;
	int status;

	run_clear(run);
	if (w->blk || !max || qry_get_offset(w, &off) < 0)
		return vt_walk_next(w, block);
	run->off = run->last_off = off;
	if (cross)
		run->tsc = walk_tsc(w);
	w->joinable = FALSE;
	status = vt_walk_next(w, block);
	/* (w->last: the last block's last instruction, no event pending) */
	for (insns = block->ninsn; w->joinable && run->blocks < max && join_one(w, block, run, cross, &insns, &tag);) {
		status = block_end(w, &w->last, tag);
		if (status == 0)
			status = trailing_event(w);
		w->joinable = status == 0 && !w->process_event;
	}
	return status;
}

int vt_walk_sync_forward(VtWalk *w)
{
	int status;

	if (w->blk)
		return pt_blk_sync_forward(w->blk);
	w->mode = ptem_unknown;
	w->ip = 0;
	w->status = 0;
	w->enabled = w->process_event = FALSE;
	clear_postponed(w);
	memset(&w->event, 0, sizeof(w->event));
	w->top = w->bottom = 0;
	status = qry_sync_forward(w, &w->ip);
	if (status < 0)
		return status;
	w->status = status;
	if (!(status & pts_ip_suppressed))
		w->enabled = TRUE;
	return trailing_event(w);
}

/* pt_blk_event(): the event in process, applied. */
static int apply(VtWalk *w, struct pt_event *ev)
{
	switch (ev->type) {
	case ptev_enabled:
		if (ev->variant.enabled.ip == w->ip)
			ev->variant.enabled.resumed = 1;
		if (ev->status_update)
			return -pte_bad_context;
		if (ev->ip_suppressed)
			return -pte_noip;
		if (w->enabled)
			return -pte_bad_context;
		w->ip = ev->variant.enabled.ip;
		w->enabled = TRUE;
		break;
	case ptev_async_disabled:
		if (w->ip != ev->variant.async_disabled.at)
			return -pte_bad_query;
		/* fall through */
	case ptev_disabled:
		if (ev->status_update || !w->enabled)
			return -pte_bad_context;
		w->enabled = FALSE;
		break;
	case ptev_async_branch:
		if (w->ip != ev->variant.async_branch.from)
			return -pte_bad_query;
		if (ev->status_update || !w->enabled)
			return -pte_bad_context;
		w->ip = ev->variant.async_branch.to;
		break;
	case ptev_async_paging:
		if (!ev->ip_suppressed && w->ip != ev->variant.async_paging.ip)
			return -pte_bad_query;
		break;
	case ptev_async_vmcs:
		if (!ev->ip_suppressed && w->ip != ev->variant.async_vmcs.ip)
			return -pte_bad_query;
		break;
	case ptev_overflow:
		if (ev->status_update)
			return -pte_bad_context;
		w->enabled = !ev->ip_suppressed;
		w->ip = ev->ip_suppressed ? 0 : ev->variant.overflow.ip;
		break;
	case ptev_exec_mode:
		if (!ev->ip_suppressed && w->ip != ev->variant.exec_mode.ip)
			return -pte_bad_query;
		if (ev->status_update && w->enabled && w->mode != ptem_unknown &&
		    w->mode != (int)ev->variant.exec_mode.mode)
			return -pte_bad_status_update;
		w->mode = ev->variant.exec_mode.mode;
		break;
	case ptev_tsx:
		if (!ev->ip_suppressed && w->ip != ev->variant.tsx.ip)
			return -pte_bad_query;
		break;
	case ptev_stop:
		if (ev->status_update || w->enabled)
			return -pte_bad_context;
		break;
	case ptev_exstop:
		if (!ev->ip_suppressed && w->enabled && w->ip != ev->variant.exstop.ip)
			return -pte_bad_query;
		break;
	case ptev_mwait:
		if (!ev->ip_suppressed && w->enabled && w->ip != ev->variant.mwait.ip)
			return -pte_bad_query;
		break;
	default:
		break;
	}
	w->process_event = FALSE;
	return 0;
}

int vt_walk_event(VtWalk *w, struct pt_event *ev)
{
	int status;

	if (w->blk)
		return pt_blk_event(w->blk, ev, sizeof(*ev));
	if (!w->process_event)
		return -pte_bad_query;
	status = apply(w, &w->event);
	if (status < 0)
		return status;
	*ev = w->event;
	return trailing_event(w);
}
