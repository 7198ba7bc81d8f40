/* kcore.c - which guest address ranges decoding needs (from kallsyms and
 * modules), the PT_LOAD segments of the guest's /proc/kcore (its headers
 * read by ranges, parsed with libelf), and a trimmed ELF64 core with only
 * those ranges, written with libelf.  Like perf's kcore copy: kernel text
 * (_stext.._etext), the module area (modules, BPF JIT images, ftrace/kprobe
 * and BPF trampolines: every "[...]" symbol of kallsyms) and the x86 PTI
 * entry trampolines. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <string.h>
#include <unistd.h>

#include "guestfs/guestfs.h"
#include "src/fs/output.h"

#define PAGE 4096ULL
#define ALIGN_DOWN(x) ((x) & ~(PAGE - 1))
#define ALIGN_UP(x) (((x) + PAGE - 1) & ~(PAGE - 1))

void vt_guest_kallsyms_clear(VtGuestKallsyms *ks)
{
	if (ks->trampolines)
		g_array_free(ks->trampolines, TRUE);
	memset(ks, 0, sizeof(*ks));
}

static void extend(guint64 *lo, guint64 *hi, guint64 start, guint64 end)
{
	if (!*lo || start < *lo)
		*lo = start;
	if (end > *hi)
		*hi = end;
}

/* x86 PTI entry trampolines as kernels 4.15-4.19 list them in kallsyms (one
 * per CPU, in the CPU entry area); later kernels enter through
 * __entry_text_start..__entry_text_end, also mapped in user page tables. */
static gboolean is_entry_trampoline(const char *name)
{
	return !strcmp(name, "__entry_SYSCALL_64_trampoline");
}

/* The next line of a NUL-terminated buffer (terminated in place), NULL at
 * the end.  Linear, unlike g_strsplit (whose strstr calls are quadratic
 * under ASan on a 4 MiB kallsyms). */
static char *next_line(char **cursor)
{
	char *l = *cursor, *nl;

	if (!l || !*l)
		return NULL;
	nl = strchr(l, '\n');
	if (nl)
		*nl = '\0';
	*cursor = nl ? nl + 1 : NULL;
	return l;
}

gboolean vt_guest_kallsyms_parse(GBytes *kallsyms, GBytes *modules, VtGuestKallsyms *ks, GError **error)
{
	g_autofree char *text = vt_guest_bytes_dup(kallsyms);
	g_autofree char *mtext = modules ? vt_guest_bytes_dup(modules) : NULL;
	char *cur = text, *l;
	gboolean nonzero = FALSE;
	guint lineno = 0;

	memset(ks, 0, sizeof(*ks));
	ks->trampolines = g_array_new(FALSE, FALSE, sizeof(guint64));
	while ((l = next_line(&cur))) {
		char *end, *name, *tab;
		guint64 addr;

		lineno++;
		if (!*l)
			continue;
		addr = g_ascii_strtoull(l, &end, 16);
		if (end == l || end[0] != ' ' || !end[1] || end[2] != ' ' || !end[3]) {
			g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_BAD_DATA,
				    "kallsyms line %u is malformed (not ADDRESS TYPE NAME)", lineno);
			vt_guest_kallsyms_clear(ks);
			return FALSE;
		}
		ks->nsyms++;
		nonzero |= addr != 0;
		name = end + 3;
		tab = strchr(name, '\t');
		if (tab) {             /* "name\t[module]": module, BPF, trampolines */
			*tab = '\0';
			if (addr)
				extend(&ks->mod_start, &ks->mod_end, addr, addr + PAGE);
			continue;
		}
		if (!strcmp(name, "_stext") || (!ks->stext && !strcmp(name, "_text")))
			ks->stext = addr;
		else if (!strcmp(name, "_etext"))
			ks->etext = addr;
		else if (!strcmp(name, "__entry_text_start"))
			ks->entry_start = addr;
		else if (!strcmp(name, "__entry_text_end"))
			ks->entry_end = addr;
		else if (addr && is_entry_trampoline(name))
			g_array_append_val(ks->trampolines, addr);
	}
	ks->all_zero = ks->nsyms && !nonzero;
	if (!ks->nsyms) {
		g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_BAD_DATA, "kallsyms is empty (an sshfs mount needs -o direct_io: /proc files report size 0)");
		vt_guest_kallsyms_clear(ks);
		return FALSE;
	}
	/* "e1000 159744 0 - Live 0xffffffffc0010000 ..." */
	for (cur = mtext; (l = next_line(&cur));) {
		g_auto(GStrv) f = g_strsplit_set(l, " ", -1);
		guint64 size, addr;

		if (g_strv_length(f) < 6 || !g_ascii_string_to_unsigned(f[1], 10, 0, G_MAXUINT64, &size, NULL) ||
		    !g_str_has_prefix(f[5], "0x") ||
		    !g_ascii_string_to_unsigned(f[5] + 2, 16, 0, G_MAXUINT64, &addr, NULL) || !addr)
			continue;
		extend(&ks->mod_start, &ks->mod_end, addr, addr + size);
	}
	return TRUE;
}

