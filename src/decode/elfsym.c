/* elfsym.c - an ELF file's PT_LOADs and symbols as perf 6.1 reads them
 * (util/symbol-elf.c, util/symbol.c): guest user files (guest-user.c)
 * and kernel vmlinux files (image.c, --vmlinux/--guestvmlinux).
 *
 * Symbols come from .symtab, else .dynsym.  Kernel rules are perf's
 * dso__load_sym(): named, defined, not SHN_ABS, in an SHF_ALLOC section;
 * FUNC, GNU_IFUNC and OBJECT anywhere, NOTYPE labels (not hidden or
 * internal) in sections whose name holds "text" or "data".  User rules
 * (guest-user.c's since session 13, checked against perf there): FUNC,
 * GNU_IFUNC and NOTYPE in "text" sections.  Then perf's fixups: sorted,
 * a zero size ends at the next symbol (symbols__fixup_end), of the
 * symbols at one address the one choose_best_symbol() keeps. */
#include "config.h"

#include <fcntl.h>
#include <gelf.h>
#include <string.h>
#include <unistd.h>

#include "src/decode/internal.h"
#include "src/perf/perf-data.h"

static guint underscores(const char *s)
{
	guint n = 0;

	while (s[n] == '_')
		n++;
	return n;
}

/* perf's choose_best_symbol: TRUE to keep a over b */
static gboolean better(const VtElfSym *a, const VtElfSym *b)
{
	gboolean as = a->end > a->start, bs = b->end > b->start;
	gsize na, nb;

	if (as != bs)
		return as;
	if ((a->bind == STB_WEAK) != (b->bind == STB_WEAK))
		return b->bind == STB_WEAK;
	if ((a->bind == STB_GLOBAL) != (b->bind == STB_GLOBAL))
		return a->bind == STB_GLOBAL;
	if (underscores(a->name) != underscores(b->name))
		return underscores(a->name) < underscores(b->name);
	na = strlen(a->name);
	nb = strlen(b->name);
	return na >= nb;
}

