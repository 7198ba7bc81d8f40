/* ring.h - consumer side of a perf_event mmap ring: the data ring of
 * records and the AUX area of an AUX-tracing PMU (intel_pt).
 *
 * The kernel (or the synthetic source, which plays the kernel's part in
 * memory) is the producer: it writes records into the data ring and
 * advances data_head; trace bytes into the AUX area and advances aux_head.
 * Both heads are free-running byte counters; positions are taken modulo the
 * (power of two) sizes.  The consumer reads [tail, head) and publishes the
 * new tail; in overwrite ("snapshot") mode the AUX area is mapped read-only,
 * aux_tail is ignored by the producer, and only the newest bytes are kept.
 */
#ifndef VT_RING_H
#define VT_RING_H

#include <glib.h>
#include <stdint.h>
#include <linux/perf_event.h>

G_BEGIN_DECLS

#define VT_RING_ERROR (vt_ring_error_quark())
GQuark vt_ring_error_quark(void);
typedef enum {
	VT_RING_ERROR_CORRUPT,   /* a record header that cannot be right */
	VT_RING_ERROR_CALLBACK,  /* the callback failed (its error is passed on) */
} VtRingErrorCode;

typedef struct {
	struct perf_event_mmap_page *pg;  /* control page */
	uint8_t *data;                    /* data ring (pg->data_offset) */
	uint64_t data_size;               /* power of two */
	uint8_t *aux;                     /* AUX area, or NULL */
	uint64_t aux_size;                /* power of two */
	gboolean aux_overwrite;           /* snapshot mode: read-only AUX */
	GByteArray *tmp;                  /* a record that wraps, made contiguous */
	/* snapshot mode */
	gboolean aux_wrapped;             /* the producer has wrapped the area */
	uint64_t aux_last_head;           /* head at the last snapshot (+1: none yet) */
	uint64_t aux_emitted;             /* bytes passed so far: the next piece's offset */
} VtRing;

void vt_ring_init(VtRing *r, struct perf_event_mmap_page *pg, uint8_t *data, uint64_t data_size,
		  uint8_t *aux, uint64_t aux_size, gboolean aux_overwrite);
void vt_ring_clear(VtRing *r);

/* Called for each complete record, contiguous (copied when it wraps). */
typedef gboolean (*VtRingRecordFn)(const struct perf_event_header *rec, void *user, GError **error);
/* Called for each contiguous piece of AUX data; `offset` is its position in
 * the free-running AUX stream (what PERF_RECORD_AUXTRACE's offset holds). */
typedef gboolean (*VtRingAuxFn)(const uint8_t *a, uint64_t alen, const uint8_t *b, uint64_t blen,
				uint64_t offset, void *user, GError **error);

/* Read all complete records in the data ring, then publish the tail.
 * Returns the number of records, -1 on error. */
gint64 vt_ring_read(VtRing *r, VtRingRecordFn fn, void *user, GError **error);
/* Bytes the producer has published and the consumer not yet read. */
uint64_t vt_ring_data_pending(const VtRing *r);

/* Read the new AUX data [aux_tail, aux_head) (at most aux_size bytes) as
 * one or two pieces (two when it wraps), then publish aux_tail.  Returns
 * the number of bytes, -1 on error.  Not for overwrite (snapshot) areas:
 * they are read with vt_ring_snapshot_aux. */
gint64 vt_ring_read_aux(VtRing *r, VtRingAuxFn fn, void *user, GError **error);
/* Snapshot mode, with Intel PT's semantics: aux_head is the write offset
 * within the area (the producer ignores aux_tail and overwrites), the area
 * starts zeroed, and it has wrapped once its last 512 bytes are not all
 * zero (perf's test).  Passes the newest min(max, valid bytes) bytes ending
 * at the head - nothing if the head has not moved since the last snapshot;
 * `offset` counts the bytes passed so far. */
gint64 vt_ring_snapshot_aux(VtRing *r, uint64_t max, VtRingAuxFn fn, void *user, GError **error);

G_END_DECLS

#endif
