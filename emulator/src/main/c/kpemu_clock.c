/*
 * kpemu's instruction clock: a Unicorn block hook in C (a Java upcall per block costs 6-20x
 * on tight code, this one 1.2-2x). It charges each translated block's instruction count to
 * `executed` before the block runs and stops the engine, from inside the hook (the safe,
 * exact place), before a block that would pass `deadline`. The first block after the host
 * clears `blocks` always runs, so a slice always makes progress.
 *
 * x86 block instruction counts come from Unicorn's own translation (UC_CTL_TB_REQUEST_CACHE)
 * and are cached by (address, size) in a direct-mapped table of one 64-bit word per block
 * (address, size and count packed together, so a lookup is one load: the former
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
 * Breakpoints and the text guard are checked when Unicorn translates a block, not when a block
 * runs: kpemu_clock_tb_generated (a UC_HOOK_EDGE_GENERATED hook) is called for every block Unicorn
 * has just translated, before it runs, and stopping the engine there stops it before the block's
 * first instruction (the block exits at its start: the block hook is not called and charges
 * nothing). So a block runs the same hook whether 0 or 10,000 probes are armed (a test per block
 * on arm64, a hashed bitmap and a page summary, was 2-5 % of a boot: about 0.6 ns of a 2 ns hook).
 *
 * Breakpoints: the host's stop addresses (up to KPEMU_BREAKS). A Unicorn UC_HOOK_CODE must not
 * exist while Linux runs: its mere presence (even bounded to an address never executed) makes
 * Unicorn mis-execute kernel code (x86: jump_label_cmp faults on a corrupted pointer; arm64:
 * panic_bad_stack before the first console line; Unicorn then stops syncing the PC of a block that
 * exits at its start). A stop address therefore must be a block start (a branch or call target,
 * e.g. a function entry), and the block there must be translated again each time the guest may
 * reach it: the host drops it from Unicorn's cache when it adds the break and after every stop
 * there. `skip_once` lets the host resume from the address it stopped at: the block is translated
 * once more and runs, the slice ends after it (the deadline is lowered to its end), and the host
 * drops it again (`resumed_break` tells it which). Unicorn calls the hook for every block it
 * translates except the very first of the engine's life: a break there is never seen.
 *
 * Instruction stops (mids): an address that need not start a block (a uprobe at any offset). Also
 * a break (for the blocks that start there); a block translated with one strictly inside it is
 * stopped before it runs, as a break is, with the address in `mid_hit`. The host drops that block
 * and runs it alone in the next slice with the address as Unicorn's exit (`until`), which ends the
 * block before it. Listing the address as an exit only for that slice matters: Unicorn walks every
 * exit through the current page tables after each run.
 *
 * Text guard: the host's probes keep breakpoints (or jumps) in guest text, and the guest may
 * rewrite that text itself (Linux's jump labels, static calls, text_poke through an alias).
 * Instead of a Unicorn memory-write hook (whose mere presence sends every guest load and store
 * down Unicorn's slow path, and whose per-store cost grows with the number of hooks), the host
 * lists the guarded byte ranges here with the bytes it last left there. Unicorn 2.1.4 drops every
 * translated block whose bytes a guest store changed (through any virtual alias: it tracks code by
 * physical page) and translates it again before it next runs; a block the host rewrites it drops
 * itself. So the bytes a block was translated from stay what guest memory holds until the block is
 * translated again, and comparing guarded ranges with memory when a block that contains one is
 * translated sees every guest rewrite before the rewritten text runs. On a difference the hook
 * stops the engine (exact, before the block) and reports the entry in `hit`. Which blocks contain
 * a guarded range: `guard_bits`, a bitmap of 32-byte granules of guest-virtual addresses (hashed
 * modulo KPEMU_GUARD_BITS granules) the host sets for every granule a range touches; only a block
 * whose granules have a bit set walks its page's hash chain and reads memory.
 *
 * Time stamp counter (x86): Unicorn's own rdtsc/rdtscp read the host's TSC, which would make
 * every run different. kpemu_rdtsc / kpemu_rdtscp (UC_HOOK_INSN, Unicorn >= 2.1.4) answer with
 * the virtual clock instead: `executed + tsc_offset`, where the host keeps `tsc_offset` so that
 * the sum is the guest time in instruction periods (idle jumps included). Inside a block the
 * value is that of the block's start plus its instructions (blocks are charged when they start):
 * monotonic and the same in every run.
 *
 * The kernel stack page out of Unicorn's store slow path (x86): Unicorn 2.1.4 has no dirty-memory
 * tracking, so every TLB entry of writable RAM starts "not dirty" and a store through it takes the
 * slow path (notdirty_write: the region lookup, the translated-code check of the page), which then
 * marks the entry dirty (tlb_set_dirty) unless the page is also executable through that entry: a
 * writable and executable mapping keeps every store on the slow path. Linux on x86-64 maps its
 * whole image writable and executable until mark_rodata_ro, at the end of the boot, and start_kernel
 * runs on init_task's stack in .data: ~15 M of a cold boot's ~36 M slow stores went to its top page
 * (docs/reference.md). When the host gives a range (`dirty_lo`..`dirty_hi`: the kernel's .data, which
 * holds no code) and Unicorn's own `tlb_set_dirty`, the first block of every slice whose stack pointer
 * lies in that range marks the stack page's entry dirty, as Unicorn does for a page not executable.
 * Code Unicorn later translates from a page marks its entry not dirty again (tb_gen_code's
 * tlb_reset_dirty_by_vaddr), so a store there still finds the code. No guest-visible change.
 *
 * String stores into a code-free range (x86): clear_bss zeroes the kernel's .bss and .brk (17 MiB
 * in Debian's 6.1) with one `rep stosb` through the same writable and executable mapping, one slow
 * store per byte: ~18 M in a cold boot. QEMU runs a rep string instruction one iteration per block
 * run (the block jumps to itself), so the block hook sees each iteration. A block of one
 * instruction of 2 to 4 bytes (what a rep string instruction is) has its cache entry flagged
 * (X86_STRING), which sends it off the common path; there, a block that runs again right after
 * itself has its RDI read every 16th run, and when RDI stays in one page of the host's range
 * (`string_lo`..`string_hi`) that page is marked dirty as above: a handful of slow stores per page
 * instead of 4,096. A flagged block whose RDI lies outside the range loses its flag until its entry
 * is filled again (memset on the direct map, already on the fast path). Once there have been as
 * many marks as the range has pages, the range has been stored over and the feature turns itself
 * off (string_hi = 0): later rep string blocks keep the common path.
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
#define KPEMU_BREAKS 4096
/* A filter in front of the break list: bit (address * golden ratio) >> (64 - 14) of break_bits is set
   for every listed address (the host keeps it); a translated block whose bit is clear is no break,
   so the list is scanned only for the few blocks whose bit is set, however many breaks there are. */
