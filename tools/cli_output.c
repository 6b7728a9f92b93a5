/* cli_output.c - the output files of every cucap command (cucap_cli.h,
 * "output files"): the check that an output is none of the command's inputs,
 * and the temporary file in the output's directory that is renamed over it
 * only once complete. Owner: tools/.
 *
 * The check runs before anything is opened for writing: a capture is read
 * through mmap, so truncating the file being read kills the reader with
 * SIGBUS and loses the input. Writing to a temporary file and renaming it
 * keeps the old output whole when the command dies or the disk fills. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cucap_cli.h"

/* The path out names once its symlinks are resolved: realpath of the file,
 * else (not there yet) realpath of its directory + its name. 0 on success. */
static int output_resolve(const char *out, char *buf, size_t size) {
  char tmp[PATH_MAX];
  if (realpath(out, tmp)) {
    int n = snprintf(buf, size, "%s", tmp);
    return n < 0 || (size_t)n >= size ? -1 : 0;
  }
  const char *slash = strrchr(out, '/');
  char dir[PATH_MAX];
  if (!slash)
    snprintf(dir, sizeof dir, ".");
  else if (slash == out)
    snprintf(dir, sizeof dir, "/");
  else if ((size_t)(slash - out) < sizeof dir)
    snprintf(dir, sizeof dir, "%.*s", (int)(slash - out), out);
  else
    return -1;
  if (!realpath(dir, tmp))
    return -1;
  int n = snprintf(buf, size, "%s/%s", tmp, slash ? slash + 1 : out);
  return n < 0 || (size_t)n >= size ? -1 : 0;
}

/* 1 when out names the file in: the same name, the same inode (a symlink to
 * it or a hard link of it), or the same path once symlinks are resolved. */
static int output_is(const char *out, const char *in) {
  struct stat so, si;
  char rout[PATH_MAX], rin[PATH_MAX];
  if (!strcmp(out, in))
    return 1;
  if (stat(out, &so) == 0 && stat(in, &si) == 0 && si.st_dev == so.st_dev &&
      si.st_ino == so.st_ino)
    return 1;
  return output_resolve(out, rout, sizeof rout) == 0 && realpath(in, rin) &&
         !strcmp(rin, rout);
}

int cucap_cli_output_emit_ok(const char *dir, const char *in, const char *out) {
  return !output_is(dir, in) && !output_is(dir, out);
}

int cucap_cli_output_check(const char *cmd, const char *out, const char *const *inputs,
                           size_t ninputs) {
  struct stat so;
  int have_out = stat(out, &so) == 0;
  for (size_t i = 0; i < ninputs; i++) {
    if (inputs[i] && output_is(out, inputs[i])) {
      cucap_cli_error(cmd, out, "is the input %s: refusing to overwrite it", inputs[i]);
      return CUCAP_EXIT_USAGE;
    }
  }
  if (have_out && S_ISDIR(so.st_mode)) {
    cucap_cli_error(cmd, out, "is a directory, not an output file");
    return CUCAP_EXIT_USAGE;
  }
  return CUCAP_EXIT_OK;
}

int cucap_cli_output_begin(const char *cmd, const char *out, cucap_cli_output *o) {
  o->fd = -1;
  o->tmp[0] = 0;
  /* An existing output reached through a symlink is replaced where it lies,
   * the symlink kept. */
  if (!realpath(out, o->final) &&
      (size_t)snprintf(o->final, sizeof o->final, "%s", out) >= sizeof o->final) {
    cucap_cli_error(cmd, out, "cannot create: name too long");
    return CUCAP_EXIT_IO;
  }
  const char *slash = strrchr(o->final, '/');
  int dirlen = slash ? (int)(slash - o->final) + 1 : 0;
  int n = snprintf(o->tmp, sizeof o->tmp, "%.*s.%s.cucap-XXXXXX", dirlen, o->final,
                   o->final + dirlen);
  if (n < 0 || (size_t)n >= sizeof o->tmp) {
    cucap_cli_error(cmd, out, "cannot create: name too long");
    o->tmp[0] = 0;
    return CUCAP_EXIT_IO;
  }
  o->fd = mkstemp(o->tmp);
  if (o->fd < 0) {
    cucap_cli_error(cmd, out, "cannot create: %s", strerror(errno));
    o->tmp[0] = 0;
    return CUCAP_EXIT_IO;
  }
  /* mkstemp makes the file 0600; an output gets what creat() would give. */
  mode_t um = umask(0);
  umask(um);
  (void)fchmod(o->fd, 0666 & ~um);
  return CUCAP_EXIT_OK;
}

int cucap_cli_output_commit(const char *cmd, const char *out, cucap_cli_output *o) {
  int rc = CUCAP_EXIT_OK;
  if (o->fd >= 0 && (fsync(o->fd) != 0 || close(o->fd) != 0)) {
    cucap_cli_error(cmd, out, "cannot write: %s", strerror(errno));
    rc = CUCAP_EXIT_IO;
  }
  o->fd = -1;
  if (rc == CUCAP_EXIT_OK && rename(o->tmp, o->final) != 0) {
    cucap_cli_error(cmd, out, "cannot rename the finished output into place: %s",
                    strerror(errno));
    rc = CUCAP_EXIT_IO;
  }
  if (rc != CUCAP_EXIT_OK)
    unlink(o->tmp);
  o->tmp[0] = 0;
  return rc;
}

void cucap_cli_output_abort(cucap_cli_output *o) {
  if (o->fd >= 0)
    close(o->fd);
  o->fd = -1;
  if (o->tmp[0])
    unlink(o->tmp);
  o->tmp[0] = 0;
}

void cucap_cli_output_rename_in(const cucap_cli_output *o, const char *out, char *msg,
                                size_t size) {
  char *at = o->tmp[0] ? strstr(msg, o->tmp) : NULL;
  if (!at)
    return;
  char rest[1024];
  snprintf(rest, sizeof rest, "%s", at + strlen(o->tmp));
  snprintf(at, size - (size_t)(at - msg), "%s%s", out, rest);
}
