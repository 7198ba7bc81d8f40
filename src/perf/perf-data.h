/* perf-data.h - perf.data format layer (PERFILE2 files and perf.data directories).
 *
 * This layer never prints and never exits: every failure is returned as a
 * GError in VT_PERF_ERROR naming the file and what is wrong.
 *
 * Reading maps the whole file once (read-only, or read-write with
 * VT_PERF_OPEN_RDWR so later stages can patch AUX payloads in place).  Large
 * traces stay cheap in memory because callers release the ranges they are
 * done with (vt_perf_file_release), which drops those pages from the
 * process again.  Every length and offset read from the file is
 * bounds-checked against the file size before use.
 */
#ifndef VT_PERF_DATA_H
#define VT_PERF_DATA_H

#include <glib.h>
#include <sys/stat.h>
#include <stdint.h>
#include <linux/perf_event.h>

G_BEGIN_DECLS

#define VT_PERF_ERROR (vt_perf_error_quark())
GQuark vt_perf_error_quark(void);

typedef enum {
	VT_PERF_ERROR_IO,        /* open/read/write/mmap failed (errno text in message) */
	VT_PERF_ERROR_MAGIC,     /* not a PERFILE2 file */
	VT_PERF_ERROR_FORMAT,    /* malformed header, attr, section or record */
	VT_PERF_ERROR_TRUNCATED, /* something extends past end of file */
	VT_PERF_ERROR_UNSUPPORTED, /* valid but not handled (e.g. byte-swapped) */
	VT_PERF_ERROR_CHANGED,   /* the file shrank (or changed size) while being read */
} VtPerfErrorCode;

/* Record types beyond the kernel's enum perf_event_type (user records). */
enum {
	VT_PERF_RECORD_HEADER_ATTR = 64,
	VT_PERF_RECORD_HEADER_EVENT_TYPE = 65,
	VT_PERF_RECORD_HEADER_TRACING_DATA = 66,
	VT_PERF_RECORD_HEADER_BUILD_ID = 67,
	VT_PERF_RECORD_FINISHED_ROUND = 68,
	VT_PERF_RECORD_ID_INDEX = 69,
	VT_PERF_RECORD_AUXTRACE_INFO = 70,
	VT_PERF_RECORD_AUXTRACE = 71,
	VT_PERF_RECORD_AUXTRACE_ERROR = 72,
	VT_PERF_RECORD_THREAD_MAP = 73,
	VT_PERF_RECORD_CPU_MAP = 74,
	VT_PERF_RECORD_STAT_CONFIG = 75,
	VT_PERF_RECORD_STAT = 76,
	VT_PERF_RECORD_STAT_ROUND = 77,
	VT_PERF_RECORD_EVENT_UPDATE = 78,
	VT_PERF_RECORD_TIME_CONV = 79,
	VT_PERF_RECORD_HEADER_FEATURE = 80,
	VT_PERF_RECORD_COMPRESSED = 81,
	VT_PERF_RECORD_FINISHED_INIT = 82,
};

/* Feature bits (perf's enum HEADER_*). */
enum {
	VT_PERF_FEAT_TRACING_DATA = 1,
	VT_PERF_FEAT_BUILD_ID = 2,
	VT_PERF_FEAT_HOSTNAME = 3,
	VT_PERF_FEAT_OSRELEASE = 4,
	VT_PERF_FEAT_VERSION = 5,
	VT_PERF_FEAT_ARCH = 6,
	VT_PERF_FEAT_NRCPUS = 7,
	VT_PERF_FEAT_CPUDESC = 8,
	VT_PERF_FEAT_CPUID = 9,
	VT_PERF_FEAT_TOTAL_MEM = 10,
	VT_PERF_FEAT_CMDLINE = 11,
	VT_PERF_FEAT_EVENT_DESC = 12,
	VT_PERF_FEAT_CPU_TOPOLOGY = 13,
	VT_PERF_FEAT_NUMA_TOPOLOGY = 14,
	VT_PERF_FEAT_BRANCH_STACK = 15,
	VT_PERF_FEAT_PMU_MAPPINGS = 16,
	VT_PERF_FEAT_GROUP_DESC = 17,
	VT_PERF_FEAT_AUXTRACE = 18,
	VT_PERF_FEAT_STAT = 19,
	VT_PERF_FEAT_CACHE = 20,
	VT_PERF_FEAT_SAMPLE_TIME = 21,
	VT_PERF_FEAT_MEM_TOPOLOGY = 22,
	VT_PERF_FEAT_CLOCKID = 23,
	VT_PERF_FEAT_DIR_FORMAT = 24,
	VT_PERF_FEAT_BPF_PROG_INFO = 25,
	VT_PERF_FEAT_BPF_BTF = 26,
	VT_PERF_FEAT_COMPRESSED = 27,
	VT_PERF_FEAT_CPU_PMU_CAPS = 28,
	VT_PERF_FEAT_CLOCK_DATA = 29,
	VT_PERF_FEAT_HYBRID_TOPOLOGY = 30,
	VT_PERF_FEAT_PMU_CAPS = 31,
	VT_PERF_FEAT_LAST = 32,
	VT_PERF_FEAT_BITS = 256,
};