#define KPEMU_BREAK_BITS_LOG2 14
#define KPEMU_BREAK_BITS (1u << KPEMU_BREAK_BITS_LOG2)
#define KPEMU_MIDS 4096
/* mid_bits: granules as guard_bits, hashed over fewer bits (8 KiB, which stays in the cache: every
   translated block tests it while mids exist) */
#define KPEMU_MID_BITS (1u << 16)

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
    uint64_t resumed_break; /* the break address a slice resumed from (skip_once used), 0: none */
    uint64_t fills;     /* x86 cache entries filled since the last kpemu_clock_forget */
    /* Guest time inside a slice, as VirtualClock.liveNanos computes it: (long) ((executed +
       instr_offset) * nanos_per_instr) + idle_nanos; the host sets the offsets before each slice. */
    int64_t instr_offset;
    int64_t idle_nanos;
    double nanos_per_instr;
    uint32_t break_filter; /* 1: break_bits is kept by the host and checked first; 0: scan the list */
    uint32_t pad_filter;
    uint64_t break_bits[KPEMU_BREAK_BITS / 64];
    /* Instruction stops (mids): addresses that need not start a block. A block translated with one
       strictly inside it is stopped before it runs, like a break, with the address in mid_hit; the
       host then runs that block alone with the address as Unicorn's exit, which ends the block
       before it, and takes the stop there as a break's. mid_bits: a granule bitmap as guard_bits
       (KPEMU_MID_BITS bits of 32-byte granules), kept by the host; NULL: no mids. */
    const uint64_t *mid_bits;
    uint32_t nmids;
    uint32_t pad_mids;
    uint64_t mid_hit;   /* the mid inside the block that stopped the engine, 0: none */
    uint64_t mids[KPEMU_MIDS];
    /* The block the guest ran just before the block a break stopped at (the one that branched,
       returned or fell into it), as Unicorn reports it: start and size; 0: not known. */
    uint64_t hit_prev_pc;
    uint64_t hit_prev_size;
    /* x86: the kernel stack page out of the store slow path (see the top of this file) */
    void (*set_dirty)(void *cpu, uint64_t vaddr); /* Unicorn's tlb_set_dirty_x86_64; NULL: off */
    int64_t engine_cpu;  /* offset of the CPU pointer in Unicorn's engine state */
    uint64_t dirty_lo, dirty_hi; /* guest-virtual [lo, hi): a stack pointer here gets its page marked */
    uint64_t dirty_marks; /* pages marked */
    /* x86: string stores into a code-free range out of the slow path (see the top of this file) */
    uint64_t string_lo, string_hi; /* guest-virtual [lo, hi); string_hi == 0: off (also once done) */
    uint64_t string_marks;   /* pages marked (a page marked again right after, in a new slice: once) */
    uint64_t string_block;   /* the flagged block that ran last */
    uint64_t string_repeats; /* its runs in a row */
    uint64_t string_page;    /* RDI's page at the last check */
    uint64_t string_marked;  /* the page marked last (0 after a slice starts) */
    uint64_t string_counted; /* the page counted last in string_marks (a slice's re-mark is not) */
};

