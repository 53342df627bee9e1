/*
 * dbsim's native hot loop for MariaDB and MySQL sessions, over MariaDB Connector/C.
 *
 * The same contract as pgloop.c's Loop: a session thread hands it a batch of operations the
 * workload's own generators dealt (pack.h's arrays); each statement is prepared once per
 * connection (mysql_stmt_prepare: the binary protocol, as sysbench's prepared statements) and
 * run with the GIL released, one mysql_stmt_execute round trip per operation, its rows read
 * and dropped (mysql_stmt_store_result). The connection is in autocommit, so a write is
 * committed alone as sqlkit's contract asks. The loop waits for each operation's intended
 * start in an open loop and writes each operation's latency and outcome into the caller's
 * arrays; a failed operation's error is kept once per batch (error number, SQLSTATE, message,
 * whether the connection is gone) and a lost connection ends the batch so that Python can
 * reconnect.
 */
#include "batch.h"
#include "pack.h"

#include <mysql.h>
#include <stdio.h>

#define MAX_PARAMS 64
#define MAX_STATEMENTS 256
#define MAX_ERRORS 32
#define MESSAGE_LEN 480

typedef struct {
    unsigned int code; /* the server's or the client library's error number */
    char sqlstate[6];
    char message[MESSAGE_LEN];
    int lost;
} Failure;

typedef struct {
    PyObject_HEAD
    MYSQL *conn;
    char *host, *user, *password, *database;
    unsigned int port, timeout_s;
    int n_statements;
    char *sql[MAX_STATEMENTS];
    int n_params[MAX_STATEMENTS];
    MYSQL_STMT *stmt[MAX_STATEMENTS]; /* prepared on this connection (NULL: at its next use) */
    Failure failures[MAX_ERRORS];
    int n_failures;
} Loop;

static char *copy_string(const char *text) {
    if (text == NULL) return NULL;
    size_t n = strlen(text) + 1;
    char *out = PyMem_RawMalloc(n);
    if (out != NULL) memcpy(out, text, n);
    return out;
}

/* Client error numbers of a connection that is gone (as storage/targets/mysql.py's). */
static int is_lost_code(unsigned int code) {
    return code == 2002 || code == 2003 || code == 2006 || code == 2013 || code == 2055 ||
           code == 1927 || code == 1053;
}

/* Closes the connection and its statements (GIL released or not: no Python calls). */
static void drop_connection(Loop *s) {
    for (int i = 0; i < s->n_statements; i++)
        if (s->stmt[i] != NULL) {
            mysql_stmt_close(s->stmt[i]);
            s->stmt[i] = NULL;
        }
    if (s->conn != NULL) {
        mysql_close(s->conn);
        s->conn = NULL;
    }
}

static void loop_release(Loop *s) {
    drop_connection(s);
    PyMem_RawFree(s->host), PyMem_RawFree(s->user), PyMem_RawFree(s->password);
    PyMem_RawFree(s->database);
    s->host = s->user = s->password = s->database = NULL;
    for (int i = 0; i < s->n_statements; i++) {
        PyMem_RawFree(s->sql[i]);
        s->sql[i] = NULL;
    }
    s->n_statements = 0;
}

static void Loop_dealloc(Loop *s) {
    loop_release(s);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

/* Loop(host, port, user, password or None, database, connect_timeout_s) */
static int Loop_init(Loop *s, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"host", "port", "user", "password", "database", "timeout", NULL};
    const char *host, *user, *password, *database;
    unsigned int port, timeout;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "sIszsI", kwlist, &host, &port, &user,
                                     &password, &database, &timeout))
        return -1;
    loop_release(s);
    s->host = copy_string(host), s->user = copy_string(user);
    s->password = copy_string(password), s->database = copy_string(database);
    s->port = port, s->timeout_s = timeout;
    if (!s->host || !s->user || (password && !s->password) || !s->database) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

