/* convert.c - the plugin's directory (src/tcg/vmtrace-tcg.c) as a
 * recording: perf.data + the executed code's image.  See tcg.h. */
#include "config.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <string.h>
#include <unistd.h>

#include "src/fs/output.h"
#include "src/perf/perf-data.h"
#include "src/perf/perf-encode.h"
#include "src/tcg/tcg-format.h"
#include "src/tcg/tcg.h"

#define PT_PMU_TYPE 8
#define CHUNK (4u << 20)
#define PAGE 4096u
#define MERGE_GAP (64u << 20) / PAGE   /* holes below 64 MiB are filled with zeros */
#define MERGE_GAP_USER 16               /* user half: no kernel map to keep whole, 64 KiB */

G_DEFINE_QUARK(vt-tcg-error-quark, vt_tcg_error)

typedef struct {
	guint idx;
	uint32_t tid;
	uint64_t bytes;
} Stream;

typedef struct {
	uint64_t start, n;             /* pages */
} Run;

typedef struct {
	uint8_t b[PAGE];
	uint8_t have[PAGE / 8];
} Page;

/* ---------------------------------------------------------------- meta */
static gboolean meta_vcpu(const char *l, GArray *streams, VtTcgStats *st)
{
	guint idx;
	long tid;
	guint64 bytes, packets, retired, async, faults, rep, unres, filt, fin, infl, ran = 0;

	if (sscanf(l, "vcpu %u tid %ld bytes %" G_GUINT64_FORMAT " packets %" G_GUINT64_FORMAT " retired %"
		   G_GUINT64_FORMAT " async %" G_GUINT64_FORMAT " faults %" G_GUINT64_FORMAT " rep %" G_GUINT64_FORMAT
		   " unresolved %" G_GUINT64_FORMAT " filtered %" G_GUINT64_FORMAT " final %" G_GUINT64_FORMAT
		   " inflight %" G_GUINT64_FORMAT " ran %" G_GUINT64_FORMAT,
		   &idx, &tid, &bytes, &packets, &retired, &async, &faults, &rep, &unres, &filt, &fin, &infl, &ran) < 12)
		return FALSE;
	if (st->n_per_vcpu < VT_TCG_STATS_VCPUS) {
		guint k = st->n_per_vcpu++;

		st->per_vcpu[k].vcpu = idx;
		st->per_vcpu[k].tid = (uint32_t)tid;
		st->per_vcpu[k].retired = retired;
		st->per_vcpu[k].ran = ran;
	}
	if (streams) {
		Stream s = { idx, (uint32_t)tid, bytes };

		g_array_append_val(streams, s);
	}
	st->packets += packets;
	st->aux_bytes += bytes;
	st->retired += retired;
	st->asyncs += async;
	st->faults += faults;
	st->rep_iters += rep;
	st->unresolved += unres;
	st->inflight += infl;
	st->filtered += filt;
	st->final_started += fin;
	return TRUE;
}

static gboolean read_meta(const char *in_dir, VtTcgStats *st, GArray *streams, GError **error)
{
	g_autofree char *path = g_build_filename(in_dir, "meta", NULL);
	g_autofree char *text = NULL;
	g_auto(GStrv) lines = NULL;
	int format = 0;
	guint64 write_errors = 0;

	memset(st, 0, sizeof(*st));
	if (!g_file_get_contents(path, &text, NULL, NULL)) {
		g_set_error(error, VT_TCG_ERROR, VT_TCG_ERROR_INPUT,
			    "%s: missing - the plugin did not finish (did QEMU load it and exit normally?)", path);
		return FALSE;
	}
	lines = g_strsplit(text, "\n", -1);
	for (guint i = 0; lines[i]; i++) {
		const char *l = lines[i];
		char word[16];

		if (sscanf(l, "format %d", &format) == 1 || sscanf(l, "vcpus %u", &st->vcpus) == 1 ||
		    sscanf(l, "started %" G_GUINT64_FORMAT, &st->started) == 1 ||
		    sscanf(l, "before %" G_GUINT64_FORMAT, &st->before) == 1 ||
		    sscanf(l, "after %" G_GUINT64_FORMAT, &st->after) == 1 ||
		    sscanf(l, "translations %" G_GUINT64_FORMAT, &st->translations) == 1 ||
		    sscanf(l, "mode_changes %" G_GUINT64_FORMAT, &st->mode_changes) == 1 ||
		    sscanf(l, "mode_resyncs %" G_GUINT64_FORMAT, &st->mode_resyncs) == 1 ||
		    sscanf(l, "mode_ambiguous %" G_GUINT64_FORMAT, &st->mode_ambiguous) == 1 ||
		    sscanf(l, "write_errors %" G_GUINT64_FORMAT, &write_errors) == 1)
			continue;
		if (sscanf(l, "filter %15s", word) == 1)
			st->kernel_only = !strcmp(word, "kernel");
		else if (sscanf(l, "mttcg %15s", word) == 1)
			st->mttcg = !strcmp(word, "1");
		else if (g_str_has_prefix(l, "vcpu ") && !meta_vcpu(l, streams, st))
			goto bad;
	}
	if (format != VT_TCG_FORMAT)
		goto bad;
	if (write_errors) {
		g_set_error(error, VT_TCG_ERROR, VT_TCG_ERROR_IO, "%s: the plugin could not write all of its files "
			    "(%" G_GUINT64_FORMAT " failed writes: disk full?)", in_dir, write_errors);
		return FALSE;
	}
	return TRUE;
bad:
	g_set_error(error, VT_TCG_ERROR, VT_TCG_ERROR_INPUT, "%s: not written by this version's vmtrace-tcg.so", path);
	return FALSE;
}

