/*
 * dbsim's native hot loop for file-tree sessions.
 *
 * A session thread hands this loop a batch of pre-dealt operation codes; the loop runs them
 * with the GIL released: it waits for each operation's intended start (open loop), makes the
 * operation's system calls relative to directory descriptors the Python side opened and
 * checked, and writes each operation's latency and errno into the caller's arrays. Python
 * deals the decks (so the exact mix stays Python's), folds the arrays into the session's
 * recorder and builds error messages; nothing here allocates per operation.
 *
 * The safety rules are the Python FileSession's (storage/targets/filetree_session.py): every
 * name is opened relative to its parent directory's descriptor with O_NOFOLLOW, a file written
 * in place must have one link and, when the tree was recorded, its recorded inode; files and
 * directories the session makes are created with O_EXCL / mkdirat under its own token.
 */
#include "batch.h" /* Python.h (first, as Python asks), the clock and the open-loop schedule */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* Operation codes: the order of OP_NAMES below (Python reads fileloop.OPS). */
enum {
    OP_STAT, OP_ACCESS, OP_CHMOD, OP_MKDIR, OP_CREATE, OP_UNLINK, OP_UNLINK2, OP_WRITE_FILE,
    OP_READ_FILE, OP_RANDOM_READ, OP_RANDOM_WRITE, OP_APPEND, OP_READDIR, OP_SEQ_READ,
    OP_SEQ_WRITE, OP_COUNT
};
static const char *OP_NAMES[OP_COUNT] = {
    "stat", "access", "chmod", "mkdir", "create", "unlink", "unlink2", "write_file",
    "read_file", "random_read", "random_write", "append", "readdir", "seq_read", "seq_write",
};

/* Refusals and workload errors, as negative codes (positive codes are errno values). */
#define REFUSED_LINKS (-1)      /* a file to write in place has more than one link */
#define REFUSED_INODE (-2)      /* ... or is not the inode dbsim recorded */
#define REFUSED_KIND (-3)       /* chmod: not a regular file */
#define NOTHING_TO_REMOVE (-4)  /* unlink: no file of this session left to remove */
#define UNSUPPORTED_OP (-5)     /* an operation code this loop does not know */

/* Which table an error's argument indexes (the high 32 bits of arg_out). */
enum { T_ANY, T_EMPTY, T_DATA, T_DIRS, T_CREATED, T_SCRATCH };

#define SCRATCH_RING 8
#define ALIGN 4096
#define DIR_FLAGS (O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
#define NEW_FILE_FLAGS (O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC)
#define FSYNC_NONE 0
#define FSYNC_CLOSE 1
#define FSYNC_EACH 2

typedef struct {
    Py_ssize_t n;
    char *blob;          /* names, NUL-separated (owned) */
    const char **name;   /* n pointers into blob */
    int32_t *parent;     /* index into dirfd[] of each name's parent directory */
    uint64_t *ino;       /* recorded inode of each file written in place (0: none recorded) */
} Table;

typedef struct {
    int64_t *items;
    Py_ssize_t head, len, cap;
} Queue;

typedef struct {
    PyObject_HEAD
    int *dirfd;
    Py_ssize_t ndirfd;
    Table any, empty, data, dirs;
    int32_t *dir_self;   /* index into dirfd[] of each dirs entry itself */
    char created_stem[64], scratch_stem[64]; /* name prefixes: workload prefix + token */
    unsigned char *read_buf, *write_buf;
    Py_ssize_t buf_size;
    int direct, fsync_policy, backend;
    int64_t transfer, block, file_size, blocks_per_file;
    int64_t create_empty_first, create_data_end, creates_per_deck;
    uint64_t rng;
    /* front-end state */
    int64_t created, chmods, dirs_made, rotation;
    Queue created_empty, created_data, scratch;
    /* back-end state: one read pass and one write pass */
    int64_t read_at, write_at, read_off, write_off;
    int read_fd, write_fd;
    /* counters */
    int64_t bytes_by_op[OP_COUNT];
    int64_t bytes_read, bytes_written;
} Loop;

/* ------------------------------------------------------------------ helpers */