size_t kpemu_clock_size(void) { return sizeof(struct kpemu_clock); }
size_t kpemu_clock_guard_bits_offset(void) { return offsetof(struct kpemu_clock, guard_bits); }
size_t kpemu_clock_resumed_break_offset(void) { return offsetof(struct kpemu_clock, resumed_break); }
size_t kpemu_clock_live_time_offset(void) { return offsetof(struct kpemu_clock, instr_offset); }
size_t kpemu_clock_break_filter_offset(void) { return offsetof(struct kpemu_clock, break_filter); }
size_t kpemu_clock_break_bits_offset(void) { return offsetof(struct kpemu_clock, break_bits); }
uint32_t kpemu_clock_break_capacity(void) { return KPEMU_BREAKS; }
size_t kpemu_clock_mid_bits_offset(void) { return offsetof(struct kpemu_clock, mid_bits); }
size_t kpemu_clock_nmids_offset(void) { return offsetof(struct kpemu_clock, nmids); }
size_t kpemu_clock_mid_hit_offset(void) { return offsetof(struct kpemu_clock, mid_hit); }
size_t kpemu_clock_mids_offset(void) { return offsetof(struct kpemu_clock, mids); }
uint32_t kpemu_clock_mid_capacity(void) { return KPEMU_MIDS; }
uint32_t kpemu_clock_mid_bitmap_bits(void) { return KPEMU_MID_BITS; }
size_t kpemu_clock_hit_prev_offset(void) { return offsetof(struct kpemu_clock, hit_prev_pc); }
size_t kpemu_clock_stack_dirty_offset(void) { return offsetof(struct kpemu_clock, set_dirty); }
size_t kpemu_clock_string_dirty_offset(void) { return offsetof(struct kpemu_clock, string_lo); }
uint32_t kpemu_clock_break_bits_log2(void) { return KPEMU_BREAK_BITS_LOG2; }
uint32_t kpemu_guard_bitmap_bits(void) { return KPEMU_GUARD_BITS; }
uint32_t kpemu_guard_granule_shift(void) { return KPEMU_GUARD_GRANULE_SHIFT; }

