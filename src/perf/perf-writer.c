/* perf-writer.c - write PERFILE2 perf.data files.  See perf-data.h.
 *
 * Layout: 104-byte header (written last), the ids arrays of all attrs, the
 * attr section, the data section (8-byte aligned), then the feature table
 * and the feature payloads.  Everything goes through a 2 MiB write buffer
 * into the output's temporary file (src/fs/output.h: created exclusively
 * beside the final name, removed on failure and on signals, renamed into
 * place when finished) in aligned blocks; large AUX payloads bypass the
 * buffer (see w_put).
 */
#include "src/perf/perf-data.h"
#include "src/perf/perf-encode.h"
#include "src/fs/output.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PERF_MAGIC2		0x32454c4946524550ULL	/* "PERFILE2" */
#define FILE_HDR_SIZE		104
#define WBUF_SIZE		(2u << 20)	/* a PMD-sized folio */
#define AUXTRACE_REC_SIZE	48

struct wattr {
	struct perf_event_attr attr;
	uint64_t *ids;
	guint nr_ids;
	uint64_t ids_off;
};

struct VtPerfWriter {
	char *path;		/* final file name (PATH or PATH/data) */
	char *dir;		/* PATH when writing a perf.data directory */
	VtFsOutput *out;	/* the temporary file until renamed */
	int fd;
	gboolean as_dir, started, finished;
	uint8_t *buf;
	size_t buf_len;
	uint64_t pos;		/* logical offset of the next byte */
	uint64_t attrs_off, data_off;
	GArray *attrs;		/* struct wattr */
	GArray *aux_index;	/* VtPerfFileSection */
	GByteArray *feat[VT_PERF_FEAT_BITS];
};

/* A file-system error (G_FILE_ERROR, "PATH: ...") as this layer's. */
static gboolean io_err(GError **error, GError *fs_error)
{
	g_set_error_literal(error, VT_PERF_ERROR, VT_PERF_ERROR_IO, fs_error->message);
	g_error_free(fs_error);
	return FALSE;
}

/* Write at off (-1: at the end) */
static gboolean write_at(VtPerfWriter *w, const void *p, uint64_t n, gint64 off, GError **error)
{
	GError *e = NULL;

	return vt_fs_write_all(w->fd, p, n, off, w->path, &e) || io_err(error, e);
}

static gboolean w_flush(VtPerfWriter *w, GError **error)
{
	gboolean ok = write_at(w, w->buf, w->buf_len, -1, error);

	w->buf_len = 0;
	return ok;
}

/* Bytes reach the file in writes that end at multiples of WBUF_SIZE (all
 * but the last): the page cache then holds the file in large folios, which
 * a reader's mapping maps in a few faults (2 MiB folios: one fault each)
 * instead of one per 64 KiB - the system time of every later read of it
 * (issue #10: a 64 MiB dry run faulted 775 times through 256 KiB writes,
 * 3.3 ms; 33 times through 2 MiB-aligned writes, 0.3 ms).  Large payloads
 * go to the file directly in whole aligned blocks, their ends through the
 * buffer. */
static gboolean w_put(VtPerfWriter *w, const void *p, uint64_t n, GError **error)
{
	const uint8_t *q = p;

	while (n) {
		gsize room, take;

		if (!w->buf_len && !(w->pos % WBUF_SIZE) && n >= WBUF_SIZE) {
			uint64_t k = n - n % WBUF_SIZE;

			if (!write_at(w, q, k, -1, error))
				return FALSE;
			q += k;
			n -= k;
			w->pos += k;
			continue;
		}
		room = WBUF_SIZE - (gsize)((w->pos - w->buf_len) % WBUF_SIZE);
		take = (gsize)MIN(n, (uint64_t)(room - w->buf_len));
		memcpy(w->buf + w->buf_len, q, take);
		w->buf_len += take;
		w->pos += take;
		q += take;
		n -= take;
		if (w->buf_len == room && !w_flush(w, error))
			return FALSE;
	}
	return TRUE;
}

