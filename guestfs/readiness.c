/* readiness.c - is a guest ready for guest-sideband decoding?  Clocksource,
 * BPF JIT, kptr_restrict and kallsyms addresses, lockdown, the login user,
 * kcore: each OK/WARN/FAIL with the exact fix. */
#include "config.h"

#include <string.h>

#include "guestfs/guestfs.h"
#include "src/host/host.h"

/* A one-line text file, stripped; NULL (and *err) if unreadable or not
 * one printable line (its bytes are never shown). */
static char *read_text(VtGuestSource *src, const char *path, GError **err)
{
	GBytes *b = vt_guest_source_read_file(src, path, VT_GUEST_LINE_MAX, err);
	char *s;

	if (!b)
		return NULL;
	s = vt_guest_bytes_text(b);
	if (!s)
		g_set_error(err, VT_GUEST_ERROR, VT_GUEST_ERROR_BAD_DATA, "%s is not one printable line (%zu bytes)", path,
			    g_bytes_get_size(b));
	g_bytes_unref(b);
	return s;
}

static void check_login(VtGuestSource *src, GPtrArray *checks)
{
	gint64 uid = vt_guest_source_uid(src);

	if (uid == 0)
		vt_host_check_add(checks, "login", VT_HOST_CHECK_OK, NULL, "logged in as root (uid 0)");
	else if (uid > 0)
		vt_host_check_add(checks, "login", VT_HOST_CHECK_WARN,
			     "log in as root (guest sshd_config: PermitRootLogin prohibit-password, and the key in /root/.ssh/authorized_keys)",
			     "logged in as uid %" G_GINT64_FORMAT ": real kallsyms addresses and /proc/kcore need root", uid);
}

static void check_clocksource(VtGuestSource *src, GPtrArray *checks)
{
	g_autoptr(GError) err = NULL;
	g_autofree char *cur = read_text(src, "/sys/devices/system/clocksource/clocksource0/current_clocksource", &err);
	g_autofree char *avail = read_text(src, "/sys/devices/system/clocksource/clocksource0/available_clocksource", NULL);

	if (!cur)
		vt_host_check_add(checks, "clocksource", VT_HOST_CHECK_WARN, "mount sysfs in the guest (mount -t sysfs sysfs /sys)",
			     "cannot read the guest clocksource: %s", err->message);
	else if (!strcmp(cur, "tsc"))
		vt_host_check_add(checks, "clocksource", VT_HOST_CHECK_OK, NULL,
			     "guest clocksource tsc: guest sideband times convert from the TSC");
	else if (!strcmp(cur, "kvm-clock"))
		vt_host_check_add(checks, "clocksource", VT_HOST_CHECK_FAIL,
			     "boot the guest with no-kvmclock on its kernel command line (Debian: add it to "
			     "GRUB_CMDLINE_LINUX in /etc/default/grub, update-grub, reboot), then check that "
			     "current_clocksource is tsc",
			     "guest clocksource kvm-clock: guest sideband times cannot be converted to host TSC time "
			     "(the guest's perf.data has no TSC-based TIME_CONV: vmtrace inject refuses it)");
	else
		vt_host_check_add(checks, "clocksource", VT_HOST_CHECK_WARN,
			     "boot the guest with clocksource=tsc (add tsc=reliable if its kernel marks the TSC unstable)",
			     "guest clocksource %s (available: %s): guest sideband times are not TSC-based", cur,
			     avail ? avail : "?");
}

/* The command that finds perf: its path, then `perf version`'s line
 * (Debian's /usr/bin/perf is a wrapper that fails when no perf_X.Y for the
 * running kernel is installed). */
#define PERF_PROBE "p=$(command -v perf) || exit 127; echo \"$p\"; exec perf version 2>&1"
#define PERF_FIX "install perf in the guest (Debian: apt-get install linux-perf; Fedora: dnf install perf)"

/* A directory source cannot run it: is there an executable perf file? */
static void check_perf_root(VtGuestSource *src, GPtrArray *checks)
{
	static const char *const paths[] = { "/usr/bin/perf", "/usr/local/bin/perf", "/usr/sbin/perf" };
	guint8 magic[4];
	gsize got = 0;

	for (guint i = 0; i < G_N_ELEMENTS(paths); i++)
		if (vt_guest_source_pread(src, paths[i], 0, magic, sizeof(magic), &got, NULL) && got > 0) {
			vt_host_check_add(checks, "perf", VT_HOST_CHECK_OK, NULL,
				     "perf at %s (its version is not checked in a directory: use --ssh)", paths[i]);
			return;
		}
	vt_host_check_add(checks, "perf", VT_HOST_CHECK_WARN, PERF_FIX,
		     "no perf in the guest (looked in /usr/bin, /usr/local/bin, /usr/sbin): "
		     "no guest perf.data for vmtrace inject or record --guest-ssh");
}

