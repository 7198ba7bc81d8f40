/* pt-skip-win.h - the window walks of vt_pt_scan_skip_flow/_flow2, an
 * implementation detail of pt-scan.c (see "Window skipping" there).
 *
 * Included once per instruction set: SKW(name) gives the instance's name
 * (name_sse2; AVX2 has the block walk instead), SKW_ATTR its function
 * attributes; the window
 * classifier SKW(skip_win_load) is inlined into the walks, so that its
 * constants stay in registers.  No include guard, on purpose.
 */

/* The common steps of the walks below, for a window without `stop02`
 * bits (nearly all: only payload bytes or two-byte CYCs followed by 0x02
 * set one): from boundary i, step over runs and over packets with a size
 * in lens while the next boundary stays below WIN_LIM.  Returns the
 * boundary where the general loop goes on (it looks at that packet again).
 * Only these few values are live here, so they stay in registers: in the
 * general loop the position went through the stack on every step (store
 * forwarding on the walk's dependency chain). */
SKW_ATTR static inline __attribute__((always_inline)) unsigned int
SKW(skip_win_run1)(const struct skip_win *W, unsigned int i, uint64_t *visp)
{
	uint64_t ends = W->ends, vis = *visp;

	for (;;) {
		unsigned int j = i + (unsigned int)__builtin_ctzll(ends >> i);
		unsigned int n;

		if (j >= WIN_LIM)
			break;
		n = W->lens[j];
		if (!n)
			break;
		vis |= 1ULL << j;
		i = j + n;
	}
	*visp = vis;
	return i;
}

/* skip_win_run1 for two windows at once, until either of them stops. */
SKW_ATTR static inline __attribute__((always_inline)) void
SKW(skip_win_run2)(const struct skip_win *Wa, unsigned int *iap, uint64_t *visap,
		   const struct skip_win *Wb, unsigned int *ibp, uint64_t *visbp)
{
	uint64_t ea = Wa->ends, eb = Wb->ends, va = *visap, vb = *visbp;
	unsigned int ia = *iap, ib = *ibp;

	for (;;) {
		unsigned int ja = ia + (unsigned int)__builtin_ctzll(ea >> ia);
		unsigned int jb = ib + (unsigned int)__builtin_ctzll(eb >> ib);
		unsigned int na, nb;

		/* ja >= WIN_LIM || jb >= WIN_LIM in one test (both < 64) */
		if (((ja + (64 - WIN_LIM)) | (jb + (64 - WIN_LIM))) >= 64)
			break;
		na = Wa->lens[ja];
		nb = Wb->lens[jb];
		if (!na || !nb)
			break;
		va |= 1ULL << ja;
		vb |= 1ULL << jb;
		ia = ja + na;
		ib = jb + nb;
	}
	*iap = ia;
	*ibp = ib;
	*visap = va;
	*visbp = vb;
}

/* Skip from p (a boundary) with windows starting at most at `last`.
 * Returns the new position, a boundary; *stop is set if a packet that
 * cannot be skipped is there, else the scalar loop goes on from there. */
