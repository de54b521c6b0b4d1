/* The snapshot's COPY received and split into Arrow string columns in C:
 * capture.postgresql._pgcopy.
 *
 * TextCopySplitter(width) takes the bytes of `COPY ... TO STDOUT` in text format (rows ended by
 * a newline, fields by a tab, NULL as \N, backslash escapes) and builds, per column, the three
 * buffers of an Arrow string array: validity bitmap (LSB first), int32 offsets, UTF-8 data. It
 * is capture.postgresql.copy_text.split_text_copy in C, the Python reference it is tested
 * against (tests/unit/test_pg_copy_text.py, Hypothesis).
 *
 * The escapes are read as PostgreSQL's COPY FROM reads them (CopyReadAttributesText): \b \f \n
 * \r \t \v \\, \NNN (1 to 3 octal digits, the low byte kept), \xH or \xHH (1 or 2 hex digits;
 * \x with no hex digit is "x"), any other backslashed byte stands for itself. A field whose raw
 * text is exactly \N is NULL. Two things are errors where COPY FROM is lenient, because COPY TO
 * over protocol 3 never writes them: \. (the old protocol's end marker) anywhere, and a field
 * that is not valid UTF-8 (a numeric escape may make one; a NUL byte from one too).
 *
 * feed() may cut the stream anywhere, even inside an escape: the rows it completes are split,
 * the rest waits for the next feed(). drain(pgconn) receives a whole COPY through the libpq
 * psycopg uses (bound once by bind_libpq(path)) with the GIL released: each CopyData message is
 * fed as it comes, then the command's results are read, so the connection is idle again when it
 * returns (also after a data error: the rest of the COPY is still read, not fed).
 *
 * Every read is bounded by the buffer's end; a malformed stream raises CopyDataError(reason,
 * row, column) (column None: the data ended inside a row); a failed COPY raises
 * CopyReceiveError(message, sqlstate or None).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------ */
/* libpq, bound at run time to the copy psycopg loaded (never linked: psycopg's binary wheel
 * ships its own libpq, and a PGconn must only meet the library that made it). */

typedef void PGconn;
typedef void PGresult;

static struct {
    void *handle;
    int (*getCopyData)(PGconn *, char **, int);
    void (*freemem)(void *);
    PGresult *(*getResult)(PGconn *);
    int (*resultStatus)(const PGresult *);
    char *(*resultErrorMessage)(const PGresult *);
    char *(*resultErrorField)(const PGresult *, int);
    void (*clear)(PGresult *);
    char *(*errorMessage)(const PGconn *);
    int (*libVersion)(void);
} pq;

#define PGRES_COMMAND_OK 1      /* ExecStatusType, libpq-fe.h */
#define PG_DIAG_SQLSTATE 'C'    /* postgres_ext.h */

static PyObject *CopyDataError;
static PyObject *CopyReceiveError;

/* ------------------------------------------------------------------------------------------ */
/* The splitter. */

typedef struct {
    char *data;
    size_t len, cap;
    int32_t *offsets; /* rows_cap + 1 */
    uint8_t *valid;   /* (rows_cap + 7) / 8 */
} Column;

enum { OK = 0, DATA_ERROR = 1, NO_MEMORY = 2 };

typedef struct {
    PyObject_HEAD
    Py_ssize_t width;
    Py_ssize_t rows, rows_cap;
    Column *cols;
    unsigned char *left; /* the start of a row not complete yet */
    size_t left_len, left_cap;
    int failed;          /* the first error, recorded without the GIL */
    char reason[200];
    Py_ssize_t err_row, err_col;
} Splitter;

/* Bytes that end a run of plain data in a field. */
static unsigned char special[256];

static int
fail(Splitter *s, Py_ssize_t col, const char *reason)
{
    if (s->failed == OK) {
        s->failed = DATA_ERROR;
        s->err_row = s->rows;
        s->err_col = col;
        snprintf(s->reason, sizeof s->reason, "%s", reason);
    }
    return -1;
}

static int
no_memory(Splitter *s)
{
    if (s->failed == OK)
        s->failed = NO_MEMORY;
    return -1;
}

