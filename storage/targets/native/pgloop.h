/* What pgloop.c (one session's loop) and pggroup.c (several sessions on one thread) share. */
#ifndef DBSIM_PGLOOP_H
#define DBSIM_PGLOOP_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <libpq-fe.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

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
} Loop;

static inline int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The error of the last call into libpq (status, result) as a failure; returns its index. */
int pgloop_keep_failure(Loop *s, const PGresult *r);
/* Formats v in decimal into out (at least 21 bytes); returns out. */
char *pgloop_format_int(int64_t v, char *out);
/* run_group(entries, generation, generation_value, deadline_ns) (pggroup.c). */
PyObject *pgloop_run_group(PyObject *module, PyObject *args);
extern PyTypeObject LoopType;

#endif