/* Intel PT AUXTRACE_INFO priv[] indices (perf's tools/perf/util/intel-pt.h). */
enum {
	VT_PT_INFO_PMU_TYPE = 0,
	VT_PT_INFO_TIME_SHIFT = 1,
	VT_PT_INFO_TIME_MULT = 2,
	VT_PT_INFO_TIME_ZERO = 3,
	VT_PT_INFO_CAP_USER_TIME_ZERO = 4,
	VT_PT_INFO_TSC_BIT = 5,
	VT_PT_INFO_NORETCOMP_BIT = 6,
	VT_PT_INFO_HAVE_SCHED_SWITCH = 7,
	VT_PT_INFO_SNAPSHOT_MODE = 8,
	VT_PT_INFO_PER_CPU_MMAPS = 9,
	VT_PT_INFO_MTC_BIT = 10,
	VT_PT_INFO_MTC_FREQ_BITS = 11,
	VT_PT_INFO_TSC_CTC_N = 12,
	VT_PT_INFO_TSC_CTC_D = 13,
	VT_PT_INFO_CYC_BIT = 14,
	VT_PT_INFO_MAX_NONTURBO_RATIO = 15,
	VT_PT_INFO_FILTER_STR_LEN = 16,
	VT_PT_INFO_NR_FIXED = 17,   /* words before the filter string */
};

#define VT_PERF_AUXTRACE_INTEL_PT 1

/* perf's struct perf_file_header (104 bytes on disk). */
typedef struct VtPerfFileSection VtPerfFileSection;
struct VtPerfFileSection {
	uint64_t offset;
	uint64_t size;
};

/* One attr of the file with its sample ids. */
typedef struct {
	struct perf_event_attr attr;   /* zero-extended to sizeof(struct perf_event_attr) */
	uint32_t on_disk_size;         /* attr.size as found in the file */
	const uint64_t *ids;           /* owned by the file */
	uint64_t nr_ids;
	/* Derived from attr.sample_type, for sample_id parsing. */
	int id_hdr_size;               /* bytes of the sample_id trailer on non-sample records */
} VtPerfAttr;

/* sample_id fields present in a record (see vt_perf_record_sample_id). */
typedef struct {
	uint32_t pid, tid;
	uint64_t time;
	uint64_t id;
	uint64_t stream_id;
	uint32_t cpu;
	uint64_t identifier;
	unsigned has_tid : 1, has_time : 1, has_id : 1, has_stream_id : 1,
		 has_cpu : 1, has_identifier : 1;
} VtPerfSampleId;

/* One record as seen by the iterator.  `data` points at the header in the
 * iterator's window - not necessarily 8-byte aligned: a pipe-mode stream
 * carries records of any size, so read its fields with memcpy (rd16/32/64),
 * never through a struct pointer; `file_offset` is the record's offset in
 * the file.  For PERF_RECORD_AUXTRACE the AUX payload follows the 48-byte
 * record at file_offset + header.size, aux_size bytes long, and the
 * iterator steps over it. */
typedef struct {
	uint64_t file_offset;
	const uint8_t *data;           /* the header, then the record's fields */
	uint32_t type;                 /* header.type */
	uint32_t size;                 /* header.size */
	uint16_t misc;                 /* header.misc */
} VtPerfRecord;

