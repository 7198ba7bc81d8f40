/* json.h - the one JSON writer: every JSON document vmtrace prints or
 * writes goes through it.
 *
 * Streaming (nothing is kept but the nesting stack), so it serves a
 * one-object summary and a decoder's millions of records alike.  Output is
 * always valid JSON and valid UTF-8: strings are escaped, and bytes that
 * are not UTF-8 (a thread name, a path) become U+FFFD.  The layout is
 * vmtrace's: one line, ", " between members, ": " after keys; a top-level
 * value ends with a newline.  Misuse (a value where a key is due, closing
 * what is not open) is a programming error caught by g_return_if_fail.
 *
 * May call: glib, stdio.  No printing besides the FILE given. */
#ifndef VT_JSON_H
#define VT_JSON_H

#include <glib.h>
#include <stdio.h>

G_BEGIN_DECLS

typedef struct VtJson VtJson;

/* A writer on f (not closed by vt_json_free) or appending to s. */
VtJson *vt_json_new(FILE *f);
VtJson *vt_json_new_string(GString *s);
/* Frees the writer; the document should be complete (depth 0). */
void vt_json_free(VtJson *j);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(VtJson, vt_json_free)

void vt_json_begin_object(VtJson *j);
void vt_json_end_object(VtJson *j);
void vt_json_begin_array(VtJson *j);
void vt_json_end_array(VtJson *j);
/* The key of the next member of the current object. */
void vt_json_key(VtJson *j, const char *key);

/* Values (in an array, after a key, or at the top level). */
void vt_json_string(VtJson *j, const char *s);        /* NULL: null */
void vt_json_string_len(VtJson *j, const char *s, gsize len);
void vt_json_printf(VtJson *j, const char *fmt, ...) G_GNUC_PRINTF(2, 3); /* a string */
void vt_json_uint(VtJson *j, guint64 v);
void vt_json_int(VtJson *j, gint64 v);
void vt_json_double(VtJson *j, double v, int decimals);  /* NaN/inf: null */
void vt_json_bool(VtJson *j, gboolean v);
void vt_json_null(VtJson *j);
void vt_json_hex(VtJson *j, guint64 v);                  /* the string "0x..." */

/* key + value in one call. */
void vt_json_kv_string(VtJson *j, const char *key, const char *s);
void vt_json_kv_uint(VtJson *j, const char *key, guint64 v);
void vt_json_kv_int(VtJson *j, const char *key, gint64 v);
void vt_json_kv_double(VtJson *j, const char *key, double v, int decimals);
void vt_json_kv_bool(VtJson *j, const char *key, gboolean v);
void vt_json_kv_hex(VtJson *j, const char *key, guint64 v);
void vt_json_kv_null(VtJson *j, const char *key);

/* Append s as a JSON string literal (quotes included, valid UTF-8) to out. */
void vt_json_quote(GString *out, const char *s, gssize len);

G_END_DECLS

#endif
