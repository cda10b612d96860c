/* Fused forward + backward of the L-layer linear transformer in moment form (icldyn); further below, the same
 * for the column form with an activation (attn_*), and the prompt sampler.
 *
 * Per prompt b:  T_l = I + sum_h P_lh S_l Q_lh,  z_{l+1} = T_l z_l,  S_{l+1} = T_l S_l T_l^T,
 *                r_b = z_L[D-1] + y_b,  loss = (1/B) sum_b r_b^2.
 * Backward (S symmetric):  Tbar = zbar' z^T + (Sbar' + Sbar'^T) T S,  zbar = T^T zbar',
 *                Sbar = T^T Sbar' T + sum_h P_h^T Tbar Q_h^T,
 *                Pbar_h += Tbar Q_h^T S,  Qbar_h += S P_h^T Tbar.
 *
 * Prompts are processed in blocks of BLK with the batch index innermost and contiguous, so every
 * small-matrix product is a run of vector FMAs; a block's forward tape stays in L1/L2. Within a block
 * the products are register-blocked: for each vector of VL prompts, a row (or column) of one factor is
 * held in registers while a row (or column) of the result is formed, so an FMA costs about one load
 * instead of three loads and a store. D is a compile-time constant (-DDCONST=D; kernel.py builds one
 * library per D on first use) so that these loops unroll fully and the row stays in registers.
 * Blocks are spread over OpenMP threads; parameter gradients are reduced per thread.
 * The typed part below is compiled twice, for float (lsa_f32) and double (lsa_f64), by including
 * this file into itself.
 */
#ifndef LSA_TYPED /* ============================ shared part ============================ */
#include <stdio.h>
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
#if !defined(DCONST) || DCONST < 2 || DCONST > DMAX
#error "compile with -DDCONST=D, 2 <= D <= DMAX"
#endif
#define VBYTES 32 /* one AVX2 register */
#define INLINE static inline __attribute__((always_inline))
#define IDX(i, j) ((i) * D + (j))
/* the c-th vector of entry ij of a block array (batch innermost) */
#define V(p, ij, c) (*(VEC *)((p) + (size_t)(ij) * BLK + (size_t)(c) * VL))

/* 64-byte aligned scratch; its size rounded up to the alignment, as C11's aligned_alloc asks. NULL: out of memory
 * (a function that gets one returns 2, having skipped its work) */
static inline void *scratch(size_t bytes) { return aligned_alloc(64, (bytes + 63) / 64 * 64); }

typedef float vf32 __attribute__((vector_size(VBYTES), may_alias));
typedef double vf64 __attribute__((vector_size(VBYTES), may_alias));

/* ------------------------------------------------------------------------------------------------
 * Gaussian in-context prompts, reduced to moments as they are drawn (arXiv 2306.00297 section 2):
 *   w = Wsq g,  x_i = Ssq g_i,  y_i = <w, x_i> + sigma e_i  (i = 1..n+1),
 *   S = (1/n) sum_{i<=n} z_i z_i^T with z_i = [x_i; y_i],  zq = [x_{n+1}; 0],  yq = y_{n+1}.
 * Randomness: Philox4x32-10 (Salmon et al. 2011) keyed by (key0, key1) with counter
 * (draw group, prompt index), Box-Muller normals: prompt b's numbers depend only on the key and b.
 * ---------------------------------------------------------------------------------------------- */
#include <math.h>
#include <stdint.h>

/* glibc's vector math (libmvec) variants, declared here because math.h only declares them under
 * __FAST_MATH__, which the build drops (-fno-finite-math-only keeps NaN/Inf semantics, so a
 * diverging run shows a NaN loss instead of a silently wrong number).
 * Without libmvec (macOS, musl, or a failed link: kernel.py retries with -DLSA_NO_MVEC) the scalar
 * functions are called instead. */
#ifndef LSA_NO_MVEC
__attribute__((simd("notinbranch"))) extern float logf(float);
__attribute__((simd("notinbranch"))) extern float cosf(float);
__attribute__((simd("notinbranch"))) extern double log(double);
__attribute__((simd("notinbranch"))) extern double cos(double);
__attribute__((simd("notinbranch"))) extern float expf(float);
__attribute__((simd("notinbranch"))) extern double exp(double);
#endif

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

#define LSA_TYPED
#define REAL float
#define VEC vf32
#define FN(name) name##_f32
#define EXP expf
#include "_lsa_kernel.c" /* this file, typed part */
#undef REAL
#undef VEC
#undef FN
#undef EXP
#define REAL double
#define VEC vf64
#define FN(name) name##_f64
#define EXP exp
#include "_lsa_kernel.c" /* this file, typed part */
#undef REAL
#undef VEC
#undef FN
#undef EXP

/* ============================ XLA FFI handlers ============================
 * The three kernels as XLA custom calls (lsa_kernel.py calls them with jax.ffi.ffi_call): XLA hands over its
 * buffers and the kernel runs on XLA's own thread, with no Python, no GIL and no copy in between, and a program
 * that calls one is an ordinary XLA program, kept in JAX's persistent compilation cache like any other. Written
 * against XLA's C API (xla/ffi/api/c_api.h, shipped with jaxlib), so that this file stays C. The leading (seed)
 * axes of the arguments broadcast as in NumPy; an argument of size 1 on a seed axis (vmap_method="expand_dims")
 * is read by every seed along it, without a copy. */
#include "xla/ffi/api/c_api.h"

static XLA_FFI_Error *ffi_error(const XLA_FFI_CallFrame *cf, XLA_FFI_Error_Code code, const char *msg) {
    XLA_FFI_Error_Create_Args a = {XLA_FFI_Error_Create_Args_STRUCT_SIZE, NULL, msg, code};
    return cf->api->XLA_FFI_Error_Create(&a);
}

static const char FFI_OOM[] = "out of memory for its scratch buffers";

/* A kernel's non-zero return code in words (1: shapes it was not built for; 2: its scratch memory refused). */
static XLA_FFI_Error *ffi_failed(const XLA_FFI_CallFrame *cf, const char *what, int rc, const char *shapes) {
    char msg[160];
    if (rc == 2) snprintf(msg, sizeof msg, "%s failed: %s", what, FFI_OOM);
    else snprintf(msg, sizeof msg, "%s failed: code %d; %s", what, rc, shapes);
    return ffi_error(cf, rc == 2 ? XLA_FFI_Error_Code_RESOURCE_EXHAUSTED : XLA_FFI_Error_Code_INVALID_ARGUMENT, msg);
}

/* A call that only asks which FFI version the handler was built against: answered, returns 1. */
static int ffi_metadata(XLA_FFI_CallFrame *cf) {
    XLA_FFI_Extension_Base *ext = cf->extension_start;
    if (!ext || ext->type != XLA_FFI_Extension_Metadata) return 0;
    XLA_FFI_Metadata *m = ((XLA_FFI_Metadata_Extension *)ext)->metadata;
    m->api_version = (XLA_FFI_Api_Version){XLA_FFI_Api_Version_STRUCT_SIZE, NULL, XLA_FFI_API_MAJOR, XLA_FFI_API_MINOR};
    m->traits = 0;
    return 1;
}