/* splitmix64: the picks only need to be uniform and reproducible per session. */
static inline double next_random(Loop *s) {
    uint64_t z = (s->rng += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}

static inline Py_ssize_t pick(Loop *s, const Table *t) {
    return (Py_ssize_t)(next_random(s) * (double)t->n);
}

static int queue_push(Queue *q, int64_t v) {
    if (q->len == q->cap) {
        Py_ssize_t cap = q->cap ? q->cap * 2 : 64;
        int64_t *items = malloc(sizeof(int64_t) * cap);
        if (items == NULL) return -1;
        for (Py_ssize_t i = 0; i < q->len; i++) items[i] = q->items[(q->head + i) % q->cap];
        free(q->items);
        q->items = items, q->head = 0, q->cap = cap;
    }
    q->items[(q->head + q->len) % q->cap] = v;
    q->len++;
    return 0;
}

static int64_t queue_pop(Queue *q) {
    int64_t v = q->items[q->head];
    q->head = (q->head + 1) % q->cap;
    q->len--;
    return v;
}

static inline int64_t fail(int64_t *arg, int table, Py_ssize_t index, int code) {
    *arg = ((int64_t)table << 32) | (int64_t)index;
    return code;
}

static inline int open_flags(Loop *s, int base) { return s->direct ? base | O_DIRECT : base; }

/* The write buffer from a rotating aligned offset: consecutive blocks differ. */
static inline const unsigned char *source(Loop *s) {
    s->rotation = (s->rotation + ALIGN) % s->buf_size;
    return s->write_buf + s->rotation;
}

/* Before the first byte is written in place: one link and, when recorded, our inode. */
static int check_written(const struct stat *st, uint64_t expected) {
    if (st->st_nlink != 1) return REFUSED_LINKS;
    if (expected != 0 && (uint64_t)st->st_ino != expected) return REFUSED_INODE;
    return 0;
}

static int open_written(Loop *s, const Table *t, Py_ssize_t i, int *fd_out) {
    int fd = openat(s->dirfd[t->parent[i]], t->name[i],
                    open_flags(s, O_WRONLY | O_NOFOLLOW | O_CLOEXEC));
    if (fd < 0) return errno;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return e;
    }
    int refused = check_written(&st, t->ino[i]);
    if (refused) {
        close(fd);
        return refused;
    }
    *fd_out = fd;
    return 0;
}

static int close_checked(int fd, int code) {
    if (close(fd) != 0 && code == 0) return errno;
    return code;
}

static void created_name(Loop *s, int64_t n, char *out, size_t size) {
    snprintf(out, size, "%s%08lld", s->created_stem, (long long)n);
}

static void scratch_name(Loop *s, int64_t n, char *out, size_t size) {
    snprintf(out, size, "%s%06lld", s->scratch_stem, (long long)n);
}

/* ------------------------------------------------------------------ operations */

static int do_stat(Loop *s, int64_t *arg) {
    Py_ssize_t i = pick(s, &s->any);
    struct stat st;
    if (fstatat(s->dirfd[s->any.parent[i]], s->any.name[i], &st, AT_SYMLINK_NOFOLLOW) != 0)
        return fail(arg, T_ANY, i, errno);
    return 0;
}

static int do_access(Loop *s, int64_t *arg) {
    /* As os.access: a refused permission is an answer, not an error. */
    Py_ssize_t i = pick(s, &s->empty);
    (void)faccessat(s->dirfd[s->empty.parent[i]], s->empty.name[i], R_OK | W_OK,
                    AT_SYMLINK_NOFOLLOW);
    (void)arg;
    return 0;
}

