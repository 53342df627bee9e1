/*
 * dbsim's native hot loop for PostgreSQL sessions, over libpq.
 *
 * A session thread hands this loop a batch of operations the workload's own generators dealt
 * in Python: per operation the index of a statement (prepared once per connection with
 * PQprepare) and its parameters (integers, or text in one NUL-separated blob, or NULL). The
 * loop runs them with the GIL released, one PQexecPrepared round trip each (the extended
 * protocol's Bind/Execute/Sync, as pgbench -M prepared), waits for each operation's intended
 * start in an open loop, and writes each operation's latency and outcome into the caller's
 * arrays. A failed operation's error is kept once per batch (SQLSTATE, primary message,
 * whether the connection is gone) and its operation points at it; a lost connection ends the
 * batch so that Python can reconnect. Nothing here allocates per operation but libpq's result.
 */
#include "pgloop.h"
#include "pack.h"

#include <poll.h>

static char *copy_string(const char *text) {
    size_t n = strlen(text) + 1;
    char *out = PyMem_RawMalloc(n);
    if (out != NULL) memcpy(out, text, n);
    return out;
}

static void free_strings(char **list, int n) {
    if (list == NULL) return;
    for (int i = 0; i < n; i++) PyMem_RawFree(list[i]);
    PyMem_RawFree(list);
}

static void loop_release(Loop *s) {
    if (s->conn != NULL) {
        PGconn *conn = s->conn;
        s->conn = NULL;
        Py_BEGIN_ALLOW_THREADS
        PQfinish(conn);
        Py_END_ALLOW_THREADS
    }
    free_strings(s->keywords, s->n_keywords);
    free_strings(s->values, s->n_keywords);
    free_strings(s->sql, MAX_STATEMENTS);
    PyMem_RawFree(s->n_params);
    s->keywords = s->values = s->sql = NULL;
    s->n_params = NULL;
    s->n_keywords = s->n_statements = 0;
}

static void Loop_dealloc(Loop *s) {
    loop_release(s);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

/* Loop(params: list[tuple[str, str]], statements: list[tuple[str, int]]) */
static int Loop_init(Loop *s, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"params", "statements", NULL};
    PyObject *params, *statements;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!O!", kwlist, &PyList_Type, &params,
                                     &PyList_Type, &statements))
        return -1;
    loop_release(s);
    Py_ssize_t np = PyList_GET_SIZE(params), ns = PyList_GET_SIZE(statements);
    if (ns > MAX_STATEMENTS) {
        PyErr_SetString(PyExc_ValueError, "pgloop: at most 256 statements");
        return -1;
    }
    s->keywords = PyMem_RawCalloc(np + 1, sizeof(char *));
    s->values = PyMem_RawCalloc(np + 1, sizeof(char *));
    s->sql = PyMem_RawCalloc(MAX_STATEMENTS, sizeof(char *));
    s->n_params = PyMem_RawCalloc(MAX_STATEMENTS, sizeof(int));
    if (!s->keywords || !s->values || !s->sql || !s->n_params) goto no_memory;
    for (Py_ssize_t i = 0; i < np; i++) {
        const char *k, *v;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(params, i), "ss", &k, &v)) return -1;
        s->keywords[i] = copy_string(k);
        s->values[i] = copy_string(v);
        s->n_keywords = (int)i + 1;
        if (!s->keywords[i] || !s->values[i]) goto no_memory;
    }
    for (Py_ssize_t i = 0; i < ns; i++) {
        const char *text;
        int n;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(statements, i), "si", &text, &n)) return -1;
        if (n < 0 || n > MAX_PARAMS) {
            PyErr_SetString(PyExc_ValueError, "pgloop: a statement takes 0 to 64 parameters");
            return -1;
        }
        s->sql[i] = copy_string(text);
        s->n_params[i] = n;
        snprintf(s->names[i], sizeof s->names[i], "dbsim_%d", (int)i);
        s->n_statements = (int)i + 1;
        if (!s->sql[i]) goto no_memory;
    }
    return 0;
no_memory:
    PyErr_NoMemory();
    return -1;
}

