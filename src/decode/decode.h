/* decode.h - full decoding of host Intel PT recordings of KVM guests: code
 * images (kcore + kallsyms) and libipt's block decoder turned into a stream
 * of branches.
 *
 * Images.  A kernel's code comes from an ELF core (a kcore_dir's kcore, a
 * `vmtrace guest fetch` snapshot's kcore: only PF_X PT_LOADs are code) and
 * its symbols from kallsyms.  Host and guest each have one image; the
 * decoder swaps them on every paging event's NR bit (strategy D), because
 * host and guest kernels overlap in the address space.
 *
 * Branches.  Every taken branch, as perf's --itrace=b sees them: taken
 * conditional jumps, jumps, calls, returns, syscalls, interrupts, VM
 * entries and exits, trace begin and end; each with host/guest, the VMCS
 * loaded and the time (host TSC) when the recording is timed.  Decode
 * errors are records too; decoding resumes at the next PSB.
 *
 * No printing, no exiting: errors are GErrors in VT_DECODE_ERROR.
 * May call: src/perf, vmcorr's session index (vmcorr/session.h), libipt,
 * Zydis. */
#ifndef VT_DECODE_H
#define VT_DECODE_H

#include <glib.h>
#include <stdint.h>
#include <string.h>

#include "src/perf/perf-data.h"

G_BEGIN_DECLS

#define VT_DECODE_ERROR (vt_decode_error_quark())
GQuark vt_decode_error_quark(void);

typedef enum {
	VT_DECODE_ERROR_IO,         /* a file cannot be read */
	VT_DECODE_ERROR_BAD_IMAGE,  /* kcore/kallsyms malformed or missing what is needed */
	VT_DECODE_ERROR_BAD_INPUT,  /* the recording is unusable (no Intel PT, malformed) */
	VT_DECODE_ERROR_FAILED,     /* libipt refused (allocation, configuration) */
} VtDecodeErrorCode;

/* ------------------------------------------------------------- images */
typedef struct VtDecodeImage VtDecodeImage;

/* A kernel image: code from the ELF core `kcore`, symbols from `kallsyms`
 * (perf's rules: the symbol containing an address is the last one at the
 * highest start at or below it; where several share an address the last in
 * file order wins; "name\t[module]" names the module's symbol).  `what`
 * ("host", "guest") goes into error messages. */
VtDecodeImage *vt_decode_image_load(const char *kcore, const char *kallsyms, const char *what, GError **error);
/* DIR/kcore + DIR/kallsyms (a kcore_dir or a guest fetch snapshot). */
VtDecodeImage *vt_decode_image_load_dir(const char *dir, const char *what, GError **error);
/* A kernel image from a vmlinux ELF file (its executable PT_LOADs, its
 * .symtab as perf reads it: symbols end at their sizes) at its link
 * addresses until relocated; a file without symbols is refused. */
VtDecodeImage *vt_decode_image_load_vmlinux(const char *path, const char *what, GError **error);
/* A vmlinux image moved so that symbol `name` is at addr, as perf moves
 * it by the kernel MMAP record ("[kernel.kallsyms]_text", pgoff: _text's
 * address); before decoders are made.  The shift (0: none, not a vmlinux
 * image, or no such symbol). */
gint64 vt_decode_image_relocate(VtDecodeImage *img, const char *name, guint64 addr);
/* Was img loaded from a vmlinux (its symbols have sizes: code between
 * them has none, yet is the kernel's - perf names its DSO there)? */
gboolean vt_decode_image_vmlinux(const VtDecodeImage *img);
/* A vmlinux image the recording did not place (no kernel MMAP record
 * with a pgoff, or its symbol is not in the vmlinux): at its link
 * addresses, right only for a kernel that ran there. */
gboolean vt_decode_image_unplaced(const VtDecodeImage *img);
/* A vmlinux image's GNU build id in hex (NULL: none, or not a vmlinux). */
const char *vt_decode_image_build_id(const VtDecodeImage *img);
/* The file the image's code comes from (kcore, vmlinux). */
const char *vt_decode_image_path(const VtDecodeImage *img);
/* What perf appends to the kernel's DSO name at addr: "" (.text; any
 * address of a kcore image), a vmlinux section's name where perf maps it
 * as a DSO of its own (".init.text": a section other than .text that
 * holds a symbol), NULL where a vmlinux has no map (perf: no DSO). */
const char *vt_decode_image_dso_suffix(const VtDecodeImage *img, guint64 addr);
/* A kernel module's map, as perf makes one of a kernel MMAP record of a
 * module (PATH, e.g. /lib/modules/V/kernel/arch/x86/kvm/kvm-intel.ko, or
 * "[kvm_intel]", at [start, start + len)): named vt_decode_module_name's
 * way ("[kvm_intel]").  Only a vmlinux image keeps
 * them (a kcore maps the module area as the kernel's own); before
 * decoders are made. */
void vt_decode_image_add_module(VtDecodeImage *img, guint64 start, guint64 len, const char *path);
/* perf 6.1's DSO name of a module's path (kmod_path__parse_name): "[NAME]"
 * for a file NAME.ko, NAME.ko.gz or NAME.ko.xz ('-' as '_'); other files
 * by their file name as it is (perf 6.1 does not know .zst); a "[NAME]"
 * perf record wrote as it is.  Free with g_free. */
char *vt_decode_module_name(const char *path);
/* The module map's DSO name at addr ("[kvm_intel]"), NULL: none. */
const char *vt_decode_image_module(const VtDecodeImage *img, guint64 addr);
void vt_decode_image_free(VtDecodeImage *img);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(VtDecodeImage, vt_decode_image_free)