/* The attribute `name` of type `type` (attributes come sorted by name), or NULL. */
static const void *ffi_attr(const XLA_FFI_CallFrame *cf, const char *name, XLA_FFI_AttrType type) {
    const size_t len = strlen(name);
    for (int64_t k = 0; k < cf->attrs.size; k++) {
        const XLA_FFI_ByteSpan *s = cf->attrs.names[k];
        if (cf->attrs.types[k] == type && s->len == len && !memcmp(s->ptr, name, len)) return cf->attrs.attrs[k];
    }
    return NULL;
}

/* The integer attribute `name` (int32 or int64), or 0. */
static long ffi_int(const XLA_FFI_CallFrame *cf, const char *name) {
    const XLA_FFI_Scalar *v = ffi_attr(cf, name, XLA_FFI_AttrType_SCALAR);
    if (!v) return 0;
    return v->dtype == XLA_FFI_DataType_S64 ? (long)*(const int64_t *)v->value : (long)*(const int32_t *)v->value;
}

#define FFI_MAXLEAD 8
/* na argument buffers, the last core[k] axes of buffer k one seed's array, its leading (seed) axes as many as every
 * other's (lsa_kernel.py pads them with 1s) and each of size 1 or the common size; nr result buffers with the
 * common leading axes and rcore[k] others. Sets *ns, the number of seeds, and *ix (malloc'd): for seed s, the index
 * of argument k's own seed at ix[s * na + k] (size-1 axes read by every seed along them). Returns NULL, or what is
 * wrong (then *ix is NULL). */
static const char *ffi_seeds(XLA_FFI_Buffer *const *b, const int *core, int na, XLA_FFI_Buffer *const *r,
                             const int *rcore, int nr, long *ns, long **ix) {
    *ix = NULL;
    const int64_t nl = b[0]->rank - core[0];
    int64_t lead[FFI_MAXLEAD];
    if (nl < 0 || nl > FFI_MAXLEAD) return "more leading (seed) axes than 8, or an array of too few axes";
    for (int j = 0; j < nl; j++) lead[j] = 1;
    for (int k = 0; k < na; k++) {
        if (b[k]->rank - core[k] != nl) return "the arguments' leading (seed) axes differ in number";
        for (int j = 0; j < nl; j++) {
            if (b[k]->dims[j] != 1 && lead[j] != 1 && b[k]->dims[j] != lead[j])
                return "the arguments' leading (seed) axes do not broadcast";
            if (b[k]->dims[j] != 1) lead[j] = b[k]->dims[j];
        }
    }
    for (int k = 0; k < nr; k++) {
        if (r[k]->rank - rcore[k] != nl) return "a result's leading (seed) axes differ from the arguments'";
        for (int j = 0; j < nl; j++)
            if (r[k]->dims[j] != lead[j]) return "a result's leading (seed) axes differ from the arguments'";
    }
    *ns = 1;
    for (int j = 0; j < nl; j++) *ns *= lead[j];
    *ix = malloc(sizeof(long) * (size_t)(*ns > 0 ? *ns : 1) * na);
    if (!*ix) return FFI_OOM;
    for (long s = 0; s < *ns; s++)
        for (int k = 0; k < na; k++) {
            long rem = s, at = 0, stride = 1;
            for (int64_t j = nl - 1; j >= 0; j--) { /* seed s's index on axis j; 0 where buffer k has size 1 */
                if (b[k]->dims[j] != 1) at += rem % lead[j] * stride;
                rem /= lead[j];
                stride *= b[k]->dims[j];
            }
            (*ix)[s * na + k] = at;
        }
    return NULL;
}

/* Whether the last axes of buffer b are dims[0..n) (a negative entry: any size), and its dtype is `dtype`. */
static int ffi_shaped(const XLA_FFI_Buffer *b, XLA_FFI_DataType dtype, int n, const int64_t *dims) {
    if (b->dtype != dtype || b->rank < n) return 0;
    for (int k = 0; k < n; k++)
        if (dims[k] >= 0 && b->dims[b->rank - n + k] != dims[k]) return 0;
    return 1;
}

/* What is wrong with a call: its arguments (INVALID_ARGUMENT), or the seed table's memory refused (FFI_OOM). */
static XLA_FFI_Error *ffi_invalid(const XLA_FFI_CallFrame *cf, const char *what, const char *why) {
    char msg[200];
    snprintf(msg, sizeof msg, "%s: %s", what, why);
    return ffi_error(cf, why == FFI_OOM ? XLA_FFI_Error_Code_RESOURCE_EXHAUSTED : XLA_FFI_Error_Code_INVALID_ARGUMENT,
                     msg);
}

#define ARGS(cf) ((XLA_FFI_Buffer *const *)(cf)->args.args)
#define RETS(cf) ((XLA_FFI_Buffer *const *)(cf)->rets.rets)
#define LAST(buf, k) ((buf)->dims[(buf)->rank - (k)]) /* the k-th axis from the end */

/* Moment form: args P, Q (…, L, H, D, D), S (…, B, D, D), zq (…, B, D), y (…, B); rets loss (…), gP, gQ;
 * attrs threads, want_grad, trained ('0'/'1' for each of P's then Q's D x D entries: whether its gradient is
 * wanted; absent: all). */
XLA_FFI_Error *lsa_ffi(XLA_FFI_CallFrame *cf) {
    if (ffi_metadata(cf)) return NULL;
    XLA_FFI_Buffer *const *a = ARGS(cf), *const *r = RETS(cf);
    static const int core[5] = {4, 4, 3, 2, 1}, rcore[3] = {0, 4, 4};
    const char *what = "lsa kernel";
    if (cf->args.size != 5 || cf->rets.size != 3 || a[0]->rank < 4 || a[4]->rank < 1)
        return ffi_invalid(cf, what, "5 arguments, 3 results");
    const XLA_FFI_DataType t = a[2]->dtype;
    const int64_t L = LAST(a[0], 4), H = LAST(a[0], 3), D = LAST(a[0], 1), B = LAST(a[4], 1);
    const int64_t par[4] = {L, H, D, D}, Sd[3] = {B, D, D}, zd[2] = {B, D}, yd[1] = {B};
    if ((t != XLA_FFI_DataType_F32 && t != XLA_FFI_DataType_F64) || !ffi_shaped(a[0], t, 4, par)
        || !ffi_shaped(a[1], t, 4, par) || !ffi_shaped(a[2], t, 3, Sd) || !ffi_shaped(a[3], t, 2, zd)
        || !ffi_shaped(a[4], t, 1, yd) || !ffi_shaped(r[1], t, 4, par) || !ffi_shaped(r[2], t, 4, par)
        || r[0]->dtype != t)
        return ffi_invalid(cf, what, "P, Q (..., L, H, D, D), S (..., B, D, D), zq (..., B, D), y (..., B), all "
                                     "float32 or all float64");
    unsigned char mask[2 * DMAX * DMAX];
    const XLA_FFI_ByteSpan *tr = ffi_attr(cf, "trained", XLA_FFI_AttrType_STRING);
    for (int k = 0; k < 2 * D * D && D <= DMAX; k++) mask[k] = tr && (size_t)k < tr->len ? tr->ptr[k] == '1' : 1;
    long ns, *ix;
    const char *bad = ffi_seeds(a, core, 5, r, rcore, 3, &ns, &ix);
    if (bad) return ffi_invalid(cf, what, bad);
    const int g = (int)ffi_int(cf, "want_grad"), th = (int)ffi_int(cf, "threads");
    const int rc = t == XLA_FFI_DataType_F64
        ? lsa_f64(ns, L, H, D, B, ix, a[0]->data, a[1]->data, a[2]->data, a[3]->data, a[4]->data, r[0]->data,
                  r[1]->data, r[2]->data, mask, mask + D * D, g, th)
        : lsa_f32(ns, L, H, D, B, ix, a[0]->data, a[1]->data, a[2]->data, a[3]->data, a[4]->data, r[0]->data,
                  r[1]->data, r[2]->data, mask, mask + D * D, g, th);
    free(ix);
    return rc ? ffi_failed(cf, what, rc, "D = d + 1 must be the library's, at most 16") : NULL;
}

