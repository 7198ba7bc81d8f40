/* guest-user.c - guest user space of an injected recording (vmtrace
 * inject, perf inject --guest-data): the guest's executable MMAP/MMAP2
 * records, each file's code and symbols, found as perf 6.1 finds a guest
 * machine's files with --guestmount DIR: DIR/<machine pid>/<path>.
 *
 * Code, per guest process as perf keys it (the maps of the guest thread on
 * the vCPU): the decoder asks for the code at an address with the guest
 * process running then (recording.c: the guest switch-in records on the
 * vCPU, guest-threads.c).  A process's code at an address is that of its
 * last mapping there made by then, else its parent's at the fork (perf
 * clones the parent's maps); a process with neither - forked before the
 * guest's recording began (no FORK) and without MMAP2s of its own - that
 * of the processes with its comm, if they all map the same file there,
 * else none.  With no process known (before the vCPU's first guest
 * switch-in) that of every process, if they all agree, else none: never
 * another program's code, silently (the decoder reports the address it
 * has no code for; script names the process).  Each mapping whose file is
 * found is an image of the file's executable PT_LOADs at the addresses the
 * mapping gives them (address = start + file offset - pgoff); script
 * disassembles it per process too (vt_decode_guest_user_image_at).
 * attach() also joins every mapping to the guest kernel's image (one
 * address space for all: what is read where no process is known).
 *
 * Symbols as perf's ELF loader takes them: .symtab, else .dynsym; named
 * functions, GNU ifuncs and labels (NOTYPE) of sections whose name holds
 * "text"; a symbol ends at st_value + st_size, a zero-sized one at the next
 * symbol; of symbols at one address the one perf's choose_best_symbol
 * keeps (sized, not weak, global, fewer leading '_', the longer name). */
#include "config.h"

#include <fcntl.h>
#include <gelf.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "src/decode/internal.h"
#include "vmcorr/session.h"

typedef struct {
	char *found;              /* the file read, NULL: not found */
	VtElfFile *elf;
} GuFile;

typedef struct {
	gint32 pid;
	guint64 time;             /* host perf time of the record (0: none) */
	guint64 start, len, pgoff;
	const char *path;         /* in u->strings */
	const char *build_id;     /* hex, in u->strings; NULL: the record has none */
	GuFile *file;             /* NULL: not found */
	VtDecodeImage *img;       /* its code (vt_decode_guest_user_prepare) */
	gboolean shadowed;        /* a later mapping of pid overlaps it */
	gboolean contested;       /* a mapping of any process overlaps it with other code */
} GuMap;

typedef struct {
	gint32 ppid;              /* the process it was forked from */
	guint64 time;
} GuFork;

typedef struct {
	guint64 time;             /* host perf time of the COMM record (0: none) */
	const char *comm;         /* in u->strings */
} GuComm;

struct VtDecodeGuestUser {
	gint32 machine_pid;
	GArray *maps;             /* GuMap, record order */
	GHashTable *files;        /* path -> GuFile */
	GStringChunk *strings;
	GHashTable *build_ids;    /* path -> hex build id (HEADER_BUILD_ID, guest machine) */
	GHashTable *forks;        /* pid -> GuFork: a new process's first FORK */
	GHashTable *by_pid;       /* pid -> GArray of indexes into maps (record order) */
	GHashTable *images;       /* "path start len pgoff" -> VtDecodeImage, owned */
	GHashTable *comms;        /* pid -> GArray of GuComm (record order) */
	GHashTable *by_comm;      /* comm (in strings) -> GArray of pids that had it */
	GMutex lock;              /* guards unresolved (decoding threads) */
	GHashTable *unresolved;   /* pid -> first guest user address without code */
	guint n_missing;
};

static void file_free(gpointer p)
{
	GuFile *f = p;

	g_free(f->found);
	vt_elf_file_free(f->elf);
	g_free(f);
}

static GuFile *file_new(void)
{
	GuFile *f = g_new0(GuFile, 1);

	f->elf = vt_elf_file_new();
	return f;
}

/* PT_LOADs and symbols of the ELF file at path (perf's rules for user files). */
static gboolean read_elf(GuFile *f, const char *path, GError **error)
{
	if (vt_elf_file_read(f->elf, path, FALSE, error))
		return TRUE;
	g_prefix_error(error, "guest file ");
	return FALSE;
}

