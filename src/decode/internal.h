/* internal.h - what the files of src/decode/ share (not part of the API). */
#ifndef VT_DECODE_INTERNAL_H
#define VT_DECODE_INTERNAL_H

#include <intel-pt.h>
#include <Zydis/Zydis.h>

#include "src/decode/decode.h"

/* A new libipt image with every code segment of img (iscache-backed, so the
 * block decoder keeps its block cache); one per decoder: libipt images may
 * not be shared between decoders. */
struct pt_image *vt_decode_image_new_pt(VtDecodeImage *img, GError **error);

/* Reads len bytes at offset off of a queue's AUX data into dst. */
typedef gboolean (*VtDecodeReadFunc)(gpointer ctx, guint64 off, guint8 *dst, gsize len, GError **error);

/* A queue of len bytes, read through read(ctx) a window of about `window`
 * bytes at a time (0: in one piece); ctx_free(ctx) when the queue is freed
 * (also on failure). */
VtDecodeQueue *vt_decode_queue_new_reader(VtDecodeReadFunc read, gpointer ctx, GDestroyNotify ctx_free,
					  guint64 len, guint64 window, const VtDecodeCpu *cpu, VtDecodeImage *host,
					  VtDecodeImage *guest, GError **error);
/* Pieces of one queue decoded apart (queue.c's "Ranges"), each piece's
 * branches what decoding the whole queue gives for it: TRUE when d may be
 * (no cycles, not libipt's block decoder). */
gboolean vt_decode_queue_splits(const VtDecodeQueue *d);
/* A decoder of the same queue, images and settings as proto (which must
 * split), for vt_decode_queue_range(); proto's read function is shared
 * (it must be safe to call from several threads), its code hook is not
 * (vt_decode_queue_set_code: a context of the clone's own). */
VtDecodeQueue *vt_decode_queue_clone(const VtDecodeQueue *proto, GError **error);
/* *at: the first PSB at or after queue offset `from` that a range may
 * start at (one PSB before it within 64 KiB to warm up on), the queue's
 * length if none.  Ranges cut at boundary(k * size) cover the queue. */
gboolean vt_decode_queue_boundary(VtDecodeQueue *d, guint64 from, guint64 *at, GError **error);
/* d decodes (vt_decode_queue_next) the range from boundary `start` (or 0)
 * up to boundary `end` (or the queue's length) from now on: the branches
 * whose trace lies in it, as the whole queue's decoder emits them, but for
 * times, which may be earlier than the latest before the range (the
 * caller takes the latest: vt_decode_queue_last_time of the ranges
 * before).  State of an earlier range is gone (error: cleared). */
gboolean vt_decode_queue_range(VtDecodeQueue *d, guint64 start, guint64 end, GError **error);
/* The latest time emitted so far (0: none), counting the range's warm-up. */
guint64 vt_decode_queue_last_time(const VtDecodeQueue *d);
/* Also report power events (VT_BRANCH_PSB, VT_BRANCH_CBR). */
void vt_decode_queue_set_power(VtDecodeQueue *d, gboolean power);
/* Also report a VT_BRANCH_FLOW_END at the queue's end. */
void vt_decode_queue_set_flow_end(VtDecodeQueue *d, gboolean flow_end);
/* Emit no VT_BRANCH_JUMP (vt_decode_result_drop_jumps); the walker then
 * joins the blocks between them (vt_walk_next_joined). */
void vt_decode_queue_set_drop_jumps(VtDecodeQueue *d, gboolean drop);
/* Blocks the walker joined to the one before so far (tests). */
guint64 vt_decode_queue_joined(const VtDecodeQueue *d);
/* CFE and EVD (Event Trace, libipt 2.1+) have sizes libipt 2.0.5 does not
 * know: the packet decoders' callback (pt_config.decode) skips them. */
int vt_decode_unknown_packet(struct pt_packet_unknown *unknown, const struct pt_config *config, const uint8_t *pos,
			     void *context);
