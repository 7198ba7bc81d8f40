/* ipt-unknown.h - libipt 2.0.5 decode callback for the packets it does not
 * know (CFE, EVD: 2.1+; BBP, BEP: never), sizing them so its packet decoder
 * can be compared with vmtrace's scanner.  Shared by tests and fuzzers. */
#ifndef VT_IPT_UNKNOWN_H
#define VT_IPT_UNKNOWN_H

#include <stdio.h>
#include <stdlib.h>
#include <intel-pt.h>

#include "src/pt/pt-scan.h"

static inline int vt_ipt_unknown_cb(struct pt_packet_unknown *unknown, const struct pt_config *config,
				    const uint8_t *pos, void *context)
{
	(void)unknown;
	(void)config;
	(void)context;

	/* Only called for opcodes libipt 2.0.5 does not know; pos[1] is
	 * in bounds for 0x02 (pt_df_fetch checked it). */
	if (pos[0] != 0x02)
		return -pte_bad_opc;
	switch (pos[1]) {
	case 0x13:	/* CFE */
		return 4;
	case 0x53:	/* EVD */
		return 11;
	case 0x63:	/* BBP */
		return 3;
	case 0x33:	/* BEP */
	case 0xb3:
		return 2;
	default:
		return -pte_bad_opc;
	}
}

/* libipt's error code -> the scanner's (the ones a packet decoder returns). */
static inline int vt_ipt_code(int r)
{
	switch (-r) {
	case pte_eos:
		return -vt_pte_eos;
	case pte_bad_opc:
		return -vt_pte_bad_opc;
	case pte_bad_packet:
		return -vt_pte_bad_packet;
	default:
		fprintf(stderr, "unexpected libipt error %d (%s)\n", r, pt_errstr(pt_errcode(r)));
		abort();
	}
}

#endif