/* The image of file f mapped at start (len bytes of the file from pgoff):
 * its executable PT_LOADs' parts inside the mapping, at their addresses;
 * NULL when none. */
static VtDecodeImage *map_image(const GuFile *f, guint64 start, guint64 len, guint64 pgoff, GError **error)
{
	g_autoptr(GArray) segs = g_array_new(FALSE, FALSE, sizeof(guint64));
	g_autoptr(GArray) funcs = g_array_new(FALSE, FALSE, sizeof(guint64));

	for (guint i = 0; i < f->elf->loads->len; i++) {
		const VtElfLoad *l = &g_array_index(f->elf->loads, VtElfLoad, i);
		guint64 lo = MAX(l->offset, pgoff), hi = MIN(l->offset + l->size, pgoff + len);
		guint64 seg[3];

		if (!l->exec || lo >= hi)
			continue;
		seg[0] = start + (lo - pgoff);
		seg[1] = lo;
		seg[2] = hi - lo;
		g_array_append_vals(segs, seg, 3);
		for (guint j = 0; j < f->elf->syms->len; j++) {
			const VtElfSym *s = &g_array_index(f->elf->syms, VtElfSym, j);
			guint64 off = s->start - l->vaddr + l->offset;

			if (s->start >= l->vaddr && off >= lo && off + 16 <= hi) {
				guint64 a = start + (off - pgoff);

				g_array_append_val(funcs, a);
			}
		}
	}
	if (!segs->len) {
		g_set_error(error, VT_DECODE_ERROR, VT_DECODE_ERROR_BAD_IMAGE,
			    "guest file %s: no executable code in the mapping", f->found);
		return NULL;
	}
	return vt_decode_image_new_file(f->found, "guest user", (guint64 *)(void *)segs->data, segs->len / 3,
					(guint64 *)(void *)funcs->data, funcs->len, error);
}

VtDecodeImage *vt_decode_guest_user_image(const char *path, guint64 start, guint64 len, guint64 pgoff,
					  GError **error)
{
	GuFile *f = file_new();
	VtDecodeImage *img = NULL;

	f->found = g_strdup(path);
	if (read_elf(f, path, error))
		img = map_image(f, start, len, pgoff, error);
	file_free(f);
	return img;
}

gboolean vt_decode_guest_user_exec_load(const char *path, guint64 *vaddr, guint64 *offset, guint64 *size,
					GError **error)
{
	GuFile *f = file_new();
	gboolean ok = read_elf(f, path, error);

	for (guint i = 0; ok && i < f->elf->loads->len; i++) {
		const VtElfLoad *l = &g_array_index(f->elf->loads, VtElfLoad, i);

		if (l->exec) {
			*vaddr = l->vaddr;
			*offset = l->offset;
			*size = l->size;
			file_free(f);
			return TRUE;
		}
	}
	if (ok)
		g_set_error(error, VT_DECODE_ERROR, VT_DECODE_ERROR_BAD_IMAGE, "%s has no executable PT_LOAD", path);
	file_free(f);
	return FALSE;
}

/* ------------------------------------------------------------ sideband */
/* Where the file is: perf 6.1's build-id cache ($HOME/.debug/.build-id/
 * XX/REST/elf) when the mapping has a build id, else GUESTMOUNT/<machine
 * pid>/PATH.  Never the host's own PATH (perf's fallback: the host's file
 * is not the guest's). */
static char *file_find(const char *path, const char *bid, const char *root)
{
	g_autofree char *cache = NULL, *full = NULL;

	if (bid && strlen(bid) > 2) {
		cache = g_strdup_printf("%s/.debug/.build-id/%.2s/%s/elf", g_get_home_dir(), bid, bid + 2);
		if (g_file_test(cache, G_FILE_TEST_IS_REGULAR))
			return g_steal_pointer(&cache);
	}
	full = root ? g_build_filename(root, path, NULL) : NULL;
	return full && g_file_test(full, G_FILE_TEST_IS_REGULAR) ? g_steal_pointer(&full) : NULL;
}

