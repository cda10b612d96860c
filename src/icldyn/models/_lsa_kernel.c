/* Fused forward + backward of the L-layer linear transformer in moment form (icldyn).
 *
 * Per prompt b:  T_l = I + sum_h P_lh S_l Q_lh,  z_{l+1} = T_l z_l,  S_{l+1} = T_l S_l T_l^T,
 *                r_b = z_L[D-1] + y_b,  loss = (1/B) sum_b r_b^2.
 * Backward (S symmetric):  Tbar = zbar' z^T + (Sbar' + Sbar'^T) T S,  zbar = T^T zbar',
 *                Sbar = T^T Sbar' T + sum_h P_h^T Tbar Q_h^T,
 *                Pbar_h += Tbar Q_h^T S,  Qbar_h += S P_h^T Tbar.
 *
 * Prompts are processed in blocks of BLK with the batch index innermost and contiguous, so every
 * small-matrix product is a run of vector FMAs that gcc vectorises; a block's forward tape stays
 * in L1/L2. Blocks are spread over OpenMP threads; parameter gradients are reduced per thread.
 * Compiled twice, for float (lsa_f32) and double (lsa_f64).
 */
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#ifdef _OPENMP
#define TID_ASSIGN(tid) (tid) = omp_get_thread_num()
#else
#define TID_ASSIGN(tid) (void)(tid)
#endif

#ifndef BLK
#define BLK 64
#endif
#define DMAX 16

#define IDX(i, j) ((i) * D + (j))

