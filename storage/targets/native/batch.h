/*
 * What dbsim's native loops share: the clock and the open-loop schedule every batch keeps
 * (fileloop.c, pggroup.c and the SQL loops), and the whole of Loop.run for the SQL session
 * loops (pgloop.c over libpq, marialoop.c over MariaDB Connector/C, odbcloop.c over unixODBC).
 *
 * Loop.run is one contract over three client libraries: the same arguments and checks, the
 * same pacing and timing, the same outcome per operation; only the round trip, what a failure
 * does to the connection and the name in the errors are a library's. C has no generics, so a
 * loop hands those in as a table of function pointers (SqlBatchOps): an indirect call per
 * operation costs about a nanosecond against a round trip of tens of microseconds, allocates
 * nothing, and each loop's table is a constant the compiler may call through directly.
 * Static inline, included by each extension's sources (each extension is built on its own).
 */
#ifndef DBSIM_BATCH_H
#define DBSIM_BATCH_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <stdint.h>
#include <time.h>

static inline int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline void sleep_until(int64_t due_ns) {
    struct timespec ts = {due_ns / 1000000000, due_ns % 1000000000};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

/* When a batch's operations may start (times in ns of CLOCK_MONOTONIC). */
typedef struct {
    const int64_t *generation; /* the caller's cell: a new value is a stage change or a stop */
    int64_t generation_value;  /* the value the batch runs under */
    int64_t deadline;
    int open_loop;
    int64_t period; /* open loop: between one intended start and the next */
    int64_t due;    /* open loop: the next intended start */
} Schedule;

/* Whether the batch still runs under its generation. */
static inline int schedule_current(const Schedule *p) {
    return __atomic_load_n(p->generation, __ATOMIC_ACQUIRE) == p->generation_value;
}

/* Waits for operation i's start and gives it in *start, the time its latency counts from:
 * 1, or 0 when the batch ends before it (the deadline passed, though the first operation
 * always runs; its intended start lies beyond the deadline, where the caller sleeps,
 * responsive to stops; the generation changed while it waited). An open loop behind schedule
 * times an operation from its intended start, so that its latency includes the queueing. */
static inline int schedule_start(Schedule *p, Py_ssize_t i, int64_t *start) {
    int64_t now = now_ns();
    if (i > 0 && now >= p->deadline) return 0;
    if (p->open_loop) {
        if (p->due > now) {
            if (p->due > p->deadline) return 0;
            sleep_until(p->due);
            if (!schedule_current(p)) return 0;
            now = now_ns();
        } else {
            now = p->due;
        }
        p->due += p->period;
    }
    *start = now;
    return 1;
}

/* Whether a batch's arrays hold count operations: codes int32, offsets int64, kinds one byte
 * per int64 value (pack.h), latency_us int64, errors int32, args int64. */
static inline int batch_arrays_fit(Py_ssize_t count, const Py_buffer *codes,
                                   const Py_buffer *offsets, const Py_buffer *ints,
                                   const Py_buffer *kinds, const Py_buffer *latency,
                                   const Py_buffer *errors, const Py_buffer *args) {
    return count >= 0 && codes->len >= count * 4 && offsets->len >= count * 8 &&
           kinds->len >= ints->len / 8 && latency->len >= count * 8 &&
           errors->len >= count * 4 && args->len >= count * 8;
}

/* One operation of a batch as a library runs it: statement code with its n parameters
 * (pack.h's values and kinds from the operation's first; KIND_TEXT values are offsets of
 * NUL-terminated strings in texts). */
typedef struct {
    int32_t code;
    int n;
    const int64_t *value;
    const int8_t *kind;
    const char *texts;
    Py_ssize_t texts_len;
} SqlOp;

/* What the batch loop reads of one session loop, taken when run() is called. */
typedef struct {
    void *loop; /* the session loop, handed to the hooks */
    int connected;
    int n_statements;
    const int *n_params; /* read at each operation: a hook may change a count as it prepares */
    int *n_failures;     /* cleared at the batch's start: failures() tells this batch's */
} SqlSession;

/* A library's part of run(), each hook called with the GIL released. */
typedef struct {
    const char *name; /* the errors' first word: "pgloop" */
    /* Optional, before the clock starts: work on the parameters that is not the server's
     * time (libpq's text format). */
    void (*before_start)(void *loop, const SqlOp *op);
    /* The round trip, on the clock: 0 when it succeeded, else not 0 (the library's own). */
    int (*run_one)(void *loop, const SqlOp *op);
    /* After the clock stopped, for every operation: what is left of it (libpq's result is
     * freed here, off the clock) and what a failure does to the connection. Returns 0, or
     * 1 + the index of the batch's failure; sets *ends_batch when the batch ends after this
     * operation (the connection is lost: Python reconnects). */
    int (*settle)(void *loop, const SqlOp *op, int outcome, int *ends_batch);
} SqlBatchOps;

/* run(codes, offsets, ints, kinds, texts, latency_us, errors, args, generation,
 *     generation_value, count, deadline_ns, open_loop, period_ns, next_due_ns)
 *     -> (done, next_due_ns)
 * Operation i runs statement codes[i] with its parameters at ints/kinds[offsets[i] : + n]
 * (KIND_TEXT: ints holds the offset of a NUL-terminated string in texts). Stops at the end,
 * when the generation cell changes (a stage change or a stop), at the deadline, when the next
 * intended start (open loop) lies beyond it, or after an operation that lost the connection.
 * errors[i]: 0, or 1 + the index of the batch's failure (see failures()); args[i]: 0. */
static inline PyObject *sql_batch_run(const SqlSession *session, const SqlBatchOps *ops,
                                      PyObject *args) {
    Py_buffer codes, offs, ints, kinds, texts, lat, err, argb, gen;
    long long gen_value, deadline, period, due;
    Py_ssize_t count;
    int open_loop;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*w*w*w*y*LnLpLL", &codes, &offs, &ints, &kinds, &texts,
                          &lat, &err, &argb, &gen, &gen_value, &count, &deadline, &open_loop,
                          &period, &due))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n_values = ints.len / 8;
    if (!batch_arrays_fit(count, &codes, &offs, &ints, &kinds, &lat, &err, &argb) ||
        gen.len < 8) {
        PyErr_Format(PyExc_ValueError, "%s: arrays shorter than the batch", ops->name);
        goto done;
    }
    if (!session->connected) {
        PyErr_Format(PyExc_RuntimeError, "%s: not connected", ops->name);
        goto done;
    }
    Schedule schedule = {gen.buf, gen_value, deadline, open_loop, period, due};
    const int32_t *code = codes.buf;
    const int64_t *offset = offs.buf, *value = ints.buf;
    const int8_t *kind = kinds.buf;
    int64_t *lat_us = lat.buf, *arg = argb.buf;
    int32_t *errs = err.buf;
    void *loop = session->loop;
    Py_ssize_t i = 0;
    int bad_code = 0;
    *session->n_failures = 0;
    Py_BEGIN_ALLOW_THREADS
    for (; i < count; i++) {
        if (!schedule_current(&schedule)) break;
        int32_t c = code[i];
        int n = c >= 0 && c < session->n_statements ? session->n_params[c] : -1;
        Py_ssize_t first = offset[i];
        if (n < 0 || first < 0 || first + n > n_values) {
            bad_code = 1;
            break;
        }
        SqlOp op = {c, n, value + first, kind + first, texts.buf, texts.len};
        if (ops->before_start != NULL) ops->before_start(loop, &op);
        int64_t start;
        if (!schedule_start(&schedule, i, &start)) break;
        int outcome = ops->run_one(loop, &op);
        lat_us[i] = (now_ns() - start) / 1000;
        arg[i] = 0;
        int ends_batch = 0;
        errs[i] = ops->settle(loop, &op, outcome, &ends_batch);
        if (ends_batch) {
            i++;
            break;
        }
    }
    Py_END_ALLOW_THREADS
    if (bad_code) {
        PyErr_Format(PyExc_ValueError, "%s: operation %zd: no such statement or parameters",
                     ops->name, i);
        goto done;
    }
    result = Py_BuildValue("(nL)", i, (long long)schedule.due);
done:
    PyBuffer_Release(&codes), PyBuffer_Release(&offs), PyBuffer_Release(&ints);
    PyBuffer_Release(&kinds), PyBuffer_Release(&texts), PyBuffer_Release(&lat);
    PyBuffer_Release(&err), PyBuffer_Release(&argb), PyBuffer_Release(&gen);
    return result;
}

/* failures(): the last batch's n failures as a list, each as tuple(loop, i) makes it in the
 * library's own shape. */
static inline PyObject *failure_list(void *loop, int n, PyObject *(*tuple)(void *loop, int i)) {
    PyObject *list = PyList_New(n);
    for (int i = 0; list != NULL && i < n; i++) {
        PyObject *item = tuple(loop, i);
        if (item == NULL) Py_CLEAR(list);
        else PyList_SET_ITEM(list, i, item);
    }
    return list;
}

#endif
