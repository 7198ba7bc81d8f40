/* disasm.c - instructions of an image as text (Zydis, AT&T syntax) with
 * their symbol, each decoded (once: the kind comes from the same decode)
 * and formatted once while it stays in a bounded direct-mapped table keyed
 * on its address: formatting costs 10-50 times what decoding does, and a
 * trace runs the same kernel code over and over.  The table
 * (VtDecodeDisasmTable) is shared by the printers of all queues (threads)
 * that walk the image: with one table per printer, 2-4 queues walking the
 * same kernel formatted the same instruction once each (1 MiB tnt-dense:
 * 2.70 M fills in two tables of 2^17 slots, 2.28 M in one of 2^18).
 * A slot is written under its sequence number (odd while written; a writer
 * that finds it odd or loses the race keeps its text to itself), a reader
 * copies the slot to its own VtDisasmInsn and keeps it only if the number
 * was even and did not change meanwhile (a seqlock, as walk.c's blocks).
 * The 64 addresses of a 64-byte stretch of code map to 64 slots side by
 * side (slot_index), so a run of code reads the table upwards, and each
 * lookup prefetches the next instruction's slot: a slot hashed from the
 * whole address was a cache miss per instruction (28% of --insn-trace's
 * CPU), and this one misses as often.  A slot is one cache line (64
 * bytes).  A slot is replaced by the next address that maps to it; no
 * allocation per instruction: the text lives in the slot, the rare longer
 * one (26 bytes or more, ~5% of the lines) in a slot of 128 bytes keyed on
 * the address alone, at the table's end (1/32 of it: a table of its own
 * would be another huge page); a text of 112 bytes or more is not kept
 * (formatted again each time).  An instruction the table does not have
 * is decoded, and if it has no relative operand (its text is the same
 * wherever it is) its kind and text come from a third part of the table
 * (1/16 of it, 64-byte slots keyed on its bytes) if another address had
 * the same bytes: 1 MiB cyc has 536 K distinct instructions, of which
 * 391 K without relative operands have 44 K distinct byte strings.  The
 * decoding that finds their length is walk.c's length decoder
 * (fastinsn.h: length and relative operands of the common 64-bit
 * instructions from tables and one switch, where Zydis's decode costs
 * ~880 instructions); relative jumps, conditional jumps and calls
 * without prefixes - whose text names their target, so no other address
 * shares it - are written here from their mnemonic and target
 * (vt_decode_branch_text: 1 MiB cyc has 123 K of them among its 536 K
 * distinct instructions, each ~2,900 instructions of Zydis's decoding and
 * formatting); Zydis only for what it does not know, 16/32-bit code and
 * what the texts by bytes do not have.
 * Memory is the table's, whatever the trace's length or the code it
 * touches.
 * Code a TEXT_POKE changed is read as it was at the time asked
 * (vt_decode_disasm_at_time) into a small table of each reader's own,
 * keyed on the address and the versions read, that holds the bytes too. */
#include "config.h"

#include <string.h>

#include "src/decode/fastinsn.h"
#include "src/decode/hex.h"
#include "src/decode/internal.h"
#include "src/decode/seqlock.h"

typedef struct {
	VtDisasmInsn in;
	guint64 tag;                /* the poked versions its bytes are */
	guint8 bytes[ZYDIS_MAX_INSTRUCTION_LENGTH];
} Poked;

#define POKED_SLOTS 1024u

/* A slot of the shared table: a VtDisasmInsn with its sequence number
 * (its symbol offset in 32 bits: one that does not fit is not kept). */
typedef struct {
	guint32 seq;
	guint32 sym_off;
	guint64 ip;
	const guint8 *code;
	const char *sym;
	guint16 sym_len;
	guint8 len, kind, text_len, mode;   /* mode 0: empty */
	char text_in[26];
} Slot;

G_STATIC_ASSERT(sizeof(Slot) == 64);
G_STATIC_ASSERT(sizeof(((Slot *)0)->text_in) == sizeof(((VtDisasmInsn *)0)->text_in));

#define LONG_TEXT 112
#define LONG_SHIFT 5              /* the long texts take 2^-5 of a table */

/* The text of an instruction whose text does not fit in its slot (in
 * the same table: two slots' size). */