#define DEFINE_KERNEL(NAME, REAL)                                                                  \
int NAME(int NS, int L, int H, int D, long B, const REAL *Pall, const REAL *Qall,                 \
         const REAL *S0all, const REAL *zqall, const REAL *yall, REAL *loss_out, REAL *gP,         \
         REAL *gQ, const unsigned char *mP, const unsigned char *mQ, int want_grad, int nthreads) { \
    if (D > DMAX || D < 1) return 1;                                                               \
    const long nblk = (B + BLK - 1) / BLK;                                                         \
    const int DD = D * D;                                                                          \
    const long npar = (long)L * H * DD;                                                            \
    if (nthreads < 1) nthreads = 1;                                                                \
    /* per thread: parameter-gradient accumulators and loss totals of every seed */               \
    REAL *acc = (REAL *)calloc((size_t)nthreads * NS * 2 * npar, sizeof(REAL));                    \
    double *tot = (double *)calloc((size_t)nthreads * NS, sizeof(double));                         \
    if (!acc || !tot) return 2;                                                                    \
    _Pragma("omp parallel num_threads(nthreads)")                                                  \
    {                                                                                              \
        int tid = 0;                                                                               \
        TID_ASSIGN(tid);                                                                           \
        /* tape: S_l, z_l, T_l for l = 0..L-1, plus S_L, z_L; each [.][BLK] */                    \
        REAL *Ss = (REAL *)aligned_alloc(64, sizeof(REAL) * (size_t)(L + 1) * DD * BLK);           \
        REAL *zs = (REAL *)aligned_alloc(64, sizeof(REAL) * (size_t)(L + 1) * D * BLK);            \
        REAL *Ts = (REAL *)aligned_alloc(64, sizeof(REAL) * (size_t)L * DD * BLK);                 \
        REAL *SQ = (REAL *)aligned_alloc(64, sizeof(REAL) * (size_t)DD * BLK);                     \
        REAL *TSs = (REAL *)aligned_alloc(64, sizeof(REAL) * (size_t)L * DD * BLK); /* T_l S_l */ \
        REAL *Sb = (REAL *)aligned_alloc(64, sizeof(REAL) * (size_t)DD * BLK);                     \
        REAL *Sn = (REAL *)aligned_alloc(64, sizeof(REAL) * (size_t)DD * BLK);                     \
        REAL *Tb = (REAL *)aligned_alloc(64, sizeof(REAL) * (size_t)DD * BLK);                     \
        REAL *W = (REAL *)aligned_alloc(64, sizeof(REAL) * (size_t)DD * BLK);                      \
        REAL *zb = (REAL *)aligned_alloc(64, sizeof(REAL) * (size_t)D * BLK);                      \
        REAL *zn = (REAL *)aligned_alloc(64, sizeof(REAL) * (size_t)D * BLK);                      \
        REAL rr[BLK];                                                                              \
        _Pragma("omp for schedule(static)")                                                        \
        for (long it = 0; it < NS * nblk; it++) {                                                  \
            const long sd = it / nblk, b0 = (it % nblk) * BLK;                                     \
            const int nb = (int)((B - b0) < BLK ? (B - b0) : BLK);                                 \
            const REAL *P = Pall + sd * npar, *Q = Qall + sd * npar, *S0 = S0all + sd * B * DD;    \
            const REAL *zq = zqall + sd * B * D, *y = yall + sd * B;                               \
            REAL *aP = acc + ((size_t)tid * NS + sd) * 2 * npar, *aQ = aP + npar;                  \
            double total = 0.0;                                                                    \
            /* load block, batch innermost; pad with zeros */                                      \
            for (int ij = 0; ij < DD; ij++)                                                        \
                for (int t = 0; t < BLK; t++)                                                      \
                    Ss[ij * BLK + t] = t < nb ? S0[(b0 + t) * DD + ij] : 0;                        \
            for (int i = 0; i < D; i++)                                                            \
                for (int t = 0; t < BLK; t++) zs[i * BLK + t] = t < nb ? zq[(b0 + t) * D + i] : 0; \
            /* ---------------- forward ---------------- */                                        \
            for (int l = 0; l < L; l++) {                                                          \
                const REAL *S = Ss + (size_t)l * DD * BLK;                                         \
                REAL *T = Ts + (size_t)l * DD * BLK;                                               \
                for (int ij = 0; ij < DD; ij++) {                                                  \
                    const REAL e = (ij / D == ij % D) ? 1 : 0;                                     \
                    for (int t = 0; t < BLK; t++) T[ij * BLK + t] = e;                             \
                }                                                                                  \
                for (int h = 0; h < H; h++) {                                                      \
                    const REAL *Ph = P + ((size_t)l * H + h) * DD, *Qh = Q + ((size_t)l * H + h) * DD; \
                    memset(SQ, 0, sizeof(REAL) * DD * BLK);                                        \
                    for (int i = 0; i < D; i++)                                                    \
                        for (int j = 0; j < D; j++)                                                \
                            for (int k = 0; k < D; k++) {                                          \
                                const REAL q = Qh[IDX(j, k)];                                      \
                                if (q == 0) continue;                                              \
                                REAL *o = SQ + IDX(i, k) * BLK; const REAL *s = S + IDX(i, j) * BLK; \
                                for (int t = 0; t < BLK; t++) o[t] += s[t] * q;                    \
                            }                                                                      \
                    for (int i = 0; i < D; i++)                                                    \
                        for (int j = 0; j < D; j++) {                                              \
                            const REAL p = Ph[IDX(i, j)];                                          \
                            if (p == 0) continue;                                                  \
                            for (int k = 0; k < D; k++) {                                          \
                                REAL *o = T + IDX(i, k) * BLK; const REAL *s = SQ + IDX(j, k) * BLK; \
                                for (int t = 0; t < BLK; t++) o[t] += p * s[t];                    \
                            }                                                                      \
                        }                                                                          \
                }                                                                                  \
                const REAL *z = zs + (size_t)l * D * BLK;                                          \
                REAL *z1 = zs + (size_t)(l + 1) * D * BLK;                                         \
                memset(z1, 0, sizeof(REAL) * D * BLK);                                             \
                for (int i = 0; i < D; i++)                                                        \
                    for (int k = 0; k < D; k++) {                                                  \
                        const REAL *a = T + IDX(i, k) * BLK, *v = z + k * BLK; REAL *o = z1 + i * BLK; \
                        for (int t = 0; t < BLK; t++) o[t] += a[t] * v[t];                         \
                    }                                                                              \
                if (l == L - 1) break; /* S_L is never read */                                     \
                /* TS = T S (kept for the backward), S_{l+1} = TS T^T (symmetric: upper, mirror) */ \
                REAL *TS = TSs + (size_t)l * DD * BLK;                                             \
                memset(TS, 0, sizeof(REAL) * DD * BLK);                                            \
                for (int i = 0; i < D; i++)                                                        \
                    for (int k = 0; k < D; k++)                                                    \
                        for (int j = 0; j < D; j++) {                                              \
                            const REAL *a = T + IDX(i, k) * BLK, *s = S + IDX(k, j) * BLK;         \
                            REAL *o = TS + IDX(i, j) * BLK;                                        \
                            for (int t = 0; t < BLK; t++) o[t] += a[t] * s[t];                     \
                        }                                                                          \
                REAL *S1 = Ss + (size_t)(l + 1) * DD * BLK;                                        \
                for (int i = 0; i < D; i++)                                                        \
                    for (int j = i; j < D; j++) {                                                  \
                        REAL *o = S1 + IDX(i, j) * BLK;                                            \
                        for (int t = 0; t < BLK; t++) o[t] = 0;                                    \
                        for (int k = 0; k < D; k++) {                                              \
                            const REAL *a = TS + IDX(i, k) * BLK, *c = T + IDX(j, k) * BLK;        \
                            for (int t = 0; t < BLK; t++) o[t] += a[t] * c[t];                     \
                        }                                                                          \
                        if (j != i) memcpy(S1 + IDX(j, i) * BLK, o, sizeof(REAL) * BLK);           \
                    }                                                                              \
            }                                                                                      \
            const REAL *zL = zs + (size_t)L * D * BLK;                                             \
            for (int t = 0; t < nb; t++) {                                                         \
                const REAL out = zL[(D - 1) * BLK + t];                                            \
                rr[t] = out + y[b0 + t];                                                           \
                total += (double)rr[t] * rr[t];                                                    \
            }                                                                                      \
            tot[(size_t)tid * NS + sd] += total;                                                   \
            if (!want_grad) continue;                                                              \
            for (int t = nb; t < BLK; t++) rr[t] = 0;                                              \
            /* ---------------- backward ---------------- */                                       \
            memset(zb, 0, sizeof(REAL) * D * BLK);                                                 \
            for (int t = 0; t < BLK; t++) zb[(D - 1) * BLK + t] = 2 * rr[t] / (REAL)B;             \
            memset(Sb, 0, sizeof(REAL) * DD * BLK);                                                \
            for (int l = L - 1; l >= 0; l--) {                                                     \
                const REAL *S = Ss + (size_t)l * DD * BLK, *T = Ts + (size_t)l * DD * BLK;         \
                const REAL *z = zs + (size_t)l * D * BLK;                                          \
                /* Tbar = zbar' z^T + (Sbar' + Sbar'^T) T S */                                     \
                for (int i = 0; i < D; i++)                                                        \
                    for (int j = 0; j < D; j++) {                                                  \
                        REAL *o = Tb + IDX(i, j) * BLK; const REAL *a = zb + i * BLK, *v = z + j * BLK; \
                        for (int t = 0; t < BLK; t++) o[t] = a[t] * v[t];                          \
                    }                                                                              \
                if (l < L - 1) {                                                                   \
                    const REAL *TS = TSs + (size_t)l * DD * BLK;                                   \
                    for (int i = 0; i < D; i++)                                                    \
                        for (int k = 0; k < D; k++) {                                              \
                            const REAL *g1 = Sb + IDX(i, k) * BLK; /* S̄ kept symmetric */        \
                            for (int t = 0; t < BLK; t++) W[t] = 2 * g1[t];                        \
                            for (int j = 0; j < D; j++) {                                          \
                                const REAL *s = TS + IDX(k, j) * BLK; REAL *o = Tb + IDX(i, j) * BLK; \
                                for (int t = 0; t < BLK; t++) o[t] += W[t] * s[t];                 \
                            }                                                                      \
                        }                                                                          \
                    /* Sn = T^T Sbar' T  (via W = Sbar' T) */                                      \
                    memset(W, 0, sizeof(REAL) * DD * BLK);                                         \
                    for (int i = 0; i < D; i++)                                                    \
                        for (int k = 0; k < D; k++)                                                \
                            for (int j = 0; j < D; j++) {                                          \
                                const REAL *a = Sb + IDX(i, k) * BLK, *c = T + IDX(k, j) * BLK;    \
                                REAL *o = W + IDX(i, j) * BLK;                                     \
                                for (int t = 0; t < BLK; t++) o[t] += a[t] * c[t];                 \
                            }                                                                      \
                    memset(Sn, 0, sizeof(REAL) * DD * BLK);                                        \
                    for (int k = 0; k < D; k++) /* T^T S̄' T is symmetric: upper triangle */        \
                        for (int i = 0; i < D; i++)                                                \
                            for (int j = i; j < D; j++) {                                          \
                                const REAL *a = T + IDX(k, i) * BLK, *c = W + IDX(k, j) * BLK;     \
                                REAL *o = Sn + IDX(i, j) * BLK;                                    \
                                for (int t = 0; t < BLK; t++) o[t] += a[t] * c[t];                 \
                            }                                                                      \
                    for (int i = 0; i < D; i++)                                                    \
                        for (int j = 0; j < i; j++)                                                \
                            memcpy(Sn + IDX(i, j) * BLK, Sn + IDX(j, i) * BLK, sizeof(REAL) * BLK); \
                } else {                                                                           \
                    memset(Sn, 0, sizeof(REAL) * DD * BLK);                                        \
                }                                                                                  \
                /* zbar = T^T zbar' */                                                             \
                memset(zn, 0, sizeof(REAL) * D * BLK);                                             \
                for (int k = 0; k < D; k++)                                                        \
                    for (int i = 0; i < D; i++) {                                                  \
                        const REAL *a = T + IDX(k, i) * BLK, *v = zb + k * BLK; REAL *o = zn + i * BLK; \
                        for (int t = 0; t < BLK; t++) o[t] += a[t] * v[t];                         \
                    }                                                                              \
                memcpy(zb, zn, sizeof(REAL) * D * BLK);                                            \
                /* per head: Pbar += Tbar Q^T S, Qbar += S P^T Tbar, Sbar += P^T Tbar Q^T */       \
                for (int h = 0; h < H; h++) {                                                      \
                    const size_t off = ((size_t)l * H + h) * DD;                                   \
                    const REAL *Ph = P + off, *Qh = Q + off;                                       \
                    /* W = Tbar Q^T  (W_ij = sum_k Tb_ik Q_jk) */                                  \
                    memset(W, 0, sizeof(REAL) * DD * BLK);                                         \
                    for (int i = 0; i < D; i++)                                                    \
                        for (int k = 0; k < D; k++)                                                \
                            for (int j = 0; j < D; j++) {                                          \
                                const REAL q = Qh[IDX(j, k)];                                      \
                                if (q == 0) continue;                                              \
                                const REAL *a = Tb + IDX(i, k) * BLK; REAL *o = W + IDX(i, j) * BLK; \
                                for (int t = 0; t < BLK; t++) o[t] += a[t] * q;                    \
                            }                                                                      \
                    /* Pbar_ij += sum_t sum_k W_ik S_kj */                                         \
                    for (int i = 0; i < D; i++)                                                    \
                        for (int j = 0; j < D; j++) {                                              \
                            if (!mP[IDX(i, j)]) continue; /* not trained */                        \
                            REAL sacc = 0;                                                         \
                            for (int k = 0; k < D; k++) {                                          \
                                const REAL *a = W + IDX(i, k) * BLK, *s = S + IDX(k, j) * BLK;     \
                                for (int t = 0; t < BLK; t++) sacc += a[t] * s[t];                 \
                            }                                                                      \
                            aP[off + IDX(i, j)] += sacc;                                           \
                        }                                                                          \
                    /* Sn += P^T W  (Sn_ij += sum_k P_ki W_kj) */                                  \
                    for (int k = 0; k < D; k++)                                                    \
                        for (int i = 0; i < D; i++) {                                              \
                            const REAL p = Ph[IDX(k, i)];                                          \
                            if (p == 0) continue;                                                  \
                            for (int j = 0; j < D; j++) {                                          \
                                const REAL *a = W + IDX(k, j) * BLK; REAL *o = Sn + IDX(i, j) * BLK; \
                                for (int t = 0; t < BLK; t++) o[t] += p * a[t];                    \
                            }                                                                      \
                        }                                                                          \
                    /* Qbar_ij += sum_t (S P^T)_ik Tbar_kj ; SQ reused as S P^T */                 \
                    memset(SQ, 0, sizeof(REAL) * DD * BLK);                                        \
                    for (int i = 0; i < D; i++)                                                    \
                        for (int m = 0; m < D; m++)                                                \
                            for (int k = 0; k < D; k++) {                                          \
                                const REAL p = Ph[IDX(k, m)];                                      \
                                if (p == 0) continue;                                              \
                                const REAL *s = S + IDX(i, m) * BLK; REAL *o = SQ + IDX(i, k) * BLK; \
                                for (int t = 0; t < BLK; t++) o[t] += s[t] * p;                    \
                            }                                                                      \
                    for (int i = 0; i < D; i++)                                                    \
                        for (int j = 0; j < D; j++) {                                              \
                            if (!mQ[IDX(i, j)]) continue; /* not trained */                        \
                            REAL sacc = 0;                                                         \
                            for (int k = 0; k < D; k++) {                                          \
                                const REAL *a = SQ + IDX(i, k) * BLK, *c = Tb + IDX(k, j) * BLK;   \
                                for (int t = 0; t < BLK; t++) sacc += a[t] * c[t];                 \
                            }                                                                      \
                            aQ[off + IDX(i, j)] += sacc;                                           \
                        }                                                                          \
                }                                                                                  \
                /* only sym(S̄) reaches the loss: keep S̄ symmetric (T^T S̄ T is; P^T T̄ Q^T is not) */ \
                for (int i = 0; i < D; i++)                                                        \
                    for (int j = i; j < D; j++) {                                                  \
                        const REAL *a = Sn + IDX(i, j) * BLK, *c = Sn + IDX(j, i) * BLK;           \
                        REAL *o = Sb + IDX(i, j) * BLK, *o2 = Sb + IDX(j, i) * BLK;                \
                        for (int t = 0; t < BLK; t++) o[t] = (a[t] + c[t]) / 2;                    \
                        if (j != i) memcpy(o2, o, sizeof(REAL) * BLK);                             \
                    }                                                                              \
            }                                                                                      \
        }                                                                                          \
        free(Ss); free(zs); free(Ts); free(SQ); free(TSs); free(Sb); free(Sn); free(Tb); free(W);   \
        free(zb); free(zn);                                                                        \
    }                                                                                              \
    for (int sd = 0; sd < NS; sd++) {                                                              \
        double total = 0.0;                                                                        \
        for (int th = 0; th < nthreads; th++) total += tot[(size_t)th * NS + sd];                  \
        loss_out[sd] = (REAL)(total / (double)B);                                                  \
        if (!want_grad) continue;                                                                  \
        REAL *oP = gP + sd * npar, *oQ = gQ + sd * npar;                                           \
        memset(oP, 0, sizeof(REAL) * npar); memset(oQ, 0, sizeof(REAL) * npar);                   \
        for (int th = 0; th < nthreads; th++) {                                                    \
            const REAL *a = acc + ((size_t)th * NS + sd) * 2 * npar;                               \
            for (long p = 0; p < npar; p++) { oP[p] += a[p]; oQ[p] += a[npar + p]; }               \
        }                                                                                          \
    }                                                                                              \
    free(acc); free(tot);                                                                          \
    return 0;                                                                                      \
}