/* Also count CYC cycles for IPC (VtBranch.ipc, VtBranch.cycles). */
void vt_decode_queue_set_cycles(VtDecodeQueue *d, gboolean cycles);
/* cycles.c: a queue's CYC packets read again behind the decoder, for the
 * branches where perf takes an IPC sample.  read: the queue's bytes, len
 * of them; thresh: the recording has a CYC threshold (VtDecodeCpu). */
typedef struct VtDecodeCycles VtDecodeCycles;
typedef enum {
	VT_CYCLES_TAKEN,                 /* a conditional jump taken (a TNT bit) */
	VT_CYCLES_NOT_TAKEN,             /* ... not taken */
	VT_CYCLES_RETURN,                /* a return (compressed: a TNT bit; else a TIP) */
	VT_CYCLES_TIP,                   /* an indirect or far branch */
	VT_CYCLES_ASYNC,                 /* an interrupt, a VM exit (FUP, TIP) */
	VT_CYCLES_VMENTRY,               /* a VM entry: its TIP may follow the offset the block ended at */
	VT_CYCLES_BEGIN,                 /* a trace begin (TIP.PGE) */
	VT_CYCLES_RESUME,                /* a trace begin after an overflow (its FUP) */
	VT_CYCLES_END,                   /* a trace end (TIP.PGD): no sample */
} VtCyclesHow;
VtDecodeCycles *vt_decode_cycles_new(VtDecodeReadFunc read, gpointer ctx, guint64 len, gboolean thresh);
void vt_decode_cycles_free(VtDecodeCycles *c);
/* A branch (how; not a direct one: no packet) whose packet the decoder
 * had read at queue offset off (VtBranch.offset), in the queue's order:
 * TRUE when perf takes an IPC sample there, *cycles then the cycles so
 * far. */
gboolean vt_decode_cycles_branch(VtDecodeCycles *c, guint64 off, VtCyclesHow how, guint64 *cycles);
/* Why the queue ended early (a window could not be read), NULL if not. */
const GError *vt_decode_queue_error(const VtDecodeQueue *d);
/* Guest code that the guest image does not have (guest user space) comes
 * from code(ctx, tsc, ip, &avail): the code at ip at the decoder's time tsc
 * (recording.c: of the guest process then on the queue's vCPU). */
typedef const guint8 *(*VtDecodeCodeFunc)(gpointer ctx, guint64 tsc, guint64 ip, gsize *avail);
void vt_decode_queue_set_code(VtDecodeQueue *d, VtDecodeCodeFunc code, gpointer ctx);
/* image.c: the code of img's own segments (vt_decode_image_code without
 * the images attached to it) */
const guint8 *vt_decode_image_code_own(const VtDecodeImage *img, guint64 vaddr, gsize *avail);

/* disasm.c: the text of a relative jump, conditional jump or call without
 * prefixes (jcc rel8/rel32, jmp rel8/rel32, call rel32) at ip - code (avail
 * bytes) - as Zydis's AT&T formatter writes it ("jnz 0xffffffff81000010"),
 * with its length and kind: FALSE for any other instruction.  buf: 32 bytes. */
gboolean vt_decode_branch_text(const guint8 *code, gsize avail, guint64 ip, guint8 *len, guint8 *kind, char *buf);

/* An image of one file's code (guest-user.c): segs are (vaddr, file
 * offset, size) triples, ascending; funcs the function starts, ascending. */
VtDecodeImage *vt_decode_image_new_file(const char *path, const char *what, const guint64 *segs, guint nsegs,
					const guint64 *funcs, guint nfuncs, GError **error);
/* textpoke.c: is this 4 KiB page poked; the bytes at addr at time tsc
 * (0: no code there); a TEXT_POKE record added (in time order); the
 * versions of the poked pages made for img (after the last poke is added)
 * and their libipt sections put in iscache. */
