/* cupti_disasm.h - the nvdisasm listing parser of the CUPTI engine
 * (cupti_disasm.c). Internal to profile/cupti/; kept apart from cupti_internal.h so
 * that it needs no CUPTI header (the fuzz target and the unit test use it). */
#ifndef CUCAP_CUPTI_DISASM_H
#define CUCAP_CUPTI_DISASM_H

#include <stddef.h>
#include <stdint.h>

/* Called for every instruction of the listing: its function, offset, text,
 * and the line info in force ("" / 0 when none; chain "" unless inlined:
 * "a.cu:7 <- b.cu:42", innermost first). Strings are valid during the call. */
typedef void (*ck_disasm_fn)(void *user, const char *function, uint64_t pc,
                             const char *text, const char *file, uint32_t line,
                             const char *chain);
void ck_disasm_parse(const char *text, size_t len, ck_disasm_fn fn, void *user);

/* cupti_nvdisasm.c: nvdisasm run on several cubins at once. For each job,
 * `tool -c -gi [-fun INDICES] FILE` (the cubin written to a temporary file;
 * INDICES: symbol-table indices, what -fun takes), then the same with -g
 * (an nvdisasm without -gi), then, only when -fun was refused or listed
 * nothing useful, the whole cubin. take() judges each listing (on the
 * calling thread, one at a time; the text is valid during the call) and
 * returns 1 to keep it, 0 to try the next variant. At most `parallel`
 * nvdisasm processes run at once. Returns the number of processes run.
 * It keeps no state between calls and may run on any thread (the early
 * listings' thread, cupti_disasm_early.c, calls it beside the passes). */
typedef struct ck_nvd_job {
  const void *cubin;
  size_t size;
  const char *funs;          /* "3,17": symbol indices; NULL/"": whole */
  int whole_fallback;        /* 0: never disassemble the whole cubin */
} ck_nvd_job;
typedef int (*ck_nvd_take_fn)(void *user, size_t job, const char *text,
                              size_t len, int whole);
unsigned ck_nvdisasm_run(const char *tool, const ck_nvd_job *jobs, size_t n,
                         unsigned parallel, ck_nvd_take_fn take, void *user);

#endif