gboolean vt_tcg_read_meta(const char *in_dir, VtTcgStats *st, GError **error)
{
	return read_meta(in_dir, st, NULL, error);
}

/* With one TCG thread (thread=single) every vCPU ran in it: vCPU i gets
 * that tid + i, so that each stream is a thread of its own. */
static void distinct_tids(GArray *streams)
{
	for (guint i = 1; i < streams->len; i++)
		for (guint k = 0; k < i; k++)
			if (g_array_index(streams, Stream, i).tid == g_array_index(streams, Stream, k).tid)
				g_array_index(streams, Stream, i).tid += i;
}

/* ---------------------------------------------------------- code image */
/* The code as it is at the current point of the code log (the newest
 * bytes), the image (the FIRST bytes: perf applies PERF_RECORD_TEXT_POKE
 * to its copy of the image forwards in time, as for `perf record --kcore`,
 * whose kcore copy predates the pokes) and the pokes: one TEXT_POKE record
 * per translation whose bytes differ from the current ones, at the
 * translation's time (the new bytes run from then on). */
typedef struct {
	GHashTable *now, *first;       /* page number -> Page */
	GByteArray *pokes;             /* PERF_RECORD_TEXT_POKE records */
} Code;

static Page *page_of(GHashTable *pages, uint64_t a)
{
	Page *p = g_hash_table_lookup(pages, GSIZE_TO_POINTER(a / PAGE));

	if (!p) {
		p = g_new0(Page, 1);
		g_hash_table_insert(pages, GSIZE_TO_POINTER(a / PAGE), p);
	}
	return p;
}

/* PERF_RECORD_TEXT_POKE (guest kernel cpumode: perf 6.1 applies only host
 * kernel ones, machine__process_text_poke): addr, old_len, new_len,
 * old bytes, new bytes, padding to 8, sample_id. */
static void poke_record(GByteArray *a, uint64_t addr, const uint8_t *old, const uint8_t *new, uint16_t len,
			uint64_t time)
{
	gsize s = vt_perf_rec_begin(a);
	static const uint8_t zero[8];

	vt_perf_put_u64(a, addr);
	g_byte_array_append(a, (const guint8 *)&len, 2);
	g_byte_array_append(a, (const guint8 *)&len, 2);
	vt_perf_put(a, old, len);
	vt_perf_put(a, new, len);
	vt_perf_put(a, zero, (8 - (12 + 2u * len) % 8) % 8);
	vt_perf_put_sample_id(a, 0, 0, time, 0, 2000);
	vt_perf_rec_end(a, s, PERF_RECORD_TEXT_POKE, PERF_RECORD_MISC_GUEST_KERNEL);
}

