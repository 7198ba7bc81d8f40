/* domain.h - find a libvirt domain's QEMU process and vCPU threads. */
#ifndef VT_DOMAIN_H
#define VT_DOMAIN_H

#include <glib.h>
#include <stdint.h>

G_BEGIN_DECLS

#define VT_DOMAIN_ERROR (vt_domain_error_quark())
GQuark vt_domain_error_quark(void);
typedef enum {
	VT_DOMAIN_ERROR_CONNECT,     /* cannot connect to the hypervisor URI */
	VT_DOMAIN_ERROR_NOT_FOUND,   /* no such domain */
	VT_DOMAIN_ERROR_NOT_RUNNING, /* defined but not running */
	VT_DOMAIN_ERROR_NO_PROCESS,  /* running, but no QEMU process found */
} VtDomainErrorCode;

/* KVM's debugfs view of one vCPU (kvm/<pid>-<fd>/vcpuN/). */
typedef struct {
	int vcpu;
	uint32_t tid;                /* 0: unknown */
	const char *source;          /* "debugfs", "thread name", "qmp" */
	gboolean have_kvm;           /* debugfs entries below are valid */
	int64_t tsc_offset;
	gboolean have_scaling;
	uint64_t tsc_scaling_ratio;
	guint tsc_scaling_frac_bits;
	int guest_mode;
} VtDomainVcpu;

typedef struct {
	char *name;
	char *uri;
	char *driver;                /* virConnectGetType: "QEMU", "TEST", ... */
	char *state;                 /* "running", "shut off", ... */
	gboolean running;
	gboolean kvm;                /* <domain type='kvm'> */
	guint nvcpus;
	uint32_t pid;                /* QEMU pid, 0 if unknown */
	char *kvm_dir;               /* debugfs kvm/<pid>-<fd> (under the root), or NULL */
	GArray *vcpus;               /* VtDomainVcpu, by vCPU index */
} VtDomain;

/* Connect (uri NULL: $LIBVIRT_DEFAULT_URI, else qemu:///system), look the
 * domain up, and find its QEMU pid and vCPU threads: KVM debugfs
 * vcpuN/pid first, then "CPU n/KVM" (or /TCG) thread names, then - only with
 * `qmp`, which taints the domain - QMP query-cpus-fast. */
gboolean vt_domain_find(const char *name, const char *uri, gboolean qmp, VtDomain *d, GError **error);
void vt_domain_clear(VtDomain *d);
/* A QEMU process not managed by libvirt: its vCPU threads by pid. */
gboolean vt_domain_from_pid(uint32_t pid, VtDomain *d, GError **error);
/* (Re)discover d->pid's vCPU threads: KVM debugfs, then thread names. */
void vt_domain_threads(VtDomain *d);
/* Re-read the KVM debugfs metadata of every vCPU (tsc-offset, scaling, guest_mode). */
void vt_domain_read_kvm(VtDomain *d);

G_END_DECLS

#endif
