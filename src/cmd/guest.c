/* guest.c - `vmtrace guest fetch` and `vmtrace guest check`: the guest
 * sideband (kallsyms, modules, build-id, trimmed kcore) over SSH or from a
 * mounted tree, and whether the guest is ready for it. */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "guestfs/guestfs.h"
#include "src/host/host.h"
#include "src/cmd/cmd.h"

typedef struct {
	char *ssh, *identity, *known_hosts, *root;
	gboolean batch, json;
} GuestArgs;

static void guest_args_clear(GuestArgs *a)
{
	g_free(a->ssh);
	g_free(a->identity);
	g_free(a->known_hosts);
	g_free(a->root);
}

static volatile sig_atomic_t stop_signal;

static void on_stop(int sig)
{
	stop_signal = sig;
}

static int exit_code(const GError *err)
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
	default: return VT_EXIT_FAILURE;
	}
}

static const char exit_help[] =
	"Exit status: 0 ok; 1 failure; 2 usage error; 3 malformed guest data;\n"
	"9 SSH host key unknown (refused); 10 SSH host key changed (refused);\n"
	"11 SSH authentication failed or key file unusable; 12 cannot connect;\n"
	"13 kallsyms/modules changed during the copy (fetch).\n";

/* Parse the options shared by both subcommands plus `extra`; open the source. */
static VtGuestSource *guest_open(const char *sub, int *argc, char ***argv, GuestArgs *a, const GOptionEntry *extra,
				 const char *summary, const char *examples, int *rc)
{
	GOptionEntry common[] = {
		{ "ssh", 's', 0, G_OPTION_ARG_STRING, &a->ssh, "Connect to the guest over SSH (libssh)", "[USER@]HOST[:PORT]" },
		{ "identity", 'i', 0, G_OPTION_ARG_FILENAME, &a->identity, "Private key file (default: ssh-agent, ~/.ssh/id_*)", "KEY" },
		{ "known-hosts", 0, 0, G_OPTION_ARG_FILENAME, &a->known_hosts, "known_hosts file (default ~/.ssh/known_hosts)", "FILE" },
		{ "batch", 0, 0, G_OPTION_ARG_NONE, &a->batch, "Never prompt (no key passphrase prompt)", NULL },
		{ "root", 0, 0, G_OPTION_ARG_FILENAME, &a->root, "Read the guest's files below DIR (an sshfs -o direct_io mount)", "DIR" },
		{ "json", 'j', 0, G_OPTION_ARG_NONE, &a->json, "JSON output", NULL },
		G_OPTION_ENTRY_NULL
	};
	g_autofree char *param = g_strdup_printf("- %s", summary);
	g_autofree char *desc = g_strconcat(exit_help, "\nExamples:\n", examples, NULL);
	GOptionContext *ctx = g_option_context_new(param);
	GError *err = NULL;
	VtGuestSource *src = NULL;
	VtGuestSshOptions so = { 0 };

	*rc = VT_EXIT_USAGE;
	g_option_context_set_description(ctx, desc);
	g_option_context_add_main_entries(ctx, common, NULL);
	if (extra)
		g_option_context_add_main_entries(ctx, extra, NULL);
	if (!g_option_context_parse(ctx, argc, argv, &err) || *argc > 1) {
		vt_err(sub, "%s (see vmtrace %s --help)", err ? err->message : "unexpected argument", sub);
		g_clear_error(&err);
		goto out;
	}
	if (!a->ssh == !a->root) {
		vt_err(sub, "give exactly one of --ssh [USER@]HOST[:PORT] and --root DIR");
		goto out;
	}
	if (a->root) {
		src = vt_guest_source_root_open(a->root, &err);
		*rc = src ? VT_EXIT_OK : VT_EXIT_FAILURE;
		goto out;
	}
	if (!vt_guest_ssh_parse_target(a->ssh, &so, &err))
		goto out;
	so.identity = g_strdup(a->identity);
	so.known_hosts = g_strdup(a->known_hosts);
	so.batch = a->batch;
	src = vt_guest_source_ssh_open(&so, &err);
	*rc = src ? VT_EXIT_OK : exit_code(err);
out:
	if (err)
		vt_err(sub, "%s", err->message);
	g_clear_error(&err);
	vt_guest_ssh_options_clear(&so);
	g_option_context_free(ctx);
	return src;
}