/* Column form: args P, Q (…, L, H, D, D), Z (…, B, D, N), y (…, B); rets loss (…), gP, gQ; attrs threads,
 * want_grad, act (0 linear, 1 ReLU, 2 softmax, 3 masked softmax). */
XLA_FFI_Error *attn_ffi(XLA_FFI_CallFrame *cf) {
    if (ffi_metadata(cf)) return NULL;
    XLA_FFI_Buffer *const *a = ARGS(cf), *const *r = RETS(cf);
    static const int core[4] = {4, 4, 3, 1}, rcore[3] = {0, 4, 4};
    const char *what = "attention kernel";
    if (cf->args.size != 4 || cf->rets.size != 3 || a[0]->rank < 4 || a[2]->rank < 3 || a[3]->rank < 1)
        return ffi_invalid(cf, what, "4 arguments, 3 results");
    const XLA_FFI_DataType t = a[2]->dtype;
    const int64_t L = LAST(a[0], 4), H = LAST(a[0], 3), D = LAST(a[0], 1), N = LAST(a[2], 1), B = LAST(a[3], 1);
    const int64_t par[4] = {L, H, D, D}, Zd[3] = {B, D, N}, yd[1] = {B};
    if ((t != XLA_FFI_DataType_F32 && t != XLA_FFI_DataType_F64) || !ffi_shaped(a[0], t, 4, par)
        || !ffi_shaped(a[1], t, 4, par) || !ffi_shaped(a[2], t, 3, Zd) || !ffi_shaped(a[3], t, 1, yd)
        || !ffi_shaped(r[1], t, 4, par) || !ffi_shaped(r[2], t, 4, par) || r[0]->dtype != t)
        return ffi_invalid(cf, what, "P, Q (..., L, H, D, D), Z (..., B, D, n + 1), y (..., B), all float32 or all "
                                     "float64");
    long ns, *ix;
    const char *bad = ffi_seeds(a, core, 4, r, rcore, 3, &ns, &ix);
    if (bad) return ffi_invalid(cf, what, bad);
    const int act = (int)ffi_int(cf, "act"), g = (int)ffi_int(cf, "want_grad"), th = (int)ffi_int(cf, "threads");
    const int rc = t == XLA_FFI_DataType_F64
        ? attn_f64(ns, L, H, D, N, B, act, ix, a[0]->data, a[1]->data, a[2]->data, a[3]->data, r[0]->data,
                   r[1]->data, r[2]->data, g, th)
        : attn_f32(ns, L, H, D, N, B, act, ix, a[0]->data, a[1]->data, a[2]->data, a[3]->data, r[0]->data,
                   r[1]->data, r[2]->data, g, th);
    free(ix);
    return rc ? ffi_failed(cf, what, rc, "D = d + 1 must be the library's, at most 16; n >= 1") : NULL;
}

/* Sampler: args Ssq, Wsq (…, d, d), sigma (…), key (…, 2) uint32; rets S (…, B, D, D), zq (…, B, D), yq (…, B),
 * or with attr columns = 1: Z (…, B, D, n + 1), yq (…, B); attrs threads, n, columns. */
XLA_FFI_Error *sample_ffi(XLA_FFI_CallFrame *cf) {
    if (ffi_metadata(cf)) return NULL;
    XLA_FFI_Buffer *const *a = ARGS(cf), *const *r = RETS(cf);
    const int cols = (int)ffi_int(cf, "columns"), n = (int)ffi_int(cf, "n"), th = (int)ffi_int(cf, "threads");
    static const int core[4] = {2, 2, 0, 1}, rmom[3] = {3, 2, 1}, rcol[2] = {3, 1};
    const char *what = "prompt sampler";
    if (cf->args.size != 4 || cf->rets.size != (cols ? 2 : 3) || a[0]->rank < 2 || r[cols ? 1 : 2]->rank < 1)
        return ffi_invalid(cf, what, "4 arguments, 3 results (2 with columns)");
    const XLA_FFI_DataType t = a[0]->dtype;
    XLA_FFI_Buffer *yq = r[cols ? 1 : 2];
    const int64_t d = LAST(a[0], 1), B = LAST(yq, 1), D = d + 1;
    const int64_t sq[2] = {d, d}, key[1] = {2}, Sd[3] = {B, D, cols ? n + 1 : D}, zd[2] = {B, D}, yd[1] = {B};
    if ((t != XLA_FFI_DataType_F32 && t != XLA_FFI_DataType_F64) || !ffi_shaped(a[0], t, 2, sq)
        || !ffi_shaped(a[1], t, 2, sq) || !ffi_shaped(a[2], t, 0, NULL)
        || !ffi_shaped(a[3], XLA_FFI_DataType_U32, 1, key)
        || !ffi_shaped(r[0], t, 3, Sd) || !ffi_shaped(yq, t, 1, yd) || (!cols && !ffi_shaped(r[1], t, 2, zd)))
        return ffi_invalid(cf, what, "Ssq, Wsq (..., d, d), sigma (...), key (..., 2) uint32, float32 or float64");
    long ns, *ix;
    const char *bad = ffi_seeds(a, core, 4, r, cols ? rcol : rmom, cols ? 2 : 3, &ns, &ix);
    if (bad) return ffi_invalid(cf, what, bad);
    void *zq = cols ? NULL : r[1]->data;
    const int rc = t == XLA_FFI_DataType_F64
        ? sample_f64(ns, d, n, B, ix, a[0]->data, a[1]->data, a[2]->data, a[3]->data, r[0]->data, zq, yq->data, cols,
                     th)
        : sample_f32(ns, d, n, B, ix, a[0]->data, a[1]->data, a[2]->data, a[3]->data, r[0]->data, zq, yq->data, cols,
                     th);
    free(ix);
    return rc ? ffi_failed(cf, what, rc, "d must be the library's D - 1, at most 15") : NULL;
}

