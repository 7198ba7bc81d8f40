/* perf-reader.c - read perf.data files (PERFILE2, perf.data directories and
 * pipe-mode streams stored in a file).  See perf-data.h.
 *
 * All multi-byte values are read with memcpy (the file may be hostile and
 * its offsets unaligned); every offset/length is checked with overflow-safe
 * arithmetic before anything is read.
 *
 * Everything is read with pread: the header, attrs and ids at open, the
 * records through the iterator's window (or from mapped windows of the
 * file, vt_perf_iter_init_mapped), feature sections when first asked for.
 * A file that shrinks while it is read gives an error ("changed size while
 * being read"), never SIGBUS (mapped bytes are read under
 * vt_perf_file_guarded).  The whole file is mapped only for callers of
 * vt_perf_file_map (lazily, once).
 */
#include "src/perf/perf-data.h"
#include "src/fs/output.h"

#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define PERF_MAGIC2		0x32454c4946524550ULL	/* "PERFILE2" */
#define FILE_HDR_SIZE		104
#define PIPE_HDR_SIZE		16
#define ITER_READ_MIN		4096
#define ITER_READ_SKIP		512	/* after an AUX payload: its header and what follows */
#define ATTR_MAX		((uint32_t)sizeof(struct perf_event_attr))

G_DEFINE_QUARK(vt-perf-error-quark, vt_perf_error)

struct file_header {
	uint64_t magic, size, attr_size;
	VtPerfFileSection attrs, data, event_types;
	uint64_t features[4];
};
G_STATIC_ASSERT(sizeof(struct file_header) == FILE_HDR_SIZE);

struct id_map {
	uint64_t id;
	guint idx;
};

struct VtPerfFile {
	char *path;
	int fd;
	uint8_t *map;
	uint64_t size;
	gboolean rdwr, pipe;
	uint64_t data_off, data_size;
	VtPerfAttr *attrs;
	guint n_attrs;
	struct id_map *ids;
	guint n_ids;
	GPtrArray *owned;
	GMutex lock;                   /* the lazy map and feature loads */
	gboolean map_tried;
	const uint8_t *feat_data[VT_PERF_FEAT_BITS];
	uint64_t feat_bits[VT_PERF_FEAT_BITS / 64];
	VtPerfFileSection feat[VT_PERF_FEAT_BITS];
};

static inline uint64_t rd64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static inline uint32_t rd32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static inline uint16_t rd16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

/* [off, off + len) lies within [0, limit) -- without overflowing. */
static inline gboolean range_ok(uint64_t off, uint64_t len, uint64_t limit)
{
	return off <= limit && len <= limit - off;
}

static uint64_t page_size(void)
{
	static uint64_t pg;

	if (!pg) {
		long v = sysconf(_SC_PAGESIZE);

		pg = v > 0 ? (uint64_t)v : 4096;
	}
	return pg;
}

static gboolean G_GNUC_PRINTF(4, 5)
fail(GError **error, int code, const char *path, const char *fmt, ...)
{
	va_list ap;
	char *msg;

	va_start(ap, fmt);
	msg = g_strdup_vprintf(fmt, ap);
	va_end(ap);
	g_set_error(error, VT_PERF_ERROR, code, "%s: %s", path, msg);
	g_free(msg);
	return FALSE;
}

/* Exactly len bytes at off; a short read means the file shrank since it
 * was opened. */
static gboolean read_exact(const VtPerfFile *f, void *buf, size_t len, uint64_t off, GError **error)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = pread(f->fd, p, len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return fail(error, VT_PERF_ERROR_IO, f->path, "cannot read at offset %" PRIu64 ": %s",
				    off, g_strerror(errno));
		if (n == 0)
			return fail(error, VT_PERF_ERROR_CHANGED, f->path,
				    "changed size while being read (%" PRIu64 " bytes when opened, now "
				    "%" PRIu64 " or fewer)", f->size, off);
		p += n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return TRUE;
}

/* [off, off + len) of the file in memory owned by f (freed at close). */
static const uint8_t *read_owned(VtPerfFile *f, uint64_t off, uint64_t len, GError **error)
{
	uint8_t *p;

	if (len > G_MAXSIZE - 8) {
		fail(error, VT_PERF_ERROR_FORMAT, f->path, "section of %" PRIu64 " bytes is too large", len);
		return NULL;
	}
	p = g_malloc(len + 8);    /* + 8: rd64 at the very end stays in bounds */
	if (!read_exact(f, p, len, off, error)) {
		g_free(p);
		return NULL;
	}
	memset(p + len, 0, 8);
	g_ptr_array_add(f->owned, p);
	return p;
}

/* ------------------------------------------------------------- names */

static const char *const kernel_rec_names[] = {
	[PERF_RECORD_MMAP] = "MMAP",
	[PERF_RECORD_LOST] = "LOST",
	[PERF_RECORD_COMM] = "COMM",
	[PERF_RECORD_EXIT] = "EXIT",
	[PERF_RECORD_THROTTLE] = "THROTTLE",
	[PERF_RECORD_UNTHROTTLE] = "UNTHROTTLE",
	[PERF_RECORD_FORK] = "FORK",
	[PERF_RECORD_READ] = "READ",
	[PERF_RECORD_SAMPLE] = "SAMPLE",
	[PERF_RECORD_MMAP2] = "MMAP2",
	[PERF_RECORD_AUX] = "AUX",
	[PERF_RECORD_ITRACE_START] = "ITRACE_START",
	[PERF_RECORD_LOST_SAMPLES] = "LOST_SAMPLES",
	[PERF_RECORD_SWITCH] = "SWITCH",
	[PERF_RECORD_SWITCH_CPU_WIDE] = "SWITCH_CPU_WIDE",
	[PERF_RECORD_NAMESPACES] = "NAMESPACES",
	[17] = "KSYMBOL",
	[18] = "BPF_EVENT",
	[19] = "CGROUP",
	[20] = "TEXT_POKE",
	[21] = "AUX_OUTPUT_HW_ID",
};

static const char *const user_rec_names[] = {
	"ATTR", "EVENT_TYPE", "TRACING_DATA", "BUILD_ID", "FINISHED_ROUND",
	"ID_INDEX", "AUXTRACE_INFO", "AUXTRACE", "AUXTRACE_ERROR", "THREAD_MAP",
	"CPU_MAP", "STAT_CONFIG", "STAT", "STAT_ROUND", "EVENT_UPDATE",
	"TIME_CONV", "FEATURE", "COMPRESSED", "FINISHED_INIT",
};

