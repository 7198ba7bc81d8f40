/* guest.c - `vmtrace guest fetch` and `vmtrace guest check`: the guest
 * sideband (kallsyms, modules, build-id, trimmed kcore) over SSH or from a
 * mounted tree, and whether the guest is ready for it. */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "guestfs/guestfs.h"
#include "src/host/host.h"
#include "src/cli/json.h"
#include "src/cli/table.h"
#include "src/cmd/cmd.h"

typedef struct {
	VtCmdSsh ssh;
	char *root;
	gboolean json;
} GuestArgs;

static void guest_args_clear(GuestArgs *a)
{
	vt_cmd_ssh_clear(&a->ssh);
	g_free(a->root);
}

void vt_cmd_ssh_clear(VtCmdSsh *a)
{
	g_free(a->ssh);
	g_free(a->identity);
	g_free(a->known_hosts);
}

void vt_cmd_ssh_entries(VtCmdSsh *a, GOptionEntry *e, const char *ssh_name, gboolean shorts)
{
	const GOptionEntry t[VT_CMD_SSH_ENTRIES] = {
		{ ssh_name, shorts ? 's' : 0, 0, G_OPTION_ARG_STRING, &a->ssh, "Connect to the guest over SSH (libssh)", "[USER@]HOST[:PORT]" },
		{ "identity", shorts ? 'i' : 0, 0, G_OPTION_ARG_FILENAME, &a->identity, "Private key file (default: ssh-agent, ~/.ssh/id_*)", "KEY" },
		{ "known-hosts", 0, 0, G_OPTION_ARG_FILENAME, &a->known_hosts, "known_hosts file (default ~/.ssh/known_hosts)", "FILE" },
		{ "batch", 0, 0, G_OPTION_ARG_NONE, &a->batch, "Never prompt (no key passphrase prompt)", NULL },
		{ "timeout", shorts ? 't' : 0, 0, G_OPTION_ARG_INT, &a->timeout,
		  "Give up when the SSH server does not answer for SECONDS (every wait; default 30)", "SECONDS" },
	};

	memcpy(e, t, sizeof(t));
	if (!a->timeout)
		a->timeout = VT_GUEST_SSH_TIMEOUT;
}

gboolean vt_cmd_ssh_validate(const VtCmdSsh *a, GError **err)
{
	if (a->timeout < 1 || a->timeout > 86400) {
		g_set_error(err, G_OPTION_ERROR, G_OPTION_ERROR_BAD_VALUE, "--timeout %d: give 1 to 86400 seconds",
			    a->timeout);
		return FALSE;
	}
	return TRUE;
}

VtGuestSource *vt_cmd_ssh_open(const VtCmdSsh *a, const volatile sig_atomic_t *stop, int *rc, GError **err)
{
	VtGuestSshOptions so = { 0 };
	VtGuestSource *src = NULL;

	*rc = VT_EXIT_USAGE;
	if (vt_guest_ssh_parse_target(a->ssh, &so, err)) {
		so.identity = g_strdup(a->identity);
		so.known_hosts = g_strdup(a->known_hosts);
		so.batch = a->batch;
		so.timeout_s = (guint)a->timeout;
		so.stop = stop;
		src = vt_guest_source_ssh_open(&so, err);
		*rc = src ? VT_EXIT_OK : vt_cmd_guest_exit_code(*err);
	}
	vt_guest_ssh_options_clear(&so);
	return src;
}

static volatile sig_atomic_t stop_signal;

/* The signals that stop a fetch cleanly, and what they did before (src/fs's
 * cleanup of temporaries, installed by main). */
static const int stop_signals[] = { SIGINT, SIGTERM, SIGHUP };
static struct sigaction stop_old[G_N_ELEMENTS(stop_signals)];

/* The first one stops the fetch (every SSH wait ends within
 * VT_GUEST_SSH_SLICE_MS); the next one gets the previous action. */
static void on_stop(int sig)
{
	stop_signal = sig;
	for (guint i = 0; i < G_N_ELEMENTS(stop_signals); i++)
		sigaction(stop_signals[i], &stop_old[i], NULL);
}

