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
 *
 * Threads: a large array is split into one run of whole blocks per thread, with OpenMP when it was
 * compiled in. torch loaded its own libgomp first, and the loader gives this library the same one, so
 * these threads are the ones torch's intra-op parallelism already keeps warm: a hook reading an
 * activation leaves no core idle, where one thread alone would leave torch's other threads waiting.
 */
#include <math.h>
#include <stdint.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define LANES 16
#define BLOCK 1024
/* Below this many elements the fork and join of a parallel region (a few microseconds) cost more than
 * they save. */
#define PARALLEL_MIN (64 * BLOCK)
#define MAX_THREADS 256

/* Compiled for AVX2 with FMA (x86-64-v3) and for the baseline; the loader picks one at load time
 * (GCC ifunc), so a cache shared between machines never runs an instruction the CPU lacks. */
#if defined(HW_CLONES)
#define HW_TARGETS __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define HW_TARGETS
#endif

/* The statistics of part of an array; parts are combined in order, so a result depends only on the
 * number of parts. */
typedef struct {
    double sum, squares, lo, hi;
    int64_t nonzero;
} Part;

/* Part of p from start to end (start a multiple of BLOCK) */
#define HW_DEFINE_RANGE(NAME, T, INF)                                                         \
    HW_TARGETS static void NAME(const T *p, int64_t start, int64_t stop, Part *part) {        \
        double sum = 0.0, squares = 0.0;                                                      \
        int64_t nonzero = 0;                                                                  \
        T lo = INF, hi = -INF;                                                                \
        for (; start < stop; start += BLOCK) {                                                \
            int64_t end = stop - start > BLOCK ? start + BLOCK : stop;                        \
            T s[LANES] = {0}, q[LANES] = {0}, mn[LANES], mx[LANES];                           \
            int32_t nz[LANES] = {0};                                                          \
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
        part->sum = sum;                                                                      \
        part->squares = squares;                                                              \
        part->lo = (double)lo;                                                                \
        part->hi = (double)hi;                                                                \
        part->nonzero = nonzero;                                                              \
    }

HW_DEFINE_RANGE(range_f32, float, INFINITY)
HW_DEFINE_RANGE(range_f64, double, (double)INFINITY)

/* Run i of runs runs of whole blocks over n elements */
static void run_bounds(int64_t n, int i, int runs, int64_t *start, int64_t *stop) {
    int64_t blocks = (n + BLOCK - 1) / BLOCK;
    *start = blocks * i / runs * BLOCK;
    *stop = blocks * (i + 1) / runs * BLOCK;
    if (*stop > n) *stop = n;
}

/* out: sum, sum of squares, min, max (NaN skipped), nonzero count, 1 if there may be NaN or Inf */
static void finish(const Part *parts, int count, double *out) {
    Part all = parts[0];
    for (int i = 1; i < count; i++) {
        all.sum += parts[i].sum;
        all.squares += parts[i].squares;
        all.lo = parts[i].lo < all.lo ? parts[i].lo : all.lo;
        all.hi = parts[i].hi > all.hi ? parts[i].hi : all.hi;
        all.nonzero += parts[i].nonzero;
    }
    out[0] = all.sum;
    out[1] = all.squares;
    out[2] = all.lo;
    out[3] = all.hi;
    out[4] = (double)all.nonzero;
    /* NaN reaches the sum and +-Inf the min or max; squares overflowing from finite values only send
     * the caller to its exact path, which is correct too */
    out[5] = !(isfinite(all.sum) && isfinite(all.squares) && isfinite(all.hi) && isfinite(all.lo));
}

/* threads: how many to use at most (torch's intra-op count); 1 keeps to the calling thread */
#define HW_DEFINE_STATS(NAME, RANGE, T)                                                       \
    void NAME(const T *p, int64_t n, int threads, double *out) {                              \
        Part parts[MAX_THREADS];                                                              \
        int runs = 1;                                                                         \
        if (threads > MAX_THREADS) threads = MAX_THREADS;                                     \
        if (threads > 1 && n >= PARALLEL_MIN) {                                               \
            int most = (int)(n / (PARALLEL_MIN / 2));                                         \
            runs = threads < most ? threads : most;                                           \
        }                                                                                     \
        if (runs == 1) {                                                                      \
            RANGE(p, 0, n, &parts[0]);                                                        \
            finish(parts, 1, out);                                                            \
            return;                                                                           \
        }                                                                                     \
        HW_PARALLEL(runs)                                                                     \
        {                                                                                     \
            int i = 0, team = 1;                                                              \
            HW_TEAM(i, team);                                                                 \
            /* a smaller team than asked for (nested or limited): each member takes its share */ \
            for (int r = i; r < runs; r += team) {                                            \
                int64_t start, stop;                                                          \
                run_bounds(n, r, runs, &start, &stop);                                        \
                RANGE(p, start, stop, &parts[r]);                                             \
            }                                                                                 \
        }                                                                                     \
        finish(parts, runs, out);                                                             \
    }

#ifdef _OPENMP
#define HW_PRAGMA(x) _Pragma(#x)
#define HW_PARALLEL(runs) HW_PRAGMA(omp parallel num_threads(runs))
#define HW_TEAM(i, team) (i = omp_get_thread_num(), team = omp_get_num_threads())
#else
#define HW_PARALLEL(runs)
#define HW_TEAM(i, team) ((void)0)
#endif

HW_DEFINE_STATS(hw_stats_f32, range_f32, float)
HW_DEFINE_STATS(hw_stats_f64, range_f64, double)

/* 1 when compiled with OpenMP: native.status() says whether large arrays are read by several threads */
int hw_stats_parallel(void) {
#ifdef _OPENMP
    return 1;
#else
    return 0;
#endif
}

/* The loader checks this before trusting the symbols: a stale library of another layout is rebuilt. */
int hw_stats_abi(void) { return 2; }
