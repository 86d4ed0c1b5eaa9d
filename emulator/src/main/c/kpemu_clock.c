/*
 * kpemu's instruction clock: a Unicorn block hook in C (a Java upcall per block costs 6-20x
 * on tight code, this one 1.2-2x). It charges each translated block's instruction count to
 * `executed` before the block runs and stops the engine, from inside the hook (the safe,
 * exact place), before a block that would pass `deadline`. The first block after the host
 * clears `blocks` always runs, so a slice always makes progress.
 *
 * x86 block instruction counts come from Unicorn's own translation (UC_CTL_TB_REQUEST_CACHE)
 * and are cached by (address, size) in a direct-mapped table of one 64-bit word per block
 * (address, size, count and the guard bit packed together, so a lookup is one load: the former
 * separate key and count arrays cost two cache misses per block and were a fifth of an x86
 * page-fault loop's CPU time); arm64 blocks are size/4 instructions.
 *
 * Interrupt-enable watch: while the host has an interrupt waiting that the guest masks
 * (arm64 PSTATE.I, x86 EFLAGS.IF), it sets `watch_irq`; the hook then reads that flag at every
 * block start and stops before the first block that runs with interrupts enabled. The guest's
 * unmask (msr daifclr / msr daif / eret; sti / popf / iret) is no register access the host can
 * hook, but QEMU ends the translated block after each of them, so the next block start is the
 * exact point where a CPU would take the interrupt. Costs one register read per block, and
 * only while the watch is on. (x86: the block after sti or mov ss starts with IF set but in the
 * interrupt shadow; the host reads that from QEMU's hflags before it delivers, and otherwise
 * lets the next slice run that one-instruction block first.) Without the watch an interrupt
 * waited for a slice boundary that fell where the guest had it unmasked, and a guest loop whose
 * length divided the slice met every boundary at the same masked point (docs/x86-boot-notes.md).
 *
 * Breakpoints: the host's stop addresses (up to KPEMU_BREAKS) are checked here at every block
 * start, because a Unicorn UC_HOOK_CODE must not exist while Linux runs: its mere presence (even
 * bounded to an address never executed) makes Unicorn 2.1.1 mis-execute kernel code (x86:
 * jump_label_cmp faults on a corrupted pointer; arm64: panic_bad_stack before the first
 * console line). A stop address therefore must be a block start (a branch or call target, e.g.
 * a function entry). `skip_once` lets the host resume from the address it stopped at. On x86 the
 * host keeps `break_filter` (one bit per (address >> 4) mod 64), so a block start that is no break
 * address rarely walks the list (a boot with a booted kernel's few host breakpoints walked it at
 * every block); on arm64 it marks each break address's granule in `guard_bits` (below) instead,
 * so one bitmap test per block covers breaks and guarded text.
 *
 * Text guard: the host's probes keep breakpoints (or jumps) in guest text, and the guest may
 * rewrite that text itself (Linux's jump labels, static calls, text_poke through an alias).
 * Instead of a Unicorn memory-write hook (whose mere presence sends every guest load and store
 * down Unicorn's slow path, and whose per-store cost grows with the number of hooks), the host
 * lists the guarded byte ranges here with the bytes it last left there. Before a block that
 * contains a guarded range runs, the hook compares guest memory with those bytes; on a
 * difference it stops the engine (exact, before the block) and reports the entry in `hit`.
 * Unicorn 2.1.4 re-translates any block whose bytes a store changed, so the block that would
 * run the rewritten text always starts here first. Cost per block: one word of `guard_bits`
 * tested under a mask (two words, or a loop, only for a block that crosses a 2 KiB line of the
 * hashed index or spans more than 64 granules), a bitmap of 32-byte granules of guest-virtual
 * addresses (hashed modulo KPEMU_GUARD_BITS granules) that the host sets for every granule a
 * guarded range (and, on arm64, a break address) touches, followed by a summary with one bit per
 * 4 KiB page holding any of them (arm64 tests the page's bit first, the granules only then);
 * only a block whose granules have a bit set walks the page's hash chain (measured with 10,000
 * probes on x86_64 Linux: the chain walk on every block was a fifth of the boot's CPU time,
 * since most text pages then hold a probe); a memory read only for blocks that contain a
 * guarded range, i.e. when a probe is about to be hit. On x86 the bitmap's answer is cached
 * with the block's instruction count (X86_GUARDED in its cache word), so a block costs nothing more than
 * without probes; the host clears that cache (kpemu_clock_forget) whenever the bitmap changes.
 * Without `guard_bits` (nothing marked yet: no probe, no break) an arm64 block has nothing to
 * test; an x86 block with a guard and no bitmap walks the chain.
 *
 * Time stamp counter (x86): Unicorn's own rdtsc/rdtscp read the host's TSC, which would make
 * every run different. kpemu_rdtsc / kpemu_rdtscp (UC_HOOK_INSN, Unicorn >= 2.1.4) answer with
 * the virtual clock instead: `executed + tsc_offset`, where the host keeps `tsc_offset` so that
 * the sum is the guest time in instruction periods (idle jumps included). Inside a block the
 * value is that of the block's start plus its instructions (blocks are charged when they start):
 * monotonic and the same in every run.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unicorn/unicorn.h>

/* x86 block cache entries (power of two): 256 KiB. A boot with a workload translates ~67,000
   blocks; misses (each a uc_ctl_request_cache) in kbench fault 3000: 4.1 M with 8,192 entries,
   1.3 M with 32,768, 0.46 M with 131,072, of 256 M blocks run. The process's CPU time did not
   tell the three apart (task-clock 7.8-8.6 s, load 7): a bigger table trades the misses' calls for
   host-cache misses on the table itself (perf: most of the hook's samples sit on that load). */