DEFINE_KERNEL(lsa_f32, float)
DEFINE_KERNEL(lsa_f64, double)

/* ------------------------------------------------------------------------------------------------
 * Gaussian in-context prompts, reduced to moments as they are drawn (Ahn et al. section 2):
 *   w = Wsq g,  x_i = Ssq g_i,  y_i = <w, x_i> + sigma e_i  (i = 1..n+1),
 *   S = (1/n) sum_{i<=n} z_i z_i^T with z_i = [x_i; y_i],  zq = [x_{n+1}; 0],  yq = y_{n+1}.
 * Randomness: Philox4x32-10 (Salmon et al. 2011) keyed by (key0, key1) with counter
 * (draw group, prompt index), Box-Muller normals: prompt b's numbers depend only on the key and b.
 * ---------------------------------------------------------------------------------------------- */
#include <math.h>
#include <stdint.h>

/* glibc's vector math (libmvec) variants, declared here because math.h only declares them under
 * __FAST_MATH__, which the build drops (-fno-finite-math-only keeps NaN/Inf semantics, so a
 * diverging run shows a NaN loss instead of a silently wrong number). */
__attribute__((simd("notinbranch"))) extern float logf(float);
__attribute__((simd("notinbranch"))) extern float cosf(float);
__attribute__((simd("notinbranch"))) extern double log(double);
__attribute__((simd("notinbranch"))) extern double cos(double);

