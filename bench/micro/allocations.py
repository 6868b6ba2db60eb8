"""The allocation counter bench.micro.copies counts copies with: a small LD_PRELOAD library
(SHIM_C, built with gcc by `build_shim`) that defines malloc, calloc, realloc, memalign,
aligned_alloc, posix_memalign and free over glibc's ``__libc_*``, and counts every buffer of
at least a threshold's bytes with the bytes written into it (filled with a pattern when made,
read again when freed or read); Python reads its counters through ctypes (`Counter`).
"""
from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

SHIM_C = r"""
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <errno.h>
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);
extern size_t malloc_usable_size(void *);

#define FILL 0xA5               /* what a counted buffer is given, to tell what was written */
#define SLOTS 4096

struct region { void *base; unsigned char *p; size_t n; unsigned char fill; };
static struct region pending[SLOTS];    /* counted buffers not read yet */
static int npending;
static size_t threshold = (size_t)-1;   /* nothing counted until copies_arm */
static long long count, allocated, written;
static char lock;

static void take(void) { while (__atomic_test_and_set(&lock, __ATOMIC_ACQUIRE)) ; }
static void give(void) { __atomic_clear(&lock, __ATOMIC_RELEASE); }

static void settle(int k) {             /* the bytes no longer the fill: written */
    const struct region *r = &pending[k];
    uint64_t word, w;
    size_t i = 0, changed = 0;
    memset(&word, r->fill, sizeof word);
    for (; i + 8 <= r->n; i += 8) {
        memcpy(&w, r->p + i, 8);
        if (w != word) changed += 8;
    }
    for (; i < r->n; i++) changed += r->p[i] != r->fill;
    written += (long long)changed;
    pending[k] = pending[--npending];
}
static void track(void *base, void *p, size_t n, size_t size, int fill) {
    if (fill >= 0) memset(p, fill, n);
    take();
    count++;
    allocated += (long long)size;
    if (npending == SLOTS) settle(0);
    pending[npending].base = base;
    pending[npending].p = p;
    pending[npending].n = n;
    pending[npending].fill = fill >= 0 ? (unsigned char)fill : 0;
    npending++;
    give();
}
static void forget(void *base) {        /* freed or moved: what it holds now was written */
    int k;
    take();
    for (k = npending - 1; k >= 0; k--)
        if (pending[k].base == base) { settle(k); break; }
    give();
}
static int counted(void *p, size_t n) { return p && n >= threshold; }

void *malloc(size_t n) {
    void *p = __libc_malloc(n);
    if (counted(p, n)) track(p, p, n, n, FILL);
    return p;
}
void *calloc(size_t k, size_t n) {
    void *p = __libc_calloc(k, n);
    if (counted(p, k * n)) track(p, p, k * n, k * n, -1);     /* zeros: nonzero is written */
    return p;
}
void *realloc(void *p, size_t n) {
    size_t old = p ? malloc_usable_size(p) : 0;
    void *q;
    if (old >= threshold) forget(p);
    q = __libc_realloc(p, n);
    if (counted(q, n) && n > old) {     /* grown: the new part is a new buffer */
        track(q, (unsigned char *)q + old, n - old, n - old, FILL);
        if (q != p && p) { take(); written += (long long)old; give(); }  /* moved: copied */
    }
    return q;
}
void free(void *p) {
    if (p && threshold != (size_t)-1 && malloc_usable_size(p) >= threshold) forget(p);
    __libc_free(p);
}
void *memalign(size_t a, size_t n) {
    void *p = __libc_memalign(a, n);
    if (counted(p, n)) track(p, p, n, n, FILL);
    return p;
}
void *aligned_alloc(size_t a, size_t n) { return memalign(a, n); }
int posix_memalign(void **out, size_t a, size_t n) {
    void *p = memalign(a, n);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}

/* For Python (ctypes): count from now buffers of at least `t` bytes; read the counts (every
   counted buffer not read yet is read now: what it holds was written). */
void copies_arm(size_t t) {
    take();
    npending = 0;
    count = allocated = written = 0;
    threshold = t;
    give();
}
void copies_read(long long out[3]) {
    take();
    while (npending) settle(npending - 1);
    out[0] = count;
    out[1] = allocated;
    out[2] = written;
    give();
}
"""


class Counter:
    """The LD_PRELOAD library's counters, through ctypes."""

    def __init__(self) -> None:
        lib = ctypes.CDLL(None)
        try:
            self._arm, self._read = lib.copies_arm, lib.copies_read
        except AttributeError:
            raise RuntimeError("the allocation counter is not loaded (python -m "
                               "bench.micro.copies builds it and runs the count under "
                               "LD_PRELOAD)") from None
        self._arm.argtypes = [ctypes.c_size_t]
        self._arm.restype = self._read.restype = None
        self._out = (ctypes.c_longlong * 3)()

    def arm(self, threshold: int) -> None:
        """Count buffers of at least `threshold` bytes from now, from zero."""
        self._arm(threshold)

    def read(self) -> tuple[int, int, int]:
        """Since armed: buffers counted, their bytes, the bytes written into them."""
        self._read(self._out)
        return self._out[0], self._out[1], self._out[2]


def build_shim(directory: Path) -> Path | str:
    """The counter's shared library built in `directory`, or why it cannot be."""
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        return "no C compiler (gcc) to build the allocation counter"
    src, lib = directory / "copies_shim.c", directory / "copies_shim.so"
    src.write_text(SHIM_C)
    proc = subprocess.run([gcc, "-O2", "-shared", "-fPIC", "-o", str(lib), str(src)],
                          capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        return f"the allocation counter did not build: {proc.stderr.strip()[-300:]}"
    return lib