SKW_ATTR static const uint8_t *SKW(skip_win1)(const uint8_t *p, const uint8_t *last,
						VtPtMtcAcc *acc, uint8_t *flags,
						int *stop)
{
	struct SKW(skw_k) K;
	const uint8_t *end = last + (WIN_ROOM - 16);	/* the scalar loop's limit */
	unsigned int ip = 0;
	uint8_t fl = 0;

	SKW(skip_win_kinit)(&K, acc != NULL, acc && acc->skip_pip);
	*stop = 0;
	while (p <= last) {
		struct skip_win W;
		uint64_t vis = 0;
		unsigned int i = 0;

		SKW(skip_win_load)(p, &W, &K);
		for (;;) {
			unsigned int j, n;

			if (!W.stop02)
				i = SKW(skip_win_run1)(&W, i, &vis);
			j = i + (unsigned int)__builtin_ctzll(W.ends >> i);

			if (j >= WIN_LIM) {
				win_done(&W, p, vis, acc, &ip);
				p += win_leave(&W, i, j);
				break;
			}
			n = win_event(&W, j);
			vis |= 1ULL << j;
			if (unlikely(n == 0)) {
				n = win_slow_at(&W, p, j, end, &vis, acc, &fl);
				if (!n) {
					win_done(&W, p, vis, acc, &ip);
					p += j;
					*stop = 1;
					goto out;
				}
				if (unlikely(j + n >= WIN_LIM)) {
					/* a TIP.PGD stretch: on after it */
					win_done(&W, p, vis, acc, &ip);
					p += j + n;
					break;
				}
			}
			i = j + n;
			while (unlikely((W.stop02 >> i) & 1)) {
				/* (a 0x02 here: never a TIP.PGD stretch) */
				n = win_slow_at(&W, p, i, end, &vis, acc, &fl);
				if (!n) {
					win_done(&W, p, vis, acc, &ip);
					p += i;
					*stop = 1;
					goto out;
				}
				i += n;
			}
		}
	}
out:
	*flags |= fl | (ip ? 0x80 : 0);
	return p;
}

/* One walk of skip_win2 at boundary i of its window W at *p: if i is at
 * WIN_LIM or beyond (after a TIP.PGD stretch), the window is done and the
 * walk goes on with a window at that boundary (offset 0), unless that is
 * too near the end: returns 1 then (the position is *p + *ip_).  Else
 * the walk goes on in W at i. */
SKW_ATTR static inline __attribute__((always_inline)) int
SKW(skip_win_past)(struct skip_win *W, const uint8_t **p, unsigned int i, uint64_t *vis,
		   unsigned int *ip_, const uint8_t *last, VtPtMtcAcc *acc, unsigned int *ipf,
		   const struct SKW(skw_k) *K)
{
	if (i < WIN_LIM) {
		*ip_ = i;
		return 0;
	}
	win_done(W, *p, *vis, acc, ipf);
	*p += i;
	*ip_ = 0;
	*vis = 0;
	if (*p > last)
		return 1;
	SKW(skip_win_load)(*p, W, K);
	return 0;
}

/* vt_pt_scan_skip_flow2 with windows: both walks in one loop (their
 * dependency chains overlap), until one of them stops or gets near the
 * end of its buffer (then it is finished alone, up to its stop). */