gboolean vt_decode_pokes_page(const VtDecodePokes *p, guint64 page);
/* The same as a bitmap, for a test inline (pmin > pmax: none). */
typedef struct {
	const guint8 *bits;      /* a bit per page from pmin */
	guint64 pmin, pmax;
} VtDecodePokedPages;
VtDecodePokedPages vt_decode_pokes_pages(const VtDecodePokes *p);
static inline gboolean vt_decode_poked(const VtDecodePokedPages *pp, guint64 page)
{
	return page >= pp->pmin && page <= pp->pmax && ((pp->bits[(page - pp->pmin) / 8] >> ((page - pp->pmin) % 8)) & 1);
}
/* The first poked page from page to last (G_MAXUINT64: none). */
guint64 vt_decode_pokes_next_page(const VtDecodePokes *p, guint64 page, guint64 last);
gsize vt_decode_pokes_read(const VtDecodePokes *p, const VtDecodeImage *img, guint64 addr, guint64 tsc,
			   guint8 *dst, gsize n);
gboolean vt_decode_pokes_add_record(VtDecodePokes **host, VtDecodePokes **guest, const guint8 *rec, gsize size,
				    guint64 tsc);
gboolean vt_decode_pokes_build(VtDecodePokes *p, const VtDecodeImage *img, GError **error);
gboolean vt_decode_pokes_add_sections(VtDecodePokes *p, const VtDecodeImage *img,
				      struct pt_image_section_cache *iscache, GError **error);
/* The bytes at addr on a poked page at time tsc, where its version keeps
 * them (no copy): up to the page's end, *avail of them, *tag the version
 * (as vt_decode_pokes_read_tag names a read of one page); NULL (*tag 0)
 * when the page is not poked or has no code at addr.  memo: one of the
 * caller's (per thread and image - queue.c keeps 8 per image, by page;
 * zeroed, page G_MAXUINT64, at first) - reads of its page within one
 * version's times skip the lookup.  The image must not change (attach,
 * relocate) while memos of it are in use. */
typedef struct {
	guint64 page;            /* the poked page read last (G_MAXUINT64: none), */
	guint64 lo, hi;          /* the times its version holds, [lo, hi), */
	guint64 tag;             /* that version */
	const guint8 *bytes;     /* and its bytes */
	gboolean whole;          /* the image has code on all of the page (one segment, its own or an attached image's) */
} VtDecodePokeMemo;
const guint8 *vt_decode_pokes_code(const VtDecodePokes *p, const VtDecodeImage *img, guint64 addr, guint64 tsc,
				   gsize *avail, guint64 *tag, VtDecodePokeMemo *memo);

/* vt_decode_pokes_code() where memo answers alone (its page, the time in
 * its version's, code on all of the page), else NULL: what the walker
 * asks for at every block on a poked page without a call (the real
 * boot's --call-trace: 6.99 M such reads for 12.2 M blocks). */
static inline const guint8 *vt_decode_pokes_code_memo(const VtDecodePokeMemo *memo, guint64 addr, guint64 tsc,
						      gsize *avail, guint64 *tag)
{
	if (memo->page != addr / 4096 || !memo->whole || tsc < memo->lo || tsc >= memo->hi)
		return NULL;
	*avail = 4096 - addr % 4096;
	*tag = memo->tag;
	return memo->bytes + addr % 4096;
}
/* The bytes as vt_decode_pokes_read(), 0 if addr..addr+n-1 touches no
 * poked page; *tag: the versions read (for caches). */
gsize vt_decode_pokes_read_tag(const VtDecodePokes *p, const VtDecodeImage *img, guint64 addr, guint64 tsc,
			       guint8 *dst, gsize n, guint64 *tag);
/* A decoder's libipt image pi of img (NULL if img has no pokes): _at()
 * adds the last version of each poked page whose last poke is at or before
 * tsc (times must not go back: _reset() with a fresh pi first); _moved():
 * has it added any. */
typedef struct VtDecodePokeView VtDecodePokeView;
VtDecodePokeView *vt_decode_poke_view_new(const VtDecodeImage *img, struct pt_image_section_cache *iscache,
					  struct pt_image *pi);
