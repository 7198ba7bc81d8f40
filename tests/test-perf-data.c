/* test-perf-data.c - round-trip and robustness tests for src/perf. */
#include "src/perf/perf-data.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <glib/gstdio.h>

static char *tmpdir;

/* ------------------------------------------------------------ helpers */

typedef struct {
	guint8 b[1024];
	gsize n;
} Rec;

static void put(Rec *r, const void *p, gsize n)
{
	g_assert_cmpuint(r->n + n, <=, sizeof(r->b));
	memcpy(r->b + r->n, p, n);
	r->n += n;
}

static void put16(Rec *r, guint16 v) { put(r, &v, 2); }
static void put32(Rec *r, guint32 v) { put(r, &v, 4); }
static void put64(Rec *r, guint64 v) { put(r, &v, 8); }

static void pad8(Rec *r)
{
	while (r->n % 8)
		r->b[r->n++] = 0;
}

static void rec_begin(Rec *r, guint32 type, guint16 misc)
{
	memset(r, 0, sizeof(*r));
	put32(r, type);
	put16(r, misc);
	put16(r, 0);
}

static void put_str(Rec *r, const char *s)
{
	put(r, s, strlen(s) + 1);
	pad8(r);
}

/* sample_id trailer for sample_type TID|TIME|CPU|IDENTIFIER */
static void put_sid(Rec *r, guint32 pid, guint32 tid, guint64 time, guint32 cpu, guint64 id)
{
	put32(r, pid);
	put32(r, tid);
	put64(r, time);
	put32(r, cpu);
	put32(r, 0);
	put64(r, id);
}

static const void *rec_end(Rec *r)
{
	guint16 size = (guint16)r->n;

	memcpy(r->b + 6, &size, 2);
	return r->b;
}

static char *tmp_path(const char *name)
{
	return g_build_filename(tmpdir, name, NULL);
}

static void assert_error_path(GError *err, const char *path, int code)
{
	g_assert_nonnull(err);
	g_assert_true(err->domain == VT_PERF_ERROR);
	if (code >= 0)
		g_assert_cmpint(err->code, ==, code);
	if (!g_str_has_prefix(err->message, path))
		g_error("message '%s' does not start with '%s'", err->message, path);
}

static void rm_rf(const char *path)
{
	GDir *d = g_dir_open(path, 0, NULL);
	const char *name;

	if (d) {
		while ((name = g_dir_read_name(d))) {
			char *p = g_build_filename(path, name, NULL);

			rm_rf(p);
			g_free(p);
		}
		g_dir_close(d);
		g_rmdir(path);
	} else {
		g_unlink(path);
	}
}

/* ------------------------------------------------------ sample file */

#define PT_TYPE		8
#define SAMPLE_TYPE	(PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | \
			 PERF_SAMPLE_CPU | PERF_SAMPLE_IDENTIFIER)
#define AUX1_LEN	100
#define AUX2_LEN	4096

static const guint64 ids0[] = { 100, 101 }, ids1[] = { 200, 201 };
static const guint64 pt_priv[18] = {
	PT_TYPE, 31, 715827882, 1000000000000ULL, 1, 0x400, 0x800, 0, 0, 1,
	0x200, 0x3c000, 2, 1, 2, 0x1c, 0, 0,
};

typedef struct {
	guint64 aux_rec_off[2], aux_payload_off[2], data_off;
} SampleInfo;

static void fill_attrs(struct perf_event_attr *pt, struct perf_event_attr *dummy)
{
	memset(pt, 0, sizeof(*pt));
	pt->type = PT_TYPE;
	pt->size = 128;
	pt->config = 0x300e601;
	pt->sample_type = SAMPLE_TYPE;
	pt->sample_id_all = 1;
	pt->disabled = 1;
	memset(dummy, 0, sizeof(*dummy));
	dummy->type = PERF_TYPE_SOFTWARE;
	dummy->size = 128;
	dummy->config = PERF_COUNT_SW_DUMMY;
	dummy->sample_type = SAMPLE_TYPE;
	dummy->sample_id_all = 1;
	dummy->context_switch = 1;
}

static guint8 aux_byte(int which, guint64 i)
{
	return (guint8)(which * 31 + i * 7);
}

static void write_sample_file(const char *path, gboolean as_dir, SampleInfo *info)
{
	struct perf_event_attr pt, dummy;
	GError *err = NULL;
	VtPerfWriter *w;
	Rec r;
	int i;

	fill_attrs(&pt, &dummy);
	w = vt_perf_writer_new(path, as_dir, &err);
	g_assert_no_error(err);
	g_assert_true(vt_perf_writer_add_attr(w, &pt, ids0, 2, &err));
	g_assert_true(vt_perf_writer_add_attr(w, &dummy, ids1, 2, &err));
	g_assert_no_error(err);
	info->data_off = vt_perf_writer_tell(w);
	g_assert_cmpuint(info->data_off % 8, ==, 0);

	rec_begin(&r, VT_PERF_RECORD_TIME_CONV, 0);
	put64(&r, 31);
	put64(&r, 715827882);
	put64(&r, 1000000000000ULL);
	put64(&r, 1000);
	put64(&r, G_MAXUINT64);
	put(&r, "\1\0\0\0\0\0\0\0", 8);
	g_assert_true(vt_perf_writer_write_record(w, rec_end(&r), &err));

	rec_begin(&r, VT_PERF_RECORD_ID_INDEX, 0);
	put64(&r, 4);
	for (i = 0; i < 4; i++) {
		put64(&r, i < 2 ? ids0[i] : ids1[i - 2]);
		put64(&r, i % 2);
		put64(&r, i % 2);
		put64(&r, G_MAXUINT64);
	}
	g_assert_true(vt_perf_writer_write_record(w, rec_end(&r), &err));

	rec_begin(&r, VT_PERF_RECORD_AUXTRACE_INFO, 0);
	put32(&r, VT_PERF_AUXTRACE_INTEL_PT);
	put32(&r, 0);
	put(&r, pt_priv, sizeof(pt_priv));
	g_assert_true(vt_perf_writer_write_record(w, rec_end(&r), &err));

	rec_begin(&r, PERF_RECORD_COMM, PERF_RECORD_MISC_COMM_EXEC);
	put32(&r, 42);
	put32(&r, 43);
	put_str(&r, "hello-world");
	put_sid(&r, 42, 43, 5000, 1, 101);
	g_assert_true(vt_perf_writer_write_record(w, rec_end(&r), &err));

	rec_begin(&r, PERF_RECORD_ITRACE_START, 0);
	put32(&r, 42);
	put32(&r, 43);
	put_sid(&r, 42, 43, 5001, 0, 100);
	g_assert_true(vt_perf_writer_write_record(w, rec_end(&r), &err));

	rec_begin(&r, PERF_RECORD_MMAP2, PERF_RECORD_MISC_USER);
	put32(&r, 42);
	put32(&r, 43);
	put64(&r, 0x400000);
	put64(&r, 0x1000);
	put64(&r, 0x2000);
	put32(&r, 8);		/* maj */
	put32(&r, 1);		/* min */
	put64(&r, 1234);	/* ino */
	put64(&r, 5);		/* ino_generation */
	put32(&r, 5);		/* prot */
	put32(&r, 2);		/* flags */
	put_str(&r, "/usr/bin/true");
	put_sid(&r, 42, 43, 5002, 0, 200);
	g_assert_true(vt_perf_writer_write_record(w, rec_end(&r), &err));

	rec_begin(&r, PERF_RECORD_SWITCH_CPU_WIDE,
		  PERF_RECORD_MISC_SWITCH_OUT | PERF_RECORD_MISC_SWITCH_OUT_PREEMPT);
	put32(&r, 7);
	put32(&r, 8);
	put_sid(&r, 42, 43, 5003, 1, 201);
	g_assert_true(vt_perf_writer_write_record(w, rec_end(&r), &err));

	for (i = 0; i < 2; i++) {
		guint64 len = i ? AUX2_LEN : AUX1_LEN, j;
		guint8 *payload = g_malloc(len);
		VtPerfAuxtrace aux = { 0 };

		for (j = 0; j < len; j++)
			payload[j] = aux_byte(i, j);
		aux.offset = i * 0x1000;
		aux.reference = 0x123456789ULL + i;
		aux.idx = i;
		aux.tid = G_MAXUINT32;
		aux.cpu = i;
		info->aux_rec_off[i] = vt_perf_writer_tell(w);
		g_assert_true(vt_perf_writer_write_auxtrace(w, &aux, payload, len,
							    &info->aux_payload_off[i], &err));
		g_assert_no_error(err);
		g_assert_cmpuint(info->aux_payload_off[i], ==, info->aux_rec_off[i] + 48);
		g_free(payload);
	}

	rec_begin(&r, VT_PERF_RECORD_FINISHED_ROUND, 0);
	g_assert_true(vt_perf_writer_write_record(w, rec_end(&r), &err));
	rec_begin(&r, VT_PERF_RECORD_FINISHED_INIT, 0);
	g_assert_true(vt_perf_writer_write_record(w, rec_end(&r), &err));

	g_assert_true(vt_perf_writer_set_feature_string(w, VT_PERF_FEAT_OSRELEASE, "6.1.0-test", &err));
	{
		guint32 nr[2] = { 4, 4 };

		g_assert_true(vt_perf_writer_set_feature(w, VT_PERF_FEAT_NRCPUS, nr, sizeof(nr), &err));
	}
	g_assert_true(vt_perf_writer_set_feature_string(w, VT_PERF_FEAT_CPUID,
							"GenuineIntel,6,85,4", &err));
	g_assert_true(vt_perf_writer_finish(w, &err));
	g_assert_no_error(err);
	vt_perf_writer_free(w);
}

