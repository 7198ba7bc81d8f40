/* guest-user-prog.c - a small static program (no libc) whose code t0082 has
 * synth run as guest user space: functions with loops, an indirect call
 * through a table, a syscall, aliases (weak, longer, more underscores) and a
 * zero-sized label: perf's choice among symbols; built -static -nostdlib
 * -no-pie with symbols. */
typedef long (*op_fn)(long);
static long sys3(long n, long a, long b, long c)
{
	long r;
	__asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
	return r;
}
__attribute__((noinline)) long square(long x) { return x * x; }
__attribute__((noinline)) long twice(long x) { return x + x; }
__attribute__((noinline)) long collatz(long x) { long n = 0; while (x > 1) { x = x & 1 ? 3 * x + 1 : x / 2; n++; } return n; }
__attribute__((noinline)) long digits(long x) { long n = 0; do { n++; x /= 10; } while (x); return n; }
long gt_label(long);
op_fn ops[] = { square, twice, collatz, digits, gt_label };
__attribute__((noinline)) long apply(long i, long x) { return ops[i % 5](x); }
__attribute__((noinline)) long mix(long x) { long s = 0; for (long i = 0; i < 16; i++) s += apply(i, x + i); return s; }
__attribute__((noinline)) void say(const char *s) { long n = 0; while (s[n]) n++; sys3(1, 1, (long)s, n); }
void _start(void)
{
	for (long i = 0;; i++) {
		if (mix(i) & 1)
			say("odd\n");
		if (i == 1000)
			sys3(60, 0, 0, 0);
	}
}
/* symbols perf chooses between (t0082 checks vmtrace's choice = perf's) */
long twice_weak(long) __attribute__((weak, alias("twice")));
long _square_local(long) __attribute__((alias("square")));
long digits_long_alias_name(long) __attribute__((alias("digits")));
__asm__(".text\n.globl gt_label\ngt_label:\n\tmov %rdi, %rax\n\tadd $3, %rax\n\tret\n");