void vt_decode_poke_view_free(VtDecodePokeView *w);
void vt_decode_poke_view_at(VtDecodePokeView *w, guint64 tsc);
gboolean vt_decode_poke_view_moved(const VtDecodePokeView *w);
void vt_decode_poke_view_reset(VtDecodePokeView *w, struct pt_image *pi);
/* image.c: the section cache */
struct pt_image_section_cache *vt_decode_image_iscache(const VtDecodeImage *img);
/* insn.c: one instruction from its bytes; the kind of one Zydis decoded
 * (its visible operands); is it mov REG, (%rsp) */
gboolean vt_decode_insn_bytes(const guint8 *code, gsize avail, guint64 ip, VtInsn *insn);
void vt_decode_zydis_init(ZydisDecoder *dec, guint8 mode);   /* for VT_MODE_* */
gboolean vt_decode_insn_bytes_mode(const guint8 *code, gsize avail, guint64 ip, guint8 mode, VtInsn *insn);
/* The kind and length of the near branch at code (jcc, loop, jrcxz, jmp,
 * call, ret; only cs/ds and REX prefixes) without Zydis - the same as
 * vt_decode_insn_bytes() says; FALSE for anything else (ask Zydis). */
gboolean vt_decode_insn_branch(const guint8 *code, gsize avail, guint8 *kind, guint8 *len);
VtInsnKind vt_decode_insn_kind(const ZydisDecodedInstruction *in, const ZydisDecodedOperand *op);
/* Is the mnemonic a conditional near branch (jcc, jcxz/jecxz/jrcxz,
 * loop*): the branches a TNT bit decides (insn.c's VT_INSN_COND, walk.c's
 * ptic_cond_jump). */
static inline gboolean vt_decode_mnemonic_is_cond(ZydisMnemonic m)
{
	switch (m) {
	case ZYDIS_MNEMONIC_JB: case ZYDIS_MNEMONIC_JBE: case ZYDIS_MNEMONIC_JL: case ZYDIS_MNEMONIC_JLE:
	case ZYDIS_MNEMONIC_JNB: case ZYDIS_MNEMONIC_JNBE: case ZYDIS_MNEMONIC_JNL: case ZYDIS_MNEMONIC_JNLE:
	case ZYDIS_MNEMONIC_JNO: case ZYDIS_MNEMONIC_JNP: case ZYDIS_MNEMONIC_JNS: case ZYDIS_MNEMONIC_JNZ:
	case ZYDIS_MNEMONIC_JO: case ZYDIS_MNEMONIC_JP: case ZYDIS_MNEMONIC_JS: case ZYDIS_MNEMONIC_JZ:
	case ZYDIS_MNEMONIC_JCXZ: case ZYDIS_MNEMONIC_JECXZ: case ZYDIS_MNEMONIC_JRCXZ:
	case ZYDIS_MNEMONIC_LOOP: case ZYDIS_MNEMONIC_LOOPE: case ZYDIS_MNEMONIC_LOOPNE:
		return TRUE;
	default:
		return FALSE;
	}
}
gboolean vt_decode_insn_writes_stack_top(const ZydisDecodedInstruction *in, const ZydisDecodedOperand *op);

/* qry.c: a query decoder of our own, answering as libipt 2.0.5's
 * pt_qry_* do (the same statuses, errors, events and time).  NULL for a
 * CPU with the errata SKD010, APL11 or APL12 (libipt's decoder takes
 * those). */
typedef struct VtQry VtQry;
/* What the answers leave for the asker, read inline (a VtQry begins with
 * it): where the decoder stands, and the time at the packet that answered
 * the last query (pt_qry_time's). */