/* The code bytes at vaddr (NULL when no code segment maps it); *avail: bytes
 * up to the end of that segment or where another starts - for each of
 * them this function gives the same mapping. */
const guint8 *vt_decode_image_code(const VtDecodeImage *img, guint64 vaddr, gsize *avail);
/* The same at time tsc (host TSC; 0: before any poke): where a TEXT_POKE
 * changed the page(s) of vaddr..vaddr+n-1, their bytes at that time,
 * copied to buf (n bytes at most) and *tag names the versions read (equal
 * tags, equal bytes); elsewhere the image's bytes and *tag 0. */
const guint8 *vt_decode_image_code_at(const VtDecodeImage *img, guint64 vaddr, guint64 tsc, guint8 *buf, gsize n,
				      gsize *avail, guint64 *tag);
/* The symbol containing addr and the offset into it; NULL if none. */
const char *vt_decode_image_symbol(const VtDecodeImage *img, guint64 addr, guint64 *offset);
/* The same and the name's length (*len 0 if none): kept from kallsyms,
 * where each caller's strlen of the name was a cache miss on a trace that
 * runs much code. */
const char *vt_decode_image_symbol_len(const VtDecodeImage *img, guint64 addr, guint64 *offset, gsize *len);
/* Address of a symbol by name (the first one in file order); 0 if none. */
guint64 vt_decode_image_lookup(const VtDecodeImage *img, const char *name);
/* Text symbols (types T/t) inside code segments, ascending addresses. */
const guint64 *vt_decode_image_functions(const VtDecodeImage *img, guint *n);
/* "_text" (perf's kernel map start: the guest kernel MMAP's pgoff). */
guint64 vt_decode_image_text(const VtDecodeImage *img);

/* Code patched while traced (PERF_RECORD_TEXT_POKE, textpoke.c): the image
 * holds the bytes before the pokes; decoders see each poke's bytes from
 * its time on.  Attach before decoders are made from the image (it takes
 * ownership, also on failure; NULL detaches); FALSE: the pokes could not be
 * prepared (error; the image stays without them). */
typedef struct VtDecodePokes VtDecodePokes;
VtDecodePokes *vt_decode_pokes_new(void);
void vt_decode_pokes_free(VtDecodePokes *p);
void vt_decode_pokes_add(VtDecodePokes *p, guint64 addr, const guint8 *old, const guint8 *new, gsize len,
			 guint64 tsc);
guint vt_decode_pokes_count(const VtDecodePokes *p);
gboolean vt_decode_image_set_pokes(VtDecodeImage *img, VtDecodePokes *pokes, GError **error);
const VtDecodePokes *vt_decode_image_pokes(const VtDecodeImage *img);
guint vt_decode_image_n_symbols(const VtDecodeImage *img);
guint vt_decode_image_n_segments(const VtDecodeImage *img);

/* Zeroed memory for a large lookup table that is read before it is
 * written (2 MiB-aligned, transparent huge pages asked for: see
 * bigtable.c).  Aborts when memory is exhausted, as g_malloc; free with the
 * same size. */
void *vt_decode_table_new(gsize bytes);
void vt_decode_table_free(void *table, gsize bytes);
/* A small zeroed table (up to a few hundred KiB) whose pages are all
 * mapped at once, now: 4 KiB pages, no later fault (nor its TLB flush on
 * every CPU the threads run on) when a thread first writes to one. */
void *vt_decode_table_new_small(gsize bytes);
void vt_decode_table_free_small(void *table, gsize bytes);
/* The pages wholly inside [p, p + len), memory about to be written (a
 * buffer just allocated), mapped now in one call: each first write to a
 * page not yet mapped is a fault of its own, and on a virtual machine a
 * costly one (see bigtable.c).  Advice: where the kernel cannot, the
 * writes fault as before. */
void vt_decode_populate(void *p, gsize len);
/* Buffers written as soon as they are had (formatted text, its marks, AUX
 * windows, symbol tables) in transparent huge pages: on a virtual machine
 * the first write to each 4 KiB page costs a hypervisor exit, to a 2 MiB
 * page one for all (see bigtable.c).  vt_decode_buf_new: at least n
 * bytes, not zeroed - its capacity is vt_decode_buf_size(n), all of it
 * usable; from a pool shared by all threads, where vt_decode_buf_free
 * (with the same n, or any n of the same size: another is refused where it
 * can be told) returns it for reuse, so the memory held is, size by size,
 * the most of that size ever held at once (2 MiB at least for each size
 * used).  Aborts when memory is exhausted, as g_malloc.  Under
 * AddressSanitizer or valgrind plain g_malloc (vt_decode_memcheck; valgrind
 * where its headers were there at the build), so that they see overruns. */
void *vt_decode_buf_new(gsize n);
gsize vt_decode_buf_size(gsize n);
void vt_decode_buf_free(void *p, gsize n);
/* vt_decode_buf_new's buffer grown to n bytes (at most n of its first
 * old_n bytes kept), as g_realloc; old_n its size when it was had. */
void *vt_decode_buf_renew(void *p, gsize old_n, gsize n);
/* Is memory checked: an AddressSanitizer build, or a run under valgrind?
 * (Then frees and overruns must be seen: no pool, free at exit.) */
gboolean vt_decode_memcheck(void);

/* The symbols of addresses, cached per (image, address) in a table of
 * 2^slots_log2 entries of 32 bytes (direct-mapped: bounded, never stale -
 * an entry names its image and address).  A cache is one thread's; caches
 * made by vt_decode_symcache_share() look up and fill one table, from any
 * threads (a slot is written under a sequence number). */