static GuFile *file_get(VtDecodeGuestUser *u, const GuMap *m, const char *root)
{
	const char *bid = m->build_id ? m->build_id : g_hash_table_lookup(u->build_ids, m->path);
	g_autofree char *key = g_strconcat(m->path, " ", bid ? bid : "", NULL);
	GuFile *f = g_hash_table_lookup(u->files, key);
	g_autofree char *full = NULL;

	if (f)
		return f->found ? f : NULL;
	f = file_new();
	g_hash_table_insert(u->files, g_steal_pointer(&key), f);
	full = file_find(m->path, bid, root);
	if (full && read_elf(f, full, NULL))
		f->found = g_steal_pointer(&full);
	else
		u->n_missing++;
	return f->found ? f : NULL;
}

/* HEADER_BUILD_ID entries of the guest machine's user files (vmtrace
 * inject and perf inject copy the guest's there): pid, 20 bytes of build
 * id, its size, the path. */
static void add_build_ids(VtDecodeGuestUser *u, const VtPerfFile *f)
{
	const guint8 *p;
	guint64 n, off = 0;
	VtPerfBuildId e;

	if (!vt_perf_file_feature(f, VT_PERF_FEAT_BUILD_ID, &p, &n))
		return;
	while (vt_perf_build_id_next(p, n, &off, &e))
		if ((e.misc & PERF_RECORD_MISC_CPUMODE_MASK) == PERF_RECORD_MISC_GUEST_USER && e.pid == u->machine_pid &&
		    e.name)
			g_hash_table_insert(u->build_ids, g_strdup(e.name), vt_perf_hex(e.id, e.len));
}

static gboolean is_guest_user(const VtPerfRecord *rec)
{
	return (rec->misc & PERF_RECORD_MISC_CPUMODE_MASK) == PERF_RECORD_MISC_GUEST_USER;
}

static gboolean is_guest(const VtPerfRecord *rec)
{
	guint mode = rec->misc & PERF_RECORD_MISC_CPUMODE_MASK;

	return mode == PERF_RECORD_MISC_GUEST_KERNEL || mode == PERF_RECORD_MISC_GUEST_USER;
}

/* The host perf time of a record (0: none). */
static guint64 time_of(const VtPerfFile *f, const VtPerfRecord *rec)
{
	VtPerfSampleId sid;

	return vt_perf_record_sample_id(f, rec, &sid) && sid.has_time ? sid.time : 0;
}

/* A guest FORK of a new process (not a thread): its parent, the first time. */
static void add_fork(VtDecodeGuestUser *u, const VtPerfFile *f, const VtPerfRecord *rec)
{
	guint32 pid, ppid;
	GuFork *k;

	if (rec->size < 24)
		return;
	memcpy(&pid, rec->data + 8, 4);
	memcpy(&ppid, rec->data + 12, 4);
	if (pid == ppid || g_hash_table_contains(u->forks, GINT_TO_POINTER((gint32)pid)))
		return;
	k = g_new(GuFork, 1);
	k->ppid = (gint32)ppid;
	k->time = time_of(f, rec);
	g_hash_table_insert(u->forks, GINT_TO_POINTER((gint32)pid), k);
}

/* A guest COMM of a process's main thread: its comm from then on (other
 * threads' names are theirs, not the program's). */
static void add_comm(VtDecodeGuestUser *u, const VtPerfFile *f, const VtPerfRecord *rec)
{
	guint32 pid, tid;
	GuComm c;
	GArray *a, *pids;
	const char *name = (const char *)rec->data + 16;

	if (rec->size < 24 || !memchr(name, 0, rec->size - 16))
		return;
	memcpy(&pid, rec->data + 8, 4);
	memcpy(&tid, rec->data + 12, 4);
	if (pid != tid)
		return;
	c.time = time_of(f, rec);
	c.comm = g_string_chunk_insert_const(u->strings, name);
	if (!(a = g_hash_table_lookup(u->comms, GINT_TO_POINTER((gint32)pid)))) {
		a = g_array_new(FALSE, FALSE, sizeof(GuComm));
		g_hash_table_insert(u->comms, GINT_TO_POINTER((gint32)pid), a);
	}
	g_array_append_val(a, c);
	if (!(pids = g_hash_table_lookup(u->by_comm, c.comm))) {
		pids = g_array_new(FALSE, FALSE, sizeof(gint32));
		g_hash_table_insert(u->by_comm, (gpointer)c.comm, pids);
	}
	for (guint i = 0; i < pids->len; i++)
		if (g_array_index(pids, gint32, i) == (gint32)pid)
			return;
	g_array_append_val(pids, pid);
}