#define KPEMU_CLOCK_CACHE 32768
#define KPEMU_GUARD_BUCKETS 4096 /* power of two */
#define KPEMU_GUARD_MAX 16      /* bytes per guarded range */
#define KPEMU_GUARD_GRANULE_SHIFT 5  /* guard_bits: one bit per 32 bytes of guest-virtual address */
#define KPEMU_GUARD_BITS (1u << 21)   /* bits in guard_bits (power of two): 256 KiB */
#define KPEMU_GUARD_PAGE_BITS (1u << 15) /* the page summary after guard_bits' granule bits: one bit per 4 KiB page (hashed), 4 KiB */

struct kpemu_guard_entry {
    uint64_t va;        /* guest-virtual start (the whole range lies in one page) */
    uint64_t pa;        /* guest-physical start */
    uint32_t len;       /* 0: free */
    int32_t next;       /* next entry of the bucket, -1 at the end */
    uint8_t expect[KPEMU_GUARD_MAX];
};

struct kpemu_guard {
    uint32_t live;      /* entries with len != 0 */
    int32_t hit;        /* index + 1 of the entry whose bytes differed, 0 if none */
    uint64_t checks;    /* memory comparisons made */
    struct kpemu_guard_entry *entries;
    int32_t buckets[KPEMU_GUARD_BUCKETS]; /* first entry per hash of the page number, -1: none */
};

size_t kpemu_guard_size(void) { return sizeof(struct kpemu_guard); }
size_t kpemu_guard_entry_size(void) { return sizeof(struct kpemu_guard_entry); }
#define KPEMU_BREAKS 64

struct kpemu_clock {
    uint64_t executed;  /* instructions charged so far */
    uint64_t deadline;  /* do not start a block that would end past this */
    uint64_t blocks;    /* blocks started since the host last cleared it */
    uint32_t stopped;   /* 1 when this hook stopped the engine */
    uint32_t arm64;     /* 1: arm64 (fixed 4-byte instructions) */
    uint32_t watch_irq; /* 1: stop before the first block that runs with interrupts enabled */
    uint32_t watch_stops; /* stops made by the watch */
    uint32_t nbreaks;   /* entries used in breaks[] */
    uint32_t break_hit; /* index + 1 of the break that stopped the engine, 0 if none */
    uint64_t skip_once; /* a break address to ignore once (the host resumes from it) */
    uint64_t tsc_offset; /* guest TSC = executed + tsc_offset (mod 2^64) */
    struct kpemu_guard *guard; /* guarded text, or NULL */
    uint64_t breaks[KPEMU_BREAKS];
    uint64_t cache[KPEMU_CLOCK_CACHE]; /* x86: packed block entries (see x86_tag), 0: empty */
    const uint64_t *guard_bits; /* KPEMU_GUARD_BITS bits, or NULL: granules a guarded range touches */
    uint64_t break_filter; /* bit (address >> 4) & 63 set for every address in breaks[]; 0: no filter */
    uint64_t fills;     /* x86 cache entries filled since the last kpemu_clock_forget */
    /* Guest time inside a slice, as VirtualClock.liveNanos computes it: (long) ((executed +
       instr_offset) * nanos_per_instr) + idle_nanos; the host sets the offsets before each slice. */
    int64_t instr_offset;
    int64_t idle_nanos;
    double nanos_per_instr;
};