static void check_sid(const VtPerfFile *f, const VtPerfRecord *rec, guint32 pid, guint32 tid,
		      guint64 time, guint32 cpu, guint64 id)
{
	VtPerfSampleId sid;

	g_assert_true(vt_perf_record_sample_id(f, rec, &sid));
	g_assert_true(sid.has_tid && sid.has_time && sid.has_cpu && sid.has_identifier);
	g_assert_false(sid.has_id || sid.has_stream_id);
	g_assert_cmpuint(sid.pid, ==, pid);
	g_assert_cmpuint(sid.tid, ==, tid);
	g_assert_cmpuint(sid.time, ==, time);
	g_assert_cmpuint(sid.cpu, ==, cpu);
	g_assert_cmpuint(sid.identifier, ==, id);
}

static void check_sample_file(const char *open_path, const SampleInfo *info)
{
	static const guint32 types[] = {
		VT_PERF_RECORD_TIME_CONV, VT_PERF_RECORD_ID_INDEX, VT_PERF_RECORD_AUXTRACE_INFO,
		PERF_RECORD_COMM, PERF_RECORD_ITRACE_START, PERF_RECORD_MMAP2,
		PERF_RECORD_SWITCH_CPU_WIDE, VT_PERF_RECORD_AUXTRACE, VT_PERF_RECORD_AUXTRACE,
		VT_PERF_RECORD_FINISHED_ROUND, VT_PERF_RECORD_FINISHED_INIT,
	};
	GError *err = NULL;
	VtPerfFile *f;
	const VtPerfAttr *a;
	VtPerfIter it;
	VtPerfRecord rec;
	const guint8 *p;
	guint64 sz;
	guint n = 0, i, naux = 0;
	VtPerfFileSection *idx;
	char *s;
	int r;

	f = vt_perf_file_open(open_path, VT_PERF_OPEN_RDONLY, &err);
	g_assert_no_error(err);
	g_assert_nonnull(f);
	g_assert_false(vt_perf_file_is_pipe(f));
	g_assert_cmpuint(vt_perf_file_data_offset(f), ==, info->data_off);
	g_assert_cmpuint(vt_perf_file_data_offset(f) + vt_perf_file_data_size(f), <=,
			 vt_perf_file_size(f));

	g_assert_cmpuint(vt_perf_file_n_attrs(f), ==, 2);
	a = vt_perf_file_attr(f, 0);
	g_assert_cmpuint(a->attr.type, ==, PT_TYPE);
	g_assert_cmpuint(a->attr.size, ==, 128);
	g_assert_cmpuint(a->on_disk_size, ==, 128);
	g_assert_cmpuint(a->attr.config, ==, 0x300e601);
	g_assert_cmpuint(a->attr.sample_type, ==, SAMPLE_TYPE);
	g_assert_true(a->attr.sample_id_all && a->attr.disabled);
	g_assert_cmpint(a->id_hdr_size, ==, 32);
	g_assert_cmpuint(a->nr_ids, ==, 2);
	g_assert_cmpuint(a->ids[0], ==, 100);
	g_assert_cmpuint(a->ids[1], ==, 101);
	a = vt_perf_file_attr(f, 1);
	g_assert_cmpuint(a->attr.type, ==, PERF_TYPE_SOFTWARE);
	g_assert_cmpuint(a->attr.config, ==, PERF_COUNT_SW_DUMMY);
	g_assert_true(a->attr.context_switch);
	g_assert_cmpuint(a->nr_ids, ==, 2);
	g_assert_cmpuint(a->ids[1], ==, 201);
	g_assert_null(vt_perf_file_attr(f, 2));
	g_assert_true(vt_perf_file_attr_by_id(f, 100) == vt_perf_file_attr(f, 0));
	g_assert_true(vt_perf_file_attr_by_id(f, 101) == vt_perf_file_attr(f, 0));
	g_assert_true(vt_perf_file_attr_by_id(f, 200) == vt_perf_file_attr(f, 1));
	g_assert_true(vt_perf_file_attr_by_id(f, 201) == vt_perf_file_attr(f, 1));
	g_assert_null(vt_perf_file_attr_by_id(f, 150));
	g_assert_null(vt_perf_file_attr_by_id(f, 0));

	/* features */
	g_assert_true(vt_perf_file_has_feature(f, VT_PERF_FEAT_OSRELEASE));
	g_assert_true(vt_perf_file_has_feature(f, VT_PERF_FEAT_NRCPUS));
	g_assert_true(vt_perf_file_has_feature(f, VT_PERF_FEAT_CPUID));
	g_assert_true(vt_perf_file_has_feature(f, VT_PERF_FEAT_AUXTRACE));
	g_assert_false(vt_perf_file_has_feature(f, VT_PERF_FEAT_HOSTNAME));
	g_assert_false(vt_perf_file_has_feature(f, 1000));
	s = vt_perf_file_feature_string(f, VT_PERF_FEAT_OSRELEASE);
	g_assert_cmpstr(s, ==, "6.1.0-test");
	g_free(s);
	s = vt_perf_file_feature_string(f, VT_PERF_FEAT_CPUID);
	g_assert_cmpstr(s, ==, "GenuineIntel,6,85,4");
	g_free(s);
	g_assert_null(vt_perf_file_feature_string(f, VT_PERF_FEAT_HOSTNAME));
	g_assert_true(vt_perf_file_feature(f, VT_PERF_FEAT_OSRELEASE, &p, &sz));
	g_assert_cmpuint(sz, ==, 4 + 64);
	g_assert_true(vt_perf_file_feature(f, VT_PERF_FEAT_NRCPUS, &p, &sz));
	g_assert_cmpuint(sz, ==, 8);
	g_assert_cmpint(memcmp(p, "\4\0\0\0\4\0\0\0", 8), ==, 0);
	g_assert_false(vt_perf_file_feature(f, VT_PERF_FEAT_HOSTNAME, &p, &sz));

	/* auxtrace index */
	idx = vt_perf_file_auxtrace_index(f, &n, &err);
	g_assert_no_error(err);
	g_assert_cmpuint(n, ==, 2);
	for (i = 0; i < 2; i++) {
		g_assert_cmpuint(idx[i].offset, ==, info->aux_rec_off[i]);
		g_assert_cmpuint(idx[i].size, ==, 48);
	}
	g_free(idx);

	/* records */
	vt_perf_iter_init(&it, f);
	n = 0;
	while ((r = vt_perf_iter_next(&it, &rec, &err)) > 0) {
		guint16 size, misc;

		g_assert_cmpuint(n, <, G_N_ELEMENTS(types));
		g_assert_cmpuint(rec.type, ==, types[n]);
		memcpy(&misc, rec.data + 4, 2);
		memcpy(&size, rec.data + 6, 2);
		g_assert_cmpuint(rec.size, ==, size);
		g_assert_cmpuint(rec.misc, ==, misc);
		/* the iterator's copy holds the file's bytes */
		g_assert_cmpint(memcmp(rec.data, vt_perf_file_map(f, rec.file_offset, rec.size), rec.size), ==, 0);
		switch (rec.type) {
		case VT_PERF_RECORD_TIME_CONV: {
			VtPerfTimeConv tc;

			g_assert_true(vt_perf_record_time_conv(&rec, &tc, &err));
			g_assert_true(tc.has_ext);
			g_assert_cmpuint(tc.time_shift, ==, 31);
			g_assert_cmpuint(tc.time_mult, ==, 715827882);
			g_assert_cmpuint(tc.time_zero, ==, 1000000000000ULL);
			g_assert_cmpuint(tc.time_cycles, ==, 1000);
			g_assert_cmpuint(tc.time_mask, ==, G_MAXUINT64);
			g_assert_cmpuint(tc.cap_user_time_zero, ==, 1);
			g_assert_cmpuint(tc.cap_user_time_short, ==, 0);
			g_assert_false(vt_perf_record_sample_id(f, &rec, &(VtPerfSampleId){ 0 }));
			break;
		}
		case VT_PERF_RECORD_ID_INDEX: {
			VtPerfIdIndexEntry *e = vt_perf_record_id_index(&rec, &i, &err);

			g_assert_no_error(err);
			g_assert_cmpuint(i, ==, 4);
			g_assert_cmpuint(e[0].id, ==, 100);
			g_assert_cmpuint(e[3].id, ==, 201);
			g_assert_cmpuint(e[3].idx, ==, 1);
			g_assert_cmpuint(e[3].cpu, ==, 1);
			g_assert_cmpuint(e[3].tid, ==, G_MAXUINT64);
			g_assert_false(e[0].has_vm);
			g_free(e);
			break;
		}
		case VT_PERF_RECORD_AUXTRACE_INFO: {
			VtPerfAuxtraceInfo ai;

			g_assert_true(vt_perf_record_auxtrace_info(&rec, &ai, &err));
			g_assert_cmpuint(ai.type, ==, VT_PERF_AUXTRACE_INTEL_PT);
			g_assert_cmpuint(ai.nr_priv, ==, 18);
			g_assert_cmpint(memcmp(ai.priv, pt_priv, sizeof(pt_priv)), ==, 0);
			g_assert_cmpuint(ai.priv[VT_PT_INFO_MTC_FREQ_BITS], ==, 0x3c000);
			break;
		}
		case PERF_RECORD_COMM: {
			VtPerfComm c;

			g_assert_true(vt_perf_record_comm(&rec, &c, &err));
			g_assert_cmpuint(c.pid, ==, 42);
			g_assert_cmpuint(c.tid, ==, 43);
			g_assert_cmpstr(c.comm, ==, "hello-world");
			g_assert_true(c.exec);
			check_sid(f, &rec, 42, 43, 5000, 1, 101);
			break;
		}
		case PERF_RECORD_ITRACE_START: {
			VtPerfItraceStart is;

			g_assert_true(vt_perf_record_itrace_start(&rec, &is, &err));
			g_assert_cmpuint(is.pid, ==, 42);
			g_assert_cmpuint(is.tid, ==, 43);
			check_sid(f, &rec, 42, 43, 5001, 0, 100);
			break;
		}
		case PERF_RECORD_MMAP2: {
			VtPerfMmap2 m;

			g_assert_true(vt_perf_record_mmap2(&rec, &m, &err));
			g_assert_cmpuint(m.pid, ==, 42);
			g_assert_cmpuint(m.tid, ==, 43);
			g_assert_cmpuint(m.addr, ==, 0x400000);
			g_assert_cmpuint(m.len, ==, 0x1000);
			g_assert_cmpuint(m.pgoff, ==, 0x2000);
			g_assert_cmpuint(m.prot, ==, 5);
			g_assert_cmpuint(m.flags, ==, 2);
			g_assert_cmpstr(m.filename, ==, "/usr/bin/true");
			check_sid(f, &rec, 42, 43, 5002, 0, 200);
			break;
		}
		case PERF_RECORD_SWITCH_CPU_WIDE: {
			VtPerfSwitch sw;

			g_assert_true(vt_perf_record_switch(&rec, &sw, &err));
			g_assert_true(sw.out && sw.preempt && sw.cpu_wide);
			g_assert_cmpuint(sw.next_prev_pid, ==, 7);
			g_assert_cmpuint(sw.next_prev_tid, ==, 8);
			check_sid(f, &rec, 42, 43, 5003, 1, 201);
			break;
		}
		case VT_PERF_RECORD_AUXTRACE: {
			VtPerfAuxtrace aux;
			guint64 len = naux ? AUX2_LEN : AUX1_LEN, j;
			const guint8 *pl;

			g_assert_true(vt_perf_record_auxtrace(&rec, &aux, &err));
			g_assert_cmpuint(rec.size, ==, 48);
			g_assert_cmpuint(rec.file_offset, ==, info->aux_rec_off[naux]);
			g_assert_cmpuint(aux.size, ==, (len + 7) & ~7ULL);
			g_assert_cmpuint(aux.offset, ==, naux * 0x1000);
			g_assert_cmpuint(aux.reference, ==, 0x123456789ULL + naux);
			g_assert_cmpuint(aux.idx, ==, naux);
			g_assert_cmpuint(aux.tid, ==, G_MAXUINT32);
			g_assert_cmpuint(aux.cpu, ==, naux);
			g_assert_cmpuint(aux.payload_file_offset, ==, info->aux_payload_off[naux]);
			pl = vt_perf_file_map(f, aux.payload_file_offset, aux.size);
			g_assert_nonnull(pl);
			for (j = 0; j < aux.size; j++)
				g_assert_cmpuint(pl[j], ==, j < len ? aux_byte(naux, j) : 0);
			g_assert_false(vt_perf_record_sample_id(f, &rec, &(VtPerfSampleId){ 0 }));
			naux++;
			break;
		}
		default:
			g_assert_cmpuint(rec.size, ==, 8);
			break;
		}
		g_assert_no_error(err);
		n++;
	}
	g_assert_no_error(err);
	g_assert_cmpint(r, ==, 0);
	g_assert_cmpuint(n, ==, G_N_ELEMENTS(types));
	g_assert_cmpuint(it.pos, ==, vt_perf_file_data_offset(f) + vt_perf_file_data_size(f));
	/* iterator stays at the end */
	g_assert_cmpint(vt_perf_iter_next(&it, &rec, &err), ==, 0);

	g_assert_null(vt_perf_file_map(f, vt_perf_file_size(f), 1));
	g_assert_null(vt_perf_file_map(f, 1, G_MAXUINT64));
	g_assert_null(vt_perf_file_map_rw(f, 0, 8));
	vt_perf_file_release(f, 0, vt_perf_file_size(f));
	g_assert_cmpint(memcmp(vt_perf_file_map(f, 0, 8), "PERFILE2", 8), ==, 0);
	g_assert_true(vt_perf_file_sync(f, &err));
	vt_perf_file_close(f);
}