static void stop_signals_install(void)
{
	struct sigaction sa = { .sa_handler = on_stop };

	sigemptyset(&sa.sa_mask);
	for (guint i = 0; i < G_N_ELEMENTS(stop_signals); i++)
		sigaddset(&sa.sa_mask, stop_signals[i]);
	stop_signal = 0;
	for (guint i = 0; i < G_N_ELEMENTS(stop_signals); i++)
		sigaction(stop_signals[i], &sa, &stop_old[i]);
}

static void stop_signals_restore(void)
{
	for (guint i = 0; i < G_N_ELEMENTS(stop_signals); i++)
		sigaction(stop_signals[i], &stop_old[i], NULL);
}

int vt_cmd_guest_exit_code(const GError *err)
{
	if (err->domain != VT_GUEST_ERROR)
		return VT_EXIT_FAILURE;
	switch (err->code) {
	case VT_GUEST_ERROR_HOSTKEY_UNKNOWN: return VT_EXIT_HOSTKEY_UNKNOWN;
	case VT_GUEST_ERROR_HOSTKEY_CHANGED: return VT_EXIT_HOSTKEY_CHANGED;
	case VT_GUEST_ERROR_AUTH: return VT_EXIT_AUTH;
	case VT_GUEST_ERROR_CONNECT: return VT_EXIT_CONNECT;
	case VT_GUEST_ERROR_CHANGED: return VT_EXIT_GUEST_CHANGED;
	case VT_GUEST_ERROR_BAD_DATA: return VT_EXIT_BAD_INPUT;
	case VT_GUEST_ERROR_TIMEOUT: return VT_EXIT_TIMEOUT;
	case VT_GUEST_ERROR_NO_PERF: return VT_EXIT_GUEST_NO_PERF;
	case VT_GUEST_ERROR_PERF_FAILED: return VT_EXIT_GUEST_PERF;
	default: return VT_EXIT_FAILURE;
	}
}

static const char exit_help[] =
	"Exit status: 0 ok; 1 failure; 2 usage error; 3 malformed guest data;\n"
	"9 SSH host key unknown (refused); 10 SSH host key changed (refused);\n"
	"11 SSH authentication failed or key file unusable; 12 cannot connect;\n"
	"13 kallsyms/modules changed during the copy (fetch);\n"
	"16 the SSH server stopped answering (--timeout).\n";

/* Parse the options shared by both subcommands plus `extra`; open the source. */
static VtGuestSource *guest_open(const char *sub, int *argc, char ***argv, GuestArgs *a, const GOptionEntry *extra,
				 const char *summary, const char *examples, const volatile sig_atomic_t *stop, int *rc)
{
	GOptionEntry common[VT_CMD_SSH_ENTRIES + 3] = {
		[VT_CMD_SSH_ENTRIES] = { "root", 0, 0, G_OPTION_ARG_FILENAME, &a->root, "Read the guest's files below DIR (an sshfs -o direct_io mount)", "DIR" },
		[VT_CMD_SSH_ENTRIES + 1] = { "json", 'j', 0, G_OPTION_ARG_NONE, &a->json, "JSON output", NULL },
		[VT_CMD_SSH_ENTRIES + 2] = G_OPTION_ENTRY_NULL
	};
	g_autofree char *param = g_strdup_printf("- %s", summary);
	g_autofree char *desc = g_strconcat(exit_help, "\nExamples:\n", examples, NULL);
	GOptionContext *ctx = g_option_context_new(param);
	GError *err = NULL;
	VtGuestSource *src = NULL;

	*rc = VT_EXIT_USAGE;
	vt_cmd_ssh_entries(&a->ssh, common, "ssh", TRUE);
	g_option_context_set_description(ctx, desc);
	g_option_context_add_main_entries(ctx, common, NULL);
	if (extra)
		g_option_context_add_main_entries(ctx, extra, NULL);
	if (!g_option_context_parse(ctx, argc, argv, &err) || *argc > 1) {
		vt_err(sub, "%s (see vmtrace %s --help)", err ? err->message : "unexpected argument", sub);
		g_clear_error(&err);
		goto out;
	}
	if (!vt_cmd_ssh_validate(&a->ssh, &err)) {
		vt_err(sub, "%s", err->message);
		g_clear_error(&err);
		goto out;
	}
	if (!a->ssh.ssh == !a->root) {
		vt_err(sub, "give exactly one of --ssh [USER@]HOST[:PORT] and --root DIR");
		goto out;
	}
	if (a->root) {
		src = vt_guest_source_root_open(a->root, &err);
		*rc = src ? VT_EXIT_OK : VT_EXIT_FAILURE;
		goto out;
	}
	src = vt_cmd_ssh_open(&a->ssh, stop, rc, &err);
out:
	if (err)
		vt_err(sub, "%s", err->message);
	g_clear_error(&err);
	g_option_context_free(ctx);
	return src;
}