static void code_add(Code *c, const VtTcgCodeHeader *h, const uint8_t *b, VtTcgStats *st)
{
	uint32_t lo = h->len, hi = 0;
	g_autofree uint8_t *old = g_malloc(h->len ? h->len : 1);

	for (uint32_t i = 0; i < h->len; i++) {
		uint64_t a = h->vaddr + i;
		Page *p = page_of(c->now, a);
		guint o = a % PAGE;

		old[i] = b[i];
		if ((p->have[o / 8] >> (o % 8)) & 1) {
			old[i] = p->b[o];
			if (p->b[o] != b[i]) {
				st->smc_bytes++;
				lo = MIN(lo, i);
				hi = i + 1;
			}
		} else {
			Page *f = page_of(c->first, a);

			st->code_bytes++;
			f->b[o] = b[i];
			f->have[o / 8] |= (uint8_t)(1u << (o % 8));
		}
		p->b[o] = b[i];
		p->have[o / 8] |= (uint8_t)(1u << (o % 8));
	}
	/* user code differing: another process's, no poke (but the boot's:
	 * firmware, early stages) */
	if (hi && ((h->vaddr >> 63) || (h->flags & VT_TCG_CODE_POKE))) {
		st->smc_translations++;
		poke_record(c->pokes, h->vaddr + lo, old + lo, b + lo, (uint16_t)(hi - lo), h->tsc);
	}
}

/* The image's pages (first bytes) and *pokes; NULL on error. */
static GHashTable *code_load(const char *in_dir, VtTcgStats *st, GByteArray **pokes, GError **error)
{
	g_autofree char *path = g_build_filename(in_dir, "code", NULL);
	g_autofree char *data = NULL;
	gsize len = 0, off = 0;
	Code c;

	if (!g_file_get_contents(path, &data, &len, error))
		return NULL;
	c.now = g_hash_table_new_full(NULL, NULL, NULL, g_free);
	c.first = g_hash_table_new_full(NULL, NULL, NULL, g_free);
	c.pokes = g_byte_array_new();
	while (off + sizeof(VtTcgCodeHeader) <= len) {
		VtTcgCodeHeader h;

		memcpy(&h, data + off, sizeof(h));
		if (h.len > len - off - sizeof(h))
			break;             /* cut short: QEMU was killed */
		code_add(&c, &h, (const uint8_t *)data + off + sizeof(h), st);
		off += sizeof(h) + h.len;
	}
	g_hash_table_destroy(c.now);
	st->code_pages = g_hash_table_size(c.first);
	*pokes = c.pokes;
	return c.first;
}