static gint range_cmp(gconstpointer a, gconstpointer b)
{
	const VtGuestRange *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

GArray *vt_guest_kallsyms_ranges(const VtGuestKallsyms *ks)
{
	GArray *r = g_array_new(FALSE, FALSE, sizeof(VtGuestRange)), *out;

	if (ks->stext && ks->etext > ks->stext)
		g_array_append_val(r, ((VtGuestRange){ ALIGN_DOWN(ks->stext), ALIGN_UP(ks->etext), "kernel text" }));
	if (ks->mod_start)
		g_array_append_val(r, ((VtGuestRange){ ALIGN_DOWN(ks->mod_start), ALIGN_UP(ks->mod_end), "modules/BPF" }));
	if (ks->entry_start && ks->entry_end > ks->entry_start)
		g_array_append_val(r, ((VtGuestRange){ ALIGN_DOWN(ks->entry_start), ALIGN_UP(ks->entry_end), "entry text" }));
	for (guint i = 0; i < ks->trampolines->len; i++) {
		guint64 a = g_array_index(ks->trampolines, guint64, i);

		g_array_append_val(r, ((VtGuestRange){ ALIGN_DOWN(a), ALIGN_DOWN(a) + PAGE, "entry trampoline" }));
	}
	g_array_sort(r, range_cmp);
	out = g_array_new(FALSE, FALSE, sizeof(VtGuestRange));
	for (guint i = 0; i < r->len; i++) {
		VtGuestRange *c = &g_array_index(r, VtGuestRange, i);
		VtGuestRange *last = out->len ? &g_array_index(out, VtGuestRange, out->len - 1) : NULL;

		if (last && c->start <= last->end)
			last->end = MAX(last->end, c->end);
		else
			g_array_append_val(out, *c);
	}
	g_array_free(r, TRUE);
	return out;
}

/* --- reading kcore's headers ---------------------------------------------- */
static gboolean read_exact(VtGuestSource *src, const char *path, guint64 off, void *buf, gsize len, GError **error)
{
	gsize got = 0;

	if (!vt_guest_source_pread(src, path, off, buf, len, &got, error))
		return FALSE;
	if (got != len) {
		g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_BAD_DATA,
			    "%s: short read at offset 0x%" G_GINT64_MODIFIER "x (%zu of %zu bytes)", path, off, got, len);
		return FALSE;
	}
	return TRUE;
}

