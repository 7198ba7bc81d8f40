/* internal.h - what the files of src/decode/ share (not part of the API). */
#ifndef VT_DECODE_INTERNAL_H
#define VT_DECODE_INTERNAL_H

#include <intel-pt.h>

#include "src/decode/decode.h"

/* A new libipt image with every code segment of img (iscache-backed, so the
 * block decoder keeps its block cache); one per decoder: libipt images may
 * not be shared between decoders. */
struct pt_image *vt_decode_image_new_pt(VtDecodeImage *img, GError **error);

/* vt_decode_queue_new() over buf itself (len bytes and 16 zeros after
 * them, g_malloc'ed), which the decoder then owns - also on failure. */
VtDecodeQueue *vt_decode_queue_new_take(guint8 *buf, gsize len, const VtDecodeCpu *cpu, VtDecodeImage *host,
					VtDecodeImage *guest, GError **error);

#endif
