// LD_PRELOAD shim for User-Mode Linux kernels that hand the host a fixed-size XSAVE buffer
// (struct _xstate: x87, SSE, AVX) through PTRACE_{GET,SET}REGSET NT_X86_XSTATE. The host kernel
// takes only a whole buffer of its own size (arch/x86/kernel/fpu/regset.c, xstateregs_set:
// count must equal fpu_user_cfg.max_size), which on CPUs with AVX-512 or AMX is larger, so UML
// cannot start a process ("ptrace set fp regs failed, errno = 14"). Here each of UML's buffers
// gets a host-sized shadow: a GET fills the shadow and copies UML's part out of it; a SET copies
// UML's part into the shadow and hands the host the whole of it, so the state UML does not hold
// (AVX-512) is restored as it was saved, per buffer (per UML task).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/types.h>
#include <sys/uio.h>

typedef long (*ptrace_fn)(int, pid_t, void *, void *);

#define SLOTS 16384
static struct { void *key; unsigned char *buf; } shadows[SLOTS];
static size_t host_size;
static ptrace_fn real_ptrace;

static unsigned char *shadow_of(void *key) {
  size_t h = ((uintptr_t)key >> 4) % SLOTS;
  for (size_t i = 0; i < SLOTS; i++, h = (h + 1) % SLOTS) {
    if (shadows[h].key == key) return shadows[h].buf;
    if (shadows[h].key == NULL) {
      unsigned char *buf = calloc(1, host_size);
      if (!buf) return NULL;
      shadows[h].key = key;
      shadows[h].buf = buf;
      return buf;
    }
  }
  return NULL;
}

long ptrace(enum __ptrace_request request, ...) {
  va_list ap;
  va_start(ap, request);
  pid_t pid = va_arg(ap, pid_t);
  void *addr = va_arg(ap, void *);
  void *data = va_arg(ap, void *);
  va_end(ap);
  if (!real_ptrace) real_ptrace = (ptrace_fn)dlsym(RTLD_NEXT, "ptrace");
  if ((request == PTRACE_GETREGSET || request == PTRACE_SETREGSET) && (uintptr_t)addr == NT_X86_XSTATE && data) {
    struct iovec *iov = data;
    if (!host_size) {
      static unsigned char probe[1 << 16];
      struct iovec p = { probe, sizeof probe };
      if (real_ptrace(PTRACE_GETREGSET, pid, addr, &p) == 0) host_size = p.iov_len;
    }
    if (host_size && iov->iov_len < host_size) {
      unsigned char *buf = shadow_of(iov->iov_base);
      if (buf) {
        struct iovec whole = { buf, host_size };
        if (request == PTRACE_GETREGSET) {
          long r = real_ptrace(PTRACE_GETREGSET, pid, addr, &whole);
          if (r == 0) memcpy(iov->iov_base, buf, iov->iov_len);
          return r;
        }
        memcpy(buf, iov->iov_base, iov->iov_len);
        // XSAVE header at 512: xstate_bv. A shadow never filled holds zeros beyond UML's part;
        // AMX state (bits 17, 18) is never handed back (the tracee has no permission for it).
        uint64_t *xstate_bv = (uint64_t *)(buf + 512);
        *xstate_bv &= ~((1ULL << 17) | (1ULL << 18));
        return real_ptrace(PTRACE_SETREGSET, pid, addr, &whole);
      }
    }
  }
  return real_ptrace(request, pid, addr, data);
}