static gint cmp_u64(gconstpointer a, gconstpointer b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Page numbers, ascending. */
static GArray *code_sorted(GHashTable *pages)
{
	GArray *a = g_array_new(FALSE, FALSE, sizeof(uint64_t));
	GHashTableIter it;
	gpointer k;

	g_hash_table_iter_init(&it, pages);
	while (g_hash_table_iter_next(&it, &k, NULL)) {
		uint64_t pn = GPOINTER_TO_SIZE(k);

		g_array_append_val(a, pn);
	}
	g_array_sort(a, cmp_u64);
	return a;
}

/* An ELF core (ET_CORE, EM_X86_64), one executable PT_LOAD per run of
 * consecutive pages; bytes never executed are zero. */
/* *map_end: the end of the segment holding text (the kernel map's end). */
static GByteArray *kcore_build(GHashTable *pages, GArray *pn, uint64_t text, uint64_t *map_end)
{
	GByteArray *b = g_byte_array_new();
	GArray *runs = g_array_new(FALSE, FALSE, sizeof(Run));
	Elf64_Ehdr eh = { 0 };
	uint64_t off;

	for (guint i = 0; i < pn->len; i++) {
		uint64_t p = g_array_index(pn, uint64_t, i);
		Run *last = runs->len ? &g_array_index(runs, Run, runs->len - 1) : NULL;

		/* one segment over small holes: perf keeps only the segment
		 * holding _stext as the kernel map (the others are merged in
		 * only where no map is yet); user-half code (firmware, boot
		 * code, processes) is sparse: small holes only */
		if (last && (p >> 51) == (last->start >> 51) &&
		    p - (last->start + last->n) < ((p >> 51) ? MERGE_GAP : MERGE_GAP_USER)) {
			last->n = p - last->start + 1;
		} else {
			Run r = { p, 1 };

			g_array_append_val(runs, r);
		}
	}
	memcpy(eh.e_ident, ELFMAG, SELFMAG);
	eh.e_ident[EI_CLASS] = ELFCLASS64;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_ident[EI_VERSION] = EV_CURRENT;
	eh.e_type = ET_CORE;
	eh.e_machine = EM_X86_64;
	eh.e_version = EV_CURRENT;
	eh.e_phoff = sizeof(eh);
	eh.e_ehsize = sizeof(eh);
	eh.e_phentsize = sizeof(Elf64_Phdr);
	eh.e_phnum = (Elf64_Half)runs->len;
	g_byte_array_append(b, (const guint8 *)&eh, sizeof(eh));
	off = (sizeof(eh) + runs->len * sizeof(Elf64_Phdr) + PAGE - 1) / PAGE * PAGE;
	for (guint i = 0; i < runs->len; i++) {
		const Run *r = &g_array_index(runs, Run, i);
		Elf64_Phdr ph = { .p_type = PT_LOAD, .p_flags = PF_R | PF_X, .p_offset = off, .p_vaddr = r->start * PAGE,
				  .p_filesz = r->n * PAGE, .p_memsz = r->n * PAGE, .p_align = PAGE };

		g_byte_array_append(b, (const guint8 *)&ph, sizeof(ph));
		off += r->n * PAGE;
	}
	g_byte_array_set_size(b, (sizeof(eh) + runs->len * sizeof(Elf64_Phdr) + PAGE - 1) / PAGE * PAGE);
	memset(b->data + sizeof(eh) + runs->len * sizeof(Elf64_Phdr), 0,
	       b->len - sizeof(eh) - runs->len * sizeof(Elf64_Phdr));
	for (guint i = 0; i < runs->len; i++) {
		const Run *r = &g_array_index(runs, Run, i);

		for (uint64_t k = 0; k < r->n; k++) {
			const Page *p = g_hash_table_lookup(pages, GSIZE_TO_POINTER(r->start + k));
			guint at = b->len;

			g_byte_array_set_size(b, at + PAGE);
			if (p)
				memcpy(b->data + at, p->b, PAGE);
			else
				memset(b->data + at, 0, PAGE);
		}
	}
	for (guint i = 0; i < runs->len; i++) {
		const Run *r = &g_array_index(runs, Run, i);

		if (text >= r->start * PAGE && text < (r->start + r->n) * PAGE)
			*map_end = (r->start + r->n) * PAGE;
	}
	g_array_unref(runs);
	return b;
}

/* The lowest and highest kernel-half code addresses (0: none). */
static void kernel_range(GArray *pn, uint64_t *lo, uint64_t *hi)
{
	*lo = *hi = 0;
	for (guint i = 0; i < pn->len; i++) {
		uint64_t a = g_array_index(pn, uint64_t, i) * PAGE;

		if (!(a >> 63))
			continue;
		if (!*lo)
			*lo = a;
		*hi = a + PAGE;
	}
}

/* kallsyms: the guest's (kallsyms or System.map: same format), else just
 * _text/_stext at the lowest executed kernel page and _etext after the
 * highest (what perf needs to accept the image). */
static char *kallsyms_text(const char *from, uint64_t lo, uint64_t hi, uint64_t *text, GError **error)
{
	char *s = NULL;

	if (from) {
		g_auto(GStrv) lines = NULL;

		if (!g_file_get_contents(from, &s, NULL, error))
			return NULL;
		lines = g_strsplit(s, "\n", -1);
		*text = 0;
		for (guint i = 0; lines[i] && !*text; i++) {
			guint64 a;
			char name[16];

			if (sscanf(lines[i], "%" G_GINT64_MODIFIER "x %*s %15s", &a, name) == 2 && !strcmp(name, "_text"))
				*text = a;
		}
		if (!*text) {
			g_set_error(error, VT_TCG_ERROR, VT_TCG_ERROR_INPUT, "%s: no _text symbol (not a kallsyms or "
				    "System.map)", from);
			g_free(s);
			return NULL;
		}
		return s;
	}
	*text = lo;
	return g_strdup_printf("%016" G_GINT64_MODIFIER "x T _text\n%016" G_GINT64_MODIFIER "x T _stext\n"
			       "%016" G_GINT64_MODIFIER "x T _etext\n", lo, lo, hi);
}

static gboolean write_image_dir(const char *dir, const GByteArray *kcore, const char *kallsyms, GError **error)
{
	g_autofree char *k = g_build_filename(dir, "kcore", NULL);
	g_autofree char *s = g_build_filename(dir, "kallsyms", NULL);
	g_autofree char *m = g_build_filename(dir, "modules", NULL);

	if (g_mkdir(dir, 0700) < 0 && errno != EEXIST) {
		g_set_error(error, VT_TCG_ERROR, VT_TCG_ERROR_IO, "%s: %s", dir, g_strerror(errno));
		return FALSE;
	}
	return vt_fs_output_write_file(k, VT_FS_OUTPUT_NEW, 0600, kcore->data, kcore->len, error) &&
	       vt_fs_output_write_file(s, VT_FS_OUTPUT_NEW, 0600, kallsyms, strlen(kallsyms), error) &&
	       vt_fs_output_write_file(m, VT_FS_OUTPUT_NEW, 0600, "", 0, error);
}

/* OUT/kcore_dir: the same files (hard links). */
static gboolean link_image_dir(const char *from, const char *to, GError **error)
{
	static const char *const names[] = { "kcore", "kallsyms", "modules" };

	if (g_mkdir(to, 0700) < 0) {
		g_set_error(error, VT_TCG_ERROR, VT_TCG_ERROR_IO, "%s: %s", to, g_strerror(errno));
		return FALSE;
	}
	for (guint i = 0; i < G_N_ELEMENTS(names); i++) {
		g_autofree char *a = g_build_filename(from, names[i], NULL);
		g_autofree char *b = g_build_filename(to, names[i], NULL);

		if (link(a, b) < 0) {
			g_set_error(error, VT_TCG_ERROR, VT_TCG_ERROR_IO, "%s: %s", b, g_strerror(errno));
			return FALSE;
		}
	}
	return TRUE;
}

/* perf decodes guest user code only with --guest-code, from the host
 * thread whose tid is the guest machine's pid (0: the vCPU threads carry
 * pid 0) at the same addresses: one host MMAP (pid 0, tid 0) per user-half
 * segment of the image, the file o->image_path at the segment's offset. */
static GByteArray *user_maps(const VtTcgConvertOptions *o, const GByteArray *kcore)
{
	GByteArray *a = g_byte_array_new();
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)kcore->data;

	for (guint i = 0; o->image_path && i < eh->e_phnum; i++) {
		const Elf64_Phdr *ph = (const Elf64_Phdr *)(kcore->data + eh->e_phoff) + i;
		gsize s;

		if (ph->p_vaddr >> 47)
			continue;
		s = vt_perf_rec_begin(a);
		vt_perf_put_u32(a, 0);
		vt_perf_put_u32(a, 0);
		vt_perf_put_u64(a, ph->p_vaddr);
		vt_perf_put_u64(a, ph->p_memsz);
		vt_perf_put_u64(a, ph->p_offset);
		vt_perf_put_cstr(a, o->image_path, G_MAXSIZE);
		vt_perf_put_sample_id(a, 0, 0, VT_TCG_T0 - 3000, 0, 2000);
		vt_perf_rec_end(a, s, PERF_RECORD_MMAP, PERF_RECORD_MISC_USER);
	}
	return a;
}