#else /* ============================ typed part (REAL, VEC, FN) ============================ */
#define VL ((int)(VBYTES / sizeof(REAL)))
#define NC (BLK / VL)

/* C (+)= alpha op(A) op(B) for every prompt of a block, op = transpose when ta / tb; upper: j >= i only.
 * Row i of op(A) stays in registers while row i of C is formed. C must not overlap A or B. */
INLINE void FN(mm)(const int D, const REAL *restrict A, const int ta, const REAL *restrict B, const int tb,
                   REAL *restrict C, const int acc, const REAL alpha, const int upper) {
    for (int c = 0; c < NC; c++)
        for (int i = 0; i < D; i++) {
            VEC a[DMAX];
            for (int k = 0; k < D; k++) a[k] = V(A, ta ? IDX(k, i) : IDX(i, k), c);
            for (int j = upper ? i : 0; j < D; j++) {
                VEC s = a[0] * V(B, tb ? IDX(j, 0) : IDX(0, j), c);
                for (int k = 1; k < D; k++) s += a[k] * V(B, tb ? IDX(j, k) : IDX(k, j), c);
                if (acc) V(C, IDX(i, j), c) += alpha * s;
                else V(C, IDX(i, j), c) = alpha * s;
            }
        }
}

/* C (+)= A op(W) with W one D x D matrix shared by the block (a parameter), broadcast entry by entry.
 * (Skipping W's zeros with a branch made the whole kernel 1.6x slower.) */
INLINE void FN(mm_rs)(const int D, const REAL *restrict A, const REAL *restrict W, const int tw, REAL *restrict C,
                      const int acc) {
    for (int c = 0; c < NC; c++)
        for (int i = 0; i < D; i++) {
            VEC a[DMAX];
            for (int k = 0; k < D; k++) a[k] = V(A, IDX(i, k), c);
            for (int j = 0; j < D; j++) {
                VEC s = acc ? V(C, IDX(i, j), c) : (VEC){0};
                for (int k = 0; k < D; k++) {
                    s += a[k] * (tw ? W[IDX(j, k)] : W[IDX(k, j)]);
                }
                V(C, IDX(i, j), c) = s;
            }
        }
}

/* C (+)= op(W) B with W shared by the block; column j of B stays in registers. */
INLINE void FN(mm_ls)(const int D, const REAL *restrict W, const int tw, const REAL *restrict B, REAL *restrict C,
                      const int acc) {
    for (int c = 0; c < NC; c++)
        for (int j = 0; j < D; j++) {
            VEC b[DMAX];
            for (int k = 0; k < D; k++) b[k] = V(B, IDX(k, j), c);
            for (int i = 0; i < D; i++) {
                VEC s = acc ? V(C, IDX(i, j), c) : (VEC){0};
                for (int k = 0; k < D; k++) {
                    s += (tw ? W[IDX(k, i)] : W[IDX(i, k)]) * b[k];
                }
                V(C, IDX(i, j), c) = s;
            }
        }
}

/* out_ij += sum over the block's prompts of (A B)_ij, for the entries ij that mask marks as trained. */
INLINE void FN(mm_sum)(const int D, const REAL *restrict A, const REAL *restrict B, const unsigned char *mask,
                       REAL *restrict out) {
    VEC g[DMAX * DMAX];
    for (int ij = 0; ij < D * D; ij++) g[ij] = (VEC){0};
    for (int c = 0; c < NC; c++)
        for (int i = 0; i < D; i++) {
            VEC a[DMAX];
            for (int k = 0; k < D; k++) a[k] = V(A, IDX(i, k), c);
            for (int j = 0; j < D; j++) {
                if (!mask[IDX(i, j)]) continue; /* not trained */
                VEC s = g[IDX(i, j)];
                for (int k = 0; k < D; k++) s += a[k] * V(B, IDX(k, j), c);
                g[IDX(i, j)] = s;
            }
        }
    for (int ij = 0; ij < D * D; ij++) {
        if (!mask[ij]) continue;
        REAL s = 0;
        for (int t = 0; t < VL; t++) s += g[ij][t];
        out[ij] += s;
    }
}

/* Mirror the upper triangle of a block of symmetric matrices into the lower one. */
INLINE void FN(mirror)(const int D, REAL *X) {
    for (int i = 0; i < D; i++)
        for (int j = 0; j < i; j++)
            memcpy(X + (size_t)IDX(i, j) * BLK, X + (size_t)IDX(j, i) * BLK, sizeof(REAL) * BLK);
}

/* Workspace of one thread: the forward tape (S_l, z_l, T_l, T_l S_l) and the backward scratch. */
typedef struct {
    REAL *Ss, *zs, *Ts, *TSs, *SQ, *Sb, *Sn, *Tb, *W, *zb, *zn;
} FN(tape);

/* Forward and (when want_grad) backward of the nb prompts (S_0, z_0, y) of one block;
 * rr receives the residuals, the gradient sums go to aP and aQ. */
