/*
 * dbsim's native hot loop for ODBC sessions (kind odbc and sqlserver), over the ODBC API as
 * unixODBC's driver manager offers it.
 *
 * The same contract as marialoop.c's Loop: a session thread hands it a batch of operations
 * the workload's own generators dealt (pack.h's arrays); each statement is prepared once per
 * connection (SQLPrepareW) and run with the GIL released, one SQLExecute per operation, its
 * rows fetched and dropped and its cursor closed. The connection is in autocommit, so a write
 * is committed alone as sqlkit's contract asks (the pyodbc path commits it itself). Integer
 * parameters stay bound to a per-statement cell between executions (the driver reads the
 * cell at SQLExecute), so a statement of integers binds once per connection; text is bound
 * per operation, as 8-bit text when it is ASCII and as UTF-16 when it is not (a Unicode
 * driver reads 8-bit text in the process's locale, which need not be UTF-8). The loop waits
 * for each operation's intended start in an open loop and writes each operation's latency and
 * outcome into the caller's arrays; a failed operation's error is kept once per batch
 * (SQLSTATE, native error, the driver's first diagnostic record as pyodbc reads it on Unix,
 * the ODBC function, whether the connection is gone) and a lost connection ends the batch so
 * that Python can reconnect.
 */
#include "batch.h"
#include "pack.h"

#include <sql.h>
#include <sqlext.h>
#include <stdio.h>

#define MAX_PARAMS 64
#define MAX_STATEMENTS 256
#define MAX_ERRORS 32
#define MESSAGE_LEN 480
#define UNBOUND (-1)

typedef struct {
    char sqlstate[6];
    long native; /* the driver's native error number */
    char function[24];
    SQLWCHAR message[MESSAGE_LEN]; /* UTF-16 as the driver gave it; decoded in failures() */
    int message_len;
    int lost;
} Failure;

/* A prepared statement's parameter cells: what SQLBindParameter pointed the driver at. */
typedef struct {
    int64_t value[MAX_PARAMS];
    SQLLEN length[MAX_PARAMS];
    int8_t bound[MAX_PARAMS]; /* the kind bound on this handle, or UNBOUND */
} Cells;

typedef struct {
    PyObject_HEAD
    SQLHENV env;
    SQLHDBC dbc; /* NULL: not connected */
    SQLWCHAR *connection_string;
    SQLSMALLINT connection_len;
    unsigned int timeout_s;
    int n_statements;
    SQLWCHAR *sql[MAX_STATEMENTS];
    SQLINTEGER sql_len[MAX_STATEMENTS];
    int n_params[MAX_STATEMENTS];
    SQLHSTMT stmt[MAX_STATEMENTS]; /* prepared on this connection (NULL: at its next use) */
    Cells *cells[MAX_STATEMENTS];
    SQLWCHAR *wide; /* non-ASCII text parameters of the operation being bound, as UTF-16 */
    size_t wide_cap;
    Failure failures[MAX_ERRORS];
    int n_failures;
} Loop;

/* A Python str as NUL-terminated UTF-16 in native order (SQLWCHAR is 16 bits in unixODBC);
 * its length in code units in *units. NULL with an exception set. */
static SQLWCHAR *wide_copy(PyObject *text, SQLINTEGER *units) {
#if PY_BIG_ENDIAN
    PyObject *bytes = PyUnicode_AsEncodedString(text, "utf-16-be", "strict");
#else
    PyObject *bytes = PyUnicode_AsEncodedString(text, "utf-16-le", "strict");
#endif
    if (bytes == NULL) return NULL;
    Py_ssize_t n = PyBytes_GET_SIZE(bytes);
    SQLWCHAR *out = PyMem_RawMalloc(n + sizeof(SQLWCHAR));
    if (out == NULL) {
        Py_DECREF(bytes);
        PyErr_NoMemory();
        return NULL;
    }
    memcpy(out, PyBytes_AS_STRING(bytes), n);
    out[n / sizeof(SQLWCHAR)] = 0;
    *units = (SQLINTEGER)(n / sizeof(SQLWCHAR));
    Py_DECREF(bytes);
    return out;
}