/* OUT/guest and OUT/kcore_dir; *text, *end: the kernel map. */
static gboolean image_write(const VtTcgConvertOptions *o, VtTcgStats *st, uint64_t *text, uint64_t *end,
			    GByteArray **pokes, GByteArray **umaps, GError **error)
{
	GHashTable *pages = code_load(o->in_dir, st, pokes, error);
	g_autoptr(GArray) pn = NULL;
	g_autoptr(GByteArray) kcore = NULL;
	g_autofree char *ks = NULL;
	g_autofree char *gdir = g_build_filename(o->out_dir, "guest", NULL);
	g_autofree char *hdir = g_build_filename(o->out_dir, "kcore_dir", NULL);
	uint64_t lo, hi;
	gboolean ok;

	if (!pages)
		return FALSE;
	pn = code_sorted(pages);
	kernel_range(pn, &lo, &hi);
	if (!lo) {
		g_hash_table_destroy(pages);
		g_set_error(error, VT_TCG_ERROR, VT_TCG_ERROR_NO_TRACE, "no kernel code ran: nothing was traced");
		return FALSE;
	}
	ks = kallsyms_text(o->kallsyms, lo, hi, text, error);
	if (!ks) {
		g_hash_table_destroy(pages);
		return FALSE;
	}
	*end = hi;
	kcore = kcore_build(pages, pn, *text, end);
	g_hash_table_destroy(pages);
	*umaps = user_maps(o, kcore);
	ok = write_image_dir(gdir, kcore, ks, error) && link_image_dir(gdir, hdir, error);
	return ok;
}