/* Feature bits of this build: 1 = interrupt-enable watch (fields watch_irq, watch_stops),
   2 = the arm64 system-register filter (kpemu_sysreg_filter), 4 = breakpoints,
   8 = the virtual time stamp counter (tsc_offset, kpemu_rdtsc, kpemu_rdtscp),
   16 = the text guard (guard), 32 = the guard's granule bitmap (guard_bits,
   kpemu_clock_guard_bits_offset, kpemu_guard_bitmap_bits, kpemu_guard_granule_shift),
   512 = the x86 block cache refreshed by kpemu_clock_tb_generated (a UC_HOOK_EDGE_GENERATED
   hook), 1024 = the live guest time (instr_offset, idle_nanos, nanos_per_instr,
   kpemu_clock_live_time_offset) and the system-register filter's counter (counter_clock,
   kpemu_sysreg_filter_counter_offset), 2048 = breaks and the text guard checked when a block is
   translated, on both arches (kpemu_clock_tb_generated; resumed_break,
   kpemu_clock_resumed_break_offset). 64, 128 and 256 (a per-block break filter, arm64 breaks in
   the granule bitmap, its page summary) are gone. 4096 = the break filter (break_filter,
   break_bits). 8192 = instruction stops (mid_bits, nmids, mid_hit, mids) and the block before a
   break's stop (hit_prev_pc, hit_prev_size). 16384 = the x86 kernel stack page kept out of the
   store slow path (set_dirty, engine_cpu, dirty_lo, dirty_hi, dirty_marks; kpemu_clock_stack_dirty_offset).
   32768 = x86 string stores into a code-free range kept out of it (string_lo, string_hi,
   string_marks; kpemu_clock_string_dirty_offset; needs set_dirty and engine_cpu). */
uint32_t kpemu_clock_features(void) { return 1 | 2 | 4 | 8 | 16 | 32 | 512 | 1024 | 2048 | 4096 | 8192 | 16384 | 32768; }

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
   cross a 2 KiB boundary of the hashed index), tested with one load and one mask. */
static inline int granules_may_touch(const uint64_t *bits, uint64_t nbits, uint64_t address, uint64_t end) {
    uint64_t g = address >> KPEMU_GUARD_GRANULE_SHIFT;
    uint64_t span = ((end - 1) >> KPEMU_GUARD_GRANULE_SHIFT) - g;   /* granules after the first */
    uint64_t i = g & (nbits - 1);
    uint32_t bit = (uint32_t)(i & 63);
    if (__builtin_expect(bit + span < 64, 1)) {
        uint64_t mask = (~0ull >> (63 - span)) << bit;
        return (bits[i >> 6] & mask) != 0;
    }
    for (uint64_t k = 0; k <= span; k++) {
        uint64_t j = (g + k) & (nbits - 1);
        if (bits[j >> 6] & (1ull << (j & 63))) return 1;
    }
    return 0;
}

static inline int guard_may_touch(const uint64_t *bits, uint64_t address, uint64_t end) {
    return granules_may_touch(bits, KPEMU_GUARD_BITS, address, end);
}

/*
 * x86 block cache. The slot is ((address >> 2) ^ (address >> 15)) mod KPEMU_CLOCK_CACHE, so blocks
 * that lie near each other in guest text share host cache lines (a 64-byte line holds the slots of
 * 32 bytes of text; with the slot taken from address bits 0 up, each block had a line of its own,
 * and the table's load was a third of the hook's samples). The entry holds address bits 0-1 and
 * 15-47 (the slot gives back bits 2-14; bits 48-63 copy bit 47 in a canonical address), the
 * block's size in bytes and its instruction count, plus a valid bit: a hit is exact. Blocks that
 * do not fit (never seen: x86 blocks have at most 512 instructions and span at most two pages)
 * are looked up each time.
 */