int pgloop_keep_failure(Loop *s, const PGresult *r) {
    const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    const char *message = r ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    int lost = PQstatus(s->conn) == CONNECTION_BAD;
    if (message == NULL) message = PQerrorMessage(s->conn);
    if (message == NULL || !*message) message = "no message from libpq";
    if (state == NULL) state = "";
    for (int i = 0; i < s->n_failures; i++) {
        Failure *f = &s->failures[i];
        if (f->lost == lost && strncmp(f->sqlstate, state, 5) == 0) return i;
    }
    int at = s->n_failures < MAX_ERRORS ? s->n_failures++ : MAX_ERRORS - 1;
    Failure *f = &s->failures[at];
    snprintf(f->sqlstate, sizeof f->sqlstate, "%s", state);
    snprintf(f->message, sizeof f->message, "%s", message);
    f->lost = lost;
    return at;
}

/* Connects and prepares every statement; with the GIL released. NULL or a failure. */
static const Failure *open_connection(Loop *s) {
    if (s->conn != NULL) PQfinish(s->conn);
    s->n_failures = 0;
    s->conn = PQconnectdbParams((const char *const *)s->keywords,
                                (const char *const *)s->values, 0);
    if (s->conn == NULL) {
        snprintf(s->refused.message, sizeof s->refused.message, "libpq: out of memory");
        s->refused.lost = 1;
        return &s->refused;
    }
    if (PQstatus(s->conn) != CONNECTION_OK) return &s->failures[pgloop_keep_failure(s, NULL)];
    for (int i = 0; i < s->n_statements; i++) {
        PGresult *r = PQprepare(s->conn, s->names[i], s->sql[i], s->n_params[i], NULL);
        s->prepared[i] = PQresultStatus(r) == PGRES_COMMAND_OK;
        if (!s->prepared[i] && PQstatus(s->conn) == CONNECTION_BAD) {
            const Failure *f = &s->failures[pgloop_keep_failure(s, r)];
            PQclear(r);
            return f;
        }
        /* A statement the server refuses now (a lock timeout …) is prepared again at its
         * next operation, which fails with the server's error if it still refuses it: each
         * operation fails as it does on the Python path (which prepares on first use). */
        PQclear(r);
    }
    return NULL;
}

/* connect() -> None, or (sqlstate, message, lost) when it failed. */
static PyObject *Loop_connect(Loop *s, PyObject *unused) {
    (void)unused;
    if (s->keywords == NULL) {
        PyErr_SetString(PyExc_ValueError, "pgloop: not initialised");
        return NULL;
    }
    const Failure *f;
    Py_BEGIN_ALLOW_THREADS
    f = open_connection(s);
    Py_END_ALLOW_THREADS
    if (f == NULL) Py_RETURN_NONE;
    return Py_BuildValue("(ssi)", f->sqlstate, f->message, f->lost);
}

/* prepare(sql, n_params) -> (index, None or (sqlstate, message, lost)): one more statement,
 * prepared at once when connected (and at every connect()). */
static PyObject *Loop_prepare(Loop *s, PyObject *args) {
    const char *text;
    int n;
    if (!PyArg_ParseTuple(args, "si", &text, &n)) return NULL;
    if (s->sql == NULL || s->n_statements >= MAX_STATEMENTS || n < 0 || n > MAX_PARAMS) {
        PyErr_SetString(PyExc_ValueError, "pgloop: at most 256 statements of 0 to 64 parameters");
        return NULL;
    }
    int i = s->n_statements;
    s->sql[i] = copy_string(text);
    if (s->sql[i] == NULL) return PyErr_NoMemory();
    s->n_params[i] = n;
    snprintf(s->names[i], sizeof s->names[i], "dbsim_%d", i);
    s->n_statements = i + 1;
    s->prepared[i] = 0;
    if (s->conn == NULL || PQstatus(s->conn) != CONNECTION_OK)
        return Py_BuildValue("(iO)", i, Py_None); /* prepared at the next connect() */
    PGresult *r;
    Py_BEGIN_ALLOW_THREADS
    r = PQprepare(s->conn, s->names[i], s->sql[i], n, NULL);
    Py_END_ALLOW_THREADS
    if (PQresultStatus(r) == PGRES_COMMAND_OK) {
        PQclear(r);
        s->prepared[i] = 1;
        return Py_BuildValue("(iO)", i, Py_None);
    }
    s->n_failures = 0;
    const Failure *f = &s->failures[pgloop_keep_failure(s, r)];
    PQclear(r);
    return Py_BuildValue("(i(ssi))", i, f->sqlstate, f->message, f->lost);
}

