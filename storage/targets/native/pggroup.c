/*
 * Several PostgreSQL sessions' batches on one native thread (issue #33's client CPU per op).
 *
 * One thread per session blocks in poll() once per operation: a context switch out and one
 * back in for every statement, the larger part of the client's kernel time on a loaded host.
 * pgbench (-j) multiplexes its connections instead: one wake-up serves every reply that has
 * arrived. run_group does the same with each session's batch as Loop.run reads it: every
 * session still has one statement in flight at a time on its own connection (a closed loop
 * per session, or its own open-loop schedule), each operation is timed from its send (or its
 * intended start) to its last result, and errors are kept per session as Loop.run keeps them.
 * Sends are PQsendQueryPrepared (Bind/Describe/Execute/Sync, as PQexecPrepared and pgbench
 * -M prepared send them); results are read with PQconsumeInput/PQisBusy/PQgetResult when
 * ppoll() says the socket is readable.
 */
#include "pgloop.h"

#include <limits.h>
#include <poll.h>
#include <stdlib.h>

#define MAX_GROUP 64
#define N_BUFFERS 8 /* codes, offsets, ints, kinds, texts, latency, errors, args */

enum { IDLE, WAITING, BUSY, FINISHED };

typedef struct {
    Loop *s;
    Py_buffer buf[N_BUFFERS];
    int n_buf;
    Py_ssize_t count, i, n_values;
    int open_loop, state, failure;
    int64_t period, due, start;
} Slot;

static int slot_parse(Slot *t, PyObject *entry) {
    PyObject *loop;
    long long period, due;
    Py_buffer *b = t->buf;
    if (!PyArg_ParseTuple(entry, "O!y*y*y*y*y*w*w*w*npLL", &LoopType, &loop, &b[0], &b[1], &b[2],
                          &b[3], &b[4], &b[5], &b[6], &b[7], &t->count, &t->open_loop, &period,
                          &due))
        return -1;
    t->n_buf = N_BUFFERS;
    t->s = (Loop *)loop;
    t->period = period, t->due = due;
    t->n_values = b[2].len / 8;
    if (!batch_arrays_fit(t->count, &b[0], &b[1], &b[2], &b[3], &b[5], &b[6], &b[7])) {
        PyErr_SetString(PyExc_ValueError, "pgloop: arrays shorter than the batch");
        return -1;
    }
    if (t->s->conn == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "pgloop: not connected");
        return -1;
    }
    return 0;
}

/* Operation t->i ends (its last result read, or never sent): latency, outcome, next state. */
static void slot_complete(Slot *t, int32_t code) {
    int64_t *lat_us = t->buf[5].buf, *arg = t->buf[7].buf;
    int32_t *errs = t->buf[6].buf;
    lat_us[t->i] = (now_ns() - t->start) / 1000;
    arg[t->i] = 0;
    errs[t->i] = t->failure + 1;
    t->i++;
    t->state = IDLE;
    if (t->failure >= 0 && pgloop_failure_ends_batch(t->s, code, t->failure))
        t->state = FINISHED; /* Python reconnects */
}

/* Starts operation t->i if it is due; 0, or -1 when its code or parameters are out of range. */
static int slot_begin(Slot *t, int64_t now, int64_t deadline) {
    Loop *s = t->s;
    const int32_t code = ((const int32_t *)t->buf[0].buf)[t->i];
    if (code < 0 || code >= s->n_statements) return -1;
    int n = s->n_params[code];
    Py_ssize_t first = ((const int64_t *)t->buf[1].buf)[t->i];
    if (first < 0 || first + n > t->n_values) return -1;
    if (t->i > 0 && now >= deadline) {
        t->state = FINISHED;
        return 0;
    }
    if (t->open_loop) {
        if (t->due > now) {
            t->state = t->due > deadline ? FINISHED : WAITING; /* FINISHED: the caller sleeps */
            return 0;
        }
        t->start = t->due; /* due now or behind schedule: timed from the intended start */
        t->due += t->period;
    } else {
        t->start = now;
    }
    char digits[MAX_PARAMS][24];
    const char *bound[MAX_PARAMS];
    pgloop_bind_text(n, (const int64_t *)t->buf[2].buf + first,
                     (const int8_t *)t->buf[3].buf + first, t->buf[4].buf, t->buf[4].len, digits,
                     bound);
    t->failure = -1;
    if (!s->prepared[code]) { /* refused before: prepared within this operation's time */
        PGresult *r = PQprepare(s->conn, s->names[code], s->sql[code], n, NULL);
        if (PQresultStatus(r) == PGRES_COMMAND_OK)
            s->prepared[code] = 1;
        else
            t->failure = pgloop_keep_failure(s, r);
        PQclear(r);
        if (t->failure >= 0) {
            slot_complete(t, code);
            return 0;
        }
    }
    if (!PQsendQueryPrepared(s->conn, s->names[code], n, bound, NULL, NULL, 0)) {
        t->failure = pgloop_keep_failure(s, NULL);
        slot_complete(t, code);
        return 0;
    }
    t->state = BUSY;
    return 0;
}