/* {"build_id": .., "osrelease": .., "dir": .., "kallsyms": .., "modules": ..,
 *  "kcore": ..|null, "reused": .., "symbols": .., "kcore_bytes": .., "ranges": [...]} */
static void print_fetch_json(const VtGuestFetchResult *r)
{
	g_autofree char *mods = g_build_filename(r->dir, "modules", NULL);
	g_autofree char *kcore = g_build_filename(r->dir, "kcore", NULL);
	g_autoptr(VtJson) j = vt_json_new(stdout);

	vt_json_begin_object(j);
	vt_json_kv_string(j, "build_id", r->build_id);
	vt_json_kv_string(j, "osrelease", r->osrelease);
	vt_json_kv_string(j, "dir", r->dir);
	vt_json_kv_string(j, "kallsyms", r->kallsyms);
	vt_json_kv_string(j, "modules", mods);
	vt_json_kv_string(j, "kcore", r->has_kcore ? kcore : NULL);
	vt_json_kv_bool(j, "reused", r->reused);
	vt_json_kv_uint(j, "symbols", r->nsyms);
	vt_json_kv_uint(j, "kcore_bytes", r->kcore_bytes);
	vt_json_key(j, "ranges");
	vt_json_begin_array(j);
	for (guint i = 0; r->has_kcore && i < r->ranges->len; i++) {
		const VtGuestRange *g = &g_array_index(r->ranges, VtGuestRange, i);

		vt_json_begin_object(j);
		vt_json_kv_hex(j, "start", g->start);
		vt_json_kv_hex(j, "end", g->end);
		vt_json_kv_string(j, "what", g->what);
		vt_json_end_object(j);
	}
	vt_json_end_array(j);
	vt_json_end_object(j);
}

/* The copied kcore ranges ("  kcore: WHAT START-END") and their size. */
static void print_kcore_ranges(const VtGuestFetchResult *r)
{
	g_autoptr(VtTable) t = vt_table_new();

	vt_table_add_column(t, "", 0, FALSE, 0);
	vt_table_add_column(t, "WHAT", 16, FALSE, 1);
	vt_table_add_column(t, "RANGE", 0, FALSE, 1);
	for (guint i = 0; i < r->ranges->len; i++) {
		const VtGuestRange *g = &g_array_index(r->ranges, VtGuestRange, i);

		vt_table_add_row(t);
		vt_table_cell(t, "  kcore:");
		vt_table_cell(t, "%s", g->what);
		vt_table_cell(t, "0x%" G_GINT64_MODIFIER "x-0x%" G_GINT64_MODIFIER "x", g->start, g->end);
	}
	vt_table_note(t, "  kcore: %" G_GUINT64_FORMAT " KiB copied", r->kcore_bytes >> 10);
	vt_table_print(t, stderr, FALSE);
}

/* What was fetched on stderr; the kallsyms path, for perf, on stdout. */
static void print_fetch_text(const VtGuestFetchResult *r)
{
	fprintf(stderr, "guest kernel %s, build-id %s, %u symbols\n", r->osrelease, r->build_id, r->nsyms);
	if (r->reused)
		fprintf(stderr, "same snapshot found in %s\n", r->dir);
	else
		fprintf(stderr, "new snapshot %s%s\n", r->dir, r->has_kcore ? "" : " (no kcore)");
	if (r->has_kcore && !r->reused)
		print_kcore_ranges(r);
	fprintf(stderr, "pass to perf: --guestkallsyms=%s\n", r->kallsyms);
	printf("%s\n", r->kallsyms);
}

