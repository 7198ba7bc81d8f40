/* disasm.c - instructions of an image as text (Zydis, AT&T syntax), each
 * decoded and formatted once: formatting costs 10-50 times what decoding
 * does, and a trace runs the same kernel code over and over.  The cache
 * grows with the code a trace touches, never with the trace. */
#include "config.h"

#include <string.h>
#include <Zydis/Zydis.h>

#include "src/decode/decode.h"

struct VtDecodeDisasm {
	const VtDecodeImage *img;
	ZydisDecoder dec;
	ZydisFormatter fmt;
	GHashTable *by_ip;          /* ip -> VtDisasmInsn */
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
	ZydisDecoderInit(&d->dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
	ZydisFormatterInit(&d->fmt, ZYDIS_FORMATTER_STYLE_ATT);
	ZydisFormatterSetProperty(&d->fmt, ZYDIS_FORMATTER_PROP_HEX_UPPERCASE, ZYAN_FALSE);
	d->by_ip = g_hash_table_new_full(g_int64_hash, g_int64_equal, NULL, insn_free);
	d->recent = g_new0(VtDisasmInsn *, RECENT);
	return d;
}

void vt_decode_disasm_free(VtDecodeDisasm *d)
{
	if (!d)
		return;
	g_hash_table_destroy(d->by_ip);
	g_free(d->recent);
	g_free(d);
}

static VtDisasmInsn *decode(VtDecodeDisasm *d, guint64 ip)
{
	VtDisasmInsn *in = g_new0(VtDisasmInsn, 1);
	ZydisDecodedInstruction zi;
	ZydisDecodedOperand op[ZYDIS_MAX_OPERAND_COUNT];
	char buf[256];
	VtInsn cls;
	gsize avail = 0;
	const guint8 *code = vt_decode_image_code(d->img, ip, &avail);

	in->ip = ip;
	if (!code || !ZYAN_SUCCESS(ZydisDecoderDecodeFull(&d->dec, code, MIN(avail, (gsize)ZYDIS_MAX_INSTRUCTION_LENGTH),
							    &zi, op))) {
		in->text = g_strdup(code ? "(bad)" : "(unmapped)");
		return in;
	}
	in->len = zi.length;
	memcpy(in->bytes, code, zi.length);
	if (vt_decode_insn(d->img, ip, &cls))
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
		in = decode(d, ip);
		g_hash_table_insert(d->by_ip, &in->ip, in);
	}
	*slot = in;
	return in;
}

guint vt_decode_disasm_size(const VtDecodeDisasm *d)
{
	return g_hash_table_size(d->by_ip);
}