GArray *vt_guest_kcore_segments(VtGuestSource *src, const char *path, GError **error)
{
	guint8 ident[64];
	g_autofree guint8 *hdr = NULL;
	Elf64_Ehdr eh;
	gsize hlen;
	Elf *e;
	GElf_Ehdr geh;
	size_t nph = 0;
	GArray *segs;

	if (!read_exact(src, path, 0, ident, sizeof(ident), error))
		return NULL;
	memcpy(&eh, ident, sizeof(eh));
	if (memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_type != ET_CORE || eh.e_phentsize != sizeof(Elf64_Phdr) ||
	    !eh.e_phnum || eh.e_phnum == PN_XNUM || eh.e_phoff > (1u << 20)) {
		g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_BAD_DATA,
			    "%s is not a little-endian ELF64 core file with program headers", path);
		return NULL;
	}
	/* Only the headers: ELF header + program header table. */
	hlen = (gsize)eh.e_phoff + (gsize)eh.e_phnum * sizeof(Elf64_Phdr);
	hdr = g_malloc0(hlen);
	if (!read_exact(src, path, 0, hdr, hlen, error))
		return NULL;
	elf_version(EV_CURRENT);
	((Elf64_Ehdr *)(void *)hdr)->e_shoff = 0;     /* no section headers are read */
	((Elf64_Ehdr *)(void *)hdr)->e_shnum = 0;
	e = elf_memory((char *)hdr, hlen);
	if (!e || elf_kind(e) != ELF_K_ELF || !gelf_getehdr(e, &geh) || elf_getphdrnum(e, &nph) < 0) {
		g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_BAD_DATA, "%s: libelf: %s", path, elf_errmsg(-1));
		if (e)
			elf_end(e);
		return NULL;
	}
	segs = g_array_new(FALSE, FALSE, sizeof(VtGuestKcoreSeg));
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD || !ph.p_filesz)
			continue;
		/* the guest's data is not trusted: no segment may wrap */
		if (ph.p_vaddr + ph.p_filesz < ph.p_vaddr || ph.p_offset + ph.p_filesz < ph.p_offset) {
			g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_BAD_DATA,
				    "%s: PT_LOAD %zu (vaddr 0x%" G_GINT64_MODIFIER "x, offset 0x%" G_GINT64_MODIFIER
				    "x, size 0x%" G_GINT64_MODIFIER "x) wraps around: not a kcore", path, i,
				    (guint64)ph.p_vaddr, (guint64)ph.p_offset, (guint64)ph.p_filesz);
			g_array_free(segs, TRUE);
			elf_end(e);
			return NULL;
		}
		g_array_append_val(segs, ((VtGuestKcoreSeg){ ph.p_vaddr, ph.p_offset, ph.p_filesz }));
	}
	elf_end(e);
	return segs;
}

/* The pieces of `ranges` that kcore maps: (vaddr, source offset, size). */
static GArray *pieces(const GArray *segs, const GArray *ranges)
{
	GArray *out = g_array_new(FALSE, FALSE, sizeof(VtGuestKcoreSeg));

	for (guint i = 0; i < ranges->len; i++) {
		const VtGuestRange *r = &g_array_index(ranges, VtGuestRange, i);
		guint64 a = r->start;

		while (a < r->end) {
			const VtGuestKcoreSeg *in = NULL;
			guint64 next = r->end;

			for (guint j = 0; j < segs->len && !in; j++) {
				const VtGuestKcoreSeg *s = &g_array_index(segs, VtGuestKcoreSeg, j);

				if (a >= s->vaddr && a - s->vaddr < s->size)
					in = s;
				else if (s->vaddr > a && s->vaddr < next)
					next = s->vaddr;
			}
			if (!in) {
				a = next;      /* a hole: skip to the next segment */
				continue;
			}
			next = MIN(r->end, in->vaddr + in->size);
			g_array_append_val(out, ((VtGuestKcoreSeg){ a, in->offset + (a - in->vaddr), next - a }));
			a = next;
		}
	}
	return out;
}