static void print_fetch_json(const VtGuestFetchResult *r)
{
	GString *s = g_string_new("{\"build_id\": ");
	g_autofree char *mods = g_build_filename(r->dir, "modules", NULL);
	g_autofree char *kcore = g_build_filename(r->dir, "kcore", NULL);

	vt_json_str(s, r->build_id);
	g_string_append(s, ", \"osrelease\": ");
	vt_json_str(s, r->osrelease);
	g_string_append(s, ", \"dir\": ");
	vt_json_str(s, r->dir);
	g_string_append(s, ", \"kallsyms\": ");
	vt_json_str(s, r->kallsyms);
	g_string_append(s, ", \"modules\": ");
	vt_json_str(s, mods);
	g_string_append(s, ", \"kcore\": ");
	if (r->has_kcore)
		vt_json_str(s, kcore);
	else
		g_string_append(s, "null");
	g_string_append_printf(s, ", \"reused\": %s, \"symbols\": %u, \"kcore_bytes\": %" G_GUINT64_FORMAT ", \"ranges\": [",
			       r->reused ? "true" : "false", r->nsyms, r->kcore_bytes);
	for (guint i = 0; r->has_kcore && i < r->ranges->len; i++) {
		const VtGuestRange *g = &g_array_index(r->ranges, VtGuestRange, i);

		g_string_append_printf(s, "%s{\"start\": \"0x%" G_GINT64_MODIFIER "x\", \"end\": \"0x%" G_GINT64_MODIFIER
				       "x\", \"what\": \"%s\"}", i ? ", " : "", g->start, g->end, g->what);
	}
	g_string_append(s, "]}\n");
	fputs(s->str, stdout);
	g_string_free(s, TRUE);
}

static int cmd_guest_fetch(int argc, char **argv)
{
	GuestArgs a = { 0 };
	char *cache = NULL;
	gboolean no_kcore = FALSE;
	GOptionEntry extra[] = {
		{ "output", 'o', 0, G_OPTION_ARG_FILENAME, &cache, "Cache directory (default ~/.debug, as perf)", "CACHE" },
		{ "no-kcore", 0, 0, G_OPTION_ARG_NONE, &no_kcore, "Do not copy /proc/kcore (only kallsyms and modules)", NULL },
		G_OPTION_ENTRY_NULL
	};
	VtGuestFetchResult r = { 0 };
	GError *err = NULL;
	int rc;
	VtGuestSource *src = guest_open("guest fetch", &argc, &argv, &a, extra,
					"copy a guest's kallsyms, modules and trimmed kcore into perf's cache",
					"  vmtrace guest fetch --ssh root@vm0 -i ~/.ssh/id_ed25519\n"
					"  vmtrace guest fetch --ssh root@127.0.0.1:2222 --known-hosts kh --no-kcore --json\n"
					"  sshfs -o direct_io root@vm0:/ vm0 && vmtrace guest fetch --root vm0\n", &rc);
	VtGuestFetchOptions o = { NULL, !no_kcore, 4, &stop_signal };
	g_autofree char *def_cache = g_build_filename(g_get_home_dir(), ".debug", NULL);
	/* Ctrl-C or SIGTERM during the copy: stop, and remove the temporary
	 * snapshot (a second one kills) */
	struct sigaction sa = { .sa_handler = on_stop, .sa_flags = SA_RESETHAND }, old_int, old_term;
	gboolean ok;

	if (!src)
		goto out;
	o.cache = cache ? cache : def_cache;
	sigemptyset(&sa.sa_mask);
	stop_signal = 0;
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	ok = vt_guest_fetch(src, &o, &r, &err);
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	if (!ok) {
		vt_err("guest fetch", "%s: %s", vt_guest_source_describe(src), err->message);
		rc = exit_code(err);
		goto out;
	}
	if (a.json) {
		print_fetch_json(&r);
	} else {
		fprintf(stderr, "guest kernel %s, build-id %s, %u symbols\n", r.osrelease, r.build_id, r.nsyms);
		if (r.reused)
			fprintf(stderr, "same snapshot found in %s\n", r.dir);
		else
			fprintf(stderr, "new snapshot %s%s\n", r.dir, r.has_kcore ? "" : " (no kcore)");
		for (guint i = 0; r.has_kcore && !r.reused && i < r.ranges->len; i++) {
			const VtGuestRange *g = &g_array_index(r.ranges, VtGuestRange, i);

			fprintf(stderr, "  kcore: %-16s 0x%" G_GINT64_MODIFIER "x-0x%" G_GINT64_MODIFIER "x\n", g->what,
				g->start, g->end);
		}
		if (r.has_kcore && !r.reused)
			fprintf(stderr, "  kcore: %" G_GUINT64_FORMAT " KiB copied\n", r.kcore_bytes >> 10);
		fprintf(stderr, "pass to perf: --guestkallsyms=%s\n", r.kallsyms);
		printf("%s\n", r.kallsyms);
	}
out:
	g_clear_error(&err);
	vt_guest_fetch_result_clear(&r);
	vt_guest_source_close(src);
	guest_args_clear(&a);
	g_free(cache);
	return rc;
}

static int cmd_guest_check(int argc, char **argv)
{
	GuestArgs a = { 0 };
	int rc;
	VtGuestSource *src = guest_open("guest check", &argc, &argv, &a, NULL,
					"is a guest ready for guest-sideband decoding?",
					"  vmtrace guest check --ssh root@vm0\n"
					"  vmtrace guest check --root vm0 --json\n", &rc);
	GPtrArray *checks = g_ptr_array_new_with_free_func(vt_host_check_free);

	if (src) {
		vt_guest_readiness(src, checks);
		for (guint i = 0; i < checks->len; i++)
			if (((VtHostCheck *)checks->pdata[i])->level == VT_HOST_CHECK_FAIL)
				rc = VT_EXIT_FAILURE;
		vt_checks_print(checks, a.json, rc == VT_EXIT_OK);
	}
	g_ptr_array_free(checks, TRUE);
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