static void test_roundtrip(void)
{
	char *path = tmp_path("rt.data");
	SampleInfo info;

	write_sample_file(path, FALSE, &info);
	check_sample_file(path, &info);
	g_free(path);
}

static void test_directory(void)
{
	char *dir = tmp_path("dir.data"), *data = g_build_filename(dir, "data", NULL);
	char *stale = NULL;
	GError *err = NULL;
	SampleInfo info;
	VtPerfFile *f;
	const guint8 *p;
	guint64 sz;

	write_sample_file(dir, TRUE, &info);
	g_assert_true(g_file_test(dir, G_FILE_TEST_IS_DIR));
	g_assert_true(g_file_test(data, G_FILE_TEST_IS_REGULAR));
	check_sample_file(dir, &info);
	f = vt_perf_file_open(dir, 0, &err);
	g_assert_no_error(err);
	g_assert_cmpstr(vt_perf_file_path(f), ==, data);
	/* like perf record --kcore: no HEADER_DIR_FORMAT (with it perf 6.1
	 * takes the directory for a --threads recording and under-decodes AUX
	 * data), and no data.N files */
	g_assert_false(vt_perf_file_feature(f, VT_PERF_FEAT_DIR_FORMAT, &p, &sz));
	vt_perf_file_close(f);
	g_free(stale);
	stale = g_build_filename(dir, "data.0", NULL);
	g_assert_false(g_file_test(stale, G_FILE_TEST_EXISTS));
	g_free(stale);
	/* rewriting an existing directory works and drops stale data.N */
	stale = g_build_filename(dir, "data.3", NULL);
	g_assert_true(g_file_set_contents(stale, "junk", 4, NULL));
	write_sample_file(dir, TRUE, &info);
	check_sample_file(dir, &info);
	g_assert_false(g_file_test(stale, G_FILE_TEST_EXISTS));
	g_free(stale);
	/* as_dir on an existing regular file fails */
	g_assert_null(vt_perf_writer_new(data, TRUE, &err));
	assert_error_path(err, data, VT_PERF_ERROR_IO);
	g_clear_error(&err);
	g_free(data);
	g_free(dir);
}