/* Formats v in decimal into out (at least 21 bytes); returns out. */
static char *format_int(int64_t v, char *out) {
    char tmp[24];
    int n = 0;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    char *p = out;
    if (v < 0) *p++ = '-';
    while (n) *p++ = tmp[--n];
    *p = 0;
    return out;
}

void pgloop_bind_text(int n, const int64_t *value, const int8_t *kind, const char *texts,
                      Py_ssize_t texts_len, char digits[][24], const char **bound) {
    for (int j = 0; j < n; j++) {
        if (kind[j] == KIND_INT)
            bound[j] = format_int(value[j], digits[j]);
        else if (kind[j] == KIND_TEXT && value[j] >= 0 && value[j] < texts_len)
            bound[j] = texts + value[j];
        else
            bound[j] = NULL;
    }
}

int pgloop_failure_ends_batch(Loop *s, int32_t code, int f) {
    if (strcmp(s->failures[f].sqlstate, "26000") == 0) s->prepared[code] = 0; /* gone */
    return s->failures[f].lost;
}

/* run()'s hooks (batch.h). The parameters as text before the clock starts: dealing is not
 * the server's time. */
static void before_start(void *loop, const SqlOp *op) {
    Loop *s = loop;
    pgloop_bind_text(op->n, op->value, op->kind, op->texts, op->texts_len, s->digits, s->bound);
}

/* One PQexecPrepared round trip; its result kept for settle(). Not 0 when it failed. */
static int run_one(void *loop, const SqlOp *op) {
    Loop *s = loop;
    int32_t c = op->code;
    PGresult *r = NULL;
    if (!s->prepared[c]) { /* refused before: prepared within this operation's time */
        r = PQprepare(s->conn, s->names[c], s->sql[c], op->n, NULL);
        if (PQresultStatus(r) == PGRES_COMMAND_OK) {
            s->prepared[c] = 1;
            PQclear(r);
            r = NULL;
        }
    }
    if (r == NULL) r = PQexecPrepared(s->conn, s->names[c], op->n, s->bound, NULL, NULL, 0);
    s->result = r;
    ExecStatusType status = PQresultStatus(r);
    return status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK;
}

/* The result freed off the clock; a failure kept once per batch, and what it does. */
static int settle(void *loop, const SqlOp *op, int failed, int *ends_batch) {
    Loop *s = loop;
    PGresult *r = s->result;
    s->result = NULL;
    int f = failed ? pgloop_keep_failure(s, r) : -1;
    PQclear(r);
    if (f >= 0) *ends_batch = pgloop_failure_ends_batch(s, op->code, f);
    return f + 1;
}

static const SqlBatchOps PG_BATCH = {"pgloop", before_start, run_one, settle};

/* run(...) -> (done, next_due_ns): batch.h's sql_batch_run, one PQexecPrepared round trip an
 * operation (the extended protocol's Bind/Execute/Sync, as pgbench -M prepared). */
static PyObject *Loop_run(Loop *s, PyObject *args) {
    SqlSession session = {s, s->conn != NULL, s->n_statements, s->n_params, &s->n_failures};
    return sql_batch_run(&session, &PG_BATCH, args);
}

/* The loop's failure i as Python reads it: (sqlstate, message, lost). */
static PyObject *failure_tuple(void *loop, int i) {
    const Failure *f = &((Loop *)loop)->failures[i];
    return Py_BuildValue("(ssi)", f->sqlstate, f->message, f->lost);
}

/* failures() -> [(sqlstate, message, lost)]: the last batch's errors, by index. */
static PyObject *Loop_failures(Loop *s, PyObject *unused) {
    (void)unused;
    return failure_list(s, s->n_failures, failure_tuple);
}

static void quiet_notice(void *arg, const char *message) { (void)arg, (void)message; }

/* check() -> None while the idle connection is up, else (sqlstate, message, lost) of its loss.
 * Between batches nothing is in flight, so a readable socket holds what the server said on
 * its own (a notice, the FATAL it sends before it hangs up) and the hang-up: a zero-timeout
 * poll, and what is there is read and parsed, until the socket has nothing more or the
 * connection turned CONNECTION_BAD (a FATAL and the close may come one read apart, with TLS
 * more so). libpq hands a message that comes while idle to the notice processor, silenced
 * here: the loss is the finding. A group asks its other members this when one finds its
 * connection lost (one server restart is found by each in the same pass, not when each one's
 * next operation comes). */