typedef struct {
	const guint8 *pos, *begin;       /* pos NULL: not synchronised */
	guint64 tsc;
	guint32 lost_mtc, lost_cyc;
	gboolean have_tsc;
} VtQryNow;
VtQry *vt_qry_new(const struct pt_config *config);
void vt_qry_free(VtQry *q);
int vt_qry_sync_forward(VtQry *q, uint64_t *ip);
int vt_qry_cond_branch(VtQry *q, int *taken);
int vt_qry_indirect_branch(VtQry *q, uint64_t *ip);
int vt_qry_event(VtQry *q, struct pt_event *ev);
static inline int vt_qry_time(const VtQry *q, uint64_t *tsc, uint32_t *lost_mtc, uint32_t *lost_cyc)
{
	const VtQryNow *now = (const VtQryNow *)(const void *)q;

	*tsc = now->tsc;
	if (lost_mtc)
		*lost_mtc = now->lost_mtc;
	if (lost_cyc)
		*lost_cyc = now->lost_cyc;
	return now->have_tsc ? 0 : -pte_no_time;
}
static inline int vt_qry_get_offset(const VtQry *q, uint64_t *off)
{
	const VtQryNow *now = (const VtQryNow *)(const void *)q;

	if (!now->pos)
		return -pte_nosync;
	*off = (uint64_t)(now->pos - now->begin);
	return 0;
}
int vt_qry_get_sync_offset(const VtQry *q, uint64_t *off);

/* walk.c: our own block walker on a query decoder (qry.c's, or libipt's),
 * in place of libipt's block decoder (pt_blk_*) with the same blocks,
 * events and statuses; or
 * libipt's block decoder itself (blk: VMTRACE_DECODER=blk, for the
 * differential test).  The code at ip of source src (0 host, 1 guest) at
 * time tsc comes from code(): NULL if none, *avail bytes; *tag names the
 * bytes (blocks are kept per (src, ip, mode, tag)). */
typedef const guint8 *(*VtWalkCodeFunc)(gpointer ctx, int src, guint64 ip, guint64 tsc, gsize *avail, guint64 *tag);
typedef struct VtWalk VtWalk;
gboolean vt_walk_use_blk(void);
/* config: as for pt_blk_alloc_decoder (end_on_call and end_on_jump set) */
VtWalk *vt_walk_new(const struct pt_config *config, gboolean blk, VtWalkCodeFunc code, gpointer ctx);
void vt_walk_free(VtWalk *w);
/* host/guest: src, or libipt's image pi for the block decoder */
int vt_walk_set_source(VtWalk *w, int src, struct pt_image *pi);
int vt_walk_sync_forward(VtWalk *w);
int vt_walk_get_offset(const VtWalk *w, uint64_t *off);
int vt_walk_get_sync_offset(const VtWalk *w, uint64_t *off);
int vt_walk_next(VtWalk *w, struct pt_block *block);
/* What a block vt_walk_next_joined() returns joined: blocks that ended in
 * a conditional or direct jump, each followed by the next one with the
 * decoder's time unchanged - no trace packet read in between (its
 * position unchanged), or with cross, packets that did not move the time
 * on (the next TNT packet after one whose bits ran out) - the last block
 * the one those jumps led to.  For a caller that drops jumps (call
 * traces): what the jumps between the blocks did. */
typedef struct {
	guint blocks;                    /* blocks before the last one: 0, nothing joined */
	guint64 off;                     /* the decoder's position before the first */
	guint64 first_off;               /* and after it (blocks > 0) */
	guint64 last_off;                /* where it last moved on before the last one (off: never), */
	guint moved_at;                  /* with this many of them joined (last_off != off) */
	gboolean taken;                  /* one of their jumps was taken */
	gboolean have_nt;                /* a conditional jump not taken after it */
	guint64 nt_ip;                   /* the last such: where it went on */
	guint64 nt_off;                  /* the decoder's position after its packet */
	guint32 nt_insns;                /* instructions up to it */
	guint8 nt_len;                   /* its length */
	gboolean last_nt;                /* the last jump between them was that one */
	guint64 tsc;                     /* (the decoder's time through them: 0 none) */
} VtWalkRun;
/* vt_walk_next(), and up to max more blocks joined to it (*run) where
 * they are plain code the image's table has; cross: also across trace
 * packets that leave the time as it was (not for a caller that counts
 * cycles per packet). */