static int
ensure_rows(Splitter *s)
{
    if (s->rows < s->rows_cap)
        return 0;
    Py_ssize_t cap = s->rows_cap ? s->rows_cap * 2 : 1024;
    if (cap > INT32_MAX - 8)
        return fail(s, 0, "more than 2**31 rows in one chunk");
    for (Py_ssize_t c = 0; c < s->width; c++) {
        Column *col = &s->cols[c];
        int32_t *offsets = realloc(col->offsets, (size_t)(cap + 1) * sizeof(int32_t));
        if (offsets == NULL)
            return no_memory(s);
        col->offsets = offsets;
        size_t old_bytes = (size_t)(s->rows_cap + 7) / 8, bytes = (size_t)(cap + 7) / 8;
        uint8_t *valid = realloc(col->valid, bytes);
        if (valid == NULL)
            return no_memory(s);
        memset(valid + old_bytes, 0, bytes - old_bytes);
        col->valid = valid;
    }
    s->rows_cap = cap;
    return 0;
}

static int
append(Splitter *s, Py_ssize_t c, const unsigned char *bytes, size_t n)
{
    Column *col = &s->cols[c];
    if (n > (size_t)INT32_MAX - col->len)
        return fail(s, c, "more than 2 GiB of one column in one chunk");
    if (col->len + n > col->cap) {
        size_t cap = col->cap ? col->cap : 4096;
        while (cap < col->len + n)
            cap *= 2;
        char *data = realloc(col->data, cap);
        if (data == NULL)
            return no_memory(s);
        col->data = data;
        col->cap = cap;
    }
    memcpy(col->data + col->len, bytes, n);
    col->len += n;
    return 0;
}

static int
append_byte(Splitter *s, Py_ssize_t c, unsigned char byte)
{
    return append(s, c, &byte, 1);
}

/* Whether p[0:n] is valid UTF-8 (no overlongs, no surrogates, nothing above U+10FFFF), and,
 * when nul_ok is 0, holds no NUL. */
