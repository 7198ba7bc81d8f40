/* textbuf.h - a large output buffer for text written a line at a time by
 * the million (vmtrace script): bytes, strings, padding and numbers go
 * straight into one buffer, written to its FILE with fwrite when full and
 * at vt_textbuf_flush/free (into a pipe: given to it with vmsplice, no
 * copy - textbuf.c - but for the text before pieces, which write copies).
 * No printf, no allocation per line: printf's
 * padding (%*s) and its field parsing were most of script's time.
 *
 * Numbers and padding format exactly as printf's "%*s", "%-*s", "%*x",
 * "%*d" and "%0*d" do (tests/test-textbuf compares them), two digits at a
 * time from tables, straight into the buffer.
 *
 * May call: glib, stdio, vt_decode_table_new (the huge page for a pipe), vt_decode_buf_* (other buffers).  No printing besides the FILE given; a failed
 * write is kept (vt_textbuf_failed) and the FILE's error flag set, so
 * vt_cli_close_stdout reports it. */
#ifndef VT_TEXTBUF_H
#define VT_TEXTBUF_H

#include <glib.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>

#include "src/decode/hex.h"

G_BEGIN_DECLS

/* the most one vt_textbuf_room may ask for (the buffer is at least this
 * large; longer pieces are written in parts) */
#define VT_TEXTBUF_PIECE 4096

typedef struct {
	char *buf;
	gsize len, cap;
	guint64 flushed;         /* bytes written to f before buf */
	FILE *f;
	gboolean failed;
	gboolean splice;         /* into f's pipe with vmsplice (textbuf.c) */
	char *region;            /* (splice) the huge page buf is a half of */
} VtTextBuf;

/* A buffer of cap bytes (at least VT_TEXTBUF_PIECE) for f; when f is a
 * pipe, its buffer is enlarged to cap where the system allows, and where
 * the kernel has transparent huge pages the text goes into the pipe
 * without a copy (a 2 MiB buffer given to it with vmsplice: textbuf.c). */
VtTextBuf *vt_textbuf_new(FILE *f, gsize cap);
/* A buffer in memory (no FILE): it grows instead of being written out;
 * vt_textbuf_swap takes its text.  Its buffers are vt_decode_buf_new's
 * (huge pages: decode.h). */
VtTextBuf *vt_textbuf_new_mem(gsize cap);
/* The text of a memory buffer (*len bytes; the buffer is *old_cap bytes,
 * the caller's to give back with vt_decode_buf_free(text, *old_cap) or
 * here), and it goes on in buf of cap bytes (vt_decode_buf_new's, cap its
 * vt_decode_buf_size; NULL: a new one); vt_textbuf_pos goes on counting. */
char *vt_textbuf_swap(VtTextBuf *t, char *buf, gsize cap, gsize *len, gsize *old_cap);
/* Flushes, then frees. */
void vt_textbuf_free(VtTextBuf *t);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(VtTextBuf, vt_textbuf_free)
/* Write what is buffered (fwrite, then fflush of f); FALSE when a write failed. */
gboolean vt_textbuf_flush(VtTextBuf *t);
gboolean vt_textbuf_failed(const VtTextBuf *t);
/* Bytes put so far (flushed or not). */
static inline guint64 vt_textbuf_pos(const VtTextBuf *t)
{
	return t->flushed + t->len;
}

void vt_textbuf_make_room(VtTextBuf *t, gsize n);
/* Room for n <= VT_TEXTBUF_PIECE bytes; vt_textbuf_commit(t, m) takes m of them. */
static inline char *vt_textbuf_room(VtTextBuf *t, gsize n)
{
	if (G_UNLIKELY(t->cap - t->len < n))
		vt_textbuf_make_room(t, n);
	return t->buf + t->len;
}

static inline void vt_textbuf_commit(VtTextBuf *t, gsize n)
{
	t->len += n;
}

void vt_textbuf_mem_long(VtTextBuf *t, const void *p, gsize n);
/* The n pieces iov[] after t's text, without a copy of ours: t flushed
 * (into a pipe t splices to: copied by write, not given), then the pieces
 * written to its FILE's descriptor with writev - its stdio buffer
 * bypassed, a non-blocking pipe waited for.  A failed write is kept as
 * any other (the rest goes through fwrite, which fails as well and sets
 * the FILE's error flag).  iov[] is changed (a partial write advances
 * it).  In memory (no FILE): appended. */
void vt_textbuf_write_pieces(VtTextBuf *t, struct iovec *iov, int n);
static inline void vt_textbuf_mem(VtTextBuf *t, const void *p, gsize n)
{
	if (G_UNLIKELY(n > VT_TEXTBUF_PIECE)) {
		vt_textbuf_mem_long(t, p, n);
		return;
	}
	memcpy(vt_textbuf_room(t, n), p, n);
	t->len += n;
}

static inline void vt_textbuf_str(VtTextBuf *t, const char *s)
{
	vt_textbuf_mem(t, s, strlen(s));
}

static inline void vt_textbuf_c(VtTextBuf *t, char c)
{
	*vt_textbuf_room(t, 1) = c;
	t->len++;
}

/* n spaces (memset in bulk) */
void vt_textbuf_pad_long(VtTextBuf *t, gsize n);
static inline void vt_textbuf_pad(VtTextBuf *t, gsize n)
{
	if (G_UNLIKELY(n > VT_TEXTBUF_PIECE)) {
		vt_textbuf_pad_long(t, n);
		return;
	}
	memset(vt_textbuf_room(t, n), ' ', n);
	t->len += n;
}
/* s (n bytes) right-aligned in width ("%*s"), left-aligned ("%-*s") */
void vt_textbuf_right(VtTextBuf *t, const char *s, gsize n, int width);
void vt_textbuf_left(VtTextBuf *t, const char *s, gsize n, int width);
/* v in lowercase hex right-aligned in width with spaces ("%*llx") */
void vt_textbuf_hex(VtTextBuf *t, guint64 v, int width);
/* vt_textbuf_hex(t, v, 16): kernel addresses' 16 digits without counting them */
void vt_textbuf_hex16(VtTextBuf *t, guint64 v);
/* The same straight into room the caller has (vt_textbuf_room, then
 * vt_textbuf_commit of the length): src/decode/hex.h's vt_hex_at and
 * vt_hex16_at. */
/* v in decimal right-aligned in width, padded with ' ' ("%*lld") or '0'
 * ("%0*lld": zeros after a minus sign) */
void vt_textbuf_int(VtTextBuf *t, gint64 v, int width, char pad);
/* " xx" for each of the n bytes at p (lowercase hex) */
void vt_textbuf_bytes(VtTextBuf *t, const guint8 *p, gsize n);
/* The same into buf (at least 24 bytes): returns the length written (no NUL). */
gsize vt_textbuf_format_hex(char *buf, guint64 v);

G_END_DECLS

#endif