/* Decoded fixed-layout records. */
typedef struct {
	uint64_t size;         /* payload bytes */
	uint64_t offset;       /* AUX area offset */
	uint64_t reference;
	uint32_t idx, tid, cpu, reserved;
	uint64_t payload_file_offset;  /* where the payload bytes are in the file */
} VtPerfAuxtrace;

typedef struct {
	uint32_t type;                 /* 1 = Intel PT */
	uint32_t reserved;
	const uint64_t *priv;          /* into the record (valid as its data) */
	uint32_t nr_priv;
} VtPerfAuxtraceInfo;

typedef struct {
	uint64_t time_shift, time_mult, time_zero, time_cycles, time_mask;
	uint8_t cap_user_time_zero, cap_user_time_short;
	gboolean has_ext;              /* time_cycles.. present (newer layout) */
} VtPerfTimeConv;

typedef struct {
	uint32_t pid, tid;
	const char *comm;              /* NUL-terminated within the record (checked) */
	gboolean exec;                 /* misc & PERF_RECORD_MISC_COMM_EXEC */
} VtPerfComm;

typedef struct {
	uint32_t pid, tid;
} VtPerfItraceStart;

/* PERF_RECORD_AUX: a piece of AUX data the kernel handed out, and whether
 * data was lost (flags: PERF_AUX_FLAG_*). */
enum {
	VT_PERF_AUX_FLAG_TRUNCATED = 0x01,   /* the AUX buffer was full: data lost */
	VT_PERF_AUX_FLAG_PARTIAL = 0x04,
	VT_PERF_AUX_FLAG_COLLISION = 0x08,
};
typedef struct {
	uint64_t aux_offset, aux_size, flags;
} VtPerfAux;

typedef struct {
	uint32_t pid, tid;
	uint64_t addr, len, pgoff;
	uint32_t prot, flags;
	const char *filename;
} VtPerfMmap2;

typedef struct {
	gboolean out;                  /* PERF_RECORD_MISC_SWITCH_OUT */
	gboolean preempt;              /* PERF_RECORD_MISC_SWITCH_OUT_PREEMPT */
	gboolean cpu_wide;             /* SWITCH_CPU_WIDE: next_prev valid */
	uint32_t next_prev_pid, next_prev_tid;
} VtPerfSwitch;

typedef struct {
	uint64_t id, idx, cpu, tid;
	gboolean has_vm;
	uint64_t machine_pid, vcpu;
} VtPerfIdIndexEntry;

typedef struct VtPerfFile VtPerfFile;

typedef enum {
	VT_PERF_OPEN_RDONLY = 0,
	VT_PERF_OPEN_RDWR = 1 << 0,    /* open read-write; vt_perf_file_map_rw maps MAP_SHARED */
} VtPerfOpenFlags;

/* Open a perf.data file, or a perf.data directory (then DIR/data is used).
 * Validates the header, the attr section and the ids sections, locates the
 * data section and the feature sections.  Pipe-mode files (16-byte header)
 * stored in a regular file are accepted; their attrs come from
 * HEADER_ATTR records. */
VtPerfFile *vt_perf_file_open(const char *path, VtPerfOpenFlags flags, GError **error);
/* The file vt_perf_file_open() reads for path: DIR/data for a directory,
 * else path itself (newly allocated). */
char *vt_perf_data_path(const char *path);
void vt_perf_file_close(VtPerfFile *f);

const char *vt_perf_file_path(const VtPerfFile *f);     /* the file actually opened */
uint64_t vt_perf_file_size(const VtPerfFile *f);
/* fstat of the open file (identity, size and mtime now); FALSE on error. */
gboolean vt_perf_file_stat(const VtPerfFile *f, struct stat *st);
gboolean vt_perf_file_is_pipe(const VtPerfFile *f);
uint64_t vt_perf_file_data_offset(const VtPerfFile *f);
uint64_t vt_perf_file_data_size(const VtPerfFile *f);

guint vt_perf_file_n_attrs(const VtPerfFile *f);
const VtPerfAttr *vt_perf_file_attr(const VtPerfFile *f, guint i);
/* Attr that owns sample id `id`, or NULL. */
const VtPerfAttr *vt_perf_file_attr_by_id(const VtPerfFile *f, uint64_t id);