static void test_rdwr(void)
{
	char *path = tmp_path("rw.data");
	GError *err = NULL;
	SampleInfo info;
	VtPerfFile *f;
	guint8 *p;

	write_sample_file(path, FALSE, &info);
	f = vt_perf_file_open(path, VT_PERF_OPEN_RDWR, &err);
	g_assert_no_error(err);
	p = vt_perf_file_map_rw(f, info.aux_payload_off[0], 4);
	g_assert_nonnull(p);
	memcpy(p, "\xde\xad\xbe\xef", 4);
	g_assert_true(vt_perf_file_sync(f, &err));
	vt_perf_file_close(f);
	f = vt_perf_file_open(path, 0, &err);
	g_assert_no_error(err);
	g_assert_cmpint(memcmp(vt_perf_file_map(f, info.aux_payload_off[0], 4), "\xde\xad\xbe\xef", 4), ==, 0);
	vt_perf_file_close(f);
	g_free(path);
}

/* Windows: mapped parts of the file; reading one after the file shrank
 * is an error under vt_perf_file_guarded, not SIGBUS. */
typedef struct {
	const VtPerfWindow *w;
	guint sum;
} Touch;

static void touch_window(void *p)
{
	Touch *t = p;

	for (size_t i = 0; i < t->w->len; i += 64)
		t->sum += t->w->base[i];
}

static void test_window(void)
{
	char *path = tmp_path("win.data");
	GError *err = NULL;
	SampleInfo info;
	VtPerfWindow w = { 0 };
	Touch t = { &w, 0 };
	VtPerfFile *f;
	guint64 size;

	write_sample_file(path, FALSE, &info);
	f = vt_perf_file_open(path, 0, &err);
	g_assert_no_error(err);
	size = vt_perf_file_size(f);
	/* a window: page-rounded, the whole small file */
	g_assert_true(vt_perf_window_map(f, &w, 8, 8, 1 << 20, &err));
	g_assert_no_error(err);
	g_assert_cmpuint(w.off, ==, 0);
	g_assert_cmpuint(w.len, ==, size);
	g_assert_cmpint(memcmp(vt_perf_window_at(&w, 0, 8), "PERFILE2", 8), ==, 0);
	g_assert_null(vt_perf_window_at(&w, size - 4, 8));
	g_assert_true(vt_perf_file_guarded(f, touch_window, &t, &err));
	g_assert_cmpuint(t.sum, >, 0);
	/* the file shrinks under the mapping */
	g_assert_cmpint(truncate(path, 0), ==, 0);
	g_assert_false(vt_perf_file_guarded(f, touch_window, &t, &err));
	assert_error_path(err, path, VT_PERF_ERROR_CHANGED);
	g_assert_nonnull(strstr(err->message, "changed size while being read"));
	g_clear_error(&err);
	/* again (the guard is re-armed), and a window past the end is refused */
	g_assert_false(vt_perf_file_guarded(f, touch_window, &t, &err));
	g_clear_error(&err);
	g_assert_false(vt_perf_window_map(f, &w, size, 1, 1 << 20, &err));
	g_assert_null(w.base);
	assert_error_path(err, path, VT_PERF_ERROR_TRUNCATED);
	g_clear_error(&err);
	vt_perf_window_unmap(&w);
	vt_perf_file_close(f);
	g_free(path);
}