/* The error of the connection (stmt NULL) or of a statement as a failure; its index. */
static int keep_failure(Loop *s, MYSQL_STMT *stmt) {
    unsigned int code = stmt ? mysql_stmt_errno(stmt) : s->conn ? mysql_errno(s->conn) : 2008;
    const char *state = stmt ? mysql_stmt_sqlstate(stmt) : s->conn ? mysql_sqlstate(s->conn) : "";
    const char *message = stmt ? mysql_stmt_error(stmt) : s->conn ? mysql_error(s->conn) : "";
    if (message == NULL || !*message) message = "no message from the client library";
    if (code == 0) code = 2000; /* CR_UNKNOWN_ERROR */
    int lost = is_lost_code(code);
    for (int i = 0; i < s->n_failures; i++)
        if (s->failures[i].code == code) return i;
    int at = s->n_failures < MAX_ERRORS ? s->n_failures++ : MAX_ERRORS - 1;
    Failure *f = &s->failures[at];
    f->code = code;
    snprintf(f->sqlstate, sizeof f->sqlstate, "%s", state ? state : "");
    snprintf(f->message, sizeof f->message, "%s", message);
    f->lost = lost;
    return at;
}

/* Prepares statement i on the connection; 0, or the failure's index + 1. */
static int prepare_one(Loop *s, int i) {
    MYSQL_STMT *stmt = mysql_stmt_init(s->conn);
    if (stmt == NULL) return keep_failure(s, NULL) + 1;
    if (mysql_stmt_prepare(stmt, s->sql[i], strlen(s->sql[i])) != 0) {
        int f = keep_failure(s, stmt);
        mysql_stmt_close(stmt);
        return f + 1;
    }
    s->stmt[i] = stmt;
    return 0;
}

/* Connects (autocommit, utf8mb4) and prepares every statement; GIL released. -1 or a failure. */
static int open_connection(Loop *s) {
    drop_connection(s);
    s->n_failures = 0;
    s->conn = mysql_init(NULL);
    if (s->conn == NULL) return keep_failure(s, NULL);
    mysql_options(s->conn, MYSQL_OPT_CONNECT_TIMEOUT, &s->timeout_s);
    mysql_options(s->conn, MYSQL_SET_CHARSET_NAME, "utf8mb4");
    if (!mysql_real_connect(s->conn, s->host, s->user, s->password, s->database, s->port, NULL,
                            0) ||
        mysql_autocommit(s->conn, 1) != 0) {
        int f = keep_failure(s, NULL);
        s->failures[f].lost = 1;
        mysql_close(s->conn);
        s->conn = NULL;
        return f;
    }
    for (int i = 0; i < s->n_statements; i++) {
        int f = prepare_one(s, i);
        /* A statement refused now is prepared again by each of its operations. */
        if (f && s->failures[f - 1].lost) return f - 1;
    }
    return -1;
}

/* The loop's failure i as Python reads it: (code, sqlstate, message, lost). */
static PyObject *failure_tuple(void *loop, int i) {
    const Failure *f = &((Loop *)loop)->failures[i];
    return Py_BuildValue("(Issi)", f->code, f->sqlstate, f->message, f->lost);
}

