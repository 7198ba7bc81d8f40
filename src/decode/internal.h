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

/* An image of one file's code (guest-user.c): segs are (vaddr, file
 * offset, size) triples, ascending; funcs the function starts, ascending. */
VtDecodeImage *vt_decode_image_new_file(const char *path, const char *what, const guint64 *segs, guint nsegs,
					const guint64 *funcs, guint nfuncs, GError **error);

#endif
