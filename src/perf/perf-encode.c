/* perf-encode.c - perf records and feature sections in memory (see
 * perf-encode.h). */
#include "src/perf/perf-encode.h"

#include <string.h>

void vt_perf_put(GByteArray *b, const void *p, gsize len)
{
	g_byte_array_append(b, p, (guint)len);
}

void vt_perf_put_u32(GByteArray *b, uint32_t v)
{
	vt_perf_put(b, &v, 4);
}

void vt_perf_put_u64(GByteArray *b, uint64_t v)
{
	vt_perf_put(b, &v, 8);
}

/* n zero bytes */
static void put_zeros(GByteArray *b, gsize n)
{
	static const uint8_t zero[64];

	while (n) {
		gsize k = MIN(n, sizeof(zero));

		vt_perf_put(b, zero, k);
		n -= k;
	}
}

void vt_perf_put_cstr(GByteArray *b, const char *s, gsize max_len)
{
	gsize len = strnlen(s, max_len);

	vt_perf_put(b, s, len);
	put_zeros(b, ((len + 1 + 7) & ~(gsize)7) - len);
}

gsize vt_perf_put_string(GByteArray *b, const char *s)
{
	gsize n = strlen(s);
	uint32_t len = (uint32_t)((n + 1 + 63) & ~(gsize)63);

	vt_perf_put_u32(b, len);
	vt_perf_put(b, s, n);
	put_zeros(b, len - n);
	return 4 + (gsize)len;
}

gsize vt_perf_rec_begin(GByteArray *b)
{
	struct perf_event_header h = { 0 };
	gsize start = b->len;

	vt_perf_put(b, &h, sizeof(h));
	return start;
}

void vt_perf_rec_end(GByteArray *b, gsize start, uint32_t type, uint16_t misc)
{
	struct perf_event_header h = { .type = type, .misc = misc, .size = (uint16_t)(b->len - start) };

	memcpy(b->data + start, &h, sizeof(h));
}

void vt_perf_put_sample_id(GByteArray *b, uint32_t pid, uint32_t tid, uint64_t time, uint32_t cpu,
			   uint64_t id)
{
	vt_perf_put_u32(b, pid);
	vt_perf_put_u32(b, tid);
	vt_perf_put_u64(b, time);
	vt_perf_put_u32(b, cpu);
	vt_perf_put_u32(b, 0);
	vt_perf_put_u64(b, id);
}

void vt_perf_put_time_conv(GByteArray *b, const VtPerfTimeConv *tc)
{
	gsize s = vt_perf_rec_begin(b);
	uint8_t caps[8] = { tc->cap_user_time_zero, tc->cap_user_time_short };

	vt_perf_put_u64(b, tc->time_shift);
	vt_perf_put_u64(b, tc->time_mult);
	vt_perf_put_u64(b, tc->time_zero);
	vt_perf_put_u64(b, tc->time_cycles);
	vt_perf_put_u64(b, tc->time_mask);
	vt_perf_put(b, caps, sizeof(caps));
	vt_perf_rec_end(b, s, VT_PERF_RECORD_TIME_CONV, 0);
}

void vt_perf_put_auxtrace_info(GByteArray *b, const uint64_t *priv, guint nr_priv)
{
	gsize s = vt_perf_rec_begin(b);

	vt_perf_put_u32(b, VT_PERF_AUXTRACE_INTEL_PT);
	vt_perf_put_u32(b, 0);
	vt_perf_put(b, priv, nr_priv * sizeof(uint64_t));
	vt_perf_rec_end(b, s, VT_PERF_RECORD_AUXTRACE_INFO, 0);
}

void vt_perf_put_event_desc(GByteArray *b, const VtPerfEventDesc *ev, guint n)
{
	vt_perf_put_u32(b, n);
	vt_perf_put_u32(b, sizeof(struct perf_event_attr));
	for (guint i = 0; i < n; i++) {
		vt_perf_put(b, ev[i].attr, sizeof(struct perf_event_attr));
		vt_perf_put_u32(b, ev[i].nr_ids);
		vt_perf_put_string(b, ev[i].name);
		vt_perf_put(b, ev[i].ids, ev[i].nr_ids * sizeof(uint64_t));
	}
}

void vt_perf_put_pmu_mappings(GByteArray *b, const uint32_t *types, const char *const *names, guint n)
{
	vt_perf_put_u32(b, n);
	for (guint i = 0; i < n; i++) {
		vt_perf_put_u32(b, types[i]);
		vt_perf_put_string(b, names[i]);
	}
}

void vt_perf_put_cmdline(GByteArray *b, const char *const *argv)
{
	guint n = g_strv_length((char **)argv);

	vt_perf_put_u32(b, n);
	for (guint i = 0; i < n; i++)
		vt_perf_put_string(b, argv[i]);
}
