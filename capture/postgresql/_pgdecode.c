/* The stream's columnar road's message parser in C: capture.postgresql._pgdecode.
 *
 * plain_change(data, off) is capture.postgresql.pgoutput.plain_change, the Python reference it
 * is tested against (tests/unit/test_pgoutput_plain_change.py, Hypothesis): at byte `off` of
 * `data`, an Insert, or an Update without an old tuple, whose values are all text ('t') or
 * NULL ('n'), gives ("c" or "u", relation id, tuple of str or None); anything else gives None,
 * and pgoutput.decode_message then decodes it or names what is wrong with it. Every read is
 * checked against the end of `data`: truncated or malformed bytes give None, never a read
 * past the buffer. Text is decoded as strict UTF-8, as bytes.decode("utf-8") does; bytes that
 * are not UTF-8 give None too (the full decoder raises on them).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

static PyObject *op_create; /* "c" */
static PyObject *op_update; /* "u" */

static uint32_t
be32(const unsigned char *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

/* The values of a TupleData at buf[*pos:size] as a new tuple, or NULL with no error set when
 * they are not all text or NULL (or do not frame), or NULL with an error set (no memory). */
static PyObject *
text_tuple(const unsigned char *buf, Py_ssize_t size, Py_ssize_t *pos)
{
    Py_ssize_t at = *pos;
    if (size - at < 2)
        return NULL;
    int16_t count = (int16_t)(((uint16_t)buf[at] << 8) | (uint16_t)buf[at + 1]);
    at += 2;
    /* A negative count is no columns, as range() of it in the Python reference. */
    Py_ssize_t n = count > 0 ? count : 0;
    PyObject *values = PyTuple_New(n);
    if (values == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (at >= size)
            goto not_plain;
        unsigned char kind = buf[at];
        if (kind == 't') {
            if (size - at < 5)
                goto not_plain;
            int32_t length = (int32_t)be32(buf + at + 1);
            at += 5;
            if (length < 0 || length > size - at)
                goto not_plain;
            PyObject *text = PyUnicode_DecodeUTF8((const char *)buf + at, length, NULL);
            if (text == NULL) {
                if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                    Py_DECREF(values);
                    return NULL;
                }
                PyErr_Clear();
                goto not_plain;
            }
            PyTuple_SET_ITEM(values, i, text);
            at += length;
        }
        else if (kind == 'n') {
            Py_INCREF(Py_None);
            PyTuple_SET_ITEM(values, i, Py_None);
            at += 1;
        }
        else {
            goto not_plain; /* 'u' (unchanged TOAST), 'b' (binary) or unknown */
        }
    }
    *pos = at;
    return values;
not_plain:
    Py_DECREF(values);
    return NULL;
}

static PyObject *
plain_change(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "plain_change() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *data = args[0];
    if (!PyBytes_Check(data)) {
        PyErr_Format(PyExc_TypeError, "plain_change(): data must be bytes, not %.80s",
                     Py_TYPE(data)->tp_name);
        return NULL;
    }
    Py_ssize_t off = PyLong_AsSsize_t(args[1]);
    if (off == -1 && PyErr_Occurred())
        return NULL;
    const unsigned char *buf = (const unsigned char *)PyBytes_AS_STRING(data);
    Py_ssize_t size = PyBytes_GET_SIZE(data);
    if (off < 0 || off > size || size - off < 8)
        Py_RETURN_NONE;
    PyObject *op;
    if (buf[off] == 'I')
        op = op_create;
    else if (buf[off] == 'U')
        op = op_update;
    else
        Py_RETURN_NONE;
    uint32_t relid = be32(buf + off + 1);
    if (buf[off + 5] != 'N') /* an Update's old tuple ('K', 'O') goes the long way */
        Py_RETURN_NONE;
    Py_ssize_t pos = off + 6;
    PyObject *values = text_tuple(buf, size, &pos);
    if (values == NULL) {
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_NONE;
    }
    if (pos != size) {
        Py_DECREF(values);
        Py_RETURN_NONE;
    }
    PyObject *relation = PyLong_FromUnsignedLong(relid);
    if (relation == NULL) {
        Py_DECREF(values);
        return NULL;
    }
    PyObject *out = PyTuple_New(3);
    if (out == NULL) {
        Py_DECREF(values);
        Py_DECREF(relation);
        return NULL;
    }
    Py_INCREF(op);
    PyTuple_SET_ITEM(out, 0, op);
    PyTuple_SET_ITEM(out, 1, relation);
    PyTuple_SET_ITEM(out, 2, values);
    return out;
}

static PyMethodDef methods[] = {
    {"plain_change", (PyCFunction)(void (*)(void))plain_change, METH_FASTCALL,
     "plain_change(data, off) -> (op, relation id, values) | None\n\n"
     "capture.postgresql.pgoutput.plain_change in C (see there)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "capture.postgresql._pgdecode",
    "pgoutput's common changes parsed in C (capture.postgresql.pgoutput.plain_change).",
    -1,
    methods,
};

PyMODINIT_FUNC
PyInit__pgdecode(void)
{
    op_create = PyUnicode_InternFromString("c");
    op_update = PyUnicode_InternFromString("u");
    if (op_create == NULL || op_update == NULL)
        return NULL;
    return PyModule_Create(&module_def);
}
