/* fuzz-perf-data.c - libFuzzer target for the perf.data reader.
 *
 * The input is written to a memfd and opened by path (/proc/self/fd/N);
 * every record is run through the typed parsers, sample_id parsing and
 * the feature accessors.
 */
#include "src/perf/perf-data.h"

#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void parse_record(const VtPerfFile *f, const VtPerfRecord *rec)
{
	union {
		VtPerfAuxtrace aux;
		VtPerfAuxtraceInfo info;
		VtPerfTimeConv tc;
		VtPerfComm comm;
		VtPerfItraceStart is;
		VtPerfMmap2 mmap2;
		VtPerfSwitch sw;
	} u;
	VtPerfSampleId sid;
	VtPerfIdIndexEntry *e;
	volatile uint64_t sink = 0;
	GError *err = NULL;
	guint n, i;

	/* every parser on every record: wrong types must fail cleanly */
	if (vt_perf_record_auxtrace(rec, &u.aux, &err) &&
	    vt_perf_file_map(f, u.aux.payload_file_offset, u.aux.size))
		sink += vt_perf_file_map(f, u.aux.payload_file_offset, u.aux.size)[0];
	g_clear_error(&err);
	if (vt_perf_record_auxtrace_info(rec, &u.info, &err))
		for (i = 0; i < u.info.nr_priv; i++)
			sink += u.info.priv[i];
	g_clear_error(&err);
	if (vt_perf_record_time_conv(rec, &u.tc, &err)) {
		sink += vt_perf_tsc_to_time(rec->file_offset, &u.tc);
		sink += vt_perf_time_to_tsc(rec->file_offset, &u.tc);
	}
	g_clear_error(&err);
	if (vt_perf_record_comm(rec, &u.comm, &err))
		sink += strlen(u.comm.comm);
	g_clear_error(&err);
	if (vt_perf_record_itrace_start(rec, &u.is, &err))
		sink += u.is.pid;
	g_clear_error(&err);
	if (vt_perf_record_mmap2(rec, &u.mmap2, &err))
		sink += strlen(u.mmap2.filename);
	g_clear_error(&err);
	if (vt_perf_record_switch(rec, &u.sw, &err))
		sink += u.sw.next_prev_pid;
	g_clear_error(&err);
	e = vt_perf_record_id_index(rec, &n, &err);
	for (i = 0; e && i < n; i++)
		sink += e[i].id + e[i].vcpu;
	g_free(e);
	g_clear_error(&err);
	if (vt_perf_record_sample_id(f, rec, &sid))
		sink += sid.time + sid.identifier;
	sink += strlen(vt_perf_record_name(rec->type)) + rec->misc;
	(void)sink;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char path[64];
	GError *err = NULL;
	VtPerfFile *f;
	VtPerfIter it;
	VtPerfRecord rec;
	VtPerfFileSection *idx;
	guint i, n;
	int fd;

	fd = memfd_create("fuzz-perf-data", MFD_CLOEXEC);
	if (fd < 0)
		return 0;
	if (size && write(fd, data, size) != (ssize_t)size) {
		close(fd);
		return 0;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	f = vt_perf_file_open(path, VT_PERF_OPEN_RDONLY, &err);
	if (!f) {
		g_assert(err && g_str_has_prefix(err->message, path));
		g_error_free(err);
		close(fd);
		return 0;
	}

	for (i = 0; i < vt_perf_file_n_attrs(f); i++) {
		const VtPerfAttr *a = vt_perf_file_attr(f, i);

		if (a->nr_ids)
			g_assert(vt_perf_file_attr_by_id(f, a->ids[a->nr_ids - 1]));
	}
	for (i = 0; i < VT_PERF_FEAT_BITS; i++) {
		const uint8_t *p;
		uint64_t sz;
		char *s;

		if (vt_perf_file_feature(f, i, &p, &sz) && sz)
			(void)*(volatile const uint8_t *)(p + sz - 1);
		s = vt_perf_file_feature_string(f, i);
		g_free(s);
		(void)vt_perf_feature_name(i);
	}
	idx = vt_perf_file_auxtrace_index(f, &n, &err);
	g_free(idx);
	g_clear_error(&err);

	vt_perf_iter_init(&it, f);
	while (vt_perf_iter_next(&it, &rec, &err) > 0)
		parse_record(f, &rec);
	g_clear_error(&err);
	vt_perf_file_close(f);
	close(fd);
	return 0;
}