static gboolean w_pad8(VtPerfWriter *w, GError **error)
{
	static const uint8_t zero[8];

	return w_put(w, zero, (8 - (w->pos & 7)) & 7, error);
}

static uint64_t attr_size_of(const VtPerfWriter *w)
{
	if (!w->attrs->len)
		return sizeof(struct perf_event_attr) + 16;
	return g_array_index(w->attrs, struct wattr, 0).attr.size + 16;
}

/* Where the data section will start (ids and attrs come first). */
static uint64_t data_start(const VtPerfWriter *w)
{
	uint64_t off = FILE_HDR_SIZE;
	guint i;

	for (i = 0; i < w->attrs->len; i++)
		off += g_array_index(w->attrs, struct wattr, i).nr_ids * 8;
	off += w->attrs->len * attr_size_of(w);
	return (off + 7) & ~7ULL;
}

/* Emit the ids arrays and the attr section before the first record. */
static gboolean w_start(VtPerfWriter *w, GError **error)
{
	guint i;

	if (w->started)
		return TRUE;
	w->started = TRUE;
	for (i = 0; i < w->attrs->len; i++) {
		struct wattr *a = &g_array_index(w->attrs, struct wattr, i);

		a->ids_off = w->pos;
		if (!w_put(w, a->ids, a->nr_ids * 8ULL, error))
			return FALSE;
	}
	w->attrs_off = w->pos;
	for (i = 0; i < w->attrs->len; i++) {
		struct wattr *a = &g_array_index(w->attrs, struct wattr, i);
		uint64_t sec[2] = { a->ids_off, a->nr_ids * 8ULL };

		if (!w_put(w, &a->attr, a->attr.size, error) || !w_put(w, sec, sizeof(sec), error))
			return FALSE;
	}
	if (!w_pad8(w, error))
		return FALSE;
	w->data_off = w->pos;
	return TRUE;
}

/* The perf.data directory: created, or an existing directory (never
 * through a symbolic link). */
static gboolean make_dir(const char *path, GError **error)
{
	struct stat st;

	if (mkdir(path, 0755) == 0)
		return TRUE;
	if (errno == EEXIST && lstat(path, &st) == 0 && !S_ISDIR(st.st_mode))
		errno = ENOTDIR;
	else if (errno == EEXIST)
		return TRUE;
	g_set_error(error, VT_PERF_ERROR, VT_PERF_ERROR_IO, "%s: cannot create directory: %s", path,
		    g_strerror(errno));
	return FALSE;
}

VtPerfWriter *vt_perf_writer_new(const char *path, gboolean as_dir, GError **error)
{
	VtPerfWriter *w = g_new0(VtPerfWriter, 1);
	static const uint8_t zero[FILE_HDR_SIZE];
	GError *e = NULL;

	w->fd = -1;
	w->as_dir = as_dir;
	w->attrs = g_array_new(FALSE, TRUE, sizeof(struct wattr));
	w->aux_index = g_array_new(FALSE, FALSE, sizeof(VtPerfFileSection));
	w->buf = g_malloc(WBUF_SIZE);
	w->dir = as_dir ? g_strdup(path) : NULL;
	w->path = as_dir ? g_build_filename(path, "data", NULL) : g_strdup(path);
	if (as_dir && !make_dir(path, error))
		goto err;
	w->out = vt_fs_output_new(w->path, VT_FS_OUTPUT_REPLACE, 0600, &e);
	if (!w->out) {
		io_err(error, e);
		goto err;
	}
	w->fd = vt_fs_output_fd(w->out);
	if (!w_put(w, zero, sizeof(zero), error))	/* header placeholder */
		goto err;
	return w;
err:
	vt_perf_writer_free(w);
	return NULL;
}