const char *vt_perf_record_name(uint32_t type)
{
	const char *n = NULL;

	if (type < G_N_ELEMENTS(kernel_rec_names))
		n = kernel_rec_names[type];
	else if (type >= VT_PERF_RECORD_HEADER_ATTR &&
		 type - VT_PERF_RECORD_HEADER_ATTR < G_N_ELEMENTS(user_rec_names))
		n = user_rec_names[type - VT_PERF_RECORD_HEADER_ATTR];
	return n ? n : "UNKNOWN";
}

static const char *const feat_names[VT_PERF_FEAT_LAST] = {
	[VT_PERF_FEAT_TRACING_DATA] = "tracing_data",
	[VT_PERF_FEAT_BUILD_ID] = "build_id",
	[VT_PERF_FEAT_HOSTNAME] = "hostname",
	[VT_PERF_FEAT_OSRELEASE] = "osrelease",
	[VT_PERF_FEAT_VERSION] = "version",
	[VT_PERF_FEAT_ARCH] = "arch",
	[VT_PERF_FEAT_NRCPUS] = "nrcpus",
	[VT_PERF_FEAT_CPUDESC] = "cpudesc",
	[VT_PERF_FEAT_CPUID] = "cpuid",
	[VT_PERF_FEAT_TOTAL_MEM] = "total_mem",
	[VT_PERF_FEAT_CMDLINE] = "cmdline",
	[VT_PERF_FEAT_EVENT_DESC] = "event_desc",
	[VT_PERF_FEAT_CPU_TOPOLOGY] = "cpu_topology",
	[VT_PERF_FEAT_NUMA_TOPOLOGY] = "numa_topology",
	[VT_PERF_FEAT_BRANCH_STACK] = "branch_stack",
	[VT_PERF_FEAT_PMU_MAPPINGS] = "pmu_mappings",
	[VT_PERF_FEAT_GROUP_DESC] = "group_desc",
	[VT_PERF_FEAT_AUXTRACE] = "auxtrace",
	[VT_PERF_FEAT_STAT] = "stat",
	[VT_PERF_FEAT_CACHE] = "cache",
	[VT_PERF_FEAT_SAMPLE_TIME] = "sample_time",
	[VT_PERF_FEAT_MEM_TOPOLOGY] = "mem_topology",
	[VT_PERF_FEAT_CLOCKID] = "clockid",
	[VT_PERF_FEAT_DIR_FORMAT] = "dir_format",
	[VT_PERF_FEAT_BPF_PROG_INFO] = "bpf_prog_info",
	[VT_PERF_FEAT_BPF_BTF] = "bpf_btf",
	[VT_PERF_FEAT_COMPRESSED] = "compressed",
	[VT_PERF_FEAT_CPU_PMU_CAPS] = "cpu_pmu_caps",
	[VT_PERF_FEAT_CLOCK_DATA] = "clock_data",
	[VT_PERF_FEAT_HYBRID_TOPOLOGY] = "hybrid_topology",
	[VT_PERF_FEAT_PMU_CAPS] = "pmu_caps",
};

const char *vt_perf_feature_name(guint bit)
{
	return bit < VT_PERF_FEAT_LAST ? feat_names[bit] : NULL;
}

/* ------------------------------------------------------------- attrs */

static int calc_id_hdr_size(const struct perf_event_attr *attr)
{
	uint64_t t = attr->sample_type;
	int n = 0;

	if (!attr->sample_id_all)
		return 0;
	n += (t & PERF_SAMPLE_TID) ? 8 : 0;
	n += (t & PERF_SAMPLE_TIME) ? 8 : 0;
	n += (t & PERF_SAMPLE_ID) ? 8 : 0;
	n += (t & PERF_SAMPLE_STREAM_ID) ? 8 : 0;
	n += (t & PERF_SAMPLE_CPU) ? 8 : 0;
	n += (t & PERF_SAMPLE_IDENTIFIER) ? 8 : 0;
	return n;
}

/* Parse an on-disk perf_event_attr of at most `avail` bytes. */
static gboolean parse_attr(VtPerfFile *f, const uint8_t *p, uint64_t avail, guint idx,
			   VtPerfAttr *a, GError **error)
{
	uint32_t sz;

	if (avail < PERF_ATTR_SIZE_VER0)
		return fail(error, VT_PERF_ERROR_TRUNCATED, f->path,
			    "attr %u is truncated (%" PRIu64 " bytes)", idx, avail);
	sz = rd32(p + 4);
	if (sz < PERF_ATTR_SIZE_VER0)
		return fail(error, VT_PERF_ERROR_FORMAT, f->path,
			    "attr %u size %u is smaller than %d", idx, sz, PERF_ATTR_SIZE_VER0);
	if (sz > ATTR_MAX)
		return fail(error, VT_PERF_ERROR_FORMAT, f->path,
			    "attr %u size %u is larger than %u", idx, sz, ATTR_MAX);
	if (sz > avail)
		return fail(error, VT_PERF_ERROR_TRUNCATED, f->path,
			    "attr %u size %u exceeds its %" PRIu64 " bytes of space", idx, sz, avail);
	memset(a, 0, sizeof(*a));
	memcpy(&a->attr, p, sz);
	a->on_disk_size = sz;
	a->id_hdr_size = calc_id_hdr_size(&a->attr);
	return TRUE;
}

static const uint64_t *own_ids(VtPerfFile *f, const uint8_t *p, uint64_t n)
{
	uint64_t *ids;

	if (!n)
		return NULL;
	ids = g_memdup2(p, n * sizeof(uint64_t));
	g_ptr_array_add(f->owned, ids);
	return ids;
}