static int cmd_guest_fetch(int argc, char **argv)
{
	GuestArgs a = { .ssh.timeout = VT_GUEST_SSH_TIMEOUT };
	g_autofree char *cache = NULL;
	gboolean no_kcore = FALSE;
	GOptionEntry extra[] = {
		{ "output", 'o', 0, G_OPTION_ARG_FILENAME, &cache, "Cache directory (default ~/.debug, as perf)", "CACHE" },
		{ "no-kcore", 0, 0, G_OPTION_ARG_NONE, &no_kcore, "Do not copy /proc/kcore (only kallsyms and modules)", NULL },
		G_OPTION_ENTRY_NULL
	};
	VtGuestFetchResult r = { 0 };
	g_autoptr(GError) err = NULL;
	int rc;
	VtGuestSource *src;

	/* Ctrl-C, SIGTERM or SIGHUP: any SSH wait or the copy stops, the
	 * temporary snapshot is removed (a second signal kills) */
	stop_signals_install();
	src = guest_open("guest fetch", &argc, &argv, &a, extra,
					"copy a guest's kallsyms, modules and trimmed kcore into perf's cache",
					"  vmtrace guest fetch --ssh root@vm0 -i ~/.ssh/id_ed25519\n"
					"  vmtrace guest fetch --ssh root@127.0.0.1:2222 --known-hosts kh --no-kcore --json\n"
					"  sshfs -o direct_io root@vm0:/ vm0 && vmtrace guest fetch --root vm0\n", &stop_signal, &rc);
	g_autofree char *def_cache = g_build_filename(g_get_home_dir(), ".debug", NULL);
	VtGuestFetchOptions o = { NULL, !no_kcore, 4, &stop_signal };

	if (!src)
		goto out;
	o.cache = cache ? cache : def_cache;
	if (!vt_guest_fetch(src, &o, &r, &err)) {
		vt_err("guest fetch", "%s: %s", vt_guest_source_describe(src), err->message);
		rc = vt_cmd_guest_exit_code(err);
	} else if (a.json) {
		print_fetch_json(&r);
	} else {
		print_fetch_text(&r);
	}
out:
	vt_guest_fetch_result_clear(&r);
	vt_guest_source_close(src);
	stop_signals_restore();
	guest_args_clear(&a);
	return rc;
}

static int cmd_guest_check(int argc, char **argv)
{
	GuestArgs a = { .ssh.timeout = VT_GUEST_SSH_TIMEOUT };
	int rc;
	VtGuestSource *src = guest_open("guest check", &argc, &argv, &a, NULL,
					"is a guest ready for guest-sideband decoding?",
					"  vmtrace guest check --ssh root@vm0\n"
					"  vmtrace guest check --root vm0 --json\n", NULL, &rc);
	g_autoptr(GPtrArray) checks = g_ptr_array_new_with_free_func(vt_host_check_free);

	if (src) {
		vt_guest_readiness(src, checks);
		if (!vt_checks_ok(checks))
			rc = VT_EXIT_FAILURE;
		vt_checks_print(checks, a.json, rc == VT_EXIT_OK);
	}
	vt_guest_source_close(src);
	guest_args_clear(&a);
	return rc;
}

static const VtCmd guest_cmds[] = {
	{ "fetch", cmd_guest_fetch, "copy a guest's kallsyms, modules and trimmed kcore into perf's cache" },
	{ "check", cmd_guest_check, "is a guest ready for guest-sideband decoding? (clocksource, kptr_restrict, ...)" },
};

int cmd_guest(int argc, char **argv)
{
	int rc;

	if (argc < 2 || vt_cmd_is_help(argv[1])) {
		FILE *f = argc < 2 ? stderr : stdout;

		fprintf(f, "Usage: vmtrace guest fetch|check [OPTIONS]\n\n");
		vt_cmd_list(f, guest_cmds, G_N_ELEMENTS(guest_cmds));
		fprintf(f, "\n  vmtrace guest fetch|check --help    options\n");
		return argc < 2 ? VT_EXIT_USAGE : VT_EXIT_OK;
	}
	rc = vt_cmd_dispatch(guest_cmds, G_N_ELEMENTS(guest_cmds), "vmtrace guest", argc - 1, argv + 1);
	if (rc >= 0)
		return rc;
	vt_err("guest", "unknown subcommand '%s': fetch or check (see vmtrace guest --help)", argv[1]);
	return VT_EXIT_USAGE;
}
