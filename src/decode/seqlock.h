/* seqlock.h - slots of the tables that decoding threads share (walk.c's
 * blocks, disasm.c's texts, symcache.c's symbols, script's side texts): a
 * slot starts with a guint32 sequence number, odd while a writer writes
 * it.  A writer that finds it odd or loses the race to make it odd skips
 * the write (a cache: the slot is filled again later); a reader copies
 * the slot and keeps the copy only if the number was even and did not
 * change meanwhile.  Inline: the tables' lookups are per block and line. */
#ifndef VT_DECODE_SEQLOCK_H
#define VT_DECODE_SEQLOCK_H

#include <string.h>
#include <glib.h>

/* Copies n bytes of the slot at src (its sequence number first) to dst:
 * FALSE when a writer was at it (dst is torn then). */
static inline gboolean vt_seq_read(void *dst, const void *src, gsize n)
{
	const guint32 *seq_p = src;
	guint32 seq = __atomic_load_n(seq_p, __ATOMIC_ACQUIRE);

	if (seq & 1)
		return FALSE;
	memcpy(dst, src, n);
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return __atomic_load_n(seq_p, __ATOMIC_RELAXED) == seq;
}

/* The slot's sequence number made odd (it is being written): FALSE when
 * another writer has it. */
static inline gboolean vt_seq_lock(guint32 *seq_p, guint32 *seq)
{
	*seq = __atomic_load_n(seq_p, __ATOMIC_RELAXED);
	if ((*seq & 1) || !__atomic_compare_exchange_n(seq_p, seq, *seq + 1, FALSE, __ATOMIC_ACQUIRE,
							__ATOMIC_RELAXED))
		return FALSE;
	__atomic_thread_fence(__ATOMIC_RELEASE);
	return TRUE;
}

static inline void vt_seq_unlock(guint32 *seq_p, guint32 seq)
{
	__atomic_store_n(seq_p, seq + 2, __ATOMIC_RELEASE);
}

#endif
