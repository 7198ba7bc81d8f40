/* disasm.c - instructions of an image as text (Zydis, AT&T syntax) with
 * their symbol, each decoded (once: the kind comes from the same decode)
 * and formatted once while it stays in a bounded direct-mapped table keyed
 * on its address: formatting costs 10-50 times what decoding does, and a
 * trace runs the same kernel code over and over.  The 64 addresses of a
 * 64-byte stretch of code map to 64 slots side by side (slot_index), so a
 * run of code reads the table upwards, and each lookup prefetches the
 * next instruction's slot: a slot hashed from the whole address was a
 * cache miss per instruction (28% of --insn-trace's CPU), and this one
 * misses as often (1 MiB tnt-dense's 7.2 M lookups, simulated: 2.595 M
 * fills either way).  A slot is one cache line (64 bytes: 80 with the
 * text's pointer cost 20% more memory and two lines a slot).  A slot is
 * replaced by the next address that maps to it; no allocation per
 * instruction (the text lives in the slot; the rare longer one - 26 bytes
 * or more, ~5% of the lines - is allocated).  Memory is the table's, whatever the
 * trace's length or the code it touches.
 * Code a TEXT_POKE changed is read as it was at the time asked
 * (vt_decode_disasm_at_time) into a small table of its own, keyed on the
 * address and the versions read, that holds the bytes too. */
#include "config.h"

#include <string.h>

#include "src/decode/internal.h"

typedef struct {
	VtDisasmInsn in;
	guint64 tag;                /* the poked versions its bytes are */
	guint8 bytes[ZYDIS_MAX_INSTRUCTION_LENGTH];
} Poked;

#define POKED_SLOTS 1024u

struct VtDecodeDisasm {
	const VtDecodeImage *img;
	Poked *poked;               /* POKED_SLOTS, made when first needed */
	ZydisDecoder dec[4];        /* by VT_MODE_* */
	ZydisFormatter fmt;
	VtDisasmInsn *slots;
	guint shift;                /* 64 - log2(slots) */
	guint group_shift;          /* 64 - log2(groups of 64 slots), 58..64 */
	guint used;                 /* slots filled */
	guint64 *longs;             /* a bit per 64 slots: one held an allocated text */
	const char *last_sym;       /* the last symbol set_symbol() found, */
	guint16 last_sym_len;       /* and its length (a run's fills share it) */
};

#define DEFAULT_SLOTS_LOG2 18     /* 256 Ki instructions, 16 MiB */

G_STATIC_ASSERT(sizeof(VtDisasmInsn) == 64);

VtDecodeDisasm *vt_decode_disasm_new_sized(const VtDecodeImage *img, guint slots_log2)
{
	VtDecodeDisasm *d = g_new0(VtDecodeDisasm, 1);

	slots_log2 = CLAMP(slots_log2, 1, 24);
	d->img = img;
	for (guint8 m = 0; m < G_N_ELEMENTS(d->dec); m++)
		vt_decode_zydis_init(&d->dec[m], m);
	ZydisFormatterInit(&d->fmt, ZYDIS_FORMATTER_STYLE_ATT);
	ZydisFormatterSetProperty(&d->fmt, ZYDIS_FORMATTER_PROP_HEX_UPPERCASE, ZYAN_FALSE);
	/* pages the trace never reaches stay unmapped */
	d->slots = vt_decode_table_new(sizeof(VtDisasmInsn) << slots_log2);
	d->shift = 64 - slots_log2;
	d->longs = g_new0(guint64, ((((gsize)1 << slots_log2) + 63) / 64 + 63) / 64);
	d->group_shift = 64 - (slots_log2 > 6 ? slots_log2 - 6 : 0);
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
	/* only the blocks of 64 slots that held allocated text (a scan of
	 * all was 4.4% of a small trace's --insn-trace instructions) */
	for (gsize b = 0, n = (gsize)1 << (64 - d->shift); b * 64 < n; b++)
		if (d->longs[b / 64] >> (b % 64) & 1)
			for (gsize i = b * 64; i < MIN(b * 64 + 64, n); i++)
				if (text_long(&d->slots[i]))
					g_free((char *)vt_disasm_insn_text(&d->slots[i]));
	for (guint i = 0; d->poked && i < POKED_SLOTS; i++)
		if (text_long(&d->poked[i].in))
			g_free((char *)vt_disasm_insn_text(&d->poked[i].in));
	g_free(d->poked);
	g_free(d->longs);
	vt_decode_table_free(d->slots, sizeof(VtDisasmInsn) << (64 - d->shift));
	g_free(d);
}

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
	in->sym = in->code ? vt_decode_image_symbol(d->img, in->ip, &in->sym_off) : NULL;
	if (in->sym && in->sym != d->last_sym) {
		d->last_sym = in->sym;
		d->last_sym_len = (guint16)MIN(strlen(in->sym), (gsize)G_MAXUINT16);
	}
	in->sym_len = in->sym ? d->last_sym_len : 0;
	if (!in->sym)
		in->sym_off = 0;
}