typedef struct {
	guint32 seq;
	guint8 mode;
	guint64 ip;
	char text[LONG_TEXT];       /* NUL-terminated */
} LongSlot;

G_STATIC_ASSERT(sizeof(LongSlot) == 2 * sizeof(Slot));

#define BYTES_SHIFT 4             /* the texts by bytes take 2^-4 of a table */
#define BYTES_TEXT 40

/* The kind and text of an instruction without relative operands (its
 * text is the same wherever its bytes are) by its bytes. */
typedef struct {
	guint32 seq;
	guint8 mode, len, kind, text_len;   /* mode 0: empty */
	guint8 bytes[16];                   /* len of them, zeros after */
	char text[BYTES_TEXT];              /* NUL-terminated */
} ByteSlot;

G_STATIC_ASSERT(sizeof(ByteSlot) == sizeof(Slot));

struct VtDecodeDisasmTable {
	const VtDecodeImage *img;
	Slot *slots;                /* 2^log2 slots: the instructions' n_main, */
	LongSlot *longs;            /* then the long texts' n_longs (2^-LONG_SHIFT of it, at least 1), */
	ByteSlot *bytes;            /* then the texts by bytes' n_bytes (2^-BYTES_SHIFT, at least 1) */
	guint log2;
	gsize n_main, n_longs, n_bytes;
	guint64 groups;             /* n_main / 64 (0: n_main < 64, no groups) */
	guint used;                 /* slots filled (atomic) */
};

struct VtDecodeDisasm {
	VtDecodeDisasmTable *t;
	VtDecodeDisasmTable *own;   /* t when made for this reader alone */
	Poked *poked;               /* POKED_SLOTS, made when first needed */
	ZydisDecoder dec[4];        /* by VT_MODE_* */
	ZydisFormatter fmt;
	VtDisasmInsn cur;           /* the last answer */
	char long_text[256];        /* its text when longer than its text_in */
	guint64 fills;              /* instructions its table did not have */
	gboolean check;             /* VMTRACE_WALK_CHECK: fast decodes against Zydis's */
	const char *last_sym;       /* the last symbol set_symbol() found, */
	guint16 last_sym_len;       /* and its length (a run's fills share it) */
};

#define DEFAULT_SLOTS_LOG2 18     /* 232 Ki instructions, 4 Ki long texts, 16 Ki by bytes: 16 MiB */

G_STATIC_ASSERT(sizeof(VtDisasmInsn) == 64);

static gsize table_bytes(const VtDecodeDisasmTable *t)
{
	return sizeof(Slot) << t->log2;
}

VtDecodeDisasmTable *vt_decode_disasm_table_new(const VtDecodeImage *img, guint slots_log2)
{
	VtDecodeDisasmTable *t = g_new0(VtDecodeDisasmTable, 1);

	slots_log2 = CLAMP(slots_log2, 2, 24);
	t->img = img;
	t->log2 = slots_log2;
	/* long texts in the same table: one of their own would be another
	 * huge page (bigtable.c) for ~5% of the instructions */
	t->n_longs = slots_log2 > LONG_SHIFT + 1 ? (gsize)1 << (slots_log2 - LONG_SHIFT - 1) : 1;
	t->n_bytes = slots_log2 > BYTES_SHIFT ? (gsize)1 << (slots_log2 - BYTES_SHIFT) : 1;
	t->n_main = ((gsize)1 << slots_log2) - 2 * t->n_longs - t->n_bytes;
	t->groups = t->n_main / 64;
	/* pages the trace never reaches stay unmapped */
	t->slots = vt_decode_table_new(table_bytes(t));
	t->longs = (LongSlot *)(t->slots + t->n_main);
	t->bytes = (ByteSlot *)(t->longs + t->n_longs);
	return t;
}

void vt_decode_disasm_table_free(VtDecodeDisasmTable *t)
{
	if (!t)
		return;
	vt_decode_table_free(t->slots, table_bytes(t));
	g_free(t);
}