static int
valid_utf8(const unsigned char *p, size_t n, int nul_ok)
{
    size_t i = 0;
    while (i < n) {
        unsigned char b = p[i];
        if (b < 0x80) {
            if (b == 0 && !nul_ok)
                return 0;
            i++;
            continue;
        }
        size_t need;
        uint32_t cp;
        if (b >= 0xC2 && b <= 0xDF) {
            need = 1;
            cp = b & 0x1F;
        }
        else if (b >= 0xE0 && b <= 0xEF) {
            need = 2;
            cp = b & 0x0F;
        }
        else if (b >= 0xF0 && b <= 0xF4) {
            need = 3;
            cp = b & 0x07;
        }
        else
            return 0;
        if (n - i - 1 < need)
            return 0;
        for (size_t k = 1; k <= need; k++) {
            unsigned char t = p[i + k];
            if ((t & 0xC0) != 0x80)
                return 0;
            cp = (cp << 6) | (t & 0x3F);
        }
        if ((need == 2 && cp < 0x800) || (need == 3 && cp < 0x10000) || cp > 0x10FFFF ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += need + 1;
    }
    return 1;
}

static int
octal(unsigned char b)
{
    return b >= '0' && b <= '7';
}

static int
hex_value(unsigned char b)
{
    if (b >= '0' && b <= '9')
        return b - '0';
    if (b >= 'a' && b <= 'f')
        return b - 'a' + 10;
    if (b >= 'A' && b <= 'F')
        return b - 'A' + 10;
    return -1;
}

static void
set_valid(Column *col, Py_ssize_t row, int valid)
{
    uint8_t bit = (uint8_t)(1u << (row & 7));
    if (valid)
        col->valid[row >> 3] |= bit;
    else
        col->valid[row >> 3] &= (uint8_t)~bit;
}

enum { ROW_DONE = 0, ROW_INCOMPLETE = 1, ROW_ERROR = -1 };

/* One row at *at (not beyond end): ROW_DONE with *at past its newline, ROW_INCOMPLETE when the
 * bytes end inside it (the columns are then rolled back), ROW_ERROR. */
static int
split_row(Splitter *s, const unsigned char **at, const unsigned char *end)
{
    const unsigned char *p = *at;
    Py_ssize_t row = s->rows, c = 0;
    if (ensure_rows(s) < 0)
        return ROW_ERROR;
    for (;;) {
        Column *col = &s->cols[c];
        if (end - p >= 3 && p[0] == '\\' && p[1] == 'N' && (p[2] == '\t' || p[2] == '\n')) {
            p += 2;
            set_valid(col, row, 0);
        }
        else {
            size_t start = col->len;
            unsigned char high = 0;
            int numeric = 0;
            for (;;) {
                const unsigned char *q = p;
                while (q < end && !special[*q])
                    high |= *q++;
                if (q > p && append(s, c, p, (size_t)(q - p)) < 0)
                    return ROW_ERROR;
                p = q;
                if (p == end)
                    goto incomplete;
                if (*p != '\\')
                    break; /* a tab or a newline */
                if (end - p < 2)
                    goto incomplete;
                unsigned char e = p[1], out;
                p += 2;
                switch (e) {
                case 'b': out = '\b'; break;
                case 'f': out = '\f'; break;
                case 'n': out = '\n'; break;
                case 'r': out = '\r'; break;
                case 't': out = '\t'; break;
                case 'v': out = '\v'; break;
                case '.':
                    return fail(s, c, "the end-of-copy marker \\. inside the data");
                case '0': case '1': case '2': case '3': case '4': case '5': case '6': case '7': {
                    unsigned int value = e - '0';
                    for (int digits = 1; digits < 3; digits++) {
                        if (p == end)
                            goto incomplete;
                        if (!octal(*p))
                            break;
                        value = (value << 3) + (*p++ - '0');
                    }
                    out = (unsigned char)(value & 0xFF);
                    numeric = 1;
                    break;
                }
                case 'x': {
                    if (p == end)
                        goto incomplete;
                    int h = hex_value(*p);
                    if (h < 0) {
                        out = 'x';
                        break;
                    }
                    unsigned int value = (unsigned int)h;
                    p++;
                    if (p == end)
                        goto incomplete;
                    h = hex_value(*p);
                    if (h >= 0) {
                        value = (value << 4) + (unsigned int)h;
                        p++;
                    }
                    out = (unsigned char)value;
                    numeric = 1;
                    break;
                }
                default:
                    out = e; /* any other byte stands for itself */
                }
                high |= out;
                if (append_byte(s, c, out) < 0)
                    return ROW_ERROR;
            }
            if ((numeric || (high & 0x80)) &&
                !valid_utf8((const unsigned char *)col->data + start, col->len - start,
                            !numeric))
                return fail(s, c, "the value is not valid UTF-8");
            set_valid(col, row, 1);
        }
        col->offsets[row + 1] = (int32_t)col->len;
        /* p is at the field's tab or newline (the \N test saw one; the loop above broke on one) */
        if (*p == '\t') {
            if (c + 1 >= s->width)
                return fail(s, c, "more fields than columns");
            c++;
            p++;
            continue;
        }
        if (c + 1 != s->width)
            return fail(s, c, "fewer fields than columns");
        *at = p + 1;
        s->rows++;
        return ROW_DONE;
    }
incomplete:
    for (Py_ssize_t k = 0; k <= c; k++)
        s->cols[k].len = (size_t)s->cols[k].offsets[row];
    return ROW_INCOMPLETE;
}

/* Split the complete rows of buf[0:n]; the number of bytes they take, or -1. */
static Py_ssize_t
split_rows(Splitter *s, const unsigned char *buf, size_t n)
{
    const unsigned char *p = buf, *end = buf + n;
    while (p < end) {
        int r = split_row(s, &p, end);
        if (r == ROW_ERROR)
            return -1;
        if (r == ROW_INCOMPLETE)
            break;
    }
    return p - buf;
}

static int
keep_left(Splitter *s, const unsigned char *bytes, size_t n)
{
    if (s->left_len + n > s->left_cap) {
        size_t cap = s->left_cap ? s->left_cap : 4096;
        while (cap < s->left_len + n)
            cap *= 2;
        unsigned char *left = realloc(s->left, cap);
        if (left == NULL)
            return no_memory(s);
        s->left = left;
        s->left_cap = cap;
    }
    memcpy(s->left + s->left_len, bytes, n);
    s->left_len += n;
    return 0;
}

/* Feed buf[0:n] (no Python object touched: runs without the GIL). 0, or -1 with s->failed. */
static int
feed_bytes(Splitter *s, const unsigned char *buf, size_t n)
{
    if (s->failed)
        return -1;
    if (s->left_len == 0) {
        Py_ssize_t used = split_rows(s, buf, n);
        if (used < 0)
            return -1;
        return keep_left(s, buf + used, n - (size_t)used);
    }
    if (keep_left(s, buf, n) < 0)
        return -1;
    Py_ssize_t used = split_rows(s, s->left, s->left_len);
    if (used < 0)
        return -1;
    memmove(s->left, s->left + used, s->left_len - (size_t)used);
    s->left_len -= (size_t)used;
    return 0;
}

static PyObject *
raise_failed(Splitter *s)
{
    if (s->failed == NO_MEMORY)
        return PyErr_NoMemory();
    PyObject *column = s->err_col < 0 ? Py_NewRef(Py_None) : PyLong_FromSsize_t(s->err_col);
    if (column == NULL)
        return NULL;
    PyObject *args = Py_BuildValue("(snN)", s->reason, s->err_row, column);
    if (args != NULL) {
        PyErr_SetObject(CopyDataError, args);
        Py_DECREF(args);
    }
    return NULL;
}

static int
splitter_init(Splitter *s, PyObject *args, PyObject *kwds)
{
    static char *keywords[] = {"width", NULL};
    Py_ssize_t width;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "n", keywords, &width))
        return -1;
    if (width < 1 || width > 1664) { /* MaxTupleAttributeNumber */
        PyErr_Format(PyExc_ValueError, "TextCopySplitter: width must be 1 to 1664, not %zd",
                     width);
        return -1;
    }
    if (s->cols != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "TextCopySplitter: already initialized");
        return -1;
    }
    s->cols = calloc((size_t)width, sizeof(Column));
    if (s->cols == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    s->width = width;
    if (ensure_rows(s) < 0) {
        raise_failed(s);
        return -1;
    }
    for (Py_ssize_t c = 0; c < width; c++)
        s->cols[c].offsets[0] = 0;
    return 0;
}