INLINE void FN(block)(const int D, const int L, const int H, const long B, const int nb, const REAL *restrict P,
                      const REAL *restrict Q, const REAL *restrict S0, const REAL *restrict zq,
                      const REAL *restrict y, const unsigned char *mP, const unsigned char *mQ, const int want_grad,
                      FN(tape) *tp, REAL *rr, double *total, REAL *restrict aP, REAL *restrict aQ) {
    const int DD = D * D;
    REAL *SQ = tp->SQ, *Sb = tp->Sb, *Sn = tp->Sn, *Tb = tp->Tb, *W = tp->W, *zb = tp->zb, *zn = tp->zn;
    if (nb < BLK) { /* pad with zeros */
        memset(tp->Ss, 0, sizeof(REAL) * DD * BLK);
        memset(tp->zs, 0, sizeof(REAL) * D * BLK);
    }
    for (int t = 0; t < nb; t++) { /* load, batch innermost */
        for (int ij = 0; ij < DD; ij++) tp->Ss[ij * BLK + t] = S0[t * DD + ij];
        for (int i = 0; i < D; i++) tp->zs[i * BLK + t] = zq[t * D + i];
    }
    /* ---------------- forward ---------------- */
    for (int l = 0; l < L; l++) {
        const REAL *S = tp->Ss + (size_t)l * DD * BLK, *z = tp->zs + (size_t)l * D * BLK;
        REAL *T = tp->Ts + (size_t)l * DD * BLK, *z1 = tp->zs + (size_t)(l + 1) * D * BLK;
        for (int ij = 0; ij < DD; ij++) {
            const REAL e = (ij / D == ij % D) ? 1 : 0;
            for (int t = 0; t < BLK; t++) T[ij * BLK + t] = e;
        }
        for (int h = 0; h < H; h++) {
            const size_t off = ((size_t)l * H + h) * DD;
            FN(mm_rs)(D, S, Q + off, 0, SQ, 0);  /* S Q_h */
            FN(mm_ls)(D, P + off, 0, SQ, T, 1);  /* T += P_h S Q_h */
        }
        for (int c = 0; c < NC; c++) /* z_{l+1} = T z_l */
            for (int i = 0; i < D; i++) {
                VEC s = V(T, IDX(i, 0), c) * V(z, 0, c);
                for (int k = 1; k < D; k++) s += V(T, IDX(i, k), c) * V(z, k, c);
                V(z1, i, c) = s;
            }
        if (l == L - 1) break; /* S_L is never read */
        REAL *TS = tp->TSs + (size_t)l * DD * BLK, *S1 = tp->Ss + (size_t)(l + 1) * DD * BLK;
        FN(mm)(D, T, 0, S, 0, TS, 0, 1, 0);  /* T S, kept for the backward */
        FN(mm)(D, TS, 0, T, 1, S1, 0, 1, 1); /* S_{l+1} = T S T^T: upper triangle, then mirror */
        FN(mirror)(D, S1);
    }
    const REAL *zL = tp->zs + (size_t)L * D * BLK;
    for (int t = 0; t < BLK; t++) {
        rr[t] = t < nb ? zL[(D - 1) * BLK + t] + y[t] : 0;
        *total += (double)rr[t] * rr[t];
    }
    if (!want_grad) return;
    /* ---------------- backward ---------------- */
    memset(zb, 0, sizeof(REAL) * D * BLK);
    for (int t = 0; t < BLK; t++) zb[(D - 1) * BLK + t] = 2 * rr[t] / (REAL)B;
    for (int l = L - 1; l >= 0; l--) {
        const REAL *S = tp->Ss + (size_t)l * DD * BLK, *T = tp->Ts + (size_t)l * DD * BLK;
        const REAL *z = tp->zs + (size_t)l * D * BLK;
        for (int c = 0; c < NC; c++) /* Tbar = zbar' z^T ... */
            for (int i = 0; i < D; i++)
                for (int j = 0; j < D; j++) V(Tb, IDX(i, j), c) = V(zb, i, c) * V(z, j, c);
        if (l < L - 1) {
            FN(mm)(D, Sb, 0, tp->TSs + (size_t)l * DD * BLK, 0, Tb, 1, 2, 0); /* + 2 Sbar' T S (Sbar' symm.) */
            FN(mm)(D, Sb, 0, T, 0, W, 0, 1, 0); /* Sn = T^T (Sbar' T), symmetric */
            FN(mm)(D, T, 1, W, 0, Sn, 0, 1, 1);
            FN(mirror)(D, Sn);
        } else {
            memset(Sn, 0, sizeof(REAL) * DD * BLK);
        }
        for (int c = 0; c < NC; c++) /* zbar = T^T zbar' */
            for (int i = 0; i < D; i++) {
                VEC s = V(T, IDX(0, i), c) * V(zb, 0, c);
                for (int k = 1; k < D; k++) s += V(T, IDX(k, i), c) * V(zb, k, c);
                V(zn, i, c) = s;
            }
        memcpy(zb, zn, sizeof(REAL) * D * BLK);
        for (int h = 0; h < H; h++) {
            const size_t off = ((size_t)l * H + h) * DD;
            FN(mm_rs)(D, Tb, Q + off, 1, W, 0);        /* W = Tbar Q_h^T */
            FN(mm_sum)(D, W, S, mP, aP + off);         /* Pbar_h += W S */
            FN(mm_ls)(D, P + off, 1, W, Sn, 1);        /* Sn += P_h^T W */
            FN(mm_rs)(D, S, P + off, 1, SQ, 0);        /* S P_h^T */
            FN(mm_sum)(D, SQ, Tb, mQ, aQ + off);       /* Qbar_h += S P_h^T Tbar */
        }
        /* only sym(Sbar) reaches the loss: keep Sbar symmetric (T^T Sbar T is; P^T Tbar Q^T is not) */
        for (int i = 0; i < D; i++)
            for (int j = i; j < D; j++)
                for (int c = 0; c < NC; c++) {
                    const VEC s = (V(Sn, IDX(i, j), c) + V(Sn, IDX(j, i), c)) * (REAL)0.5;
                    V(Sb, IDX(i, j), c) = s;
                    V(Sb, IDX(j, i), c) = s;
                }
    }
}

int FN(lsa)(int NS, int L, int H, int D, long B, const long *ix, const REAL *Pall, const REAL *Qall,
            const REAL *S0all, const REAL *zqall, const REAL *yall, REAL *loss_out, REAL *gP, REAL *gQ,
            const unsigned char *mP, const unsigned char *mQ, int want_grad, int nthreads) {
    if (D != DCONST) return 1;
    const long nblk = (B + BLK - 1) / BLK;
    const int DD = D * D;
    const long npar = (long)L * H * DD;
    if (nthreads < 1) nthreads = 1;
    /* per thread: parameter-gradient accumulators and loss totals of every seed */
    REAL *acc = (REAL *)calloc((size_t)nthreads * NS * 2 * npar, sizeof(REAL));
    double *tot = (double *)calloc((size_t)nthreads * NS, sizeof(double));
    if (!acc || !tot) { free(acc); free(tot); return 2; }
    int failed = 0;
#pragma omp parallel num_threads(nthreads)
    {
        int tid = 0;
        TID_ASSIGN(tid);
        const size_t m = sizeof(REAL) * DD * BLK, v = sizeof(REAL) * D * BLK;
        FN(tape) tp = {scratch((L + 1) * m), scratch((L + 1) * v), scratch(L * m), scratch(L * m), scratch(m),
                       scratch(m), scratch(m), scratch(m), scratch(m), scratch(v), scratch(v)};
        const int ok = tp.Ss && tp.zs && tp.Ts && tp.TSs && tp.SQ && tp.Sb && tp.Sn && tp.Tb && tp.W && tp.zb && tp.zn;
        if (!ok) {
#pragma omp atomic write
            failed = 1;
        }
        REAL rr[BLK];
#pragma omp for schedule(static)
        for (long it = 0; it < NS * nblk; it++) {
            if (!ok) continue;
            const long sd = it / nblk, b0 = (it % nblk) * BLK;
            const int nb = (int)((B - b0) < BLK ? (B - b0) : BLK);
            const long *i = ix + 5 * sd; /* seed sd's own P, Q, S, zq, y (see ffi_seeds) */
            const REAL *P = Pall + i[0] * npar, *Q = Qall + i[1] * npar, *S0 = S0all + (i[2] * B + b0) * DD;
            const REAL *zq = zqall + (i[3] * B + b0) * D, *y = yall + i[4] * B + b0;
            REAL *aP = acc + ((size_t)tid * NS + sd) * 2 * npar, *aQ = aP + npar;
            double total = 0.0;
            FN(block)(DCONST, L, H, B, nb, P, Q, S0, zq, y, mP, mQ, want_grad, &tp, rr, &total, aP, aQ);
            tot[(size_t)tid * NS + sd] += total;
        }
        free(tp.Ss); free(tp.zs); free(tp.Ts); free(tp.TSs); free(tp.SQ); free(tp.Sb); free(tp.Sn);
        free(tp.Tb); free(tp.W); free(tp.zb); free(tp.zn);
    }
    if (failed) { free(acc); free(tot); return 2; }
    for (int sd = 0; sd < NS; sd++) {
        double total = 0.0;
        for (int th = 0; th < nthreads; th++) total += tot[(size_t)th * NS + sd];
        loss_out[sd] = (REAL)(total / (double)B);
        if (!want_grad) continue;
        REAL *oP = gP + sd * npar, *oQ = gQ + sd * npar;
        memset(oP, 0, sizeof(REAL) * npar);
        memset(oQ, 0, sizeof(REAL) * npar);
        for (int th = 0; th < nthreads; th++) {
            const REAL *a = acc + ((size_t)th * NS + sd) * 2 * npar;
            for (long p = 0; p < npar; p++) { oP[p] += a[p]; oQ[p] += a[npar + p]; }
        }
    }
    free(acc);
    free(tot);
    return 0;
}
/* Fresh prompts straight into their moments (see the shared part). Per vector of VL prompts the 21 (for
 * D = 6) entries of the upper triangle of S accumulate in registers over the n context columns.
 * cols = 1: the same prompts as prompt matrices instead, Sall receiving Z (B, D, n + 1) with the query label
 * zeroed (zqall unused), for the column form. */
