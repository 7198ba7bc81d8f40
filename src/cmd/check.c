/* check.c - `vmtrace check`: is this host (and domain) ready for recording? */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "src/host/domain.h"
#include "src/host/host.h"
#include "src/cli/json.h"
#include "src/cli/table.h"
#include "src/cmd/cmd.h"

/* The domain (or process), whether it uses KVM, and its QEMU process. */
static void domain_found_checks(GPtrArray *checks, const VtDomain *d, gboolean by_pid)
{
	if (by_pid)
		vt_host_check_add(checks, "domain", VT_HOST_CHECK_OK, NULL, "QEMU process %s, %u vCPU threads, %s", d->name,
			     d->nvcpus, d->kvm ? "KVM" : "not KVM-accelerated");
	else
		vt_host_check_add(checks, "domain", VT_HOST_CHECK_OK, NULL, "domain '%s' %s on %s (driver %s, %u vCPUs, %s)",
			     d->name, d->state, d->uri, d->driver, d->nvcpus, d->kvm ? "KVM" : "not KVM-accelerated");
	if (!d->kvm)
		vt_host_check_add(checks, "domain_kvm", VT_HOST_CHECK_WARN, "use <domain type='kvm'> in the domain XML",
			     "the domain does not use KVM: Intel PT sees no VMX guest to trace");
	if (!d->pid)
		vt_host_check_add(checks, "qemu_pid", VT_HOST_CHECK_FAIL,
			     "use the QEMU driver (qemu:///system); run as root to read /run/libvirt/qemu",
			     "no QEMU process found for '%s' (driver %s)", d->name, d->driver);
	else
		vt_host_check_add(checks, "qemu_pid", VT_HOST_CHECK_OK, NULL, "QEMU pid %u", d->pid);
}

/* Every vCPU's thread, and where it was found. */
static void vcpu_threads_check(GPtrArray *checks, const VtDomain *d)
{
	if (d->vcpus->len == d->nvcpus && d->nvcpus) {
		g_autoptr(GString) s = g_string_new(NULL);

		for (guint i = 0; i < d->vcpus->len; i++) {
			const VtDomainVcpu *v = &g_array_index(d->vcpus, VtDomainVcpu, i);

			g_string_append_printf(s, "%svCPU %d = tid %u", i ? ", " : "", v->vcpu, v->tid);
		}
		vt_host_check_add(checks, "vcpu_threads", VT_HOST_CHECK_OK, NULL, "%s (from %s)", s->str,
			     g_array_index(d->vcpus, VtDomainVcpu, 0).source);
	} else if (d->pid) {
		vt_host_check_add(checks, "vcpu_threads", VT_HOST_CHECK_FAIL,
			     "mount debugfs, or let QEMU name its threads (-name debug-threads=on; libvirt does), or use --qmp",
			     "found %u of %u vCPU threads", d->vcpus->len, d->nvcpus);
	}
}

/* KVM's debugfs entry of the process (TSC offsets) and TSC scaling. */
static void kvm_debugfs_checks(GPtrArray *checks, const VtDomain *d)
{
	if (d->kvm && d->kvm_dir) {
		const VtDomainVcpu *v0 = d->vcpus->len ? &g_array_index(d->vcpus, VtDomainVcpu, 0) : NULL;

		vt_host_check_add(checks, "kvm_debugfs", VT_HOST_CHECK_OK, NULL, "KVM debugfs %s%s (vCPU 0 tsc-offset %" G_GINT64_FORMAT ")",
			     vt_host_root(), d->kvm_dir, v0 ? v0->tsc_offset : 0);
		if (v0 && v0->have_scaling && v0->tsc_scaling_ratio != (1ULL << v0->tsc_scaling_frac_bits))
			vt_host_check_add(checks, "tsc_scaling", VT_HOST_CHECK_WARN,
				     "vmtrace correlate --tsc-scale (vmtrace record stores the ratio for it)",
				     "the guest TSC is scaled: ratio %" G_GUINT64_FORMAT "/2^%u",
				     v0->tsc_scaling_ratio, v0->tsc_scaling_frac_bits);
		else
			vt_host_check_add(checks, "tsc_scaling", VT_HOST_CHECK_OK, NULL, "no TSC scaling");
	} else if (d->pid && d->kvm) {
		vt_host_check_add(checks, "kvm_debugfs", VT_HOST_CHECK_WARN, "sudo mount -t debugfs none /sys/kernel/debug",
			     "no KVM debugfs entry for pid %u: TSC offsets will not be recorded", d->pid);
	}
}