#define X86_ADDR_BITS 35          /* address bits 0..1 and 15..47 */
#define X86_SIZE_SHIFT 35
#define X86_SIZE_MAX 0x1fffu      /* 13 bits */
#define X86_COUNT_SHIFT 48
#define X86_COUNT_MAX 0x3ffu      /* 10 bits */
#define X86_VALID (1ull << 63)
#define X86_STRING (1ull << 62)   /* a one-instruction block of 2-4 bytes: off the common path */

static inline uint32_t x86_slot(uint64_t address) {
    return (uint32_t)(((address >> 2) ^ (address >> 15)) & (KPEMU_CLOCK_CACHE - 1));
}

static inline uint64_t x86_tag(uint64_t address, uint32_t size) {
    uint64_t bits = (address & 3) | ((address >> 15) << 2);
    return X86_VALID | ((uint64_t)size << X86_SIZE_SHIFT) | (bits & ((1ull << X86_ADDR_BITS) - 1));
}

/* The common path compares an entry under X86_TAG_MASK, which holds X86_STRING and x86_tag never
   sets: a flagged entry never matches there. X86_KEY_MASK is the entry's identity alone. */
#define X86_KEY_MASK (X86_VALID | ((uint64_t)X86_SIZE_MAX << X86_SIZE_SHIFT) | ((1ull << X86_ADDR_BITS) - 1))
#define X86_TAG_MASK (X86_KEY_MASK | X86_STRING)

/* Caches a block's count; 0 when the block does not fit an entry (it is then looked up each time). */
static inline int x86_cache_store(struct kpemu_clock *c, uint64_t address, uint32_t size, uint32_t n) {
    if ((uint64_t)((int64_t)(address << 16) >> 16) != address || size > X86_SIZE_MAX || n > X86_COUNT_MAX) return 0;
    uint64_t flag = (c->string_hi != 0 && n == 1 && size >= 2 && size <= 4) ? X86_STRING : 0;
    c->cache[x86_slot(address)] = x86_tag(address, size) | ((uint64_t)n << X86_COUNT_SHIFT) | flag;
    c->fills++;
    return 1;
}