size_t kpemu_clock_size(void) { return sizeof(struct kpemu_clock); }
size_t kpemu_clock_guard_bits_offset(void) { return offsetof(struct kpemu_clock, guard_bits); }
size_t kpemu_clock_break_filter_offset(void) { return offsetof(struct kpemu_clock, break_filter); }
size_t kpemu_clock_live_time_offset(void) { return offsetof(struct kpemu_clock, instr_offset); }
uint32_t kpemu_guard_bitmap_bits(void) { return KPEMU_GUARD_BITS; }
uint32_t kpemu_guard_granule_shift(void) { return KPEMU_GUARD_GRANULE_SHIFT; }
uint32_t kpemu_guard_page_bits(void) { return KPEMU_GUARD_PAGE_BITS; }

/* Feature bits of this build: 1 = interrupt-enable watch (fields watch_irq, watch_stops),
   2 = the arm64 system-register filter (kpemu_sysreg_filter), 4 = breakpoints,
   8 = the virtual time stamp counter (tsc_offset, kpemu_rdtsc, kpemu_rdtscp),
   16 = the text guard (guard), 32 = the guard's granule bitmap (guard_bits,
   kpemu_clock_guard_bits_offset, kpemu_guard_bitmap_bits, kpemu_guard_granule_shift),
   64 = the break filter (break_filter, kpemu_clock_break_filter_offset), 128 = arm64 finds break
   addresses through guard_bits only (the host marks their granules there; arm64 blocks skip the
   break filter), 256 = guard_bits' granule bits are followed by a page summary
   (KPEMU_GUARD_PAGE_BITS bits, kpemu_guard_page_bits), which arm64 blocks test first,
   512 = the x86 block cache refreshed by kpemu_clock_tb_generated (a UC_HOOK_EDGE_GENERATED
   hook), 1024 = the live guest time (instr_offset, idle_nanos, nanos_per_instr,
   kpemu_clock_live_time_offset) and the system-register filter's counter (counter_clock,
   kpemu_sysreg_filter_counter_offset). */
uint32_t kpemu_clock_features(void) { return 2047; }

static __attribute__((noinline)) int interrupts_enabled(uc_engine *uc, const struct kpemu_clock *c) {
    uint64_t v = 0;
    if (c->arm64) {
        if (uc_reg_read(uc, UC_ARM64_REG_PSTATE, &v) != UC_ERR_OK) return 0;
        return (v & 0x80) == 0;     /* PSTATE.I clear */
    }
    if (uc_reg_read(uc, UC_X86_REG_EFLAGS, &v) != UC_ERR_OK) return 0;
    return (v & 0x200) != 0;        /* EFLAGS.IF set */
}

/* Nothing to clear when no block was cached since the last call: registering thousands of probes
   forgets once per probe with no guest code run in between. */
void kpemu_clock_forget(struct kpemu_clock *c) {
    if (c->fills == 0) return;
    memset(c->cache, 0, sizeof c->cache);
    c->fills = 0;
}

/* 0 when no guarded range can touch [address, end): no bit of the block's granules is set. Nearly
   every block's granules lie in one word of the bitmap (a block of up to 64 granules that does not
   cross a 2 KiB boundary of the hashed index), tested with one load and one mask, no loop (a loop
   whose trip count changes from block to block mispredicts its exit; arm64 has no cached answer
   per block, so this runs for every block there). */
