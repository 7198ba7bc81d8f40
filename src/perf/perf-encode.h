/* perf-encode.h - building perf.data records and feature sections in
 * memory, the one copy used by every writer (perf-writer.c, the recorder,
 * the synthetic generator).
 *
 * Everything appends to a GByteArray in perf's on-disk layout (host byte
 * order, as perf writes it).  These functions cannot fail, never print and
 * never exit.
 */
#ifndef VT_PERF_ENCODE_H
#define VT_PERF_ENCODE_H

#include <glib.h>
#include <stdint.h>
#include <linux/perf_event.h>

#include "src/perf/perf-data.h"

G_BEGIN_DECLS

/* Raw values. */
void vt_perf_put(GByteArray *b, const void *p, gsize len);
void vt_perf_put_u32(GByteArray *b, uint32_t v);
void vt_perf_put_u64(GByteArray *b, uint64_t v);

/* A NUL-terminated string cut at max_len bytes, padded with NULs to a
 * multiple of 8: the comm and filename fields of records. */
void vt_perf_put_cstr(GByteArray *b, const char *s, gsize max_len);
/* perf's string in feature sections: u32 length (strlen + 1 rounded up to
 * 64), then the string padded with NULs to that length.  Returns the bytes
 * appended. */
gsize vt_perf_put_string(GByteArray *b, const char *s);

/* Records: begin appends an empty header and returns where it is; end
 * fills it in (type, misc, size = bytes appended since begin). */
gsize vt_perf_rec_begin(GByteArray *b);
void vt_perf_rec_end(GByteArray *b, gsize start, uint32_t type, uint16_t misc);

/* The sample_id trailer of sample_type IP|TID|TIME|CPU|IDENTIFIER
 * (sample_id_all): pid, tid, time, cpu, reserved, identifier. */
void vt_perf_put_sample_id(GByteArray *b, uint32_t pid, uint32_t tid, uint64_t time, uint32_t cpu,
			   uint64_t id);

/* Whole records. */
/* PERF_RECORD_TIME_CONV, the extended layout (time_cycles, time_mask, caps). */
void vt_perf_put_time_conv(GByteArray *b, const VtPerfTimeConv *tc);
/* PERF_RECORD_AUXTRACE_INFO of Intel PT with nr_priv priv[] words. */
void vt_perf_put_auxtrace_info(GByteArray *b, const uint64_t *priv, guint nr_priv);

/* Feature sections (payloads for vt_perf_writer_set_feature). */
/* One event of HEADER_EVENT_DESC. */
typedef struct {
	const struct perf_event_attr *attr;   /* written as sizeof(struct perf_event_attr) bytes */
	const char *name;
	const uint64_t *ids;
	uint32_t nr_ids;
} VtPerfEventDesc;
/* HEADER_EVENT_DESC: u32 nr, u32 attr size; per event: attr, u32 nr_ids,
 * name (perf string), u64 ids[]. */
void vt_perf_put_event_desc(GByteArray *b, const VtPerfEventDesc *ev, guint n);
/* HEADER_PMU_MAPPINGS: u32 nr; per PMU: u32 type, name (perf string). */
void vt_perf_put_pmu_mappings(GByteArray *b, const uint32_t *types, const char *const *names, guint n);
/* HEADER_CMDLINE: u32 nr, then one perf string per argument. */
void vt_perf_put_cmdline(GByteArray *b, const char *const *argv);

G_END_DECLS

#endif