static int cmp_id(const void *a, const void *b)
{
	const struct id_map *x = a, *y = b;

	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static void build_id_map(VtPerfFile *f)
{
	uint64_t total = 0;
	guint i, n = 0;

	for (i = 0; i < f->n_attrs; i++)
		total += f->attrs[i].nr_ids;
	if (!total || total > G_MAXUINT)
		return;
	f->ids = g_new(struct id_map, total);
	for (i = 0; i < f->n_attrs; i++) {
		const uint8_t *ids = (const uint8_t *)f->attrs[i].ids;
		uint64_t j;

		for (j = 0; j < f->attrs[i].nr_ids; j++) {
			f->ids[n].id = rd64(ids + j * 8);
			f->ids[n++].idx = i;
		}
	}
	qsort(f->ids, n, sizeof(*f->ids), cmp_id);
	f->n_ids = n;
}

/* --------------------------------------------------------- iteration */

#define ITER_MAP_SPAN	(8u << 20)
#define ITER_MAP_ALIGN	(2u << 20)	/* a PMD: whole large folios */

/* [pos, pos + len) from the iterator's mapped window, mapping the window
 * holding it if needed; NULL if it lies outside the file (the pread path
 * reports that) or cannot be mapped (then reads go through pread). */
static const uint8_t *iter_fetch_mapped(VtPerfIter *it, uint64_t pos, uint32_t len)
{
	const uint8_t *p = vt_perf_window_at(&it->map, pos, len);
	uint64_t start = pos & ~(uint64_t)(ITER_MAP_ALIGN - 1);

	if (p || !range_ok(pos, len, it->f->size))
		return p;
	if (vt_perf_window_map(it->f, &it->map, start, pos + len - start, ITER_MAP_SPAN, NULL))
		return vt_perf_window_at(&it->map, pos, len);
	it->mapped = FALSE;
	return NULL;
}

/* Make [pos, pos + len) of the file available in the iterator's window;
 * NULL + error if it cannot be read. */
static const uint8_t *iter_fetch(VtPerfIter *it, uint64_t pos, uint32_t len, GError **error)
{
	uint64_t want;
	const uint8_t *p;

	if (it->mapped && (p = iter_fetch_mapped(it, pos, len)))
		return p;
	if (pos >= it->win_off && pos - it->win_off + len <= it->win_len)
		return it->win + (pos - it->win_off);
	/* reading on near where the window ended: records are dense, read more */
	if (it->win_len && pos >= it->win_off + it->win_len && pos - (it->win_off + it->win_len) < it->read_len)
		it->read_len = MIN(it->read_len * 2, (uint32_t)sizeof(it->win));
	want = MAX((uint64_t)len, it->read_len);
	want = MIN(want, MIN((uint64_t)sizeof(it->win), it->f->size - MIN(pos, it->f->size)));
	if (want < len) {
		fail(error, VT_PERF_ERROR_TRUNCATED, it->f->path,
		     "record at offset %" PRIu64 " extends past end of file", pos);
		return NULL;
	}
	it->win_len = 0;
	if (!read_exact(it->f, it->win, (size_t)want, pos, error))
		return NULL;
	it->win_off = pos;
	it->win_len = (uint32_t)want;
	return it->win;
}

static int read_record(VtPerfIter *it, uint64_t pos, uint64_t end, VtPerfRecord *rec,
		       uint64_t *next, GError **error)
{
	const VtPerfFile *f = it->f;
	const uint8_t *p;
	uint32_t type;
	uint16_t size;
	uint64_t n;

	if (pos >= end)
		return 0;
	/* perf pads records to 8 bytes in files; pipe-mode streams carry
	 * HEADER_FEATURE records of any size (perf 6.1 inject -o -) */
	if (pos % 8 && !f->pipe) {
		fail(error, VT_PERF_ERROR_FORMAT, f->path,
		     "record at offset %" PRIu64 " is not 8-byte aligned", pos);
		return -1;
	}
	if (end - pos < sizeof(struct perf_event_header)) {
		fail(error, VT_PERF_ERROR_TRUNCATED, f->path,
		     "record header at offset %" PRIu64 " extends past end of data (%" PRIu64 ")",
		     pos, end);
		return -1;
	}
	p = iter_fetch(it, pos, sizeof(struct perf_event_header), error);
	if (!p)
		return -1;
	type = rd32(p);
	size = rd16(p + 6);
	if (size < sizeof(struct perf_event_header)) {
		fail(error, VT_PERF_ERROR_FORMAT, f->path,
		     "record at offset %" PRIu64 " (type %u) has invalid size %u", pos, type, size);
		return -1;
	}
	if (size > end - pos) {
		fail(error, VT_PERF_ERROR_TRUNCATED, f->path,
		     "record at offset %" PRIu64 " (%s, size %u) extends past end of data (%" PRIu64 ")",
		     pos, vt_perf_record_name(type), size, end);
		return -1;
	}
	p = iter_fetch(it, pos, size, error);
	if (!p)
		return -1;
	n = pos + size;
	if (type == VT_PERF_RECORD_AUXTRACE) {
		uint64_t psz;

		if (size < 48) {
			fail(error, VT_PERF_ERROR_FORMAT, f->path,
			     "AUXTRACE record at offset %" PRIu64 " is too short (%u bytes)", pos, size);
			return -1;
		}
		psz = rd64(p + 8);
		if (psz > end - n) {
			fail(error, VT_PERF_ERROR_TRUNCATED, f->path,
			     "AUXTRACE payload at offset %" PRIu64 " (%" PRIu64
			     " bytes) extends past end of data (%" PRIu64 ")", n, psz, end);
			return -1;
		}
		n += psz;
		if (psz > ITER_READ_MIN)
			it->read_len = ITER_READ_SKIP;  /* a payload skipped: start small again */
	}
	rec->file_offset = pos;
	rec->data = p;
	rec->type = type;
	rec->size = size;
	rec->misc = rd16(p + 4);
	*next = n;
	return 1;
}

void vt_perf_iter_init(VtPerfIter *it, const VtPerfFile *f)
{
	it->f = f;
	it->pos = f->data_off;
	it->end = f->data_off + f->data_size;
	it->win_off = 0;
	it->win_len = 0;
	it->read_len = ITER_READ_MIN;
	it->mapped = FALSE;
	memset(&it->map, 0, sizeof(it->map));
}

void vt_perf_iter_init_mapped(VtPerfIter *it, const VtPerfFile *f)
{
	vt_perf_iter_init(it, f);
	it->mapped = TRUE;
}

void vt_perf_iter_clear(VtPerfIter *it)
{
	vt_perf_window_unmap(&it->map);
	it->mapped = FALSE;
}

int vt_perf_iter_next(VtPerfIter *it, VtPerfRecord *rec, GError **error)
{
	uint64_t next;
	int r;

	r = read_record(it, it->pos, it->end, rec, &next, error);
	if (r > 0)
		it->pos = next;
	return r;
}

/* ------------------------------------------------------------- open */

static gboolean open_file_header(VtPerfFile *f, GError **error)
{
	struct file_header h;
	uint8_t table[VT_PERF_FEAT_BITS * 16];
	uint64_t end;
	guint i, bit, k, nfeat = 0;

	if (f->size < FILE_HDR_SIZE)
		return fail(error, VT_PERF_ERROR_TRUNCATED, f->path,
			    "file too short for header (%" PRIu64 " bytes)", f->size);
	if (!read_exact(f, &h, sizeof(h), 0, error))
		return FALSE;
	if (h.size != FILE_HDR_SIZE)
		return fail(error, VT_PERF_ERROR_FORMAT, f->path,
			    "unsupported header size %" PRIu64, h.size);
	if (!range_ok(h.attrs.offset, h.attrs.size, f->size))
		return fail(error, VT_PERF_ERROR_TRUNCATED, f->path,
			    "attr section (offset %" PRIu64 ", size %" PRIu64
			    ") extends past end of file (%" PRIu64 " bytes)",
			    h.attrs.offset, h.attrs.size, f->size);
	if (!range_ok(h.data.offset, h.data.size, f->size))
		return fail(error, VT_PERF_ERROR_TRUNCATED, f->path,
			    "data section (offset %" PRIu64 ", size %" PRIu64
			    ") extends past end of file (%" PRIu64 " bytes)",
			    h.data.offset, h.data.size, f->size);
	if (h.data.size == 0)
		return fail(error, VT_PERF_ERROR_FORMAT, f->path, "data section is empty");
	if (h.data.offset < FILE_HDR_SIZE || h.data.offset % 8)
		return fail(error, VT_PERF_ERROR_FORMAT, f->path,
			    "bad data section offset %" PRIu64, h.data.offset);
	f->data_off = h.data.offset;
	f->data_size = h.data.size;

	if (h.attrs.size) {
		const uint8_t *sec;
		uint64_t n;

		if (h.attr_size < 16 + PERF_ATTR_SIZE_VER0 || h.attrs.size % h.attr_size)
			return fail(error, VT_PERF_ERROR_FORMAT, f->path,
				    "bad attr_size %" PRIu64 " for attr section of %" PRIu64 " bytes",
				    h.attr_size, h.attrs.size);
		n = h.attrs.size / h.attr_size;
		sec = read_owned(f, h.attrs.offset, h.attrs.size, error);
		if (!sec)
			return FALSE;
		f->attrs = g_new0(VtPerfAttr, n);
		for (i = 0; i < n; i++) {
			const uint8_t *p = sec + i * h.attr_size;
			VtPerfAttr *a = &f->attrs[i];
			uint64_t ioff, isz;

			if (!parse_attr(f, p, h.attr_size, i, a, error))
				return FALSE;
			f->n_attrs = i + 1;
			if ((uint64_t)a->on_disk_size + 16 != h.attr_size)
				return fail(error, VT_PERF_ERROR_FORMAT, f->path,
					    "attr %u size %u does not match header attr_size %" PRIu64,
					    i, a->on_disk_size, h.attr_size);
			ioff = rd64(p + a->on_disk_size);
			isz = rd64(p + a->on_disk_size + 8);
			if (isz % 8)
				return fail(error, VT_PERF_ERROR_FORMAT, f->path,
					    "attr %u ids section size %" PRIu64 " is not a multiple of 8",
					    i, isz);
			if (!range_ok(ioff, isz, f->size))
				return fail(error, VT_PERF_ERROR_TRUNCATED, f->path,
					    "attr %u ids section (offset %" PRIu64 ", size %" PRIu64
					    ") extends past end of file", i, ioff, isz);
			a->nr_ids = isz / 8;
			a->ids = NULL;
			if (a->nr_ids && !(a->ids = (const uint64_t *)(const void *)read_owned(f, ioff, isz, error)))
				return FALSE;
		}
	}

	/* Feature table right after the data section. */
	for (i = 0; i < G_N_ELEMENTS(h.features); i++) {
		f->feat_bits[i] = h.features[i];
		nfeat += __builtin_popcountll(h.features[i]);
	}
	end = h.data.offset + h.data.size;
	if (!range_ok(end, (uint64_t)nfeat * 16, f->size))
		return fail(error, VT_PERF_ERROR_TRUNCATED, f->path,
			    "feature table (%u entries at offset %" PRIu64
			    ") extends past end of file (%" PRIu64 " bytes)", nfeat, end, f->size);
	if (!read_exact(f, table, (size_t)nfeat * 16, end, error))
		return FALSE;
	for (bit = 0, k = 0; bit < VT_PERF_FEAT_BITS; bit++) {
		VtPerfFileSection *s = &f->feat[bit];
		const char *name;

		if (!vt_perf_file_has_feature(f, bit))
			continue;
		s->offset = rd64(table + k);
		s->size = rd64(table + k + 8);
		k += 16;
		if (!range_ok(s->offset, s->size, f->size)) {
			name = vt_perf_feature_name(bit);
			return fail(error, VT_PERF_ERROR_TRUNCATED, f->path,
				    "feature %u (%s) section (offset %" PRIu64 ", size %" PRIu64
				    ") extends past end of file (%" PRIu64 " bytes)", bit,
				    name ? name : "unknown", s->offset, s->size, f->size);
		}
	}
	return TRUE;
}

/* Pipe-mode file: attrs (and features) come from records in the data. */
static gboolean open_pipe(VtPerfFile *f, GError **error)
{
	GArray *attrs = g_array_new(FALSE, TRUE, sizeof(VtPerfAttr));
	VtPerfIter *it;
	uint64_t pos, end, next;
	VtPerfRecord rec;
	gboolean ok = TRUE;

	f->pipe = TRUE;
	f->data_off = PIPE_HDR_SIZE;
	f->data_size = f->size - PIPE_HDR_SIZE;
	if (!f->data_size) {
		g_array_free(attrs, TRUE);
		return fail(error, VT_PERF_ERROR_FORMAT, f->path, "pipe-mode file has no data");
	}
	end = f->size;
	it = g_new(VtPerfIter, 1);
	vt_perf_iter_init(it, f);
	/* A malformed record ends the scan; the iterator reports it later. */
	for (pos = f->data_off; read_record(it, pos, end, &rec, &next, NULL) > 0; pos = next) {
		if (rec.type == VT_PERF_RECORD_HEADER_ATTR) {
			VtPerfAttr a;
			uint64_t avail = rec.size - 8;

			if (!parse_attr(f, rec.data + 8, avail, attrs->len, &a, error)) {
				ok = FALSE;
				break;
			}
			a.nr_ids = (avail - a.on_disk_size) / 8;
			a.ids = own_ids(f, rec.data + 8 + a.on_disk_size, a.nr_ids);
			g_array_append_val(attrs, a);
		} else if (rec.type == VT_PERF_RECORD_HEADER_FEATURE && rec.size >= 16) {
			uint64_t bit = rd64(rec.data + 8);

			if (bit < VT_PERF_FEAT_BITS) {
				f->feat_bits[bit / 64] |= 1ULL << (bit % 64);
				f->feat[bit].offset = pos + 16;
				f->feat[bit].size = rec.size - 16;
			}
		}
	}
	g_free(it);
	f->n_attrs = attrs->len;
	f->attrs = (VtPerfAttr *)(void *)g_array_free(attrs, FALSE);
	return ok;
}

char *vt_perf_data_path(const char *path)
{
	struct stat st;

	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		return g_build_filename(path, "data", NULL);
	return g_strdup(path);
}

VtPerfFile *vt_perf_file_open(const char *path, VtPerfOpenFlags flags, GError **error)
{
	VtPerfFile *f = g_new0(VtPerfFile, 1);
	gboolean rdwr = !!(flags & VT_PERF_OPEN_RDWR);
	struct stat st;
	uint8_t hdr[PIPE_HDR_SIZE] = { 0 };
	uint64_t magic;
	GError *e = NULL;

	f->fd = -1;
	f->owned = g_ptr_array_new_with_free_func(g_free);
	g_mutex_init(&f->lock);
	f->path = vt_perf_data_path(path);
	f->rdwr = rdwr;
	f->fd = vt_fs_open_regular(f->path, rdwr ? O_RDWR : O_RDONLY, &e);   /* never blocks on a FIFO */
	if (f->fd < 0) {
		g_set_error_literal(error, VT_PERF_ERROR, VT_PERF_ERROR_IO, e->message);
		g_error_free(e);
		goto err;
	}
	if (fstat(f->fd, &st) < 0) {
		fail(error, VT_PERF_ERROR_IO, f->path, "cannot stat: %s", g_strerror(errno));
		goto err;
	}
	if (!S_ISREG(st.st_mode)) {
		fail(error, VT_PERF_ERROR_IO, f->path, "not a regular file");
		goto err;
	}
	f->size = (uint64_t)st.st_size;
	if (f->size < 8 || f->size > SIZE_MAX) {
		fail(error, VT_PERF_ERROR_TRUNCATED, f->path,
		     "file too short (%" PRIu64 " bytes)", f->size);
		goto err;
	}
	if (!read_exact(f, hdr, sizeof(hdr), 0, error))
		goto err;
	magic = rd64(hdr);
	if (magic == GUINT64_SWAP_LE_BE(PERF_MAGIC2)) {
		fail(error, VT_PERF_ERROR_UNSUPPORTED, f->path,
		     "byte-swapped (foreign-endian) perf.data files are not supported");
		goto err;
	}
	if (magic != PERF_MAGIC2) {
		fail(error, VT_PERF_ERROR_MAGIC, f->path, "not a perf.data file (bad magic)");
		goto err;
	}
	if (f->size >= PIPE_HDR_SIZE && rd64(hdr + 8) == PIPE_HDR_SIZE) {
		if (!open_pipe(f, error))
			goto err;
	} else if (!open_file_header(f, error)) {
		goto err;
	}
	build_id_map(f);
	return f;
err:
	vt_perf_file_close(f);
	return NULL;
}

void vt_perf_file_close(VtPerfFile *f)
{
	if (!f)
		return;
	if (f->map)
		munmap(f->map, f->size);
	if (f->fd >= 0)
		close(f->fd);
	g_ptr_array_free(f->owned, TRUE);
	g_mutex_clear(&f->lock);
	g_free(f->attrs);
	g_free(f->ids);
	g_free(f->path);
	g_free(f);
}

/* -------------------------------------------------------- accessors */

const char *vt_perf_file_path(const VtPerfFile *f) { return f->path; }
uint64_t vt_perf_file_size(const VtPerfFile *f) { return f->size; }
gboolean vt_perf_file_stat(const VtPerfFile *f, struct stat *st) { return fstat(f->fd, st) == 0; }
gboolean vt_perf_file_is_pipe(const VtPerfFile *f) { return f->pipe; }
uint64_t vt_perf_file_data_offset(const VtPerfFile *f) { return f->data_off; }
uint64_t vt_perf_file_data_size(const VtPerfFile *f) { return f->data_size; }
guint vt_perf_file_n_attrs(const VtPerfFile *f) { return f->n_attrs; }

const VtPerfAttr *vt_perf_file_attr(const VtPerfFile *f, guint i)
{
	return i < f->n_attrs ? &f->attrs[i] : NULL;
}

const VtPerfAttr *vt_perf_file_attr_by_id(const VtPerfFile *f, uint64_t id)
{
	guint lo = 0, hi = f->n_ids;

	while (lo < hi) {		/* first entry with .id >= id */
		guint mid = lo + (hi - lo) / 2;

		if (f->ids[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < f->n_ids && f->ids[lo].id == id)
		return &f->attrs[f->ids[lo].idx];
	return NULL;
}

gboolean vt_perf_file_has_feature(const VtPerfFile *f, guint bit)
{
	return bit < VT_PERF_FEAT_BITS && ((f->feat_bits[bit / 64] >> (bit % 64)) & 1);
}

gboolean vt_perf_file_feature(const VtPerfFile *f, guint bit, const uint8_t **data, uint64_t *size)
{
	VtPerfFile *mf = (VtPerfFile *)f;	/* the lazily loaded copy */
	const uint8_t *p;

	if (!vt_perf_file_has_feature(f, bit))
		return FALSE;
	g_mutex_lock(&mf->lock);
	if (!mf->feat_data[bit])	/* range validated at open */
		mf->feat_data[bit] = read_owned(mf, f->feat[bit].offset, f->feat[bit].size, NULL);
	p = mf->feat_data[bit];
	g_mutex_unlock(&mf->lock);
	if (!p)
		return FALSE;		/* the file shrank: as if absent */
	*data = p;
	*size = f->feat[bit].size;
	return TRUE;
}

gboolean vt_perf_build_id_next(const uint8_t *p, uint64_t n, uint64_t *off, VtPerfBuildId *e)
{
	guint16 size;

	if (*off + 40 > n)
		return FALSE;
	memcpy(&e->misc, p + *off + 4, 2);
	memcpy(&size, p + *off + 6, 2);
	if (size < 40 || size > n - *off)
		return FALSE;
	memcpy(&e->pid, p + *off + 8, 4);
	e->id = p + *off + 12;
	e->len = (e->misc & (1u << 15)) && p[*off + 32] <= 20 ? p[*off + 32] : 20;   /* MISC_BUILD_ID_SIZE */
	e->name = memchr(p + *off + 36, 0, size - 36) ? (const char *)p + *off + 36 : NULL;
	*off += size;
	return TRUE;
}

char *vt_perf_file_feature_string(const VtPerfFile *f, guint bit)
{
	const uint8_t *p;
	uint64_t sz;
	uint32_t len;

	if (!vt_perf_file_feature(f, bit, &p, &sz) || sz < 4)
		return NULL;
	len = rd32(p);
	if (len > sz - 4 || !memchr(p + 4, 0, len))
		return NULL;
	return g_strdup((const char *)p + 4);
}

VtPerfFileSection *vt_perf_file_auxtrace_index(const VtPerfFile *f, guint *n,
							  GError **error)
{
	VtPerfFileSection *out;
	uint64_t sz, nr, i, dend = f->data_off + f->data_size;
	const uint8_t *p;

	*n = 0;
	if (!vt_perf_file_feature(f, VT_PERF_FEAT_AUXTRACE, &p, &sz))
		return NULL;
	if (sz < 8) {
		fail(error, VT_PERF_ERROR_FORMAT, f->path, "auxtrace index is too short");
		return NULL;
	}
	nr = rd64(p);
	if (nr > (sz - 8) / 16 || nr > G_MAXUINT) {
		fail(error, VT_PERF_ERROR_TRUNCATED, f->path,
		     "auxtrace index claims %" PRIu64 " entries but has room for %" PRIu64,
		     nr, (sz - 8) / 16);
		return NULL;
	}
	if (!nr)
		return NULL;
	out = g_new(VtPerfFileSection, nr);
	for (i = 0; i < nr; i++) {
		uint8_t hdr[16];

		out[i].offset = rd64(p + 8 + i * 16);
		out[i].size = rd64(p + 16 + i * 16);
		if (out[i].offset < f->data_off || !range_ok(out[i].offset, out[i].size, dend)) {
			fail(error, VT_PERF_ERROR_FORMAT, f->path,
			     "auxtrace index entry %" PRIu64 " (offset %" PRIu64 ", size %" PRIu64
			     ") is outside the data section", i, out[i].offset, out[i].size);
			goto err;
		}
		/* pread: keeps the pages out of this process on huge files */
		if (out[i].size < 48 ||
		    pread(f->fd, hdr, sizeof(hdr), (off_t)out[i].offset) != (ssize_t)sizeof(hdr) ||
		    rd32(hdr) != VT_PERF_RECORD_AUXTRACE || rd16(hdr + 6) != out[i].size ||
		    !range_ok(out[i].offset + out[i].size, rd64(hdr + 8), dend)) {
			fail(error, VT_PERF_ERROR_FORMAT, f->path,
			     "auxtrace index entry %" PRIu64 " (offset %" PRIu64
			     ") is not a valid AUXTRACE record", i, out[i].offset);
			goto err;
		}
	}
	*n = (guint)nr;
	return out;
err:
	g_free(out);
	return NULL;
}

/* ------------------------------------------------------------ mapping */

gboolean vt_perf_file_read(const VtPerfFile *f, uint64_t off, void *buf, size_t len, GError **error)
{
	if (!range_ok(off, len, f->size))
		return fail(error, VT_PERF_ERROR_TRUNCATED, f->path,
			    "%zu bytes at offset %" PRIu64 " lie past the end of the file (%" PRIu64 " bytes)",
			    len, off, f->size);
	return read_exact(f, buf, len, off, error);
}

gboolean vt_perf_file_check_size(const VtPerfFile *f, GError **error)
{
	struct stat st;

	if (fstat(f->fd, &st) < 0)
		return fail(error, VT_PERF_ERROR_IO, f->path, "cannot stat: %s", g_strerror(errno));
	if ((uint64_t)st.st_size != f->size)
		return fail(error, VT_PERF_ERROR_CHANGED, f->path,
			    "changed size while being read (%" PRIu64 " bytes, now %" PRIu64 ")",
			    f->size, (uint64_t)st.st_size);
	return TRUE;
}

/* Map the file on first use (callers that want a mapping); NULL if that
 * fails. */
static uint8_t *file_mapping(const VtPerfFile *f)
{
	VtPerfFile *mf = (VtPerfFile *)f;
	uint8_t *m;

	g_mutex_lock(&mf->lock);
	if (!mf->map_tried) {
		void *p = mmap(NULL, f->size, f->rdwr ? PROT_READ | PROT_WRITE : PROT_READ,
			       f->rdwr ? MAP_SHARED : MAP_PRIVATE, f->fd, 0);

		mf->map_tried = TRUE;
		mf->map = p == MAP_FAILED ? NULL : p;
	}
	m = mf->map;
	g_mutex_unlock(&mf->lock);
	return m;
}

const uint8_t *vt_perf_file_map(const VtPerfFile *f, uint64_t off, uint64_t len)
{
	uint8_t *m;

	if (!range_ok(off, len, f->size) || !(m = file_mapping(f)))
		return NULL;
	return m + off;
}

uint8_t *vt_perf_file_map_rw(VtPerfFile *f, uint64_t off, uint64_t len)
{
	uint8_t *m;

	if (!f->rdwr || !range_ok(off, len, f->size) || !(m = file_mapping(f)))
		return NULL;
	return m + off;
}

void vt_perf_file_release(const VtPerfFile *f, uint64_t off, uint64_t len)
{
	uint64_t pg = page_size(), start, end;

	if (!f->map || off >= f->size)
		return;
	if (len > f->size - off)
		len = f->size - off;
	start = (off + pg - 1) & ~(pg - 1);
	end = (off + len) & ~(pg - 1);
	if (end > start)
		madvise(f->map + start, end - start, MADV_DONTNEED);
}

void vt_perf_file_prefetch(const VtPerfFile *f, uint64_t off, uint64_t len)
{
	uint64_t pg = page_size(), start;

	if (!f->map || off >= f->size || !len)
		return;
	if (len > f->size - off)
		len = f->size - off;
	start = off & ~(pg - 1);
	madvise(f->map + start, off + len - start, MADV_WILLNEED);
}

/* ------------------------------------------------------------ windows */

gboolean vt_perf_window_map(const VtPerfFile *f, VtPerfWindow *w, uint64_t off, uint64_t len, uint64_t span,
			    GError **error)
{
	uint64_t pg = page_size(), start = off & ~(pg - 1), n;
	void *p;

	vt_perf_window_unmap(w);
	if (!range_ok(off, len, f->size) || !len)
		return fail(error, VT_PERF_ERROR_TRUNCATED, f->path,
			    "%" PRIu64 " bytes at offset %" PRIu64 " lie past the end of the file (%" PRIu64 " bytes)",
			    len, off, f->size);
	n = MIN(MAX(span, off + len - start), f->size - start);
	if (n > G_MAXSIZE)
		return fail(error, VT_PERF_ERROR_IO, f->path, "cannot map %" PRIu64 " bytes", n);
	p = mmap(NULL, (size_t)n, PROT_READ, MAP_SHARED, f->fd, (off_t)start);
	if (p == MAP_FAILED)
		return fail(error, VT_PERF_ERROR_IO, f->path, "cannot map %" PRIu64 " bytes at offset %" PRIu64 ": %s",
			    n, start, g_strerror(errno));
	w->base = p;
	w->off = start;
	w->len = (size_t)n;
	return TRUE;
}

void vt_perf_window_unmap(VtPerfWindow *w)
{
	if (w->base)
		munmap(w->base, w->len);
	w->base = NULL;
	w->off = 0;
	w->len = 0;
}

/* The innermost vt_perf_file_guarded of this thread, if any. */
static _Thread_local sigjmp_buf *guard_jump;
static struct sigaction guard_prev;

static void guard_sigbus(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)si;
	(void)uc;
	if (guard_jump)
		siglongjmp(*guard_jump, 1);
	/* not a guarded read: the old disposition takes it when the
	 * faulting instruction runs again */
	sigaction(SIGBUS, &guard_prev, NULL);
}

static gpointer guard_install(gpointer unused)
{
	struct sigaction sa;

	(void)unused;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = guard_sigbus;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, &guard_prev);
	return NULL;
}

gboolean vt_perf_file_guarded(const VtPerfFile *f, void (*fn)(void *data), void *data, GError **error)
{
	static GOnce once = G_ONCE_INIT;
	sigjmp_buf here;
	sigjmp_buf *const outer = guard_jump;

	g_once(&once, guard_install, NULL);
	if (sigsetjmp(here, 1)) {
		guard_jump = outer;
		if (!vt_perf_file_check_size(f, error))
			return FALSE;
		return fail(error, VT_PERF_ERROR_CHANGED, f->path, "changed while being read (bus error)");
	}
	guard_jump = &here;
	fn(data);
	guard_jump = outer;
	return TRUE;
}

gboolean vt_perf_file_sync(VtPerfFile *f, GError **error)
{
	if (f->rdwr && f->map && msync(f->map, f->size, MS_SYNC) < 0)
		return fail(error, VT_PERF_ERROR_IO, f->path, "msync failed: %s", g_strerror(errno));
	return TRUE;
}

/* ---------------------------------------------------------- records */

gboolean vt_perf_record_sample_id(const VtPerfFile *f, const VtPerfRecord *rec, VtPerfSampleId *sid)
{
	const VtPerfAttr *a;
	const uint8_t *p;
	uint64_t t;

	memset(sid, 0, sizeof(*sid));
	if (!f->n_attrs || rec->type == PERF_RECORD_SAMPLE || rec->type >= VT_PERF_RECORD_HEADER_ATTR)
		return FALSE;
	a = &f->attrs[0];
	if (f->n_attrs > 1 && a->attr.sample_id_all &&
	    (a->attr.sample_type & PERF_SAMPLE_IDENTIFIER) && rec->size >= 16) {
		const VtPerfAttr *b = vt_perf_file_attr_by_id(f, rd64(rec->data + rec->size - 8));

		if (b)
			a = b;
	}
	if (!a->attr.sample_id_all || rec->size < 8 + (uint32_t)a->id_hdr_size)
		return FALSE;
	t = a->attr.sample_type;
	p = rec->data + rec->size - a->id_hdr_size;
	if (t & PERF_SAMPLE_TID) {
		sid->pid = rd32(p);
		sid->tid = rd32(p + 4);
		sid->has_tid = 1;
		p += 8;
	}
	if (t & PERF_SAMPLE_TIME) {
		sid->time = rd64(p);
		sid->has_time = 1;
		p += 8;
	}
	if (t & PERF_SAMPLE_ID) {
		sid->id = rd64(p);
		sid->has_id = 1;
		p += 8;
	}
	if (t & PERF_SAMPLE_STREAM_ID) {
		sid->stream_id = rd64(p);
		sid->has_stream_id = 1;
		p += 8;
	}
	if (t & PERF_SAMPLE_CPU) {
		sid->cpu = rd32(p);
		sid->has_cpu = 1;
		p += 8;
	}
	if (t & PERF_SAMPLE_IDENTIFIER) {
		sid->identifier = rd64(p);
		sid->has_identifier = 1;
	}
	return TRUE;
}

static gboolean check_rec(const VtPerfRecord *rec, uint32_t type, uint32_t alt, uint32_t min,
			  GError **error)
{
	if (rec->type != type && rec->type != alt) {
		g_set_error(error, VT_PERF_ERROR, VT_PERF_ERROR_FORMAT,
			    "record at offset %" PRIu64 " is %s (type %u), not %s",
			    rec->file_offset, vt_perf_record_name(rec->type), rec->type,
			    vt_perf_record_name(type));
		return FALSE;
	}
	if (rec->size < min) {
		g_set_error(error, VT_PERF_ERROR, VT_PERF_ERROR_FORMAT,
			    "%s record at offset %" PRIu64 " is too short (%u < %u bytes)",
			    vt_perf_record_name(rec->type), rec->file_offset, rec->size, min);
		return FALSE;
	}
	return TRUE;
}

/* NUL-terminated string at rec->data + off, within the record. */
static const char *rec_string(const VtPerfRecord *rec, uint32_t off, GError **error)
{
	const char *s = (const char *)rec->data + off;

	if (off >= rec->size || !memchr(s, 0, rec->size - off)) {
		g_set_error(error, VT_PERF_ERROR, VT_PERF_ERROR_FORMAT,
			    "%s record at offset %" PRIu64 " has an unterminated string",
			    vt_perf_record_name(rec->type), rec->file_offset);
		return NULL;
	}
	return s;
}

gboolean vt_perf_record_auxtrace(const VtPerfRecord *rec, VtPerfAuxtrace *out, GError **error)
{
	const uint8_t *p = rec->data;

	if (!check_rec(rec, VT_PERF_RECORD_AUXTRACE, VT_PERF_RECORD_AUXTRACE, 48, error))
		return FALSE;
	out->size = rd64(p + 8);
	out->offset = rd64(p + 16);
	out->reference = rd64(p + 24);
	out->idx = rd32(p + 32);
	out->tid = rd32(p + 36);
	out->cpu = rd32(p + 40);
	out->reserved = rd32(p + 44);
	out->payload_file_offset = rec->file_offset + rec->size;
	return TRUE;
}

gboolean vt_perf_record_aux(const VtPerfRecord *rec, VtPerfAux *out, GError **error)
{
	const uint8_t *p = rec->data;

	if (!check_rec(rec, PERF_RECORD_AUX, PERF_RECORD_AUX, 32, error))
		return FALSE;
	out->aux_offset = rd64(p + 8);
	out->aux_size = rd64(p + 16);
	out->flags = rd64(p + 24);
	return TRUE;
}

gboolean vt_perf_record_auxtrace_info(const VtPerfRecord *rec, VtPerfAuxtraceInfo *out,
				      GError **error)
{
	if (!check_rec(rec, VT_PERF_RECORD_AUXTRACE_INFO, VT_PERF_RECORD_AUXTRACE_INFO, 16, error))
		return FALSE;
	out->type = rd32(rec->data + 8);
	out->reserved = rd32(rec->data + 12);
	out->nr_priv = (rec->size - 16) / 8;
	out->priv = out->nr_priv ? (const uint64_t *)(const void *)(rec->data + 16) : NULL;
	return TRUE;
}

gboolean vt_perf_record_time_conv(const VtPerfRecord *rec, VtPerfTimeConv *out, GError **error)
{
	const uint8_t *p = rec->data;

	if (!check_rec(rec, VT_PERF_RECORD_TIME_CONV, VT_PERF_RECORD_TIME_CONV, 8 + 24, error))
		return FALSE;
	memset(out, 0, sizeof(*out));
	out->time_shift = rd64(p + 8);
	out->time_mult = rd64(p + 16);
	out->time_zero = rd64(p + 24);
	/* the extended record is 56 bytes in all (header included) */
	if (rec->size >= 56) {
		out->has_ext = TRUE;
		out->time_cycles = rd64(p + 32);
		out->time_mask = rd64(p + 40);
		out->cap_user_time_zero = p[48];
		out->cap_user_time_short = p[49];
	} else {
		/* perf only emits TIME_CONV when cap_user_time_zero is set */
		out->cap_user_time_zero = 1;
	}
	return TRUE;
}

gboolean vt_perf_record_comm(const VtPerfRecord *rec, VtPerfComm *out, GError **error)
{
	if (!check_rec(rec, PERF_RECORD_COMM, PERF_RECORD_COMM, 17, error))
		return FALSE;
	out->pid = rd32(rec->data + 8);
	out->tid = rd32(rec->data + 12);
	out->exec = !!(rec->misc & PERF_RECORD_MISC_COMM_EXEC);
	out->comm = rec_string(rec, 16, error);
	return out->comm != NULL;
}

gboolean vt_perf_record_itrace_start(const VtPerfRecord *rec, VtPerfItraceStart *out,
				     GError **error)
{
	if (!check_rec(rec, PERF_RECORD_ITRACE_START, PERF_RECORD_ITRACE_START, 16, error))
		return FALSE;
	out->pid = rd32(rec->data + 8);
	out->tid = rd32(rec->data + 12);
	return TRUE;
}

gboolean vt_perf_record_mmap2(const VtPerfRecord *rec, VtPerfMmap2 *out, GError **error)
{
	const uint8_t *p = rec->data;

	/* pid,tid,addr,len,pgoff, 24 bytes maj/min/ino/gen or build id, prot,flags */
	if (!check_rec(rec, PERF_RECORD_MMAP2, PERF_RECORD_MMAP2, 73, error))
		return FALSE;
	out->pid = rd32(p + 8);
	out->tid = rd32(p + 12);
	out->addr = rd64(p + 16);
	out->len = rd64(p + 24);
	out->pgoff = rd64(p + 32);
	out->prot = rd32(p + 64);
	out->flags = rd32(p + 68);
	out->filename = rec_string(rec, 72, error);
	return out->filename != NULL;
}

gboolean vt_perf_record_switch(const VtPerfRecord *rec, VtPerfSwitch *out, GError **error)
{
	gboolean wide = rec->type == PERF_RECORD_SWITCH_CPU_WIDE;

	if (!check_rec(rec, PERF_RECORD_SWITCH, PERF_RECORD_SWITCH_CPU_WIDE, wide ? 16 : 8, error))
		return FALSE;
	memset(out, 0, sizeof(*out));
	out->out = !!(rec->misc & PERF_RECORD_MISC_SWITCH_OUT);
	out->preempt = !!(rec->misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT);
	out->cpu_wide = wide;
	if (wide) {
		out->next_prev_pid = rd32(rec->data + 8);
		out->next_prev_tid = rd32(rec->data + 12);
	}
	return TRUE;
}

VtPerfIdIndexEntry *vt_perf_record_id_index(const VtPerfRecord *rec, guint *n, GError **error)
{
	VtPerfIdIndexEntry *e;
	uint64_t nr, i, room;
	const uint8_t *p;

	*n = 0;
	if (!check_rec(rec, VT_PERF_RECORD_ID_INDEX, VT_PERF_RECORD_ID_INDEX, 16, error))
		return NULL;
	nr = rd64(rec->data + 8);
	room = rec->size - 16;
	if (nr > room / 32) {
		g_set_error(error, VT_PERF_ERROR, VT_PERF_ERROR_FORMAT,
			    "ID_INDEX record at offset %" PRIu64 " claims %" PRIu64
			    " entries but has room for %" PRIu64, rec->file_offset, nr, room / 32);
		return NULL;
	}
	e = g_new0(VtPerfIdIndexEntry, nr ? nr : 1);
	p = rec->data + 16;
	for (i = 0; i < nr; i++, p += 32) {
		e[i].id = rd64(p);
		e[i].idx = rd64(p + 8);
		e[i].cpu = rd64(p + 16);
		e[i].tid = rd64(p + 24);
	}
	if (nr && room - nr * 32 >= nr * 16) {
		for (i = 0; i < nr; i++, p += 16) {
			e[i].has_vm = TRUE;
			e[i].machine_pid = rd64(p);
			e[i].vcpu = rd64(p + 8);
		}
	}
	*n = (guint)nr;
	return e;
}

/* ------------------------------------------------------------- time */

uint64_t vt_perf_tsc_to_time(uint64_t cyc, const VtPerfTimeConv *tc)
{
	uint64_t shift = tc->time_shift, quot, rem;

	if (tc->cap_user_time_short)
		cyc = tc->time_cycles + ((cyc - tc->time_cycles) & tc->time_mask);
	if (shift >= 64)
		return tc->time_zero;
	quot = cyc >> shift;
	rem = cyc & ((1ULL << shift) - 1);
	return tc->time_zero + quot * tc->time_mult + ((rem * tc->time_mult) >> shift);
}

uint64_t vt_perf_time_to_tsc(uint64_t ns, const VtPerfTimeConv *tc)
{
	uint64_t t = ns - tc->time_zero, quot, rem;

	if (!tc->time_mult || tc->time_shift >= 64)
		return 0;
	quot = t / tc->time_mult;
	rem = t % tc->time_mult;
	return (quot << tc->time_shift) + (rem << tc->time_shift) / tc->time_mult;
}
