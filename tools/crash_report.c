/* crash_report.c - a crash of the `cucap` tool is a bug: if one happens, it
 * must at least say where. On SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT the
 * handler writes the signal, the faulting address and the return addresses
 * of the stack, each as object+offset (so `addr2line -e OBJECT OFFSET` finds
 * the line on any machine with the same binary), then re-raises the signal
 * with its default action so the exit status stays a crash's. Only
 * async-signal-safe calls (write, backtrace after a warm-up, dladdr reads
 * loader state that a crash rarely leaves inconsistent; the one exception,
 * after the stack, puts back GPU clocks a profile locked, which a crash
 * would otherwise leave locked for every later user). Inside the CLI only:
 * the interposer never installs signal handlers of its own for this. */
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "cucap_cli.h"
#include "cucap_cupti.h"

static void put(const char *s) {
  ssize_t r = write(2, s, strlen(s));
  (void)r;
}

static void put_hex(uintptr_t v) {
  char b[19] = "0x";
  int n = 0;
  char t[16];
  do {
    t[n++] = "0123456789abcdef"[v & 15];
    v >>= 4;
  } while (v && n < 16);
  for (int i = 0; i < n; i++)
    b[2 + i] = t[n - 1 - i];
  b[2 + n] = 0;
  put(b);
}

static void on_crash(int sig, siginfo_t *si, void *uc) {
  (void)uc;
  put("cucap: internal error: signal ");
  char num[4] = {(char)('0' + sig / 10), (char)('0' + sig % 10), 0, 0};
  put(sig >= 10 ? num : num + 1);
  put(" at address ");
  put_hex((uintptr_t)si->si_addr);
  put("; this is a bug in cucap. Stack (object+offset):\n");
  void *pcs[64];
  int n = backtrace(pcs, 64);
  for (int i = 0; i < n; i++) {
    Dl_info di;
    put("  #");
    char k[3] = {(char)('0' + i / 10), (char)('0' + i % 10), 0};
    put(i >= 10 ? k : k + 1);
    put(" ");
    if (dladdr(pcs[i], &di) && di.dli_fname) {
      put(di.dli_fname);
      put("+");
      put_hex((uintptr_t)pcs[i] - (uintptr_t)di.dli_fbase);
      if (di.dli_sname) {
        put(" (");
        put(di.dli_sname);
        put(")");
      }
    } else {
      put_hex((uintptr_t)pcs[i]);
    }
    put("\n");
  }
  /* a profile's clock lock outlives the process (cucap_cupti.h) */
  cucap_cupti_clocks_emergency_restore();
  signal(sig, SIG_DFL);
  raise(sig);
}

void cucap_cli_crash_report_install(void) {
  void *warm[1];
  backtrace(warm, 1); /* loads libgcc's unwinder now, not inside the handler */
  static char altstack[64 * 1024];
  stack_t ss = {.ss_sp = altstack, .ss_size = sizeof altstack, .ss_flags = 0};
  sigaltstack(&ss, NULL);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_crash;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
    sigaction(sigs[i], &sa, NULL);
}
