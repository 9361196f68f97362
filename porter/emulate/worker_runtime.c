// The worker's runtime (porter/emulate/worker.py loads it RTLD_GLOBAL before any kernel
// library; porter.emulate.toolchain.worker_runtime builds it once per cache and compiler).
//
// Guard pages (porter/emulate/guarded_arrays.py): each program-scope `constant` array of a
// kernel file is copied, when its library loads, to the end of pages an inaccessible page
// follows, so that a read past its end faults on this CPU, where it read the next object's
// bytes (review 36's K07, 37's N29: a pointer into a `constant` table stepped past it was
// green). porter_guarded_run turns that fault into -2 (the kernel's OUT_OF_BOUNDS note: not
// proven), and any other fault into the crash it was.
//
// The stack's filling: the kernel library is built at -O0 without an initializing pattern, so a
// local read before it is written reads the stack; porter_guarded_run fills the stack below it
// with `fill` first, and the worker runs each sample with two fillings: answers that differ read
// such a local (undefined in Metal: review 40's U01, U02, U19, U20, U25).
//
// AddressSanitizer: where porter.emulate.toolchain builds kernels with -fsanitize=address and
// starts the worker with libasan preloaded (worker_environment), a read outside any object the
// kernel may reach (past a thread-space array through a pointer, before a table, past a
// checkout header's array: review 40's U04, U06, V01) is reported to address_error, not fatal
// (-fsanitize-recover=address, halt_on_error=0), and the run answers -2 as a guard's fault
// does. The kernel file's `constant` arrays are then heap copies, which have ASan's redzones
// on both sides (a page guards one side only).
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MAX_GUARDS 65536
// deeper than the frames of a kernel at -O0 (a functor, c10/metal's helpers, the run loop)
#define FILLED_STACK 65536

static char* guards[MAX_GUARDS];
static int n_guards;
static long page;
static sigjmp_buf past_end;
static volatile sig_atomic_t armed;
static struct sigaction before;

// libasan's, where the worker preloaded it (weak: null in a plain worker)
extern void __asan_set_error_report_callback(void (*)(const char*)) __attribute__((weak));
// read by the kernel's run loop (porter/prelude.h), which stops at the first report
__attribute__((visibility("default"))) volatile int porter_address_errors;

static void address_error(const char* report) {
  (void)report;
  porter_address_errors = 1;
}

__attribute__((constructor)) static void watch_addresses(void) {
  if (__asan_set_error_report_callback) __asan_set_error_report_callback(address_error);
}

__attribute__((visibility("default"))) const void* porter_guard_copy(const void* src,
                                                                    unsigned long size) {
  if (!page) page = sysconf(_SC_PAGESIZE);
  if (size == 0) return src;
  if (__asan_set_error_report_callback) {
    // a heap block: libasan poisons the bytes before and after it (never freed: the library
    // stays loaded for the worker's life)
    void* copy = malloc(size);
    if (!copy) return src;
    memcpy(copy, src, size);
    return copy;
  }
  if (n_guards >= MAX_GUARDS) return src;
  const unsigned long data = (size + page - 1) / page * page;
  char* base = mmap(0, data + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) return src;
  // the array ends where the guard begins; its alignment holds, as its size is a multiple
  // of its element's alignment and the guard is page-aligned
  char* at = base + data - size;
  memcpy(at, src, size);
  mprotect(base, data, PROT_READ);
  mprotect(base + data, page, PROT_NONE);
  guards[n_guards++] = base + data;
  return at;
}

static void on_fault(int sig, siginfo_t* info, void* context) {
  (void)sig;
  (void)context;
  const char* at = (const char*)info->si_addr;
  if (armed)
    for (int i = 0; i < n_guards; ++i)
      if (at >= guards[i] && at < guards[i] + page) {
        armed = 0;
        siglongjmp(past_end, 1);
      }
  // not a guard's: the fault repeats under the handler that was there, and crashes as before
  sigaction(SIGSEGV, &before, 0);
}

typedef int (*run_fn)(int, int, void*, const void* const*, const void*, long, int,
                      const long*, const long* const*);

// the stack below the caller's frame filled with `fill`: the kernel's frames come next
__attribute__((noinline)) static void fill_stack(int fill) {
  volatile unsigned char below[FILLED_STACK];
  memset((void*)below, fill, sizeof below);
  __asm__ volatile("" : : "r"(below) : "memory");
}

__attribute__((noinline)) static int run_filled(run_fn run, int fill, int i, int strided,
                                                void* out, const void* const* ins,
                                                const void* alpha, long numel, int ndim,
                                                const long* sizes, const long* const* strides) {
  fill_stack(fill);
  return run(i, strided, out, ins, alpha, numel, ndim, sizes, strides);
}

static int guarded_run(run_fn run, int fill, int i, int strided, void* out,
                       const void* const* ins, const void* alpha, long numel, int ndim,
                       const long* sizes, const long* const* strides) {
  if (n_guards == 0)
    return run_filled(run, fill, i, strided, out, ins, alpha, numel, ndim, sizes, strides);
  static int installed;
  if (!installed) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &before);
    installed = 1;
  }
  // the kernel's loop flushes subnormals with the CPU's switches and restores them on the way
  // out; a jump past it restores them here
#if defined(__x86_64__) || defined(__i386__)
  const unsigned int switches = __builtin_ia32_stmxcsr();
#elif defined(__aarch64__)
  const unsigned long switches = __builtin_aarch64_get_fpcr();
#endif
  if (sigsetjmp(past_end, 1)) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_ldmxcsr(switches);
#elif defined(__aarch64__)
    __builtin_aarch64_set_fpcr(switches);
#endif
    return -2;
  }
  armed = 1;
  const int r = run_filled(run, fill, i, strided, out, ins, alpha, numel, ndim, sizes, strides);
  armed = 0;
  return r;
}

// porter_run's arguments after `run` and `fill`; -2 where the kernel read a guard page, or
// libasan reported a read outside the objects it may reach
__attribute__((visibility("default"))) int porter_guarded_run(
    run_fn run, int fill, int i, int strided, void* out, const void* const* ins,
    const void* alpha, long numel, int ndim, const long* sizes, const long* const* strides) {
  porter_address_errors = 0;
  const int r = guarded_run(run, fill, i, strided, out, ins, alpha, numel, ndim, sizes, strides);
  return porter_address_errors ? -2 : r;
}