static void check_perf(VtGuestSource *src, GPtrArray *checks)
{
	g_autoptr(GError) err = NULL;
	g_autoptr(GBytes) out = NULL;
	g_auto(GStrv) lines = NULL;
	g_autofree char *text = NULL;
	int status = -1;

	if (!vt_guest_source_can_run(src)) {
		check_perf_root(src, checks);
		return;
	}
	if (!vt_guest_source_run(src, PERF_PROBE, VT_GUEST_LINE_MAX, &out, &status, &err)) {
		vt_host_check_add(checks, "perf", VT_HOST_CHECK_WARN, "let the SSH account run commands",
			     "cannot look for perf: %s", err->message);
		return;
	}
	text = vt_guest_bytes_dup(out);
	lines = g_strsplit(g_strstrip(text), "\n", 3);
	for (guint i = 0; lines[i]; i++) {
		g_autoptr(GBytes) b = g_bytes_new_static(lines[i], strlen(lines[i]));
		char *t = vt_guest_bytes_text(b);

		g_free(lines[i]);
		lines[i] = t ? t : g_strdup("?");   /* guest bytes are never echoed raw */
	}
	if (status == 127 || !lines[0] || !*lines[0])
		vt_host_check_add(checks, "perf", VT_HOST_CHECK_WARN, PERF_FIX,
			     "no perf in the guest's PATH: no guest perf.data for vmtrace inject or record --guest-ssh");
	else if (status != 0 || !lines[1] || !g_str_has_prefix(lines[1], "perf version "))
		vt_host_check_add(checks, "perf", VT_HOST_CHECK_WARN, PERF_FIX " (for the running kernel)",
			     "%s does not run: `perf version` %s%s (exit %d)", lines[0],
			     lines[1] ? "says: " : "printed nothing", lines[1] ? lines[1] : "", status);
	else
		vt_host_check_add(checks, "perf", VT_HOST_CHECK_OK, NULL, "%s, %s", lines[0], lines[1]);
}

static void check_bpf_jit(VtGuestSource *src, GPtrArray *checks)
{
	g_autofree char *jit = read_text(src, "/proc/sys/net/core/bpf_jit_enable", NULL);
	g_autofree char *jksyms = read_text(src, "/proc/sys/net/core/bpf_jit_kallsyms", NULL);

	if (!jit)
		vt_host_check_add(checks, "bpf_jit", VT_HOST_CHECK_OK, NULL, "no BPF JIT in the guest kernel (net.core.bpf_jit_enable missing)");
	else if (!strcmp(jit, "0"))
		vt_host_check_add(checks, "bpf_jit", VT_HOST_CHECK_OK, NULL,
			     "BPF JIT off: BPF programs run in the interpreter, which is kernel text");
	else if (!strcmp(jit, "2"))
		vt_host_check_add(checks, "bpf_jit", VT_HOST_CHECK_WARN, "sysctl -w net.core.bpf_jit_enable=1",
			     "BPF JIT in debug mode (bpf_jit_enable=2): it dumps every image to the kernel log");
	else if (jksyms && !strcmp(jksyms, "0"))
		vt_host_check_add(checks, "bpf_jit", VT_HOST_CHECK_WARN, "sysctl -w net.core.bpf_jit_kallsyms=1",
			     "BPF JIT on but its images are not in kallsyms (bpf_jit_kallsyms=0): the kcore copy "
			     "may miss them and their code cannot be symbolised");
	else
		vt_host_check_add(checks, "bpf_jit", VT_HOST_CHECK_OK, NULL, "BPF JIT on%s",
			     jksyms ? ", images listed in kallsyms" : "");
}

static void check_symbols(VtGuestSource *src, GPtrArray *checks, VtGuestKallsyms *ks)
{
	g_autofree char *kr = read_text(src, "/proc/sys/kernel/kptr_restrict", NULL);
	g_autoptr(GError) err = NULL;
	g_autoptr(GBytes) kallsyms = vt_guest_source_read_file(src, "/proc/kallsyms", VT_GUEST_KALLSYMS_MAX, &err);
	g_autoptr(GBytes) modules = NULL;

	if (kr && !strcmp(kr, "2"))
		vt_host_check_add(checks, "kptr_restrict", VT_HOST_CHECK_FAIL, "sysctl -w kernel.kptr_restrict=1",
			     "kptr_restrict=2: kallsyms and modules show 0 for every address, even to root");
	else if (kr)
		vt_host_check_add(checks, "kptr_restrict", VT_HOST_CHECK_OK, NULL, "kptr_restrict=%s: root sees kernel addresses", kr);
	if (!kallsyms) {
		vt_host_check_add(checks, "kallsyms", VT_HOST_CHECK_FAIL, "mount procfs in the guest (mount -t proc proc /proc)",
			     "%s", err->message);
		return;
	}
	g_clear_error(&err);
	modules = vt_guest_source_read_file(src, "/proc/modules", VT_GUEST_MODULES_MAX, NULL);
	if (!vt_guest_kallsyms_parse(kallsyms, modules, ks, &err))
		vt_host_check_add(checks, "kallsyms", VT_HOST_CHECK_FAIL, "read it as root in the guest: cat /proc/kallsyms", "%s",
			     err->message);
	else if (ks->all_zero)
		vt_host_check_add(checks, "kallsyms", VT_HOST_CHECK_FAIL,
			     "log in as root, and sysctl -w kernel.kptr_restrict=1 (or 0) in the guest",
			     "all %u kallsyms addresses are 0: the kernel hides them from this user", ks->nsyms);
	else
		vt_host_check_add(checks, "kallsyms", VT_HOST_CHECK_OK, NULL,
			     "%u symbols, _stext 0x%" G_GINT64_MODIFIER "x, module/BPF area 0x%" G_GINT64_MODIFIER
			     "x-0x%" G_GINT64_MODIFIER "x",
			     ks->nsyms, ks->stext, ks->mod_start, ks->mod_end);
}