/* SWITCH, old TIME_CONV, ID_INDEX with VM extension, no PERF_SAMPLE_IDENTIFIER. */
static void test_more_records(void)
{
	char *path = tmp_path("more.data");
	struct perf_event_attr attr;
	static const guint64 ids[] = { 7 };
	GError *err = NULL;
	VtPerfWriter *w;
	VtPerfFile *f;
	VtPerfIter it;
	VtPerfRecord rec;
	VtPerfSampleId sid;
	VtPerfSwitch sw;
	VtPerfTimeConv tc;
	VtPerfComm comm;
	VtPerfIdIndexEntry *e;
	guint n;
	Rec r;

	memset(&attr, 0, sizeof(attr));
	attr.size = PERF_ATTR_SIZE_VER5;
	attr.type = PERF_TYPE_SOFTWARE;
	attr.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_ID |
			   PERF_SAMPLE_STREAM_ID | PERF_SAMPLE_CPU;
	attr.sample_id_all = 1;
	w = vt_perf_writer_new(path, FALSE, &err);
	g_assert_no_error(err);
	g_assert_true(vt_perf_writer_add_attr(w, &attr, ids, 1, &err));
	attr.size = 128;
	g_assert_false(vt_perf_writer_add_attr(w, &attr, ids, 1, &err));	/* size differs */
	g_clear_error(&err);

	rec_begin(&r, PERF_RECORD_SWITCH, 0);
	put32(&r, 1); put32(&r, 2); put64(&r, 3); put64(&r, 7); put64(&r, 9); put32(&r, 5); put32(&r, 0);
	g_assert_true(vt_perf_writer_write_record(w, rec_end(&r), &err));
	rec_begin(&r, VT_PERF_RECORD_TIME_CONV, 0);
	put64(&r, 10); put64(&r, 20); put64(&r, 30);
	g_assert_true(vt_perf_writer_write_record(w, rec_end(&r), &err));
	rec_begin(&r, VT_PERF_RECORD_ID_INDEX, 0);
	put64(&r, 2);
	put64(&r, 7); put64(&r, 0); put64(&r, 0); put64(&r, 1);
	put64(&r, 8); put64(&r, 1); put64(&r, 1); put64(&r, 2);
	put64(&r, 1000); put64(&r, 0);
	put64(&r, 1000); put64(&r, 1);
	g_assert_true(vt_perf_writer_write_record(w, rec_end(&r), &err));
	rec_begin(&r, PERF_RECORD_COMM, 0);	/* unterminated string */
	put32(&r, 1); put32(&r, 2); put(&r, "abcdefgh", 8);
	g_assert_true(vt_perf_writer_write_record(w, rec_end(&r), &err));
	rec_begin(&r, PERF_RECORD_COMM, 0);	/* no room for a string */
	put32(&r, 1); put32(&r, 2);
	g_assert_true(vt_perf_writer_write_record(w, rec_end(&r), &err));
	/* rejected by the writer */
	rec_begin(&r, PERF_RECORD_COMM, 0);
	put32(&r, 1);
	g_assert_false(vt_perf_writer_write_record(w, rec_end(&r), &err));	/* size 12 */
	g_clear_error(&err);
	g_assert_false(vt_perf_writer_add_attr(w, &attr, ids, 1, &err));	/* too late */
	g_clear_error(&err);
	g_assert_true(vt_perf_writer_finish(w, &err));
	g_assert_false(vt_perf_writer_finish(w, &err));
	g_clear_error(&err);
	vt_perf_writer_free(w);

	f = vt_perf_file_open(path, 0, &err);
	g_assert_no_error(err);
	g_assert_cmpuint(vt_perf_file_attr(f, 0)->on_disk_size, ==, PERF_ATTR_SIZE_VER5);
	g_assert_cmpint(vt_perf_file_attr(f, 0)->id_hdr_size, ==, 40);
	g_assert_false(vt_perf_file_has_feature(f, VT_PERF_FEAT_AUXTRACE));
	g_assert_null(vt_perf_file_auxtrace_index(f, &n, &err));
	g_assert_no_error(err);
	g_assert_cmpuint(n, ==, 0);
	vt_perf_iter_init(&it, f);

	g_assert_cmpint(vt_perf_iter_next(&it, &rec, &err), ==, 1);
	g_assert_true(vt_perf_record_switch(&rec, &sw, &err));
	g_assert_false(sw.out || sw.preempt || sw.cpu_wide);
	g_assert_true(vt_perf_record_sample_id(f, &rec, &sid));
	g_assert_true(sid.has_tid && sid.has_time && sid.has_id && sid.has_stream_id && sid.has_cpu);
	g_assert_false(sid.has_identifier);
	g_assert_cmpuint(sid.pid, ==, 1);
	g_assert_cmpuint(sid.tid, ==, 2);
	g_assert_cmpuint(sid.time, ==, 3);
	g_assert_cmpuint(sid.id, ==, 7);
	g_assert_cmpuint(sid.stream_id, ==, 9);
	g_assert_cmpuint(sid.cpu, ==, 5);
	g_assert_false(vt_perf_record_comm(&rec, &comm, &err));		/* wrong type */
	g_assert_error(err, VT_PERF_ERROR, VT_PERF_ERROR_FORMAT);
	g_clear_error(&err);

	g_assert_cmpint(vt_perf_iter_next(&it, &rec, &err), ==, 1);
	g_assert_true(vt_perf_record_time_conv(&rec, &tc, &err));
	g_assert_false(tc.has_ext);
	g_assert_cmpuint(tc.time_shift, ==, 10);
	g_assert_cmpuint(tc.time_mult, ==, 20);
	g_assert_cmpuint(tc.time_zero, ==, 30);
	g_assert_cmpuint(tc.time_cycles, ==, 0);
	g_assert_cmpuint(tc.cap_user_time_short, ==, 0);

	g_assert_cmpint(vt_perf_iter_next(&it, &rec, &err), ==, 1);
	e = vt_perf_record_id_index(&rec, &n, &err);
	g_assert_no_error(err);
	g_assert_cmpuint(n, ==, 2);
	g_assert_true(e[0].has_vm && e[1].has_vm);
	g_assert_cmpuint(e[1].id, ==, 8);
	g_assert_cmpuint(e[1].tid, ==, 2);
	g_assert_cmpuint(e[1].machine_pid, ==, 1000);
	g_assert_cmpuint(e[1].vcpu, ==, 1);
	g_free(e);

	g_assert_cmpint(vt_perf_iter_next(&it, &rec, &err), ==, 1);
	g_assert_false(vt_perf_record_comm(&rec, &comm, &err));
	g_assert_error(err, VT_PERF_ERROR, VT_PERF_ERROR_FORMAT);
	g_clear_error(&err);
	g_assert_cmpint(vt_perf_iter_next(&it, &rec, &err), ==, 1);
	g_assert_false(vt_perf_record_comm(&rec, &comm, &err));
	g_assert_error(err, VT_PERF_ERROR, VT_PERF_ERROR_FORMAT);
	g_clear_error(&err);
	g_assert_cmpint(vt_perf_iter_next(&it, &rec, &err), ==, 0);
	vt_perf_file_close(f);
	g_free(path);
}

