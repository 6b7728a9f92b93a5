/* cupti_nvdisasm.c - runs nvdisasm for the CUPTI engine (cupti_sass.c, and
 * cupti_disasm_early.c on a thread of its own): one process per cubin, on
 * its sampled functions or the kernels that ran, several at once (a
 * framework's cubins are many and large: one after the other, whole, they
 * take minutes), restricted with -fun to those functions.
 * -fun takes symbol-table indices (cucap_cubin_function_symbols), not
 * names: given names it exits with status 1. See cupti_disasm.h. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cucap_log.h"
#include "cucap_vec.h"
#include "cupti_disasm.h"

typedef struct nvd_run {
  int variant;               /* next variant to run */
  pid_t pid;
  int fd;                    /* read end of its stdout; -1 when not running */
  char *out;
  size_t len, cap;
  int done;
  int oom;                   /* the listing did not fit in memory */
  char tmp[64];              /* the cubin's temporary file ("" until written) */
} nvd_run;

static int nvd_write(nvd_run *r, const ck_nvd_job *j) {
  snprintf(r->tmp, sizeof r->tmp, "/tmp/cucap-cubin-XXXXXX");
  int fd = mkstemp(r->tmp);
  if (fd < 0) {
    r->tmp[0] = 0;
    return 0;
  }
  const unsigned char *d = j->cubin;
  size_t left = j->size;
  while (left) {
    ssize_t k = write(fd, d, left);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      break;
    d += k;
    left -= (size_t)k;
  }
  close(fd);
  return left == 0;
}

/* variants: 0 -gi -fun, 1 -g -fun, 2 -gi, 3 -g */
static int nvd_start(nvd_run *r, const ck_nvd_job *j, const char *tool) {
  int has_funs = j->funs && *j->funs;
  if (r->variant < 2 && !has_funs)
    r->variant = 2;
  if (r->variant >= 2 && has_funs && !j->whole_fallback)
    return 0;
  if (r->variant > 3)
    return 0;
  if (!r->tmp[0] && !nvd_write(r, j))
    return 0;
  const char *argv[7];
  int a = 0;
  argv[a++] = tool;
  argv[a++] = "-c";
  argv[a++] = r->variant % 2 ? "-g" : "-gi";
  if (r->variant < 2) {
    argv[a++] = "-fun";
    argv[a++] = j->funs;
  }
  argv[a++] = r->tmp;
  argv[a] = NULL;
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) /* no other child may hold the write end */
    return 0;
  /* posix_spawn, not fork: glibc's shares the address space until the exec
   * (CLONE_VM|CLONE_VFORK), so the replayer's page tables and page-locked
   * payload cache (hundreds of MiB, copied eagerly by fork because they are
   * pinned) are not duplicated for every nvdisasm. The pipe's ends are
   * close-on-exec; dup2 onto stdout clears that flag on the copy. */
  posix_spawn_file_actions_t fa;
  if (posix_spawn_file_actions_init(&fa) != 0) {
    close(p[0]);
    close(p[1]);
    return 0;
  }
  posix_spawn_file_actions_adddup2(&fa, p[1], 1);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  extern char **environ;
  int se = posix_spawn(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (se != 0) {
    close(p[0]);
    close(p[1]);
    return 0;
  }
  close(p[1]);
  r->pid = pid;
  r->fd = p[0];
  r->len = 0;
  r->oom = 0;
  return 1;
}

/* ck_nvdisasm_run: reads what x's process wrote (the buffer grown for
 * it, or drained into nowhere when memory ran out); read's result. */
static ssize_t nvd_read(nvd_run *x) {
  (void)CUCAP_VEC_RESERVE(x->out, x->cap, x->len + 65536 + 1, (size_t)1 << 20);
  ssize_t got;
  if (x->out && x->len + 65536 + 1 <= x->cap) {
    got = read(x->fd, x->out + x->len, 65536);
    if (got > 0)
      x->len += (size_t)got;
  } else { /* out of memory: drain into nowhere, the run fails */
    char sink[4096];
    got = read(x->fd, sink, sizeof sink);
    x->oom = 1;
  }
  return got;
}

/* ck_nvdisasm_run: job i's process closed its output: reaps it, hands a
 * complete listing to take, else moves on to the next variant. */
static void nvd_finish(nvd_run *x, const ck_nvd_job *job, size_t i,
                       const char *tool, ck_nvd_take_fn take, void *user) {
  close(x->fd);
  x->fd = -1;
  int st = 0;
  while (waitpid(x->pid, &st, 0) < 0 && errno == EINTR)
    ;
  int whole = x->variant >= 2;
  int ok = WIFEXITED(st) && WEXITSTATUS(st) == 0 && x->out && !x->oom;
  if (ok) {
    x->out[x->len] = 0;
    ok = take(user, i, x->out, x->len, whole);
  } else {
    CUCAP_DEBUG("profile: %s %s%s on a %zu-byte cubin failed (status %d)",
                tool, x->variant % 2 ? "-g" : "-gi",
                whole ? "" : " -fun", job->size, st);
  }
  if (ok) {
    x->done = 1;
  } else {
    x->variant++;
    if (x->variant == 2 && job->whole_fallback)
      CUCAP_INFO("profile: nvdisasm -fun gave nothing usable for a %zu-byte "
                 "cubin; disassembling all of it", job->size);
  }
  free(x->out);
  x->out = NULL;
  x->len = x->cap = 0;
}

unsigned ck_nvdisasm_run(const char *tool, const ck_nvd_job *jobs, size_t n,
                         unsigned parallel, ck_nvd_take_fn take, void *user) {
  if (!tool || !n)
    return 0;
  if (!parallel)
    parallel = 1;
  nvd_run *r = calloc(n, sizeof *r);
  struct pollfd *pf = calloc(parallel, sizeof *pf);
  size_t *who = calloc(parallel, sizeof *who);
  if (!r || !pf || !who) {
    free(r);
    free(pf);
    free(who);
    return 0;
  }
  for (size_t i = 0; i < n; i++)
    r[i].fd = -1;
  unsigned runs = 0, running = 0;
  for (;;) {
    /* start what fits */
    for (size_t i = 0; i < n && running < parallel; i++) {
      if (r[i].done || r[i].fd >= 0)
        continue;
      if (nvd_start(&r[i], &jobs[i], tool)) {
        running++;
        runs++;
      } else {
        r[i].done = 1;
      }
    }
    if (!running)
      break;
    nfds_t np = 0;
    for (size_t i = 0; i < n; i++)
      if (r[i].fd >= 0) {
        pf[np].fd = r[i].fd;
        pf[np].events = POLLIN;
        pf[np].revents = 0;
        who[np++] = i;
      }
    int k = poll(pf, np, -1);
    if (k < 0 && errno == EINTR)
      continue;
    if (k < 0)
      break;
    for (nfds_t q = 0; q < np; q++) {
      if (!pf[q].revents)
        continue;
      nvd_run *x = &r[who[q]];
      ssize_t got = nvd_read(x);
      if (got < 0 && errno == EINTR)
        continue;
      if (got > 0)
        continue;
      /* end of output: the process is done */
      running--;
      nvd_finish(x, &jobs[who[q]], who[q], tool, take, user);
    }
  }
  for (size_t i = 0; i < n; i++) {
    if (r[i].fd >= 0) { /* poll failed: stop what runs */
      close(r[i].fd);
      kill(r[i].pid, SIGKILL);
      waitpid(r[i].pid, NULL, 0);
    }
    free(r[i].out);
    if (r[i].tmp[0])
      unlink(r[i].tmp);
  }
  free(r);
  free(pf);
  free(who);
  return runs;
}