typedef struct {
	guint64 addr;
	const VtDecodeImage *img;
	const char *sym;            /* the symbol containing addr, NULL if none */
	guint32 sym_len;
	gboolean code;              /* addr is in a code segment of img (sym only then) */
} VtDecodeSym;
typedef struct VtDecodeSymCache VtDecodeSymCache;
VtDecodeSymCache *vt_decode_symcache_new(guint slots_log2);
/* A cache for another thread on c's table (which lives until its last
 * cache is freed). */
VtDecodeSymCache *vt_decode_symcache_share(const VtDecodeSymCache *c);
void vt_decode_symcache_free(VtDecodeSymCache *c);
/* addr 0 or img NULL: no code, no symbol.  Valid until the next lookup
 * in c. */
const VtDecodeSym *vt_decode_symcache_lookup(VtDecodeSymCache *c, const VtDecodeImage *img, guint64 addr);
/* Whether addr is code (VtDecodeSym.code), without a symbol: no slot of
 * the table is read or filled. */
gboolean vt_decode_symcache_code(VtDecodeSymCache *c, const VtDecodeImage *img, guint64 addr);
/* The slot a lookup of (img, addr) reads, on its way into the cache. */
void vt_decode_symcache_prefetch(const VtDecodeSymCache *c, const VtDecodeImage *img, guint64 addr);
/* The name a lookup of (img, addr) gives, on its way into the cache, if
 * the slot holds it (best after vt_decode_symcache_prefetch had time). */
void vt_decode_symcache_prefetch_name(const VtDecodeSymCache *c, const VtDecodeImage *img, guint64 addr);

/* --------------------------------------------------------- instructions */
/* What an instruction does to control flow (Zydis decodes it). */
typedef enum {
	VT_INSN_OTHER,        /* falls through */
	VT_INSN_COND,         /* jcc, jrcxz, loop* */
	VT_INSN_JUMP,         /* direct near jmp */
	VT_INSN_CALL,         /* direct near call */
	VT_INSN_JUMP_IND,     /* indirect near jmp */
	VT_INSN_CALL_IND,     /* indirect near call */
	VT_INSN_RETURN,       /* near ret */
	VT_INSN_SYSCALL,      /* syscall, sysenter */
	VT_INSN_SYSRET,       /* sysret, sysexit */
	VT_INSN_IRET,         /* iret* */
	VT_INSN_INT,          /* int, int3, into, int1 */
	VT_INSN_FAR,          /* far call/jmp/ret; vmcall (libipt: a far call) */
	VT_INSN_VMENTRY,      /* vmlaunch, vmresume */
	VT_INSN_VMEXIT,       /* causes a VM exit in a guest: cpuid, in/out, rdmsr/wrmsr, ... */
	VT_INSN_STOP,         /* ud2, ud0/1, hlt in the host: control does not go on */
	VT_INSN_BAD,          /* not decodable */
} VtInsnKind;

typedef struct {
	guint8 len;
	guint8 kind;           /* VtInsnKind */
	guint8 writes_stack_top; /* mov REG, (%rsp): a retpoline replaces its return address */
	guint64 target;        /* direct branches: the target */
} VtInsn;

/* Decode the instruction at ip of img; FALSE (kind BAD) when unmapped or invalid. */
gboolean vt_decode_insn(const VtDecodeImage *img, guint64 ip, VtInsn *insn);
/* Execution modes: libipt's enum pt_exec_mode values (unknown: 64-bit). */
enum { VT_MODE_UNKNOWN = 0, VT_MODE_16 = 1, VT_MODE_32 = 2, VT_MODE_64 = 3 };
/* ... in mode (VT_MODE_*; direct targets: IP + size + displacement, as libipt) */
gboolean vt_decode_insn_mode(const VtDecodeImage *img, guint64 ip, guint8 mode, VtInsn *insn);

/* ---------------------------------------------------------- disassembly */
/* One instruction of an image: its bytes, its AT&T text ("(bad)" when
 * Zydis cannot decode it, "(unmapped)" outside the code; len 0 then) and
 * the symbol holding it (vt_decode_image_symbol: only in code).  64 bytes:
 * a slot of the table is one cache line. */
typedef struct {
	guint64 ip;
	const guint8 *code;    /* its bytes (len of them, in the image), NULL outside code */
	const char *sym;       /* NULL: none */
	guint64 sym_off;       /* ip - the symbol's start */
	guint16 sym_len;
	guint8 len;
	guint8 kind;           /* VtInsnKind (VT_INSN_OTHER when len is 0) */
	guint8 text_len;       /* (255: at least) */
	guint8 mode;           /* VT_MODE_* it was decoded in (0: none yet) */
	char text_in[26];      /* text shorter than this (almost always), NUL-terminated; else a pointer to it */
} VtDisasmInsn;

/* in's text (NUL-terminated, in->text_len bytes) */
static inline const char *vt_disasm_insn_text(const VtDisasmInsn *in)
{
	const char *p;

	if (in->text_len < sizeof(in->text_in))
		return in->text_in;
	memcpy(&p, in->text_in, sizeof(p));
	return p;
}

typedef struct VtDecodeDisasmTable VtDecodeDisasmTable;
typedef struct VtDecodeDisasm VtDecodeDisasm;

/* A cache of the instructions of img (borrowed): a direct-mapped table of
 * 2^slots_log2 of them (64 bytes each; 2^18 by vt_decode_disasm_new;
 * a hash of ip >> 6 picks 64 slots, ip & 63 one of them; in the same
 * memory texts of 26 bytes or more by address, and the kind and text of
 * instructions without relative operands by their bytes), each decoded
 * and formatted once while it stays in.  Thread-safe: the
 * readers (VtDecodeDisasm) of several threads may share it, each reads
 * what another formatted (a slot being written meanwhile is not used).
 * Free it after its readers. */