VtDecodeDisasm *vt_decode_disasm_new_on(VtDecodeDisasmTable *t)
{
	VtDecodeDisasm *d = g_new0(VtDecodeDisasm, 1);

	d->t = t;
	d->check = g_getenv("VMTRACE_WALK_CHECK") != NULL;
	vt_fast_insn_init();
	for (guint8 m = 0; m < G_N_ELEMENTS(d->dec); m++)
		vt_decode_zydis_init(&d->dec[m], m);
	ZydisFormatterInit(&d->fmt, ZYDIS_FORMATTER_STYLE_ATT);
	ZydisFormatterSetProperty(&d->fmt, ZYDIS_FORMATTER_PROP_HEX_UPPERCASE, ZYAN_FALSE);
	return d;
}

VtDecodeDisasm *vt_decode_disasm_new_sized(const VtDecodeImage *img, guint slots_log2)
{
	VtDecodeDisasmTable *t = vt_decode_disasm_table_new(img, slots_log2);
	VtDecodeDisasm *d = vt_decode_disasm_new_on(t);

	d->own = t;
	return d;
}

VtDecodeDisasm *vt_decode_disasm_new(const VtDecodeImage *img)
{
	return vt_decode_disasm_new_sized(img, DEFAULT_SLOTS_LOG2);
}

static gboolean text_long(const VtDisasmInsn *in)
{
	return in->text_len >= sizeof(in->text_in);
}

void vt_decode_disasm_free(VtDecodeDisasm *d)
{
	if (!d)
		return;
	for (guint i = 0; d->poked && i < POKED_SLOTS; i++)
		if (text_long(&d->poked[i].in))
			g_free((char *)vt_disasm_insn_text(&d->poked[i].in));
	g_free(d->poked);
	vt_decode_disasm_table_free(d->own);
	g_free(d);
}

/* ------------------------------------------------------------- decoding */
/* in's text: text (n bytes) in the slot, else in the reader's buffer */
static void set_cur_text(VtDecodeDisasm *d, VtDisasmInsn *in, const char *text, gsize n)
{
	in->text_len = (guint8)MIN(n, 255u);
	if (n < sizeof(in->text_in)) {
		memcpy(in->text_in, text, n + 1);
	} else {
		const char *p = d->long_text;

		memcpy(d->long_text, text, MIN(n + 1, sizeof(d->long_text)));
		memcpy(in->text_in, &p, sizeof(p));
	}
}

/* ... in an allocated copy (a poked slot's: freed when replaced) */
static void set_text(VtDisasmInsn *in, const char *text)
{
	gsize n = strlen(text);

	in->text_len = (guint8)MIN(n, 255u);
	if (n < sizeof(in->text_in)) {
		memcpy(in->text_in, text, n + 1);
	} else {
		char *p = g_strdup(text);

		memcpy(in->text_in, &p, sizeof(p));
	}
}

/* The symbol of ip (in code only: perf names nothing outside it). */
static void set_symbol(VtDecodeDisasm *d, VtDisasmInsn *in)
{
	gsize len = 0;

	in->sym = in->code ? vt_decode_image_symbol_len(d->t->img, in->ip, &in->sym_off, &len) : NULL;
	if (in->sym && in->sym != d->last_sym) {
		d->last_sym = in->sym;
		d->last_sym_len = (guint16)MIN(len, (gsize)G_MAXUINT16);
	}
	in->sym_len = in->sym ? d->last_sym_len : 0;
	if (!in->sym)
		in->sym_off = 0;
}

/* ------------------------------------------------------ texts by bytes */
/* An instruction's len bytes at code as its key (zeros after) */
static void bytes_key(guint8 key[16], const guint8 *code, guint8 len)
{
	memset(key, 0, 16);
	memcpy(key, code, MIN(len, 16u));
}

static ByteSlot *byte_slot(const VtDecodeDisasmTable *t, guint8 mode, const guint8 key[16], guint8 len)
{
	guint64 a, b;

	memcpy(&a, key, 8);
	memcpy(&b, key + 8, 8);
	a = (a ^ (b * 0xc2b2ae3d27d4eb4fULL) ^ ((guint64)len << 56 | (guint64)mode << 48)) * 0x9e3779b97f4a7c15ULL;
	return &t->bytes[(gsize)(a >> 32) & (t->n_bytes - 1)];
}

