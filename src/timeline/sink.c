/* sink.c - what every timeline sink shares (see timeline.h). */
#include "config.h"

#include "src/timeline/timeline.h"

G_DEFINE_QUARK(vt-timeline-error-quark, vt_timeline_error)

void vt_timeline_sink_free(VtTimelineSink *s)
{
	if (s)
		s->ops->free(s);
}