static inline int guard_may_touch(const uint64_t *bits, uint64_t address, uint64_t end) {
    uint64_t g = address >> KPEMU_GUARD_GRANULE_SHIFT;
    uint64_t span = ((end - 1) >> KPEMU_GUARD_GRANULE_SHIFT) - g;   /* granules after the first */
    uint64_t i = g & (KPEMU_GUARD_BITS - 1);
    uint32_t bit = (uint32_t)(i & 63);
    if (__builtin_expect(bit + span < 64, 1)) {
        uint64_t mask = (~0ull >> (63 - span)) << bit;
        return (bits[i >> 6] & mask) != 0;
    }
    for (uint64_t k = 0; k <= span; k++) {
        uint64_t j = (g + k) & (KPEMU_GUARD_BITS - 1);
        if (bits[j >> 6] & (1ull << (j & 63))) return 1;
    }
    return 0;
}

/*
 * x86 block cache. The slot is (address ^ address >> 13) mod KPEMU_CLOCK_CACHE; the entry holds
 * address bits 13-47 (the slot gives back bits 0-12; bits 48-63 copy bit 47 in a canonical
 * address), the block's size in bytes, its instruction count and whether a guarded range may
 * touch it, plus a valid bit: a hit is exact. Blocks that do not fit (never seen: x86 blocks
 * have at most 512 instructions and span at most two pages) are looked up each time.
 */
#define X86_ADDR_BITS 35          /* address bits 13..47 */
#define X86_SIZE_SHIFT 35
#define X86_SIZE_MAX 0x1fffu      /* 13 bits */
#define X86_COUNT_SHIFT 48
#define X86_COUNT_MAX 0x3ffu      /* 10 bits */
#define X86_GUARDED (1ull << 58)
#define X86_VALID (1ull << 63)

static inline uint32_t x86_slot(uint64_t address) {
    return (uint32_t)((address ^ (address >> 13)) & (KPEMU_CLOCK_CACHE - 1));
}

static inline uint64_t x86_tag(uint64_t address, uint32_t size) {
    return X86_VALID | ((uint64_t)size << X86_SIZE_SHIFT) | ((address >> 13) & ((1ull << X86_ADDR_BITS) - 1));
}

#define X86_TAG_MASK (X86_VALID | ((uint64_t)X86_SIZE_MAX << X86_SIZE_SHIFT) | ((1ull << X86_ADDR_BITS) - 1))

/* The miss path: Unicorn's translation block for `address`, and the bitmap's answer. */
static __attribute__((noinline)) uint32_t x86_block_fill(uc_engine *uc, struct kpemu_clock *c, uint64_t address, uint32_t size, int *guarded) {
    uc_tb tb;
    memset(&tb, 0, sizeof tb);
    uint32_t n = 0;
    if (uc_ctl_request_cache(uc, address, &tb) == UC_ERR_OK && tb.icount != 0) n = tb.icount;
    if (n == 0) n = size ? (size + 3) / 4 : 1; /* cannot happen for a block that runs; keep it deterministic */
    *guarded = c->guard_bits == NULL || guard_may_touch(c->guard_bits, address, address + (size ? size : 1));
    int canonical = (uint64_t)((int64_t)(address << 16) >> 16) == address;
    if (canonical && size <= X86_SIZE_MAX && n <= X86_COUNT_MAX) {
        c->cache[x86_slot(address)] = x86_tag(address, size) | ((uint64_t)n << X86_COUNT_SHIFT) | (*guarded ? X86_GUARDED : 0);
        c->fills++;
    }
    return n;
}

/*
 * UC_HOOK_EDGE_GENERATED hook (uc_hook_edge_gen_t): Unicorn calls it for every block it has just
 * translated, before that block runs, so the cache holds the new block's count. Without it an
 * entry outlived its block: when the guest rewrites its text (alternatives, jump labels, static
 * calls) Unicorn re-translates the block, often with the same address and size but another
 * instruction count, and the cache kept charging the old count (2,412 wrong counts in one x86
 * page-fault run). (Unicorn calls it for every generated block except the very first of the
 * engine's life, which the miss path fills.)
 */