/* Valid UTF-8 (Python encoded it) into UTF-16 code units; returns how many were written. */
static size_t utf8_to_utf16(const unsigned char *in, size_t n, SQLWCHAR *out) {
    size_t at = 0;
    for (size_t i = 0; i < n;) {
        uint32_t c = in[i];
        int more = c < 0x80 ? 0 : c < 0xE0 ? 1 : c < 0xF0 ? 2 : 3;
        c &= more == 0 ? 0x7F : more == 1 ? 0x1F : more == 2 ? 0x0F : 0x07;
        for (int k = 1; k <= more && i + k < n; k++) c = (c << 6) | (in[i + k] & 0x3F);
        i += more + 1;
        if (c >= 0x10000) {
            c -= 0x10000;
            out[at++] = (SQLWCHAR)(0xD800 + (c >> 10));
            out[at++] = (SQLWCHAR)(0xDC00 + (c & 0x3FF));
        } else {
            out[at++] = (SQLWCHAR)c;
        }
    }
    return at;
}

/* Whether a driver's SQLRETURN succeeded (SQL_NO_DATA: a searched write that hit no row). */
static inline int ok(SQLRETURN r) { return SQL_SUCCEEDED(r) || r == SQL_NO_DATA; }

/* Closes the connection and its statements (GIL released or not: no Python calls). */
static void drop_connection(Loop *s) {
    for (int i = 0; i < s->n_statements; i++)
        if (s->stmt[i] != NULL) {
            SQLFreeHandle(SQL_HANDLE_STMT, s->stmt[i]);
            s->stmt[i] = NULL;
        }
    if (s->dbc != NULL) {
        SQLDisconnect(s->dbc); /* fails on a connection already gone: freed all the same */
        SQLFreeHandle(SQL_HANDLE_DBC, s->dbc);
        s->dbc = NULL;
    }
}

static void loop_release(Loop *s) {
    drop_connection(s);
    if (s->env != NULL) {
        SQLFreeHandle(SQL_HANDLE_ENV, s->env);
        s->env = NULL;
    }
    PyMem_RawFree(s->connection_string);
    s->connection_string = NULL;
    for (int i = 0; i < s->n_statements; i++) {
        PyMem_RawFree(s->sql[i]);
        PyMem_RawFree(s->cells[i]);
        s->sql[i] = NULL;
        s->cells[i] = NULL;
    }
    s->n_statements = 0;
    PyMem_RawFree(s->wide);
    s->wide = NULL;
    s->wide_cap = 0;
}

static void Loop_dealloc(Loop *s) {
    Py_BEGIN_ALLOW_THREADS
    loop_release(s);
    Py_END_ALLOW_THREADS
    Py_TYPE(s)->tp_free((PyObject *)s);
}

/* Loop(connection_string, login_timeout_s) */
static int Loop_init(Loop *s, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"connection_string", "timeout", NULL};
    PyObject *text;
    unsigned int timeout;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "UI", kwlist, &text, &timeout)) return -1;
    loop_release(s);
    SQLINTEGER units = 0;
    s->connection_string = wide_copy(text, &units);
    if (s->connection_string == NULL) return -1;
    if (units > SHRT_MAX) {
        PyErr_SetString(PyExc_ValueError, "odbcloop: connection string too long");
        return -1;
    }
    s->connection_len = (SQLSMALLINT)units;
    s->timeout_s = timeout;
    if (!SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_ENV, SQL_NULL_HANDLE, &s->env)) ||
        !SQL_SUCCEEDED(SQLSetEnvAttr(s->env, SQL_ATTR_ODBC_VERSION, (SQLPOINTER)SQL_OV_ODBC3, 0))) {
        PyErr_SetString(PyExc_RuntimeError, "odbcloop: the driver manager gave no environment");
        return -1;
    }
    return 0;
}

/* The first diagnostic record of a handle (as pyodbc reads it on Unix) as a failure; its
 * index. A failure with the same SQLSTATE and native error in this batch is reused. */
