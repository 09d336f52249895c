/*
 * The two passes of torchvision's uint8 antialiased bicubic and bilinear
 * resizes, as compiled loops: the weights (int16 fixed point, as torch
 * quantizes them; the filter only changes them, not these loops) come from
 * mmctl/preprocessing/resize.py; this file only applies them,
 * accumulating in int32 from half a unit, shifting and clamping exactly as
 * torch and resize.py's numpy fallback do, so all three agree bit for bit.
 *
 * Optional at install time (pyproject.toml: optional = true): without a
 * compiler mmctl runs the numpy version of the same arithmetic. Both
 * functions release the GIL: resizing runs beside the decoder thread.
 *
 * On x86-64 both passes also have SIMD forms (SSE2, which every x86-64 CPU
 * has; the horizontal one with SSSE3's byte shuffle, checked at run time):
 * the same integer sums, two taps at a time with pmaddwd (int16 weights x
 * pixels, exact in int32), the shift and the 0..255 clamp by saturating
 * packs — bit for bit the scalar loops' result, 2-4x faster
 * (tests/unit/preprocessing test both against the numpy passes).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define MMCTL_X86 1
#include <emmintrin.h>
#include <tmmintrin.h>
#endif

static inline uint8_t clamp_shift(int32_t acc, int bits) {
    int32_t v = acc >> bits;
    return (uint8_t)(v < 0 ? 0 : (v > 255 ? 255 : v));
}

/* One RGB output pixel: its n taps from p, weights wx. */
static inline void pixel3(const uint8_t *p, const int32_t *wx, Py_ssize_t n, int32_t half,
                          int bits, uint8_t *d) {
    int32_t a0 = half, a1 = half, a2 = half;
    for (Py_ssize_t k = 0; k < n; k++) {
        const int32_t wk = wx[k];
        a0 += wk * p[3 * k];
        a1 += wk * p[3 * k + 1];
        a2 += wk * p[3 * k + 2];
    }
    d[0] = clamp_shift(a0, bits);
    d[1] = clamp_shift(a1, bits);
    d[2] = clamp_shift(a2, bits);
}

/* dst[r, x, c] = sum_k w[x, k] * src[r, first[x] + k, c] for rows of n_in pixels. */
static void horizontal(const uint8_t *src, uint8_t *dst, Py_ssize_t rows, Py_ssize_t n_in,
                       Py_ssize_t n_out, Py_ssize_t ch, const int64_t *first,
                       const int64_t *count, const int32_t *w, Py_ssize_t taps, int bits) {
    const int32_t half = (int32_t)1 << (bits - 1);
    for (Py_ssize_t r = 0; r < rows; r++) {
        const uint8_t *s = src + r * n_in * ch;
        uint8_t *d = dst + r * n_out * ch;
        for (Py_ssize_t x = 0; x < n_out; x++) {
            const int32_t *wx = w + x * taps;
            const uint8_t *p = s + first[x] * ch;
            const Py_ssize_t n = count[x];
            if (ch == 3) {
                pixel3(p, wx, n, half, bits, d + 3 * x);
            } else {
                for (Py_ssize_t c = 0; c < ch; c++) {
                    int32_t a = half;
                    for (Py_ssize_t k = 0; k < n; k++) a += wx[k] * p[k * ch + c];
                    d[x * ch + c] = clamp_shift(a, bits);
                }
            }
        }
    }
}

/* dst[y, i] = sum_k w[y, k] * src[first[y] + k, i] over rows of row_len bytes. */
static int vertical(const uint8_t *src, uint8_t *dst, Py_ssize_t row_len, Py_ssize_t n_out,
                    const int64_t *first, const int64_t *count, const int32_t *w,
                    Py_ssize_t taps, int bits) {
    const int32_t half = (int32_t)1 << (bits - 1);
    int32_t *acc = malloc((size_t)row_len * sizeof(int32_t));
    if (acc == NULL) return -1;
    for (Py_ssize_t y = 0; y < n_out; y++) {
        const int32_t *wy = w + y * taps;
        for (Py_ssize_t i = 0; i < row_len; i++) acc[i] = half;
        for (Py_ssize_t k = 0; k < count[y]; k++) {
            const uint8_t *row = src + (first[y] + k) * row_len;
            const int32_t wk = wy[k];
            for (Py_ssize_t i = 0; i < row_len; i++) acc[i] += wk * row[i];
        }
        uint8_t *d = dst + y * row_len;
        for (Py_ssize_t i = 0; i < row_len; i++) d[i] = clamp_shift(acc[i], bits);
    }
    free(acc);
    return 0;
}