/* Pipe-mode stream stored in a file: 16-byte header + HEADER_ATTR records. */
static void test_pipe(void)
{
	char *path = tmp_path("pipe.data");
	struct perf_event_attr pt, dummy;
	GError *err = NULL;
	GByteArray *buf = g_byte_array_new();
	VtPerfFile *f;
	VtPerfIter it;
	VtPerfRecord rec;
	VtPerfSampleId sid;
	guint64 hsize = 16;
	char *s;
	int n = 0;
	Rec r;

	fill_attrs(&pt, &dummy);
	g_byte_array_append(buf, (const guint8 *)"PERFILE2", 8);
	g_byte_array_append(buf, (const guint8 *)&hsize, 8);
	rec_begin(&r, VT_PERF_RECORD_HEADER_ATTR, 0);
	put(&r, &pt, 128);
	put(&r, ids0, sizeof(ids0));
	g_byte_array_append(buf, rec_end(&r), r.n);
	rec_begin(&r, VT_PERF_RECORD_HEADER_ATTR, 0);
	put(&r, &dummy, 128);
	put(&r, ids1, sizeof(ids1));
	g_byte_array_append(buf, rec_end(&r), r.n);
	rec_begin(&r, VT_PERF_RECORD_HEADER_FEATURE, 0);
	put64(&r, VT_PERF_FEAT_HOSTNAME);
	put32(&r, 8);
	put(&r, "pipehost", 8);	/* not NUL-terminated within len: rejected */
	put32(&r, 0);
	g_byte_array_append(buf, rec_end(&r), r.n);
	rec_begin(&r, VT_PERF_RECORD_HEADER_FEATURE, 0);   /* 29 bytes: what follows is not aligned */
	put64(&r, VT_PERF_FEAT_OSRELEASE);
	put32(&r, 9);
	put(&r, "6.1-pipe", 9);
	g_byte_array_append(buf, rec_end(&r), r.n);
	rec_begin(&r, PERF_RECORD_COMM, PERF_RECORD_MISC_COMM_EXEC);
	put32(&r, 1);
	put32(&r, 1);
	put_str(&r, "init");
	put_sid(&r, 1, 1, 99, 3, 200);
	g_byte_array_append(buf, rec_end(&r), r.n);
	g_assert_true(g_file_set_contents(path, (const char *)buf->data, buf->len, &err));

	f = vt_perf_file_open(path, 0, &err);
	g_assert_no_error(err);
	g_assert_true(vt_perf_file_is_pipe(f));
	g_assert_cmpuint(vt_perf_file_data_offset(f), ==, 16);
	g_assert_cmpuint(vt_perf_file_data_size(f), ==, buf->len - 16);
	g_assert_cmpuint(vt_perf_file_n_attrs(f), ==, 2);
	g_assert_cmpuint(vt_perf_file_attr(f, 1)->attr.config, ==, PERF_COUNT_SW_DUMMY);
	g_assert_cmpuint(vt_perf_file_attr(f, 1)->nr_ids, ==, 2);
	g_assert_cmpuint(vt_perf_file_attr(f, 1)->ids[0], ==, 200);
	g_assert_true(vt_perf_file_attr_by_id(f, 101) == vt_perf_file_attr(f, 0));
	s = vt_perf_file_feature_string(f, VT_PERF_FEAT_OSRELEASE);
	g_assert_cmpstr(s, ==, "6.1-pipe");
	g_free(s);
	g_assert_true(vt_perf_file_has_feature(f, VT_PERF_FEAT_HOSTNAME));
	g_assert_null(vt_perf_file_feature_string(f, VT_PERF_FEAT_HOSTNAME));
	vt_perf_iter_init(&it, f);
	while (vt_perf_iter_next(&it, &rec, &err) > 0) {
		if (rec.type == PERF_RECORD_COMM) {
			VtPerfComm comm;

			/* read at an odd offset (UBSan: no misaligned access) */
			g_assert_cmpuint(rec.file_offset % 8, !=, 0);
			g_assert_cmpuint(rec.misc, ==, PERF_RECORD_MISC_COMM_EXEC);
			g_assert_true(vt_perf_record_comm(&rec, &comm, &err));
			g_assert_true(comm.exec);
			g_assert_cmpstr(comm.comm, ==, "init");
			g_assert_true(vt_perf_record_sample_id(f, &rec, &sid));
			g_assert_cmpuint(sid.time, ==, 99);
			g_assert_cmpuint(sid.cpu, ==, 3);
			g_assert_cmpuint(sid.identifier, ==, 200);
		} else {
			g_assert_false(vt_perf_record_sample_id(f, &rec, &sid));
		}
		n++;
	}
	g_assert_no_error(err);
	g_assert_cmpint(n, ==, 5);
	vt_perf_file_close(f);
	g_byte_array_unref(buf);
	g_free(path);
}

static void test_tsc_time(void)
{
	VtPerfTimeConv tc = { 0 };
	static const guint64 tscs[] = {
		0, 1, 2, 1000, 0x7fffffff, 0x80000000, 123456789012ULL,
		0x123456789abcULL, 0x0fffffffffffffULL,
	};
	guint i;

	tc.time_shift = 31;
	tc.time_mult = 715827882;	/* ~3 GHz */
	tc.time_zero = 1000000000000ULL;
	tc.cap_user_time_zero = 1;
	g_assert_cmpuint(vt_perf_tsc_to_time(0, &tc), ==, tc.time_zero);
	g_assert_cmpuint(vt_perf_tsc_to_time(1ULL << 31, &tc), ==, tc.time_zero + tc.time_mult);
	/* 3e9 cycles ~ 1 s */
	g_assert_cmpuint(vt_perf_tsc_to_time(3000000000ULL, &tc) - tc.time_zero, ==,
			 (3000000000ULL >> 31) * 715827882ULL +
			 (((3000000000ULL & 0x7fffffff) * 715827882ULL) >> 31));
	g_assert_cmpuint(vt_perf_time_to_tsc(tc.time_zero + tc.time_mult, &tc), ==, 1ULL << 31);
	for (i = 0; i < G_N_ELEMENTS(tscs); i++) {
		guint64 t = vt_perf_tsc_to_time(tscs[i], &tc);
		guint64 back = vt_perf_time_to_tsc(t, &tc);
		gint64 d = (gint64)(back - tscs[i]);

		g_assert_cmpint(d, <=, 0);
		g_assert_cmpint(d, >=, -3);
		/* time -> tsc -> time within 1 ns */
		d = (gint64)(vt_perf_tsc_to_time(vt_perf_time_to_tsc(t + 17, &tc), &tc) - (t + 17));
		g_assert_cmpint(d, <=, 0);
		g_assert_cmpint(d, >=, -1);
	}
	/* cap_user_time_short: only the low bits count, relative to time_cycles */
	tc.cap_user_time_short = 1;
	tc.time_cycles = 1000;
	tc.time_mask = 0xffff;
	{
		VtPerfTimeConv plain = tc;

		plain.cap_user_time_short = 0;
		g_assert_cmpuint(vt_perf_tsc_to_time(1000 + 0x10005, &tc), ==,
				 vt_perf_tsc_to_time(1005, &plain));
	}
	/* degenerate values must not trap */
	tc.time_mult = 0;
	g_assert_cmpuint(vt_perf_time_to_tsc(5, &tc), ==, 0);
	tc.time_shift = 200;
	tc.time_mult = 1;
	(void)vt_perf_tsc_to_time(5, &tc);
	(void)vt_perf_time_to_tsc(5, &tc);
}

static void test_names(void)
{
	g_assert_cmpstr(vt_perf_record_name(VT_PERF_RECORD_AUXTRACE), ==, "AUXTRACE");
	g_assert_cmpstr(vt_perf_record_name(PERF_RECORD_COMM), ==, "COMM");
	g_assert_cmpstr(vt_perf_record_name(PERF_RECORD_SWITCH_CPU_WIDE), ==, "SWITCH_CPU_WIDE");
	g_assert_cmpstr(vt_perf_record_name(VT_PERF_RECORD_FINISHED_INIT), ==, "FINISHED_INIT");
	g_assert_cmpstr(vt_perf_record_name(VT_PERF_RECORD_TIME_CONV), ==, "TIME_CONV");
	g_assert_cmpstr(vt_perf_record_name(1000), ==, "UNKNOWN");
	g_assert_cmpstr(vt_perf_record_name(40), ==, "UNKNOWN");
	g_assert_cmpstr(vt_perf_feature_name(VT_PERF_FEAT_AUXTRACE), ==, "auxtrace");
	g_assert_cmpstr(vt_perf_feature_name(VT_PERF_FEAT_OSRELEASE), ==, "osrelease");
	g_assert_cmpstr(vt_perf_feature_name(VT_PERF_FEAT_PMU_CAPS), ==, "pmu_caps");
	g_assert_null(vt_perf_feature_name(0));
	g_assert_null(vt_perf_feature_name(VT_PERF_FEAT_LAST));
}

/* A writer of path in the new directory dir, with the PT attr. */
static VtPerfWriter *writer_in(const char *dir, const char *path)
{
	struct perf_event_attr pt, dummy;
	GError *err = NULL;
	VtPerfWriter *w;

	g_assert_cmpint(g_mkdir(dir, 0700), ==, 0);
	fill_attrs(&pt, &dummy);
	w = vt_perf_writer_new(path, FALSE, &err);
	g_assert_no_error(err);
	g_assert_true(vt_perf_writer_add_attr(w, &pt, ids0, 2, &err));
	g_assert_no_error(err);
	return w;
}

