/*
 * Where an engine's translated code lives. Unicorn's translator (x86-64 hosts) emits a helper call
 * as a direct `call rel32` when the helper lies within 2 GiB of the call site, and otherwise as an
 * indirect call through a constant kept after each translated block. The helpers are libunicorn's,
 * and kpemu's block hook: Unicorn 2.1 calls the only block hook straight from translated code.
 * Unicorn maps each engine's translation buffer wherever the kernel puts an anonymous mapping of
 * its size (1 GiB by default): below everything mapped before it (glibc's 64 MiB malloc arenas,
 * the JDK's module image, other engines' buffers), so a buffer often lay more than 2 GiB from
 * libunicorn or from this library, which one varying with the run's address-space layout (the
 * plain 1000-round x86-64 job took 17.1-17.6 s of CPU with both in reach, 19-20 s with this
 * library out of reach, 23-24 s with libunicorn out of reach; docs/reference.md).
 *
 * So the host reserves address space for the buffers once, when the first engine opens: up to
 * `count` chunks (inaccessible and uncommitted: PROT_NONE, MAP_NORESERVE), 2 MiB-aligned, in the
 * free ranges within reach of libunicorn's code, highest first. Before an engine maps its buffer
 * the host releases the highest chunk (kpemu_code_release); the kernel puts a new mapping at the
 * top of the highest free range that fits it, which is that chunk (every free range above it that
 * could hold it is reserved, out of reach, or above the libraries, where the kernel does not
 * look). kpemu_code_settle then finds the buffer in /proc/self/maps: inside the chunk it stays the
 * engine's until the engine closes (kpemu_code_return reserves the chunk again); anywhere else the
 * chunk is reserved again and the engine runs with whatever calls the translator could make.
 * This library itself may be loaded anywhere (the loader puts a small library in the highest
 * small hole): kpemu_code_entry gives the block hook an entry in the chunk, below the buffer, that
 * jumps to it. Under an address-space limit (RLIMIT_AS) nothing is reserved: the reservations
 * would count against the buffers themselves. Nothing the guest can see depends on where the
 * buffer is.
 */
#define _GNU_SOURCE
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unicorn/unicorn.h>

#define KPEMU_CODE_CHUNKS 16
#define KPEMU_CODE_ALIGN (2ull << 20)
#define KPEMU_CODE_REACH ((1ull << 31) - (16ull << 20))   /* a rel32 call, with room to spare */
#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

enum { CHUNK_NONE = 0, CHUNK_RESERVED, CHUNK_RELEASED, CHUNK_ENGINE };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t chunk_base[KPEMU_CODE_CHUNKS];
static uint32_t chunk_state[KPEMU_CODE_CHUNKS];
static uint64_t chunk_bytes;
static uint32_t chunks;
static uint64_t text_lo, text_hi;   /* libunicorn's executable segments */
static uint64_t entry_page[KPEMU_CODE_CHUNKS];   /* a chunk's page of jumps to kpemu's hooks, 0: none */
static uint32_t entry_used[KPEMU_CODE_CHUNKS];

struct text_search { uintptr_t a; uint64_t lo, hi; int found; };

static int text_of(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    struct text_search *s = data;
    uint64_t lo = UINT64_MAX, hi = 0;
    int has_a = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *p = &info->dlpi_phdr[i];
        if (p->p_type != PT_LOAD || (p->p_flags & PF_X) == 0) continue;
        uint64_t start = info->dlpi_addr + p->p_vaddr, end = start + p->p_memsz;
        if (s->a >= start && s->a < end) has_a = 1;
        if (start < lo) lo = start;
        if (end > hi) hi = end;
    }
    if (has_a) {
        s->lo = lo;
        s->hi = hi;
        s->found = 1;
    }
    return 0;
}

/* Whether every address of [start, start + len) can call every address of libunicorn's code directly. */
static int in_reach(uint64_t start, uint64_t len) {
    uint64_t end = start + len;
    uint64_t far1 = text_hi > start ? text_hi - start : start - text_hi;
    uint64_t far2 = end > text_lo ? end - text_lo : text_lo - end;
    return far1 < KPEMU_CODE_REACH && far2 < KPEMU_CODE_REACH;
}

static int reserve_at(uint64_t base) {
    void *p = mmap((void *)base, chunk_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == MAP_FAILED) return 0;
    if ((uint64_t)p != base) { munmap(p, chunk_bytes); return 0; }   /* a kernel without MAP_FIXED_NOREPLACE took it as a hint */
    return 1;
}