/* ------------------------------------------------------------ perf.data */
static void attrs(gboolean kernel_only, struct perf_event_attr *pt, struct perf_event_attr *dummy)
{
	memset(pt, 0, sizeof(*pt));
	pt->type = PT_PMU_TYPE;
	pt->size = PERF_ATTR_SIZE_VER7;
	/* pt, branch, tsc, mtc, mtc_period, noretcomp, psb_period 3 (16K) */
	pt->config = 0x1 | 0x2000 | 0x400 | 0x200 | ((uint64_t)VT_TCG_MTC_PERIOD << 14) | 0x800 | (3ULL << 24);
	pt->sample_period = 1;
	pt->sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_IDENTIFIER;
	pt->exclude_user = kernel_only;
	pt->exclude_hv = 1;
	pt->sample_id_all = 1;
	pt->disabled = 1;
	*dummy = *pt;
	dummy->type = PERF_TYPE_SOFTWARE;
	dummy->config = PERF_COUNT_SW_DUMMY;
	dummy->comm = dummy->task = dummy->mmap = dummy->mmap2 = dummy->comm_exec = 1;
}

static void rec_comm(GByteArray *a, uint32_t pid, uint32_t tid, const char *comm, uint64_t id)
{
	gsize s = vt_perf_rec_begin(a);

	vt_perf_put_u32(a, pid);
	vt_perf_put_u32(a, tid);
	vt_perf_put_cstr(a, comm, 15);
	vt_perf_put_sample_id(a, pid, tid, VT_TCG_T0 - 2000, 0, id);
	vt_perf_rec_end(a, s, PERF_RECORD_COMM, 0);
}

static void rec_guest_kernel(GByteArray *a, uint64_t text, uint64_t end, uint64_t id)
{
	gsize s = vt_perf_rec_begin(a);

	vt_perf_put_u32(a, 0);
	vt_perf_put_u32(a, 0);
	vt_perf_put_u64(a, text);
	vt_perf_put_u64(a, end - text);
	vt_perf_put_u64(a, text);
	vt_perf_put_cstr(a, "[guest.kernel.kallsyms]_text", G_MAXSIZE);
	vt_perf_put_sample_id(a, 0, 0, VT_TCG_T0 - 3000, 0, id);
	vt_perf_rec_end(a, s, PERF_RECORD_MMAP, PERF_RECORD_MISC_GUEST_KERNEL);
}

static void rec_itrace_start(GByteArray *a, uint32_t pid, uint32_t tid, uint64_t id)
{
	gsize s = vt_perf_rec_begin(a);

	vt_perf_put_u32(a, pid);
	vt_perf_put_u32(a, tid);
	vt_perf_put_sample_id(a, pid, tid, VT_TCG_T0 - 1000, 0, id);
	vt_perf_rec_end(a, s, PERF_RECORD_ITRACE_START, 0);
}

/* The vCPU threads carry pid 0, the guest machine's in perf: with the QEMU
 * pid, perf 6.1 adds an idle thread on every walk of guest code
 * (intel_pt_get_guest) - gigabytes per MiB of trace. */
static void header_records(GByteArray *sb, const VtTcgConvertOptions *o, GArray *streams, uint64_t text, uint64_t end)
{
	VtPerfTimeConv tc = { .time_shift = 10, .time_mult = 1024, .cap_user_time_zero = 1 };
	uint64_t priv[18] = { 0 };

	vt_perf_put_time_conv(sb, &tc);
	priv[VT_PT_INFO_PMU_TYPE] = PT_PMU_TYPE;
	priv[VT_PT_INFO_TIME_SHIFT] = tc.time_shift;
	priv[VT_PT_INFO_TIME_MULT] = tc.time_mult;
	priv[VT_PT_INFO_CAP_USER_TIME_ZERO] = 1;
	priv[VT_PT_INFO_TSC_BIT] = 0x400;
	priv[VT_PT_INFO_NORETCOMP_BIT] = 0x800;
	priv[VT_PT_INFO_MTC_BIT] = 0x200;
	priv[VT_PT_INFO_MTC_FREQ_BITS] = 0x3c000;
	priv[VT_PT_INFO_TSC_CTC_N] = VT_TCG_CTC_N;
	priv[VT_PT_INFO_TSC_CTC_D] = VT_TCG_CTC_D;
	priv[VT_PT_INFO_CYC_BIT] = 0x2;
	priv[VT_PT_INFO_MAX_NONTURBO_RATIO] = VT_TCG_CBR;
	vt_perf_put_auxtrace_info(sb, priv, G_N_ELEMENTS(priv));
	rec_comm(sb, o->qemu_pid, o->qemu_pid, "qemu-system-x86", 2000);
	for (guint i = 0; i < streams->len; i++) {
		const Stream *s = &g_array_index(streams, Stream, i);
		char name[16];

		g_snprintf(name, sizeof(name), "CPU %u/TCG", s->idx);
		rec_comm(sb, 0, s->tid, name, 2000);
	}
	rec_guest_kernel(sb, text, end, 2000);
	for (guint i = 0; i < streams->len; i++) {
		const Stream *s = &g_array_index(streams, Stream, i);

		rec_itrace_start(sb, 0, s->tid, 1000 + i);
	}
	{
		gsize s = vt_perf_rec_begin(sb);

		vt_perf_rec_end(sb, s, VT_PERF_RECORD_FINISHED_INIT, 0);
	}
}