/* The kind and text (into buf) of the instruction of mode whose len bytes
 * are code, if the table has them. */
static gboolean bytes_get(const VtDecodeDisasmTable *t, guint8 mode, const guint8 *code, guint8 len, guint8 *kind,
			  char *buf)
{
	guint8 key[16];
	ByteSlot e;

	bytes_key(key, code, len);
	if (!vt_seq_read(&e, byte_slot(t, mode, key, len), sizeof(e)) || e.mode != mode || e.len != len ||
	    memcmp(e.bytes, key, sizeof(key)))
		return FALSE;
	*kind = e.kind;
	memcpy(buf, e.text, sizeof(e.text));
	return TRUE;
}

static void bytes_put(VtDecodeDisasmTable *t, guint8 mode, const guint8 *code, guint8 len, guint8 kind,
		      const char *text)
{
	gsize n = strlen(text);
	guint8 key[16];
	ByteSlot *e;
	guint32 seq;

	if (n >= BYTES_TEXT || len > 16)
		return;
	bytes_key(key, code, len);
	e = byte_slot(t, mode, key, len);
	if (!vt_seq_lock(&e->seq, &seq))
		return;
	e->mode = mode;
	e->len = len;
	e->kind = kind;
	e->text_len = (guint8)n;
	memcpy(e->bytes, key, sizeof(key));
	memcpy(e->text, text, n + 1);
	vt_seq_unlock(&e->seq, seq);
}

/* VMTRACE_WALK_CHECK=1: a fast decode against Zydis's (abort if they
 * differ, as walk.c's check) */
static void check_fast(VtDecodeDisasm *d, const guint8 *code, gsize avail, const VtFastInsn *f)
{
	ZydisDecodedInstruction zi;

	if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&d->dec[VT_MODE_64], NULL, code, avail, &zi)) ||
	    !vt_fast_insn_agrees(f, &zi))
		g_error("disasm: fast decode: size %u relative %u, Zydis disagrees (%02x %02x %02x %02x)", f->len,
			f->relative, code[0], avail > 1 ? code[1] : 0, avail > 2 ? code[2] : 0, avail > 3 ? code[3] : 0);
}

/* ------------------------------------------------ relative branches */
/* Zydis's names of the 16 conditions (jcc: 0x70 + cc, 0x0f 0x80 + cc) */
static const char jcc_names[16][5] = {
	"jo", "jno", "jb", "jnb", "jz", "jnz", "jbe", "jnbe", "js", "jns", "jp", "jnp", "jl", "jnl", "jle", "jnle",
};

/* vt_decode_branch_text() of an instruction fastinsn.h decoded (f) */
static gboolean branch_text(const guint8 *code, const VtFastInsn *f, guint64 ip, guint8 *kind, char *buf)
{
	const char *name;
	guint64 target;
	gsize n;

	if (!f->relative || (f->iclass != ptic_cond_jump && !f->direct))
		return FALSE;
	/* no prefix, no REX: the opcode is the first byte */
	if (code[0] >= 0x70 && code[0] <= 0x7f && f->len == 2) {
		name = jcc_names[code[0] & 15];
		*kind = VT_INSN_COND;
	} else if (code[0] == 0x0f && (code[1] & 0xf0) == 0x80 && f->len == 6) {
		name = jcc_names[code[1] & 15];
		*kind = VT_INSN_COND;
	} else if ((code[0] == 0xeb && f->len == 2) || (code[0] == 0xe9 && f->len == 5)) {
		name = "jmp";
		*kind = VT_INSN_JUMP;
	} else if (code[0] == 0xe8 && f->len == 5) {
		name = "call";
		*kind = VT_INSN_CALL;
	} else {
		return FALSE;
	}
	target = ip + f->len + (guint64)(gint64)f->disp;   /* 64-bit code: wraps at 2^64 */
	n = strlen(name);
	memcpy(buf, name, n);
	memcpy(buf + n, " 0x", 3);
	n += 3;
	vt_hex_digits(buf + n, target, 16);   /* 16 digits, zeros first: Zydis pads 64-bit addresses */
	buf[n + 16] = '\0';
	return TRUE;
}

