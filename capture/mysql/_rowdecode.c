/* The binlog row-image decoder of capture/mysql/binlog.py, in C.
 *
 * A Decoder is built once per parsed table map from one spec per column (kind, size, encoding,
 * the column's Python reader, an optional reason callable). Decoder.rows() decodes the body of a
 * WRITE/UPDATE/DELETE_ROWS event after its post-header (column count, the present bitmap(s),
 * the row images) into the value lists binlog.py's _Plan produces: one (values, reasons) pair
 * per image, reasons None when no value is None, else the mysql-replication none_sources reason
 * of each None by column index.
 *
 * The bytes come from the network: every read is checked against the end of the event's rows,
 * and anything out of bounds or malformed raises the error class given at construction (the
 * agent's CaptureError), naming the table, the column and the byte offset. Values the C code
 * does not read exactly as the Python readers do (a type it does not handle, a zero or invalid
 * date, a negative TIMESTAMP) are handed to that column's Python reader, so the result is the
 * Python decoder's by construction; each such call is counted (Decoder.fallbacks).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <datetime.h>
#include <stdint.h>
#include <string.h>

enum {
    K_CALL = 0,       /* the column's Python reader, always */
    K_INT = 1,        /* signed little-endian integer, size 1, 2, 3, 4 or 8 bytes */
    K_UINT = 2,       /* unsigned little-endian integer, size 1, 2, 3, 4 or 8 bytes */
    K_FLOAT = 3,      /* IEEE float (size 4) or double (size 8), little-endian */
    K_TEXT = 4,       /* length-prefixed (size = 1-4 bytes) text decoded strictly with encoding */
    K_BYTES = 5,      /* length-prefixed bytes kept as bytes; empty -> "" (no codec for it) */
    K_DATETIME2 = 6,  /* size = fractional digits */
    K_TIMESTAMP2 = 7, /* size = fractional digits */
    K_DATE = 8,
};

static const int FSP_BYTES[7] = {0, 1, 1, 2, 2, 3, 3};
static const int64_t POW10[7] = {1, 10, 100, 1000, 10000, 100000, 1000000};

typedef struct {
    int kind;
    int size;
    PyObject *encoding; /* str, K_TEXT only */
    const char *enc;
    PyObject *reader; /* reader(data, pos) -> (value, pos after) */
    PyObject *reason; /* reason() -> str for a None the reader returned, or NULL */
} Column;

typedef struct {
    PyObject_HEAD
    Py_ssize_t ncols;
    Column *cols;
    PyObject *names;         /* tuple of str, for messages */
    PyObject *label;         /* "db.table", for messages */
    PyObject *null_reason;   /* NONE_SOURCE.NULL */
    PyObject *bitmap_reason; /* NONE_SOURCE.COLS_BITMAP */
    PyObject *error;         /* the exception class raised for malformed bytes */
    PyObject *shapes;        /* dict: NULL bitmap (int) of a full image -> its reasons dict */
    Py_ssize_t fallbacks;
} Decoder;

static PyObject *
malformed(Decoder *d, const char *what, Py_ssize_t col, Py_ssize_t at, Py_ssize_t end)
{
    PyObject *msg;
    if (col >= 0)
        msg = PyUnicode_FromFormat(
            "binlog row event of %U: %s of column %zd (%U) at byte %zd, its rows end at byte %zd",
            d->label, what, col, PyTuple_GET_ITEM(d->names, col), at, end);
    else
        msg = PyUnicode_FromFormat(
            "binlog row event of %U: %s at byte %zd, its rows end at byte %zd", d->label, what,
            at, end);
    if (msg != NULL) {
        PyErr_SetObject(d->error, msg);
        Py_DECREF(msg);
    }
    return NULL;
}

static void
Decoder_dealloc(Decoder *d)
{
    if (d->cols != NULL) {
        for (Py_ssize_t i = 0; i < d->ncols; i++) {
            Py_XDECREF(d->cols[i].encoding);
            Py_XDECREF(d->cols[i].reader);
            Py_XDECREF(d->cols[i].reason);
        }
        PyMem_Free(d->cols);
    }
    Py_XDECREF(d->names);
    Py_XDECREF(d->label);
    Py_XDECREF(d->null_reason);
    Py_XDECREF(d->bitmap_reason);
    Py_XDECREF(d->error);
    Py_XDECREF(d->shapes);
    Py_TYPE(d)->tp_free((PyObject *)d);
}

