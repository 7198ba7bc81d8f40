/* apply.c - rewrite guest TSC packets to host time.
 *
 * The patches (file offset, new 7 payload bytes) come from the correlation
 * pass (dryrun.c with collect_patches); this file only writes them.
 *
 * To a new file (-o): the input is copied to a temporary file next to the
 * output, patched, marked, fsync'ed and renamed over the output (the
 * output object of src/fs/output.h: what may stand at OUT, temporaries
 * removed on failure and on signals).
 *
 * In place: before the first byte of the trace changes, a journal
 * (FILE.vmtrace-journal: every patch with its old and new bytes, and the
 * marker) is written to a temporary file (created exclusively: never
 * through a planted link), fsync'ed and renamed, so it exists either whole
 * or not at all.  Then the patches and the marker are
 * written (only those bytes), the file is fsync'ed and the journal removed.
 * If the process dies in between, `vmtrace correlate --recover FILE` rolls
 * the journal forward: the file is then exactly the corrected one.  Without
 * a journal the file was never touched.
 *
 * The marker is a trailer after the last section of the file (perf reads
 * sections by offset and ignores it): "\nVMTRACE-CORRECTED " + JSON + "\n",
 * then the u64 length of that text and the 16 bytes "VMTRACE-CORR-END".
 * A pipe-mode file gets none (its records run to the end of the file).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <glib/gstdio.h>

#include "src/fs/fs.h"
#include "src/fs/lock.h"
#include "src/cli/json.h"
#include "src/fs/output.h"
#include "src/fs/tempfile.h"
#include "vmcorr/vmcorr.h"

#define MARK_END "VMTRACE-CORR-END"
#define MARK_HEAD "\nVMTRACE-CORRECTED "
#define JOURNAL_MAGIC "VMTRACE-JOURNAL2"
#define JOURNAL_SUFFIX ".vmtrace-journal"

static gboolean io_error(GError **error, const char *path, const char *what)
{
	int e = errno;

	g_set_error(error, VT_PERF_ERROR, VT_PERF_ERROR_IO, "%s: %s: %s", path, what, g_strerror(e));
	return FALSE;
}

static gboolean pread_all(int fd, void *buf, size_t len, off_t off, const char *path, GError **error)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = pread(fd, p, len, off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return io_error(error, path, "read");
		if (n == 0) {
			g_set_error(error, VT_PERF_ERROR, VT_PERF_ERROR_TRUNCATED, "%s: unexpected end of file", path);
			return FALSE;
		}
		p += n;
		len -= n;
		off += n;
	}
	return TRUE;
}

static gboolean fsync_dir_of(const char *path, GError **error)
{
	g_autofree char *dir = g_path_get_dirname(path);
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0)
		return io_error(error, dir, "open directory");
	if (fsync(fd) < 0 && errno != EINVAL) {
		close(fd);
		return io_error(error, dir, "fsync directory");
	}
	close(fd);
	return TRUE;
}


/* ------------------------------------------------------------ marker */

char *vmcorr_marker_read(const char *path, GError **error)
{
	g_autofree char *file = vt_perf_data_path(path);
	int fd = vt_fs_open_regular(file, O_RDONLY, error);
	struct stat st;
	uint8_t tail[24];
	uint64_t len;
	char *text = NULL;

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) < 0 || st.st_size < 24 || !pread_all(fd, tail, 24, st.st_size - 24, file, NULL) ||
	    memcmp(tail + 8, MARK_END, 16)) {
		close(fd);
		return NULL;
	}
	memcpy(&len, tail, 8);
	if (len > 1 << 20 || len + 24 > (uint64_t)st.st_size) {
		close(fd);
		return NULL;
	}
	text = g_malloc0(len + 1);
	if (!pread_all(fd, text, len, st.st_size - 24 - len, file, NULL) ||
	    strncmp(text, MARK_HEAD, strlen(MARK_HEAD))) {
		g_free(text);
		text = NULL;
	} else {
		memmove(text, text + strlen(MARK_HEAD), len - strlen(MARK_HEAD) + 1);
		g_strchomp(text);
	}
	close(fd);
	return text;
}