static void
splitter_dealloc(Splitter *s)
{
    if (s->cols != NULL) {
        for (Py_ssize_t c = 0; c < s->width; c++) {
            free(s->cols[c].data);
            free(s->cols[c].offsets);
            free(s->cols[c].valid);
        }
        free(s->cols);
    }
    free(s->left);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static int
ready(Splitter *s)
{
    if (s->cols == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "TextCopySplitter: not initialized");
        return 0;
    }
    return 1;
}

static PyObject *
splitter_feed(Splitter *s, PyObject *arg)
{
    if (!ready(s))
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    int rc;
    if (view.len >= 65536) {
        Py_BEGIN_ALLOW_THREADS
        rc = feed_bytes(s, view.buf, (size_t)view.len);
        Py_END_ALLOW_THREADS
    }
    else
        rc = feed_bytes(s, view.buf, (size_t)view.len);
    PyBuffer_Release(&view);
    if (rc < 0)
        return raise_failed(s);
    Py_RETURN_NONE;
}

static PyObject *
splitter_drain(Splitter *s, PyObject *arg)
{
    if (!ready(s))
        return NULL;
    if (pq.handle == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "TextCopySplitter.drain: bind_libpq() first");
        return NULL;
    }
    void *conn = PyLong_AsVoidPtr(arg);
    if (conn == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "TextCopySplitter.drain: no connection");
        return NULL;
    }
    char *message = NULL, *sqlstate = NULL;
    Py_BEGIN_ALLOW_THREADS
    for (;;) {
        char *buf = NULL;
        int n = pq.getCopyData(conn, &buf, 0);
        if (n > 0) {
            if (!s->failed)
                feed_bytes(s, (const unsigned char *)buf, (size_t)n);
            pq.freemem(buf);
            continue;
        }
        if (buf != NULL)
            pq.freemem(buf);
        if (n == -2) {
            const char *error = pq.errorMessage(conn);
            message = strdup(error != NULL && *error ? error : "COPY data could not be read");
        }
        break; /* -1: the COPY is complete */
    }
    /* The command's results (COMMAND_OK, or the error that ended the COPY), then NULL. */
    PGresult *result;
    while ((result = pq.getResult(conn)) != NULL) {
        if (pq.resultStatus(result) != PGRES_COMMAND_OK && message == NULL) {
            const char *error = pq.resultErrorMessage(result);
            const char *state = pq.resultErrorField(result, PG_DIAG_SQLSTATE);
            message = strdup(error != NULL && *error ? error : "COPY failed");
            if (state != NULL)
                sqlstate = strdup(state);
        }
        pq.clear(result);
    }
    Py_END_ALLOW_THREADS
    if (message != NULL) {
        PyObject *args = Py_BuildValue("(ss)", message, sqlstate);
        free(message);
        free(sqlstate);
        if (args != NULL) {
            PyErr_SetObject(CopyReceiveError, args);
            Py_DECREF(args);
        }
        return NULL;
    }
    free(sqlstate);
    if (s->failed)
        return raise_failed(s);
    Py_RETURN_NONE;
}