static void test_writer_abort(void)
{
	char *dir = tmp_path("abort"), *path = g_build_filename(dir, "x.data", NULL);
	VtPerfWriter *w = writer_in(dir, path);
	GError *err = NULL;
	GDir *d;
	Rec r;

	rec_begin(&r, VT_PERF_RECORD_FINISHED_ROUND, 0);
	g_assert_true(vt_perf_writer_write_record(w, rec_end(&r), &err));
	vt_perf_writer_free(w);
	d = g_dir_open(dir, 0, NULL);
	g_assert_null(g_dir_read_name(d));	/* temp file removed, nothing renamed */
	g_dir_close(d);
	/* unwritable location */
	g_assert_null(vt_perf_writer_new("/nonexistent-dir/x.data", FALSE, &err));
	assert_error_path(err, "/nonexistent-dir/x.data", VT_PERF_ERROR_IO);
	g_clear_error(&err);
	g_free(path);
	g_free(dir);
}

/* The size of the only file in dir (the writer's temporary). */
static guint64 only_file_size(const char *dir)
{
	GDir *d = g_dir_open(dir, 0, NULL);
	const char *name = g_dir_read_name(d);
	char *path;
	struct stat st;

	g_assert_nonnull(name);
	path = g_build_filename(dir, name, NULL);
	g_assert_null(g_dir_read_name(d));
	g_assert_cmpint(stat(path, &st), ==, 0);
	g_free(path);
	g_dir_close(d);
	return (guint64)st.st_size;
}

/* The writer's bytes reach the file in 2 MiB-aligned blocks (so the page
 * cache holds it in large folios, cheap to map for its readers: issue
 * #10), whatever the sizes of the records and payloads: while writing,
 * the file only ever ends at a multiple of 2 MiB; every byte read back. */
static void test_writer_blocks(void)
{
	static const guint64 lens[] = { 100, (3u << 20) + 13, (2u << 20) - 48 - 7, 4u << 20, 5,
					(3u << 19) + 1, 1u << 20, (2u << 20) + 4096, 8 };
	const guint64 block = 2u << 20;
	char *dir = tmp_path("blocks"), *path = g_build_filename(dir, "b.data", NULL);
	guint64 payload_off[G_N_ELEMENTS(lens)];
	VtPerfWriter *w = writer_in(dir, path);
	GError *err = NULL;
	VtPerfFile *f;
	Rec r;

	for (guint i = 0; i < G_N_ELEMENTS(lens); i++) {
		guint8 *payload = g_malloc(lens[i]);
		VtPerfAuxtrace aux = { 0 };

		for (guint64 j = 0; j < lens[i]; j++)
			payload[j] = aux_byte((int)i, j);
		aux.idx = i;
		g_assert_true(vt_perf_writer_write_auxtrace(w, &aux, payload, lens[i], &payload_off[i], &err));
		g_assert_no_error(err);
		g_free(payload);
		g_assert_cmpuint(only_file_size(dir) % block, ==, 0);
		rec_begin(&r, VT_PERF_RECORD_FINISHED_ROUND, 0);
		g_assert_true(vt_perf_writer_write_record(w, rec_end(&r), &err));
		g_assert_cmpuint(only_file_size(dir) % block, ==, 0);
	}
	g_assert_cmpuint(only_file_size(dir), >=, 12u << 20);   /* most of it */
	g_assert_true(vt_perf_writer_finish(w, &err));
	g_assert_no_error(err);
	vt_perf_writer_free(w);

	f = vt_perf_file_open(path, VT_PERF_OPEN_RDONLY, &err);
	g_assert_no_error(err);
	for (guint i = 0; i < G_N_ELEMENTS(lens); i++) {
		const guint8 *p = vt_perf_file_map(f, payload_off[i], lens[i]);

		g_assert_nonnull(p);
		for (guint64 j = 0; j < lens[i]; j++)
			if (p[j] != aux_byte((int)i, j))
				g_assert_cmpuint(p[j], ==, aux_byte((int)i, j));
	}
	vt_perf_file_close(f);
	g_assert_cmpint(g_unlink(path), ==, 0);
	g_assert_cmpint(g_rmdir(dir), ==, 0);
	g_free(path);
	g_free(dir);
}

/* ------------------------------------------------------- bad inputs */

static guint8 *good_bytes(gsize *len, SampleInfo *info)
{
	char *path = tmp_path("good.data");
	GError *err = NULL;
	char *buf;

	write_sample_file(path, FALSE, info);
	g_assert_true(g_file_get_contents(path, &buf, len, &err));
	g_free(path);
	return (guint8 *)buf;
}

static guint64 get64(const guint8 *b, gsize off)
{
	guint64 v;

	memcpy(&v, b + off, 8);
	return v;
}

static void set64(guint8 *b, gsize off, guint64 v) { memcpy(b + off, &v, 8); }

/* Open and fully iterate; returns the error (or NULL). */
static GError *try_file(const char *path, const void *buf, gsize len)
{
	GError *err = NULL;
	VtPerfFile *f;
	VtPerfIter it;
	VtPerfRecord rec;
	VtPerfFileSection *idx;
	guint n;

	g_assert_true(g_file_set_contents(path, buf, len, &err));
	f = vt_perf_file_open(path, 0, &err);
	if (!f)
		return err;
	vt_perf_iter_init(&it, f);
	while (vt_perf_iter_next(&it, &rec, &err) > 0) {
		VtPerfSampleId sid;

		vt_perf_record_sample_id(f, &rec, &sid);
	}
	if (!err) {
		idx = vt_perf_file_auxtrace_index(f, &n, &err);
		g_free(idx);
	}
	vt_perf_file_close(f);
	return err;
}

static void expect_bad(const char *name, const void *buf, gsize len, int code, const char *substr)
{
	char *path = tmp_path(name);
	GError *err = try_file(path, buf, len);

	assert_error_path(err, path, code);
	if (substr && !strstr(err->message, substr))
		g_error("message '%s' lacks '%s'", err->message, substr);
	g_test_message("%s: %s", name, err->message);
	g_error_free(err);
	g_unlink(path);
	g_free(path);
}

static void test_bad_magic(void)
{
	SampleInfo info;
	gsize len;
	guint8 *b = good_bytes(&len, &info);

	b[0] = 'X';
	expect_bad("magic.data", b, len, VT_PERF_ERROR_MAGIC, "magic");
	memcpy(b, "2ELIFREP", 8);
	expect_bad("swapped.data", b, len, VT_PERF_ERROR_UNSUPPORTED, NULL);
	expect_bad("tiny.data", "PERF", 4, VT_PERF_ERROR_TRUNCATED, NULL);
	expect_bad("empty.data", "", 0, VT_PERF_ERROR_TRUNCATED, NULL);
	expect_bad("hdr.data", "PERFILE2\x68\0\0\0\0\0\0\0", 16, VT_PERF_ERROR_TRUNCATED, NULL);
	g_free(b);
}

static void test_bad_truncated(void)
{
	SampleInfo info;
	gsize len, cut;
	guint8 *b = good_bytes(&len, &info);
	char *path = tmp_path("trunc.data");
	guint64 data_off = get64(b, 40);
	int k;

	for (k = 0; k < 64; k++) {
		GError *err;
		guint8 *c;

		cut = len * k / 64;
		err = try_file(path, b, cut);
		g_assert_nonnull(err);		/* header/sections run past EOF */
		assert_error_path(err, path, -1);
		g_error_free(err);

		/* same cut, but the header claims exactly what is left as data */
		if (cut <= data_off)
			continue;
		c = g_memdup2(b, cut);
		set64(c, 48, cut - data_off);
		memset(c + 72, 0, 32);		/* no features */
		err = try_file(path, c, cut);
		if (err) {
			assert_error_path(err, path, -1);
			g_error_free(err);
		}
		g_free(c);
	}
	g_unlink(path);
	g_free(path);
	g_free(b);
}