gboolean vt_perf_writer_add_attr(VtPerfWriter *w, const struct perf_event_attr *attr,
				 const uint64_t *ids, guint nr_ids, GError **error)
{
	struct wattr a;

	if (w->started || w->finished) {
		g_set_error(error, VT_PERF_ERROR, VT_PERF_ERROR_FORMAT,
			    "%s: attrs must be added before the first record", w->path);
		return FALSE;
	}
	if (attr->size < PERF_ATTR_SIZE_VER0 || attr->size > sizeof(struct perf_event_attr)) {
		g_set_error(error, VT_PERF_ERROR, VT_PERF_ERROR_FORMAT,
			    "%s: attr size %u is not in [%d, %zu]", w->path, attr->size,
			    PERF_ATTR_SIZE_VER0, sizeof(struct perf_event_attr));
		return FALSE;
	}
	if (w->attrs->len && attr->size + 16 != attr_size_of(w)) {
		g_set_error(error, VT_PERF_ERROR, VT_PERF_ERROR_FORMAT,
			    "%s: attr size %u differs from the first attr's size %u", w->path,
			    attr->size, (unsigned)(attr_size_of(w) - 16));
		return FALSE;
	}
	memset(&a, 0, sizeof(a));
	memcpy(&a.attr, attr, attr->size);
	a.nr_ids = nr_ids;
	a.ids = nr_ids ? g_memdup2(ids, nr_ids * sizeof(uint64_t)) : NULL;
	g_array_append_val(w->attrs, a);
	return TRUE;
}

gboolean vt_perf_writer_write_record(VtPerfWriter *w, const void *rec, GError **error)
{
	struct perf_event_header h;

	memcpy(&h, rec, sizeof(h));
	if (w->finished || h.size < sizeof(h) || h.size % 8 || h.type == VT_PERF_RECORD_AUXTRACE) {
		g_set_error(error, VT_PERF_ERROR, VT_PERF_ERROR_FORMAT,
			    "%s: cannot write record type %u size %u%s", w->path, h.type, h.size,
			    h.type == VT_PERF_RECORD_AUXTRACE ? " (use vt_perf_writer_write_auxtrace)" : "");
		return FALSE;
	}
	return w_start(w, error) && w_put(w, rec, h.size, error);
}

gboolean vt_perf_writer_write_auxtrace(VtPerfWriter *w, const VtPerfAuxtrace *aux,
				       const void *payload, uint64_t len,
				       uint64_t *payload_off, GError **error)
{
	return vt_perf_writer_write_auxtrace2(w, aux, payload, len, NULL, 0, payload_off, error);
}

gboolean vt_perf_writer_write_auxtrace2(VtPerfWriter *w, const VtPerfAuxtrace *aux,
					const void *a, uint64_t alen, const void *b, uint64_t blen,
					uint64_t *payload_off, GError **error)
{
	static const uint8_t zero[8];
	struct perf_event_header h = { VT_PERF_RECORD_AUXTRACE, 0, AUXTRACE_REC_SIZE };
	VtPerfFileSection ent;
	uint8_t r[AUXTRACE_REC_SIZE];
	uint64_t padded, len = alen + blen;

	if (w->finished || alen > UINT64_MAX - 7 - blen) {
		g_set_error(error, VT_PERF_ERROR, VT_PERF_ERROR_FORMAT,
			    "%s: cannot write AUXTRACE record", w->path);
		return FALSE;
	}
	if (!w_start(w, error))
		return FALSE;
	padded = (len + 7) & ~7ULL;
	memcpy(r, &h, 8);
	memcpy(r + 8, &padded, 8);
	memcpy(r + 16, &aux->offset, 8);
	memcpy(r + 24, &aux->reference, 8);
	memcpy(r + 32, &aux->idx, 4);
	memcpy(r + 36, &aux->tid, 4);
	memcpy(r + 40, &aux->cpu, 4);
	memcpy(r + 44, &aux->reserved, 4);
	ent.offset = w->pos;
	ent.size = AUXTRACE_REC_SIZE;
	if (!w_put(w, r, sizeof(r), error) || !w_put(w, a, alen, error) ||
	    (blen && !w_put(w, b, blen, error)) || !w_put(w, zero, padded - len, error))
		return FALSE;
	g_array_append_val(w->aux_index, ent);
	if (payload_off)
		*payload_off = ent.offset + AUXTRACE_REC_SIZE;
	return TRUE;
}