/* Philox4x32-10 on BLK counters at once, prompt index innermost (vectorisable). */
static inline void philox_block(uint32_t j, uint64_t b0, uint32_t k0in, uint32_t k1in, uint32_t out[4][BLK]) {
    uint32_t c0[BLK], c1[BLK], c2[BLK], c3[BLK];
    for (int t = 0; t < BLK; t++) {
        const uint64_t b = b0 + (uint64_t)t;
        c0[t] = j; c1[t] = (uint32_t)b; c2[t] = (uint32_t)(b >> 32); c3[t] = 0x1CD1u;
    }
    uint32_t k0 = k0in, k1 = k1in;
    for (int r = 0; r < 10; r++) {
        for (int t = 0; t < BLK; t++) {
            const uint64_t p0 = (uint64_t)0xD2511F53u * c0[t], p1 = (uint64_t)0xCD9E8D57u * c2[t];
            const uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1[t] ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3[t] ^ k1;
            c1[t] = (uint32_t)p1; c3[t] = (uint32_t)p0; c0[t] = n0; c2[t] = n2;
        }
        k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;
    }
    for (int t = 0; t < BLK; t++) { out[0][t] = c0[t]; out[1][t] = c1[t]; out[2][t] = c2[t]; out[3][t] = c3[t]; }
}