/* connect() -> None, or (code, sqlstate, message, lost) when it failed. */
static PyObject *Loop_connect(Loop *s, PyObject *unused) {
    (void)unused;
    if (s->host == NULL) {
        PyErr_SetString(PyExc_ValueError, "marialoop: not initialised");
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
    const char *text;
    int n;
    if (!PyArg_ParseTuple(args, "si", &text, &n)) return NULL;
    if (s->n_statements >= MAX_STATEMENTS || n < 0 || n > MAX_PARAMS) {
        PyErr_SetString(PyExc_ValueError, "marialoop: at most 256 statements of 0 to 64 parameters");
        return NULL;
    }
    int i = s->n_statements;
    s->sql[i] = copy_string(text);
    if (s->sql[i] == NULL) return PyErr_NoMemory();
    s->n_params[i] = n;
    s->stmt[i] = NULL;
    s->n_statements = i + 1;
    if (s->conn == NULL) return Py_BuildValue("(iO)", i, Py_None); /* at the next connect() */
    int f;
    s->n_failures = 0;
    Py_BEGIN_ALLOW_THREADS
    f = prepare_one(s, i);
    Py_END_ALLOW_THREADS
    if (!f) return Py_BuildValue("(iO)", i, Py_None);
    PyObject *failure = failure_tuple(s, f - 1);
    return failure ? Py_BuildValue("(iN)", i, failure) : NULL;
}

/* run()'s round trip (batch.h): the operation's statement with its parameters bound; 0, or
 * the failure's index + 1. */
static int run_one(void *loop, const SqlOp *op) {
    Loop *s = loop;
    int c = op->code, n = op->n;
    const int64_t *value = op->value;
    const int8_t *kind = op->kind;
    MYSQL_BIND bind[MAX_PARAMS];
    if (s->stmt[c] == NULL) { /* refused before: prepared within this operation's time */
        int f = prepare_one(s, c);
        if (f) return f;
    }
    MYSQL_STMT *stmt = s->stmt[c];
    if (n) {
        memset(bind, 0, sizeof(MYSQL_BIND) * n);
        for (int j = 0; j < n; j++) {
            if (kind[j] == KIND_INT) {
                bind[j].buffer_type = MYSQL_TYPE_LONGLONG;
                bind[j].buffer = (void *)&value[j];
            } else if (kind[j] == KIND_TEXT && value[j] >= 0 && value[j] < op->texts_len) {
                bind[j].buffer_type = MYSQL_TYPE_STRING;
                bind[j].buffer = (void *)(op->texts + value[j]);
                bind[j].buffer_length = strlen(op->texts + value[j]);
            } else {
                bind[j].buffer_type = MYSQL_TYPE_NULL;
            }
        }
        if (mysql_stmt_bind_param(stmt, bind)) return keep_failure(s, stmt) + 1;
    }
    if (mysql_stmt_execute(stmt) != 0) return keep_failure(s, stmt) + 1;
    if (mysql_stmt_field_count(stmt) > 0) { /* the rows, read and dropped */
        int failed = mysql_stmt_store_result(stmt) != 0;
        int f = failed ? keep_failure(s, stmt) + 1 : 0;
        mysql_stmt_free_result(stmt);
        return f;
    }
    return 0;
}

/* After the clock: a statement the server forgot is prepared again at its next use; a lost
 * connection ends the batch. */
static int settle(void *loop, const SqlOp *op, int f, int *ends_batch) {
    Loop *s = loop;
    if (!f) return 0;
    const Failure *failure = &s->failures[f - 1];
    if (failure->code == 1243 || failure->code == 1615) { /* the server forgot it */
        mysql_stmt_close(s->stmt[op->code]);
        s->stmt[op->code] = NULL;
    }
    *ends_batch = failure->lost;
    return f;
}

static const SqlBatchOps MARIA_BATCH = {"marialoop", NULL, run_one, settle};

/* run(...) -> (done, next_due_ns): batch.h's sql_batch_run, over this connection. */
static PyObject *Loop_run(Loop *s, PyObject *args) {
    SqlSession session = {s, s->conn != NULL, s->n_statements, s->n_params, &s->n_failures};
    return sql_batch_run(&session, &MARIA_BATCH, args);
}

/* failures() -> [(code, sqlstate, message, lost)]: the last batch's errors, by index. */
static PyObject *Loop_failures(Loop *s, PyObject *unused) {
    (void)unused;
    return failure_list(s, s->n_failures, failure_tuple);
}

/* thread_id() -> the server's id of this connection (0: none). */
static PyObject *Loop_thread_id(Loop *s, PyObject *unused) {
    (void)unused;
    return PyLong_FromUnsignedLong(s->conn != NULL ? mysql_thread_id(s->conn) : 0);
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
    {"thread_id", (PyCFunction)Loop_thread_id, METH_NOARGS, "The server's connection id."},
    {"close", (PyCFunction)Loop_close, METH_NOARGS, "Close the connection."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject LoopType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "storage.targets._marialoop.Loop",
    .tp_basicsize = sizeof(Loop),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One MariaDB/MySQL session's native statement loop over Connector/C.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Loop_init,
    .tp_dealloc = (destructor)Loop_dealloc,
    .tp_methods = Loop_methods,
};

static struct PyModuleDef marialoop_module = {
    PyModuleDef_HEAD_INIT, "_marialoop", "dbsim's native loop for MariaDB/MySQL sessions.", -1,
    NULL,
};

PyMODINIT_FUNC PyInit__marialoop(void) {
    if (mysql_library_init(0, NULL, NULL)) {
        PyErr_SetString(PyExc_ImportError, "marialoop: mysql_library_init failed");
        return NULL;
    }
    if (PyType_Ready(&LoopType) < 0) return NULL;
    PyObject *m = PyModule_Create(&marialoop_module);
    if (m == NULL) return NULL;
    Py_INCREF(&LoopType);
    if (PyModule_AddObject(m, "Loop", (PyObject *)&LoopType) < 0 ||
        PyModule_AddIntConstant(m, "MAX_PARAMS", MAX_PARAMS) < 0 ||
        PyModule_AddStringConstant(m, "LIB_VERSION", mysql_get_client_info()) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