static GBytes *marker_build(const char *source, const VmcorrResult *r, const GArray *offsets)
{
	GString *s = g_string_new(MARK_HEAD);
	const char *epoch = g_getenv("SOURCE_DATE_EPOCH");   /* reproducible output */
	g_autoptr(GDateTime) now = epoch ? g_date_time_new_from_unix_utc(g_ascii_strtoll(epoch, NULL, 10))
					 : g_date_time_new_now_utc();
	g_autofree char *when = g_date_time_format_iso8601(now);
	VtJson *j;
	uint64_t len;

	j = vt_json_new_string(s);
	vt_json_begin_object(j);
	vt_json_kv_string(j, "vmtrace", PACKAGE_VERSION);
	vt_json_kv_string(j, "corrected", when);
	vt_json_kv_uint(j, "tsc_packets", r->patches->len);
	vt_json_key(j, "offsets");
	vt_json_begin_array(j);
	for (guint i = 0; offsets && i < offsets->len; i++) {
		const VmcorrOffset *o = &g_array_index(offsets, VmcorrOffset, i);

		vt_json_begin_object(j);
		vt_json_kv_hex(j, "vmcs", o->vmcs);
		vt_json_kv_hex(j, "offset", o->offset);
		vt_json_end_object(j);
	}
	vt_json_end_array(j);
	vt_json_end_object(j);      /* ends with the newline */
	vt_json_free(j);
	(void)source;
	len = s->len;
	g_string_append_len(s, (const char *)&len, 8);
	g_string_append_len(s, MARK_END, 16);
	return g_string_free_to_bytes(s);
}

/* ------------------------------------------------------------ patching */

static void patch_bytes(const VmcorrPatch *p, uint8_t out[7])
{
	for (int i = 0; i < 7; i++)
		out[i] = (uint8_t)(p->value >> (8 * i));
}

/* Delay between patch writes, for the crash-safety test only. */
static guint test_delay_us(void)
{
	/* a test hook: see ENVIRONMENT in vmtrace(1) */
	const char *e = g_getenv("VMTRACE_TEST_APPLY_DELAY_US");

	return e ? (guint)g_ascii_strtoull(e, NULL, 10) : 0;
}

static gboolean write_patches(int fd, const char *path, const GArray *patches, GError **error)
{
	guint delay = test_delay_us();

	for (guint i = 0; i < patches->len; i++) {
		uint8_t b[7];

		patch_bytes(&g_array_index(patches, VmcorrPatch, i), b);
		if (!vt_fs_write_all(fd, b, 7, g_array_index(patches, VmcorrPatch, i).offset, path, error))
			return FALSE;
		if (delay)
			g_usleep(delay);
	}
	return TRUE;
}

/* Write a corrected copy of the file open at `in` (named in_file) to
 * `out_file` (an output of src/fs: temporary file + rename; flags say what
 * may be replaced). */
static gboolean apply_to_copy(int in, const char *in_file, const char *out_file, VtFsOutputFlags flags,
			      const VmcorrResult *r, GBytes *marker, GError **error)
{
	g_autoptr(VtFsOutput) o = NULL;
	struct stat st;
	gsize mlen;
	const void *m = g_bytes_get_data(marker, &mlen);
	int out;

	if (fstat(in, &st) < 0)
		return io_error(error, in_file, "stat");
	o = vt_fs_output_new(out_file, flags, 0600, error);
	out = o ? vt_fs_output_fd(o) : -1;
	return o && vt_fs_copy_fd(in, out, st.st_size, out_file, error) && write_patches(out, out_file, r->patches, error) &&
	       vt_fs_write_all(out, m, mlen, st.st_size, out_file, error) && vt_fs_output_commit(o, error);
}

/* ------------------------------------------------------------ journal */

/* Journal: magic[16], u64 size_before, u64 dev, u64 ino (of the file it
 * was written for), u64 n, n * {u64 off, u8 old[7], u8 new[7], u8 pad[2]},
 * u64 marker_len, marker, then a SHA-256 of everything before (32 bytes). */
#define JOURNAL_HEAD 48
typedef struct {
	uint64_t size_before, dev, ino, n, marker_len;
	const uint8_t *recs, *marker;
} Journal;