gboolean vt_perf_writer_set_feature(VtPerfWriter *w, guint bit, const void *data, uint64_t size,
				    GError **error)
{
	if (bit == 0 || bit >= VT_PERF_FEAT_BITS || size > G_MAXUINT || w->finished) {
		g_set_error(error, VT_PERF_ERROR, VT_PERF_ERROR_FORMAT,
			    "%s: cannot set feature %u (%" PRIu64 " bytes)", w->path, bit, size);
		return FALSE;
	}
	if (w->feat[bit])
		g_byte_array_set_size(w->feat[bit], 0);
	else
		w->feat[bit] = g_byte_array_sized_new((guint)size);
	g_byte_array_append(w->feat[bit], data, (guint)size);
	return TRUE;
}

gboolean vt_perf_writer_set_feature_string(VtPerfWriter *w, guint bit, const char *s,
					   GError **error)
{
	g_autoptr(GByteArray) b = NULL;

	if (strlen(s) + 1 > G_MAXUINT32 - 68) {
		g_set_error(error, VT_PERF_ERROR, VT_PERF_ERROR_FORMAT,
			    "%s: feature string too long", w->path);
		return FALSE;
	}
	b = g_byte_array_new();
	vt_perf_put_string(b, s);
	return vt_perf_writer_set_feature(w, bit, b->data, b->len, error);
}

/* Records laid end to end in a buffer (each complete, as for
 * vt_perf_writer_write_record). */
gboolean vt_perf_writer_write_records(VtPerfWriter *w, const void *recs, gsize len, GError **error)
{
	const uint8_t *p = recs;
	struct perf_event_header h;

	for (gsize off = 0; off < len; off += h.size) {
		if (len - off >= sizeof(h))
			memcpy(&h, p + off, sizeof(h));
		if (len - off < sizeof(h) || h.size > len - off) {
			g_set_error(error, VT_PERF_ERROR, VT_PERF_ERROR_FORMAT, "%s: record cut short", w->path);
			return FALSE;
		}
		if (!vt_perf_writer_write_record(w, p + off, error))
			return FALSE;
	}
	return TRUE;
}

/* A perf.data directory as `perf record --kcore` writes it: DIR/data and no
 * HEADER_DIR_FORMAT.  With that feature perf 6.1 reads the directory as a
 * multi-file (--threads) recording, wants a data.N file, and never flushes
 * its AUX decoders at the end: `perf script` then decodes almost nothing of
 * an Intel PT trace (nothing at all of a timeless one).  Stale data.N files
 * of an earlier recording are removed. */
static gboolean finish_dir(VtPerfWriter *w, GError **error)
{
	GDir *d = g_dir_open(w->dir, 0, NULL);
	const char *name;
	char *p;

	(void)error;
	while (d && (name = g_dir_read_name(d))) {
		if (g_str_has_prefix(name, "data.") && name[5] &&
		    strspn(name + 5, "0123456789") == strlen(name + 5)) {
			p = g_build_filename(w->dir, name, NULL);
			unlink(p);
			g_free(p);
		}
	}
	if (d)
		g_dir_close(d);
	return TRUE;
}