int FN(sample)(int NS, int d, int n, long B, const long *ix, const REAL *Ssqall, const REAL *Wsqall,
               const REAL *sigmas, const uint32_t *keys, REAL *Sall, REAL *zqall, REAL *yqall, int cols, int nthreads) {
    const int D = DCONST;
    if (d + 1 != D || n < 1) return 1;
    const long NG = d + (long)(n + 1) * D; /* normals per prompt: w, then (x_i, e_i) */
    const long ngroups = (NG + 3) / 4;
    const long nblk = (B + BLK - 1) / BLK;
    if (nthreads < 1) nthreads = 1;
    int failed = 0;
#pragma omp parallel num_threads(nthreads)
    {
        REAL *G = (REAL *)scratch(sizeof(REAL) * (size_t)ngroups * 4 * BLK);
        if (!G) {
#pragma omp atomic write
            failed = 1;
        }
        uint32_t u[4][BLK];
#pragma omp for schedule(static)
        for (long it = 0; it < NS * nblk; it++) {
            if (!G) continue;
            const long sd = it / nblk, b0 = (it % nblk) * BLK;
            const int nb = (int)((B - b0) < BLK ? (B - b0) : BLK);
            const long *i = ix + 4 * sd; /* seed sd's own Ssq, Wsq, sigma, key */
            const REAL *Ssq = Ssqall + i[0] * d * d, *Wsq = Wsqall + i[1] * d * d, sigma = sigmas[i[2]];
            const uint32_t k0 = keys[2 * i[3]], k1 = keys[2 * i[3] + 1];
            REAL *S = Sall + (sd * B + b0) * D * (cols ? n + 1 : D), *yq = yqall + sd * B + b0;
            REAL *zq = cols ? NULL : zqall + (sd * B + b0) * D;
            for (long j = 0; j < ngroups; j++) {
                philox_block((uint32_t)j, (uint64_t)b0, k0, k1, u);
                FN(boxmuller)(u[0], u[1], G + (j * 4) * BLK, G + (j * 4 + 1) * BLK);
                FN(boxmuller)(u[2], u[3], G + (j * 4 + 2) * BLK, G + (j * 4 + 3) * BLK);
            }
            for (int c = 0; c < NC; c++) {
                VEC wv[DMAX], x[DMAX], acc[DMAX * (DMAX + 1) / 2];
                for (int p = 0; p < d; p++) { /* w = Wsq g */
                    VEC s = (VEC){0};
                    for (int q = 0; q < d; q++) s += Wsq[p * d + q] * V(G, q, c);
                    wv[p] = s;
                }
                for (int k = 0; k < D * (D + 1) / 2; k++) acc[k] = (VEC){0};
                for (int ex = 0; ex <= n; ex++) {
                    const REAL *g = G + (d + (long)ex * D) * BLK;
                    VEC y = sigma * V(g, d, c);
                    for (int p = 0; p < d; p++) { /* x = Ssq g, y = <w, x> + sigma e */
                        VEC s = (VEC){0};
                        for (int q = 0; q < d; q++) s += Ssq[p * d + q] * V(g, q, c);
                        x[p] = s;
                        y += wv[p] * s;
                    }
                    x[d] = y;
                    if (__builtin_expect(cols, 0)) {
                        for (int t = 0; t < VL && c * VL + t < nb; t++) {
                            const long b = c * VL + t;
                            REAL *Zb = S + b * (long)D * (n + 1); /* S is the block's Z here */
                            for (int p = 0; p < d; p++) Zb[(long)p * (n + 1) + ex] = x[p][t];
                            Zb[(long)d * (n + 1) + ex] = ex < n ? x[d][t] : 0;
                            if (ex == n) yq[b] = x[d][t];
                        }
                    } else if (ex < n) {
                        int k = 0;
                        for (int p = 0; p < D; p++)
                            for (int q = p; q < D; q++) acc[k++] += x[p] * x[q];
                    } else {
                        for (int t = 0; t < VL && c * VL + t < nb; t++) {
                            const long b = c * VL + t;
                            for (int p = 0; p < d; p++) zq[b * D + p] = x[p][t];
                            zq[b * D + d] = 0;
                            yq[b] = x[d][t];
                        }
                    }
                }
                for (int t = 0; t < VL && c * VL + t < nb && !cols; t++) {
                    REAL *Sb = S + (c * VL + t) * D * D;
                    int k = 0;
                    for (int p = 0; p < D; p++)
                        for (int q = p; q < D; q++, k++) {
                            const REAL v = acc[k][t] / (REAL)n;
                            Sb[p * D + q] = v;
                            Sb[q * D + p] = v;
                        }
                }
            }
        }
        free(G);
    }
    return failed ? 2 : 0;
}

/* ------------------------------------------------------------------------------------------------
 * Column form with an activation: the official code's attention(P, Q, Z, activation), per prompt
 *   s_ij = z_i^T Q_h z_j,   w_.j = sigma(s_.j) over the keys i,
 *   z_j <- z_j + (1/n) sum_h sum_{i<n} P_h z_i w_ij      (the query key i = n is masked, M)
 * act: 0 linear, 1 ReLU, 2 softmax over all N = n + 1 keys (the query's own score included, as the official
 * code), 3 softmax over the n context keys. The last layer forms the query column only (j0 = N - 1).
 * One work item is one vector of VL prompts and every array holds one VEC per entry (Z: D x N entry-major,
 * z_i = column i; W: column-major, W[j * N + i] = w_ij), so every operation is a lane-parallel FMA.
 * ---------------------------------------------------------------------------------------------- */