static int keep_failure(Loop *s, SQLSMALLINT type, SQLHANDLE handle, const char *function) {
    Failure f = {.native = 0, .lost = 0};
    SQLWCHAR state[6] = {0};
    SQLINTEGER native = 0;
    SQLSMALLINT len = 0;
    SQLRETURN r = handle == SQL_NULL_HANDLE
                      ? SQL_ERROR
                      : SQLGetDiagRecW(type, handle, 1, state, &native, f.message, MESSAGE_LEN,
                                       &len);
    if (SQL_SUCCEEDED(r)) {
        for (int k = 0; k < 5; k++) f.sqlstate[k] = (char)(state[k] < 128 ? state[k] : '?');
        f.native = native;
        f.message_len = len < MESSAGE_LEN ? len : MESSAGE_LEN - 1;
    } else { /* as pyodbc says when the driver gave nothing */
        static const char none[] = "The driver did not supply an error!";
        for (size_t k = 0; k < sizeof none - 1; k++) f.message[k] = (SQLWCHAR)none[k];
        f.message_len = (int)(sizeof none - 1);
    }
    snprintf(f.function, sizeof f.function, "%s", function);
    /* Class 08 is a connection exception (the pyodbc path's judgment, PyodbcTarget
     * .is_disconnect); a driver that knows its connection is dead says so whatever the
     * SQLSTATE (psqlODBC answers a terminated backend's FATAL with its own state). */
    f.lost = f.sqlstate[0] == '0' && f.sqlstate[1] == '8';
    if (!f.lost && s->dbc != NULL) {
        SQLUINTEGER dead = SQL_CD_FALSE;
        if (SQL_SUCCEEDED(SQLGetConnectAttr(s->dbc, SQL_ATTR_CONNECTION_DEAD, &dead, 0, NULL)))
            f.lost = dead == SQL_CD_TRUE;
    }
    for (int i = 0; i < s->n_failures; i++) {
        Failure *old = &s->failures[i];
        if (!strcmp(old->sqlstate, f.sqlstate) && old->native == f.native && old->lost == f.lost)
            return i;
    }
    int at = s->n_failures < MAX_ERRORS ? s->n_failures++ : MAX_ERRORS - 1;
    s->failures[at] = f;
    return at;
}

/* Prepares statement i on the connection; 0, or the failure's index + 1. */
static int prepare_one(Loop *s, int i) {
    SQLHSTMT stmt = SQL_NULL_HSTMT;
    if (!SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_STMT, s->dbc, &stmt)))
        return keep_failure(s, SQL_HANDLE_DBC, s->dbc, "SQLAllocHandle") + 1;
    if (!SQL_SUCCEEDED(SQLPrepareW(stmt, s->sql[i], s->sql_len[i]))) {
        int f = keep_failure(s, SQL_HANDLE_STMT, stmt, "SQLPrepareW");
        SQLFreeHandle(SQL_HANDLE_STMT, stmt);
        return f + 1;
    }
    /* Binds beyond the statement's markers are not sent: a workload passes every dialect's
     * version of a statement the same arguments (as OdbcConnection drops the surplus). */
    SQLSMALLINT markers = 0;
    if (SQL_SUCCEEDED(SQLNumParams(stmt, &markers)) && markers < s->n_params[i])
        s->n_params[i] = markers;
    Cells *cells = s->cells[i];
    for (int j = 0; j < MAX_PARAMS; j++) cells->bound[j] = UNBOUND;
    s->stmt[i] = stmt;
    return 0;
}