#ifdef MMCTL_X86
/* Three channels, four taps a step: each 16-byte load holds 4 source pixels
 * (12 bytes); pshufb lays two pixels' channels out as (c_k, c_k+1) int16
 * pairs and pmaddwd sums each pair times its two weights. Pixels whose load
 * would pass the end of the image take the scalar loop. */
__attribute__((target("ssse3"))) static int horizontal3_ssse3(
    const uint8_t *src, uint8_t *dst, Py_ssize_t rows, Py_ssize_t n_in, Py_ssize_t n_out,
    const int64_t *first, const int64_t *count, const int32_t *w, Py_ssize_t taps, int bits) {
    const Py_ssize_t groups = (taps + 3) / 4;
    /* Per output pixel and group of four taps, the two weight vectors
     * (w_k, w_k+1) x 3 and (w_k+2, w_k+3) x 3, laid out once per call. */
    __m128i *wv = NULL;
    if (posix_memalign((void **)&wv, 16, (size_t)(n_out * groups * 2) * sizeof(__m128i)) != 0)
        return -1;
    for (Py_ssize_t x = 0; x < n_out; x++) {
        for (Py_ssize_t g = 0; g < groups; g++) {
            int16_t q[4];
            for (int j = 0; j < 4; j++) {
                const Py_ssize_t k = 4 * g + j;
                q[j] = k < taps ? (int16_t)w[x * taps + k] : 0;
            }
            wv[(x * groups + g) * 2] = _mm_set_epi16(0, 0, q[1], q[0], q[1], q[0], q[1], q[0]);
            wv[(x * groups + g) * 2 + 1] =
                _mm_set_epi16(0, 0, q[3], q[2], q[3], q[2], q[3], q[2]);
        }
    }
    const int32_t half = (int32_t)1 << (bits - 1);
    const uint8_t *end = src + rows * n_in * 3;
    const __m128i lo = _mm_setr_epi8(0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1);
    const __m128i hi = _mm_setr_epi8(6, -1, 9, -1, 7, -1, 10, -1, 8, -1, 11, -1, -1, -1, -1, -1);
    const __m128i start = _mm_set1_epi32(half);
    for (Py_ssize_t r = 0; r < rows; r++) {
        const uint8_t *s = src + r * n_in * 3;
        uint8_t *d = dst + r * n_out * 3;
        for (Py_ssize_t x = 0; x < n_out; x++) {
            const uint8_t *p = s + first[x] * 3;
            const Py_ssize_t n = count[x];
            const Py_ssize_t used = (n + 3) / 4;
            if (p + 12 * used + 4 > end) {
                pixel3(p, w + x * taps, n, half, bits, d + 3 * x);
                continue;
            }
            const __m128i *wx = wv + x * groups * 2;
            __m128i acc = start;
            for (Py_ssize_t g = 0; g < used; g++) {
                const __m128i px = _mm_loadu_si128((const __m128i *)(p + 12 * g));
                acc = _mm_add_epi32(acc, _mm_madd_epi16(_mm_shuffle_epi8(px, lo), wx[2 * g]));
                acc = _mm_add_epi32(acc, _mm_madd_epi16(_mm_shuffle_epi8(px, hi), wx[2 * g + 1]));
            }
            acc = _mm_srai_epi32(acc, bits);
            const __m128i packed = _mm_packus_epi16(_mm_packs_epi32(acc, acc), acc);
            const uint32_t rgb = (uint32_t)_mm_cvtsi128_si32(packed);
            d[3 * x] = (uint8_t)rgb;
            d[3 * x + 1] = (uint8_t)(rgb >> 8);
            d[3 * x + 2] = (uint8_t)(rgb >> 16);
        }
    }
    free(wv);
    return 0;
}