static int
Decoder_init(Decoder *d, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"columns", "names", "label", "null_reason", "bitmap_reason", "error",
                             NULL};
    PyObject *columns, *names, *label, *null_reason, *bitmap_reason, *error;
    if (d->cols != NULL) {
        PyErr_SetString(PyExc_TypeError, "Decoder is initialized once");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!O!UUUO:Decoder", kwlist, &PyTuple_Type,
                                     &columns, &PyTuple_Type, &names, &label, &null_reason,
                                     &bitmap_reason, &error))
        return -1;
    if (!PyExceptionClass_Check(error)) {
        PyErr_SetString(PyExc_TypeError, "error must be an exception class");
        return -1;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(columns);
    if (PyTuple_GET_SIZE(names) != n) {
        PyErr_SetString(PyExc_ValueError, "one name per column");
        return -1;
    }
    d->cols = PyMem_Calloc(n ? n : 1, sizeof(Column));
    if (d->cols == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    d->ncols = n;
    for (Py_ssize_t i = 0; i < n; i++) {
        Column *c = &d->cols[i];
        PyObject *encoding, *reader, *reason;
        if (!PyTuple_Check(PyTuple_GET_ITEM(columns, i)) ||
            !PyArg_ParseTuple(PyTuple_GET_ITEM(columns, i), "iiOOO:column", &c->kind, &c->size,
                              &encoding, &reader, &reason))
            return -1;
        if (!PyCallable_Check(reader) || (reason != Py_None && !PyCallable_Check(reason))) {
            PyErr_Format(PyExc_TypeError, "column %zd: reader and reason must be callable", i);
            return -1;
        }
        int ok;
        switch (c->kind) {
        case K_CALL: ok = 1; break;
        case K_INT:
        case K_UINT: ok = c->size == 1 || c->size == 2 || c->size == 3 || c->size == 4 || c->size == 8; break;
        case K_FLOAT: ok = c->size == 4 || c->size == 8; break;
        case K_TEXT: ok = c->size >= 1 && c->size <= 4 && PyUnicode_Check(encoding); break;
        case K_BYTES: ok = c->size >= 1 && c->size <= 4; break;
        case K_DATETIME2:
        case K_TIMESTAMP2: ok = c->size >= 0 && c->size <= 6; break;
        case K_DATE: ok = 1; break;
        default: ok = 0;
        }
        if (!ok) {
            PyErr_Format(PyExc_ValueError, "column %zd: kind %d with size %d is not supported", i,
                         c->kind, c->size);
            return -1;
        }
        if (c->kind == K_TEXT) {
            c->enc = PyUnicode_AsUTF8(encoding);
            if (c->enc == NULL)
                return -1;
            Py_INCREF(encoding);
            c->encoding = encoding;
        }
        Py_INCREF(reader);
        c->reader = reader;
        if (reason != Py_None) {
            Py_INCREF(reason);
            c->reason = reason;
        }
    }
    Py_INCREF(names);
    d->names = names;
    Py_INCREF(label);
    d->label = label;
    Py_INCREF(null_reason);
    d->null_reason = null_reason;
    Py_INCREF(bitmap_reason);
    d->bitmap_reason = bitmap_reason;
    Py_INCREF(error);
    d->error = error;
    d->shapes = PyDict_New();
    return d->shapes == NULL ? -1 : 0;
}

static inline uint64_t
le(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static inline uint64_t
be(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = (v << 8) | p[i];
    return v;
}

static inline int
bit(const unsigned char *bitmap, Py_ssize_t i)
{
    return (bitmap[i >> 3] >> (i & 7)) & 1;
}

static int
days_in_month(int year, int month)
{
    static const int days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (month == 2 && ((year % 4 == 0 && year % 100 != 0) || year % 400 == 0))
        return 29;
    return days[month - 1];
}

static int
valid_date(int64_t year, int64_t month, int64_t day)
{
    return year >= 1 && year <= 9999 && month >= 1 && month <= 12 && day >= 1 &&
           day <= days_in_month((int)year, (int)month);
}

/* The fraction of DATETIME2/TIMESTAMP2 in microseconds, as mysql-replication reads it. */
static int64_t
fraction(const unsigned char *p, int fsp)
{
    int size = FSP_BYTES[fsp];
    if (size == 0)
        return 0;
    int64_t value = (int64_t)be(p, size);
    if (value & ((int64_t)1 << (8 * size - 1)))
        value -= (int64_t)1 << (8 * size); /* signed */
    if (fsp % 2)
        value /= 10; /* int(value / 10): truncation toward zero */
    return value * POW10[6 - fsp];
}

/* Days since 1970-01-01 -> civil date (H. Hinnant's algorithm), days >= 0. */
static void
civil(int64_t days, int *year, int *month, int *day)
{
    days += 719468;
    int64_t era = days / 146097;
    int64_t doe = days - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t y = yoe + era * 400;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    int64_t d = doy - (153 * mp + 2) / 5 + 1;
    int64_t m = mp < 10 ? mp + 3 : mp - 9;
    *year = (int)(y + (m <= 2));
    *month = (int)m;
    *day = (int)d;
}

/* The column's Python reader at pos: its value; *pos moves past it. */
static PyObject *
call_reader(Decoder *d, Py_ssize_t i, PyObject *data, Py_ssize_t *pos, Py_ssize_t end)
{
    PyObject *at = PyLong_FromSsize_t(*pos);
    if (at == NULL)
        return NULL;
    PyObject *result = PyObject_CallFunctionObjArgs(d->cols[i].reader, data, at, NULL);
    Py_DECREF(at);
    if (result == NULL)
        return NULL;
    d->fallbacks++;
    if (!PyTuple_CheckExact(result) || PyTuple_GET_SIZE(result) != 2) {
        Py_DECREF(result);
        PyErr_Format(PyExc_TypeError, "column %zd: its reader must return (value, offset)", i);
        return NULL;
    }
    Py_ssize_t after = PyLong_AsSsize_t(PyTuple_GET_ITEM(result, 1));
    if (after == -1 && PyErr_Occurred()) {
        Py_DECREF(result);
        return NULL;
    }
    if (after < *pos || after > end) {
        Py_DECREF(result);
        return malformed(d, "a value running past the rows", i, *pos, end);
    }
    PyObject *value = PyTuple_GET_ITEM(result, 0);
    Py_INCREF(value);
    Py_DECREF(result);
    *pos = after;
    return value;
}

/* One non-NULL value of column i at *pos (bounds-checked against end). */
static PyObject *
read_value(Decoder *d, Py_ssize_t i, PyObject *data, const unsigned char *buf, Py_ssize_t *pos,
           Py_ssize_t end)
{
    Column *c = &d->cols[i];
    Py_ssize_t p = *pos;
    Py_ssize_t left = end - p;
    const unsigned char *s = buf + p;
    switch (c->kind) {
    case K_INT: {
        if (left < c->size)
            return malformed(d, "a truncated integer", i, p, end);
        uint64_t raw = le(s, c->size);
        int bits = 8 * c->size;
        int64_t v;
        if (bits < 64 && (raw & ((uint64_t)1 << (bits - 1))))
            v = (int64_t)(raw - ((uint64_t)1 << bits));
        else
            v = (int64_t)raw;
        *pos = p + c->size;
        return PyLong_FromLongLong(v);
    }
    case K_UINT:
        if (left < c->size)
            return malformed(d, "a truncated integer", i, p, end);
        *pos = p + c->size;
        return PyLong_FromUnsignedLongLong(le(s, c->size));
    case K_FLOAT: {
        if (left < c->size)
            return malformed(d, "a truncated float", i, p, end);
        double v = c->size == 4 ? PyFloat_Unpack4((const char *)s, 1)
                                : PyFloat_Unpack8((const char *)s, 1);
        if (v == -1.0 && PyErr_Occurred())
            return NULL;
        *pos = p + c->size;
        return PyFloat_FromDouble(v);
    }
    case K_TEXT:
    case K_BYTES: {
        if (left < c->size)
            return malformed(d, "a truncated length", i, p, end);
        uint64_t n = le(s, c->size);
        if (n > (uint64_t)(left - c->size))
            return malformed(d, "a string running past the rows", i, p, end);
        const char *start = (const char *)s + c->size;
        *pos = p + c->size + (Py_ssize_t)n;
        if (c->kind == K_TEXT)
            return PyUnicode_Decode(start, (Py_ssize_t)n, c->enc, "strict");
        if (n == 0)
            return PyUnicode_FromStringAndSize("", 0);
        return PyBytes_FromStringAndSize(start, (Py_ssize_t)n);
    }
    case K_DATETIME2: {
        int width = 5 + FSP_BYTES[c->size];
        if (left < width)
            return malformed(d, "a truncated DATETIME", i, p, end);
        uint64_t packed = be(s, 5);
        int64_t micros = fraction(s + 5, c->size);
        int64_t ym = (packed >> 22) & 0x1FFFF;
        int64_t year = ym / 13, month = ym % 13, day = (packed >> 17) & 0x1F;
        int hh = (packed >> 12) & 0x1F, mi = (packed >> 6) & 0x3F, ss = packed & 0x3F;
        if (!valid_date(year, month, day) || hh > 23 || mi > 59 || ss > 59 || micros < 0 ||
            micros > 999999)
            return call_reader(d, i, data, pos, end); /* the zero-date text, the library's error */
        *pos = p + width;
        return PyDateTime_FromDateAndTime((int)year, (int)month, (int)day, hh, mi, ss,
                                          (int)micros);
    }
    case K_TIMESTAMP2: {
        int width = 4 + FSP_BYTES[c->size];
        if (left < width)
            return malformed(d, "a truncated TIMESTAMP", i, p, end);
        int64_t seconds = (int32_t)(uint32_t)be(s, 4);
        int64_t micros = fraction(s + 4, c->size);
        if (seconds < 0 || micros > 999999)
            return call_reader(d, i, data, pos, end);
        int year, month, day;
        civil(seconds / 86400, &year, &month, &day);
        int64_t clock = seconds % 86400;
        *pos = p + width;
        return PyDateTime_FromDateAndTime(year, month, day, (int)(clock / 3600),
                                          (int)(clock / 60 % 60), (int)(clock % 60),
                                          micros > 0 ? (int)micros : 0);
    }
    case K_DATE: {
        if (left < 3)
            return malformed(d, "a truncated DATE", i, p, end);
        uint64_t raw = le(s, 3);
        int64_t year = raw >> 9, month = (raw >> 5) & 0xF, day = raw & 0x1F;
        if (!valid_date(year, month, day))
            return call_reader(d, i, data, pos, end);
        *pos = p + 3;
        return PyDate_FromDate((int)year, (int)month, (int)day);
    }
    default:
        return call_reader(d, i, data, pos, end);
    }
}

/* reasons[i] = reason, copying *reasons first when it is shared (from the shapes cache). */
static int
set_reason(PyObject **reasons, int *owned, Py_ssize_t i, PyObject *reason)
{
    if (*reasons == NULL || !*owned) {
        PyObject *copy = *reasons == NULL ? PyDict_New() : PyDict_Copy(*reasons);
        if (copy == NULL)
            return -1;
        Py_XDECREF(*reasons);
        *reasons = copy;
        *owned = 1;
    }
    PyObject *key = PyLong_FromSsize_t(i);
    if (key == NULL)
        return -1;
    int rc = PyDict_SetItem(*reasons, key, reason);
    Py_DECREF(key);
    return rc;
}

/* A None the column's Python reader returned for a non-NULL value: the library's reason. */
static int
reader_none(Decoder *d, Py_ssize_t i, PyObject **reasons, int *owned)
{
    PyObject *reason;
    if (d->cols[i].reason != NULL) {
        reason = PyObject_CallNoArgs(d->cols[i].reason);
        if (reason == NULL)
            return -1;
    } else {
        reason = d->null_reason;
        Py_INCREF(reason);
    }
    int rc = set_reason(reasons, owned, i, reason);
    Py_DECREF(reason);
    return rc;
}

/* The shared reasons of a full image with NULL bitmap `bitmap` (its unused high bits already
 * cleared): one entry per NULL column, cached per bitmap. */
static PyObject *
shape_reasons(Decoder *d, const unsigned char *bitmap)
{
    Py_ssize_t width = (d->ncols + 7) >> 3;
    PyObject *key = _PyLong_FromByteArray(bitmap, width, 1, 0);
    if (key == NULL)
        return NULL;
    PyObject *reasons = PyDict_GetItemWithError(d->shapes, key);
    if (reasons != NULL) {
        Py_DECREF(key);
        Py_INCREF(reasons);
        return reasons;
    }
    if (PyErr_Occurred()) {
        Py_DECREF(key);
        return NULL;
    }
    reasons = PyDict_New();
    if (reasons == NULL) {
        Py_DECREF(key);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < d->ncols; i++) {
        if (!bit(bitmap, i))
            continue;
        PyObject *index = PyLong_FromSsize_t(i);
        if (index == NULL || PyDict_SetItem(reasons, index, d->null_reason) < 0) {
            Py_XDECREF(index);
            Py_DECREF(reasons);
            Py_DECREF(key);
            return NULL;
        }
        Py_DECREF(index);
    }
    if (PyDict_GET_SIZE(d->shapes) < 64 && PyDict_SetItem(d->shapes, key, reasons) < 0) {
        Py_DECREF(reasons);
        Py_DECREF(key);
        return NULL;
    }
    Py_DECREF(key);
    return reasons;
}

/* One row image at *pos with present bitmap `present` (width bytes): (values, reasons). */
static PyObject *
read_image(Decoder *d, PyObject *data, const unsigned char *buf, Py_ssize_t *pos, Py_ssize_t end,
           const unsigned char *present, Py_ssize_t width)
{
    Py_ssize_t n = d->ncols;
    int full = 1;
    Py_ssize_t count = 0; /* bits set in the whole present bitmap, stray high bits included */
    for (Py_ssize_t b = 0; b < width; b++)
        count += __builtin_popcount(present[b]);
    for (Py_ssize_t i = 0; i < n && full; i++)
        full = bit(present, i);
    if (full && count != n)
        full = 0; /* stray high bits: the Python decoder reads such an image column by column */
    Py_ssize_t nwidth = full ? (n + 7) >> 3 : (count + 7) >> 3;
    if (end - *pos < nwidth)
        return malformed(d, "a truncated NULL bitmap", -1, *pos, end);
    unsigned char nulls[1024];
    unsigned char *bitmap = nwidth <= (Py_ssize_t)sizeof nulls ? nulls : PyMem_Malloc(nwidth);
    if (bitmap == NULL)
        return PyErr_NoMemory();
    memcpy(bitmap, buf + *pos, nwidth);
    *pos += nwidth;
    PyObject *values = PyList_New(n);
    PyObject *reasons = NULL;
    int owned = 0, any_null = 0;
    if (values == NULL)
        goto fail;
    if (full) {
        if ((n & 7) && nwidth)
            bitmap[nwidth - 1] &= (unsigned char)((1u << (n & 7)) - 1);
        for (Py_ssize_t i = 0; i < n; i++) {
            if (bit(bitmap, i)) {
                any_null = 1;
                Py_INCREF(Py_None);
                PyList_SET_ITEM(values, i, Py_None);
                continue;
            }
            PyObject *v = read_value(d, i, data, buf, pos, end);
            if (v == NULL)
                goto fail;
            PyList_SET_ITEM(values, i, v);
        }
        if (any_null && (reasons = shape_reasons(d, bitmap)) == NULL)
            goto fail;
        for (Py_ssize_t i = 0; i < n; i++) {
            /* A None a Python reader returned for a non-NULL value. */
            if (PyList_GET_ITEM(values, i) == Py_None && d->cols[i].kind == K_CALL &&
                !bit(bitmap, i) && reader_none(d, i, &reasons, &owned) < 0)
                goto fail;
        }
    } else {
        Py_ssize_t b = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            if (!bit(present, i)) {
                Py_INCREF(Py_None);
                PyList_SET_ITEM(values, i, Py_None);
                if (set_reason(&reasons, &owned, i, d->bitmap_reason) < 0)
                    goto fail;
                continue;
            }
            int is_null = bit(bitmap, b);
            b++;
            if (is_null) {
                Py_INCREF(Py_None);
                PyList_SET_ITEM(values, i, Py_None);
                if (set_reason(&reasons, &owned, i, d->null_reason) < 0)
                    goto fail;
                continue;
            }
            PyObject *v = read_value(d, i, data, buf, pos, end);
            if (v == NULL)
                goto fail;
            PyList_SET_ITEM(values, i, v);
            if (v == Py_None && reader_none(d, i, &reasons, &owned) < 0)
                goto fail;
        }
    }
    if (bitmap != nulls)
        PyMem_Free(bitmap);
    if (reasons == NULL) {
        Py_INCREF(Py_None);
        reasons = Py_None;
    }
    PyObject *pair = PyTuple_New(2);
    if (pair == NULL) {
        Py_DECREF(values);
        Py_DECREF(reasons);
        return NULL;
    }
    PyTuple_SET_ITEM(pair, 0, values);
    PyTuple_SET_ITEM(pair, 1, reasons);
    return pair;
fail:
    if (bitmap != nulls)
        PyMem_Free(bitmap);
    Py_XDECREF(values);
    Py_XDECREF(reasons);
    return NULL;
}

static PyObject *
Decoder_rows(Decoder *d, PyObject *args)
{
    PyObject *data;
    Py_ssize_t pos, end;
    int paired;
    if (!PyArg_ParseTuple(args, "O!nnp:rows", &PyBytes_Type, &data, &pos, &end, &paired))
        return NULL;
    if (d->cols == NULL) {
        PyErr_SetString(PyExc_TypeError, "Decoder.__init__ was not called");
        return NULL;
    }
    const unsigned char *buf = (const unsigned char *)PyBytes_AS_STRING(data);
    if (end < 0 || end > PyBytes_GET_SIZE(data)) {
        PyErr_Format(PyExc_ValueError, "rows(): end %zd outside the %zd bytes", end,
                     PyBytes_GET_SIZE(data));
        return NULL;
    }
    if (pos < 0 || pos > end)
        return malformed(d, "a post-header running past the event", -1, pos, end);
    /* The column count: a length-coded integer. */
    if (pos >= end)
        return malformed(d, "no column count", -1, pos, end);
    uint64_t count;
    unsigned char first = buf[pos];
    if (first < 251) {
        count = first;
        pos += 1;
    } else {
        int size = first == 252 ? 2 : first == 253 ? 3 : first == 254 ? 8 : 0;
        if (size == 0 || end - pos - 1 < size)
            return malformed(d, "a malformed column count", -1, pos, end);
        count = le(buf + pos + 1, size);
        pos += 1 + size;
    }
    if (count != (uint64_t)d->ncols) {
        PyObject *msg = PyUnicode_FromFormat(
            "binlog row event of %U: %llu columns, its table map has %zd", d->label,
            (unsigned long long)count, d->ncols);
        if (msg != NULL) {
            PyErr_SetObject(d->error, msg);
            Py_DECREF(msg);
        }
        return NULL;
    }
    Py_ssize_t width = (d->ncols + 7) >> 3;
    if (end - pos < width * (paired ? 2 : 1))
        return malformed(d, "a truncated columns-present bitmap", -1, pos, end);
    const unsigned char *present = buf + pos;
    pos += width;
    const unsigned char *after = present;
    if (paired) {
        after = buf + pos;
        pos += width;
    }
    PyObject *images = PyList_New(0);
    if (images == NULL)
        return NULL;
    while (pos < end) {
        Py_ssize_t from = pos;
        PyObject *image = read_image(d, data, buf, &pos, end, present, width);
        if (image == NULL || PyList_Append(images, image) < 0) {
            Py_XDECREF(image);
            Py_DECREF(images);
            return NULL;
        }
        Py_DECREF(image);
        if (paired) {
            image = read_image(d, data, buf, &pos, end, after, width);
            if (image == NULL || PyList_Append(images, image) < 0) {
                Py_XDECREF(image);
                Py_DECREF(images);
                return NULL;
            }
            Py_DECREF(image);
        }
        if (pos == from) {
            /* Images of no columns take no bytes: bytes left after them would loop forever. */
            Py_DECREF(images);
            return malformed(d, "row images of no columns before more bytes", -1, pos, end);
        }
    }
    return images;
}

static PyObject *
Decoder_fallbacks(Decoder *d, void *closure)
{
    return PyLong_FromSsize_t(d->fallbacks);
}

static PyMethodDef Decoder_methods[] = {
    {"rows", (PyCFunction)Decoder_rows, METH_VARARGS,
     "rows(data, pos, end, paired) -> [(values, reasons), ...]: the row images of a row event "
     "whose column count starts at data[pos] and whose rows end at data[end]."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Decoder_getset[] = {
    {"fallbacks", (getter)Decoder_fallbacks, NULL,
     "Values read by the columns' Python readers so far.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

/* scan(buffer, at, seq, checksum, maps, table_map) -> (at, seq, payload or None, log_pos)
 *
 * The packets already buffered from `at` on, framed as PyMySQL frames them (3-byte length,
 * sequence number `seq`), while each is whole, in sequence, shorter than 16 MiB, not an error
 * packet and a binlog event: a TABLE_MAP whose body (after the common header, without the
 * checksum) is a key of `maps` is applied here (table_map[table id] = maps[body]) and the scan
 * goes on; the first other event is consumed and its payload returned. log_pos is the next
 * position of the last TABLE_MAP applied (0: none). Anything else stops the scan without
 * consuming the packet (payload None): the caller reads it its usual way.
 */
#define MAX_PACKET_LEN 0xFFFFFF
#define TABLE_MAP_EVENT 19

static PyObject *
scan(PyObject *module, PyObject *args)
{
    PyObject *buffer, *maps, *table_map;
    Py_ssize_t at;
    int seq, checksum;
    if (!PyArg_ParseTuple(args, "O!nipO!O!:scan", &PyBytes_Type, &buffer, &at, &seq, &checksum,
                          &PyDict_Type, &maps, &PyDict_Type, &table_map))
        return NULL;
    const unsigned char *buf = (const unsigned char *)PyBytes_AS_STRING(buffer);
    Py_ssize_t size = PyBytes_GET_SIZE(buffer);
    if (at < 0 || at > size || seq < 0 || seq > 255) {
        PyErr_SetString(PyExc_ValueError, "scan(): offset or sequence number out of range");
        return NULL;
    }
    uint64_t log_pos = 0;
    PyObject *payload = NULL;
    while (size - at >= 4) {
        const unsigned char *p = buf + at;
        Py_ssize_t length = (Py_ssize_t)le(p, 3);
        if (length == 0 || length >= MAX_PACKET_LEN || p[3] != seq || size - at - 4 < length ||
            p[4] == 0xFF || length < 20 || p[4] != 0)
            break;
        const unsigned char *event = p + 4;
        int kind = event[5];
        Py_ssize_t event_size = (Py_ssize_t)le(event + 10, 4);
        Py_ssize_t end = 1 + event_size - (checksum ? 4 : 0);
        if (kind == TABLE_MAP_EVENT && end >= 26 && end <= length) {
            PyObject *body = PyBytes_FromStringAndSize((const char *)event + 20, end - 20);
            if (body == NULL)
                return NULL;
            PyObject *table = PyDict_GetItemWithError(maps, body);
            Py_DECREF(body);
            if (table == NULL && PyErr_Occurred())
                return NULL;
            if (table != NULL) {
                PyObject *table_id = PyLong_FromUnsignedLongLong(le(event + 20, 6));
                if (table_id == NULL)
                    return NULL;
                int rc = PyDict_SetItem(table_map, table_id, table);
                Py_DECREF(table_id);
                if (rc < 0)
                    return NULL;
                uint64_t next = le(event + 14, 4);
                if (next)
                    log_pos = next;
                at += 4 + length;
                seq = (seq + 1) & 0xFF;
                continue;
            }
        }
        payload = PyBytes_FromStringAndSize((const char *)event, length);
        if (payload == NULL)
            return NULL;
        at += 4 + length;
        seq = (seq + 1) & 0xFF;
        break;
    }
    if (payload == NULL) {
        Py_INCREF(Py_None);
        payload = Py_None;
    }
    return Py_BuildValue("(niNK)", at, seq, payload, (unsigned long long)log_pos);
}

/* frame_rows(buffer, pos, seq) -> (frames, pos, seq, end, end_at): the complete row packets of
 * a text result set in buffer from pos (capture/mysql/result_set.py's frame_packets, in C): the
 * payload start and end of each, as native int64 pairs in the bytes frames. Stops at the EOF
 * (0xFE, shorter than 9 bytes) or error (0xFF) packet that ends the rows (end is its first byte,
 * end_at its payload offset, pos after it), or, with end 0, at the first packet it leaves to
 * the Python framing: one not read whole yet, one out of sequence (Python raises PyMySQL's
 * error), or one of 0xFFFFFF bytes (a row continued in the next packets). Every read is
 * within the buffer. */
static PyObject *
frame_rows(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t pos;
    int seq;
    if (!PyArg_ParseTuple(args, "y*ni", &view, &pos, &seq))
        return NULL;
    const uint8_t *buf = (const uint8_t *)view.buf;
    Py_ssize_t size = view.len;
    if (pos < 0 || pos > size || seq < 0 || seq > 255) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "frame_rows: position or sequence out of range");
        return NULL;
    }
    /* At most one row per 4 header bytes: 16 bytes of frames each. */
    Py_ssize_t most = (size - pos) / 4;
    PyObject *frames = PyBytes_FromStringAndSize(NULL, most * 16);
    if (frames == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    int64_t *out = (int64_t *)PyBytes_AS_STRING(frames);
    Py_ssize_t rows = 0;
    int end = 0;
    Py_ssize_t end_at = 0;
    while (pos + 4 <= size) {
        uint32_t length = (uint32_t)buf[pos] | ((uint32_t)buf[pos + 1] << 8) |
                          ((uint32_t)buf[pos + 2] << 16);
        if ((int)buf[pos + 3] != seq || length == 0xFFFFFF)
            break;
        Py_ssize_t start = pos + 4;
        Py_ssize_t stop = start + (Py_ssize_t)length;
        if (stop > size)
            break;
        seq = (seq + 1) & 0xFF;
        int first = length ? buf[start] : 0;
        if (first >= 0xFE && (first == 0xFF || length < 9)) {
            end = first;
            end_at = start;
            pos = stop;
            break;
        }
        out[2 * rows] = (int64_t)start;
        out[2 * rows + 1] = (int64_t)stop;
        rows++;
        pos = stop;
    }
    PyBuffer_Release(&view);
    if (_PyBytes_Resize(&frames, rows * 16) < 0)
        return NULL;
    return Py_BuildValue("(Nniin)", frames, pos, seq, end, end_at);
}

/* split_rows(data, starts, ends, width) -> [(views, validity, nulls), ...]: the length-encoded
 * values of each row payload data[starts[r]:ends[r]] (starts, ends: native int64 arrays) as
 * `width` Arrow binary_view columns over data (capture/mysql/result_set.py's split_columns, in
 * C, with its errors in its order: column by column, for every row). Per column: the views (16
 * bytes a value: its length, then the value inline when at most 12 bytes, else its first 4
 * bytes, buffer 0 and its offset in data), the validity bitmap (None without NULLs) and the
 * NULL count. data must be shorter than 2 GiB (a view's offset is 32 bits). Every read is
 * within its row. A malformed row raises ValueError with split_columns' message. */
static PyObject *
split_rows(PyObject *self, PyObject *args)
{
    Py_buffer data, starts_view, ends_view;
    Py_ssize_t width;
    if (!PyArg_ParseTuple(args, "y*y*y*n", &data, &starts_view, &ends_view, &width))
        return NULL;
    PyObject *columns = NULL;
    int64_t *pos = NULL;
    const uint8_t *bytes = (const uint8_t *)data.buf;
    const int64_t *starts = (const int64_t *)starts_view.buf;
    const int64_t *ends = (const int64_t *)ends_view.buf;
    Py_ssize_t n = starts_view.len / 8;
    if (starts_view.len % 8 || ends_view.len != starts_view.len || width < 0 ||
        data.len >= ((Py_ssize_t)1 << 31)) {
        PyErr_SetString(PyExc_ValueError, "split_rows: malformed arguments");
        goto done;
    }
    for (Py_ssize_t r = 0; r < n; r++) {
        if (starts[r] < 0 || starts[r] > ends[r] || ends[r] > data.len) {
            PyErr_SetString(PyExc_ValueError, "split_rows: a row outside the data");
            goto done;
        }
    }
    pos = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(int64_t));
    if (pos == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    memcpy(pos, starts, (size_t)n * sizeof(int64_t));
    columns = PyList_New(0);
    if (columns == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < width; i++) {
        for (Py_ssize_t r = 0; r < n; r++) {
            if (pos[r] >= ends[r]) {
                PyErr_Format(PyExc_ValueError, "a result row ends before its column %zd of %zd",
                             i + 1, width);
                goto fail;
            }
        }
        for (Py_ssize_t r = 0; r < n; r++) {
            if (bytes[pos[r]] == 0xFF) {
                PyErr_Format(PyExc_ValueError,
                             "a result row's column %zd: malformed length (0xFF)", i + 1);
                goto fail;
            }
        }
        PyObject *views = PyBytes_FromStringAndSize(NULL, n * 16);
        if (views == NULL)
            goto fail;
        uint8_t *out = (uint8_t *)PyBytes_AS_STRING(views);
        memset(out, 0, (size_t)n * 16);
        Py_ssize_t bitmap_size = (n + 7) / 8;
        PyObject *validity = PyBytes_FromStringAndSize(NULL, bitmap_size);
        if (validity == NULL) {
            Py_DECREF(views);
            goto fail;
        }
        uint8_t *valid = (uint8_t *)PyBytes_AS_STRING(validity);
        memset(valid, 0, (size_t)bitmap_size);
        Py_ssize_t nulls = 0;
        for (Py_ssize_t r = 0; r < n; r++) {
            int64_t at = pos[r];
            int64_t end = ends[r];
            uint8_t first = bytes[at];
            int64_t header = 1;
            uint64_t length = first;
            if (first == 0xFB) {
                nulls++;
                pos[r] = at + 1;
                continue; /* a NULL: its view stays zero, its validity bit 0 */
            }
            if (first >= 0xFC) {
                int size = first == 0xFC ? 2 : first == 0xFD ? 3 : 8;
                if (at + 1 + size > end) {
                    length = UINT64_MAX; /* its length runs past the row */
                } else {
                    length = 0;
                    for (int k = 0; k < size; k++)
                        length |= (uint64_t)bytes[at + 1 + k] << (8 * k);
                }
                header = 1 + size;
            }
            int64_t start = at + header;
            if (start > end || length > (uint64_t)(end - start)) {
                PyErr_Format(PyExc_ValueError, "a result row's column %zd runs past the row's end",
                             i + 1);
                Py_DECREF(views);
                Py_DECREF(validity);
                goto fail;
            }
            valid[r >> 3] |= (uint8_t)(1u << (r & 7));
            uint8_t *view = out + 16 * r;
            int32_t size32 = (int32_t)length;
            memcpy(view, &size32, 4);
            if (length <= 12) {
                memcpy(view + 4, bytes + start, (size_t)length);
            } else {
                int32_t buffer = 0;
                int32_t offset = (int32_t)start;
                memcpy(view + 4, bytes + start, 4);
                memcpy(view + 8, &buffer, 4);
                memcpy(view + 12, &offset, 4);
            }
            pos[r] = start + (int64_t)length;
        }
        PyObject *item;
        if (nulls) {
            item = Py_BuildValue("(NNn)", views, validity, nulls);
        } else {
            Py_DECREF(validity);
            item = Py_BuildValue("(NOn)", views, Py_None, nulls);
        }
        if (item == NULL)
            goto fail;
        if (PyList_Append(columns, item) < 0) {
            Py_DECREF(item);
            goto fail;
        }
        Py_DECREF(item);
    }
    for (Py_ssize_t r = 0; r < n; r++) {
        if (pos[r] != ends[r]) {
            PyErr_Format(PyExc_ValueError, "a result row has more than its %zd columns", width);
            goto fail;
        }
    }
    goto done;
fail:
    Py_CLEAR(columns);
done:
    PyMem_Free(pos);
    PyBuffer_Release(&data);
    PyBuffer_Release(&starts_view);
    PyBuffer_Release(&ends_view);
    return columns;
}

static PyMethodDef module_methods[] = {
    {"split_rows", split_rows, METH_VARARGS,
     "split_rows(data, starts, ends, width) -> [(views, validity, nulls), ...]: the values of "
     "each row payload as binary_view columns (see capture/mysql/result_set.py)."},
    {"frame_rows", frame_rows, METH_VARARGS,
     "frame_rows(buffer, pos, seq) -> (frames, pos, seq, end, end_at): the complete row "
     "packets of a text result set, framed (see capture/mysql/result_set.py)."},
    {"scan", scan, METH_VARARGS,
     "scan(buffer, at, seq, checksum, maps, table_map) -> (at, seq, payload, log_pos): the "
     "next binlog event of the buffered packets, known table maps applied on the way."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject DecoderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "capture.mysql._rowdecode.Decoder",
    .tp_basicsize = sizeof(Decoder),
    .tp_dealloc = (destructor)Decoder_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Decoder(columns, names, label, null_reason, bitmap_reason, error): the row "
              "images of one table map.",
    .tp_methods = Decoder_methods,
    .tp_getset = Decoder_getset,
    .tp_init = (initproc)Decoder_init,
    .tp_new = PyType_GenericNew,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, .m_name = "capture.mysql._rowdecode",
    .m_doc = "Binlog row images decoded in C (see capture/mysql/binlog.py).", .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC
PyInit__rowdecode(void)
{
    PyDateTime_IMPORT;
    if (PyDateTimeAPI == NULL)
        return NULL;
    if (PyType_Ready(&DecoderType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&DecoderType);
    if (PyModule_AddObject(m, "Decoder", (PyObject *)&DecoderType) < 0 ||
        PyModule_AddIntConstant(m, "CALL", K_CALL) < 0 ||
        PyModule_AddIntConstant(m, "INT", K_INT) < 0 ||
        PyModule_AddIntConstant(m, "UINT", K_UINT) < 0 ||
        PyModule_AddIntConstant(m, "FLOAT", K_FLOAT) < 0 ||
        PyModule_AddIntConstant(m, "TEXT", K_TEXT) < 0 ||
        PyModule_AddIntConstant(m, "BYTES", K_BYTES) < 0 ||
        PyModule_AddIntConstant(m, "DATETIME2", K_DATETIME2) < 0 ||
        PyModule_AddIntConstant(m, "TIMESTAMP2", K_TIMESTAMP2) < 0 ||
        PyModule_AddIntConstant(m, "DATE", K_DATE) < 0) {
        Py_DECREF(&DecoderType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