VtDecodeDisasmTable *vt_decode_disasm_table_new(const VtDecodeImage *img, guint slots_log2);
void vt_decode_disasm_table_free(VtDecodeDisasmTable *t);
/* A reader of table t (borrowed); not thread-safe (one per thread). */
VtDecodeDisasm *vt_decode_disasm_new_on(VtDecodeDisasmTable *t);
/* A reader with a table of its own (2^slots_log2; vt_decode_disasm_new: 2^18) */
VtDecodeDisasm *vt_decode_disasm_new(const VtDecodeImage *img);
VtDecodeDisasm *vt_decode_disasm_new_sized(const VtDecodeImage *img, guint slots_log2);
void vt_decode_disasm_free(VtDecodeDisasm *d);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(VtDecodeDisasm, vt_decode_disasm_free)
/* The instruction at ip: valid until the reader's next call (a copy of
 * its slot, which another reader may replace meanwhile). */
const VtDisasmInsn *vt_decode_disasm_at(VtDecodeDisasm *d, guint64 ip);
const VtDisasmInsn *vt_decode_disasm_at_mode(VtDecodeDisasm *d, guint64 ip, guint8 mode);   /* VT_MODE_* */
/* The same at time tsc: code that a TEXT_POKE changed as it was then
 * (vt_decode_image_code_at); the image's bytes elsewhere. */
const VtDisasmInsn *vt_decode_disasm_at_time(VtDecodeDisasm *d, guint64 ip, guint8 mode, guint64 tsc);
guint vt_decode_disasm_size(const VtDecodeDisasm *d);   /* slots of its table filled */
/* Instructions d decoded (Zydis) itself: those its table did not have
 * (formatted too unless the table had their bytes' text) */
guint64 vt_decode_disasm_fills(const VtDecodeDisasm *d);
/* A hint, no effect on any answer: ip will be asked for soon, so its slot
 * is brought into the CPU's cache meanwhile (vt_decode_disasm_at_mode
 * does it for the instruction right after the one it answers). */
void vt_decode_disasm_prefetch(const VtDecodeDisasm *d, guint64 ip);

/* ------------------------------------------------------------- branches */
typedef enum {
	VT_BRANCH_JUMP,        /* taken conditional or unconditional jump */
	VT_BRANCH_CALL,
	VT_BRANCH_RETURN,
	VT_BRANCH_SYSCALL,
	VT_BRANCH_SYSRET,
	VT_BRANCH_IRET,
	VT_BRANCH_INT,
	VT_BRANCH_ASYNC,       /* interrupt/exception (FUP + TIP) */
	VT_BRANCH_VMENTRY,
	VT_BRANCH_VMEXIT,
	VT_BRANCH_TRACE_BEGIN, /* from 0 */
	VT_BRANCH_TRACE_END,   /* to 0 */
	VT_BRANCH_ERROR,       /* a decode error at `from`; `code` says which */
	/* power events (only from vt_decode_recording_power): not branches */
	VT_BRANCH_PSB,         /* a PSB+ at AUX `offset`; `from`: its FUP's IP (0 if none) */
	VT_BRANCH_CBR,         /* the core:bus ratio changed (perf: first in a queue and on
				* every change) to `to`; `from`: the IP it binds to */
	/* only with VtDecodeOptions.flow_end: not a branch */
	VT_BRANCH_FLOW_END,    /* the queue's data ended after conditional jumps not taken
				* past its last branch: they ran, up to `from` (exclusive) */
} VtBranchKind;

const char *vt_branch_kind_name(VtBranchKind k);  /* "jump", "call", ... */
/* perf's error kind for libipt's error `code` (a positive pte_*, as
 * VtBranch.code): perf script --itrace=e's "code N: MESSAGE" - 5 "Failed to
 * get instruction" for code that cannot be read or decoded, 6 "Trace
 * doesn't match instruction" for trace that does not fit the code, 3 "Bad
 * packet", and perf's others; *message (if not NULL): its text. */
guint vt_decode_perf_error(int code, const char **message);
/* VtBranch.code of a walk that made no progress (a million steps without
 * reading trace: code looping on itself) - no libipt code; perf's 10,
 * "Never-ending loop". */
#define VT_DECODE_ERR_LOOP 64
/* VtBranch.code of an OVF's error line (perf's 7, "Overflow packet", at
 * the IP where tracing resumed, before the trace begins there): the
 * processor lost trace, nothing went wrong in decoding - not counted as a
 * decode error (vt_branch_is_overflow). */
#define VT_DECODE_ERR_OVERFLOW 65
/* VtBranch.code of a PERF_RECORD_AUX flagged TRUNCATED (the ring buffer
 * was full: trace lost between two pieces of AUX data): perf's 8, "Lost
 * trace data", at ip 0, with the record's time, CPU, pid and tid - where
 * perf prints it: among the branches by that time, and on a timeless
 * recording all of them before the first queue.  No decode error either
 * (vt_branch_is_lost). */
#define VT_DECODE_ERR_LOST 66
/* libipt's message for `code` (VT_DECODE_ERR_LOOP, _OVERFLOW, _LOST: vmtrace's own). */
const char *vt_decode_error_detail(int code);