gboolean vt_decode_branch_text(const guint8 *code, gsize avail, guint64 ip, guint8 *len, guint8 *kind, char *buf)
{
	VtFastInsn f;

	if (!vt_fast_insn_decode(code, avail, &f) || !branch_text(code, &f, ip, kind, buf))
		return FALSE;
	*len = f.len;
	return TRUE;
}

/* VMTRACE_WALK_CHECK=1: a branch's text and kind against Zydis's (abort
 * if they differ) */
static gboolean check_branch_text(VtDecodeDisasm *d, const VtDisasmInsn *in, const guint8 *code, gsize avail,
				  const char *text)
{
	ZydisDecoderContext ctx;
	ZydisDecodedInstruction zi;
	ZydisDecodedOperand op[ZYDIS_MAX_OPERAND_COUNT_VISIBLE];
	char want[256];

	if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&d->dec[VT_MODE_64], &ctx, code, avail, &zi)) ||
	    !ZYAN_SUCCESS(ZydisDecoderDecodeOperands(&d->dec[VT_MODE_64], &ctx, &zi, op, zi.operand_count_visible)) ||
	    !ZYAN_SUCCESS(ZydisFormatterFormatInstruction(&d->fmt, &zi, op, zi.operand_count_visible, want,
							   sizeof(want), in->ip, NULL)) ||
	    strcmp(want, text) || zi.length != in->len || vt_decode_insn_kind(&zi, op) != in->kind)
		g_error("disasm: branch text \"%s\" (%u bytes) at %#" G_GINT64_MODIFIER "x, Zydis: \"%s\"", text,
			in->len, in->ip, want);
	return TRUE;
}

/* The kind and text (into buf) of a common 64-bit instruction (fastinsn.h)
 * without Zydis - a relative branch's from its target, one without
 * relative operands from the texts by bytes: TRUE if it has them (a
 * branch always); *asked: the texts by bytes were asked.  A hit needs no
 * check of the fast decoder's length: the table keeps only what Zydis
 * decoded, with the length it found, and an instruction's bytes decode
 * the same wherever they are (x86 encodings are prefix-free: no other
 * length of the same bytes is an instruction). */
static gboolean bytes_fast(VtDecodeDisasm *d, VtDisasmInsn *in, const guint8 *code, gsize avail, char *buf,
			   gboolean *asked)
{
	VtFastInsn f;

	if (!vt_fast_insn_decode(code, avail, &f))
		return FALSE;
	if (G_UNLIKELY(d->check))
		check_fast(d, code, avail, &f);
	if (f.relative) {
		if (!branch_text(code, &f, in->ip, &in->kind, buf))
			return FALSE;
		in->len = f.len;
		return G_LIKELY(!d->check) || check_branch_text(d, in, code, avail, buf);
	}
	*asked = TRUE;
	if (!bytes_get(d->t, VT_MODE_64, code, f.len, &in->kind, buf))
		return FALSE;
	in->len = f.len;
	return TRUE;
}

/* in (but its text, which goes to buf): the instruction at ip whose bytes
 * are code (avail of them). */
static void decode(VtDecodeDisasm *d, VtDisasmInsn *in, guint64 ip, guint8 mode, const guint8 *code, gsize avail,
		   char buf[256])
{
	ZydisDecoderContext ctx;
	ZydisDecodedInstruction zi;
	ZydisDecodedOperand op[ZYDIS_MAX_OPERAND_COUNT_VISIBLE];
	gboolean relative, asked = FALSE;

	in->ip = ip;
	in->mode = mode;
	in->code = code;
	in->len = 0;
	in->kind = VT_INSN_OTHER;
	set_symbol(d, in);
	avail = MIN(avail, (gsize)ZYDIS_MAX_INSTRUCTION_LENGTH);
	if (code && mode == VT_MODE_64 && bytes_fast(d, in, code, avail, buf, &asked))
		return;
	if (!code || !ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&d->dec[mode], &ctx, code, avail, &zi))) {
		g_strlcpy(buf, code ? "(bad)" : "(unmapped)", 256);
		return;
	}
	/* the same bytes' text, formatted elsewhere (their operands decoded
	 * then: they will be now) - unless bytes_fast() asked already */
	relative = (zi.attributes & ZYDIS_ATTRIB_IS_RELATIVE) != 0;
	if (!relative && !asked && bytes_get(d->t, mode, code, zi.length, &in->kind, buf)) {
		in->len = zi.length;
		return;
	}
	if (!ZYAN_SUCCESS(ZydisDecoderDecodeOperands(&d->dec[mode], &ctx, &zi, op, zi.operand_count_visible))) {
		g_strlcpy(buf, "(bad)", 256);
		return;
	}
	in->len = zi.length;
	in->kind = vt_decode_insn_kind(&zi, op);
	if (!ZYAN_SUCCESS(ZydisFormatterFormatInstruction(&d->fmt, &zi, op, zi.operand_count_visible, buf, 256,
							   ip, NULL)))
		g_strlcpy(buf, "(bad)", 256);
	if (!relative)
		bytes_put(d->t, mode, code, in->len, in->kind, buf);
}