/* Connects (autocommit on) and prepares every statement; GIL released. -1 or a failure. */
static int open_connection(Loop *s) {
    drop_connection(s);
    s->n_failures = 0;
    if (!SQL_SUCCEEDED(SQLAllocHandle(SQL_HANDLE_DBC, s->env, &s->dbc))) {
        s->dbc = NULL;
        int f = keep_failure(s, SQL_HANDLE_ENV, s->env, "SQLAllocHandle");
        s->failures[f].lost = 1;
        return f;
    }
    SQLSetConnectAttr(s->dbc, SQL_ATTR_LOGIN_TIMEOUT, (SQLPOINTER)(uintptr_t)s->timeout_s, 0);
    SQLRETURN r = SQLDriverConnectW(s->dbc, NULL, s->connection_string, s->connection_len, NULL,
                                    0, NULL, SQL_DRIVER_NOPROMPT);
    const char *failed = SQL_SUCCEEDED(r) ? NULL : "SQLDriverConnectW";
    if (failed == NULL &&
        !SQL_SUCCEEDED(SQLSetConnectAttr(s->dbc, SQL_ATTR_AUTOCOMMIT, (SQLPOINTER)SQL_AUTOCOMMIT_ON,
                                         SQL_IS_UINTEGER)))
        failed = "SQLSetConnectAttr";
    if (failed != NULL) {
        int f = keep_failure(s, SQL_HANDLE_DBC, s->dbc, failed);
        s->failures[f].lost = 1;
        if (SQL_SUCCEEDED(r)) SQLDisconnect(s->dbc);
        SQLFreeHandle(SQL_HANDLE_DBC, s->dbc);
        s->dbc = NULL;
        return f;
    }
    for (int i = 0; i < s->n_statements; i++) {
        int f = prepare_one(s, i);
        /* A statement refused now is prepared again by each of its operations. */
        if (f && s->failures[f - 1].lost) return f - 1;
    }
    return -1;
}

/* The loop's failure i as Python reads it: (sqlstate, native, message, function, lost). */
static PyObject *failure_tuple(void *loop, int i) {
    const Failure *f = &((Loop *)loop)->failures[i];
    int order = PY_BIG_ENDIAN ? 1 : -1;
    PyObject *message = PyUnicode_DecodeUTF16((const char *)f->message,
                                              (Py_ssize_t)f->message_len * sizeof(SQLWCHAR),
                                              "replace", &order);
    if (message == NULL) return NULL;
    return Py_BuildValue("(slNsi)", f->sqlstate, f->native, message, f->function, f->lost);
}

/* connect() -> None, or (sqlstate, native, message, function, lost) when it failed. */
static PyObject *Loop_connect(Loop *s, PyObject *unused) {
    (void)unused;
    if (s->connection_string == NULL || s->env == NULL) {
        PyErr_SetString(PyExc_ValueError, "odbcloop: not initialised");
        return NULL;
    }
    int f;
    Py_BEGIN_ALLOW_THREADS
    f = open_connection(s);
    Py_END_ALLOW_THREADS
    if (f < 0) Py_RETURN_NONE;
    return failure_tuple(s, f);
}

/* prepare(sql, n_params) -> (index, None or the failure): one more statement. */
static PyObject *Loop_prepare(Loop *s, PyObject *args) {
    PyObject *text;
    int n;
    if (!PyArg_ParseTuple(args, "Ui", &text, &n)) return NULL;
    if (s->n_statements >= MAX_STATEMENTS || n < 0 || n > MAX_PARAMS) {
        PyErr_SetString(PyExc_ValueError, "odbcloop: at most 256 statements of 0 to 64 parameters");
        return NULL;
    }
    int i = s->n_statements;
    s->sql[i] = wide_copy(text, &s->sql_len[i]);
    if (s->sql[i] == NULL) return NULL;
    s->cells[i] = PyMem_RawCalloc(1, sizeof(Cells));
    if (s->cells[i] == NULL) {
        PyMem_RawFree(s->sql[i]);
        s->sql[i] = NULL;
        return PyErr_NoMemory();
    }
    s->n_params[i] = n;
    s->stmt[i] = NULL;
    s->n_statements = i + 1;
    if (s->dbc == NULL) return Py_BuildValue("(iO)", i, Py_None); /* at the next connect() */
    int f;
    s->n_failures = 0;
    Py_BEGIN_ALLOW_THREADS
    f = prepare_one(s, i);
    Py_END_ALLOW_THREADS
    if (!f) return Py_BuildValue("(iO)", i, Py_None);
    PyObject *failure = failure_tuple(s, f - 1);
    return failure ? Py_BuildValue("(iN)", i, failure) : NULL;
}