typedef struct {
	guint64 from, to;
	guint64 tsc;           /* host TSC (when timed; 0 otherwise) */
	guint64 vmcs;          /* VMCS loaded (address), 0 if none seen */
	guint64 offset;        /* AUX offset just past the packet that decided it
				* (the decoder's position then: the next TNT, TIP, FUP,
				* PSB...; the last decision's for a direct branch) */
	guint64 cycles;        /* with ipc: the queue's CYC cycles up to its packet
				* (vt_decode_result_cycles) */
	guint8 kind;           /* VtBranchKind */
	guint8 from_guest, to_guest;
	gint8 code;            /* VT_BRANCH_ERROR: libipt's error code (positive pte_*) */
	guint8 conditional;
	guint8 async;          /* bound to a FUP (interrupt, VM exit, asynchronous trace end) */
	guint8 insn_kind;      /* VtInsnKind of the instruction at `from` (synchronous branches) */
	guint8 insn_len;       /* its length (0 for asynchronous branches) */
	guint8 overflows;      /* OVF packets (internal buffer overflow: trace lost) the queue
				* had since its previous branch (at most 255) */
	guint8 mode;           /* VT_MODE_* of the code up to `from` (since the last branch) */
	guint8 ipc;            /* perf takes an IPC sample here: cycles is set (cycles.c) */
	/* Instructions the decoder reconstructed since the queue's previous
	 * record that has a count (every kind but PSB and CBR: those have 0
	 * and count nothing), each instruction counted once: up to and
	 * including `from` for a synchronous branch; up to `from` exclusive
	 * for an asynchronous one, a FLOW_END and an ERROR (the instructions
	 * decoded before the error was found).  After a synchronisation (the
	 * queue's start, a resync at a PSB after an error or an overflow) from
	 * the PSB+'s IP on.  0 for TRACE_BEGIN (nothing runs while tracing
	 * is off) but the one where tracing resumes after an overflow: the
	 * instructions before the OVF since the last branch (as perf counts).
	 * Where jumps are dropped (vt_decode_result_drop_jumps) their
	 * instructions count for the next record. */
	guint32 insns;
} VtBranch;

G_STATIC_ASSERT(sizeof(VtBranch) == 64);

/* An OVF's error line (VT_DECODE_ERR_OVERFLOW): printed as perf prints it,
 * but no decode error (exit status, their count), no break in a call
 * stack or in report's flow - the OVFs are counted on the branch after
 * them (VtBranch.overflows). */
static inline gboolean vt_branch_is_overflow(const VtBranch *b)
{
	return b->kind == VT_BRANCH_ERROR && b->code == VT_DECODE_ERR_OVERFLOW;
}

/* A truncated AUX record's error line (VT_DECODE_ERR_LOST): the same (the
 * health counts those records from the recording itself). */
static inline gboolean vt_branch_is_lost(const VtBranch *b)
{
	return b->kind == VT_BRANCH_ERROR && b->code == VT_DECODE_ERR_LOST;
}

/* A decode error: an error line that is no overflow's nor lost data's. */
static inline gboolean vt_branch_is_decode_error(const VtBranch *b)
{
	return b->kind == VT_BRANCH_ERROR && b->code != VT_DECODE_ERR_OVERFLOW && b->code != VT_DECODE_ERR_LOST;
}

/* --------------------------------------------------- perf's view of branches */
/* perf's sample flags (PERF_IP_FLAG_*, the ABI of perf's scripting) */
enum {
	VT_PERF_FLAG_BRANCH = 1 << 0, VT_PERF_FLAG_CALL = 1 << 1, VT_PERF_FLAG_RETURN = 1 << 2,
	VT_PERF_FLAG_CONDITIONAL = 1 << 3, VT_PERF_FLAG_SYSCALLRET = 1 << 4, VT_PERF_FLAG_ASYNC = 1 << 5,
	VT_PERF_FLAG_INTERRUPT = 1 << 6, VT_PERF_FLAG_TX_ABORT = 1 << 7, VT_PERF_FLAG_TRACE_BEGIN = 1 << 8,
	VT_PERF_FLAG_TRACE_END = 1 << 9, VT_PERF_FLAG_IN_TX = 1 << 10, VT_PERF_FLAG_VMENTRY = 1 << 11,
	VT_PERF_FLAG_VMEXIT = 1 << 12,
};

/* The flags perf gives the branch (a VM entry is a call, a VM exit an
 * asynchronous call; errors have none). */
guint32 vt_decode_perf_flags(const VtBranch *b);
/* perf script's text for the flags ("call", "tr end  async", "bcyh", ...):
 * at most 20 characters, left-aligned in 19 when named. */
void vt_decode_perf_flags_name(guint32 flags, char buf[32]);

/* perf's thread stack (what its callindent field shows): per thread (per
 * CPU for thread 0), calls push their return address unless they call the
 * next instruction, returns pop down to their target's entry when the
 * stack holds it, a trace begin pops its target and the calls that ended
 * the trace; a decode error empties the thread's stack. */
typedef struct VtDecodeStacks VtDecodeStacks;

VtDecodeStacks *vt_decode_stacks_new(void);
void vt_decode_stacks_free(VtDecodeStacks *st);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(VtDecodeStacks, vt_decode_stacks_free)
/* Apply one branch of thread tid (on cpu), whose flags are `flags`
 * (vt_decode_perf_flags(b): the caller has them), to its stack.  trace:
 * which continuous trace it belongs to (perf's trace_nr); a change empties
 * the stack.  Returns the depth as vt_decode_stacks_depth says it then. */
guint vt_decode_stacks_event(VtDecodeStacks *st, gint32 tid, gint32 cpu, guint32 trace, const VtBranch *b,
			     guint32 flags);
/* The depth perf's callindent prints for that branch just applied: the
 * stack's depth, plus one for a return. */
guint vt_decode_stacks_depth(VtDecodeStacks *st, gint32 tid, gint32 cpu, const VtBranch *b);

