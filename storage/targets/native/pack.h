/*
 * The parameters of a batch of operations, packed once in C for a native statement loop
 * (pgloop.c, marialoop.c, odbcloop.c): pack(ops: list[tuple[int, Sequence]]) -> (codes,
 * offsets, ints, kinds, texts), as bytes (int32, int64, int64, int8, NUL-separated UTF-8).
 * Integers are int64, None is NULL, bool is true/false, anything else its text (the server
 * parses it).
 * Included by each loop's source (static functions: each extension is built on its own).
 */
#ifndef DBSIM_PACK_H
#define DBSIM_PACK_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define KIND_INT 0
#define KIND_TEXT 1
#define KIND_NULL 2

/* Appends text (n bytes and a NUL) to the growing blob; its offset, or -1 (no memory). */
static Py_ssize_t blob_add(char **blob, Py_ssize_t *len, Py_ssize_t *cap, const char *text,
                           Py_ssize_t n) {
    if (*len + n + 1 > *cap) {
        Py_ssize_t want = (*cap ? *cap * 2 : 4096);
        while (want < *len + n + 1) want *= 2;
        char *bigger = PyMem_Realloc(*blob, want);
        if (bigger == NULL) return -1;
        *blob = bigger, *cap = want;
    }
    Py_ssize_t at = *len;
    memcpy(*blob + at, text, n);
    (*blob)[at + n] = 0;
    *len = at + n + 1;
    return at;
}

/* One parameter into (value, kind); 0, or -1 with an exception set. */
static int pack_value(PyObject *v, int64_t *value, int8_t *kind, char **blob, Py_ssize_t *len,
                      Py_ssize_t *cap) {
    if (PyLong_CheckExact(v)) {
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (!overflow) {
            if (x == -1 && PyErr_Occurred()) return -1;
            *value = x, *kind = KIND_INT;
            return 0;
        }
    }
    if (v == Py_None) {
        *value = 0, *kind = KIND_NULL;
        return 0;
    }
    if (PyBytes_Check(v) || PyByteArray_Check(v) || PyMemoryView_Check(v)) {
        PyErr_SetString(PyExc_ValueError, "native loop: binary parameters are not dealt natively");
        return -1;
    }
    PyObject *text;
    if (PyBool_Check(v))
        text = PyUnicode_FromString(v == Py_True ? "true" : "false");
    else if (PyUnicode_Check(v))
        text = Py_NewRef(v);
    else /* float (its repr round-trips), Decimal, date, a big int: PostgreSQL parses it */
        text = PyObject_Str(v);
    if (text == NULL) return -1;
    Py_ssize_t n;
    const char *utf8 = PyUnicode_AsUTF8AndSize(text, &n);
    Py_ssize_t at = utf8 == NULL ? -1 : blob_add(blob, len, cap, utf8, n);
    Py_DECREF(text);
    if (at < 0) {
        if (!PyErr_Occurred()) PyErr_NoMemory();
        return -1;
    }
    *value = at, *kind = KIND_TEXT;
    return 0;
}

/* pack(ops: list[tuple[int, Sequence]]) -> (codes, offsets, ints, kinds, texts), as bytes
 * in the layouts run() reads (int32, int64, int64, int8, NUL-separated UTF-8). Each loop's
 * Loop.pack (METH_O); what it packs does not depend on the loop. */
static PyObject *native_pack(PyObject *loop, PyObject *ops) {
    (void)loop;
    if (!PyList_Check(ops)) {
        PyErr_SetString(PyExc_TypeError, "native loop: pack takes a list");
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(ops), n_values = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *op = PyList_GET_ITEM(ops, i);
        if (!PyTuple_Check(op) || PyTuple_GET_SIZE(op) != 2) {
            PyErr_SetString(PyExc_TypeError, "native loop: an operation is (code, parameters)");
            return NULL;
        }
        Py_ssize_t n = PySequence_Size(PyTuple_GET_ITEM(op, 1));
        if (n < 0) return NULL;
        n_values += n;
    }
    PyObject *codes = PyBytes_FromStringAndSize(NULL, count * 4);
    PyObject *offs = PyBytes_FromStringAndSize(NULL, count * 8);
    PyObject *ints = PyBytes_FromStringAndSize(NULL, (n_values ? n_values : 1) * 8);
    PyObject *kinds = PyBytes_FromStringAndSize(NULL, n_values ? n_values : 1);
    PyObject *result = NULL;
    char *blob = NULL;
    Py_ssize_t len = 0, cap = 0;
    if (!codes || !offs || !ints || !kinds) goto done;
    int32_t *code = (int32_t *)PyBytes_AS_STRING(codes);
    int64_t *offset = (int64_t *)PyBytes_AS_STRING(offs);
    int64_t *value = (int64_t *)PyBytes_AS_STRING(ints);
    int8_t *kind = (int8_t *)PyBytes_AS_STRING(kinds);
    value[0] = 0, kind[0] = KIND_NULL;
    if (blob_add(&blob, &len, &cap, "", 0) < 0) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t at = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *op = PyList_GET_ITEM(ops, i);
        long c = PyLong_AsLong(PyTuple_GET_ITEM(op, 0));
        if (c == -1 && PyErr_Occurred()) goto done;
        code[i] = (int32_t)c;
        offset[i] = at;
        PyObject *params = PySequence_Fast(PyTuple_GET_ITEM(op, 1), "native loop: parameters");
        if (params == NULL) goto done;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(params);
        PyObject **items = PySequence_Fast_ITEMS(params);
        for (Py_ssize_t j = 0; j < n && at < n_values; j++, at++) {
            if (pack_value(items[j], &value[at], &kind[at], &blob, &len, &cap) < 0) {
                Py_DECREF(params);
                goto done;
            }
        }
        Py_DECREF(params);
    }
    result = Py_BuildValue("(OOOOy#)", codes, offs, ints, kinds, blob, len);
done:
    PyMem_Free(blob);
    Py_XDECREF(codes), Py_XDECREF(offs), Py_XDECREF(ints), Py_XDECREF(kinds);
    return result;
}

#endif