static GBytes *journal_build(int fd, const char *path, const struct stat *st, const GArray *patches, GBytes *marker,
			     GError **error)
{
	GByteArray *j = g_byte_array_new();
	GChecksum *ck = g_checksum_new(G_CHECKSUM_SHA256);
	uint64_t head[4] = { st->st_size, st->st_dev, st->st_ino, patches->len };
	gsize mlen, dlen = 32;
	const uint8_t *m = g_bytes_get_data(marker, &mlen);
	uint64_t ml = mlen;
	uint8_t digest[32];

	g_byte_array_append(j, (const guint8 *)JOURNAL_MAGIC, 16);
	g_byte_array_append(j, (const guint8 *)head, sizeof(head));
	for (guint i = 0; i < patches->len; i++) {
		const VmcorrPatch *p = &g_array_index(patches, VmcorrPatch, i);
		uint8_t rec[24] = { 0 };

		memcpy(rec, &p->offset, 8);
		if (!pread_all(fd, rec + 8, 7, p->offset, path, error)) {
			g_byte_array_unref(j);
			g_checksum_free(ck);
			return NULL;
		}
		patch_bytes(p, rec + 15);
		g_byte_array_append(j, rec, 24);
	}
	g_byte_array_append(j, (const guint8 *)&ml, 8);
	g_byte_array_append(j, m, mlen);
	g_checksum_update(ck, j->data, j->len);
	g_checksum_get_digest(ck, digest, &dlen);
	g_byte_array_append(j, digest, 32);
	g_checksum_free(ck);
	return g_byte_array_free_to_bytes(j);
}

static char *journal_path(const char *file)
{
	return g_strconcat(file, JOURNAL_SUFFIX, NULL);
}

static gboolean journal_error(GError **error, const char *jp, const char *what)
{
	g_set_error(error, VMCORR_ERROR, VMCORR_ERROR_JOURNAL, "%s: %s", jp, what);
	return FALSE;
}

/* Check a journal's magic, checksum and sizes, and point j into it. */
static gboolean journal_parse(const uint8_t *b, gsize len, const char *jp, Journal *j, GError **error)
{
	gsize dlen = 32;
	uint8_t digest[32];
	GChecksum *ck;

	if (len < JOURNAL_HEAD + 8 + 32 || memcmp(b, JOURNAL_MAGIC, 16))
		return journal_error(error, jp, "not a vmtrace journal (of this version)");
	ck = g_checksum_new(G_CHECKSUM_SHA256);
	g_checksum_update(ck, b, len - 32);
	g_checksum_get_digest(ck, digest, &dlen);
	g_checksum_free(ck);
	memcpy(&j->size_before, b + 16, 8);
	memcpy(&j->dev, b + 24, 8);
	memcpy(&j->ino, b + 32, 8);
	memcpy(&j->n, b + 40, 8);
	if (memcmp(digest, b + len - 32, 32) || j->n > (len - JOURNAL_HEAD - 40) / 24)
		return journal_error(error, jp, "journal is damaged (checksum)");
	j->recs = b + JOURNAL_HEAD;
	memcpy(&j->marker_len, j->recs + j->n * 24, 8);
	j->marker = j->recs + j->n * 24 + 8;
	if (JOURNAL_HEAD + j->n * 24 + 8 + j->marker_len + 32 != len)
		return journal_error(error, jp, "journal is damaged (size)");
	return TRUE;
}

/* The journal belongs to the file open at fd: the same inode, a size the
 * interrupted run can have left, and at every patch either the old bytes
 * or the new ones.  Anything else is another file under the same name. */
static gboolean journal_matches(int fd, const char *file, const char *jp, const Journal *j, GError **error)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return io_error(error, file, "stat");
	if ((uint64_t)st.st_ino != j->ino || (uint64_t)st.st_size < j->size_before ||
	    (uint64_t)st.st_size > j->size_before + j->marker_len)
		goto other;
	for (uint64_t i = 0; i < j->n; i++) {
		const uint8_t *rec = j->recs + i * 24;
		uint64_t off;
		uint8_t now[7];

		memcpy(&off, rec, 8);
		if (!pread_all(fd, now, 7, off, file, error))
			return FALSE;
		if (memcmp(now, rec + 8, 7) && memcmp(now, rec + 15, 7))
			goto other;
	}
	return TRUE;
other:
	g_set_error(error, VMCORR_ERROR, VMCORR_ERROR_JOURNAL,
		    "%s: the journal %s was written for another file (size %" G_GUINT64_FORMAT ", inode %" G_GUINT64_FORMAT
		    "; this one has %" G_GUINT64_FORMAT ", %" G_GUINT64_FORMAT " and other bytes); nothing written - if the "
		    "file was replaced on purpose, remove the journal", file, jp, j->size_before, j->ino,
		    (uint64_t)st.st_size, (uint64_t)st.st_ino);
	return FALSE;
}