/* The miss path: Unicorn's translation block for `address`. */
static __attribute__((noinline)) uint32_t x86_block_fill(uc_engine *uc, struct kpemu_clock *c, uint64_t address, uint32_t size) {
    uc_tb tb;
    memset(&tb, 0, sizeof tb);
    uint32_t n = 0;
    if (uc_ctl_request_cache(uc, address, &tb) == UC_ERR_OK && tb.icount != 0) n = tb.icount;
    if (n == 0) n = size ? (size + 3) / 4 : 1; /* cannot happen for a block that runs; keep it deterministic */
    x86_cache_store(c, address, size, n);
    return n;
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

/*
 * 1 when the block just translated at `address` starts at a break address to stop at (the engine
 * is stopped and break_hit set). Resuming from it (skip_once) lets the block run and ends the slice
 * after it: the host then drops the block so the guest's next arrival is translated, and seen, again.
 */
static inline int break_may_be(const struct kpemu_clock *c, uint64_t address) {
    if (!c->break_filter) return 1;
    uint64_t bit = (address * 0x9E3779B97F4A7C15ull) >> (64 - KPEMU_BREAK_BITS_LOG2);
    return (int)((c->break_bits[bit >> 6] >> (bit & 63)) & 1);
}

static __attribute__((noinline)) int break_reached(uc_engine *uc, struct kpemu_clock *c, uint64_t address, uint32_t n, const uc_tb *prev) {
    for (uint32_t i = 0; i < c->nbreaks; i++) {
        if (c->breaks[i] != address) continue;
        if (c->skip_once == address) {
            c->skip_once = 0;
            c->resumed_break = address;
            if (c->executed + n < c->deadline) c->deadline = c->executed + n;
            return 0;
        }
        c->break_hit = i + 1;
        c->hit_prev_pc = prev != NULL ? prev->pc : 0;
        c->hit_prev_size = prev != NULL ? prev->size : 0;
        uc_emu_stop(uc);
        return 1;
    }
    return 0;
}

/* 1 when a mid lies strictly inside the block [address, address + size): the engine is stopped
   before the block runs, and mid_hit names the first such mid (the one the block reaches first). */
static __attribute__((noinline)) int mid_inside(uc_engine *uc, struct kpemu_clock *c, uint64_t address, uint32_t size) {
    uint64_t first = 0;
    for (uint32_t i = 0; i < c->nmids; i++) {
        uint64_t m = c->mids[i];
        if (m - address - 1 >= (uint64_t)size - 1) continue;   /* address < m < address + size */
        if (first == 0 || m < first) first = m;
    }
    if (first == 0) return 0;
    c->mid_hit = first;
    uc_emu_stop(uc);
    return 1;
}

/*
 * UC_HOOK_EDGE_GENERATED hook (uc_hook_edge_gen_t): Unicorn calls it for every block it has just
 * translated, before that block runs (see the top of this file), except the very first block of
 * the engine's life. Here: the break addresses, the text guard, and on x86 the block cache, which
 * must hold the new block's count: when the guest rewrites its text (alternatives, jump labels,
 * static calls) Unicorn re-translates the block, often with the same address and size but another
 * instruction count, and a cache entry that outlived its block kept charging the old count (2,412
 * wrong counts in one x86 page-fault run).
 */
void kpemu_clock_tb_generated(uc_engine *uc, uc_tb *cur, uc_tb *prev, void *user_data) {
    struct kpemu_clock *c = (struct kpemu_clock *)user_data;
    if (cur == NULL) return;
    uint64_t address = cur->pc;
    uint32_t size = cur->size;
    uint32_t n = c->arm64 ? (size + 3) / 4 : cur->icount;
    if (c->nbreaks != 0 && break_may_be(c, address) && break_reached(uc, c, address, n, prev)) return;
    if (c->nmids != 0 && c->mid_bits != NULL && size > 1
            && granules_may_touch(c->mid_bits, KPEMU_MID_BITS, address + 1, address + size) && mid_inside(uc, c, address, size)) return;
    if (c->guard != NULL && c->guard->live && c->guard_bits != NULL
            && guard_may_touch(c->guard_bits, address, address + (size ? size : 1))
            && guard_differs(uc, c->guard, address, size)) {
        uc_emu_stop(uc);
        return;
    }
    if (c->arm64 || n == 0) return;
    if (!x86_cache_store(c, address, size, n) && (c->cache[x86_slot(address)] & X86_KEY_MASK) == x86_tag(address, size)) {
        c->cache[x86_slot(address)] = 0;
    }
}

/* A slice's first block: the stack pointer's page, when it lies in the host's range, marked dirty
   in the engine's TLB (see the top of this file). */
static __attribute__((noinline)) void stack_page_dirty(uc_engine *uc, struct kpemu_clock *c) {
    uint64_t sp = 0;
    if (uc_reg_read(uc, UC_X86_REG_RSP, &sp) != UC_ERR_OK || sp - c->dirty_lo >= c->dirty_hi - c->dirty_lo) return;
    void *cpu = *(void **)((char *)uc + c->engine_cpu);
    if (cpu == NULL) return;
    c->set_dirty(cpu, sp & ~(uint64_t)0xfff);
    c->dirty_marks++;
}

/* A flagged block (X86_STRING) about to run: when it runs again right after itself (a rep string
   instruction's next iteration), RDI every 16th run; its page marked dirty once RDI stayed in it
   and it lies in the host's range. RDI outside the range: the entry loses its flag. */
static __attribute__((noinline)) void string_store_block(uc_engine *uc, struct kpemu_clock *c, uint64_t address) {
    if (c->string_hi == 0) {                      /* turned off since the entry was flagged */
        c->cache[x86_slot(address)] &= ~X86_STRING;
        return;
    }
    if (address != c->string_block) {
        c->string_block = address;
        c->string_repeats = 0;
        return;
    }
    if ((++c->string_repeats & 15) != 1) return;
    uint64_t rdi = 0;
    if (uc_reg_read(uc, UC_X86_REG_RDI, &rdi) != UC_ERR_OK) return;
    if (rdi - c->string_lo >= c->string_hi - c->string_lo) {
        c->cache[x86_slot(address)] &= ~X86_STRING;
        return;
    }
    uint64_t page = rdi & ~(uint64_t)0xfff;
    if (page == c->string_page && page != c->string_marked) {
        void *cpu = *(void **)((char *)uc + c->engine_cpu);
        if (cpu == NULL) return;
        c->set_dirty(cpu, page);
        c->string_marked = page;
        /* as many marks as the range has pages: it has been stored over (clear_bss is done), and
           flagging every later rep string block (the direct map's memset and memcpy, user space's)
           would cost them the side path for nothing */
        if (page != c->string_counted) {
            c->string_counted = page;
            if (++c->string_marks >= (c->string_hi - c->string_lo) >> 12) c->string_hi = 0;
        }
    }
    c->string_page = page;
}

/* The block's checks after its count: the deadline, the interrupt-enable watch. */
static __attribute__((noinline)) void block_checked(uc_engine *uc, struct kpemu_clock *c, uint32_t n) {
    if (c->blocks == 0) c->string_marked = 0;   /* a TLB flush between slices may have dropped it */
    if (c->blocks == 0 && c->set_dirty != NULL) stack_page_dirty(uc, c);
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

/* An x86 block the cache does not hold, or holds flagged: its count (from Unicorn when not
   cached), the flagged block's string-store check, then the common checks. */
static __attribute__((noinline)) void block_uncached(uc_engine *uc, struct kpemu_clock *c, uint64_t address, uint32_t size) {
    uint64_t e = c->cache[x86_slot(address)];
    uint32_t n;
    if ((e & X86_STRING) && (e & X86_KEY_MASK) == x86_tag(address, size)
            && (uint64_t)((int64_t)(address << 16) >> 16) == address) {
        n = (uint32_t)(e >> X86_COUNT_SHIFT) & X86_COUNT_MAX;
        string_store_block(uc, c, address);
    } else {
        n = x86_block_fill(uc, c, address, size);
    }
    if (__builtin_expect((c->blocks == 0) | (c->executed + n > c->deadline) | (c->watch_irq != 0), 0)) {
        block_checked(uc, c, n);
        return;
    }
    c->blocks++;
    c->executed += n;
}

/*
 * Called for every block the guest runs. The common path — an arm64 block or a cached x86 count,
 * not the slice's first block nor past its deadline, no interrupt-enable watch — is a leaf that
 * needs no stack frame (everything rarer is a tail call: block_uncached, block_checked). Breaks
 * and guarded text cost nothing here (they are checked when a block is translated).
 */
void kpemu_clock_block(uc_engine *uc, uint64_t address, uint32_t size, void *user_data) {
    struct kpemu_clock *c = (struct kpemu_clock *)user_data;
    uint32_t n;
    if (c->arm64) {
        n = (size + 3) / 4;
    } else {
        uint64_t e = c->cache[x86_slot(address)];
        if (__builtin_expect(((e & X86_TAG_MASK) != x86_tag(address, size))
                | ((uint64_t)((int64_t)(address << 16) >> 16) != address), 0)) {
            block_uncached(uc, c, address, size);
            return;
        }
        n = (uint32_t)(e >> X86_COUNT_SHIFT) & X86_COUNT_MAX;
    }
    if (__builtin_expect((c->blocks == 0) | (c->executed + n > c->deadline) | (c->watch_irq != 0), 0)) {
        block_checked(uc, c, n);
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