gboolean vt_perf_file_has_feature(const VtPerfFile *f, guint bit);
/* Raw payload of a feature section (bounds-checked); FALSE if absent. */
gboolean vt_perf_file_feature(const VtPerfFile *f, guint bit, const uint8_t **data, uint64_t *size);
const char *vt_perf_feature_name(guint bit);  /* "auxtrace", "osrelease", ... or NULL */
/* String features (hostname, osrelease, version, arch, cpudesc, cpuid):
 * newly allocated string, or NULL if absent/malformed. */
char *vt_perf_file_feature_string(const VtPerfFile *f, guint bit);
/* One entry of the HEADER_BUILD_ID feature (perf's
 * perf_record_header_build_id): cpumode in misc's low 3 bits, the pid of
 * its machine (-1: the host kernel), its build id (len bytes: the size
 * byte with MISC_BUILD_ID_SIZE, else 20), its file name (NULL: not
 * terminated inside the entry). */
typedef struct {
	guint16 misc;
	gint32 pid;
	const uint8_t *id;
	guint8 len;
	const char *name;
} VtPerfBuildId;
/* The entry at *off of the feature's n bytes p, *off moved past it; FALSE
 * at the end or at a malformed entry (the walk stops there). */
gboolean vt_perf_build_id_next(const uint8_t *p, uint64_t n, uint64_t *off, VtPerfBuildId *e);
/* n bytes as lowercase hex (build ids), newly allocated (inline: the
 * decoder's fuzz target links no reader). */
static inline char *vt_perf_hex(const uint8_t *b, gsize n)
{
	static const char digits[] = "0123456789abcdef";
	char *s = g_malloc(2 * n + 1);

	for (gsize i = 0; i < n; i++) {
		s[2 * i] = digits[b[i] >> 4];
		s[2 * i + 1] = digits[b[i] & 15];
	}
	s[2 * n] = 0;
	return s;
}
/* HEADER_AUXTRACE index: array of {file_offset, size} of AUXTRACE records,
 * or NULL with *n = 0 if absent.  Entries are validated against the data
 * section.  Newly allocated. */
VtPerfFileSection *vt_perf_file_auxtrace_index(const VtPerfFile *f, guint *n, GError **error);

/* Read len bytes at off with pread (SIGBUS-safe: a file that shrank since
 * it was opened gives VT_PERF_ERROR_CHANGED, "changed size while being
 * read").  The way to read AUX payloads of a file that may change. */
gboolean vt_perf_file_read(const VtPerfFile *f, uint64_t off, void *buf, size_t len, GError **error);
/* VT_PERF_ERROR_CHANGED unless the file still has the size it had at open. */
gboolean vt_perf_file_check_size(const VtPerfFile *f, GError **error);

/* Direct access to a mapping of the file, created on first use (nothing
 * else maps it).  Returns NULL if [off, off+len) is outside the file or
 * the mapping fails.  With VT_PERF_OPEN_RDWR the bytes are writable
 * (vt_perf_file_map_rw) and writes go to the file.  Touching it after the
 * file shrank raises SIGBUS: prefer vt_perf_file_read. */
const uint8_t *vt_perf_file_map(const VtPerfFile *f, uint64_t off, uint64_t len);
uint8_t *vt_perf_file_map_rw(VtPerfFile *f, uint64_t off, uint64_t len);
/* Drop the pages of [off, off+len) from this process (madvise DONTNEED on
 * the page-aligned interior); they are faulted back in if touched again.
 * Keeps resident memory flat while streaming through GBs. */
void vt_perf_file_release(const VtPerfFile *f, uint64_t off, uint64_t len);
/* Hint that [off, off+len) will be read soon (madvise WILLNEED). */
void vt_perf_file_prefetch(const VtPerfFile *f, uint64_t off, uint64_t len);
/* Windows: read-only mappings of parts of the file, for streaming through
 * a large file without copying it (pread copies every byte from the page
 * cache; mapped pages are only looked at).  Reading a window's pages after
 * the file shrank raises SIGBUS: read them only inside
 * vt_perf_file_guarded. */
typedef struct {
	uint8_t *base;           /* NULL: nothing mapped */
	uint64_t off;            /* file offset of base (page-aligned) */
	size_t len;
} VtPerfWindow;
/* Map at least [off, off + len) (page-rounded, up to `span` bytes from
 * the page holding off, never past the end of the file), replacing what
 * w mapped.  FALSE with an error if it is outside the file or mmap fails. */
