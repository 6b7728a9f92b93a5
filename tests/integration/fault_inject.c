/* fault_inject.c - an LD_PRELOAD fault injector for file output, used by
 * test_record_diskfull.sh to make the recorder's writes fail the way a full
 * disk or a failing device does, without root or a special filesystem (in
 * the spirit of SQLite's replaceable syscall table).
 *
 * Build: cc -shared -fPIC -o fault_inject.so fault_inject.c -ldl
 * Environment (nothing happens unless CUCAP_FI_PATH is set):
 *   CUCAP_FI_PATH=S    watch files whose path, as opened, contains S
 *   CUCAP_FI_LIMIT=N   N bytes in total may be written to watched files; the
 *                      write that crosses the limit is cut short (a partial
 *                      write, like a filling disk), later ones fail
 *   CUCAP_FI_ERRNO=E   errno of failing writes: ENOSPC (default), EIO,
 *                      EDQUOT or EFBIG
 *   CUCAP_FI_OPEN=E    opening a watched path fails with errno E
 *   CUCAP_FI_SYNC=E    fsync/fdatasync of a watched file fails with E
 *   CUCAP_FI_LOG=F     at exit, append "writes=W bytes=B failed=F" (watched
 *                      files only) to file F
 * Intercepts open/open64/openat/openat64/creat/creat64, write/pwrite/
 * pwrite64/writev, fsync/fdatasync and close. */
#define _GNU_SOURCE /* RTLD_NEXT, O_TMPFILE, open64 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#define FI_MAX_FD 4096

static const char *g_path;
static unsigned long long g_limit = ~0ull;
static int g_errno = ENOSPC, g_open_errno, g_sync_errno;
static unsigned char g_watched[FI_MAX_FD];
static unsigned long long g_bytes, g_writes, g_failed;
static int g_ready;

static int errno_of(const char *s) {
  if (!s || !*s) return 0;
  if (!strcmp(s, "ENOSPC")) return ENOSPC;
  if (!strcmp(s, "EIO")) return EIO;
  if (!strcmp(s, "EDQUOT")) return EDQUOT;
  if (!strcmp(s, "EFBIG")) return EFBIG;
  if (!strcmp(s, "EACCES")) return EACCES;
  if (!strcmp(s, "EROFS")) return EROFS;
  return atoi(s);
}

static void fi_init(void) {
  if (__atomic_load_n(&g_ready, __ATOMIC_ACQUIRE))
    return;
  g_path = getenv("CUCAP_FI_PATH");
  if (g_path && !*g_path) g_path = NULL;
  const char *l = getenv("CUCAP_FI_LIMIT");
  if (l && *l) g_limit = strtoull(l, NULL, 0);
  int e = errno_of(getenv("CUCAP_FI_ERRNO"));
  if (e) g_errno = e;
  g_open_errno = errno_of(getenv("CUCAP_FI_OPEN"));
  g_sync_errno = errno_of(getenv("CUCAP_FI_SYNC"));
  __atomic_store_n(&g_ready, 1, __ATOMIC_RELEASE);
}

static void *next(const char *name) { return dlsym(RTLD_NEXT, name); }

static int watched(int fd) { return fd >= 0 && fd < FI_MAX_FD && g_watched[fd]; }

static int open_hook(const char *path, int fd_or_err) {
  if (fd_or_err >= 0 && fd_or_err < FI_MAX_FD)
    g_watched[fd_or_err] = g_path && path && strstr(path, g_path) != NULL;
  return fd_or_err;
}

static int refuse_open(const char *path) {
  fi_init();
  if (g_path && g_open_errno && path && strstr(path, g_path)) {
    errno = g_open_errno;
    return 1;
  }
  return 0;
}

/* The body of every open-family wrapper: the mode argument exists only when
 * the flags create a file; a watched path may be refused (CUCAP_FI_OPEN);
 * otherwise the real call NAME (of type TYPE) gets the leading arguments,
 * flags and mode, and the descriptor it returns is watched or not. */
#define FI_OPEN_BODY(NAME, TYPE, ...)                      \
  static TYPE real;                                        \
  mode_t mode = 0;                                         \
  if (flags & (O_CREAT | O_TMPFILE)) {                     \
    va_list ap;                                            \
    va_start(ap, flags);                                   \
    mode = (mode_t)va_arg(ap, int);                        \
    va_end(ap);                                            \
  }                                                        \
  if (refuse_open(path)) return -1;                        \
  if (!real) real = (TYPE)next(NAME);                      \
  return open_hook(path, real(__VA_ARGS__, flags, mode))

typedef int (*open_fn)(const char *, int, ...);
typedef int (*openat_fn)(int, const char *, int, ...);