int vt_walk_next_joined(VtWalk *w, struct pt_block *block, guint max, gboolean cross, VtWalkRun *run);
/* The near branch (VT_INSN_COND, CALL, CALL_IND, JUMP, JUMP_IND, RETURN)
 * that ended the last block at ip, as the walker decoded it: its kind and
 * length; FALSE for anything else or with libipt's block decoder. */
gboolean vt_walk_last_branch(const VtWalk *w, guint64 ip, guint8 *kind, guint8 *len);
int vt_walk_event(VtWalk *w, struct pt_event *ev);
int vt_walk_time(VtWalk *w, uint64_t *tsc);
/* The time at the trace packet that decided the last vt_walk_next()'s
 * last branch, where that step went on to read events after it (whose
 * packets moved the time on): TRUE and *tsc; FALSE: vt_walk_time() is
 * that time (and always with libipt's block decoder). */
gboolean vt_walk_branch_time(const VtWalk *w, guint64 *tsc);
/* Where the walk stands: the next instruction's IP (after a branch whose
 * trace was read, its target; 0 with libipt's block decoder). */
guint64 vt_walk_ip(const VtWalk *w);
/* The blocks of an image's code, shared by walkers in any thread (image.c
 * makes one per image on first use: vt_decode_image_walk_table). */
typedef struct VtWalkTable VtWalkTable;
VtWalkTable *vt_walk_table_new(void);
void vt_walk_table_free(VtWalkTable *t);
/* ... and where code is plain: at or above host_plain (guest_plain) the
 * image's own bytes, tag 0, never changed (G_MAXUINT64: nowhere) - but on
 * the pages host_pokes (guest_pokes) poke (NULL: none), whose bytes the
 * code function gives by time. */
void vt_walk_set_tables(VtWalk *w, VtWalkTable *host, VtWalkTable *guest, guint64 host_plain, guint64 guest_plain);
void vt_walk_set_pokes(VtWalk *w, const VtDecodePokes *host_pokes, const VtDecodePokes *guest_pokes);
/* The code function's memos of poked pages (n of each source, by page;
 * NULL: none): where one holds a block's start at its time the walker
 * takes it without calling the code function (which must give the same). */
void vt_walk_set_memos(VtWalk *w, const VtDecodePokeMemo *host, const VtDecodePokeMemo *guest, guint n);
VtWalkTable *vt_decode_image_walk_table(VtDecodeImage *img);

/* elfsym.c: an ELF file's PT_LOADs and symbols as perf reads them. */
typedef struct {
	guint64 vaddr, offset, size;
	gboolean exec;
} VtElfLoad;
typedef struct {
	guint64 start, end;       /* ELF vaddrs: [start, end) */
	const char *name;         /* in the file's strings */
	guint8 bind, type;        /* STB_*, STT_* */
	guint16 section;          /* its section's index */
} VtElfSym;
typedef struct {
	guint64 addr, size;
	const char *name;         /* in the file's strings */
	gboolean alloc;           /* SHF_ALLOC */
} VtElfSection;
typedef struct {
	GArray *loads;            /* VtElfLoad, file order */
	GArray *sections;         /* VtElfSection, by index */
	GArray *syms;             /* VtElfSym, ascending, one per address */
	GArray *hidden;           /* VtElfSym: those another at their address hid */
	GStringChunk *strings;
	char *build_id;           /* its GNU build id in hex (NT_GNU_BUILD_ID), NULL: none */
} VtElfFile;
VtElfFile *vt_elf_file_new(void);
void vt_elf_file_free(VtElfFile *f);
/* Adds path's PT_LOADs and symbols (.symtab, else .dynsym; none: no
 * symbols) to the empty f; kernel: perf's rules for a vmlinux, else for a
 * user file (elfsym.c).  FALSE: not a readable ELF file. */
gboolean vt_elf_file_read(VtElfFile *f, const char *path, gboolean kernel, GError **error);

#endif