/* sigma over the R keys of one column w (in place): lane-wise max-shifted softmax, or ReLU */
INLINE void FN(activate)(const int R, const int act, VEC *w) {
    REAL *f = (REAL *)w;
    if (act == 1) {
        for (int q = 0; q < R * VL; q++) f[q] = f[q] > 0 ? f[q] : 0;
    } else if (act >= 2) {
        VEC m = w[0], s = (VEC){0};
        for (int i = 1; i < R; i++)
            for (int t = 0; t < VL; t++) m[t] = m[t] > w[i][t] ? m[t] : w[i][t];
        for (int i = 0; i < R; i++) w[i] -= m;
        for (int q = 0; q < R * VL; q++) f[q] = EXP(f[q]);
        for (int i = 0; i < R; i++) s += w[i];
        const VEC r = (REAL)1 / s;
        for (int i = 0; i < R; i++) w[i] *= r;
    }
}

/* dL/ds from dL/dw (rows i < n; the masked query row has none), in place in dw */
INLINE void FN(dactivate)(const int n, const int R, const int act, const VEC *w, VEC *dw) {
    if (act == 1) {
        const REAL *fw = (const REAL *)w;
        REAL *fd = (REAL *)dw;
        for (int q = 0; q < n * VL; q++) fd[q] = fw[q] > 0 ? fd[q] : 0;
    } else if (act >= 2) {
        VEC t = (VEC){0};
        for (int i = 0; i < n; i++) t += w[i] * dw[i];
        for (int i = 0; i < n; i++) dw[i] = w[i] * (dw[i] - t);
        if (R > n) dw[n] = -w[n] * t;
    }
}

/* The values v_i = P z_i of the n context columns: Vt[:, i] (D x N entry-major, as Z). */
INLINE void FN(values)(const int D, const int N, const REAL *P, const VEC *restrict Z, VEC *restrict Vt) {
    for (int i = 0; i < N - 1; i++) {
        VEC z[DMAX];
        for (int k = 0; k < D; k++) z[k] = Z[k * N + i];
        for (int a = 0; a < D; a++) {
            VEC s = P[a * D] * z[0];
            for (int b = 1; b < D; b++) s += P[a * D + b] * z[b];
            Vt[a * N + i] = s;
        }
    }
}

/* Layer forward Z -> Zo (D x N), columns j >= j0; u_j = Q_h z_j and sigma's output on the tape (U, W). */
INLINE void FN(cfwd)(const int D, const int N, const int H, const int act, const int j0, const REAL *P,
                     const REAL *Q, const VEC *restrict Z, VEC *restrict Zo, VEC *restrict U, VEC *restrict W,
                     VEC *restrict Vt) {
    const int n = N - 1, R = act == 2 ? N : n;
    const REAL inv = (REAL)1 / (REAL)n;
    memcpy(Zo, Z, sizeof(VEC) * D * N);
    for (int h = 0; h < H; h++) {
        const REAL *Ph = P + h * D * D, *Qh = Q + h * D * D;
        VEC *Uh = U + (size_t)h * D * N, *Wh = W + (size_t)h * N * N;
        for (int j = j0; j < N; j++) { /* u_j = Q z_j, then s_ij and sigma over i */
            VEC z[DMAX], u[DMAX];
            for (int k = 0; k < D; k++) z[k] = Z[k * N + j];
            for (int a = 0; a < D; a++) {
                VEC s = Qh[a * D] * z[0];
                for (int b = 1; b < D; b++) s += Qh[a * D + b] * z[b];
                u[a] = s;
                Uh[a * N + j] = s;
            }
            VEC *w = Wh + (size_t)j * N;
            for (int i = 0; i < R; i++) {
                VEC s = Z[i] * u[0];
                for (int k = 1; k < D; k++) s += Z[k * N + i] * u[k];
                w[i] = s;
            }
            FN(activate)(R, act, w);
        }
        FN(values)(D, N, Ph, Z, Vt); /* v_i = P z_i */
        for (int j = j0; j < N; j++) { /* z_j += (1/n) sum_{i<n} v_i w_ij */
            const VEC *w = Wh + (size_t)j * N;
            VEC acc[DMAX];
            for (int k = 0; k < D; k++) acc[k] = (VEC){0};
            for (int i = 0; i < n; i++) {
                const VEC wi = w[i];
                for (int k = 0; k < D; k++) acc[k] += Vt[k * N + i] * wi;
            }
            for (int k = 0; k < D; k++) Zo[k * N + j] += inv * acc[k];
        }
    }
}

/* Layer backward: G = dL/dZo (columns >= j0 nonzero where j0 > 0) -> Gn = dL/dZ; dL/dP_h, dL/dQ_h summed into
 * gP, gQ (one VEC per entry). */
INLINE void FN(cbwd)(const int D, const int N, const int H, const int act, const int j0, const REAL *P,
                     const REAL *Q, const VEC *restrict Z, const VEC *restrict U, const VEC *restrict W,
                     VEC *restrict Vt, const VEC *restrict G, VEC *restrict Gn, VEC *restrict dW, VEC *gP, VEC *gQ) {
    const int n = N - 1, R = act == 2 ? N : n;
    const REAL inv = (REAL)1 / (REAL)n;
    memcpy(Gn, G, sizeof(VEC) * D * N);
    for (int h = 0; h < H; h++) {
        const REAL *Ph = P + h * D * D, *Qh = Q + h * D * D;
        const VEC *Uh = U + (size_t)h * D * N, *Wh = W + (size_t)h * N * N;
        VEC *gPh = gP + h * D * D, *gQh = gQ + h * D * D;
        FN(values)(D, N, Ph, Z, Vt); /* v_i = P z_i (recomputed) */
        for (int i = 0; i < n; i++) { /* dv_i = (1/n) sum_j w_ij g_j, dw_ij = (1/n) v_i^T g_j */
            VEC v[DMAX], dv[DMAX], z[DMAX];
            for (int k = 0; k < D; k++) { v[k] = Vt[k * N + i]; dv[k] = (VEC){0}; }
            for (int j = j0; j < N; j++) {
                const VEC wij = Wh[(size_t)j * N + i];
                VEC dw = (VEC){0};
                for (int k = 0; k < D; k++) {
                    const VEC g = G[k * N + j];
                    dv[k] += wij * g;
                    dw += v[k] * g;
                }
                dW[(size_t)j * N + i] = inv * dw;
            }
            for (int k = 0; k < D; k++) { dv[k] *= inv; z[k] = Z[k * N + i]; }
            for (int a = 0; a < D; a++) /* dP += dv z_i^T */
                for (int b = 0; b < D; b++) gPh[a * D + b] += dv[a] * z[b];
            for (int b = 0; b < D; b++) { /* g_i += P^T dv */
                VEC s = Ph[b] * dv[0];
                for (int a = 1; a < D; a++) s += Ph[a * D + b] * dv[a];
                Gn[b * N + i] += s;
            }
        }
        for (int j = j0; j < N; j++) FN(dactivate)(n, R, act, Wh + (size_t)j * N, dW + (size_t)j * N);
        for (int i = 0; i < R; i++) { /* g_i += sum_j ds_ij u_j */
            VEC acc[DMAX];
            for (int k = 0; k < D; k++) acc[k] = (VEC){0};
            for (int j = j0; j < N; j++) {
                const VEC ds = dW[(size_t)j * N + i];
                for (int k = 0; k < D; k++) acc[k] += ds * Uh[k * N + j];
            }
            for (int k = 0; k < D; k++) Gn[k * N + i] += acc[k];
        }
        for (int j = j0; j < N; j++) { /* du_j = sum_i ds_ij z_i; dQ += du z_j^T; g_j += Q^T du */
            VEC du[DMAX], z[DMAX];
            for (int k = 0; k < D; k++) du[k] = (VEC){0};
            const VEC *ds = dW + (size_t)j * N;
            for (int i = 0; i < R; i++)
                for (int k = 0; k < D; k++) du[k] += ds[i] * Z[k * N + i];
            for (int k = 0; k < D; k++) z[k] = Z[k * N + j];
            for (int a = 0; a < D; a++)
                for (int b = 0; b < D; b++) gQh[a * D + b] += du[a] * z[b];
            for (int b = 0; b < D; b++) {
                VEC s = Qh[b] * du[0];
                for (int a = 1; a < D; a++) s += Qh[a * D + b] * du[a];
                Gn[b * N + j] += s;
            }
        }
    }
}