int open(const char *path, int flags, ...) { FI_OPEN_BODY("open", open_fn, path); }
int open64(const char *path, int flags, ...) { FI_OPEN_BODY("open64", open_fn, path); }
int openat(int dir, const char *path, int flags, ...) {
  FI_OPEN_BODY("openat", openat_fn, dir, path);
}
int openat64(int dir, const char *path, int flags, ...) {
  FI_OPEN_BODY("openat64", openat_fn, dir, path);
}

int creat(const char *path, mode_t mode) { return open(path, O_CREAT | O_WRONLY | O_TRUNC, mode); }
int creat64(const char *path, mode_t mode) { return open64(path, O_CREAT | O_WRONLY | O_TRUNC, mode); }

int close(int fd) {
  static int (*real)(int);
  if (!real) real = (int (*)(int))next("close");
  if (fd >= 0 && fd < FI_MAX_FD) g_watched[fd] = 0;
  return real(fd);
}

/* How many of n bytes a watched write may write now (0 = fail it). */
static size_t allow(size_t n) {
  __atomic_add_fetch(&g_writes, 1, __ATOMIC_RELAXED);
  unsigned long long used = __atomic_load_n(&g_bytes, __ATOMIC_RELAXED);
  for (;;) {
    if (used >= g_limit) {
      __atomic_add_fetch(&g_failed, 1, __ATOMIC_RELAXED);
      return 0;
    }
    unsigned long long a = g_limit - used < n ? g_limit - used : n;
    if (__atomic_compare_exchange_n(&g_bytes, &used, used + a, 0, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED))
      return (size_t)a;
  }
}

/* Cuts *n to what a write to fd may write now; 0 when a watched write
 * fails (errno set). Unwatched files and empty writes pass unchanged. */
static int write_allowed(int fd, size_t *n) {
  fi_init();
  if (!watched(fd) || *n == 0) return 1;
  *n = allow(*n);
  if (*n) return 1;
  errno = g_errno;
  return 0;
}

ssize_t write(int fd, const void *buf, size_t n) {
  static ssize_t (*real)(int, const void *, size_t);
  if (!real) real = (ssize_t(*)(int, const void *, size_t))next("write");
  return write_allowed(fd, &n) ? real(fd, buf, n) : -1;
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off) {
  static ssize_t (*real)(int, const void *, size_t, off_t);
  if (!real) real = (ssize_t(*)(int, const void *, size_t, off_t))next("pwrite");
  return write_allowed(fd, &n) ? real(fd, buf, n, off) : -1;
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off) { return pwrite(fd, buf, n, off); }

ssize_t writev(int fd, const struct iovec *iov, int cnt) {
  static ssize_t (*real)(int, const struct iovec *, int);
  if (!real) real = (ssize_t(*)(int, const struct iovec *, int))next("writev");
  fi_init();
  if (!watched(fd)) return real(fd, iov, cnt);
  /* one element at a time, each subject to the limit */
  ssize_t done = 0;
  for (int i = 0; i < cnt; i++) {
    ssize_t k = write(fd, iov[i].iov_base, iov[i].iov_len);
    if (k < 0) return done ? done : -1;
    done += k;
    if ((size_t)k < iov[i].iov_len) break;
  }
  return done;
}

static int sync_hook(int fd) {
  fi_init();
  if (watched(fd) && g_sync_errno) {
    __atomic_add_fetch(&g_failed, 1, __ATOMIC_RELAXED);
    errno = g_sync_errno;
    return -1;
  }
  return 0;
}

int fsync(int fd) {
  static int (*real)(int);
  if (!real) real = (int (*)(int))next("fsync");
  return sync_hook(fd) ? -1 : real(fd);
}

int fdatasync(int fd) {
  static int (*real)(int);
  if (!real) real = (int (*)(int))next("fdatasync");
  return sync_hook(fd) ? -1 : real(fd);
}

__attribute__((destructor)) static void fi_report(void) {
  const char *log = getenv("CUCAP_FI_LOG");
  if (!log || !*log || !g_path) return;
  char line[160];
  int n = snprintf(line, sizeof line, "pid=%ld writes=%llu bytes=%llu failed=%llu\n", (long)getpid(),
                   g_writes, g_bytes, g_failed);
  static int (*real_open)(const char *, int, ...);
  if (!real_open) real_open = (int (*)(const char *, int, ...))next("open");
  int fd = real_open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd >= 0) {
    static ssize_t (*real_write)(int, const void *, size_t);
    if (!real_write) real_write = (ssize_t(*)(int, const void *, size_t))next("write");
    if (n > 0) real_write(fd, line, (size_t)n);
    static int (*real_close)(int);
    if (!real_close) real_close = (int (*)(int))next("close");
    real_close(fd);
  }
}