/* The AUX data of every vCPU, CHUNK bytes per AUXTRACE record, a round at a time. */
/* Where to end a chunk of n bytes that is not a stream's last: at its last
 * PSB (perf 6.1 reports a packet split over two AUXTRACE records as "Bad
 * packet"; a PSB starts a packet, and perf syncs there anyway). */
static uint64_t chunk_cut(const uint8_t *buf, uint64_t n)
{
	static const uint8_t psb[16] = { 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82, 2, 0x82 };

	for (uint64_t k = n - sizeof(psb); k > 0; k--)
		if (buf[k] == 2 && !memcmp(buf + k, psb, sizeof(psb)))
			return k;
	return n;
}

/* The AUX data of every vCPU, up to CHUNK bytes per AUXTRACE record, a
 * round at a time. */
static gboolean aux_write(VtPerfWriter *w, const VtTcgConvertOptions *o, GArray *streams, GError **error)
{
	g_autofree uint8_t *buf = g_malloc(CHUNK);
	g_autofree uint64_t *pos = g_new0(uint64_t, MAX(streams->len, 1));
	gboolean more = TRUE;

	while (more) {
		struct perf_event_header fr = { .type = VT_PERF_RECORD_FINISHED_ROUND, .size = 8 };

		more = FALSE;
		for (guint i = 0; i < streams->len; i++) {
			const Stream *s = &g_array_index(streams, Stream, i);
			g_autofree char *name = g_strdup_printf("vcpu%u.pt", s->idx);
			g_autofree char *path = g_build_filename(o->in_dir, name, NULL);
			VtPerfAuxtrace aux = { .offset = pos[i], .reference = VT_TCG_T0 + pos[i], .idx = i, .tid = s->tid,
					       .cpu = (uint32_t)-1 };
			uint64_t n;
			int fd;
			gboolean ok;

			if (pos[i] >= s->bytes)
				continue;
			n = MIN(CHUNK, s->bytes - pos[i]);
			fd = vt_fs_open_regular(path, O_RDONLY, error);
			if (fd < 0)
				return FALSE;
			ok = pread(fd, buf, n, (off_t)pos[i]) == (ssize_t)n;
			close(fd);
			if (!ok) {
				g_set_error(error, VT_TCG_ERROR, VT_TCG_ERROR_INPUT, "%s: shorter than the %" G_GUINT64_FORMAT
					    " bytes the plugin wrote", path, s->bytes);
				return FALSE;
			}
			if (pos[i] + n < s->bytes)
				n = chunk_cut(buf, n);
			if (!vt_perf_writer_write_auxtrace(w, &aux, buf, n, NULL, error))
				return FALSE;
			pos[i] += n;
			more = more || pos[i] < s->bytes;
		}
		if (!vt_perf_writer_write_record(w, &fr, error))
			return FALSE;
	}
	return TRUE;
}

