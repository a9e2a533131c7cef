/* One pass over a contiguous float32 or float64 array: sum, sum of squares, min, max, nonzero count
 * and whether any value may be NaN or Inf, for hookwidgets' stats action (native.py compiles and
 * loads this file).
 *
 * The same statistics from torch take six reductions and a temporary (about 20x the time of one pass on
 * the small outputs of most layers), and stats hooks on every layer run them on every training step.
 *
 * Accuracy: float32 data is summed in 16 independent float lanes over blocks of 1024 elements (64 per
 * lane), and the blocks are added in double, so the error stays near float32 rounding at any length.
 * min/max skip NaN; the caller takes its exact path whenever a value may be NaN or Inf.
 */
#include <math.h>
#include <stdint.h>

#define LANES 16
#define BLOCK 1024

/* Compiled for AVX2 with FMA (x86-64-v3) and for the baseline; the loader picks one at load time
 * (GCC ifunc), so a cache shared between machines never runs an instruction the CPU lacks. */
#if defined(HW_CLONES)
#define HW_TARGETS __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define HW_TARGETS
#endif

/* out: sum, sum of squares, min, max (NaN skipped), nonzero count, 1 if there may be NaN or Inf */
#define HW_DEFINE_STATS(NAME, T, INF)                                                         \
    HW_TARGETS void NAME(const T *p, int64_t n, double *out) {                                \
        double sum = 0.0, squares = 0.0;                                                      \
        int64_t nonzero = 0;                                                                  \
        T lo = INF, hi = -INF;                                                                \
        for (int64_t start = 0; start < n; start += BLOCK) {                                  \
            int64_t end = n - start > BLOCK ? start + BLOCK : n;                              \
            T s[LANES] = {0}, q[LANES] = {0}, mn[LANES], mx[LANES];                           \
            int32_t nz[LANES] = {0};                                                       \
            for (int k = 0; k < LANES; k++) {                                                 \
                mn[k] = INF;                                                                  \
                mx[k] = -INF;                                                                 \
            }                                                                                 \
            int64_t i = start;                                                                \
            for (; i + LANES <= end; i += LANES) {                                            \
                for (int k = 0; k < LANES; k++) {                                             \
                    T v = p[i + k];                                                           \
                    s[k] += v;                                                                \
                    q[k] += v * v;                                                            \
                    mn[k] = v < mn[k] ? v : mn[k];                                            \
                    mx[k] = v > mx[k] ? v : mx[k];                                            \
                    nz[k] += v != 0;                                                          \
                }                                                                             \
            }                                                                                 \
            double block_sum = 0.0, block_squares = 0.0;                                      \
            for (; i < end; i++) {                                                            \
                T v = p[i];                                                                   \
                block_sum += v;                                                               \
                block_squares += (double)v * v;                                               \
                lo = v < lo ? v : lo;                                                         \
                hi = v > hi ? v : hi;                                                         \
                nonzero += v != 0;                                                            \
            }                                                                                 \
            for (int k = 0; k < LANES; k++) {                                                 \
                block_sum += s[k];                                                            \
                block_squares += q[k];                                                        \
                lo = mn[k] < lo ? mn[k] : lo;                                                 \
                hi = mx[k] > hi ? mx[k] : hi;                                                 \
                nonzero += nz[k];                                                             \
            }                                                                                 \
            sum += block_sum;                                                                 \
            squares += block_squares;                                                         \
        }                                                                                     \
        out[0] = sum;                                                                         \
        out[1] = squares;                                                                     \
        out[2] = (double)lo;                                                                  \
        out[3] = (double)hi;                                                                  \
        out[4] = (double)nonzero;                                                             \
        /* NaN reaches the sum and +-Inf the min or max; squares overflowing from finite values \
         * only send the caller to its exact path, which is correct too */                       \
        out[5] = !(isfinite(sum) && isfinite(squares) && isfinite(hi) && isfinite(lo));         \
    }

HW_DEFINE_STATS(hw_stats_f32, float, INFINITY)
HW_DEFINE_STATS(hw_stats_f64, double, (double)INFINITY)

/* The loader checks this before trusting the symbols: a stale library of another layout is rebuilt. */
int hw_stats_abi(void) { return 1; }