/* The comm of process pid at `time` (0: its last): its last COMM by then,
 * else its first; NULL: it has none. */
static const char *comm_of(const VtDecodeGuestUser *u, gint32 pid, guint64 time)
{
	const GArray *a = g_hash_table_lookup(u->comms, GINT_TO_POINTER(pid));
	const char *c = NULL;

	for (guint i = 0; a && i < a->len; i++) {
		const GuComm *x = &g_array_index(a, GuComm, i);

		if (c && time && x->time > time)
			break;
		c = x->comm;
	}
	return c;
}

/* An executable file mapping of a guest process (MMAP2; MMAP). */
static void add_mmap(VtDecodeGuestUser *u, const VtPerfFile *f, const VtPerfRecord *rec)
{
	GuMap m = { 0 };
	GArray *idx;
	guint32 pid, prot = PROT_EXEC;
	const char *name;
	gsize fixed = rec->type == PERF_RECORD_MMAP2 ? 72 : 40;   /* the file name's offset */

	if (rec->size < fixed + 1)
		return;
	memcpy(&pid, rec->data + 8, 4);
	memcpy(&m.start, rec->data + 16, 8);
	memcpy(&m.len, rec->data + 24, 8);
	memcpy(&m.pgoff, rec->data + 32, 8);
	if (rec->type == PERF_RECORD_MMAP2)
		memcpy(&prot, rec->data + 64, 4);
	name = (const char *)rec->data + fixed;
	if (!(prot & PROT_EXEC) || !memchr(name, 0, rec->size - fixed) || name[0] != '/')
		return;
	m.pid = (gint32)pid;
	m.time = time_of(f, rec);
	m.path = g_string_chunk_insert_const(u->strings, name);
	if (rec->type == PERF_RECORD_MMAP2 && (rec->misc & (1u << 14)) && rec->data[40] <= 20) {
		g_autofree char *b = vt_perf_hex(rec->data + 44, rec->data[40]);    /* MISC_MMAP_BUILD_ID */

		m.build_id = g_string_chunk_insert_const(u->strings, b);
	}
	idx = g_hash_table_lookup(u->by_pid, GINT_TO_POINTER(m.pid));
	if (!idx) {
		idx = g_array_new(FALSE, FALSE, sizeof(guint));
		g_hash_table_insert(u->by_pid, GINT_TO_POINTER(m.pid), idx);
	}
	g_array_append_val(idx, u->maps->len);
	g_array_append_val(u->maps, m);
}

static void add_index(VtDecodeGuestUser *u, const VtPerfRecord *rec)
{
	guint n = 0;
	g_autofree VtPerfIdIndexEntry *e = vt_perf_record_id_index(rec, &n, NULL);

	for (guint i = 0; e && i < n; i++)
		if (e[i].machine_pid)
			u->machine_pid = (gint32)e[i].machine_pid;
}

VtDecodeGuestUser *vt_decode_guest_user_load(const char *rec, const char *guestmount, GError **error)
{
	VtDecodeGuestUser *u = g_new0(VtDecodeGuestUser, 1);
	VmcorrSession *s = vmcorr_session_open(rec, VT_PERF_OPEN_RDONLY, error);
	g_autofree char *root = NULL;
	VtPerfIter it;
	VtPerfRecord r;
	int rc = -1;

	u->maps = g_array_new(FALSE, FALSE, sizeof(GuMap));
	u->files = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, file_free);
	u->strings = g_string_chunk_new(4096);
	u->build_ids = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
	u->forks = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
	u->by_pid = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, (GDestroyNotify)g_array_unref);
	u->images = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, (GDestroyNotify)vt_decode_image_free);
	u->comms = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, (GDestroyNotify)g_array_unref);
	u->by_comm = g_hash_table_new_full(g_str_hash, g_str_equal, NULL, (GDestroyNotify)g_array_unref);
	u->unresolved = g_hash_table_new_full(g_direct_hash, g_direct_equal, NULL, g_free);
	g_mutex_init(&u->lock);
	if (s) {
		vt_perf_iter_init(&it, s->f);
		while ((rc = vt_perf_iter_next(&it, &r, error)) > 0) {
			if (r.type == VT_PERF_RECORD_ID_INDEX)
				add_index(u, &r);
			else if ((r.type == PERF_RECORD_MMAP2 || r.type == PERF_RECORD_MMAP) && is_guest_user(&r))
				add_mmap(u, s->f, &r);
			else if (r.type == PERF_RECORD_FORK && is_guest(&r))
				add_fork(u, s->f, &r);
			else if (r.type == PERF_RECORD_COMM && is_guest(&r))
				add_comm(u, s->f, &r);
		}
		add_build_ids(u, s->f);
		vmcorr_session_free(s);
	}
	if (rc < 0) {
		vt_decode_guest_user_free(u);
		return NULL;
	}
	/* perf's guest machine root: GUESTMOUNT/<machine pid> */
	root = guestmount && u->machine_pid ? g_strdup_printf("%s/%d", guestmount, u->machine_pid) : NULL;
	for (guint i = 0; i < u->maps->len; i++) {
		GuMap *m = &g_array_index(u->maps, GuMap, i);

		m->file = file_get(u, m, root);
	}
	return u;
}