/* Reserves chunks in the free range [g0, g1), from its top down, until `count` chunks are held. */
static void reserve_down(uint64_t g0, uint64_t g1, uint32_t count) {
    while (chunks < count && g1 > g0 && g1 - g0 >= chunk_bytes) {
        uint64_t base = (g1 - chunk_bytes) & ~(KPEMU_CODE_ALIGN - 1);
        if (base < g0) break;
        if (in_reach(base, chunk_bytes) && reserve_at(base)) {
            chunk_base[chunks] = base;
            chunk_state[chunks++] = CHUNK_RESERVED;
        }
        g1 = base;
    }
}

#define KPEMU_CODE_MAPS 8192

/*
 * Reserves chunks in the free ranges of the address space within reach, highest first: the
 * kernel's choice for a new mapping is the highest free range that fits it, so with every free
 * range above a chunk taken (or out of reach, or above the highest library, where the kernel does
 * not look) a released chunk is where the next buffer goes.
 */
static void reserve_free_ranges(uint32_t count) {
    static uint64_t start[KPEMU_CODE_MAPS], end[KPEMU_CODE_MAPS];
    uint32_t n = 0;
    uint64_t top = 0;   /* the end of the highest mapping below the stack: about the kernel's mmap_base */
    FILE *f = fopen("/proc/self/maps", "r");
    if (f == NULL) return;
    char line[512];
    while (n < KPEMU_CODE_MAPS && fgets(line, sizeof line, f) != NULL) {
        unsigned long long a = 0, b = 0;
        if (sscanf(line, "%llx-%llx", &a, &b) != 2) continue;
        if (strstr(line, "[stack]") != NULL || strstr(line, "[vvar") != NULL || strstr(line, "[vdso]") != NULL
                || strstr(line, "[vsyscall]") != NULL)
            continue;
        start[n] = a;
        end[n++] = b;
        if (b > top && b < (1ull << 47)) top = b;
    }
    fclose(f);
    uint64_t window_lo = text_hi > KPEMU_CODE_REACH ? text_hi - KPEMU_CODE_REACH : 0;
    uint64_t window_hi = text_lo + KPEMU_CODE_REACH;
    if (window_hi > top) window_hi = top;
    /* free ranges between mappings, from the highest down, then below the lowest mapping */
    for (int64_t i = (int64_t)n - 1; i >= 1 && chunks < count; i--)
        reserve_down(end[i - 1] > window_lo ? end[i - 1] : window_lo, start[i] < window_hi ? start[i] : window_hi, count);
    if (n > 0 && start[0] > window_lo) reserve_down(window_lo, start[0] < window_hi ? start[0] : window_hi, count);
}

/* Reserves up to `count` chunks of `bytes` (a multiple of 2 MiB) in reach of the libraries' code; returns how many. Once. */
uint32_t kpemu_code_reserve(uint64_t bytes, uint32_t count) {
    pthread_mutex_lock(&lock);
    struct rlimit as;
    /* Under an address-space limit the reservations would count against the buffers themselves. */
    int limited = getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY;
    if (chunk_bytes == 0 && bytes % KPEMU_CODE_ALIGN == 0 && bytes > 0 && !limited) {
        struct text_search s = { (uintptr_t)&uc_open, UINT64_MAX, 0, 0 };
        dl_iterate_phdr(text_of, &s);
        if (s.found == 1 && s.hi > s.lo) {
            text_lo = s.lo;
            text_hi = s.hi;
            chunk_bytes = bytes;
            reserve_free_ranges(count > KPEMU_CODE_CHUNKS ? KPEMU_CODE_CHUNKS : count);
        }
    }
    uint32_t n = chunks;
    pthread_mutex_unlock(&lock);
    return n;
}

/* Frees the highest reserved chunk for the next engine's buffer; its index, or -1 when none is left. */
int32_t kpemu_code_release(void) {
    pthread_mutex_lock(&lock);
    int32_t best = -1;
    for (uint32_t i = 0; i < chunks; i++)
        if (chunk_state[i] == CHUNK_RESERVED && (best < 0 || chunk_base[i] > chunk_base[best])) best = (int32_t)i;
    if (best >= 0) {
        munmap((void *)chunk_base[best], chunk_bytes);
        chunk_state[best] = CHUNK_RELEASED;
    }
    pthread_mutex_unlock(&lock);
    return best;
}


/* Whether an executable mapping (the engine's buffer) starts inside [base, base + bytes). It may end
   a little past it: the kernel puts a mapping at the top of the free range, 2 MiB-aligned, and the
   range may have free neighbours (the ends of a free range below a chunk's 2 MiB alignment). */