/* The socket is readable: every result that has arrived; the operation ends at the last. */
static void slot_read(Slot *t) {
    Loop *s = t->s;
    const int32_t code = ((const int32_t *)t->buf[0].buf)[t->i];
    PQconsumeInput(s->conn); /* a failure shows in the results and the status below */
    while (!PQisBusy(s->conn)) {
        PGresult *r = PQgetResult(s->conn);
        if (r == NULL) {
            slot_complete(t, code);
            return;
        }
        ExecStatusType status = PQresultStatus(r);
        if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK && t->failure < 0)
            t->failure = pgloop_keep_failure(s, r);
        PQclear(r);
    }
    if (PQstatus(s->conn) == CONNECTION_BAD) { /* no result will come */
        if (t->failure < 0) t->failure = pgloop_keep_failure(s, NULL);
        slot_complete(t, code);
    }
}

/* One pass over the slots: starts what is due; the busy sockets in fds, the next due in wake.
 * Returns how many slots are busy or waiting, or -1 (a bad operation in slot *bad). */
static int group_step(Slot *slots, int n, int stop, int64_t deadline, struct pollfd *fds,
                      int *owner, int *n_fds, int64_t *wake, int *bad) {
    int live = 0;
    int64_t now = now_ns();
    *n_fds = 0;
    *wake = INT64_MAX;
    for (int k = 0; k < n; k++) {
        Slot *t = &slots[k];
        if (t->state == IDLE || t->state == WAITING) {
            if (stop || t->i >= t->count)
                t->state = FINISHED;
            else if (t->state == IDLE || t->due <= now) {
                t->state = IDLE;
                if (slot_begin(t, now, deadline) < 0) {
                    *bad = k;
                    return -1;
                }
            }
        }
        if (t->state == WAITING) {
            if (t->due < *wake) *wake = t->due;
            live++;
        } else if (t->state == BUSY && PQsocket(t->s->conn) < 0) {
            slot_read(t); /* no socket left to wait on: the connection is gone, say so now */
            live++;
            *wake = now;
        } else if (t->state == BUSY) {
            fds[*n_fds].fd = PQsocket(t->s->conn);
            fds[*n_fds].events = POLLIN;
            owner[(*n_fds)++] = k;
            live++;
        } else if (t->state == IDLE) {
            live++; /* an operation failed before it was sent: the next pass starts the next */
            *wake = now;
        }
    }
    return live;
}

static void group_loop(Slot *slots, int n, const int64_t *generation, int64_t gen_value,
                       int64_t deadline, int *bad) {
    struct pollfd fds[MAX_GROUP];
    int owner[MAX_GROUP];
    for (;;) {
        int stop = __atomic_load_n(generation, __ATOMIC_ACQUIRE) != gen_value;
        int n_fds;
        int64_t wake;
        int live = group_step(slots, n, stop, deadline, fds, owner, &n_fds, &wake, bad);
        if (live <= 0) return;
        struct timespec ts, *timeout = NULL;
        if (wake != INT64_MAX) {
            int64_t left = wake - now_ns();
            if (left < 0) left = 0;
            ts.tv_sec = left / 1000000000, ts.tv_nsec = left % 1000000000;
            timeout = &ts;
        }
        int ready = ppoll(fds, n_fds, timeout, NULL);
        if (ready <= 0) continue; /* a due start, or EINTR */
        for (int j = 0; j < n_fds; j++)
            if (fds[j].revents) slot_read(&slots[owner[j]]);
    }
}

PyObject *pgloop_run_group(PyObject *module, PyObject *args) {
    (void)module;
    PyObject *entries;
    Py_buffer gen;
    long long gen_value, deadline;
    if (!PyArg_ParseTuple(args, "O!y*LL", &PyList_Type, &entries, &gen, &gen_value, &deadline))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(entries);
    PyObject *result = NULL;
    Slot *slots = PyMem_Calloc(n ? n : 1, sizeof(Slot));
    if (slots == NULL || n > MAX_GROUP || gen.len < 8) {
        if (slots != NULL) PyErr_SetString(PyExc_ValueError, "pgloop: 1 to 64 sessions a group");
        else PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        if (slot_parse(&slots[k], PyList_GET_ITEM(entries, k)) < 0) goto done;
        for (Py_ssize_t j = 0; j < k; j++)
            if (slots[j].s == slots[k].s) {
                PyErr_SetString(PyExc_ValueError, "pgloop: a session twice in a group");
                goto done;
            }
        slots[k].s->n_failures = 0;
    }
    int bad = -1;
    Py_BEGIN_ALLOW_THREADS
    group_loop(slots, (int)n, gen.buf, gen_value, deadline, &bad);
    Py_END_ALLOW_THREADS
    if (bad >= 0) {
        PyErr_Format(PyExc_ValueError,
                     "pgloop: session %d, operation %zd: no such statement or parameters", bad,
                     slots[bad].i);
        goto done;
    }
    result = PyList_New(n);
    for (Py_ssize_t k = 0; result != NULL && k < n; k++) {
        PyObject *item = Py_BuildValue("(nL)", slots[k].i, (long long)slots[k].due);
        if (item == NULL) Py_CLEAR(result);
        else PyList_SET_ITEM(result, k, item);
    }
done:
    for (Py_ssize_t k = 0; slots != NULL && k < n; k++)
        for (int b = 0; b < slots[k].n_buf; b++) PyBuffer_Release(&slots[k].buf[b]);
    PyBuffer_Release(&gen);
    PyMem_Free(slots);
    return result;
}
