/* bigtable.c - zeroed memory for the decoder's large lookup tables (the
 * walk's block table, the disassembly and symbol caches, script's side
 * texts): tables that are read where nothing was written yet; and buffers
 * about to be filled mapped at once (vt_decode_populate, at the end).
 *
 * From calloc such a read maps the kernel's shared zero page, and the first
 * write to that page then faults again to copy it - and in a process with
 * several threads that copy flushes the TLBs of every CPU the process runs
 * on (an IPI each time): a fifth of a short `vmtrace script --call-trace`
 * was spent there, one page at a time.  Here the table is 2 MiB-aligned
 * anonymous memory marked for transparent huge pages (MADV_HUGEPAGE, which
 * Debian's default "madvise" setting honours): a read maps the huge zero
 * page, the first write copies 2 MiB at once - 512 times fewer faults and
 * flushes - and random lookups miss the TLB less.  Where the kernel has no
 * transparent huge pages the table behaves as calloc'd memory. */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "src/decode/decode.h"

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif
#if defined(__SANITIZE_ADDRESS__)
#define VT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define VT_ASAN 1
#endif
#endif

#define HUGE_BYTES ((gsize)2 << 20)

static gsize table_len(gsize bytes)
{
	return (bytes + HUGE_BYTES - 1) & ~(HUGE_BYTES - 1);
}