static int buffer_inside(uint64_t base, uint64_t bytes) {
    FILE *f = fopen("/proc/self/maps", "r");
    if (f == NULL) return 0;
    char line[512];
    int found = 0;
    while (!found && fgets(line, sizeof line, f) != NULL) {
        unsigned long long start = 0, end = 0;
        char perms[8] = { 0 };
        if (sscanf(line, "%llx-%llx %7s", &start, &end, perms) != 3) continue;
        if (perms[2] == 'x' && start >= base && start < base + bytes) found = 1;
    }
    fclose(f);
    return found;
}

/* After the engine mapped its buffer: 1 if the buffer is in chunk `index` (the engine keeps it), 0 if not (reserved again). */
int32_t kpemu_code_settle(int32_t index) {
    if (index < 0 || (uint32_t)index >= chunks) return 0;
    pthread_mutex_lock(&lock);
    int32_t placed = 0;
    if (chunk_state[index] == CHUNK_RELEASED) {
        if (buffer_inside(chunk_base[index], chunk_bytes)) {
            chunk_state[index] = CHUNK_ENGINE;
            placed = 1;
        } else {
            chunk_state[index] = reserve_at(chunk_base[index]) ? CHUNK_RESERVED : CHUNK_NONE;
        }
    }
    pthread_mutex_unlock(&lock);
    return placed;
}

/* After the engine that held chunk `index` closed (its buffer unmapped), or failed to open after
   the chunk was released: the chunk is reserved again if still free. */
void kpemu_code_return(int32_t index) {
    if (index < 0 || (uint32_t)index >= chunks) return;
    pthread_mutex_lock(&lock);
    if (chunk_state[index] == CHUNK_ENGINE || chunk_state[index] == CHUNK_RELEASED) {
        if (entry_page[index] != 0) munmap((void *)entry_page[index], 4096);
        entry_page[index] = 0;
        entry_used[index] = 0;
        chunk_state[index] = reserve_at(chunk_base[index]) ? CHUNK_RESERVED : CHUNK_NONE;
    }
    pthread_mutex_unlock(&lock);
}

/*
 * An address the translated code of chunk `index`'s engine can call directly that runs `target`
 * (kpemu's block hook, which Unicorn calls straight from translated code): a jump through memory
 * (`jmp *0(%rip)` and the target's address, 16 bytes) in a page at the chunk's base, below the
 * buffer. This library may be loaded far from libunicorn (the loader puts a small library in the
 * highest small hole), and one jump site with one target predicts well where an indirect call from
 * every translated block did not. `target` itself on other hosts, or when the page cannot be made.
 */
uint64_t kpemu_code_entry(int32_t index, uint64_t target) {
#if defined(__x86_64__)
    if (index < 0 || (uint32_t)index >= chunks) return target;
    pthread_mutex_lock(&lock);
    uint64_t entry = target;
    if (chunk_state[index] == CHUNK_ENGINE) {
        if (entry_page[index] == 0) {
            void *p = mmap((void *)chunk_base[index], 4096, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
            if (p != MAP_FAILED && (uint64_t)p != chunk_base[index]) { munmap(p, 4096); p = MAP_FAILED; }
            if (p != MAP_FAILED) {
                entry_page[index] = (uint64_t)p;
                mprotect(p, 4096, PROT_READ | PROT_EXEC);
            }
        }
        uint8_t *page = (uint8_t *)entry_page[index];
        if (page != NULL) {
            for (uint32_t i = 0; i < entry_used[index]; i++) {
                uint64_t t;
                memcpy(&t, page + i * 16 + 6, 8);
                if (t == target) { entry = (uint64_t)(page + i * 16); break; }
            }
            if (entry == target && entry_used[index] < 4096 / 16
                    && mprotect(page, 4096, PROT_READ | PROT_WRITE) == 0) {
                uint8_t *slot = page + entry_used[index]++ * 16;
                static const uint8_t jmp[6] = { 0xff, 0x25, 0, 0, 0, 0 };   /* jmp *0(%rip) */
                memcpy(slot, jmp, 6);
                memcpy(slot + 6, &target, 8);
                slot[14] = 0xcc;
                slot[15] = 0xcc;
                mprotect(page, 4096, PROT_READ | PROT_EXEC);
                entry = (uint64_t)slot;
            }
        }
    }
    pthread_mutex_unlock(&lock);
    return entry;
#else
    (void)index;
    return target;
#endif
}