/* Box-Muller on BLK pairs of 24-bit uniforms: u1 in (0, 1], u2 in [0, 1). */
#define DEFINE_BOXMULLER(NAME, REAL, LOG, COS, SQRT)                                          \
static void NAME(const uint32_t *restrict a, const uint32_t *restrict b, REAL *restrict o1,       \
                 REAL *restrict o2) {                                                              \
    _Pragma("omp simd")                                                                            \
    for (int t = 0; t < BLK; t++) {                                                                \
        const REAL u1 = ((REAL)(int32_t)(a[t] >> 8) + (REAL)1) * (REAL)5.9604644775390625e-08;     \
        const REAL u2 = (REAL)(int32_t)(b[t] >> 8) * (REAL)5.9604644775390625e-08;                 \
        const REAL r = SQRT((REAL)-2 * LOG(u1)), th = (REAL)6.283185307179586 * u2;                \
        o1[t] = r * COS(th);                                                                       \
        o2[t] = r * COS(th - (REAL)1.5707963267948966); /* sin, written so gcc won't fuse a scalar sincos */ \
    }                                                                                              \
}
DEFINE_BOXMULLER(boxmuller_f32, float, logf, cosf, sqrtf)
DEFINE_BOXMULLER(boxmuller_f64, double, log, cos, sqrt)