/* Write the journal's new bytes and marker to fd, then drop the journal. */
static gboolean journal_roll(int fd, const char *file, const char *jp, const Journal *j, GError **error)
{
	for (uint64_t i = 0; i < j->n; i++) {
		const uint8_t *rec = j->recs + i * 24;
		uint64_t off;

		memcpy(&off, rec, 8);
		if (!vt_fs_write_all(fd, rec + 15, 7, off, file, error))
			return FALSE;
	}
	if (!vt_fs_write_all(fd, j->marker, j->marker_len, j->size_before, file, error))
		return FALSE;
	if (ftruncate(fd, j->size_before + j->marker_len) < 0 || fsync(fd) < 0)
		return io_error(error, file, "truncate/fsync");
	if (unlink(jp) < 0)
		return io_error(error, jp, "remove");
	return fsync_dir_of(file, error);
}

/* Roll a journal forward onto `file`.  *found says whether there was one. */
static gboolean journal_replay(const char *file, gboolean *found, uint64_t *npatches, GError **error)
{
	g_autofree char *jp = journal_path(file);
	g_autofree uint8_t *b = NULL;
	struct stat st;
	Journal j;
	gsize len;
	int fd;
	gboolean ok;

	*found = FALSE;
	if ((fd = vmcorr_hold(file, TRUE, error)) < 0)
		return FALSE;
	vt_tempfile_remove_stale_of(jp);   /* an unfinished journal: the file was not touched */
	if (lstat(jp, &st) < 0) {
		ok = errno == ENOENT || io_error(error, jp, "stat");
		close(fd);
		return ok;
	}
	*found = TRUE;
	b = S_ISREG(st.st_mode) ? (uint8_t *)vt_fs_read_all(jp, 1ULL << 34, &len, error) : NULL;
	if (!S_ISREG(st.st_mode))
		journal_error(error, jp, "not a journal (not a regular file); remove it");
	ok = b && journal_parse(b, len, jp, &j, error) && journal_matches(fd, file, jp, &j, error) &&
	     journal_roll(fd, file, jp, &j, error);
	if (ok)
		*npatches = j.n;
	close(fd);
	return ok;
}

gboolean vmcorr_recover(const char *path, gboolean *found, uint64_t *npatches, GError **error)
{
	g_autofree char *file = vt_perf_data_path(path);

	*npatches = 0;
	return journal_replay(file, found, npatches, error);
}

gboolean vmcorr_journal_pending(const char *path)
{
	g_autofree char *file = vt_perf_data_path(path);
	g_autofree char *jp = journal_path(file);
	struct stat st;

	return lstat(jp, &st) == 0;
}

/* ------------------------------------------------------------ holding the file */

int vmcorr_hold(const char *path, gboolean exclusive, GError **error)
{
	g_autofree char *file = vt_perf_data_path(path);
	int fd = vt_fs_lock_open(file, exclusive ? O_RDWR : O_RDONLY, exclusive, error);

	if (fd < 0 && error && *error && (*error)->domain == VT_FS_LOCK_ERROR) {
		g_autofree char *msg = g_strdup((*error)->message);

		g_clear_error(error);
		g_set_error(error, VMCORR_ERROR, VMCORR_ERROR_BUSY, "%s - another run is correcting or reading it; "
			    "try again when it has finished", msg);
	}
	return fd;
}

/* The file open at fd is the one the patches were computed from, as it was,
 * and still the file of that name. */