static void test_bad_attr(void)
{
	SampleInfo info;
	gsize len;
	guint8 *b = good_bytes(&len, &info), *c;
	guint64 attrs_off = get64(b, 24);
	guint32 v = 200;

	c = g_memdup2(b, len);
	memcpy(c + attrs_off + 4, &v, 4);
	expect_bad("attr200.data", c, len, VT_PERF_ERROR_FORMAT, "attr 0 size 200 is larger than 128");
	v = 32;
	memcpy(c + attrs_off + 4, &v, 4);
	expect_bad("attr32.data", c, len, VT_PERF_ERROR_FORMAT, "attr 0 size 32");
	memcpy(c, b, len);
	v = 120;	/* valid size but != attr_size - 16 */
	memcpy(c + attrs_off + 4, &v, 4);
	expect_bad("attrsz.data", c, len, VT_PERF_ERROR_FORMAT, "attr_size");
	memcpy(c, b, len);
	set64(c, 16, 100);		/* attr_size */
	expect_bad("attrsize.data", c, len, VT_PERF_ERROR_FORMAT, "attr_size");
	memcpy(c, b, len);
	set64(c, attrs_off + 128, len - 8);	/* ids section past EOF */
	expect_bad("ids.data", c, len, VT_PERF_ERROR_TRUNCATED, "ids");
	memcpy(c, b, len);
	set64(c, 32, G_MAXUINT64 - 8);	/* attrs.size overflowing */
	expect_bad("attrs.data", c, len, VT_PERF_ERROR_TRUNCATED, NULL);
	memcpy(c, b, len);
	set64(c, 48, G_MAXUINT64);	/* data.size overflowing */
	expect_bad("datasz.data", c, len, VT_PERF_ERROR_TRUNCATED, "data section");
	memcpy(c, b, len);
	set64(c, 48, 0);
	expect_bad("data0.data", c, len, VT_PERF_ERROR_FORMAT, "empty");
	memcpy(c, b, len);
	set64(c, 8, 200);		/* header size */
	expect_bad("hsize.data", c, len, VT_PERF_ERROR_FORMAT, NULL);
	g_free(c);
	g_free(b);
}

/* PERF_RECORD_AUX: its three fields; a short one or another type refused */
static void test_aux_record(void)
{
	guint8 buf[40] = { 0 };
	struct perf_event_header h = { PERF_RECORD_AUX, 0, 32 };
	const guint64 f[3] = { 0x1000, 0x2345, VT_PERF_AUX_FLAG_TRUNCATED | VT_PERF_AUX_FLAG_COLLISION };
	VtPerfRecord rec = { .file_offset = 64, .data = buf, .type = PERF_RECORD_AUX, .size = 32 };
	g_autoptr(GError) err = NULL;
	VtPerfAux aux;

	memcpy(buf, &h, sizeof(h));
	memcpy(buf + 8, f, sizeof(f));
	g_assert_true(vt_perf_record_aux(&rec, &aux, &err));
	g_assert_no_error(err);
	g_assert_cmpuint(aux.aux_offset, ==, 0x1000);
	g_assert_cmpuint(aux.aux_size, ==, 0x2345);
	g_assert_cmpuint(aux.flags, ==, 0x09);
	rec.size = 24;
	g_assert_false(vt_perf_record_aux(&rec, &aux, &err));
	g_assert_error(err, VT_PERF_ERROR, VT_PERF_ERROR_FORMAT);
	g_clear_error(&err);
	rec.size = 32;
	rec.type = PERF_RECORD_LOST;
	g_assert_false(vt_perf_record_aux(&rec, &aux, &err));
	g_assert_error(err, VT_PERF_ERROR, VT_PERF_ERROR_FORMAT);
}

static void test_bad_records(void)
{
	SampleInfo info;
	gsize len;
	guint8 *b = good_bytes(&len, &info), *c;
	guint16 v16;
	guint64 data_end = get64(b, 40) + get64(b, 48);

	c = g_memdup2(b, len);
	set64(c, info.aux_rec_off[1] + 8, 1ULL << 40);	/* AUXTRACE size past EOF */
	expect_bad("auxsize.data", c, len, VT_PERF_ERROR_TRUNCATED, "AUXTRACE");
	set64(c, info.aux_rec_off[1] + 8, G_MAXUINT64 - 16);	/* ... and overflowing */
	expect_bad("auxsize2.data", c, len, VT_PERF_ERROR_TRUNCATED, "AUXTRACE");

	memcpy(c, b, len);
	v16 = 4;				/* record size < 8 */
	memcpy(c + info.data_off + 6, &v16, 2);
	expect_bad("recsize.data", c, len, VT_PERF_ERROR_FORMAT, "size 4");
	v16 = 0;
	memcpy(c + info.data_off + 6, &v16, 2);
	expect_bad("recsize0.data", c, len, VT_PERF_ERROR_FORMAT, NULL);
	v16 = 12;				/* misaligns the next record */
	memcpy(c + info.data_off + 6, &v16, 2);
	expect_bad("recalign.data", c, len, VT_PERF_ERROR_FORMAT, "aligned");

	memcpy(c, b, len);
	v16 = 40;				/* AUXTRACE record too short */
	memcpy(c + info.aux_rec_off[0] + 6, &v16, 2);
	expect_bad("auxshort.data", c, len, -1, NULL);

	memcpy(c, b, len);
	set64(c, data_end + 16 * 3 + 8, len);	/* 4th feature (auxtrace): size past EOF */
	expect_bad("featsize.data", c, len, VT_PERF_ERROR_TRUNCATED, "feature 18 (auxtrace)");
	memcpy(c, b, len);
	set64(c, data_end, G_MAXUINT64);	/* first feature: offset overflowing */
	expect_bad("featoff.data", c, len, VT_PERF_ERROR_TRUNCATED, "feature");
	memcpy(c, b, len);
	set64(c, 72 + 24, 0xffffffffffffffffULL);	/* 64 more feature bits: table past EOF */
	expect_bad("feattab.data", c, len, VT_PERF_ERROR_TRUNCATED, "feature table");

	memcpy(c, b, len);			/* auxtrace index pointing at a non-AUXTRACE record */
	{
		guint64 toff = get64(c, data_end + 16 * 3);

		set64(c, toff + 8, info.data_off);
		expect_bad("auxidx.data", c, len, VT_PERF_ERROR_FORMAT, "auxtrace index");
		set64(c, toff, 1000);		/* nr too large */
		expect_bad("auxidx2.data", c, len, VT_PERF_ERROR_TRUNCATED, "auxtrace index");
	}
	g_free(c);
	g_free(b);
}

int main(int argc, char **argv)
{
	int ret;

	g_test_init(&argc, &argv, NULL);
	tmpdir = g_dir_make_tmp("vt-perf-test-XXXXXX", NULL);
	g_assert_nonnull(tmpdir);

	g_test_add_func("/perf-data/roundtrip", test_roundtrip);
	g_test_add_func("/perf-data/directory", test_directory);
	g_test_add_func("/perf-data/rdwr", test_rdwr);
	g_test_add_func("/perf-data/window", test_window);
	g_test_add_func("/perf-data/more-records", test_more_records);
	g_test_add_func("/perf-data/pipe", test_pipe);
	g_test_add_func("/perf-data/tsc-time", test_tsc_time);
	g_test_add_func("/perf-data/names", test_names);
	g_test_add_func("/perf-data/writer-abort", test_writer_abort);
	g_test_add_func("/perf-data/writer-blocks", test_writer_blocks);
	g_test_add_func("/perf-data/bad/magic", test_bad_magic);
	g_test_add_func("/perf-data/bad/truncated", test_bad_truncated);
	g_test_add_func("/perf-data/bad/attr", test_bad_attr);
	g_test_add_func("/perf-data/bad/records", test_bad_records);
	g_test_add_func("/perf-data/aux-record", test_aux_record);

	ret = g_test_run();
	rm_rf(tmpdir);
	g_free(tmpdir);
	return ret;
}
