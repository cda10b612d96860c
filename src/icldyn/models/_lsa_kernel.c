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

#define BLK 64
#define DMAX 16

#define IDX(i, j) ((i) * D + (j))

#define DEFINE_KERNEL(NAME, REAL)                                                                  \
int NAME(int L, int H, int D, long B, const REAL *P, const REAL *Q, const REAL *S0,               \
         const REAL *zq, const REAL *y, REAL *loss_out, REAL *gP, REAL *gQ, REAL *pred,           \
         int want_grad, int nthreads) {                                                           \
    if (D > DMAX || D < 1) return 1;                                                               \
    const long nblk = (B + BLK - 1) / BLK;                                                         \
    const int DD = D * D;                                                                          \
    const long npar = (long)L * H * DD;                                                            \
    double total = 0.0;                                                                            \
    if (nthreads < 1) nthreads = 1;                                                                \
    REAL *acc = (REAL *)calloc((size_t)nthreads * 2 * npar, sizeof(REAL));                         \
    if (!acc) return 2;                                                                            \
    _Pragma("omp parallel num_threads(nthreads) reduction(+:total)")                               \
    {                                                                                              \
        int tid = 0;                                                                               \
        TID_ASSIGN(tid);                                                                           \
        REAL *aP = acc + (size_t)tid * 2 * npar, *aQ = aP + npar;                                  \
        /* tape: S_l, z_l, T_l for l = 0..L-1, plus S_L, z_L; each [.][BLK] */                    \
        REAL *Ss = (REAL *)aligned_alloc(64, sizeof(REAL) * (size_t)(L + 1) * DD * BLK);           \
        REAL *zs = (REAL *)aligned_alloc(64, sizeof(REAL) * (size_t)(L + 1) * D * BLK);            \
        REAL *Ts = (REAL *)aligned_alloc(64, sizeof(REAL) * (size_t)L * DD * BLK);                 \
        REAL *SQ = (REAL *)aligned_alloc(64, sizeof(REAL) * (size_t)DD * BLK);                     \
        REAL *TS = (REAL *)aligned_alloc(64, sizeof(REAL) * (size_t)DD * BLK);                     \
        REAL *Sb = (REAL *)aligned_alloc(64, sizeof(REAL) * (size_t)DD * BLK);                     \
        REAL *Sn = (REAL *)aligned_alloc(64, sizeof(REAL) * (size_t)DD * BLK);                     \
        REAL *Tb = (REAL *)aligned_alloc(64, sizeof(REAL) * (size_t)DD * BLK);                     \
        REAL *W = (REAL *)aligned_alloc(64, sizeof(REAL) * (size_t)DD * BLK);                      \
        REAL *zb = (REAL *)aligned_alloc(64, sizeof(REAL) * (size_t)D * BLK);                      \
        REAL *zn = (REAL *)aligned_alloc(64, sizeof(REAL) * (size_t)D * BLK);                      \
        REAL rr[BLK];                                                                              \
        _Pragma("omp for schedule(static)")                                                        \
        for (long blk = 0; blk < nblk; blk++) {                                                    \
            const long b0 = blk * BLK;                                                             \
            const int nb = (int)((B - b0) < BLK ? (B - b0) : BLK);                                 \
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
                /* TS = T S, S_{l+1} = TS T^T (symmetric: fill upper, mirror) */                   \
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
                if (pred) pred[b0 + t] = out;                                                      \
            }                                                                                      \
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
                    memset(TS, 0, sizeof(REAL) * DD * BLK);                                        \
                    for (int i = 0; i < D; i++)                                                    \
                        for (int k = 0; k < D; k++)                                                \
                            for (int j = 0; j < D; j++) {                                          \
                                const REAL *a = T + IDX(i, k) * BLK, *s = S + IDX(k, j) * BLK;     \
                                REAL *o = TS + IDX(i, j) * BLK;                                    \
                                for (int t = 0; t < BLK; t++) o[t] += a[t] * s[t];                 \
                            }                                                                      \
                    for (int i = 0; i < D; i++)                                                    \
                        for (int k = 0; k < D; k++) {                                              \
                            const REAL *g1 = Sb + IDX(i, k) * BLK, *g2 = Sb + IDX(k, i) * BLK;     \
                            for (int t = 0; t < BLK; t++) W[t] = g1[t] + g2[t];                    \
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
                    for (int k = 0; k < D; k++)                                                    \
                        for (int i = 0; i < D; i++)                                                \
                            for (int j = 0; j < D; j++) {                                          \
                                const REAL *a = T + IDX(k, i) * BLK, *c = W + IDX(k, j) * BLK;     \
                                REAL *o = Sn + IDX(i, j) * BLK;                                    \
                                for (int t = 0; t < BLK; t++) o[t] += a[t] * c[t];                 \
                            }                                                                      \
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
                            REAL sacc = 0;                                                         \
                            for (int k = 0; k < D; k++) {                                          \
                                const REAL *a = SQ + IDX(i, k) * BLK, *c = Tb + IDX(k, j) * BLK;   \
                                for (int t = 0; t < BLK; t++) sacc += a[t] * c[t];                 \
                            }                                                                      \
                            aQ[off + IDX(i, j)] += sacc;                                           \
                        }                                                                          \
                }                                                                                  \
                memcpy(Sb, Sn, sizeof(REAL) * DD * BLK);                                           \
            }                                                                                      \
        }                                                                                          \
        free(Ss); free(zs); free(Ts); free(SQ); free(TS); free(Sb); free(Sn); free(Tb); free(W);   \
        free(zb); free(zn);                                                                        \
    }                                                                                              \
    *loss_out = (REAL)(total / (double)B);                                                         \
    if (want_grad) {                                                                               \
        memset(gP, 0, sizeof(REAL) * npar); memset(gQ, 0, sizeof(REAL) * npar);                   \
        for (int th = 0; th < nthreads; th++)                                                      \
            for (long p = 0; p < npar; p++) {                                                      \
                gP[p] += acc[(size_t)th * 2 * npar + p];                                           \
                gQ[p] += acc[(size_t)th * 2 * npar + npar + p];                                    \
            }                                                                                      \
    }                                                                                              \
    free(acc);                                                                                     \
    return 0;                                                                                      \
}


DEFINE_KERNEL(lsa_f32, float)
DEFINE_KERNEL(lsa_f64, double)