/* Room for an operation's non-ASCII text as UTF-16 (units code units); 0, or -1. */
static int wide_room(Loop *s, size_t units) {
    if (units <= s->wide_cap) return 0;
    size_t want = s->wide_cap ? s->wide_cap : 1024;
    while (want < units) want *= 2;
    SQLWCHAR *bigger = PyMem_RawRealloc(s->wide, want * sizeof(SQLWCHAR));
    if (bigger == NULL) return -1;
    s->wide = bigger, s->wide_cap = want;
    return 0;
}

static int is_ascii(const char *text, size_t n) {
    for (size_t k = 0; k < n; k++)
        if ((unsigned char)text[k] >= 0x80) return 0;
    return 1;
}

/* Binds operation parameters to statement c; 0, or the failure's index + 1. */
static int bind_params(Loop *s, int c, int n, const int64_t *value, const int8_t *kind,
                       const char *text, Py_ssize_t text_len) {
    SQLHSTMT stmt = s->stmt[c];
    Cells *cells = s->cells[c];
    /* UTF-16 needs at most one code unit per UTF-8 byte: room for every text at once, so the
     * buffer does not move between one binding and the next. */
    size_t wide_units = 0;
    for (int j = 0; j < n; j++)
        if (kind[j] == KIND_TEXT && value[j] >= 0 && value[j] < text_len)
            wide_units += strlen(text + value[j]) + 1;
    /* Without that memory, non-ASCII text goes as 8-bit text (the driver may misread it). */
    int wide_ok = wide_units == 0 || wide_room(s, wide_units) == 0;
    size_t wide_at = 0;
    for (int j = 0; j < n; j++) {
        SQLRETURN r = SQL_SUCCESS;
        int8_t k = kind[j];
        if (k == KIND_TEXT && !(value[j] >= 0 && value[j] < text_len)) k = KIND_NULL;
        if (k == KIND_INT) {
            cells->value[j] = value[j];
            cells->length[j] = 0;
            if (cells->bound[j] != KIND_INT)
                r = SQLBindParameter(stmt, (SQLUSMALLINT)(j + 1), SQL_PARAM_INPUT, SQL_C_SBIGINT,
                                     SQL_BIGINT, 0, 0, &cells->value[j], 0, &cells->length[j]);
        } else if (k == KIND_TEXT) {
            const char *at = text + value[j];
            size_t len = strlen(at);
            if (is_ascii(at, len) || !wide_ok) {
                cells->length[j] = (SQLLEN)len;
                r = SQLBindParameter(stmt, (SQLUSMALLINT)(j + 1), SQL_PARAM_INPUT, SQL_C_CHAR,
                                     SQL_VARCHAR, len ? len : 1, 0, (SQLPOINTER)at, (SQLLEN)len,
                                     &cells->length[j]);
            } else {
                SQLWCHAR *out = s->wide + wide_at;
                size_t units = utf8_to_utf16((const unsigned char *)at, len, out);
                wide_at += units + 1;
                cells->length[j] = (SQLLEN)(units * sizeof(SQLWCHAR));
                r = SQLBindParameter(stmt, (SQLUSMALLINT)(j + 1), SQL_PARAM_INPUT, SQL_C_WCHAR,
                                     SQL_WVARCHAR, units, 0, out, cells->length[j],
                                     &cells->length[j]);
            }
        } else {
            cells->length[j] = SQL_NULL_DATA;
            if (cells->bound[j] != KIND_NULL)
                r = SQLBindParameter(stmt, (SQLUSMALLINT)(j + 1), SQL_PARAM_INPUT, SQL_C_CHAR,
                                     SQL_VARCHAR, 1, 0, NULL, 0, &cells->length[j]);
        }
        if (!SQL_SUCCEEDED(r)) {
            cells->bound[j] = UNBOUND;
            return keep_failure(s, SQL_HANDLE_STMT, stmt, "SQLBindParameter") + 1;
        }
        cells->bound[j] = k;
    }
    return 0;
}