static gboolean features(VtPerfWriter *w, const VtTcgConvertOptions *o, struct perf_event_attr *pt,
			 struct perf_event_attr *dummy, const uint64_t *pt_ids, const uint64_t *dummy_ids, guint n,
			 gboolean kernel_only, GError **error)
{
	const VtPerfEventDesc ev[2] = { { pt, kernel_only ? "intel_pt//k" : "intel_pt//", pt_ids, n },
					{ dummy, kernel_only ? "dummy:k" : "dummy", dummy_ids, n } };
	const uint32_t types[2] = { PT_PMU_TYPE, PERF_TYPE_SOFTWARE };
	const char *const pmus[2] = { "intel_pt", "software" };
	uint32_t nr[2] = { n, n };
	g_autoptr(GByteArray) a = g_byte_array_new();
	g_autoptr(GByteArray) b = g_byte_array_new();
	g_autoptr(GByteArray) c = g_byte_array_new();

	vt_perf_put_event_desc(a, ev, 2);
	vt_perf_put_pmu_mappings(b, types, pmus, 2);
	if (o->argv)
		vt_perf_put_cmdline(c, o->argv);
	return vt_perf_writer_set_feature_string(w, VT_PERF_FEAT_OSRELEASE, "guest (QEMU TCG)", error) &&
	       vt_perf_writer_set_feature_string(w, VT_PERF_FEAT_HOSTNAME, g_get_host_name(), error) &&
	       vt_perf_writer_set_feature_string(w, VT_PERF_FEAT_ARCH, "x86_64", error) &&
	       vt_perf_writer_set_feature_string(w, VT_PERF_FEAT_CPUID, "GenuineIntel,6,85,4", error) &&
	       vt_perf_writer_set_feature_string(w, VT_PERF_FEAT_VERSION, "vmtrace record --source tcg " PACKAGE_VERSION,
						 error) &&
	       vt_perf_writer_set_feature(w, VT_PERF_FEAT_EVENT_DESC, a->data, a->len, error) &&
	       vt_perf_writer_set_feature(w, VT_PERF_FEAT_PMU_MAPPINGS, b->data, b->len, error) &&
	       vt_perf_writer_set_feature(w, VT_PERF_FEAT_NRCPUS, nr, sizeof(nr), error) &&
	       (!o->argv || vt_perf_writer_set_feature(w, VT_PERF_FEAT_CMDLINE, c->data, c->len, error));
}

static gboolean perf_write(const VtTcgConvertOptions *o, VtTcgStats *st, GArray *streams, uint64_t text,
			   uint64_t end, const GByteArray *pokes, const GByteArray *umaps, GError **error)
{
	VtPerfWriter *w = vt_perf_writer_new(o->out_dir, TRUE, error);
	struct perf_event_attr pt, dummy;
	g_autofree uint64_t *pt_ids = g_new0(uint64_t, MAX(streams->len, 1));
	g_autofree uint64_t *dummy_ids = g_new0(uint64_t, MAX(streams->len, 1));
	g_autoptr(GByteArray) sb = g_byte_array_new();
	g_autofree char *data = g_build_filename(o->out_dir, "data", NULL);
	gboolean ok;

	if (!w)
		return FALSE;
	for (guint i = 0; i < streams->len; i++) {
		pt_ids[i] = 1000 + i;
		dummy_ids[i] = 2000 + i;
	}
	attrs(st->kernel_only, &pt, &dummy);
	header_records(sb, o, streams, text, end);
	g_byte_array_append(sb, umaps->data, umaps->len);
	g_byte_array_append(sb, pokes->data, pokes->len);
	ok = vt_perf_writer_add_attr(w, &pt, pt_ids, streams->len, error) &&
	     vt_perf_writer_add_attr(w, &dummy, dummy_ids, streams->len, error) &&
	     vt_perf_writer_write_records(w, sb->data, sb->len, error) && aux_write(w, o, streams, error) &&
	     features(w, o, &pt, &dummy, pt_ids, dummy_ids, streams->len, st->kernel_only, error) &&
	     vt_perf_writer_finish(w, error);
	vt_perf_writer_free(w);
	if (ok) {
		GStatBuf sbuf;

		st->file_bytes = g_stat(data, &sbuf) == 0 ? (uint64_t)sbuf.st_size : 0;
	}
	return ok;
}

gboolean vt_tcg_convert(const VtTcgConvertOptions *o, VtTcgStats *st, GError **error)
{
	g_autoptr(GArray) streams = g_array_new(FALSE, FALSE, sizeof(Stream));
	g_autoptr(GByteArray) pokes = NULL;
	g_autoptr(GByteArray) umaps = NULL;
	uint64_t text = 0, end = 0;

	if (!read_meta(o->in_dir, st, streams, error))
		return FALSE;
	distinct_tids(streams);
	for (guint i = 0; i < streams->len && i < st->n_per_vcpu; i++)
		st->per_vcpu[i].tid = g_array_index(streams, Stream, i).tid;
	if (!streams->len) {
		g_set_error(error, VT_TCG_ERROR, VT_TCG_ERROR_NO_TRACE,
			    "no vCPU reached kernel code (address bit 63 set): nothing was traced");
		return FALSE;
	}
	return image_write(o, st, &text, &end, &pokes, &umaps, error) &&
	       perf_write(o, st, streams, text, end, pokes, umaps, error);
}