/* ------------------------------------------------------- the shared table */
/* ip's slot: a Fibonacci hash of its 64-byte stretch (host and guest
 * kernels run the same code 2^n apart) picks a group of 64 slots (its top
 * 32 bits scaled to the number of groups), ip & 63 one of them - a run of
 * code goes up one group in order, not from one random slot to the next
 * (a cache miss each) */
static gsize slot_index(const VtDecodeDisasmTable *t, guint64 ip)
{
	guint64 h = ((ip >> 6) * 0x9e3779b97f4a7c15ULL) >> 32;

	if (G_UNLIKELY(!t->groups))
		return (gsize)(ip % t->n_main);
	return (gsize)((h * t->groups) >> 32 << 6 | (ip & 63));
}

static LongSlot *long_slot(const VtDecodeDisasmTable *t, guint64 ip)
{
	return &t->longs[(gsize)((ip * 0x9e3779b97f4a7c15ULL) >> 32) & (t->n_longs - 1)];
}

/* The reader's answer from slot s (as read): FALSE when its text is kept
 * apart and the long table no longer has it. */
static gboolean slot_take(VtDecodeDisasm *d, const Slot *s)
{
	VtDisasmInsn *in = &d->cur;

	in->ip = s->ip;
	in->code = s->code;
	in->sym = s->sym;
	in->sym_off = s->sym_off;
	in->sym_len = s->sym_len;
	in->len = s->len;
	in->kind = s->kind;
	in->mode = s->mode;
	in->text_len = s->text_len;
	if (s->text_len < sizeof(s->text_in)) {
		memcpy(in->text_in, s->text_in, sizeof(in->text_in));
	} else {
		LongSlot l;
		const char *p = d->long_text;

		if (!vt_seq_read(&l, long_slot(d->t, s->ip), sizeof(l)) || l.ip != s->ip || l.mode != s->mode)
			return FALSE;
		memcpy(d->long_text, l.text, sizeof(l.text));
		memcpy(in->text_in, &p, sizeof(p));
	}
	return TRUE;
}

/* The long text of the reader's answer into the long table: FALSE when
 * it does not fit or another writer has its slot. */
static gboolean long_put(VtDecodeDisasmTable *t, const VtDisasmInsn *in, const char *text, gsize n)
{
	LongSlot *l = long_slot(t, in->ip);
	guint32 seq;

	if (n >= LONG_TEXT || !vt_seq_lock(&l->seq, &seq))
		return FALSE;
	l->ip = in->ip;
	l->mode = in->mode;
	memcpy(l->text, text, n + 1);
	vt_seq_unlock(&l->seq, seq);
	return TRUE;
}

/* The reader's answer (text: its text, n bytes) into slot s unless
 * another writer has it (the answer stays the reader's alone then). */
static void slot_put(VtDecodeDisasmTable *t, Slot *s, const VtDisasmInsn *in, const char *text, gsize n)
{
	guint32 seq;

	if (in->sym_off > G_MAXUINT32 || (n >= sizeof(s->text_in) && !long_put(t, in, text, n)) ||
	    !vt_seq_lock(&s->seq, &seq))
		return;
	if (!s->mode)
		__atomic_add_fetch(&t->used, 1, __ATOMIC_RELAXED);
	s->sym_off = (guint32)in->sym_off;
	s->ip = in->ip;
	s->code = in->code;
	s->sym = in->sym;
	s->sym_len = in->sym_len;
	s->len = in->len;
	s->kind = in->kind;
	s->text_len = in->text_len;
	s->mode = in->mode;
	memcpy(s->text_in, in->text_in, sizeof(s->text_in));
	vt_seq_unlock(&s->seq, seq);
}