/* Eight bytes of a row a step: taps in pairs (k, k+1), the two rows' bytes
 * interleaved as int16 and pmaddwd'ed with (w_k, w_k+1); an odd last tap
 * pairs with itself at weight 0. The tail of a row takes the scalar loop. */
static int vertical_sse2(const uint8_t *src, uint8_t *dst, Py_ssize_t row_len, Py_ssize_t n_out,
                         const int64_t *first, const int64_t *count, const int32_t *w,
                         Py_ssize_t taps, int bits) {
    const int32_t half = (int32_t)1 << (bits - 1);
    const __m128i zero = _mm_setzero_si128();
    const __m128i start = _mm_set1_epi32(half);
    const Py_ssize_t wide = row_len & ~(Py_ssize_t)7;
    for (Py_ssize_t y = 0; y < n_out; y++) {
        const int32_t *wy = w + y * taps;
        const uint8_t *base = src + first[y] * row_len;
        const Py_ssize_t n = count[y];
        uint8_t *d = dst + y * row_len;
        for (Py_ssize_t i = 0; i < wide; i += 8) {
            __m128i acc0 = start, acc1 = start;
            for (Py_ssize_t k = 0; k < n; k += 2) {
                const int more = k + 1 < n;
                const uint8_t *ra = base + k * row_len + i;
                const uint8_t *rb = more ? ra + row_len : ra;
                const __m128i pair = _mm_set1_epi32(
                    (int32_t)(((uint32_t)(uint16_t)(more ? wy[k + 1] : 0) << 16) |
                              (uint16_t)wy[k]));
                const __m128i ab = _mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)ra),
                                                     _mm_loadl_epi64((const __m128i *)rb));
                acc0 = _mm_add_epi32(acc0, _mm_madd_epi16(_mm_unpacklo_epi8(ab, zero), pair));
                acc1 = _mm_add_epi32(acc1, _mm_madd_epi16(_mm_unpackhi_epi8(ab, zero), pair));
            }
            acc0 = _mm_srai_epi32(acc0, bits);
            acc1 = _mm_srai_epi32(acc1, bits);
            const __m128i out = _mm_packus_epi16(_mm_packs_epi32(acc0, acc1), zero);
            _mm_storel_epi64((__m128i *)(d + i), out);
        }
        for (Py_ssize_t i = wide; i < row_len; i++) {
            int32_t a = half;
            for (Py_ssize_t k = 0; k < n; k++) a += wy[k] * base[k * row_len + i];
            d[i] = clamp_shift(a, bits);
        }
    }
    return 0;
}

/* 1 when this CPU runs the SSSE3 pass (SSE2 is x86-64's baseline). */
static int have_ssse3(void) {
    static int known = -1;
    if (known < 0) {
        __builtin_cpu_init();
        known = __builtin_cpu_supports("ssse3") ? 1 : 0;
    }
    return known;
}
#endif

/* Every pass, by what this build and CPU can run (0: the scalar loops only). */
static int simd_enabled = 1;

/* Checks shared by both entry points: the index and weight tables fit n_in. */
static int check_tables(Py_buffer *first, Py_buffer *count, Py_buffer *w, Py_ssize_t n_in,
                        Py_ssize_t n_out, Py_ssize_t taps, int bits) {
    if (bits < 1 || bits > 22 || taps < 1) {
        PyErr_SetString(PyExc_ValueError, "bad precision or tap count");
        return -1;
    }
    if (first->len != n_out * 8 || count->len != n_out * 8 || w->len != n_out * taps * 4) {
        PyErr_SetString(PyExc_ValueError, "index or weight table has the wrong size");
        return -1;
    }
    const int64_t *f = first->buf, *c = count->buf;
    for (Py_ssize_t i = 0; i < n_out; i++) {
        if (f[i] < 0 || c[i] < 0 || c[i] > taps || f[i] + c[i] > n_in) {
            PyErr_SetString(PyExc_ValueError, "tap outside the source");
            return -1;
        }
    }
    return 0;
}