/* ------------------------------------------------------------ recordings */
typedef struct {
	const char *path;         /* the recording (file or perf.data directory) */
	VtDecodeImage *host;      /* borrowed */
	VtDecodeImage *guest;     /* borrowed; NULL: host only (guest code is an error) */
	guint jobs;               /* queues decoding at once (0: all of them, or one per CPU if more) */
	/* borrowed, prepared; guest user code not in `guest` is taken from it,
	 * per guest process (guest-user.c) */
	const struct VtDecodeGuestUser *guest_user;
	/* also a VT_BRANCH_FLOW_END at a queue's end (perf prints the
	 * instructions up to its last TNT bit) */
	gboolean flow_end;
} VtDecodeOptions;

/* One branch as the recording places it. */
typedef struct {
	VtBranch b;
	guint32 queue;            /* AUX queue index */
	gint32 cpu;               /* -1: per-thread recording */
	gint32 pid, tid;          /* thread (per-CPU: from the switch sideband at the branch's time) */
	gint32 vcpu;              /* from the thread's name "CPU n/KVM", -1 if unknown */
	const char *comm;         /* thread name; owned by the result */
	guint64 time;             /* perf time (ns) when timed, else 0 */
	/* the guest thread on the vCPU at that time, from an injected guest
	 * sideband (vmtrace inject, perf inject --guest-data); machine_pid 0:
	 * none known (no guest sideband, no switch-in on that vCPU yet; then
	 * guest_pid and guest_tid are -1 when the recording has a sideband) */
	gint32 machine_pid;       /* the QEMU pid */
	gint32 guest_pid, guest_tid;
	const char *guest_comm;   /* NULL: no COMM (perf prints ":TID") */
} VtDecodeEvent;

typedef struct VtDecodeResult VtDecodeResult;

/* Decode every AUX queue of the recording, streamed: each queue in its own
 * thread a few batches ahead (at most opts->jobs decoding at once), the
 * branches read with vt_decode_result_next() - timed recordings in time
 * order over all queues (ties in queue order), timeless ones queue after
 * queue in trace order.  Memory does not grow with the number of branches. */
VtDecodeResult *vt_decode_recording(const VtDecodeOptions *opts, GError **error);
/* The same; with power, perf's power events (VT_BRANCH_PSB, VT_BRANCH_CBR)
 * come among the branches too. */
VtDecodeResult *vt_decode_recording_power(const VtDecodeOptions *opts, gboolean power, GError **error);
void vt_decode_result_free(VtDecodeResult *r);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(VtDecodeResult, vt_decode_result_free)
/* Stops r's threads and waits for them (vt_decode_result_free does it
 * first): a command about to exit without freeing r (script.c free_at_exit)
 * leaves no thread running into its exit.  r stays valid to free. */
void vt_decode_result_join(VtDecodeResult *r);

/* The same, its threads not started yet: vt_decode_result_start. */
VtDecodeResult *vt_decode_recording_open(const VtDecodeOptions *opts, gboolean power, GError **error);

/* Formatting in the decoding threads: each queue's thread names its events
 * and hands them to its own formatter (open(data, queue), made here before
 * the threads start; close() at vt_decode_result_free), which keeps their
 * text; the reader gets it with vt_decode_result_next_text, merged as
 * vt_decode_result_next would return the events (timed: by time, ties in
 * queue order; timeless: queue after queue).  The threads hold a few
 * chunks of text each (about 224 KiB) ahead of the reader, no more. */
typedef struct {
	gpointer (*open)(gpointer data, guint queue);
	/* one event, in the queue's thread: its text appended; returns the
	 * length of the formatter's text now */
	gsize (*format)(gpointer ctx, const VtDecodeEvent *e);
	/* the formatter's text (*len bytes, in a vt_decode_buf_new buffer of
	 * *cap, its vt_decode_buf_size - freed with vt_decode_buf_free(text,
	 * *cap) or handed back here), going on in buf of cap bytes (another
	 * such; NULL: a new buffer) */
	char *(*take)(gpointer ctx, char *buf, gsize cap, gsize *len, gsize *old_cap);
	void (*close)(gpointer ctx);
	gpointer data;
	/* optional: a branch that format() may get a few events later (its
	 * batch's; not if keep drops it), so that what it will read can be
	 * fetched meanwhile */
	void (*ahead)(gpointer ctx, const VtBranch *b);
	/* optional: a queue of 256 KiB of AUX or more (VMTRACE_FORMAT_JOB: any)
	 * formatted in several threads where --jobs leaves it CPUs (each thread
	 * a formatter of its own, open() again, taking every n-th job of ~1,024
	 * events): the formatter's state after events e[0..n), from any state
	 * before, as if it had formatted them - with no text.  e[0] moves the
	 * flow (a branch or an error; n 0: the queue's start), the others come
	 * within the flow after it (PSB, CBR, flow end) - or, before the
	 * queue's first event that moves it, all its events so far.  NULL: an
	 * event's text depends on more (call stacks, IPC counts) - each queue
	 * formatted in one thread. */
	void (*replay)(gpointer ctx, const VtDecodeEvent *e, guint n);
} VtDecodeFormatter;

/* Before vt_decode_result_start: only the branches keep(data, b) is TRUE
 * for come to vt_decode_result_next, or to the formatter (text; a queue
 * then has no formers: VtDecodeFormatter.replay is not used) - the others
 * are dropped in the decoding threads (keep runs there, on several at
 * once: it may only read data), errors among them counted still
 * (vt_decode_result_n_errors).  NULL: all (the default). */
typedef gboolean (*VtDecodeKeep)(gpointer data, const VtBranch *b);
void vt_decode_result_keep(VtDecodeResult *r, VtDecodeKeep keep, gpointer data);
/* Before vt_decode_result_start: plain jumps (VT_BRANCH_JUMP - jumps and
 * taken conditional jumps, synchronous) are not even made, for a reader
 * that would drop them all (call traces: 3 of 4 branches; --itrace
 * without jump lines); the decoder's state (times, counts) moves on as
 * if they were made and dropped. */
