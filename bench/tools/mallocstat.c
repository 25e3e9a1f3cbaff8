/* mallocstat.so - LD_PRELOAD shim that counts heap allocations (diagnosis for bench/allocs.sh).
 *
 * Counts malloc/calloc/realloc/posix_memalign/aligned_alloc/memalign calls and requested bytes
 * in size buckets, and every INTERVAL_MS writes the cumulative counters to $MALLOCSTAT_FILE
 * (rewritten in place; a forked child writes $MALLOCSTAT_FILE.<pid>). A script reads it before and after a load run; deltas / requests give
 * allocations and bytes per request; sizeN=count entries name the exact sizes of allocations
 * over 4 KiB. Allocation itself is forwarded to glibc (__libc_*).
 *
 * Build: gcc -O2 -shared -fPIC -o mallocstat.so mallocstat.c -lpthread
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

#define NB 8
static const size_t LIMITS[NB - 1] = {64, 256, 1024, 4096, 16384, 65536, 262144};
static const char *NAMES[NB] = {"le64", "le256", "le1k", "le4k", "le16k", "le64k", "le256k", "gt256k"};
static unsigned long long calls[NB], bytes[NB], frees, reallocs, maxsize;

/* exact sizes of allocations > 4 KiB (first 64 distinct sizes), to name the big ones */
#define NBIG 64
static size_t big_size[NBIG];
static unsigned long long big_calls[NBIG];

static void count_big(size_t n) {
  for (int i = 0; i < NBIG; i++) {
    size_t s = __atomic_load_n(&big_size[i], __ATOMIC_RELAXED);
    if (s == 0) {
      size_t zero = 0;
      if (!__atomic_compare_exchange_n(&big_size[i], &zero, n, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED) && zero != n)
        continue;
      s = n;
    }
    if (s == n) {
      __atomic_fetch_add(&big_calls[i], 1, __ATOMIC_RELAXED);
      return;
    }
  }
}

static void count(size_t n) {
  if (n > 4096) count_big(n);
  int b = 0;
  while (b < NB - 1 && n > LIMITS[b]) b++;
  __atomic_fetch_add(&calls[b], 1, __ATOMIC_RELAXED);
  __atomic_fetch_add(&bytes[b], n, __ATOMIC_RELAXED);
  unsigned long long m = __atomic_load_n(&maxsize, __ATOMIC_RELAXED);
  while (n > m && !__atomic_compare_exchange_n(&maxsize, &m, n, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
}

void *malloc(size_t n) { count(n); return __libc_malloc(n); }
void *calloc(size_t a, size_t b) { count(a * b); return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) {
  count(n);
  __atomic_fetch_add(&reallocs, 1, __ATOMIC_RELAXED);
  return __libc_realloc(p, n);
}
void free(void *p) {
  if (p) __atomic_fetch_add(&frees, 1, __ATOMIC_RELAXED);
  __libc_free(p);
}
void *memalign(size_t al, size_t n) { count(n); return __libc_memalign(al, n); }
void *aligned_alloc(size_t al, size_t n) { count(n); return __libc_memalign(al, n); }
int posix_memalign(void **out, size_t al, size_t n) {
  count(n);
  void *p = __libc_memalign(al, n);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}

static void dump(const char *path) {
  char tmp[4096], buf[4096];
  int len = 0;
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  for (int b = 0; b < NB; b++)
    len += snprintf(buf + len, sizeof buf - len, "calls_%s=%llu bytes_%s=%llu ", NAMES[b],
                    __atomic_load_n(&calls[b], __ATOMIC_RELAXED), NAMES[b],
                    __atomic_load_n(&bytes[b], __ATOMIC_RELAXED));
  len += snprintf(buf + len, sizeof buf - len, "frees=%llu reallocs=%llu max=%llu",
                  __atomic_load_n(&frees, __ATOMIC_RELAXED), __atomic_load_n(&reallocs, __ATOMIC_RELAXED),
                  __atomic_load_n(&maxsize, __ATOMIC_RELAXED));
  for (int i = 0; i < NBIG && len < (int)sizeof buf - 64; i++) {
    size_t s = __atomic_load_n(&big_size[i], __ATOMIC_RELAXED);
    if (s) len += snprintf(buf + len, sizeof buf - len, " size%zu=%llu", s, __atomic_load_n(&big_calls[i], __ATOMIC_RELAXED));
  }
  len += snprintf(buf + len, sizeof buf - len, "\n");
  FILE *f = fopen(tmp, "w");
  if (!f) return;
  fputs(buf, f);
  fclose(f);
  rename(tmp, path);
}

static void *dumper(void *arg) {
  const char *path = arg;
  const char *iv = getenv("MALLOCSTAT_INTERVAL_MS");
  long ms = iv ? atol(iv) : 200;
  for (;;) {
    dump(path);
    usleep((useconds_t)ms * 1000);
  }
  return NULL;
}

static char path_copy[1024], child_path[1100];

static void start_dumper(char *path) {
  pthread_t t;
  if (pthread_create(&t, NULL, dumper, path) == 0) pthread_detach(t);
}

/* forked children (e.g. nginx workers) get their own file: $MALLOCSTAT_FILE.<pid> */
static void in_child(void) {
  snprintf(child_path, sizeof child_path, "%s.%d", path_copy, (int)getpid());
  start_dumper(child_path);
}

__attribute__((constructor)) static void init(void) {
  const char *path = getenv("MALLOCSTAT_FILE");
  if (!path || !*path) return;
  strncpy(path_copy, path, sizeof path_copy - 1);
  unsetenv("LD_PRELOAD");   /* do not follow into exec'd programs */
  pthread_atfork(NULL, NULL, in_child);
  start_dumper(path_copy);
}