#define DEFINE_SAMPLER(NAME, REAL, BOXMULLER)                                                  \
int NAME(int NS, int d, int n, long B, const REAL *Ssqall, const REAL *Wsqall, const REAL *sigmas,  \
         const uint32_t *keys, REAL *Sall, REAL *zqall, REAL *yqall, int nthreads) {              \
    if (d + 1 > DMAX || d < 1 || n < 1) return 1;                                                  \
    const int D = d + 1;                                                                           \
    const long NG = d + (long)(n + 1) * (d + 1); /* normals per prompt: w, then (x_i, e_i) */      \
    const long ngroups = (NG + 3) / 4;                                                             \
    const long nblk = (B + BLK - 1) / BLK;                                                         \
    if (nthreads < 1) nthreads = 1;                                                                \
    _Pragma("omp parallel num_threads(nthreads)")                                                  \
    {                                                                                              \
        REAL *G = (REAL *)aligned_alloc(64, sizeof(REAL) * (size_t)ngroups * 4 * BLK);             \
        REAL w[DMAX][BLK], x[DMAX][BLK], acc[DMAX * DMAX][BLK];                                    \
        uint32_t u[4][BLK];                                                                        \
        _Pragma("omp for schedule(static)")                                                        \
        for (long it = 0; it < NS * nblk; it++) {                                                  \
            const long sd = it / nblk, b0 = (it % nblk) * BLK;                                     \
            const int nb = (int)((B - b0) < BLK ? (B - b0) : BLK);                                 \
            const REAL *Ssq = Ssqall + sd * d * d, *Wsq = Wsqall + sd * d * d, sigma = sigmas[sd]; \
            const uint32_t k0 = keys[2 * sd], k1 = keys[2 * sd + 1];                               \
            REAL *S = Sall + sd * B * D * D, *zq = zqall + sd * B * D, *yq = yqall + sd * B;       \
            for (long j = 0; j < ngroups; j++) {                                                   \
                philox_block((uint32_t)j, (uint64_t)b0, k0, k1, u);                                \
                BOXMULLER(u[0], u[1], G + (j * 4) * BLK, G + (j * 4 + 1) * BLK);                  \
                BOXMULLER(u[2], u[3], G + (j * 4 + 2) * BLK, G + (j * 4 + 3) * BLK);              \
            }                                                                                      \
            for (int p = 0; p < d; p++) {                                                          \
                for (int t = 0; t < BLK; t++) w[p][t] = 0;                                         \
                for (int q = 0; q < d; q++) {                                                      \
                    const REAL c = Wsq[p * d + q]; const REAL *g = G + q * BLK;                    \
                    for (int t = 0; t < BLK; t++) w[p][t] += c * g[t];                             \
                }                                                                                  \
            }                                                                                      \
            for (int pq = 0; pq < D * D; pq++) for (int t = 0; t < BLK; t++) acc[pq][t] = 0;      \
            for (int ex = 0; ex <= n; ex++) {                                                      \
                const REAL *g = G + (d + (long)ex * (d + 1)) * BLK;                                \
                for (int t = 0; t < BLK; t++) x[d][t] = sigma * g[d * BLK + t];                    \
                for (int p = 0; p < d; p++) {                                                      \
                    for (int t = 0; t < BLK; t++) x[p][t] = 0;                                     \
                    for (int q = 0; q < d; q++) {                                                  \
                        const REAL c = Ssq[p * d + q];                                             \
                        for (int t = 0; t < BLK; t++) x[p][t] += c * g[q * BLK + t];               \
                    }                                                                              \
                    for (int t = 0; t < BLK; t++) x[d][t] += w[p][t] * x[p][t];                    \
                }                                                                                  \
                if (ex < n) {                                                                      \
                    for (int p = 0; p < D; p++)                                                    \
                        for (int q = p; q < D; q++)                                                \
                            for (int t = 0; t < BLK; t++) acc[p * D + q][t] += x[p][t] * x[q][t];  \
                } else {                                                                           \
                    for (int t = 0; t < nb; t++) {                                                 \
                        for (int p = 0; p < d; p++) zq[(b0 + t) * D + p] = x[p][t];                \
                        zq[(b0 + t) * D + d] = 0; yq[b0 + t] = x[d][t];                            \
                    }                                                                              \
                }                                                                                  \
            }                                                                                      \
            for (int t = 0; t < nb; t++)                                                           \
                for (int p = 0; p < D; p++)                                                        \
                    for (int q = p; q < D; q++) {                                                  \
                        const REAL v = acc[p * D + q][t] / (REAL)n;                                \
                        S[(b0 + t) * D * D + p * D + q] = v; S[(b0 + t) * D * D + q * D + p] = v;  \
                    }                                                                              \
        }                                                                                          \
        free(G);                                                                                   \
    }                                                                                              \
    return 0;                                                                                      \
}

DEFINE_SAMPLER(sample_f32, float, boxmuller_f32)
DEFINE_SAMPLER(sample_f64, double, boxmuller_f64)
