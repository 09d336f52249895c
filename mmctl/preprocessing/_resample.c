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
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static inline uint8_t clamp_shift(int32_t acc, int bits) {
    int32_t v = acc >> bits;
    return (uint8_t)(v < 0 ? 0 : (v > 255 ? 255 : v));
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
                int32_t a0 = half, a1 = half, a2 = half;
                for (Py_ssize_t k = 0; k < n; k++) {
                    const int32_t wk = wx[k];
                    a0 += wk * p[3 * k];
                    a1 += wk * p[3 * k + 1];
                    a2 += wk * p[3 * k + 2];
                }
                d[3 * x] = clamp_shift(a0, bits);
                d[3 * x + 1] = clamp_shift(a1, bits);
                d[3 * x + 2] = clamp_shift(a2, bits);
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
            Py_BEGIN_ALLOW_THREADS
            horizontal(src.buf, dst.buf, rows, n_in, n_out, ch, first.buf, count.buf, w.buf, taps,
                       bits);
            Py_END_ALLOW_THREADS
            result = Py_None;
            Py_INCREF(result);
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
            failed = vertical(src.buf, dst.buf, row_len, n_out, first.buf, count.buf, w.buf, taps,
                              bits);
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

static PyMethodDef methods[] = {
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