/* run()'s round trip (batch.h): the operation's statement with its parameters, its rows
 * fetched and dropped; 0, or the failure's index + 1. */
static int run_one(void *loop, const SqlOp *op) {
    Loop *s = loop;
    int c = op->code;
    if (s->stmt[c] == NULL) { /* refused before: prepared within this operation's time */
        int f = prepare_one(s, c);
        if (f) return f;
    }
    int n = s->n_params[c]; /* the statement's markers, once it is prepared */
    int f = bind_params(s, c, n, op->value, op->kind, op->texts, op->texts_len);
    if (f) return f;
    SQLHSTMT stmt = s->stmt[c];
    if (!ok(SQLExecute(stmt))) return keep_failure(s, SQL_HANDLE_STMT, stmt, "SQLExecute") + 1;
    SQLSMALLINT columns = 0;
    if (!SQL_SUCCEEDED(SQLNumResultCols(stmt, &columns))) columns = 0;
    if (columns > 0) {
        SQLRETURN r;
        while (SQL_SUCCEEDED(r = SQLFetch(stmt))) {
        }
        if (r != SQL_NO_DATA) f = keep_failure(s, SQL_HANDLE_STMT, stmt, "SQLFetch") + 1;
    }
    SQLFreeStmt(stmt, SQL_CLOSE); /* the cursor, for the next execution */
    return f;
}

/* After the clock: a lost connection ends the batch. */
static int settle(void *loop, const SqlOp *op, int f, int *ends_batch) {
    Loop *s = loop;
    (void)op;
    *ends_batch = f && s->failures[f - 1].lost;
    return f;
}

static const SqlBatchOps ODBC_BATCH = {"odbcloop", NULL, run_one, settle};

/* run(...) -> (done, next_due_ns): batch.h's sql_batch_run, over this connection. */
static PyObject *Loop_run(Loop *s, PyObject *args) {
    SqlSession session = {s, s->dbc != NULL, s->n_statements, s->n_params, &s->n_failures};
    return sql_batch_run(&session, &ODBC_BATCH, args);
}

/* failures() -> [(sqlstate, native, message, function, lost)]: the last batch's errors. */
static PyObject *Loop_failures(Loop *s, PyObject *unused) {
    (void)unused;
    return failure_list(s, s->n_failures, failure_tuple);
}

static PyObject *Loop_close(Loop *s, PyObject *unused) {
    (void)unused;
    Py_BEGIN_ALLOW_THREADS
    drop_connection(s);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyMethodDef Loop_methods[] = {
    {"connect", (PyCFunction)Loop_connect, METH_NOARGS,
     "(Re)connect and prepare the statements (GIL released)."},
    {"prepare", (PyCFunction)Loop_prepare, METH_VARARGS, "Add (and prepare) a statement."},
    {"pack", native_pack, METH_O, "A batch's codes and parameters as run() reads."},
    {"run", (PyCFunction)Loop_run, METH_VARARGS, "Run a batch of operations (GIL released)."},
    {"failures", (PyCFunction)Loop_failures, METH_NOARGS, "The last batch's errors."},
    {"close", (PyCFunction)Loop_close, METH_NOARGS, "Close the connection."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject LoopType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "storage.targets._odbcloop.Loop",
    .tp_basicsize = sizeof(Loop),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One ODBC session's native statement loop over the driver manager.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Loop_init,
    .tp_dealloc = (destructor)Loop_dealloc,
    .tp_methods = Loop_methods,
};

static struct PyModuleDef odbcloop_module = {
    PyModuleDef_HEAD_INIT, "_odbcloop", "dbsim's native loop for ODBC sessions.", -1, NULL,
};

PyMODINIT_FUNC PyInit__odbcloop(void) {
    if (PyType_Ready(&LoopType) < 0) return NULL;
    PyObject *m = PyModule_Create(&odbcloop_module);
    if (m == NULL) return NULL;
    Py_INCREF(&LoopType);
    if (PyModule_AddObject(m, "Loop", (PyObject *)&LoopType) < 0 ||
        PyModule_AddIntConstant(m, "MAX_PARAMS", MAX_PARAMS) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