/* The checks of --domain NAME or --pid PID. */
static void domain_checks(GPtrArray *checks, const char *name, const char *uri, gboolean qmp, guint pid)
{
	VtDomain d;
	g_autoptr(GError) err = NULL;

	if (pid ? !vt_domain_from_pid(pid, &d, &err) : !vt_domain_find(name, uri, qmp, &d, &err)) {
		const char *fix = err->code == VT_DOMAIN_ERROR_NOT_RUNNING ? "start the domain (see the message)"
				  : err->code == VT_DOMAIN_ERROR_CONNECT ? "start libvirtd, or give --connect URI"
				  : "check the name: virsh list --all";

		vt_host_check_add(checks, "domain", VT_HOST_CHECK_FAIL, fix, "%s", err->message);
		vt_domain_clear(&d);
		return;
	}
	domain_found_checks(checks, &d, pid != 0);
	vcpu_threads_check(checks, &d);
	kvm_debugfs_checks(checks, &d);
	vt_domain_clear(&d);
}

gboolean vt_checks_ok(GPtrArray *checks)
{
	for (guint i = 0; i < checks->len; i++)
		if (((const VtHostCheck *)checks->pdata[i])->level == VT_HOST_CHECK_FAIL)
			return FALSE;
	return TRUE;
}

/* {"checks": [{"name": .., "status": .., "what": .., "fix": ..|null}, ...], "ok": ..} */
static void checks_print_json(GPtrArray *checks, gboolean ok)
{
	g_autoptr(VtJson) j = vt_json_new(stdout);

	vt_json_begin_object(j);
	vt_json_key(j, "checks");
	vt_json_begin_array(j);
	for (guint i = 0; i < checks->len; i++) {
		const VtHostCheck *c = checks->pdata[i];

		vt_json_begin_object(j);
		vt_json_kv_string(j, "name", c->name);
		vt_json_kv_string(j, "status", vt_host_check_level_name(c->level));
		vt_json_kv_string(j, "what", c->what);
		vt_json_kv_string(j, "fix", c->fix);
		vt_json_end_object(j);
	}
	vt_json_end_array(j);
	vt_json_kv_bool(j, "ok", ok);
	vt_json_end_object(j);
}

/* "STATUS NAME WHAT" lines; below a WARN or FAIL, "fix: ..." in the WHAT column. */
static void checks_print_table(GPtrArray *checks)
{
	g_autoptr(VtTable) t = vt_table_new();

	vt_table_add_column(t, "STATUS", 4, FALSE, 0);
	vt_table_add_column(t, "CHECK", 20, FALSE, 1);
	vt_table_add_column(t, "WHAT", 0, FALSE, 1);
	for (guint i = 0; i < checks->len; i++) {
		const VtHostCheck *c = checks->pdata[i];

		vt_table_add_row(t);
		vt_table_cell(t, "%s", vt_host_check_level_name(c->level));
		vt_table_cell(t, "%s", c->name);
		vt_table_cell(t, "%s", c->what);
		if (c->fix && c->level != VT_HOST_CHECK_OK) {
			vt_table_add_row(t);
			vt_table_cell(t, "%s", "");
			vt_table_cell(t, "%s", "");
			vt_table_cell(t, "fix: %s", c->fix);
		}
	}
	vt_table_print(t, stdout, FALSE);
}