void vt_decode_guest_user_free(VtDecodeGuestUser *u)
{
	if (!u)
		return;
	g_array_free(u->maps, TRUE);
	g_hash_table_destroy(u->files);
	g_hash_table_destroy(u->build_ids);
	g_hash_table_destroy(u->forks);
	g_hash_table_destroy(u->by_pid);
	g_hash_table_destroy(u->images);
	g_hash_table_destroy(u->comms);
	g_hash_table_destroy(u->by_comm);
	g_hash_table_destroy(u->unresolved);
	g_mutex_clear(&u->lock);
	g_string_chunk_free(u->strings);
	g_free(u);
}

guint vt_decode_guest_user_n_maps(const VtDecodeGuestUser *u, guint *n_missing)
{
	if (n_missing)
		*n_missing = u ? u->n_missing : 0;
	return u ? u->maps->len : 0;
}

gboolean vt_decode_guest_user_attach(const VtDecodeGuestUser *u, VtDecodeImage *guest, GError **error)
{
	for (guint i = 0; u && guest && i < u->maps->len; i++) {
		const GuMap *m = &g_array_index(u->maps, GuMap, i);
		VtDecodeImage *img;

		if (!m->file)
			continue;
		img = map_image(m->file, m->start, m->len, m->pgoff, error);
		if (!img)
			return FALSE;
		vt_decode_image_attach(guest, img);
	}
	return TRUE;
}

/* The last mapping of pid holding addr made by `time` (0: any time);
 * pid -1: of any process. */
static const GuMap *map_own(const VtDecodeGuestUser *u, gint32 pid, guint64 time, guint64 addr)
{
	const GArray *idx = pid < 0 ? NULL : g_hash_table_lookup(u->by_pid, GINT_TO_POINTER(pid));
	guint n = pid < 0 ? u->maps->len : idx ? idx->len : 0;

	while (n-- > 0) {
		const GuMap *m = &g_array_index(u->maps, GuMap, idx ? g_array_index(idx, guint, n) : n);

		if (addr - m->start < m->len && (!time || m->time <= time))
			return m;
	}
	return NULL;
}

/* The mapping last found by this thread for a process's own address (the
 * decoder asks at every instruction, mostly in the same mapping): still
 * the answer for an address in it when no later mapping of the process
 * overlaps it. */
static __thread struct {
	const VtDecodeGuestUser *u;
	const GuMap *m;
} map_hint;

static gboolean hint_holds(const VtDecodeGuestUser *u, gint32 pid, guint64 time, guint64 addr)
{
	const GuMap *m = map_hint.m;

	return map_hint.u == u && m && m->pid == pid && addr - m->start < m->len && !m->shadowed &&
	       (!time || m->time <= time);
}

/* Two mappings that give an address the same code: the same file (path
 * and build id) at the same place. */
static gboolean same_code(const GuMap *a, const GuMap *b)
{
	return a->start == b->start && a->len == b->len && a->pgoff == b->pgoff && !strcmp(a->path, b->path) &&
	       !g_strcmp0(a->build_id, b->build_id);
}

/* The last mapping holding addr made by `time` of every process (pids
 * NULL) or of the processes pids that have the comm `comm` at `time`
 * (but `self`), if they all give it the same code; else NULL. */