gboolean vt_perf_writer_finish(VtPerfWriter *w, GError **error)
{
	struct {
		uint64_t magic, size, attr_size;
		VtPerfFileSection attrs, data, event_types;
		uint64_t features[4];
	} h;
	VtPerfFileSection sec;
	uint64_t data_end;
	guint bit, nfeat = 0;
	GError *e = NULL;

	G_STATIC_ASSERT(sizeof(h) == FILE_HDR_SIZE);
	if (w->finished || w->fd < 0) {
		g_set_error(error, VT_PERF_ERROR, VT_PERF_ERROR_FORMAT,
			    "%s: writer already finished or failed", w->path);
		return FALSE;
	}
	if (!w_start(w, error))
		return FALSE;
	data_end = w->pos;

	if (w->aux_index->len) {
		uint64_t nr = w->aux_index->len;

		if (!vt_perf_writer_set_feature(w, VT_PERF_FEAT_AUXTRACE, &nr, 8, error))
			return FALSE;
		g_byte_array_append(w->feat[VT_PERF_FEAT_AUXTRACE], (const guint8 *)w->aux_index->data,
				    w->aux_index->len * (guint)sizeof(sec));
	}
	memset(&h, 0, sizeof(h));
	for (bit = 0; bit < VT_PERF_FEAT_BITS; bit++) {
		if (w->feat[bit]) {
			h.features[bit / 64] |= 1ULL << (bit % 64);
			nfeat++;
		}
	}
	sec.offset = data_end + nfeat * 16ULL;
	for (bit = 0; bit < VT_PERF_FEAT_BITS; bit++) {
		if (!w->feat[bit])
			continue;
		sec.size = w->feat[bit]->len;
		if (!w_put(w, &sec, sizeof(sec), error))
			return FALSE;
		sec.offset += sec.size;
	}
	for (bit = 0; bit < VT_PERF_FEAT_BITS; bit++)
		if (w->feat[bit] && !w_put(w, w->feat[bit]->data, w->feat[bit]->len, error))
			return FALSE;
	if (!w_flush(w, error))
		return FALSE;

	h.magic = PERF_MAGIC2;
	h.size = FILE_HDR_SIZE;
	h.attr_size = attr_size_of(w);
	h.attrs.offset = w->attrs_off;
	h.attrs.size = w->attrs->len * h.attr_size;
	h.data.offset = w->data_off;
	h.data.size = data_end - w->data_off;
	if (!write_at(w, &h, sizeof(h), 0, error))
		return FALSE;
	if (w->dir && !finish_dir(w, error))
		return FALSE;
	w->fd = -1;		/* the commit closes it */
	if (!vt_fs_output_commit(w->out, &e))
		return io_err(error, e);
	w->finished = TRUE;
	return TRUE;
}

void vt_perf_writer_free(VtPerfWriter *w)
{
	guint i;

	if (!w)
		return;
	vt_fs_output_free(w->out);	/* removes the temporary unless finished */
	for (i = 0; i < w->attrs->len; i++)
		g_free(g_array_index(w->attrs, struct wattr, i).ids);
	for (i = 0; i < VT_PERF_FEAT_BITS; i++)
		if (w->feat[i])
			g_byte_array_unref(w->feat[i]);
	g_array_free(w->attrs, TRUE);
	g_array_free(w->aux_index, TRUE);
	g_free(w->buf);
	g_free(w->dir);
	g_free(w->path);
	g_free(w);
}

gboolean vt_perf_writer_patch(VtPerfWriter *w, uint64_t off, const void *data, uint64_t len, GError **error)
{
	if (w->finished || !w->started || off < data_start(w) || off > w->pos || len > w->pos - off) {
		g_set_error(error, VT_PERF_ERROR, VT_PERF_ERROR_FORMAT, "%s: cannot patch bytes not written yet",
			    w->path);
		return FALSE;
	}
	return w_flush(w, error) && write_at(w, data, len, (gint64)off, error);
}

uint64_t vt_perf_writer_tell(const VtPerfWriter *w)
{
	return w->started ? w->pos : data_start(w);
}