static void check_lockdown(VtGuestSource *src, GPtrArray *checks)
{
	g_autofree char *ld = read_text(src, "/sys/kernel/security/lockdown", NULL);
	const char *open = ld ? strchr(ld, '[') : NULL, *close = open ? strchr(open, ']') : NULL;
	g_autofree char *mode = open && close ? g_strndup(open + 1, (gsize)(close - open - 1)) : NULL;

	if (!mode)
		vt_host_check_add(checks, "lockdown", VT_HOST_CHECK_OK, NULL,
			     "no kernel lockdown reported (no lockdown LSM, or securityfs not mounted)");
	else if (!strcmp(mode, "confidentiality"))
		vt_host_check_add(checks, "lockdown", VT_HOST_CHECK_FAIL,
			     "boot the guest with lockdown=integrity (or without Secure Boot enforcing lockdown)",
			     "kernel lockdown=confidentiality: /proc/kcore is denied");
	else
		vt_host_check_add(checks, "lockdown", VT_HOST_CHECK_OK, NULL, "kernel lockdown=%s: /proc/kcore allowed", mode);
}

static void check_kcore(VtGuestSource *src, GPtrArray *checks, const VtGuestKallsyms *ks)
{
	g_autoptr(GError) err = NULL;
	GArray *segs = vt_guest_kcore_segments(src, "/proc/kcore", &err);
	gboolean text = FALSE;

	if (!segs) {
		const char *fix = g_error_matches(err, VT_GUEST_ERROR, VT_GUEST_ERROR_NOT_FOUND)
				  ? "the guest kernel has no CONFIG_PROC_KCORE: use vmtrace guest fetch --no-kcore "
				    "and decode with the guest's vmlinux"
				  : g_error_matches(err, VT_GUEST_ERROR, VT_GUEST_ERROR_PERMISSION)
				  ? "log in as root (reading /proc/kcore needs CAP_SYS_RAWIO), and no lockdown=confidentiality"
				  : "read it as root in the guest: head -c 64 /proc/kcore | od -c";

		vt_host_check_add(checks, "kcore", VT_HOST_CHECK_FAIL, fix, "%s", err->message);
		return;
	}
	for (guint i = 0; i < segs->len; i++) {
		const VtGuestKcoreSeg *s = &g_array_index(segs, VtGuestKcoreSeg, i);

		text |= ks->stext && ks->stext >= s->vaddr && ks->stext - s->vaddr < s->size;
	}
	if (ks->stext && !text)
		vt_host_check_add(checks, "kcore", VT_HOST_CHECK_FAIL, "compare /proc/kallsyms with the kernel that runs (a stale copy?)",
			     "/proc/kcore has %u PT_LOAD segments, none maps _stext 0x%" G_GINT64_MODIFIER "x",
			     segs->len, ks->stext);
	else
		vt_host_check_add(checks, "kcore", VT_HOST_CHECK_OK, NULL, "/proc/kcore readable: ELF core, %u PT_LOAD segments%s",
			     segs->len, ks->stext ? ", kernel text mapped" : "");
	g_array_free(segs, TRUE);
}

static void check_build_id(VtGuestSource *src, GPtrArray *checks)
{
	g_autoptr(GError) err = NULL;
	g_autoptr(GBytes) notes = vt_guest_source_read_file(src, "/sys/kernel/notes", VT_GUEST_NOTES_MAX, &err);
	g_autofree char *rel = read_text(src, "/proc/sys/kernel/osrelease", NULL);
	g_autofree char *id = notes ? vt_guest_build_id_parse(g_bytes_get_data(notes, NULL), g_bytes_get_size(notes), &err)
				    : NULL;

	if (id)
		vt_host_check_add(checks, "build_id", VT_HOST_CHECK_OK, NULL, "kernel %s, build-id %s", rel ? rel : "?", id);
	else
		vt_host_check_add(checks, "build_id", VT_HOST_CHECK_WARN, "mount sysfs in the guest (mount -t sysfs sysfs /sys)",
			     "%s: the cache needs the build-id", err->message);
}

void vt_guest_readiness(VtGuestSource *src, GPtrArray *checks)
{
	VtGuestKallsyms ks = { 0 };

	check_login(src, checks);
	check_build_id(src, checks);
	check_clocksource(src, checks);
	check_perf(src, checks);
	check_bpf_jit(src, checks);
	check_symbols(src, checks, &ks);
	check_lockdown(src, checks);
	check_kcore(src, checks, &ks);
	vt_guest_kallsyms_clear(&ks);
}