static const GuMap *map_agreed(const VtDecodeGuestUser *u, const GArray *pids, const char *comm, gint32 self,
			       guint64 time, guint64 addr)
{
	const GuMap *pick = NULL;
	guint n = pids ? pids->len : 1;

	for (guint i = 0; i < n; i++) {
		gint32 pid = pids ? g_array_index(pids, gint32, i) : -1;
		const GuMap *m;

		if (pids && (pid == self || g_strcmp0(comm_of(u, pid, time), comm)))
			continue;
		if (!(m = map_own(u, pid, time, addr)))
			continue;
		if (pick && !same_code(pick, m))
			return NULL;
		if (!pids && m->contested) {    /* every process: each mapping of addr by then */
			for (guint k = 0; k < u->maps->len; k++) {
				const GuMap *x = &g_array_index(u->maps, GuMap, k);

				if (addr - x->start < x->len && (!time || x->time <= time) && !same_code(m, x))
					return NULL;
			}
		}
		pick = m;
	}
	return pick;
}

/* A process without mappings of its own there and no known parent: that of
 * the processes with its comm, when they agree. */
static const GuMap *map_by_comm(const VtDecodeGuestUser *u, gint32 pid, guint64 time, guint64 addr)
{
	const char *comm = comm_of(u, pid, time);
	const GArray *pids = comm ? g_hash_table_lookup(u->by_comm, comm) : NULL;

	return pids ? map_agreed(u, pids, comm, pid, time, addr) : NULL;
}

/* Remember the first address of pid (-1: no process known) without code. */
static void note_unresolved(VtDecodeGuestUser *u, gint32 pid, guint64 addr)
{
	g_mutex_lock(&u->lock);
	if (!g_hash_table_contains(u->unresolved, GINT_TO_POINTER(pid)))
		g_hash_table_insert(u->unresolved, GINT_TO_POINTER(pid), g_memdup2(&addr, sizeof(addr)));
	g_mutex_unlock(&u->lock);
}

/* The mapping holding addr in process pid at `time`: its own, else its
 * parent's at the fork (and so on up), else - the top process forked
 * before the recording - its comm's; pid -1 (no process known): every
 * process's when they agree. */
static const GuMap *map_at(const VtDecodeGuestUser *u, gint32 pid, guint64 time, guint64 addr)
{
	if (pid >= 0 && hint_holds(u, pid, time, addr))
		return map_hint.m;
	if (pid < 0)
		return map_agreed(u, NULL, NULL, -1, time, addr);
	for (guint depth = 0; depth < 64; depth++) {
		const GuMap *m = map_own(u, pid, time, addr);
		const GuFork *k;

		if (m && !depth) {
			map_hint.u = u;
			map_hint.m = m;
		}
		if (m)
			return m;
		k = g_hash_table_lookup(u->forks, GINT_TO_POINTER(pid));
		if (!k || k->ppid == pid)
			return map_by_comm(u, pid, time, addr);
		pid = k->ppid;
		time = time && k->time ? MIN(time, k->time) : k->time ? k->time : time;
	}
	return NULL;
}

/* Each mapping overlapped by a later one of its process is marked. */
static void mark_shadowed(VtDecodeGuestUser *u)
{
	GHashTableIter it;
	gpointer idx;

	g_hash_table_iter_init(&it, u->by_pid);
	while (g_hash_table_iter_next(&it, NULL, &idx)) {
		const GArray *a = idx;

		for (guint i = 0; i < a->len; i++) {
			GuMap *m = &g_array_index(u->maps, GuMap, g_array_index(a, guint, i));

			for (guint j = i + 1; j < a->len && !m->shadowed; j++) {
				const GuMap *l = &g_array_index(u->maps, GuMap, g_array_index(a, guint, j));

				m->shadowed = l->start < m->start + m->len && m->start < l->start + l->len;
			}
		}
	}
}

static gint cmp_start(gconstpointer a, gconstpointer b, gpointer maps)
{
	guint64 x = g_array_index((GArray *)maps, GuMap, *(const guint *)a).start;
	guint64 y = g_array_index((GArray *)maps, GuMap, *(const guint *)b).start;

	return x < y ? -1 : x > y;
}

/* Each mapping that another one (of any process) overlaps with other code
 * is marked: where no process is known, only those need a vote. */