static void fill(VtDecodeDisasm *d, Slot *s, guint64 ip, guint8 mode)
{
	gsize avail = 0, n;
	const guint8 *code = ip && d->t->img ? vt_decode_image_code(d->t->img, ip, &avail) : NULL;
	char buf[256];

	d->fills++;
	decode(d, &d->cur, ip, mode, code, avail, buf);
	n = strlen(buf);
	set_cur_text(d, &d->cur, buf, n);
	slot_put(d->t, s, &d->cur, buf, n);
}

const VtDisasmInsn *vt_decode_disasm_at(VtDecodeDisasm *d, guint64 ip)
{
	return vt_decode_disasm_at_mode(d, ip, VT_MODE_64);
}

/* Slot p (one cache line: the table is page-aligned) on its way to the
 * cache.  A macro: GCC 12 finds a function that only prefetches pure and
 * drops the calls to it in this file. */
#define SLOT_PREFETCH(p) __builtin_prefetch(p)

/* In mode (VT_MODE_*; unknown: 64-bit): a slot holds one mode's decoding
 * (16/32-bit firmware and boot code run rarely, so they share the table). */
const VtDisasmInsn *vt_decode_disasm_at_mode(VtDecodeDisasm *d, guint64 ip, guint8 mode)
{
	VtDecodeDisasmTable *t = d->t;
	Slot *s = &t->slots[slot_index(t, ip)], got;

	if (mode != VT_MODE_16 && mode != VT_MODE_32)
		mode = VT_MODE_64;
	/* an empty slot's mode is 0 */
	if (G_UNLIKELY(!vt_seq_read(&got, s, sizeof(got)) || got.ip != ip || got.mode != mode || !slot_take(d, &got)))
		fill(d, s, ip, mode);
	/* the next instruction's - most often asked for next - on its way
	 * while the caller prints this one */
	SLOT_PREFETCH(&t->slots[slot_index(t, ip + d->cur.len)]);
	return &d->cur;
}

void vt_decode_disasm_prefetch(const VtDecodeDisasm *d, guint64 ip)
{
	SLOT_PREFETCH(&d->t->slots[slot_index(d->t, ip)]);
}

const VtDisasmInsn *vt_decode_disasm_at_time(VtDecodeDisasm *d, guint64 ip, guint8 mode, guint64 tsc)
{
	const VtDecodeImage *img = d->t->img;
	guint8 b[ZYDIS_MAX_INSTRUCTION_LENGTH];
	gsize avail = 0;
	guint64 tag = 0;
	char buf[256];
	Poked *p;

	if (!ip || !img || !vt_decode_image_pokes(img) ||
	    !vt_decode_image_code_at(img, ip, tsc, b, sizeof(b), &avail, &tag) || !tag)
		return vt_decode_disasm_at_mode(d, ip, mode);
	if (mode != VT_MODE_16 && mode != VT_MODE_32)
		mode = VT_MODE_64;
	if (!d->poked)
		d->poked = g_new0(Poked, POKED_SLOTS);
	p = &d->poked[(guint)((ip * 0x9e3779b97f4a7c15ULL) >> 54) % POKED_SLOTS];
	if (p->in.ip == ip && p->in.mode == mode && p->tag == tag)
		return &p->in;
	memcpy(p->bytes, b, avail);
	p->tag = tag;
	if (text_long(&p->in))
		g_free((char *)vt_disasm_insn_text(&p->in));
	d->fills++;
	decode(d, &p->in, ip, mode, p->bytes, avail, buf);
	set_text(&p->in, buf);
	return &p->in;
}

guint vt_decode_disasm_size(const VtDecodeDisasm *d)
{
	return __atomic_load_n(&d->t->used, __ATOMIC_RELAXED);
}

guint64 vt_decode_disasm_fills(const VtDecodeDisasm *d)
{
	return d->fills;
}
