/* capture-pt.h - intel_pt event configuration from sysfs. */
#ifndef VT_CAPTURE_PT_H
#define VT_CAPTURE_PT_H

#include "src/record/capture.h"

/* Build the intel_pt perf_event_attr, the AUXTRACE_INFO priv[] words and
 * the event's name ("intel_pt/tsc=1,mtc=1,mtc_period=3/k") from the PMU's
 * sysfs type, format/ and caps/ (under the host root prefix). */
gboolean vt_capture_pt_config(const VtCaptureConfig *cfg, struct perf_event_attr *attr, uint64_t *info,
			      char **event_name, GError **error);

#endif