void kpemu_clock_tb_generated(uc_engine *uc, uc_tb *cur, uc_tb *prev, void *user_data) {
    struct kpemu_clock *c = (struct kpemu_clock *)user_data;
    (void)uc; (void)prev;
    if (c->arm64 || cur == NULL || cur->icount == 0) return;
    uint64_t address = cur->pc;
    uint32_t size = cur->size, n = cur->icount;
    int guarded = c->guard_bits == NULL || guard_may_touch(c->guard_bits, address, address + (size ? size : 1));
    int canonical = (uint64_t)((int64_t)(address << 16) >> 16) == address;
    uint32_t slot = x86_slot(address);
    if (canonical && size <= X86_SIZE_MAX && n <= X86_COUNT_MAX) {
        c->cache[slot] = x86_tag(address, size) | ((uint64_t)n << X86_COUNT_SHIFT) | (guarded ? X86_GUARDED : 0);
        c->fills++;
    } else if ((c->cache[slot] & X86_TAG_MASK) == x86_tag(address, size)) {
        c->cache[slot] = 0;
    }
}

static inline uint32_t x86_block_icount(uc_engine *uc, struct kpemu_clock *c, uint64_t address, uint32_t size, int *guarded) {
    uint64_t e = c->cache[x86_slot(address)];
    if (__builtin_expect((e & X86_TAG_MASK) == x86_tag(address, size), 1)
            && __builtin_expect((uint64_t)((int64_t)(address << 16) >> 16) == address, 1)) {
        *guarded = (e & X86_GUARDED) != 0;
        return (uint32_t)(e >> X86_COUNT_SHIFT) & X86_COUNT_MAX;
    }
    return x86_block_fill(uc, c, address, size, guarded);
}

static uint32_t guard_bucket(uint64_t page) {
    return (uint32_t)((page ^ (page >> 12)) & (KPEMU_GUARD_BUCKETS - 1));
}

/* 1 when a guarded range inside [address, address + size) no longer holds the expected bytes. */
static __attribute__((noinline)) int guard_differs(uc_engine *uc, struct kpemu_guard *g, uint64_t address, uint32_t size) {
    uint64_t end = address + (size ? size : 1);
    /* a range starts at most KPEMU_GUARD_MAX - 1 bytes before the block and lies in one page */
    uint64_t first = (address - (KPEMU_GUARD_MAX - 1)) >> 12, last = (end - 1) >> 12;
    for (uint64_t page = first; page <= last; page++) {
        for (int32_t i = g->buckets[guard_bucket(page)]; i >= 0; i = g->entries[i].next) {
            struct kpemu_guard_entry *e = &g->entries[i];
            if (e->len == 0 || e->va >= end || e->va + e->len <= address) continue;
            uint8_t now[KPEMU_GUARD_MAX];
            g->checks++;
            if (uc_mem_read(uc, e->pa, now, e->len) != UC_ERR_OK || memcmp(now, e->expect, e->len) != 0) {
                g->hit = i + 1;
                return 1;
            }
        }
    }
    return 0;
}

/* 1 when `address` is a break address to stop at (the engine is stopped and break_hit set). */
static __attribute__((noinline)) int break_reached(uc_engine *uc, struct kpemu_clock *c, uint64_t address) {
    for (uint32_t i = 0; i < c->nbreaks; i++) {
        if (c->breaks[i] != address) continue;
        if (c->skip_once == address) {
            c->skip_once = 0;
            return 0;
        }
        c->break_hit = i + 1;
        uc_emu_stop(uc);
        return 1;
    }
    return 0;
}

/* The block's checks after its count: guarded text, the deadline, the interrupt-enable watch. */
static __attribute__((noinline)) void block_checked(uc_engine *uc, struct kpemu_clock *c, uint64_t address, uint32_t size,
                                                    uint32_t n, int guarded) {
    if (guarded && c->guard && c->guard->live && guard_differs(uc, c->guard, address, size)) {
        uc_emu_stop(uc);
        return;
    }
    if (c->blocks != 0 && c->executed + n > c->deadline) {
        c->stopped = 1;
        uc_emu_stop(uc);
        return;
    }
    if (c->watch_irq && c->blocks != 0 && interrupts_enabled(uc, c)) {
        c->stopped = 1;
        c->watch_stops++;
        uc_emu_stop(uc);
        return;
    }
    c->blocks++;
    c->executed += n;
}

