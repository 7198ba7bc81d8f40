/* internal.h - what the files of src/decode/ share (not part of the API). */
#ifndef VT_DECODE_INTERNAL_H
#define VT_DECODE_INTERNAL_H

#include <intel-pt.h>

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
/* Also report power events (VT_BRANCH_PSB, VT_BRANCH_CBR). */
void vt_decode_queue_set_power(VtDecodeQueue *d, gboolean power);
/* Why the queue ended early (a window could not be read), NULL if not. */
const GError *vt_decode_queue_error(const VtDecodeQueue *d);

/* textpoke.c: is this 4 KiB page poked; the bytes at addr at time tsc
 * (within addr's page; 0: no code there); a TEXT_POKE record added (in
 * time order). */
gboolean vt_decode_pokes_page(const VtDecodePokes *p, guint64 page);
gsize vt_decode_pokes_read(const VtDecodePokes *p, const VtDecodeImage *img, guint64 addr, guint64 tsc,
			   guint8 *dst, gsize n);
gboolean vt_decode_pokes_add_record(VtDecodePokes **host, VtDecodePokes **guest, const guint8 *rec, gsize size,
				    guint64 tsc);
/* insn.c: one instruction from its bytes */
gboolean vt_decode_insn_bytes(const guint8 *code, gsize avail, guint64 ip, VtInsn *insn);

#endif