SKW_ATTR static int SKW(skip_win2)(VtPtScanner *sa, VtPtMtcAcc *acca,
				   VtPtScanner *sb, VtPtMtcAcc *accb)
{
	const uint8_t *pa = sa->pos, *pb = sb->pos;
	const uint8_t *la = sa->end - WIN_ROOM, *lb = sb->end - WIN_ROOM;
	const uint8_t *ea = sa->end - 16, *eb = sb->end - 16;	/* the scalar loop's limits */
	uint64_t visa = 0, visb = 0;
	unsigned int ipa = 0, ipb = 0, ia = 0, ib = 0, ja, jb, na, nb;
	uint8_t fa = 0, fb = 0, mka = acca ? 0 : 0x40, mkb = accb ? 0 : 0x40;
	struct skip_win Wa, Wb;
	struct SKW(skw_k) Ka, Kb;
	int stopped = 0, tail = 0;

	SKW(skip_win_kinit)(&Ka, acca != NULL, acca && acca->skip_pip);
	SKW(skip_win_kinit)(&Kb, accb != NULL, accb && accb->skip_pip);
	SKW(skip_win_load)(pa, &Wa, &Ka);
	SKW(skip_win_load)(pb, &Wb, &Kb);
	for (;;) {
		if (!(Wa.stop02 | Wb.stop02))
			SKW(skip_win_run2)(&Wa, &ia, &visa, &Wb, &ib, &visb);
		ja = ia + (unsigned int)__builtin_ctzll(Wa.ends >> ia);
		jb = ib + (unsigned int)__builtin_ctzll(Wb.ends >> ib);
		if (unlikely(ja >= WIN_LIM || jb >= WIN_LIM)) {
			if (ja >= WIN_LIM) {
				win_done(&Wa, pa, visa, acca, &ipa);
				pa += win_leave(&Wa, ia, ja);
				ia = 0;
				visa = 0;
				if (pa > la)
					tail |= 1;
				else
					SKW(skip_win_load)(pa, &Wa, &Ka);
			}
			if (jb >= WIN_LIM) {
				win_done(&Wb, pb, visb, accb, &ipb);
				pb += win_leave(&Wb, ib, jb);
				ib = 0;
				visb = 0;
				if (pb > lb)
					tail |= 2;
				else
					SKW(skip_win_load)(pb, &Wb, &Kb);
			}
			if (tail)
				break;	/* positions are pa + ia, pb + ib */
			continue;
		}
		na = win_event(&Wa, ja);
		nb = win_event(&Wb, jb);
		visa |= 1ULL << ja;
		visb |= 1ULL << jb;
		if (unlikely(na == 0 || nb == 0)) {
			if (na == 0) {
				na = win_slow_at(&Wa, pa, ja, ea, &visa, acca, &fa);
				if (!na)
					stopped |= 1;
			}
			if (nb == 0) {
				nb = win_slow_at(&Wb, pb, jb, eb, &visb, accb, &fb);
				if (!nb)
					stopped |= 2;
			}
			if (stopped) {
				/* the other one has skipped the packet at its j */
				ia = ja + na;
				ib = jb + nb;
				break;
			}
			if (unlikely(ja + na >= WIN_LIM || jb + nb >= WIN_LIM)) {
				/* a TIP.PGD stretch took one beyond its window:
				 * on with a window after it (offset 0, never a
				 * stop02 bit) */
				tail |= SKW(skip_win_past)(&Wa, &pa, ja + na, &visa, &ia, la, acca, &ipa, &Ka);
				tail |= SKW(skip_win_past)(&Wb, &pb, jb + nb, &visb, &ib, lb, accb, &ipb, &Kb) << 1;
				if (tail)
					break;	/* positions are pa + ia, pb + ib */
				goto check02;
			}
		}
		ia = ja + na;
		ib = jb + nb;
check02:
		if (unlikely(((Wa.stop02 >> ia) | (Wb.stop02 >> ib)) & 1)) {
			while ((Wa.stop02 >> ia) & 1) {
				na = win_slow_at(&Wa, pa, ia, ea, &visa, acca, &fa);
				if (!na) {
					stopped |= 1;
					break;
				}
				ia += na;
			}
			while ((Wb.stop02 >> ib) & 1) {
				nb = win_slow_at(&Wb, pb, ib, eb, &visb, accb, &fb);
				if (!nb) {
					stopped |= 2;
					break;
				}
				ib += nb;
			}
			if (stopped)
				break;
		}
	}
	if (!(tail & 1))
		win_done(&Wa, pa, visa, acca, &ipa);
	if (!(tail & 2))
		win_done(&Wb, pb, visb, accb, &ipb);
	pa += ia;
	pb += ib;
	/* near the end: finish alone, up to the stop */
	if (tail & 1) {
		pa = skip_scalar(pa, sa->end - 16, acca, mka, &fa);
		stopped |= 1;
	}
	if (tail & 2) {
		pb = skip_scalar(pb, sb->end - 16, accb, mkb, &fb);
		stopped |= 2;
	}
	if ((fa & 0x80) || ipa)
		sa->have_last_ip = 0;
	if ((fb & 0x80) || ipb)
		sb->have_last_ip = 0;
	sa->pos = pa;
	sb->pos = pb;
	return stopped;
}