/* in: the instruction at ip whose bytes are code (avail of them). */
static void fill_code(VtDecodeDisasm *d, VtDisasmInsn *in, guint64 ip, guint8 mode, const guint8 *code, gsize avail)
{
	ZydisDecoderContext ctx;
	ZydisDecodedInstruction zi;
	ZydisDecodedOperand op[ZYDIS_MAX_OPERAND_COUNT_VISIBLE];
	char buf[256];

	if (text_long(in))
		g_free((char *)vt_disasm_insn_text(in));
	else if (!in->mode)
		d->used++;
	in->ip = ip;
	in->mode = mode;
	in->code = code;
	in->len = 0;
	in->kind = VT_INSN_OTHER;
	set_symbol(d, in);
	if (!code || !ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&d->dec[mode], &ctx, code,
								 MIN(avail, (gsize)ZYDIS_MAX_INSTRUCTION_LENGTH), &zi)) ||
	    !ZYAN_SUCCESS(ZydisDecoderDecodeOperands(&d->dec[mode], &ctx, &zi, op, zi.operand_count_visible))) {
		set_text(in, code ? "(bad)" : "(unmapped)");
		return;
	}
	in->len = zi.length;
	in->kind = vt_decode_insn_kind(&zi, op);
	if (!ZYAN_SUCCESS(ZydisFormatterFormatInstruction(&d->fmt, &zi, op, zi.operand_count_visible, buf, sizeof(buf),
							   ip, NULL)))
		g_strlcpy(buf, "(bad)", sizeof(buf));
	set_text(in, buf);
}

static void fill(VtDecodeDisasm *d, VtDisasmInsn *in, guint64 ip, guint8 mode)
{
	gsize avail = 0;
	const guint8 *code = ip && d->img ? vt_decode_image_code(d->img, ip, &avail) : NULL;

	fill_code(d, in, ip, mode, code, avail);
	if (text_long(in)) {
		gsize i = (gsize)(in - d->slots);

		d->longs[i / 64 / 64] |= (guint64)1 << (i / 64 % 64);
	}
}

const VtDisasmInsn *vt_decode_disasm_at(VtDecodeDisasm *d, guint64 ip)
{
	return vt_decode_disasm_at_mode(d, ip, VT_MODE_64);
}

/* ip's slot: a Fibonacci hash of its 64-byte stretch (host and guest
 * kernels run the same code 2^n apart) picks a group of 64 slots, ip & 63
 * one of them - a run of code goes up one group in order, not from one
 * random slot to the next (a cache miss each) */
static gsize slot_index(const VtDecodeDisasm *d, guint64 ip)
{
	guint64 group = (((ip >> 6) * 0x9e3779b97f4a7c15ULL) >> 1) >> (d->group_shift - 1);

	return (gsize)(group << 6 | (ip & 63)) & (((gsize)1 << (64 - d->shift)) - 1);
}

/* Slot p (one cache line: the table is page-aligned) on its way to the
 * cache.  A macro: GCC 12 finds a function that only prefetches pure and
 * drops the calls to it in this file. */
#define SLOT_PREFETCH(p) __builtin_prefetch(p)

/* In mode (VT_MODE_*; unknown: 64-bit): a slot holds one mode's decoding
 * (16/32-bit firmware and boot code run rarely, so they share the table). */
const VtDisasmInsn *vt_decode_disasm_at_mode(VtDecodeDisasm *d, guint64 ip, guint8 mode)
{
	VtDisasmInsn *in = &d->slots[slot_index(d, ip)];

	if (mode != VT_MODE_16 && mode != VT_MODE_32)
		mode = VT_MODE_64;
	if (G_UNLIKELY(in->ip != ip || in->mode != mode))   /* an empty slot's mode is 0 */
		fill(d, in, ip, mode);
	/* the next instruction's - most often asked for next - on its way
	 * while the caller prints this one */
	SLOT_PREFETCH(&d->slots[slot_index(d, ip + in->len)]);
	return in;
}

void vt_decode_disasm_prefetch(const VtDecodeDisasm *d, guint64 ip)
{
	SLOT_PREFETCH(&d->slots[slot_index(d, ip)]);
}

const VtDisasmInsn *vt_decode_disasm_at_time(VtDecodeDisasm *d, guint64 ip, guint8 mode, guint64 tsc)
{
	guint8 b[ZYDIS_MAX_INSTRUCTION_LENGTH];
	gsize avail = 0;
	guint64 tag = 0;
	guint used;
	Poked *p;

	if (!ip || !d->img || !vt_decode_image_pokes(d->img) ||
	    !vt_decode_image_code_at(d->img, ip, tsc, b, sizeof(b), &avail, &tag) || !tag)
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
	used = d->used;                /* the main table's count only */
	fill_code(d, &p->in, ip, mode, p->bytes, avail);
	d->used = used;
	return &p->in;
}

guint vt_decode_disasm_size(const VtDecodeDisasm *d)
{
	return d->used;
}