void vt_decode_result_drop_jumps(VtDecodeResult *r);
/* Were jumps dropped (vt_decode_result_drop_jumps)? */
gboolean vt_decode_result_drops_jumps(const VtDecodeResult *r);
/* Before vt_decode_result_start: branches where perf takes an IPC sample
 * get VtBranch.ipc and the queue's CYC cycles (cycles.c; none in traces
 * without CYC packets). */
void vt_decode_result_cycles(VtDecodeResult *r);
/* No host thread's branches in two queues (per-thread recordings whose
 * queues' threads differ): what a reader keeps per thread is kept per queue. */
gboolean vt_decode_result_threads_apart(const VtDecodeResult *r);
/* Starts decoding: with fmt, text (vt_decode_result_next_text); NULL:
 * branches (vt_decode_result_next).  Once. */
void vt_decode_result_start(VtDecodeResult *r, const VtDecodeFormatter *fmt);
/* The next piece of text (*len bytes, valid until the next call - or,
 * after vt_decode_result_hold_text, until vt_decode_result_release_text),
 * NULL at the end. */
const char *vt_decode_result_next_text(VtDecodeResult *r, gsize *len);
/* Before vt_decode_result_start: the pieces of text stay valid until
 * vt_decode_result_release_text (the reader writes many at once: writev);
 * the threads meanwhile take new chunks (their memory grows by what is held). */
void vt_decode_result_hold_text(VtDecodeResult *r);
void vt_decode_result_release_text(VtDecodeResult *r);
/* Chunks of text held now (each a buffer of ~256 KiB: a reader that
 * holds many small pieces releases before it holds too many). */
guint vt_decode_result_n_held(const VtDecodeResult *r);

/* The next branch (valid until the next call), NULL at the end. */
const VtDecodeEvent *vt_decode_result_next(VtDecodeResult *r);
/* A branch that comes soon, to prefetch for: the k-th after the last one
 * vt_decode_result_next returned in that branch's queue (k >= 1), if the
 * batch in hand holds it; NULL else.  Not necessarily the k-th in time
 * order (other queues' branches may come between); valid as the last. */
const VtDecodeEvent *vt_decode_result_peek(const VtDecodeResult *r, guint k);
gboolean vt_decode_result_timed(const VtDecodeResult *r);
gboolean vt_decode_result_per_cpu(const VtDecodeResult *r);
guint vt_decode_result_n_queues(const VtDecodeResult *r);   /* AUX queues */
/* perf's kHz per unit of core:bus ratio (TSC frequency / maximum non-turbo
 * ratio, from the recording's TSC conversion) and that ratio; 0 if unknown */
guint32 vt_decode_result_cbr_khz(const VtDecodeResult *r, guint32 *max_nonturbo);
/* How far the decoding is (any thread, any time after start): the AUX
 * bytes decoded so far over all queues (up to the last batch's last
 * branch: decoding runs a few batches ahead of the output) and in all. */
void vt_decode_result_progress(const VtDecodeResult *r, guint64 *done, guint64 *total);
/* decode errors among the branches read so far */
guint vt_decode_result_n_errors(const VtDecodeResult *r);
/* Before vt_decode_result_start: at most n threads decode a queue ahead
 * of its reader (1: one, no ranges) - where the reader's work costs more
 * than decoding (script --insn-trace: ranges decoded far ahead took CPU
 * from the formatting thread, ~10% more time).  VMTRACE_SEGMENT set: no
 * limit (tests). */
void vt_decode_result_ahead_max(VtDecodeResult *r, guint n);
/* Work done apart so far: ranges of queues decoded apart (decode ahead
 * in several threads: VMTRACE_SEGMENT; 0 where no queue was cut) and the
 * most threads that decoded one queue ahead (0: none did); jobs of events
 * formatted apart (VtDecodeFormatter.replay; 0 where no queue was) and
 * the most threads that formatted one queue. */
typedef struct {
	guint64 ranges;
	guint decoders;
	guint64 jobs;
	guint formers;
} VtDecodeApart;
void vt_decode_result_apart(const VtDecodeResult *r, VtDecodeApart *a);
/* How many query decoders this process made for the walker: ours (qry.c)
 * and libipt's (VMTRACE_DECODER=qry, a CPU with OVF errata qry.c does
 * not handle, an MTC period over 15; VMTRACE_QRY_CHECK=1: both, counted
 * as ours). */
void vt_decode_query_decoders(guint64 *own, guint64 *libipt);
/* After the last branch: FALSE (and why) when a queue's AUX data could not
 * be read to its end (the file shrank or failed), TRUE otherwise. */
gboolean vt_decode_result_check(VtDecodeResult *r, GError **error);

/* The QEMU pid of an injected guest sideband (0: the recording has none). */
gint32 vt_decode_result_machine_pid(const VtDecodeResult *r);
/* Its guest kernel's DSO as perf names it (vt_decode_guest_threads_kernel_dso;
 * NULL without a guest sideband), valid while r is. */
const char *vt_decode_result_guest_kernel_dso(const VtDecodeResult *r);
/* A recording's host kcore_dir (DIR/kcore_dir of a perf.data directory), or
 * NULL when it has none. */
char *vt_decode_recording_kcore_dir(const char *path);

/* The guest sideband of an injected recording (guest-threads.c): per vCPU
 * the guest tasks switched in, each guest thread's pid and comm over time. */
