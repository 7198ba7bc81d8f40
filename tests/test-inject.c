/* test-inject.c - src/inject's time conversion: exact, in integers. */
#include "config.h"

#include <glib.h>

#include "src/inject/inject.h"

/* TIME_CONV where perf time = TSC (shift 0, mult 1, zero 0). */
static const VtPerfTimeConv ident = { .time_shift = 0, .time_mult = 1, .cap_user_time_zero = 1 };

static void test_zero(void)
{
	VtInjectClock c = { .vcpu = -1, .offset = 0xfffffe3c8291b532ULL };

	g_assert_cmpuint(vt_inject_time(0, &ident, &ident, &c), ==, 0);    /* "no time" stays so */
}

/* perf 6.1 gives 2^54 for guest time 2^54 + 1 (through a double). */
static void test_above_2_53(void)
{
	VtInjectClock c = { .vcpu = -1 };

	for (uint64_t t = (1ULL << 54) + 1; t < (1ULL << 54) + 64; t++)
		g_assert_cmpuint(vt_inject_time(t, &ident, &ident, &c), ==, t);
	g_assert_cmpuint(vt_inject_time(~0ULL - 5, &ident, &ident, &c), ==, ~0ULL - 5);
}

/* A negative VMX offset (two's complement) wraps as the TSC does. */
static void test_offset(void)
{
	VtInjectClock c = { .vcpu = -1, .offset = (uint64_t)-1000 };
	VtPerfTimeConv tc = { .time_shift = 10, .time_mult = 341, .cap_user_time_zero = 1 };
	uint64_t g = 123456789, tsc = vt_perf_time_to_tsc(g, &tc);

	g_assert_cmpuint(vt_inject_time(g, &ident, &ident, &c), ==, g + 1000);
	g_assert_cmpuint(vt_inject_time(g, &tc, &tc, &c), ==, vt_perf_tsc_to_time(tsc + 1000, &tc));
}

/* TSC scaling: guest = (host * ratio >> frac) + offset is undone exactly,
 * for ratios above 1 (then every guest value has one host value). */
static void test_scaling(void)
{
	static const uint64_t ratios[] = { 0x1000000000000ULL, 0x1800000000000ULL, 0x1000000000001ULL,
					   0x2ffffffffffffULL };
	GRand *r = g_rand_new_with_seed(13);

	for (guint k = 0; k < G_N_ELEMENTS(ratios); k++) {
		VtInjectClock c = { .vcpu = -1, .offset = 0xffffff0000001234ULL, .ratio = ratios[k], .frac = 48 };

		for (int i = 0; i < 20000; i++) {
			uint64_t h = ((uint64_t)g_rand_int(r) << 24 | g_rand_int(r)) & ((1ULL << 54) - 1);
			uint64_t g = (uint64_t)(((unsigned __int128)h * c.ratio) >> 48) + c.offset;

			if (!h)
				continue;
			g_assert_cmpuint(vt_inject_time(g, &ident, &ident, &c), ==, h);
		}
	}
	g_rand_free(r);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/inject/time/zero", test_zero);
	g_test_add_func("/inject/time/above-2^53", test_above_2_53);
	g_test_add_func("/inject/time/offset", test_offset);
	g_test_add_func("/inject/time/scaling", test_scaling);
	return g_test_run();
}