static int do_chmod(Loop *s, int64_t *arg) {
    /* Linux has no lchmod: an O_PATH descriptor pins the inode, fstat checks it, and chmod
       through /proc/self/fd changes that inode only. */
    s->chmods++;
    mode_t mode = (s->chmods & 1) ? 0644 : 0664;
    Py_ssize_t i = pick(s, &s->empty);
    int fd = openat(s->dirfd[s->empty.parent[i]], s->empty.name[i],
                    O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return fail(arg, T_EMPTY, i, errno);
    struct stat st;
    int code = fstat(fd, &st) != 0 ? errno : 0;
    if (code == 0 && !S_ISREG(st.st_mode)) code = REFUSED_KIND;
    if (code == 0) code = check_written(&st, s->empty.ino[i]);
    if (code == 0) {
        char proc[64];
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
        if (fchmodat(AT_FDCWD, proc, mode, 0) != 0) code = errno;
    }
    close(fd);
    return code ? fail(arg, T_EMPTY, i, code) : 0;
}

static int do_mkdir(Loop *s, int64_t *arg) {
    /* A bounded ring of scratch directories: the oldest goes in the same operation. */
    int64_t n = ++s->dirs_made;
    Py_ssize_t at = (Py_ssize_t)(n % s->dirs.n);
    int dirfd = s->dirfd[s->dir_self[at]];
    char name[96];
    if (s->scratch.len >= SCRATCH_RING) {
        int64_t old = queue_pop(&s->scratch);
        char old_name[96];
        scratch_name(s, old, old_name, sizeof old_name);
        int old_fd = s->dirfd[s->dir_self[old % s->dirs.n]];
        if (unlinkat(old_fd, old_name, AT_REMOVEDIR) != 0 && errno != ENOENT)
            return fail(arg, T_SCRATCH, n, errno);
    }
    scratch_name(s, n, name, sizeof name);
    if (mkdirat(dirfd, name, 0777) != 0) return fail(arg, T_SCRATCH, n, errno);
    if (queue_push(&s->scratch, n) != 0) return fail(arg, T_SCRATCH, n, ENOMEM);
    return 0;
}

static int do_create(Loop *s, int64_t *arg) {
    int64_t n = s->created++;
    /* The n-th create of a deck: its rank among the deck's creates decides its kind. */
    int64_t rank = s->creates_per_deck ? n % s->creates_per_deck : 0;
    int with_data = s->create_empty_first <= rank && rank < s->create_data_end;
    int dirfd = s->dirfd[s->dir_self[n % s->dirs.n]];
    char name[96];
    created_name(s, n, name, sizeof name);
    int fd = openat(dirfd, name, open_flags(s, NEW_FILE_FLAGS), 0644);
    if (fd < 0) return fail(arg, T_CREATED, n, errno);
    int code = 0;
    ssize_t written = 0;
    if (with_data) {
        written = pwrite(fd, source(s), (size_t)s->block, 0);
        if (written < 0) code = errno, written = 0;
    }
    if (code == 0 && s->fsync_policy != FSYNC_NONE && fsync(fd) != 0) code = errno;
    code = close_checked(fd, code);
    s->bytes_written += written;
    s->bytes_by_op[OP_CREATE] += written;
    if (code) return fail(arg, T_CREATED, n, code);
    if (queue_push(with_data ? &s->created_data : &s->created_empty, n) != 0)
        return fail(arg, T_CREATED, n, ENOMEM);
    return 0;
}

static int do_unlink(Loop *s, Queue *q, int64_t *arg) {
    if (q->len == 0) return fail(arg, T_CREATED, 0, NOTHING_TO_REMOVE);
    int64_t n = queue_pop(q);
    char name[96];
    created_name(s, n, name, sizeof name);
    if (unlinkat(s->dirfd[s->dir_self[n % s->dirs.n]], name, 0) != 0 && errno != ENOENT)
        return fail(arg, T_CREATED, n, errno);
    return 0;
}

static int do_write_file(Loop *s, int64_t *arg) {
    Py_ssize_t i = pick(s, &s->data);
    int fd;
    int code = open_written(s, &s->data, i, &fd);
    if (code) return fail(arg, T_DATA, i, code);
    /* Truncated after the check, not by O_TRUNC: a planted hard link keeps its contents. */
    int64_t done = 0;
    if (ftruncate(fd, 0) != 0) code = errno;
    while (code == 0 && done < s->file_size) {
        int64_t length = s->file_size - done < s->transfer ? s->file_size - done : s->transfer;
        ssize_t n = pwrite(fd, source(s), (size_t)length, done);
        if (n < 0) code = errno;
        else if (n == 0) code = EIO;
        else done += n;
        if (code == 0 && s->fsync_policy == FSYNC_EACH && fdatasync(fd) != 0) code = errno;
    }
    if (code == 0 && s->fsync_policy == FSYNC_CLOSE && fdatasync(fd) != 0) code = errno;
    code = close_checked(fd, code);
    s->bytes_written += done;
    if (code) return fail(arg, T_DATA, i, code);
    s->bytes_by_op[OP_WRITE_FILE] += done;
    return 0;
}

static int open_read(Loop *s, const Table *t, Py_ssize_t i) {
    return openat(s->dirfd[t->parent[i]], t->name[i],
                  open_flags(s, O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
}

static int do_read_file(Loop *s, int64_t *arg) {
    Py_ssize_t i = pick(s, &s->data);
    int fd = open_read(s, &s->data, i);
    if (fd < 0) return fail(arg, T_DATA, i, errno);
    int64_t total = 0;
    int code = 0;
    for (;;) {
        ssize_t n = pread(fd, s->read_buf, (size_t)s->transfer, total);
        if (n < 0) {
            code = errno;
            break;
        }
        total += n;
        if (n < s->transfer) break; /* a short read is the end of the file */
    }
    code = close_checked(fd, code);
    s->bytes_read += total;
    if (code) return fail(arg, T_DATA, i, code);
    s->bytes_by_op[OP_READ_FILE] += total;
    return 0;
}

static inline int64_t block_offset(Loop *s) {
    return (int64_t)(next_random(s) * (double)s->blocks_per_file) * s->block;
}

static int do_random_read(Loop *s, int64_t *arg) {
    Py_ssize_t i = pick(s, &s->data);
    int64_t offset = block_offset(s);
    int fd = open_read(s, &s->data, i);
    if (fd < 0) return fail(arg, T_DATA, i, errno);
    ssize_t n = pread(fd, s->read_buf, (size_t)s->block, offset);
    int code = close_checked(fd, n < 0 ? errno : 0);
    if (code) return fail(arg, T_DATA, i, code);
    s->bytes_read += n;
    s->bytes_by_op[OP_RANDOM_READ] += n;
    return 0;
}

static int do_random_write(Loop *s, int64_t *arg) {
    Py_ssize_t i = pick(s, &s->data);
    int64_t offset = block_offset(s);
    int fd;
    int code = open_written(s, &s->data, i, &fd);
    if (code) return fail(arg, T_DATA, i, code);
    ssize_t n = pwrite(fd, source(s), (size_t)s->block, offset);
    if (n < 0) code = errno, n = 0;
    if (code == 0 && s->fsync_policy != FSYNC_NONE && fdatasync(fd) != 0) code = errno;
    code = close_checked(fd, code);
    s->bytes_written += n;
    if (code) return fail(arg, T_DATA, i, code);
    s->bytes_by_op[OP_RANDOM_WRITE] += n;
    return 0;
}

static int do_append(Loop *s, int64_t *arg) {
    /* A file that would pass the data-file size starts again empty: bounded growth. */
    Py_ssize_t i = pick(s, &s->empty);
    int fd = openat(s->dirfd[s->empty.parent[i]], s->empty.name[i],
                    open_flags(s, O_WRONLY | O_NOFOLLOW | O_CLOEXEC));
    if (fd < 0) return fail(arg, T_EMPTY, i, errno);
    struct stat st;
    int code = fstat(fd, &st) != 0 ? errno : check_written(&st, s->empty.ino[i]);
    ssize_t n = 0;
    if (code == 0) {
        int64_t end = st.st_size;
        if (end + s->block > s->file_size) {
            if (ftruncate(fd, 0) != 0) code = errno;
            end = 0;
        }
        if (code == 0) {
            n = pwrite(fd, source(s), (size_t)s->block, end);
            if (n < 0) code = errno, n = 0;
        }
    }
    if (code == 0 && s->fsync_policy != FSYNC_NONE && fdatasync(fd) != 0) code = errno;
    code = close_checked(fd, code);
    s->bytes_written += n;
    if (code) return fail(arg, T_EMPTY, i, code);
    s->bytes_by_op[OP_APPEND] += n;
    return 0;
}

struct linux_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

static int do_readdir(Loop *s, int64_t *arg) {
    /* Opened afresh, as a listing client does: on NFS the open revalidates the directory. */
    Py_ssize_t i = pick(s, &s->dirs);
    int fd = openat(s->dirfd[s->dirs.parent[i]], s->dirs.name[i], DIR_FLAGS);
    if (fd < 0) return fail(arg, T_DIRS, i, errno);
    char buf[16384] __attribute__((aligned(8)));
    int code = 0;
    for (;;) {
        long n = syscall(SYS_getdents64, fd, buf, sizeof buf);
        if (n < 0) {
            code = errno;
            break;
        }
        if (n == 0) break;
    }
    code = close_checked(fd, code);
    return code ? fail(arg, T_DIRS, i, code) : 0;
}

static int next_pass(Loop *s, int64_t at, int64_t other) {
    at = (at + 1) % s->data.n;
    if (at == other && s->data.n > 1) at = (at + 1) % s->data.n; /* never the other's file */
    return (int)at;
}

/* One transfer of a sequential pass; the file stays open from the first to the last. */
static int do_stream(Loop *s, int write, int64_t *arg) {
    int *fd = write ? &s->write_fd : &s->read_fd;
    int64_t *off = write ? &s->write_off : &s->read_off;
    int64_t at = write ? s->write_at : s->read_at;
    int code = 0;
    if (*fd < 0) {
        if (write) {
            code = open_written(s, &s->data, at, fd);
        } else {
            *fd = open_read(s, &s->data, at);
            if (*fd < 0) code = errno;
        }
        if (code) {
            *fd = -1, *off = 0;
            return fail(arg, T_DATA, at, code);
        }
    }
    int64_t length = s->file_size - *off < s->transfer ? s->file_size - *off : s->transfer;
    ssize_t n = write ? pwrite(*fd, source(s), (size_t)length, *off)
                      : pread(*fd, s->read_buf, (size_t)length, *off);
    if (n < 0) code = errno;
    else if (write && s->fsync_policy == FSYNC_EACH && fdatasync(*fd) != 0) code = errno;
    if (code) {
        close(*fd);
        *fd = -1, *off = 0; /* restart the pass next time */
        return fail(arg, T_DATA, at, code);
    }
    *off += n;
    if (write) s->bytes_written += n, s->bytes_by_op[OP_SEQ_WRITE] += n;
    else s->bytes_read += n, s->bytes_by_op[OP_SEQ_READ] += n;
    if (n < length || *off >= s->file_size) {
        if (write && s->fsync_policy == FSYNC_CLOSE && fdatasync(*fd) != 0) code = errno;
        code = close_checked(*fd, code);
        *fd = -1, *off = 0;
        if (write) s->write_at = next_pass(s, s->write_at, s->read_at);
        else s->read_at = next_pass(s, s->read_at, s->write_at);
        if (code) return fail(arg, T_DATA, at, code);
    }
    return 0;
}

static int run_op(Loop *s, int code, int64_t *arg) {
    switch (code) {
    case OP_STAT: return do_stat(s, arg);
    case OP_ACCESS: return do_access(s, arg);
    case OP_CHMOD: return do_chmod(s, arg);
    case OP_MKDIR: return do_mkdir(s, arg);
    case OP_CREATE: return do_create(s, arg);
    case OP_UNLINK: return do_unlink(s, &s->created_empty, arg);
    case OP_UNLINK2: return do_unlink(s, &s->created_data, arg);
    case OP_WRITE_FILE: return do_write_file(s, arg);
    case OP_READ_FILE: return do_read_file(s, arg);
    case OP_RANDOM_READ: return do_random_read(s, arg);
    case OP_RANDOM_WRITE: return do_random_write(s, arg);
    case OP_APPEND: return do_append(s, arg);
    case OP_READDIR: return do_readdir(s, arg);
    case OP_SEQ_READ: return do_stream(s, 0, arg);
    case OP_SEQ_WRITE: return do_stream(s, 1, arg);
    default: return UNSUPPORTED_OP;
    }
}

/* ------------------------------------------------------------------ the Python type */

static int table_from(Table *t, Py_buffer *names, Py_buffer *parents, Py_buffer *inos,
                      Py_ssize_t ndirfd, const char *what) {
    Py_ssize_t n = parents->len / (Py_ssize_t)sizeof(int32_t);
    t->n = n;
    t->blob = malloc(names->len + 1);
    t->name = malloc(sizeof(char *) * (n ? n : 1));
    t->parent = malloc(sizeof(int32_t) * (n ? n : 1));
    t->ino = calloc(n ? n : 1, sizeof(uint64_t));
    if (!t->blob || !t->name || !t->parent || !t->ino) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(t->blob, names->buf, names->len);
    t->blob[names->len] = '\0';
    memcpy(t->parent, parents->buf, sizeof(int32_t) * n);
    if (inos != NULL && inos->len >= (Py_ssize_t)sizeof(uint64_t) * n)
        memcpy(t->ino, inos->buf, sizeof(uint64_t) * n);
    char *p = t->blob, *end = t->blob + names->len;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (p >= end || t->parent[i] < 0 || t->parent[i] >= ndirfd) {
            PyErr_Format(PyExc_ValueError, "fileloop: %s table is inconsistent", what);
            return -1;
        }
        t->name[i] = p;
        p += strlen(p) + 1;
    }
    return 0;
}

static void table_free(Table *t) {
    free(t->blob), free(t->name), free(t->parent), free(t->ino);
    memset(t, 0, sizeof *t);
}

static void loop_close_fds(Loop *s) {
    if (s->read_fd >= 0) close(s->read_fd), s->read_fd = -1;
    if (s->write_fd >= 0) close(s->write_fd), s->write_fd = -1;
    for (Py_ssize_t i = 0; i < s->ndirfd; i++)
        if (s->dirfd[i] >= 0) close(s->dirfd[i]), s->dirfd[i] = -1;
}

static void Loop_dealloc(Loop *s) {
    loop_close_fds(s);
    free(s->dirfd);
    table_free(&s->any), table_free(&s->empty), table_free(&s->data), table_free(&s->dirs);
    free(s->dir_self);
    free(s->read_buf), free(s->write_buf);
    free(s->created_empty.items), free(s->created_data.items), free(s->scratch.items);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static int Loop_init(Loop *s, PyObject *args, PyObject *kwds) {
    static char *kw[] = {"dirfds", "any_names", "any_parents", "empty_names", "empty_parents",
                         "empty_inos", "data_names", "data_parents", "data_inos", "dir_names",
                         "dir_parents", "dir_self", "created_stem", "scratch_stem", "pattern", "direct", "fsync",
                         "backend", "transfer", "block", "file_size", "seed",
                         "create_empty_first", "create_data_end", "creates_per_deck", NULL};
    Py_buffer b[13];
    memset(b, 0, sizeof b);
    const char *created_stem, *scratch_stem;
    unsigned long long seed;
    s->read_fd = s->write_fd = -1;
    if (!PyArg_ParseTupleAndKeywords(
            args, kwds, "y*y*y*y*y*y*y*y*y*y*y*y*ssy*iiiLLLKLLL", kw, &b[0], &b[1], &b[2],
            &b[3], &b[4], &b[5], &b[6], &b[7], &b[8], &b[9], &b[10], &b[11], &created_stem,
            &scratch_stem, &b[12],
            &s->direct, &s->fsync_policy, &s->backend, &s->transfer, &s->block, &s->file_size,
            &seed, &s->create_empty_first, &s->create_data_end, &s->creates_per_deck))
        return -1;
    int rc = -1;
    s->ndirfd = b[0].len / (Py_ssize_t)sizeof(int32_t);
    s->dirfd = malloc(sizeof(int) * (s->ndirfd ? s->ndirfd : 1));
    if (s->dirfd == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < s->ndirfd; i++) s->dirfd[i] = ((int32_t *)b[0].buf)[i];
    if (table_from(&s->any, &b[1], &b[2], NULL, s->ndirfd, "any") ||
        table_from(&s->empty, &b[3], &b[4], &b[5], s->ndirfd, "empty") ||
        table_from(&s->data, &b[6], &b[7], &b[8], s->ndirfd, "data") ||
        table_from(&s->dirs, &b[9], &b[10], NULL, s->ndirfd, "dirs"))
        goto done;
    if (b[11].len != (Py_ssize_t)sizeof(int32_t) * s->dirs.n || strlen(created_stem) >= sizeof s->created_stem ||
        strlen(scratch_stem) >= sizeof s->scratch_stem ||
        s->transfer <= 0 || s->block <= 0 || b[12].len < 2 * ALIGN || b[12].len % (2 * ALIGN)) {
        PyErr_SetString(PyExc_ValueError, "fileloop: inconsistent session settings");
        goto done;
    }
    s->dir_self = malloc(b[11].len ? b[11].len : 1);
    memcpy(s->dir_self, b[11].buf, b[11].len);
    strcpy(s->created_stem, created_stem);
    strcpy(s->scratch_stem, scratch_stem);
    s->buf_size = b[12].len / 2;
    if (posix_memalign((void **)&s->read_buf, ALIGN, s->buf_size) ||
        posix_memalign((void **)&s->write_buf, ALIGN, 2 * s->buf_size)) {
        PyErr_NoMemory();
        goto done;
    }
    memset(s->read_buf, 0, s->buf_size);
    memcpy(s->write_buf, b[12].buf, 2 * s->buf_size);
    s->rng = seed;
    s->blocks_per_file = s->file_size / s->block > 0 ? s->file_size / s->block : 1;
    s->read_at = 0;
    s->write_at = s->data.n / 2;
    rc = 0;
done:
    for (int i = 0; i < 13; i++)
        if (b[i].obj != NULL) PyBuffer_Release(&b[i]);
    return rc;
}

/* run(codes, latency_us, errors, args, generation, generation_value, count, deadline_ns,
 *     open_loop, period_ns, next_due_ns) -> (done, next_due_ns, failed)
 * Runs codes[0:count] until one of: all done, the generation cell changes (a stage change
 * or a stop), the deadline passes, or (open loop) the next intended start lies beyond it.
 * failed: how many of the done operations have a non-zero errors[i]. Counted here because
 * the fold that follows runs on a cold CPU: after a batch of blocking calls every page
 * Python touches first costs microseconds on this VM (a numpy scan of errors[] measured
 * 60-150 us there against 1-3 us warm), while this count is free inside the loop. */
static PyObject *Loop_run(Loop *s, PyObject *args) {
    Py_buffer codes, lat, err, argb, gen;
    long long gen_value, deadline, period, due;
    Py_ssize_t count;
    int open_loop;
    if (!PyArg_ParseTuple(args, "y*w*w*w*y*LnLpLL", &codes, &lat, &err, &argb, &gen, &gen_value,
                          &count, &deadline, &open_loop, &period, &due))
        return NULL;
    PyObject *result = NULL;
    if (count < 0 || codes.len < count * 4 || lat.len < count * 8 || err.len < count * 4 ||
        argb.len < count * 8 || gen.len < 8 || s->dirfd == NULL) {
        PyErr_SetString(PyExc_ValueError, "fileloop: arrays shorter than the batch");
        goto done;
    }
    const int32_t *code = codes.buf;
    int64_t *lat_us = lat.buf, *arg = argb.buf;
    int32_t *errs = err.buf;
    Schedule schedule = {gen.buf, gen_value, deadline, open_loop, period, due};
    Py_ssize_t i = 0, failed = 0;
    Py_BEGIN_ALLOW_THREADS
    for (; i < count; i++) {
        int64_t start;
        if (!schedule_current(&schedule) || !schedule_start(&schedule, i, &start)) break;
        errs[i] = run_op(s, code[i], &arg[i]);
        lat_us[i] = (now_ns() - start) / 1000;
        failed += errs[i] != 0;
    }
    Py_END_ALLOW_THREADS
    result = Py_BuildValue("(nLn)", i, (long long)schedule.due, failed);
done:
    PyBuffer_Release(&codes), PyBuffer_Release(&lat), PyBuffer_Release(&err);
    PyBuffer_Release(&argb), PyBuffer_Release(&gen);
    return result;
}

static PyObject *queue_list(const Queue *q) {
    PyObject *list = PyList_New(q->len);
    if (list == NULL) return NULL;
    for (Py_ssize_t i = 0; i < q->len; i++)
        PyList_SET_ITEM(list, i, PyLong_FromLongLong(q->items[(q->head + i) % q->cap]));
    return list;
}

/* held() -> (created empty, created with data, scratch): numbers of what is still there. */
static PyObject *Loop_held(Loop *s, PyObject *unused) {
    (void)unused;
    return Py_BuildValue("(NNN)", queue_list(&s->created_empty), queue_list(&s->created_data),
                         queue_list(&s->scratch));
}

/* counters() -> (bytes by operation code, bytes read, bytes written) */
static PyObject *Loop_counters(Loop *s, PyObject *unused) {
    (void)unused;
    PyObject *by_op = PyTuple_New(OP_COUNT);
    if (by_op == NULL) return NULL;
    for (int i = 0; i < OP_COUNT; i++)
        PyTuple_SET_ITEM(by_op, i, PyLong_FromLongLong(s->bytes_by_op[i]));
    return Py_BuildValue("(NLL)", by_op, (long long)s->bytes_read, (long long)s->bytes_written);
}

/* stream_state() -> (read file index, read offset, write file index, write offset) */
static PyObject *Loop_stream_state(Loop *s, PyObject *unused) {
    (void)unused;
    return Py_BuildValue("(LLLL)", (long long)s->read_at, (long long)s->read_off,
                         (long long)s->write_at, (long long)s->write_off);
}

static PyObject *Loop_close(Loop *s, PyObject *unused) {
    (void)unused;
    loop_close_fds(s);
    Py_RETURN_NONE;
}

static PyMethodDef Loop_methods[] = {
    {"run", (PyCFunction)Loop_run, METH_VARARGS, "Run a batch of operations (GIL released)."},
    {"held", (PyCFunction)Loop_held, METH_NOARGS, "What the session made that is still there."},
    {"counters", (PyCFunction)Loop_counters, METH_NOARGS, "Byte counters."},
    {"stream_state", (PyCFunction)Loop_stream_state, METH_NOARGS, "Where the passes are."},
    {"close", (PyCFunction)Loop_close, METH_NOARGS, "Close the descriptors the loop owns."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject LoopType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "storage.targets._fileloop.Loop",
    .tp_basicsize = sizeof(Loop),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One file session's native operation loop.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Loop_init,
    .tp_dealloc = (destructor)Loop_dealloc,
    .tp_methods = Loop_methods,
};

static struct PyModuleDef fileloop_module = {
    PyModuleDef_HEAD_INIT, "_fileloop", "dbsim's native loop for file-tree sessions.", -1, NULL,
};

PyMODINIT_FUNC PyInit__fileloop(void) {
    if (PyType_Ready(&LoopType) < 0) return NULL;
    PyObject *m = PyModule_Create(&fileloop_module);
    if (m == NULL) return NULL;
    PyObject *ops = PyTuple_New(OP_COUNT);
    for (int i = 0; i < OP_COUNT; i++) PyTuple_SET_ITEM(ops, i, PyUnicode_FromString(OP_NAMES[i]));
    Py_INCREF(&LoopType);
    if (PyModule_AddObject(m, "Loop", (PyObject *)&LoopType) < 0 ||
        PyModule_AddObject(m, "OPS", ops) < 0 ||
        PyModule_AddIntConstant(m, "REFUSED_LINKS", REFUSED_LINKS) < 0 ||
        PyModule_AddIntConstant(m, "REFUSED_INODE", REFUSED_INODE) < 0 ||
        PyModule_AddIntConstant(m, "REFUSED_KIND", REFUSED_KIND) < 0 ||
        PyModule_AddIntConstant(m, "NOTHING_TO_REMOVE", NOTHING_TO_REMOVE) < 0 ||
        PyModule_AddIntConstant(m, "UNSUPPORTED_OP", UNSUPPORTED_OP) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