gboolean vt_perf_window_map(const VtPerfFile *f, VtPerfWindow *w, uint64_t off, uint64_t len, uint64_t span,
			    GError **error);
void vt_perf_window_unmap(VtPerfWindow *w);
/* The bytes [off, off + len) of the file if w holds them, else NULL. */
static inline const uint8_t *vt_perf_window_at(const VtPerfWindow *w, uint64_t off, uint64_t len)
{
	if (!w->base || off < w->off || off - w->off > w->len || len > w->len - (off - w->off))
		return NULL;
	return w->base + (off - w->off);
}
/* Call fn(data) so that a SIGBUS from reading a window or mapping of f
 * (the file shrank meanwhile) ends fn and returns FALSE with
 * VT_PERF_ERROR_CHANGED ("changed size while being read") instead of
 * killing the process.  fn must not hold locks or half-built data that
 * a jump out of it would leave behind while it reads mapped bytes.
 * Nests; per thread.  A SIGBUS outside of it keeps its old disposition. */
gboolean vt_perf_file_guarded(const VtPerfFile *f, void (*fn)(void *data), void *data, GError **error);

/* msync the RDWR mapping. */
gboolean vt_perf_file_sync(VtPerfFile *f, GError **error);

/* Record iteration over the data section, in file order.  Records are
 * read (pread) into a window inside the iterator, AUX payloads skipped;
 * a record's `data` stays valid until the next vt_perf_iter_next on the
 * same iterator.  No clean-up needed (but see vt_perf_iter_init_mapped). */
#define VT_PERF_ITER_WIN (128u << 10)   /* > the largest record (64 KiB) */
typedef struct {
	const VtPerfFile *f;
	uint64_t pos;          /* file offset of next record */
	uint64_t end;          /* end of data section */
	uint64_t win_off;      /* file offset of win[0] */
	uint32_t win_len, read_len;
	gboolean mapped;       /* records read from `map` (vt_perf_iter_init_mapped) */
	VtPerfWindow map;
	uint8_t win[VT_PERF_ITER_WIN];
} VtPerfIter;

void vt_perf_iter_init(VtPerfIter *it, const VtPerfFile *f);
/* vt_perf_iter_init, but records are looked at in 8 MiB windows of the
 * file mapped in turn (2 MiB-aligned), not read with one pread each: when
 * records are sparse between AUX payloads (a per-CPU trace with 16 KiB
 * buffers: one pread per 16 KiB, ~3 ms of system time per 64 MiB) a few
 * faults per window replace them.  vt_perf_iter_next must then run under
 * vt_perf_file_guarded, and vt_perf_iter_clear unmaps the window.  If a
 * window cannot be mapped, records are read with pread. */
void vt_perf_iter_init_mapped(VtPerfIter *it, const VtPerfFile *f);
void vt_perf_iter_clear(VtPerfIter *it);
/* 1: *rec filled; 0: end of data; -1: error (record malformed, size < 8,
 * past end of data, AUXTRACE payload past EOF, ...).  Errors name the
 * file and the offset. */
int vt_perf_iter_next(VtPerfIter *it, VtPerfRecord *rec, GError **error);

/* sample_id trailer of a non-sample record (sample_id_all), using the attr
 * that owns it (found via PERF_SAMPLE_IDENTIFIER when present, else the
 * first attr).  FALSE if the file has no sample_id_all or the record is
 * too short. */
gboolean vt_perf_record_sample_id(const VtPerfFile *f, const VtPerfRecord *rec, VtPerfSampleId *sid);

/* Typed parsers: FALSE + error if the record is too short / malformed /
 * of another type. */
gboolean vt_perf_record_auxtrace(const VtPerfRecord *rec, VtPerfAuxtrace *out, GError **error);
gboolean vt_perf_record_auxtrace_info(const VtPerfRecord *rec, VtPerfAuxtraceInfo *out, GError **error);
gboolean vt_perf_record_time_conv(const VtPerfRecord *rec, VtPerfTimeConv *out, GError **error);
gboolean vt_perf_record_comm(const VtPerfRecord *rec, VtPerfComm *out, GError **error);
gboolean vt_perf_record_itrace_start(const VtPerfRecord *rec, VtPerfItraceStart *out, GError **error);
gboolean vt_perf_record_aux(const VtPerfRecord *rec, VtPerfAux *out, GError **error);
gboolean vt_perf_record_mmap2(const VtPerfRecord *rec, VtPerfMmap2 *out, GError **error);
gboolean vt_perf_record_switch(const VtPerfRecord *rec, VtPerfSwitch *out, GError **error);
/* ID_INDEX: newly allocated entries. */
VtPerfIdIndexEntry *vt_perf_record_id_index(const VtPerfRecord *rec, guint *n, GError **error);