/* Print a check list as a table (with fixes) or as JSON. */
void vt_checks_print(GPtrArray *checks, gboolean json, gboolean ok)
{
	if (json)
		checks_print_json(checks, ok);
	else
		checks_print_table(checks);
}

typedef struct {
	char *domain, *uri, *root;
	gint pid;
	gboolean json, qmp;
} CheckOpts;

static void check_opts_clear(CheckOpts *o)
{
	g_free(o->domain);
	g_free(o->uri);
	g_free(o->root);
}

static const char check_summary[] =
	"Checks everything host-side Intel PT tracing of KVM guests needs - the intel_pt\n"
	"PMU and its capabilities, IA32_VMX_MISC[14], kvm_intel pt_mode, permissions,\n"
	"kptr_restrict, lockdown, debugfs - and, with --domain, that the domain runs\n"
	"and its QEMU process and vCPU threads can be found.  Each check is OK, WARN\n"
	"or FAIL, with the exact fix.";

static const char check_description[] =
	"Exit status: 0 no FAIL; 1 some check FAILed; 2 usage error.\n\n"
	"Examples:\n"
	"  vmtrace check\n"
	"  sudo vmtrace check --domain kubuntu20.04\n"
	"  vmtrace check --domain test --connect test:///default --json\n";

/* Options and their usage errors: FALSE (reported) on a usage error. */
static gboolean check_parse(CheckOpts *o, int argc, char **argv)
{
	GOptionEntry entries[] = {
		{ "domain", 'd', 0, G_OPTION_ARG_STRING, &o->domain, "Also check this libvirt domain", "NAME" },
		{ "connect", 'c', 0, G_OPTION_ARG_STRING, &o->uri, "libvirt URI (default $LIBVIRT_DEFAULT_URI, else qemu:///system)", "URI" },
		{ "pid", 'p', 0, G_OPTION_ARG_INT, &o->pid, "Check a QEMU process not managed by libvirt", "PID" },
		{ "qmp", 0, 0, G_OPTION_ARG_NONE, &o->qmp, "May ask QEMU's monitor for vCPU threads (taints the domain)", NULL },
		{ "root", 0, 0, G_OPTION_ARG_FILENAME, &o->root, "Read /sys, /proc, /dev and /run below DIR (for tests)", "DIR" },
		{ "json", 'j', 0, G_OPTION_ARG_NONE, &o->json, "JSON output", NULL },
		G_OPTION_ENTRY_NULL
	};
	g_autoptr(GError) err = NULL;

	if (!vt_cli_parse("- is this host (and domain) ready for vmtrace record?", check_summary, check_description,
			  entries, &argc, &argv, &err) || argc > 1) {
		vt_err("check", "%s (see vmtrace check --help)", err ? err->message : "unexpected argument");
		return FALSE;
	}
	if (o->domain && o->pid) {
		vt_err("check", "--domain and --pid exclude each other");
		return FALSE;
	}
	return TRUE;
}

int cmd_check(int argc, char **argv)
{
	CheckOpts o = { 0 };
	g_autoptr(GPtrArray) checks = g_ptr_array_new_with_free_func(vt_host_check_free);
	gboolean ok;

	if (!check_parse(&o, argc, argv)) {
		check_opts_clear(&o);
		return VT_EXIT_USAGE;
	}
	if (o.root)
		vt_host_set_root(o.root);
	vt_host_readiness(checks);
	if (o.domain || o.pid > 0)
		domain_checks(checks, o.domain, o.uri, o.qmp, o.pid > 0 ? (guint)o.pid : 0);
	ok = vt_checks_ok(checks);
	vt_checks_print(checks, o.json, ok);
	check_opts_clear(&o);
	return ok ? VT_EXIT_OK : VT_EXIT_FAILURE;
}