static gint cmp_sym(gconstpointer a, gconstpointer b)
{
	const VtElfSym *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

static gboolean wanted_sym(const GElf_Sym *s, const GElf_Shdr *sec, const char *secname, gboolean kernel)
{
	int type = GELF_ST_TYPE(s->st_info), vis = GELF_ST_VISIBILITY(s->st_other);

	if (!s->st_name || s->st_shndx == SHN_UNDEF || s->st_shndx == SHN_ABS || !secname)
		return FALSE;
	if (!kernel)
		return (type == STT_FUNC || type == STT_GNU_IFUNC || type == STT_NOTYPE) && strstr(secname, "text");
	if (!(sec->sh_flags & SHF_ALLOC))
		return FALSE;
	if (type == STT_FUNC || type == STT_GNU_IFUNC || type == STT_OBJECT)
		return TRUE;
	return type == STT_NOTYPE && vis != STV_HIDDEN && vis != STV_INTERNAL &&
	       (strstr(secname, "text") || strstr(secname, "data"));
}

/* The symbols of one symbol table section. */
static void read_symtab(VtElfFile *f, Elf *e, Elf_Scn *scn, const GElf_Shdr *sh, gsize shstrndx, gboolean kernel,
			GArray *all)
{
	Elf_Data *d = elf_getdata(scn, NULL);
	gsize n = sh->sh_entsize ? sh->sh_size / sh->sh_entsize : 0;

	for (gsize i = 0; d && i < n; i++) {
		GElf_Sym s;
		GElf_Shdr tsh;
		Elf_Scn *t;
		const char *name, *sec;
		VtElfSym g;

		if (!gelf_getsym(d, (int)i, &s) || s.st_shndx >= SHN_LORESERVE)
			continue;
		t = elf_getscn(e, s.st_shndx);
		sec = t && gelf_getshdr(t, &tsh) ? elf_strptr(e, shstrndx, tsh.sh_name) : NULL;
		name = elf_strptr(e, sh->sh_link, s.st_name);
		if (!name || !*name || !wanted_sym(&s, &tsh, sec, kernel))
			continue;
		g = (VtElfSym){ s.st_value, s.st_value + s.st_size, g_string_chunk_insert_const(f->strings, name),
				GELF_ST_BIND(s.st_info), GELF_ST_TYPE(s.st_info), (guint16)s.st_shndx };
		g_array_append_val(all, g);
	}
}

/* Sorted, zero sizes ended at the next symbol, one per address. */
static void fix_syms(VtElfFile *f, GArray *all)
{
	g_array_sort(all, cmp_sym);
	for (guint i = 0; i < all->len; i++) {
		VtElfSym *s = &g_array_index(all, VtElfSym, i);

		if (s->end == s->start && i + 1 < all->len)
			s->end = g_array_index(all, VtElfSym, i + 1).start;
	}
	for (guint i = 0; i < all->len; i++) {
		const VtElfSym *s = &g_array_index(all, VtElfSym, i);
		VtElfSym *last = f->syms->len ? &g_array_index(f->syms, VtElfSym, f->syms->len - 1) : NULL;

		if (last && last->start == s->start) {
			if (!better(last, s)) {
				g_array_append_val(f->hidden, *last);
				*last = *s;
			} else {
				g_array_append_val(f->hidden, *s);
			}
		} else {
			g_array_append_val(f->syms, *s);
		}
	}
}

/* The GNU build id in note section scn, hex (NULL: none there). */
static char *build_id_of(Elf_Scn *scn)
{
	Elf_Data *d = elf_getdata(scn, NULL);
	GElf_Nhdr nh;
	size_t off = 0, name_off, desc_off;

	while (d && (off = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
		if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && !memcmp((const char *)d->d_buf + name_off, "GNU", 4) &&
		    nh.n_descsz && nh.n_descsz <= 64)   /* (compared as perf does: its first 20 bytes) */
			return vt_perf_hex((const guint8 *)d->d_buf + desc_off, nh.n_descsz);
	}
	return NULL;
}

VtElfFile *vt_elf_file_new(void)
{
	VtElfFile *f = g_new0(VtElfFile, 1);

	f->loads = g_array_new(FALSE, FALSE, sizeof(VtElfLoad));
	f->sections = g_array_new(FALSE, TRUE, sizeof(VtElfSection));
	f->syms = g_array_new(FALSE, FALSE, sizeof(VtElfSym));
	f->hidden = g_array_new(FALSE, FALSE, sizeof(VtElfSym));
	f->strings = g_string_chunk_new(4096);
	return f;
}

void vt_elf_file_free(VtElfFile *f)
{
	if (!f)
		return;
	g_array_free(f->loads, TRUE);
	g_array_free(f->sections, TRUE);
	g_array_free(f->syms, TRUE);
	g_array_free(f->hidden, TRUE);
	g_string_chunk_free(f->strings);
	g_free(f->build_id);
	g_free(f);
}

gboolean vt_elf_file_read(VtElfFile *f, const char *path, gboolean kernel, GError **error)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	Elf *e = NULL;
	size_t nph = 0, shstrndx = 0;
	Elf_Scn *scn = NULL, *symtab = NULL, *dynsym = NULL;
	GElf_Shdr sh, symsh;
	GArray *all;

	elf_version(EV_CURRENT);
	if (fd < 0 || !(e = elf_begin(fd, ELF_C_READ, NULL)) || elf_kind(e) != ELF_K_ELF || elf_getphdrnum(e, &nph) ||
	    elf_getshdrstrndx(e, &shstrndx)) {
		g_set_error(error, VT_DECODE_ERROR, VT_DECODE_ERROR_BAD_IMAGE, "%s: not a readable ELF file", path);
		if (e)
			elf_end(e);
		if (fd >= 0)
			close(fd);
		return FALSE;
	}
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD) {
			VtElfLoad l = { ph.p_vaddr, ph.p_offset, ph.p_filesz, (ph.p_flags & PF_X) != 0 };

			g_array_append_val(f->loads, l);
		}
	}
	while ((scn = elf_nextscn(e, scn))) {
		size_t i = elf_ndxscn(scn);
		const char *name;

		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_SYMTAB || sh.sh_type == SHT_DYNSYM)
			*(sh.sh_type == SHT_SYMTAB ? &symtab : &dynsym) = scn;
		if (sh.sh_type == SHT_NOTE && !f->build_id)
			f->build_id = build_id_of(scn);
		if (i < G_MAXUINT16 && (name = elf_strptr(e, shstrndx, sh.sh_name))) {
			if (f->sections->len <= i)
				g_array_set_size(f->sections, (guint)i + 1);
			g_array_index(f->sections, VtElfSection, i) = (VtElfSection){ sh.sh_addr, sh.sh_size,
				g_string_chunk_insert_const(f->strings, name), (sh.sh_flags & SHF_ALLOC) != 0 };
		}
	}
	all = g_array_new(FALSE, FALSE, sizeof(VtElfSym));
	if ((symtab || dynsym) && gelf_getshdr(symtab ? symtab : dynsym, &symsh))
		read_symtab(f, e, symtab ? symtab : dynsym, &symsh, shstrndx, kernel, all);
	fix_syms(f, all);
	g_array_free(all, TRUE);
	elf_end(e);
	close(fd);
	return TRUE;
}