/* Time conversion (perf's tsc_to_perf_time / perf_time_to_tsc). */
uint64_t vt_perf_tsc_to_time(uint64_t tsc, const VtPerfTimeConv *tc);
uint64_t vt_perf_time_to_tsc(uint64_t ns, const VtPerfTimeConv *tc);

const char *vt_perf_record_name(uint32_t type);   /* "AUXTRACE", "COMM", ... */

/* ---------------------------------------------------------------- writer */

typedef struct VtPerfWriter VtPerfWriter;

/* Create PATH (a file), or PATH/data when `as_dir` (perf.data directory
 * layout of `perf record --kcore`; the directory is created; no
 * HEADER_DIR_FORMAT, see perf-writer.c; finish removes stale data.N
 * files).  Data is written to a temporary file
 * in the same directory and renamed over PATH by vt_perf_writer_finish, so
 * an interrupted run never leaves a half-written file under the final name. */
VtPerfWriter *vt_perf_writer_new(const char *path, gboolean as_dir, GError **error);

/* Attrs must be added before the first record.  attr->size is respected
 * (<= sizeof(struct perf_event_attr), which is 128 for perf 6.1). */
gboolean vt_perf_writer_add_attr(VtPerfWriter *w, const struct perf_event_attr *attr,
				 const uint64_t *ids, guint nr_ids, GError **error);

/* Append a complete record (header included, size == hdr->size, 8-byte
 * multiple). */
gboolean vt_perf_writer_write_record(VtPerfWriter *w, const void *rec, GError **error);

/* Append records laid end to end in recs[0..len) (each as above; a
 * record with a size below 8 or past len is refused). */
gboolean vt_perf_writer_write_records(VtPerfWriter *w, const void *recs, gsize len, GError **error);

/* Append a PERF_RECORD_AUXTRACE record followed by `len` payload bytes
 * (len padded with zeros to a multiple of 8; aux->size is set to the
 * padded length).  The record is added to the HEADER_AUXTRACE index.
 * Returns the file offset of the payload via *payload_off if non-NULL. */
gboolean vt_perf_writer_write_auxtrace(VtPerfWriter *w, const VtPerfAuxtrace *aux,
				       const void *payload, uint64_t len,
				       uint64_t *payload_off, GError **error);
/* The same with the payload in two pieces (AUX data that wraps a ring). */
gboolean vt_perf_writer_write_auxtrace2(VtPerfWriter *w, const VtPerfAuxtrace *aux,
					const void *a, uint64_t alen, const void *b, uint64_t blen,
					uint64_t *payload_off, GError **error);

/* Feature sections (written after the data section by _finish). */
gboolean vt_perf_writer_set_feature(VtPerfWriter *w, guint bit, const void *data, uint64_t size,
				    GError **error);
/* perf's string format: u32 len (strlen+1 rounded up to 64) + padded string. */
gboolean vt_perf_writer_set_feature_string(VtPerfWriter *w, guint bit, const char *s, GError **error);

/* Write the feature sections (incl. HEADER_AUXTRACE when any AUXTRACE
 * record was written), the attrs and the header; fsync; rename into
 * place.  Frees nothing: call vt_perf_writer_free after. */
gboolean vt_perf_writer_finish(VtPerfWriter *w, GError **error);
/* Frees the writer; if not finished, removes the temporary file. */
void vt_perf_writer_free(VtPerfWriter *w);

/* Overwrite `len` bytes already written at file offset `off` (a record
 * whose values are only known later, e.g. a refined TIME_CONV). */
gboolean vt_perf_writer_patch(VtPerfWriter *w, uint64_t off, const void *data, uint64_t len, GError **error);

/* Offset the next record will be written at (for callers that need it). */
uint64_t vt_perf_writer_tell(const VtPerfWriter *w);

G_END_DECLS

#endif