typedef struct VtDecodeGuestThreads VtDecodeGuestThreads;
VtDecodeGuestThreads *vt_decode_guest_threads_load(const VtPerfFile *f, GError **error);
void vt_decode_guest_threads_free(VtDecodeGuestThreads *g);
gint32 vt_decode_guest_threads_machine_pid(const VtDecodeGuestThreads *g);   /* 0: none */
/* The guest kernel's DSO as perf names it in that machine: the first kernel
 * file of the QEMU pid in the recording's build id table ("[kernel.kallsyms]"
 * when the guest's perf.data had the kernel's build id), else
 * "[guest.kernel.kallsyms.PID]"; NULL without a guest sideband. */
const char *vt_decode_guest_threads_kernel_dso(const VtDecodeGuestThreads *g);
/* The guest thread on vcpu at perf time `time`: FALSE before the vCPU's first
 * switch-in; *comm NULL when the thread has no COMM. */
gboolean vt_decode_guest_threads_at(const VtDecodeGuestThreads *g, gint32 vcpu, guint64 time, gint32 *pid,
				    gint32 *tid, const char **comm);

/* Guest user space of an injected recording (guest-user.c): the guest's
 * executable file mappings (GUEST_USER MMAP2/MMAP records), each file
 * looked up as perf's --guestmount does - GUESTMOUNT/<machine_pid>/<path>
 * (NULL: no file is found; lines then name the DSO, no symbol). */
typedef struct VtDecodeGuestUser VtDecodeGuestUser;
VtDecodeGuestUser *vt_decode_guest_user_load(const char *rec, const char *guestmount, GError **error);
void vt_decode_guest_user_free(VtDecodeGuestUser *u);
/* Mappings seen; *n_missing: files not found. */
guint vt_decode_guest_user_n_maps(const VtDecodeGuestUser *u, guint *n_missing);
/* The code of every mapping found joins the guest image (one address space
 * for all guest processes: what a decoder without the per-process code hook
 * reads; with it, vt_decode_guest_user_code decides). */
gboolean vt_decode_guest_user_attach(const VtDecodeGuestUser *u, VtDecodeImage *guest, GError **error);
/* Each mapping's code, per process: for vt_decode_guest_user_code (and
 * VtDecodeOptions.guest_user). */
gboolean vt_decode_guest_user_prepare(VtDecodeGuestUser *u, GError **error);
/* The code at a guest user address in guest process pid at host perf time
 * `time` (0: any time): its own mapping there made by then, else its
 * parent's at the fork, else (no FORK: forked before the recording) that of
 * the processes with its comm if they all map the same file there; pid -1
 * (no process known): every process's if they agree.  NULL (*avail 0) when
 * none is found: noted for vt_decode_guest_user_unresolved. */
const guint8 *vt_decode_guest_user_code(const VtDecodeGuestUser *u, gint32 pid, guint64 time, guint64 addr,
					gsize *avail);
/* The image of that mapping (its file's code where the mapping puts it),
 * NULL when none is found: e.g. for disassembly per process. */
const VtDecodeImage *vt_decode_guest_user_image_at(const VtDecodeGuestUser *u, gint32 pid, guint64 time,
						   guint64 addr);
/* The symbol holding a guest user address (perf's ELF rules) and the offset
 * into it, NULL if none; *dso: the path of the mapping holding addr (as
 * vt_decode_guest_user_code finds it), NULL if none. */
const char *vt_decode_guest_user_symbol(const VtDecodeGuestUser *u, gint32 pid, guint64 time, guint64 addr,
					guint64 *offset, const char **dso);
/* The guest processes (pid -1: none known) whose user code was asked for
 * and not found, with the first such address and their comm (NULL: none):
 * a new array of VtDecodeGuestUnresolved, in no order. */
typedef struct {
	gint32 pid;
	guint64 addr;
	const char *comm;
} VtDecodeGuestUnresolved;
GArray *vt_decode_guest_user_unresolved(const VtDecodeGuestUser *u);
/* An ELF file's code as mapped at start (len bytes of the file from pgoff):
 * an image to attach or to walk (synth). */
VtDecodeImage *vt_decode_guest_user_image(const char *path, guint64 start, guint64 len, guint64 pgoff,
					  GError **error);
/* The ELF file's first executable PT_LOAD. */
gboolean vt_decode_guest_user_exec_load(const char *path, guint64 *vaddr, guint64 *offset, guint64 *size,
					GError **error);
void vt_decode_image_attach(VtDecodeImage *img, VtDecodeImage *code);   /* img owns code */

/* Decode one AUX buffer (tests, fuzzing): branches appended to out. */
typedef struct {
	guint32 cpuid_15_eax, cpuid_15_ebx;   /* TSC:CTC = ebx/eax (0: timeless) */
	guint8 mtc_freq, nom_freq;
	guint8 family, model, stepping;       /* errata; 0: none */
	guint8 cyc_thresh;                    /* the CYC threshold (config bits 19-22) */
} VtDecodeCpu;

gboolean vt_decode_buffer(const guint8 *buf, gsize len, const VtDecodeCpu *cpu, VtDecodeImage *host,
			  VtDecodeImage *guest, GArray *out, GError **error);

/* The same a piece at a time: a decoder over a copy of buf; each call of
 * vt_decode_queue_next() appends branches to out until it holds max (or
 * the trace ends: then FALSE). */
typedef struct VtDecodeQueue VtDecodeQueue;
VtDecodeQueue *vt_decode_queue_new(const guint8 *buf, gsize len, const VtDecodeCpu *cpu, VtDecodeImage *host,
				   VtDecodeImage *guest, GError **error);
gboolean vt_decode_queue_next(VtDecodeQueue *q, GArray *out, guint max);
void vt_decode_queue_free(VtDecodeQueue *q);

G_END_DECLS

#endif