static PyObject *Loop_check(Loop *s, PyObject *unused) {
    (void)unused;
    if (s->conn == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "pgloop: not connected");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    PQnoticeProcessor kept = PQsetNoticeProcessor(s->conn, quiet_notice, NULL);
    for (int round = 0; round < 16 && PQstatus(s->conn) == CONNECTION_OK; round++) {
        struct pollfd p = {.fd = PQsocket(s->conn), .events = POLLIN};
        if (p.fd < 0 || poll(&p, 1, 0) <= 0 || !p.revents) break;
        if (!PQconsumeInput(s->conn)) break; /* EOF or a read error: the status says which */
        (void)PQisBusy(s->conn);              /* parses what came */
    }
    PQsetNoticeProcessor(s->conn, kept, NULL);
    Py_END_ALLOW_THREADS
    if (PQstatus(s->conn) == CONNECTION_OK && PQsocket(s->conn) >= 0) Py_RETURN_NONE;
    s->n_failures = 0;
    const Failure *f = &s->failures[pgloop_keep_failure(s, NULL)];
    return Py_BuildValue("(ssi)", f->sqlstate, f->message, 1);
}

/* backend_pid() -> the server process of this connection (0: none). */
static PyObject *Loop_backend_pid(Loop *s, PyObject *unused) {
    (void)unused;
    return PyLong_FromLong(s->conn != NULL ? PQbackendPID(s->conn) : 0);
}

static PyObject *Loop_close(Loop *s, PyObject *unused) {
    (void)unused;
    if (s->conn != NULL) {
        PGconn *conn = s->conn;
        s->conn = NULL;
        Py_BEGIN_ALLOW_THREADS
        PQfinish(conn);
        Py_END_ALLOW_THREADS
    }
    Py_RETURN_NONE;
}

static PyMethodDef Loop_methods[] = {
    {"connect", (PyCFunction)Loop_connect, METH_NOARGS,
     "(Re)connect and prepare the statements (GIL released)."},
    {"prepare", (PyCFunction)Loop_prepare, METH_VARARGS, "Add (and prepare) a statement."},
    {"pack", native_pack, METH_O, "A batch's codes and parameters as run() reads."},
    {"run", (PyCFunction)Loop_run, METH_VARARGS, "Run a batch of operations (GIL released)."},
    {"failures", (PyCFunction)Loop_failures, METH_NOARGS, "The last batch's errors."},
    {"check", (PyCFunction)Loop_check, METH_NOARGS,
     "None while the idle connection is up, else its loss as a failure tuple."},
    {"backend_pid", (PyCFunction)Loop_backend_pid, METH_NOARGS, "The server process id."},
    {"close", (PyCFunction)Loop_close, METH_NOARGS, "Close the connection."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject LoopType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "storage.targets._pgloop.Loop",
    .tp_basicsize = sizeof(Loop),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One PostgreSQL session's native statement loop over libpq.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Loop_init,
    .tp_dealloc = (destructor)Loop_dealloc,
    .tp_methods = Loop_methods,
};

static PyMethodDef module_methods[] = {
    {"run_group", pgloop_run_group, METH_VARARGS,
     "Run several sessions' batches on this thread, one statement in flight each (pggroup.c)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef pgloop_module = {
    PyModuleDef_HEAD_INIT, "_pgloop", "dbsim's native loop for PostgreSQL sessions.", -1,
    module_methods,
};

PyMODINIT_FUNC PyInit__pgloop(void) {
    if (PyType_Ready(&LoopType) < 0) return NULL;
    PyObject *m = PyModule_Create(&pgloop_module);
    if (m == NULL) return NULL;
    Py_INCREF(&LoopType);
    if (PyModule_AddObject(m, "Loop", (PyObject *)&LoopType) < 0 ||
        PyModule_AddIntConstant(m, "KIND_INT", KIND_INT) < 0 ||
        PyModule_AddIntConstant(m, "KIND_TEXT", KIND_TEXT) < 0 ||
        PyModule_AddIntConstant(m, "KIND_NULL", KIND_NULL) < 0 ||
        PyModule_AddIntConstant(m, "MAX_PARAMS", MAX_PARAMS) < 0 ||
        PyModule_AddIntConstant(m, "LIB_VERSION", PQlibVersion()) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
