/* lost.c - the recording's own account of lost trace: PERF_RECORD_AUX
 * (written for every piece of AUX data; flags TRUNCATED, PARTIAL,
 * COLLISION say data was lost) and PERF_RECORD_LOST (sideband records the
 * kernel dropped), each counted into the health of the vCPU whose thread
 * the record's sample_id names.  One pass over the records (AUX payloads
 * skipped): memory does not grow with the file. */
#include "config.h"

#include <string.h>

#include "src/analyze/analyze.h"
#include "src/perf/perf-data.h"

#define RECORD_LOST 2   /* PERF_RECORD_LOST: u64 id, u64 lost */

static guint64 field(const VtPerfRecord *rec, guint i)
{
	guint64 v;

	memcpy(&v, rec->data + sizeof(struct perf_event_header) + 8 * i, sizeof(v));
	return v;
}

static void count(VtAnalyze *a, const VtPerfFile *f, const VtPerfRecord *rec)
{
	VtPerfSampleId sid = { 0 };
	VtPerfAux aux;
	gint32 tid = -1;

	if (rec->type == PERF_RECORD_AUX ? !vt_perf_record_aux(rec, &aux, NULL)
					 : rec->size < sizeof(struct perf_event_header) + 16)
		return;
	if (vt_perf_record_sample_id(f, rec, &sid) && sid.has_tid)
		tid = (gint32)sid.tid;
	if (rec->type == PERF_RECORD_AUX)
		vt_analyze_lost(a, tid, TRUE, aux.flags, 0);
	else
		vt_analyze_lost(a, tid, FALSE, 0, field(rec, 1));
}

gboolean vt_analyze_read_lost(VtAnalyze *a, const char *path, GError **error)
{
	VtPerfFile *f = vt_perf_file_open(path, VT_PERF_OPEN_RDONLY, error);
	VtPerfIter *it;
	VtPerfRecord rec;
	int r;

	if (!f)
		return FALSE;
	it = g_new(VtPerfIter, 1);
	vt_perf_iter_init(it, f);
	while ((r = vt_perf_iter_next(it, &rec, error)) > 0)
		if (rec.type == PERF_RECORD_AUX || rec.type == RECORD_LOST)
			count(a, f, &rec);
	g_free(it);
	vt_perf_file_close(f);
	return r == 0;
}