static PyObject *
splitter_finish(Splitter *s, PyObject *Py_UNUSED(ignored))
{
    if (!ready(s))
        return NULL;
    if (s->failed)
        return raise_failed(s);
    if (s->left_len > 0) {
        fail(s, -1, "the data ends inside a row");
        return raise_failed(s);
    }
    Py_ssize_t rows = s->rows;
    PyObject *out = PyList_New(s->width);
    if (out == NULL)
        return NULL;
    for (Py_ssize_t c = 0; c < s->width; c++) {
        Column *col = &s->cols[c];
        PyObject *item = Py_BuildValue(
            "(y#y#y#)", (const char *)col->valid, (Py_ssize_t)((rows + 7) / 8),
            (const char *)col->offsets, (Py_ssize_t)((rows + 1) * (Py_ssize_t)sizeof(int32_t)),
            col->data != NULL ? col->data : "", (Py_ssize_t)col->len);
        if (item == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, c, item);
    }
    return out;
}

static PyObject *
splitter_rows(Splitter *s, void *Py_UNUSED(closure))
{
    return PyLong_FromSsize_t(s->rows);
}

static PyMethodDef splitter_methods[] = {
    {"feed", (PyCFunction)splitter_feed, METH_O,
     "feed(data) -> None: split the rows data completes (data: any bytes-like object)."},
    {"drain", (PyCFunction)splitter_drain, METH_O,
     "drain(pgconn_ptr) -> None: receive the connection's COPY in progress, to its end."},
    {"finish", (PyCFunction)splitter_finish, METH_NOARGS,
     "finish() -> [(validity, offsets, data)] per column: the Arrow buffers of the rows."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef splitter_getset[] = {
    {"rows", (getter)splitter_rows, NULL, "Rows split so far.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject SplitterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "capture.postgresql._pgcopy.TextCopySplitter",
    .tp_doc = "Text COPY rows split into Arrow string columns (see the module).",
    .tp_basicsize = sizeof(Splitter),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)splitter_init,
    .tp_dealloc = (destructor)splitter_dealloc,
    .tp_methods = splitter_methods,
    .tp_getset = splitter_getset,
};

/* ------------------------------------------------------------------------------------------ */

static PyObject *
bind_libpq(PyObject *module, PyObject *arg)
{
    const char *path = PyUnicode_AsUTF8(arg);
    if (path == NULL)
        return NULL;
    if (pq.handle != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "bind_libpq: libpq is bound already");
        return NULL;
    }
    /* RTLD_NOLOAD: the library psycopg has loaded, never a second copy. */
    void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (handle == NULL) {
        const char *why = dlerror();
        PyErr_Format(PyExc_OSError, "bind_libpq: %s is not loaded in this process (%s)", path,
                     why != NULL ? why : "no reason given");
        return NULL;
    }
#define BIND(field, name)                                                                      \
    do {                                                                                       \
        *(void **)(&pq.field) = dlsym(handle, name);                                           \
        if (pq.field == NULL) {                                                                \
            dlclose(handle);                                                                   \
            memset(&pq, 0, sizeof pq);                                                         \
            PyErr_Format(PyExc_OSError, "bind_libpq: %s has no %s", path, name);               \
            return NULL;                                                                       \
        }                                                                                      \
    } while (0)
    BIND(getCopyData, "PQgetCopyData");
    BIND(freemem, "PQfreemem");
    BIND(getResult, "PQgetResult");
    BIND(resultStatus, "PQresultStatus");
    BIND(resultErrorMessage, "PQresultErrorMessage");
    BIND(resultErrorField, "PQresultErrorField");
    BIND(clear, "PQclear");
    BIND(errorMessage, "PQerrorMessage");
    BIND(libVersion, "PQlibVersion");
#undef BIND
    pq.handle = handle;
    return PyLong_FromLong(pq.libVersion());
}

/* The CopyData messages libpq already holds for a connection in COPY_OUT/COPY_BOTH, at most
 * `limit`, without waiting (PQgetCopyData async): (list of bytes, status), status 0 when no
 * complete message is left, -1 when the COPY ended (PQgetResult says how), -2 on an error. */
static PyObject *
read_messages(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "read_messages() takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    if (pq.handle == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "read_messages: bind_libpq() first");
        return NULL;
    }
    void *conn = PyLong_AsVoidPtr(args[0]);
    if (conn == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "read_messages: no connection");
        return NULL;
    }
    Py_ssize_t limit = PyLong_AsSsize_t(args[1]);
    if (limit == -1 && PyErr_Occurred())
        return NULL;
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    int status = 0;
    while (PyList_GET_SIZE(out) < limit) {
        char *buf = NULL;
        int n = pq.getCopyData(conn, &buf, 1);
        if (n <= 0) {
            if (buf != NULL)
                pq.freemem(buf);
            status = n;
            break;
        }
        PyObject *message = PyBytes_FromStringAndSize(buf, n);
        pq.freemem(buf);
        if (message == NULL || PyList_Append(out, message) < 0) {
            Py_XDECREF(message);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(message);
    }
    return Py_BuildValue("(Ni)", out, status);
}