static inline int arm64_block_guarded(const struct kpemu_clock *c, uint64_t address, uint32_t size) {
    return c->guard != NULL && (c->guard_bits == NULL || guard_may_touch(c->guard_bits, address, address + (size ? size : 1)));
}

/* The whole hook, for the blocks the common path below hands over. */
static __attribute__((noinline)) void block_slow(uc_engine *uc, struct kpemu_clock *c, uint64_t address, uint32_t size) {
    /* a block start that is no break address (nearly all) costs one bit test, not a list walk */
    if (c->nbreaks != 0 && (c->break_filter == 0 || ((c->break_filter >> ((address >> 4) & 63)) & 1))
            && break_reached(uc, c, address)) {
        return;
    }
    uint32_t n;
    int guarded;
    if (c->arm64) {
        n = (size + 3) / 4;
        guarded = arm64_block_guarded(c, address, size);
    } else {
        n = x86_block_icount(uc, c, address, size, &guarded); /* the bitmap's answer is cached with the count */
    }
    block_checked(uc, c, address, size, n, guarded);
}

/*
 * Called for every block the guest runs. The common path — no break address or guarded text in
 * the block, a cached x86 count, not the slice's first block nor past its deadline, no
 * interrupt-enable watch — is a leaf that needs no stack frame; everything rarer goes to
 * block_slow / block_checked. On arm64 the host marks each break address's granule in guard_bits
 * too, so one test of the bitmap covers both, and a block tests the bitmap's page summary first:
 * one bit for its page, and the granules only on a page where something is marked (arm64 has no
 * per-block cache to hold the answer,
 * and the break filter's test plus the bitmap's on every block made a boot with one unhit probe,
 * which brings the host's few breaks and one guarded range, measurably slower than one without);
 * without guard_bits (nothing marked yet) an arm64 block has nothing to look at.
 */
void kpemu_clock_block(uc_engine *uc, uint64_t address, uint32_t size, void *user_data) {
    struct kpemu_clock *c = (struct kpemu_clock *)user_data;
    uint32_t n;
    int guarded = 0;
    if (c->arm64) {
        const uint64_t *bits = c->guard_bits;
        if (__builtin_expect(bits != NULL, 0)) {
            /* the page summary first (an arm64 block never crosses a page: QEMU bounds a
               translation to its page; one that did would be tested in full) */
            uint64_t last = address + (size ? size : 1) - 1;
            uint64_t p = (address >> 12) & (KPEMU_GUARD_PAGE_BITS - 1);
            const uint64_t *pages = bits + KPEMU_GUARD_BITS / 64;
            if (__builtin_expect((((address ^ last) >> 12) != 0) | ((pages[p >> 6] >> (p & 63)) & 1), 0)
                    && guard_may_touch(bits, address, last + 1)) {
                block_slow(uc, c, address, size);
                return;
            }
        }
        n = (size + 3) / 4;
    } else {
        if (__builtin_expect(c->nbreaks != 0, 0)
                && (c->break_filter == 0 || ((c->break_filter >> ((address >> 4) & 63)) & 1))) {
            block_slow(uc, c, address, size);
            return;
        }
        uint64_t e = c->cache[x86_slot(address)];
        if (__builtin_expect((e & X86_TAG_MASK) != x86_tag(address, size)
                || (uint64_t)((int64_t)(address << 16) >> 16) != address, 0)) {
            block_slow(uc, c, address, size);
            return;
        }
        guarded = (e & X86_GUARDED) != 0;
        n = (uint32_t)(e >> X86_COUNT_SHIFT) & X86_COUNT_MAX;
    }
    if (__builtin_expect(guarded | (c->blocks == 0) | (c->executed + n > c->deadline) | (c->watch_irq != 0), 0)) {
        block_checked(uc, c, address, size, n, guarded);
        return;
    }
    c->blocks++;
    c->executed += n;
}

/*
 * System-register filter for arm64 MRS/MSR instruction hooks. Unicorn calls an instruction
 * hook for every MRS/MSR the guest executes; Linux reads SP_EL0 ("current") and TPIDR_EL1 for
 * nearly everything, millions of times per boot, and a Java upcall for each costs more than
 * the rest of the boot's hooks together. This native hook answers "not handled" for every
 * register outside the wanted (op0, op1, CRn) group (e.g. 3, 3, 14: the generic timer) and
 * forwards the rest to the real hook (a Java upcall).
 */