/* ELF header and one PT_LOAD per piece, laid out by us (ELF_F_LAYOUT). */
static gboolean write_headers(int fd, GArray *p, const char *out_path, GError **error)
{
	Elf *e;
	GElf_Ehdr eh;
	guint64 off = ALIGN_UP(sizeof(Elf64_Ehdr) + p->len * sizeof(Elf64_Phdr));
	gboolean ok = FALSE;

	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_WRITE, NULL);
	if (!e || !gelf_newehdr(e, ELFCLASS64) || !gelf_getehdr(e, &eh))
		goto out;
	eh.e_ident[EI_DATA] = ELFDATA2LSB;
	eh.e_ident[EI_OSABI] = ELFOSABI_NONE;
	eh.e_type = ET_CORE;
	eh.e_machine = EM_X86_64;
	eh.e_version = EV_CURRENT;
	eh.e_phoff = sizeof(Elf64_Ehdr);
	if (!gelf_update_ehdr(e, &eh) || !gelf_newphdr(e, p->len))
		goto out;
	for (guint i = 0; i < p->len; i++) {
		const VtGuestKcoreSeg *s = &g_array_index(p, VtGuestKcoreSeg, i);
		GElf_Phdr ph = { .p_type = PT_LOAD, .p_flags = PF_R | PF_W | PF_X, .p_offset = off, .p_vaddr = s->vaddr,
				 .p_filesz = s->size, .p_memsz = s->size, .p_align = PAGE };

		if (!gelf_update_phdr(e, (int)i, &ph))
			goto out;
		off += ALIGN_UP(s->size);
	}
	elf_flagelf(e, ELF_C_SET, ELF_F_LAYOUT);
	ok = elf_update(e, ELF_C_WRITE) >= 0;
out:
	if (!ok)
		g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_FAILED, "cannot write the ELF headers of %s: %s",
			    out_path, elf_errmsg(-1));
	if (e)
		elf_end(e);
	return ok;
}

gboolean vt_guest_kcore_copy(VtGuestSource *src, const char *path, const GArray *ranges, const char *out_path,
			     const volatile sig_atomic_t *stop, guint64 *copied, GError **error)
{
	GArray *segs = vt_guest_kcore_segments(src, path, error), *p = NULL;
	const gsize chunk = 1u << 20;
	g_autofree guint8 *buf = NULL;
	guint64 off;
	gboolean ok = FALSE;
	int fd = -1;

	*copied = 0;
	if (!segs)
		return FALSE;
	p = pieces(segs, ranges);
	if (!p->len) {
		g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_BAD_DATA,
			    "%s maps none of the kernel text and module ranges", path);
		goto out;
	}
	{
		guint64 total = 0;

		for (guint i = 0; i < p->len; i++)
			total += g_array_index(p, VtGuestKcoreSeg, i).size;
		if (total > VT_GUEST_KCORE_MAX) {
			g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_BAD_DATA,
				    "%s: the kernel text and module ranges would copy %" G_GUINT64_FORMAT
				    " MiB, more than any kernel has (%u MiB at most): bad kallsyms or kcore",
				    path, total >> 20, (unsigned)(VT_GUEST_KCORE_MAX >> 20));
			goto out;
		}
	}
	fd = open(out_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_FAILED, "cannot create %s: %s", out_path,
			    g_strerror(errno));
		goto out;
	}
	if (!write_headers(fd, p, out_path, error))
		goto out;
	buf = g_malloc(chunk);
	off = ALIGN_UP(sizeof(Elf64_Ehdr) + p->len * sizeof(Elf64_Phdr));
	for (guint i = 0; i < p->len; i++) {
		const VtGuestKcoreSeg *s = &g_array_index(p, VtGuestKcoreSeg, i);

		for (guint64 done = 0; done < s->size;) {
			gsize len = (gsize)MIN((guint64)chunk, s->size - done);

			if (stop && *stop) {
				g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_INTERRUPTED,
					    "interrupted while copying %s", path);
				goto out;
			}
			if (!read_exact(src, path, s->offset + done, buf, len, error) ||
			    !vt_fs_write_all(fd, buf, len, off + done, out_path, error))
				goto out;
			done += len;
			*copied += len;
		}
		off += ALIGN_UP(s->size);
	}
	if (fsync(fd) < 0) {
		g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_FAILED, "cannot write %s: %s", out_path,
			    g_strerror(errno));
		goto out;
	}
	ok = TRUE;
out:
	if (fd >= 0 && close(fd) < 0 && ok) {
		g_set_error(error, VT_GUEST_ERROR, VT_GUEST_ERROR_FAILED, "cannot write %s: %s", out_path,
			    g_strerror(errno));
		ok = FALSE;
	}
	g_array_free(segs, TRUE);
	if (p)
		g_array_free(p, TRUE);
	return ok;
}
