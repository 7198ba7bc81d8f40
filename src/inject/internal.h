/* internal.h - shared between the files of src/inject/ (not an API). */
#ifndef VT_INJECT_INTERNAL_H
#define VT_INJECT_INTERNAL_H

#include "src/inject/inject.h"

typedef struct {
	uint64_t time;
	uint32_t cpu;
} InjPlacement;

typedef struct {
	gboolean out;
	uint32_t pid, tid, cpu;
	uint64_t time;
} InjSwitch;

/* A "CPU n/KVM" thread of the host recording. */
typedef struct {
	guint vcpu;
	uint32_t pid, tid;
	GArray *placements;      /* InjPlacement of its IN switches, by time */
	gboolean placed;         /* has any switch record */
	uint64_t first_time;     /* its first OUT */
	uint32_t first_cpu;      /* its CPU before its first IN */
} InjVcpu;

typedef struct {
	VtPerfFile *f;
	GArray *comms;           /* InjVcpu: every "CPU n/KVM" COMM */
	GArray *switches;        /* InjSwitch */
	gboolean have_tc;
	VtPerfTimeConv tc;
	uint64_t max_id;
	GArray *injected;        /* uint32_t: machine pids of its ID_INDEX (guest records injected before) */
	uint32_t pid;            /* selected QEMU process */
	GPtrArray *vcpus;        /* InjVcpu* by vCPU number (NULL: none) */
} InjHost;

InjHost *inj_host_open(const char *path, GError **error);
void inj_host_free(InjHost *h);
GArray *inj_host_pids(const InjHost *h);
gboolean inj_host_select(InjHost *h, uint32_t pid, GError **error);
uint32_t inj_host_cpu(const InjVcpu *v, uint64_t t);

typedef struct {
	VtPerfFile *f;
	GHashTable *id_cpu;      /* sample id -> its CPU (encoded: see guest.c) */
	gboolean have_id_index, have_tc;
	VtPerfTimeConv tc;
	GArray *recs;            /* VtPerfRecord to inject, in file order */
	GPtrArray *rec_bytes;    /* their bytes (copies: records point into them) */
	guint64 skipped;
} InjGuest;

InjGuest *inj_guest_open(const char *path, GError **error);
void inj_guest_free(InjGuest *g);
gboolean inj_guest_kept(const VtPerfRecord *rec);
/* The guest CPU of a sample id ((guint)-1: none). */
guint inj_guest_id_cpu(const InjGuest *g, uint64_t id);

#endif
