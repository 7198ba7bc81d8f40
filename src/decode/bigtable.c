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
#include <sys/mman.h>
#include <unistd.h>

#include "src/decode/decode.h"

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
 * hypervisor exit each - populated 0.6 us a page.  A short `vmtrace script`
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