static PyMethodDef methods[] = {
    {"bind_libpq", (PyCFunction)bind_libpq, METH_O,
     "bind_libpq(path) -> int: bind the libpq already loaded from path; its PQlibVersion()."},
    {"read_messages", (PyCFunction)(void (*)(void))read_messages, METH_FASTCALL,
     "read_messages(pgconn_ptr, limit) -> (messages, status): the CopyData messages libpq holds."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "capture.postgresql._pgcopy",
    "Text COPY received and split into Arrow string columns in C (see "
    "capture.postgresql.copy_text).",
    -1,
    methods,
};

PyMODINIT_FUNC
PyInit__pgcopy(void)
{
    special['\t'] = special['\n'] = special['\\'] = 1;
    if (PyType_Ready(&SplitterType) < 0)
        return NULL;
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL)
        return NULL;
    CopyDataError = PyErr_NewExceptionWithDoc(
        "capture.postgresql._pgcopy.CopyDataError",
        "Malformed text COPY data: args are (reason, row of the chunk, column or None).",
        PyExc_ValueError, NULL);
    CopyReceiveError = PyErr_NewExceptionWithDoc(
        "capture.postgresql._pgcopy.CopyReceiveError",
        "The COPY failed: args are (server or libpq message, SQLSTATE or None).", NULL, NULL);
    if (CopyDataError == NULL || CopyReceiveError == NULL ||
        PyModule_AddObjectRef(module, "CopyDataError", CopyDataError) < 0 ||
        PyModule_AddObjectRef(module, "CopyReceiveError", CopyReceiveError) < 0 ||
        PyModule_AddObjectRef(module, "TextCopySplitter", (PyObject *)&SplitterType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
