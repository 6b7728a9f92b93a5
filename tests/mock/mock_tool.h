/* mock_tool.h - how a test tool watches the mock libcuda's GPU work, the
 * way CUPTI watches the real driver. The stand-in libcupti of the tests
 * (tests/mock/mock_cupti.c) registers with cuMockToolHook (exported by the
 * mock only, looked up with dlsym) and turns these events into callbacks,
 * activity records, ranges and PC samples.
 *
 * Events come on the thread that made the driver call, synchronously:
 *   MOCK_TOOL_SUBMIT  a stream operation or graph launch enters the driver
 *                     (also when a capturing stream records it)
 *   MOCK_TOOL_RUN     one kernel/copy/memset executes (a graph launch runs
 *                     several after one SUBMIT)
 *   MOCK_TOOL_MODULE  a module was loaded (image: the code the mock kept)
 *   MOCK_TOOL_CALL    another driver call that a tool sees (cuCtxGetCurrent,
 *                     cuDriverGetVersion): no GPU work
 * Pointers in an event are valid during the call only. */
#ifndef MOCK_TOOL_H
#define MOCK_TOOL_H

#include <stddef.h>
#include <stdint.h>

#include <cuda.h>

enum { MOCK_TOOL_SUBMIT = 1, MOCK_TOOL_RUN = 2, MOCK_TOOL_MODULE = 3,
       MOCK_TOOL_CALL = 4 };
enum { MOCK_TOOL_KERNEL = 0, MOCK_TOOL_COPY = 1, MOCK_TOOL_SET = 2 };

typedef struct mock_tool_event {
  int what;
  int kind;                 /* RUN: MOCK_TOOL_KERNEL / COPY / SET */
  const char *kernel;       /* RUN kernel: its name */
  unsigned grid[3], block[3];
  uint64_t bytes;           /* RUN copy/set */
  const void *stream;
  int capturing;            /* SUBMIT: recorded into a graph, not run */
  int graph;                /* SUBMIT/RUN: a graph launch (its work) */
  uint64_t start_ns, end_ns;/* RUN: CLOCK_MONOTONIC around the work */
  const void *image;        /* RUN kernel: its module's code; MODULE: same */
  size_t image_size;
  const void *ctx;          /* RUN: the CUcontext the work runs in */
} mock_tool_event;

typedef void (*mock_tool_fn)(void *user, const mock_tool_event *ev);
typedef CUresult (*mock_tool_hook_fn)(mock_tool_fn fn, void *user);

#endif