typedef uint32_t (*kpemu_sysreg_cb)(uc_engine *uc, uc_arm64_reg reg, const uc_arm64_cp_reg *cp_reg, void *user_data);

struct kpemu_sysreg_filter {
    kpemu_sysreg_cb forward;  /* the real hook */
    void *forward_data;       /* its user_data */
    int32_t op0, op1, crn;    /* wanted group; -1 matches anything */
    uint32_t pad;
    uint64_t seen;            /* hook calls */
    uint64_t forwarded;       /* calls passed to `forward` */
    /* MRS of the system counter (CNTPCT_EL0, CNTVCT_EL0: op0 3, op1 3, CRn 14, CRm 0, op2 1/2)
       answered here: the guest time of `counter_clock` in counter ticks. NULL: forwarded. */
    const struct kpemu_clock *counter_clock;
    int64_t nanos_per_tick;
    uint64_t counter_reads;   /* counter reads answered here */
};

size_t kpemu_sysreg_filter_size(void) { return sizeof(struct kpemu_sysreg_filter); }
size_t kpemu_sysreg_filter_counter_offset(void) { return offsetof(struct kpemu_sysreg_filter, counter_clock); }

/* VirtualClock.liveNanos(): the same arithmetic (a long times a double, truncated) as the host's. */
static int64_t live_nanos(const struct kpemu_clock *c) {
    return (int64_t)((double)(int64_t)(c->executed + (uint64_t)c->instr_offset) * c->nanos_per_instr) + c->idle_nanos;
}

uint32_t kpemu_sysreg_filter(uc_engine *uc, uc_arm64_reg reg, const uc_arm64_cp_reg *cp, void *user_data) {
    struct kpemu_sysreg_filter *f = (struct kpemu_sysreg_filter *)user_data;
    f->seen++;
    if ((f->crn >= 0 && (int32_t)cp->crn != f->crn) || (f->op0 >= 0 && (int32_t)cp->op0 != f->op0)
            || (f->op1 >= 0 && (int32_t)cp->op1 != f->op1)) {
        return 0;
    }
    if (f->counter_clock != NULL && cp->op0 == 3 && cp->op1 == 3 && cp->crn == 14 && cp->crm == 0
            && (cp->op2 == 1 || cp->op2 == 2)) {
        /* Linux reads CNTVCT_EL0 for sched_clock at every schedule(), and each read was a Java
           upcall; the value is the Java hook's (GenericTimer.counter()). */
        uint64_t v = (uint64_t)(live_nanos(f->counter_clock) / f->nanos_per_tick);
        if (reg != UC_ARM64_REG_XZR) uc_reg_write(uc, reg, &v);
        f->counter_reads++;
        return 1;
    }
    f->forwarded++;
    return f->forward(uc, reg, cp, f->forward_data);
}

/* x86 rdtsc hook (uc_cb_insn_cpuid_t shape): EDX:EAX = the virtual TSC; 1 = skip Unicorn's own. */
int kpemu_rdtsc(uc_engine *uc, void *user_data) {
    const struct kpemu_clock *c = (const struct kpemu_clock *)user_data;
    uint64_t tsc = c->executed + c->tsc_offset;
    uint64_t lo = (uint32_t)tsc, hi = tsc >> 32;
    uc_reg_write(uc, UC_X86_REG_RAX, &lo);
    uc_reg_write(uc, UC_X86_REG_RDX, &hi);
    return 1;
}

/* x86 rdtscp hook: as rdtsc, and ECX = IA32_TSC_AUX (the guest's own MSR value). */
int kpemu_rdtscp(uc_engine *uc, void *user_data) {
    uc_x86_msr msr = { .rid = 0xc0000103u, .value = 0 };
    uc_reg_read(uc, UC_X86_REG_MSR, &msr);
    uint64_t aux = (uint32_t)msr.value;
    uc_reg_write(uc, UC_X86_REG_RCX, &aux);
    return kpemu_rdtsc(uc, user_data);
}