/* Loss (1/B) sum_b (Z_L[D-1, N-1] + y_b)^2 of NS seeds and its gradient w.r.t. every P, Q (NS, L, H, D, D);
 * Z: (NS, B, D, N) prompt matrices, y: (NS, B). */
int FN(attn)(int NS, int L, int H, int D, int N, long B, int act, const long *ix, const REAL *Pall,
             const REAL *Qall, const REAL *Zall, const REAL *yall, REAL *loss_out, REAL *gP, REAL *gQ, int want_grad,
             int nthreads) {
    if (D != DCONST || N < 2 || act < 0 || act > 3) return 1;
    const long ngrp = (B + VL - 1) / VL, npar = (long)L * H * D * D;
    const int DN = D * N, NN = N * N;
    if (nthreads < 1) nthreads = 1;
    VEC *acc = (VEC *)scratch(sizeof(VEC) * (size_t)nthreads * NS * 2 * npar);
    double *tot = (double *)calloc((size_t)nthreads * NS, sizeof(double));
    if (!acc || !tot) { free(acc); free(tot); return 2; }
    memset(acc, 0, sizeof(VEC) * (size_t)nthreads * NS * 2 * npar);
    int failed = 0;
#pragma omp parallel num_threads(nthreads)
    {
        int tid = 0;
        TID_ASSIGN(tid);
        VEC *Zs = scratch(sizeof(VEC) * (size_t)(L + 1) * DN);
        VEC *U = scratch(sizeof(VEC) * (size_t)L * H * DN), *W = scratch(sizeof(VEC) * (size_t)L * H * NN);
        VEC *Vt = scratch(sizeof(VEC) * DN), *G = scratch(sizeof(VEC) * DN);
        VEC *Gn = scratch(sizeof(VEC) * DN), *dW = scratch(sizeof(VEC) * NN);
        const int ok = Zs && U && W && Vt && G && Gn && dW;
        if (!ok) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(static)
        for (long it = 0; it < NS * ngrp; it++) {
            if (!ok) continue;
            const long sd = it / ngrp, b0 = (it % ngrp) * VL;
            const int nb = (int)((B - b0) < VL ? (B - b0) : VL);
            const long *i = ix + 4 * sd; /* seed sd's own P, Q, Z, y */
            const REAL *P = Pall + i[0] * npar, *Q = Qall + i[1] * npar, *Z0 = Zall + (i[2] * B + b0) * DN;
            VEC yv = (VEC){0};
            for (int t = 0; t < VL; t++) {
                for (int e = 0; e < DN; e++) Zs[e][t] = t < nb ? Z0[(size_t)t * DN + e] : 0;
                yv[t] = t < nb ? yall[i[3] * B + b0 + t] : 0;
            }
            for (int l = 0; l < L; l++)
                FN(cfwd)(DCONST, N, H, act, l == L - 1 ? N - 1 : 0, P + l * H * D * D, Q + l * H * D * D,
                         Zs + (size_t)l * DN, Zs + (size_t)(l + 1) * DN, U + (size_t)l * H * DN,
                         W + (size_t)l * H * NN, Vt);
            const VEC r = Zs[(size_t)L * DN + (D - 1) * N + N - 1] + yv;
            double total = 0.0;
            for (int t = 0; t < nb; t++) total += (double)r[t] * r[t];
            tot[(size_t)tid * NS + sd] += total;
            if (!want_grad) continue;
            VEC *aP = acc + ((size_t)tid * NS + sd) * 2 * npar, *aQ = aP + npar;
            memset(G, 0, sizeof(VEC) * DN);
            G[(D - 1) * N + N - 1] = ((REAL)2 / (REAL)B) * r;
            for (int l = L - 1; l >= 0; l--) {
                FN(cbwd)(DCONST, N, H, act, l == L - 1 ? N - 1 : 0, P + l * H * D * D, Q + l * H * D * D,
                         Zs + (size_t)l * DN, U + (size_t)l * H * DN, W + (size_t)l * H * NN, Vt, G, Gn, dW,
                         aP + l * H * D * D, aQ + l * H * D * D);
                VEC *sw = G; G = Gn; Gn = sw;
            }
        }
        free(Zs); free(U); free(W); free(Vt); free(G); free(Gn); free(dW);
    }
    if (failed) { free(acc); free(tot); return 2; }
    for (int sd = 0; sd < NS; sd++) {
        double total = 0.0;
        for (int th = 0; th < nthreads; th++) total += tot[(size_t)th * NS + sd];
        loss_out[sd] = (REAL)(total / (double)B);
        if (!want_grad) continue;
        for (long p = 0; p < npar; p++) {
            REAL sP = 0, sQ = 0;
            for (int th = 0; th < nthreads; th++) {
                const VEC *a = acc + ((size_t)th * NS + sd) * 2 * npar;
                for (int t = 0; t < VL; t++) { sP += a[p][t]; sQ += a[npar + p][t]; }
            }
            gP[sd * npar + p] = sP;
            gQ[sd * npar + p] = sQ;
        }
    }
    free(acc);
    free(tot);
    return 0;
}

#undef VL
#undef NC
#endif
