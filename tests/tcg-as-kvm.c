/* tcg-as-kvm.c - LD_PRELOAD for QEMU in tests: its TCG vCPU threads are
 * named "CPU n/KVM" instead of "CPU n/TCG".  perf inject --guest-data and
 * vmtrace inject find a guest's vCPU threads by that name only (perf:
 * sscanf "CPU %u/KVM"), and a thread's comm can only be changed from its
 * own process (/proc/PID/task/TID/comm refuses other writers: EINVAL), so
 * the tests of record --guest-ssh against a TCG guest rename them as they
 * are named.  Build: cc -shared -fPIC -o tcg-as-kvm.so tcg-as-kvm.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

int pthread_setname_np(pthread_t thread, const char *name)
{
	int (*real)(pthread_t, const char *) = (int (*)(pthread_t, const char *))dlsym(RTLD_NEXT, "pthread_setname_np");
	char buf[16];
	unsigned n;
	int len = 0;

	if (sscanf(name, "CPU %u/TCG%n", &n, &len) == 1 && len && !name[len]) {
		snprintf(buf, sizeof(buf), "CPU %u/KVM", n);
		name = buf;
	}
	return real(thread, name);
}
