/* cucap_status.h - the one status enum of cucap.
 *
 * Every fallible cucap function returns a cucap_status. Numbers are fixed
 * forever (they appear in exit codes and logs): append new ones, never
 * renumber. cucap_status_str() returns a static string (never free it). */
#ifndef CUCAP_STATUS_H
#define CUCAP_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, number, message) */
#define CUCAP_STATUS_LIST(X)                                                   \
  X(CUCAP_OK, 0, "ok")                                                         \
  X(CUCAP_END, 1, "end of stream")                                             \
  X(CUCAP_ERR_INVALID_ARG, 2, "invalid argument")                              \
  X(CUCAP_ERR_NOMEM, 3, "out of memory")                                       \
  X(CUCAP_ERR_IO, 4, "I/O error")                                              \
  X(CUCAP_ERR_BAD_MAGIC, 5, "not a cucap capture (bad magic)")                 \
  X(CUCAP_ERR_VERSION, 6, "unsupported capture format version")                \
  X(CUCAP_ERR_CORRUPT, 7, "capture is corrupt")                                \
  X(CUCAP_ERR_TRUNCATED, 8, "capture is truncated")                            \
  X(CUCAP_ERR_VERIFY, 9, "FlatBuffer failed verification")                     \
  X(CUCAP_ERR_COMPRESS, 10, "zstd compression failed")                         \
  X(CUCAP_ERR_DECOMPRESS, 11, "zstd decompression failed")                     \
  X(CUCAP_ERR_NOT_FOUND, 12, "not found")                                      \
  X(CUCAP_ERR_TOO_LARGE, 13, "object too large")                               \
  X(CUCAP_ERR_UNSUPPORTED, 14, "unsupported operation")                        \
  X(CUCAP_ERR_CUDA, 15, "CUDA driver call failed")                             \
  X(CUCAP_ERR_MISMATCH, 16, "verification mismatch")                           \
  X(CUCAP_ERR_STATE, 17, "object in wrong state for this call")                \
  X(CUCAP_ERR_INTERNAL, 18, "internal error")                                  \
  X(CUCAP_ERR_NOT_IMPLEMENTED, 19, "not yet implemented")                      \
  X(CUCAP_ERR_ENV, 20, "replay environment does not match the capture")

typedef enum cucap_status {
#define CUCAP_X_ENUM(name, num, msg) name = num,
  CUCAP_STATUS_LIST(CUCAP_X_ENUM)
#undef CUCAP_X_ENUM
} cucap_status;

/* Static, NUL-terminated; valid for the life of the process. Unknown values
 * give "unknown status". */
const char *cucap_status_str(cucap_status s);

/* Symbolic name ("CUCAP_ERR_IO"); static, never NULL. */
const char *cucap_status_name(cucap_status s);

/* Logs "file:line: expr -> status" at debug level (CUCAP_LOG_LEVEL=debug):
 * where an error started and the path it took back up. Does nothing for
 * CUCAP_OK or below the debug level. For the two macros below. */
void cucap_status_trace(cucap_status s, const char *expr, const char *file, int line);

/* Return `status` when cond holds; CUCAP_FORWARD returns a failing status
 * of expr to the caller (zstd error_private.h style). Both trace at debug
 * level with the failing expression and its place. */
#define CUCAP_RETURN_IF(cond, status)                                          \
  do {                                                                         \
    if (cond) {                                                                \
      cucap_status cucap_rif_s_ = (status);                                    \
      cucap_status_trace(cucap_rif_s_, #cond, __FILE__, __LINE__);             \
      return cucap_rif_s_;                                                     \
    }                                                                          \
  } while (0)
#define CUCAP_FORWARD(expr)                                                    \
  do {                                                                         \
    cucap_status cucap_fwd_s_ = (expr);                                        \
    if (cucap_fwd_s_ != CUCAP_OK) {                                            \
      cucap_status_trace(cucap_fwd_s_, #expr, __FILE__, __LINE__);             \
      return cucap_fwd_s_;                                                     \
    }                                                                          \
  } while (0)

#ifdef __cplusplus
}
#endif
#endif