static void release(Py_buffer *a, Py_buffer *b, Py_buffer *c, Py_buffer *d, Py_buffer *e) {
    PyBuffer_Release(a);
    PyBuffer_Release(b);
    PyBuffer_Release(c);
    PyBuffer_Release(d);
    PyBuffer_Release(e);
}

static PyObject *py_horizontal(PyObject *self, PyObject *args) {
    Py_buffer src, dst, first, count, w;
    Py_ssize_t rows, n_in, n_out, ch, taps;
    int bits;
    if (!PyArg_ParseTuple(args, "y*w*nnnny*y*y*ni", &src, &dst, &rows, &n_in, &n_out, &ch,
                          &first, &count, &w, &taps, &bits))
        return NULL;
    PyObject *result = NULL;
    if (check_tables(&first, &count, &w, n_in, n_out, taps, bits) == 0) {
        if (src.len != rows * n_in * ch || dst.len != rows * n_out * ch) {
            PyErr_SetString(PyExc_ValueError, "image buffers have the wrong size");
        } else {
            int failed = 0, done = 0;
            Py_BEGIN_ALLOW_THREADS
#ifdef MMCTL_X86
            if (simd_enabled && ch == 3 && have_ssse3()) {
                failed = horizontal3_ssse3(src.buf, dst.buf, rows, n_in, n_out, first.buf,
                                           count.buf, w.buf, taps, bits);
                done = 1;
            }
#endif
            if (!done)
                horizontal(src.buf, dst.buf, rows, n_in, n_out, ch, first.buf, count.buf, w.buf,
                           taps, bits);
            Py_END_ALLOW_THREADS
            if (failed) {
                PyErr_NoMemory();
            } else {
                result = Py_None;
                Py_INCREF(result);
            }
        }
    }
    release(&src, &dst, &first, &count, &w);
    return result;
}

static PyObject *py_vertical(PyObject *self, PyObject *args) {
    Py_buffer src, dst, first, count, w;
    Py_ssize_t n_in, n_out, row_len, taps;
    int bits, failed = 0;
    if (!PyArg_ParseTuple(args, "y*w*nnny*y*y*ni", &src, &dst, &n_in, &n_out, &row_len, &first,
                          &count, &w, &taps, &bits))
        return NULL;
    PyObject *result = NULL;
    if (check_tables(&first, &count, &w, n_in, n_out, taps, bits) == 0) {
        if (src.len != n_in * row_len || dst.len != n_out * row_len) {
            PyErr_SetString(PyExc_ValueError, "image buffers have the wrong size");
        } else {
            Py_BEGIN_ALLOW_THREADS
#ifdef MMCTL_X86
            if (simd_enabled)
                failed = vertical_sse2(src.buf, dst.buf, row_len, n_out, first.buf, count.buf,
                                       w.buf, taps, bits);
            else
#endif
                failed = vertical(src.buf, dst.buf, row_len, n_out, first.buf, count.buf, w.buf,
                                  taps, bits);
            Py_END_ALLOW_THREADS
            if (failed) {
                PyErr_NoMemory();
            } else {
                result = Py_None;
                Py_INCREF(result);
            }
        }
    }
    release(&src, &dst, &first, &count, &w);
    return result;
}

/* simd(flag) -> whether the SIMD passes run from now on (tests compare both forms). */
static PyObject *py_simd(PyObject *self, PyObject *args) {
    int on;
    if (!PyArg_ParseTuple(args, "p", &on)) return NULL;
#ifdef MMCTL_X86
    simd_enabled = on;
#else
    simd_enabled = 0;
#endif
    return PyBool_FromLong(simd_enabled);
}

static PyMethodDef methods[] = {
    {"simd", py_simd, METH_VARARGS, "simd(on) -> whether the SIMD passes now run"},
    {"horizontal", py_horizontal, METH_VARARGS,
     "horizontal(src, dst, rows, n_in, n_out, channels, first, count, weights, taps, bits)"},
    {"vertical", py_vertical, METH_VARARGS,
     "vertical(src, dst, n_in, n_out, row_len, first, count, weights, taps, bits)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_resample",
    "torchvision's uint8 antialiased bicubic passes (weights from resize.py)", -1, methods,
};

PyMODINIT_FUNC PyInit__resample(void) { return PyModule_Create(&module); }
