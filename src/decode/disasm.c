/* disasm.c - instructions of an image as text (Zydis, AT&T syntax), each
 * decoded and formatted once: formatting costs 10-50 times what decoding
 * does, and a trace runs the same kernel code over and over.  The cache
 * grows with the code a trace touches, never with the trace. */
#include "config.h"

#include <string.h>
#include <Zydis/Zydis.h>

#include "src/decode/internal.h"

struct VtDecodeDisasm {
	const VtDecodeImage *img;
	ZydisDecoder dec[4];        /* by VT_MODE_* */
	ZydisFormatter fmt;
	GHashTable *by_ip;          /* ip -> VtDisasmInsn (64-bit) */
	GHashTable *legacy[2];      /* the same for 16- and 32-bit code (firmware, boot) */
	VtDisasmInsn **recent;      /* in front of it: direct-mapped by ip (RECENT slots) */
};

#define RECENT (1u << 16)

static void insn_free(gpointer p)
{
	VtDisasmInsn *in = p;

	g_free(in->text);
	g_free(in);
}

VtDecodeDisasm *vt_decode_disasm_new(const VtDecodeImage *img)
{
	VtDecodeDisasm *d = g_new0(VtDecodeDisasm, 1);

	d->img = img;
	for (guint8 m = 0; m < G_N_ELEMENTS(d->dec); m++)
		vt_decode_zydis_init(&d->dec[m], m);
	ZydisFormatterInit(&d->fmt, ZYDIS_FORMATTER_STYLE_ATT);
	ZydisFormatterSetProperty(&d->fmt, ZYDIS_FORMATTER_PROP_HEX_UPPERCASE, ZYAN_FALSE);
	d->by_ip = g_hash_table_new_full(g_int64_hash, g_int64_equal, NULL, insn_free);
	for (guint i = 0; i < 2; i++)
		d->legacy[i] = g_hash_table_new_full(g_int64_hash, g_int64_equal, NULL, insn_free);
	d->recent = g_new0(VtDisasmInsn *, RECENT);
	return d;
}

void vt_decode_disasm_free(VtDecodeDisasm *d)
{
	if (!d)
		return;
	g_hash_table_destroy(d->by_ip);
	for (guint i = 0; i < 2; i++)
		g_hash_table_destroy(d->legacy[i]);
	g_free(d->recent);
	g_free(d);
}

static VtDisasmInsn *decode(VtDecodeDisasm *d, guint64 ip, guint8 mode)
{
	VtDisasmInsn *in = g_new0(VtDisasmInsn, 1);
	ZydisDecodedInstruction zi;
	ZydisDecodedOperand op[ZYDIS_MAX_OPERAND_COUNT];
	char buf[256];
	VtInsn cls;
	gsize avail = 0;
	const guint8 *code = vt_decode_image_code(d->img, ip, &avail);

	in->ip = ip;
	if (!code || !ZYAN_SUCCESS(ZydisDecoderDecodeFull(&d->dec[mode], code, MIN(avail, (gsize)ZYDIS_MAX_INSTRUCTION_LENGTH),
							    &zi, op))) {
		in->text = g_strdup(code ? "(bad)" : "(unmapped)");
		return in;
	}
	in->len = zi.length;
	memcpy(in->bytes, code, zi.length);
	if (vt_decode_insn_mode(d->img, ip, mode, &cls))
		in->kind = cls.kind;
	if (!ZYAN_SUCCESS(ZydisFormatterFormatInstruction(&d->fmt, &zi, op, zi.operand_count_visible, buf, sizeof(buf),
							   ip, NULL)))
		g_strlcpy(buf, "(bad)", sizeof(buf));
	in->text = g_strdup(buf);
	return in;
}

const VtDisasmInsn *vt_decode_disasm_at(VtDecodeDisasm *d, guint64 ip)
{
	/* entries live as long as the table: a slot only points at one */
	VtDisasmInsn **slot = &d->recent[(ip ^ (ip >> 16)) & (RECENT - 1)];
	VtDisasmInsn *in = *slot;

	if (in && in->ip == ip)
		return in;
	in = g_hash_table_lookup(d->by_ip, &ip);
	if (!in) {
		in = decode(d, ip, VT_MODE_64);
		g_hash_table_insert(d->by_ip, &in->ip, in);
	}
	*slot = in;
	return in;
}

/* 16- and 32-bit code: a table each, no direct-mapped front (little of it
 * runs, early). */
const VtDisasmInsn *vt_decode_disasm_at_mode(VtDecodeDisasm *d, guint64 ip, guint8 mode)
{
	GHashTable *t;
	VtDisasmInsn *in;

	if (mode != VT_MODE_16 && mode != VT_MODE_32)
		return vt_decode_disasm_at(d, ip);
	t = d->legacy[mode - VT_MODE_16];
	in = g_hash_table_lookup(t, &ip);
	if (!in) {
		in = decode(d, ip, mode);
		g_hash_table_insert(t, &in->ip, in);
	}
	return in;
}

guint vt_decode_disasm_size(const VtDecodeDisasm *d)
{
	return g_hash_table_size(d->by_ip) + g_hash_table_size(d->legacy[0]) + g_hash_table_size(d->legacy[1]);
}
