/* What pgloop.c (one session's loop) and pggroup.c (several sessions on one thread) share. */
#ifndef DBSIM_PGLOOP_H
#define DBSIM_PGLOOP_H

#include "batch.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <string.h>

#define MAX_PARAMS 64
#define MAX_STATEMENTS 256
#define MAX_ERRORS 32
#define MESSAGE_LEN 480
#define KIND_INT 0 /* as pack.h */
#define KIND_TEXT 1
#define KIND_NULL 2

typedef struct {
    char sqlstate[6];
    char message[MESSAGE_LEN];
    int lost; /* the connection is gone (PQstatus CONNECTION_BAD) */
} Failure;

typedef struct {
    PyObject_HEAD
    PGconn *conn;
    char **keywords, **values; /* PQconnectdbParams' arrays, NULL-terminated */
    int n_keywords;
    int n_statements;
    char **sql;
    int *n_params;
    char names[MAX_STATEMENTS][24]; /* dbsim_<index>: the prepared statements' names */
    char prepared[MAX_STATEMENTS];  /* prepared on this connection (else at its next use) */
    Failure failures[MAX_ERRORS];
    Failure refused; /* no connection object at all (libpq out of memory) */
    int n_failures;
    /* run()'s operation in flight: its parameters as text, and its result until it is freed
     * off the clock (batch.h's before_start and settle). */
    char digits[MAX_PARAMS][24];
    const char *bound[MAX_PARAMS];
    PGresult *result;
} Loop;

/* The error of the last call into libpq (status, result) as a failure; returns its index. */
int pgloop_keep_failure(Loop *s, const PGresult *r);
/* An operation's n parameters as libpq's text format takes them, into bound: an integer in
 * decimal (written into digits), text as it stands in texts, anything else NULL. */
void pgloop_bind_text(int n, const int64_t *value, const int8_t *kind, const char *texts,
                      Py_ssize_t texts_len, char digits[][24], const char **bound);
/* What failure f of an operation on statement code does: a statement the server no longer
 * knows (26000) is prepared again at its next use. Returns whether the connection is lost
 * (the batch ends there: Python reconnects). */
int pgloop_failure_ends_batch(Loop *s, int32_t code, int f);
/* run_group(entries, generation, generation_value, deadline_ns) (pggroup.c). */
PyObject *pgloop_run_group(PyObject *module, PyObject *args);
extern PyTypeObject LoopType;

#endif