static void mark_contested(VtDecodeGuestUser *u)
{
	g_autoptr(GArray) order = g_array_sized_new(FALSE, FALSE, sizeof(guint), u->maps->len);

	for (guint i = 0; i < u->maps->len; i++)
		g_array_append_val(order, i);
	g_array_sort_with_data(order, cmp_start, u->maps);
	for (guint i = 0; i < order->len; i++) {
		GuMap *m = &g_array_index(u->maps, GuMap, g_array_index(order, guint, i));

		for (guint j = i + 1; j < order->len; j++) {
			GuMap *x = &g_array_index(u->maps, GuMap, g_array_index(order, guint, j));

			if (x->start >= m->start + m->len)
				break;
			if (!same_code(m, x))
				m->contested = x->contested = TRUE;
		}
	}
}

gboolean vt_decode_guest_user_prepare(VtDecodeGuestUser *u, GError **error)
{
	if (u) {
		mark_shadowed(u);
		mark_contested(u);
	}
	for (guint i = 0; u && i < u->maps->len; i++) {
		GuMap *m = &g_array_index(u->maps, GuMap, i);
		g_autofree char *key = NULL;

		if (!m->file)
			continue;
		key = g_strdup_printf("%s %" G_GINT64_MODIFIER "x %" G_GINT64_MODIFIER "x %" G_GINT64_MODIFIER "x",
				      m->file->found, m->start, m->len, m->pgoff);
		m->img = g_hash_table_lookup(u->images, key);
		if (m->img)
			continue;
		m->img = map_image(m->file, m->start, m->len, m->pgoff, error);
		if (!m->img)
			return FALSE;
		g_hash_table_insert(u->images, g_steal_pointer(&key), m->img);
	}
	return TRUE;
}

const VtDecodeImage *vt_decode_guest_user_image_at(const VtDecodeGuestUser *u, gint32 pid, guint64 time,
						   guint64 addr)
{
	const GuMap *m = u ? map_at(u, pid, time, addr) : NULL;

	return m ? m->img : NULL;
}

const guint8 *vt_decode_guest_user_code(const VtDecodeGuestUser *u, gint32 pid, guint64 time, guint64 addr,
					gsize *avail)
{
	const GuMap *m = u ? map_at(u, pid, time, addr) : NULL;

	if (u && !m)
		note_unresolved((VtDecodeGuestUser *)u, pid, addr);
	*avail = 0;
	return m && m->img ? vt_decode_image_code(m->img, addr, avail) : NULL;
}

const char *vt_decode_guest_user_symbol(const VtDecodeGuestUser *u, gint32 pid, guint64 time, guint64 addr,
					guint64 *offset, const char **dso)
{
	const GuMap *m = u ? map_at(u, pid, time, addr) : NULL;
	guint64 off, vaddr = 0;
	guint lo = 0, hi;
	const GArray *syms;

	*dso = m ? m->path : NULL;
	if (!m || !m->file)
		return NULL;
	off = addr - m->start + m->pgoff;
	for (guint i = 0; i < m->file->elf->loads->len; i++) {
		const VtElfLoad *l = &g_array_index(m->file->elf->loads, VtElfLoad, i);

		if (off - l->offset < l->size) {
			vaddr = off - l->offset + l->vaddr;
			break;
		}
	}
	syms = m->file->elf->syms;
	hi = syms->len;
	while (lo < hi) {
		guint mid = (lo + hi) / 2;

		if (g_array_index(syms, VtElfSym, mid).start <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!vaddr || !lo || vaddr >= g_array_index(syms, VtElfSym, lo - 1).end)
		return NULL;
	*offset = vaddr - g_array_index(syms, VtElfSym, lo - 1).start;
	return g_array_index(syms, VtElfSym, lo - 1).name;
}

GArray *vt_decode_guest_user_unresolved(const VtDecodeGuestUser *u)
{
	GArray *out = g_array_new(FALSE, FALSE, sizeof(VtDecodeGuestUnresolved));
	GHashTableIter it;
	gpointer k, v;

	if (!u)
		return out;
	g_mutex_lock((GMutex *)&u->lock);
	g_hash_table_iter_init(&it, u->unresolved);
	while (g_hash_table_iter_next(&it, &k, &v)) {
		gint32 pid = GPOINTER_TO_INT(k);
		VtDecodeGuestUnresolved x = { pid, *(guint64 *)v, pid >= 0 ? comm_of(u, pid, 0) : NULL };

		g_array_append_val(out, x);
	}
	g_mutex_unlock((GMutex *)&u->lock);
	return out;
}