static gboolean same_file(int fd, const char *file, const VmcorrResult *r, GError **error)
{
	struct stat st, named;

	if (fstat(fd, &st) < 0)
		return io_error(error, file, "stat");
	/* and the name still names it: a file moved over it gets nothing either */
	if (stat(file, &named) == 0 && named.st_dev == st.st_dev && named.st_ino == st.st_ino &&
	    (uint64_t)st.st_dev == r->file_dev && (uint64_t)st.st_ino == r->file_ino &&
	    (uint64_t)st.st_size == r->file_size &&
	    (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec == r->file_mtime_ns)
		return TRUE;
	g_set_error(error, VMCORR_ERROR, VMCORR_ERROR_CHANGED,
		    "%s changed while it was being corrected (replaced, or written by another program); nothing "
		    "written - correct it again", file);
	return FALSE;
}

/* Room for the marker past the end of the file, before the first byte
 * changes: a full disk then fails here, not half way. */
static gboolean reserve_tail(int fd, const char *file, uint64_t size, gsize len, GError **error)
{
	if (!len || fallocate(fd, FALLOC_FL_KEEP_SIZE, size, len) == 0)
		return TRUE;
	if (errno == EOPNOTSUPP || errno == ENOSYS)
		return TRUE;      /* cannot reserve here: the journal still covers it */
	return io_error(error, file, "cannot reserve space for the correction marker; nothing written");
}

/* After the journal exists, a failure leaves the file partly corrected:
 * the journal completes it. */
static gboolean tell_recover(GError **error, const char *file)
{
	g_prefix_error(error, "%s is partly corrected - run `vmtrace correlate --recover %s` to complete it: ", file,
		       file);
	return FALSE;
}

/* Test hook (see ENVIRONMENT in vmtrace(1)): a pause before writing. */
static void test_pause(void)
{
	const char *e = g_getenv("VMTRACE_TEST_PAUSE_BEFORE_WRITE_MS");

	if (e)
		g_usleep(g_ascii_strtoull(e, NULL, 10) * 1000);
}

static gboolean apply_in_place(int fd, const char *file, const VmcorrResult *r, GBytes *marker, GError **error)
{
	g_autofree char *jp = journal_path(file);
	g_autoptr(GBytes) journal = NULL;
	struct stat st;
	gsize mlen;
	const void *m = g_bytes_get_data(marker, &mlen);

	if (fstat(fd, &st) < 0)
		return io_error(error, file, "stat");
	if (!reserve_tail(fd, file, st.st_size, mlen, error))
		return FALSE;
	journal = journal_build(fd, file, &st, r->patches, marker, error);
	if (!journal || !vt_fs_output_write_file(jp, VT_FS_OUTPUT_REPLACE, 0600, g_bytes_get_data(journal, NULL),
						 g_bytes_get_size(journal), error))
		return FALSE;
	/* from here on, `vmtrace correlate --recover` completes the job */
	if (!write_patches(fd, file, r->patches, error) || !vt_fs_write_all(fd, m, mlen, st.st_size, file, error))
		return tell_recover(error, file);
	if (fsync(fd) < 0) {
		io_error(error, file, "fsync");
		return tell_recover(error, file);
	}
	if (unlink(jp) < 0) {
		io_error(error, jp, "remove");
		return tell_recover(error, file);
	}
	return fsync_dir_of(file, error);
}

/* ------------------------------------------------------------ directories */

/* Everything of a perf.data directory but its data (written apart). */
static gboolean not_data(const char *name, guint depth)
{
	return depth == 0 && !strcmp(name, "data");
}

/* perf.data directory: build the corrected copy in a temporary directory
 * next to OUT (everything else copied, then data) and rename it to OUT, so
 * OUT appears complete or not at all.  OUT must not exist. */
static gboolean apply_to_dir(const char *path, int in, const char *in_file, const char *out, const VmcorrResult *r,
			     GBytes *marker, GError **error)
{
	g_autoptr(VtFsOutput) o = vt_fs_output_new(out, VT_FS_OUTPUT_DIR, 0700, error);
	g_autofree char *tmp_data = NULL;

	if (!o) {
		if (error && g_error_matches(*error, G_FILE_ERROR, G_FILE_ERROR_EXIST))
			g_prefix_error(error, "a corrected perf.data directory is written as a new directory: ");
		return FALSE;
	}
	tmp_data = g_build_filename(vt_fs_output_tmp(o), "data", NULL);
	return vt_fs_copy_tree(path, vt_fs_output_tmp(o), not_data, error) &&
	       apply_to_copy(in, in_file, tmp_data, VT_FS_OUTPUT_NEW, r, marker, error) && vt_fs_output_commit(o, error);
}

/* ------------------------------------------------------------ entry */

gboolean vmcorr_apply_patches(const char *path, int fd, const char *out, gboolean replace, const VmcorrResult *r,
			      const GArray *offsets, GError **error)
{
	g_autofree char *in_file = vt_perf_data_path(path);
	/* a pipe-mode stream has no sections: a trailer would be read as records */
	GBytes *marker = r->pipe ? g_bytes_new_static("", 0) : marker_build(path, r, offsets);
	gboolean ok;

	test_pause();
	if (!same_file(fd, in_file, r, error))
		ok = FALSE;
	else if (!out)
		ok = apply_in_place(fd, in_file, r, marker, error);
	else if (g_file_test(path, G_FILE_TEST_IS_DIR))
		ok = apply_to_dir(path, fd, in_file, out, r, marker, error);
	else
		ok = apply_to_copy(fd, in_file, out, replace ? VT_FS_OUTPUT_REPLACE : VT_FS_OUTPUT_NEW, r, marker, error);
	g_bytes_unref(marker);
	return ok;
}