void *vt_decode_table_new(gsize bytes)
{
	gsize len = table_len(MAX(bytes, 1)), head;
	guint8 *p = mmap(NULL, len + HUGE_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		g_error("vt_decode_table_new: failed to map %" G_GSIZE_FORMAT " bytes", len);   /* as g_malloc */
	head = (HUGE_BYTES - ((guintptr)p & (HUGE_BYTES - 1))) & (HUGE_BYTES - 1);
	if (head)
		munmap(p, head);
	munmap(p + head + len, HUGE_BYTES - head);
#ifdef MADV_HUGEPAGE
	madvise(p + head, len, MADV_HUGEPAGE);   /* advice: refused where THP is off, and then not needed */
#endif
	return p + head;
}

void vt_decode_table_free(void *table, gsize bytes)
{
	if (table)
		munmap(table, table_len(MAX(bytes, 1)));
}

void *vt_decode_table_new_small(gsize bytes)
{
	void *p = mmap(NULL, MAX(bytes, 1), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);

	if (p == MAP_FAILED)
		g_error("vt_decode_table_new_small: failed to map %" G_GSIZE_FORMAT " bytes", bytes);   /* as g_malloc */
	return p;
}

void vt_decode_table_free_small(void *table, gsize bytes)
{
	if (table)
		munmap(table, MAX(bytes, 1));
}

/* MADV_POPULATE_WRITE (Linux 5.14): the pages mapped, writable, in one
 * call.  Measured on this project's machine (a VM, 4 MiB of new memory,
 * medians of 3): written page by page 13 us a page - an exception and
 * hypervisor exit each - populated 0.6 us a page.  (Session 27: but the
 * first write to each populated page still costs ~9 us, the hypervisor's
 * exit without the guest's fault - huge pages spare both: the buffers
 * below.)  A short `vmtrace script`
 * took 3,700 such faults (its buffers: formatted text, batches, AUX
 * windows, symbol tables), a third of its CPU time in the kernel.  A
 * kernel without it (EINVAL) is not asked again; errno is kept (callers
 * may report an earlier one). */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23           /* (Linux's value; older C libraries' headers lack it) */
#endif
void vt_decode_populate(void *p, gsize len)
{
	static gsize page;
	static gint refused;
	guintptr a, e;
	int saved = errno;

	if (!p || g_atomic_int_get(&refused))
		return;
	if (g_once_init_enter(&page))
		g_once_init_leave(&page, (gsize)MAX(sysconf(_SC_PAGESIZE), 4096L));
	a = ((guintptr)p + page - 1) & ~(guintptr)(page - 1);
	e = ((guintptr)p + len) & ~(guintptr)(page - 1);
	if (e > a && madvise((void *)a, e - a, MADV_POPULATE_WRITE) && errno == EINVAL)
		g_atomic_int_set(&refused, 1);
	errno = saved;
}

gboolean vt_decode_memcheck(void)
{
#ifdef VT_ASAN
	return TRUE;
#else
	static gint on = -1;

	if (g_atomic_int_get(&on) < 0)
		g_atomic_int_set(&on, RUNNING_ON_VALGRIND ? 1 : 0);
	return g_atomic_int_get(&on) == 1;
#endif
}

/* ------------------------------------------- buffers in huge pages */
/* Measured on this project's machine (a virtual machine, session
 * 27): the first write to each 4 KiB page of new anonymous memory costs
 * ~9 us - a hypervisor exit per page, also after MADV_POPULATE_WRITE (it
 * spares the guest's fault, not the hypervisor's), also for pages just
 * freed and taken again - and to a 2 MiB transparent huge page ~0.2 ms, its
 * zeroing included: 20 times less a byte.  vmtrace script's buffers that
 * are written at once (the decoding threads' text chunks and their marks,
 * the AUX windows) were ~20 MiB of 4 KiB pages on a 1 MiB bench
 * recording; from huge pages its wall time went down 6% (exit-heavy,
 * --itrace=b) to 15% (cyc, --call-trace: 138 -> 118 ms; medians of 9
 * alternating runs).  (After an idle second new memory costs ~2 ms a MiB
 * even in huge pages - the hypervisor's: use less of it, recording.c's
 * CHUNK_TEXT.)
 * Sizes are powers of two from 64 KiB to 2 MiB, carved from 2 MiB huge
 * pages; a freed buffer waits on its size's list for the next (never
 * unmapped: the memory held is, size by size, the most of that size ever
 * held at once, rounded up to huge pages).
 * Larger ones (a long AUX window) come from g_malloc, mapped at once
 * (vt_decode_populate): a huge page's worth of slack each is too much
 * there.  Under ASan or valgrind all come from g_malloc, which they check. */
#define BUF_MIN_LOG2 16
#define BUF_MAX_LOG2 21
#define BUF_CLASSES (BUF_MAX_LOG2 - BUF_MIN_LOG2 + 1)

static GMutex buf_lock;
static GPtrArray *buf_free[BUF_CLASSES];   /* free buffers, by size */
static GHashTable *buf_had;                /* memcheck: each buffer's n (buf_track) */

/* The size class of n bytes (BUF_CLASSES: larger than a huge page). */
static guint buf_class(gsize n)
{
	guint c = 0;

	while (c < BUF_CLASSES && ((gsize)1 << (BUF_MIN_LOG2 + c)) < n)
		c++;
	return c;
}

/* n's size in the pool. */
static gsize pool_size(gsize n)
{
	guint c;

	n = MAX(n, (gsize)1);
	c = buf_class(n);
	return c < BUF_CLASSES ? (gsize)1 << (BUF_MIN_LOG2 + c) : n;
}

gsize vt_decode_buf_size(gsize n)
{
	return vt_decode_memcheck() ? MAX(n, (gsize)1) : pool_size(n);
}

/* Where memory is checked (g_malloc's buffers of n bytes, exactly): p had
 * with n (had), or given back with n - which must have the pool size of
 * the n it was had with, or it would go to another size's list in the pool
 * (FALSE: refused). */
static gboolean buf_track(void *p, gsize n, gboolean had)
{
	gpointer was;
	gboolean ok = TRUE;

	g_mutex_lock(&buf_lock);
	if (!buf_had)
		buf_had = g_hash_table_new(NULL, NULL);
	if (had)
		g_hash_table_insert(buf_had, p, GSIZE_TO_POINTER(n));
	else if ((ok = g_hash_table_lookup_extended(buf_had, p, NULL, &was) &&
		       pool_size(GPOINTER_TO_SIZE(was)) == pool_size(n)))
		g_hash_table_remove(buf_had, p);
	g_mutex_unlock(&buf_lock);
	return ok;
}

void *vt_decode_buf_new(gsize n)
{
	gsize size = vt_decode_buf_size(n);
	guint c = buf_class(size);
	guint8 *p;

	if (vt_decode_memcheck()) {
		p = g_malloc(size);
		buf_track(p, n, TRUE);
		return p;
	}
	if (c == BUF_CLASSES) {
		p = g_malloc(size);
		vt_decode_populate(p, size);
		return p;
	}
	g_mutex_lock(&buf_lock);
	if (!buf_free[c])
		buf_free[c] = g_ptr_array_new();
	if (!buf_free[c]->len) {     /* a new huge page, cut into buffers of this size */
		p = vt_decode_table_new(HUGE_BYTES);
		for (gsize off = HUGE_BYTES; off > size; off -= size)
			g_ptr_array_add(buf_free[c], p + off - size);
	} else {
		p = g_ptr_array_steal_index_fast(buf_free[c], buf_free[c]->len - 1);
	}
	g_mutex_unlock(&buf_lock);
	return p;
}

void vt_decode_buf_free(void *p, gsize n)
{
	gsize size = vt_decode_buf_size(n);
	guint c = buf_class(size);

	if (!p)
		return;
	if (vt_decode_memcheck()) {
		g_return_if_fail(buf_track(p, n, FALSE));   /* another size: refused */
		g_free(p);
	} else if (c == BUF_CLASSES) {
		g_free(p);
	} else {
		/* a piece of this size starts at a multiple of it (most of those
		 * given back with another size do not: refused) */
		g_return_if_fail(((guintptr)p & (size - 1)) == 0);
		g_mutex_lock(&buf_lock);
		if (!buf_free[c])
			buf_free[c] = g_ptr_array_new();
		g_ptr_array_add(buf_free[c], p);
		g_mutex_unlock(&buf_lock);
	}
}

void *vt_decode_buf_renew(void *p, gsize old_n, gsize n)
{
	void *q;

	if (vt_decode_memcheck()) {
		g_return_val_if_fail(!p || buf_track(p, old_n, FALSE), p);
		q = g_realloc(p, vt_decode_buf_size(n));
		buf_track(q, n, TRUE);
		return q;
	}
	if (p && vt_decode_buf_size(old_n) == vt_decode_buf_size(n))
		return p;
	q = vt_decode_buf_new(n);
	if (p)
		memcpy(q, p, MIN(vt_decode_buf_size(old_n), vt_decode_buf_size(n)));
	vt_decode_buf_free(p, old_n);
	return q;
}
