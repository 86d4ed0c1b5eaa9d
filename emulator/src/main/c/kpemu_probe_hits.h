/*
 * Probe hits recorded natively, the part both architectures share (kpemu_x86_probe_hits.c,
 * kpemu_arm64_probe_hits.c; the host's side is NativeProbeHits): the state as the host lays it
 * out, the site table's lookup, and the record's layout and words.
 *
 * The sites: open addressing on the probe's address (the breakpoint's), `site_mask + 1` slots,
 * key 0 empty; each slot's resume pc. Records: `record_size` bytes each, `capacity` of them: the
 * slot (u32), bit i of `ok` (u32) set when word i was read, the instruction clock's `executed` at
 * the hit (u64), the `nregs` registers of `regs` (u64 each), then `nwords` words of 16 bytes.
 * Word i is `word_size[i]` bytes at `word_offset[i]` from: 0 nothing (absolute), 1 the register at
 * `base_index` of `regs` (x86-64: GS_BASE), 2 the task (word 0, which must then be read); or
 * 3 no memory at all: the value of register `word_offset[i]` of `regs` (arm64: SP_EL0, the task).
 */
#ifndef KPEMU_PROBE_HITS_H
#define KPEMU_PROBE_HITS_H
#include <stdint.h>
#include <string.h>
#include <unicorn/unicorn.h>

#define HIT_REGS 40
#define HIT_WORDS 8
#define WORD_ABSOLUTE 0
#define WORD_FROM_BASE_REGISTER 1
#define WORD_FROM_TASK 2
#define WORD_REGISTER 3

struct kpemu_probe_hits {
    uint32_t enabled;          /* 0: every breakpoint goes to the host */
    uint32_t busy;             /* nonzero: the host has a hit in flight */
    uint32_t site_mask;        /* site slots - 1 (a power of two - 1) */
    uint32_t record_size;      /* bytes per record */
    uint64_t *site_keys;       /* probe addresses (0: empty slot) */
    uint64_t *site_resume;     /* where the guest goes on after the hit */
    uint8_t *ring;             /* capacity records */
    uint32_t capacity, count;  /* records the ring holds, records in it */
    const uint64_t *executed;  /* the instruction clock's count of executed instructions */
    uint32_t nregs, nwords;
    int32_t base_index;        /* slot in `regs` of the register base-relative words add to (-1: none) */
    uint32_t mode_index;       /* slot in `regs` that tells kernel from user mode (x86 CS, arm64 PSTATE) */
    int32_t regs[HIT_REGS];    /* engine register ids read into each record */
    uint32_t word_base[HIT_WORDS];
    int64_t word_offset[HIT_WORDS];
    uint32_t word_size[HIT_WORDS];
    uint64_t recorded;         /* hits recorded here */
    uc_context *pc_ctx;        /* a context of the CPU state's prefix that holds the PC (the host's setPc's) */
    int64_t pc_offset;         /* the PC's offset in it */
};

/* Reads `len` bytes of guest-virtual `va` as the host would at the hit; 0 when its read would fail. */
typedef int (*kpemu_hit_reader)(const void *walker, uint64_t va, uint8_t *out, uint32_t len);

/* A page walk's two steps, for kpemu_hits_read_pages: the physical address of `va` and the size
   of its page (0: not mapped), and a read of guest-physical memory (0: not RAM). */
typedef int (*kpemu_hit_translate)(const void *walker, uint64_t va, uint64_t *pa, uint64_t *page_size);
typedef int (*kpemu_hit_phys_read)(const void *walker, uint64_t pa, uint8_t *out, uint32_t len);

/* Reads `len` bytes of guest-virtual `va` page by page; 0 when a page is not mapped or not RAM. */
static inline int kpemu_hits_read_pages(const void *walker, uint64_t va, uint8_t *out, uint32_t len,
        kpemu_hit_translate translate, kpemu_hit_phys_read phys_read) {
    if (va + len - 1 < va) return 0;
    uint32_t done = 0;
    while (done < len) {
        uint64_t a = va + done, pa, size;
        if (!translate(walker, a, &pa, &size)) return 0;
        uint64_t room = size - (a & (size - 1));
        uint32_t n = len - done;
        if (n > room) n = (uint32_t)room;
        if (!phys_read(walker, pa, out + done, n)) return 0;
        done += n;
    }
    return 1;
}

static inline uint32_t kpemu_hits_slot_of(uint64_t address, uint32_t mask) {
    uint64_t h = address * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(h ^ (h >> 32)) & mask;
}

/* The site slot of `address`, or -1 when it is no site. */
static inline int64_t kpemu_hits_site(const struct kpemu_probe_hits *h, uint64_t address) {
    uint32_t mask = h->site_mask, i = kpemu_hits_slot_of(address, mask);
    while (h->site_keys[i] != address) {
        if (h->site_keys[i] == 0) return -1;
        i = (i + 1) & mask;
    }
    return i;
}

/* The next record's registers, read in one batch; NULL when they cannot be read. */
static inline uint64_t *kpemu_hits_read_registers(uc_engine *uc, struct kpemu_probe_hits *h) {
    uint8_t *rec = h->ring + (size_t)h->count * h->record_size;
    uint64_t *regs = (uint64_t *)(rec + 16);
    void *ptrs[HIT_REGS];
    for (uint32_t r = 0; r < h->nregs; r++) ptrs[r] = &regs[r];
    if (uc_reg_read_batch(uc, (int *)h->regs, ptrs, (int)h->nregs) != UC_ERR_OK) return NULL;
    return regs;
}

/* Reads the words into the record whose registers are `regs` and completes it; the host's pc for
   the guest is then the slot's resume address, which the caller writes. */
static inline void kpemu_hits_complete(struct kpemu_probe_hits *h, uint64_t *regs, uint32_t site,
        kpemu_hit_reader read, const void *walker) {
    uint8_t *rec = (uint8_t *)regs - 16;
    uint32_t ok = 0;
    uint8_t *words = rec + 16 + 8 * (size_t)h->nregs;
    memset(words, 0, 16 * (size_t)h->nwords);
    uint64_t task = 0;
    for (uint32_t k = 0; k < h->nwords; k++) {
        uint64_t base;
        switch (h->word_base[k]) {
            case WORD_FROM_BASE_REGISTER: base = h->base_index >= 0 ? regs[h->base_index] : 0; break;
            case WORD_FROM_TASK:
                if ((ok & 1) == 0) continue;
                base = task;
                break;
            case WORD_REGISTER: {
                uint64_t v = regs[h->word_offset[k]];
                memcpy(words + 16 * k, &v, 8);
                ok |= 1u << k;
                if (k == 0) task = v;
                continue;
            }
            default: base = 0;
        }
        if (read(walker, base + (uint64_t)h->word_offset[k], words + 16 * k, h->word_size[k])) {
            ok |= 1u << k;
            if (k == 0) memcpy(&task, words, 8);
        }
    }
    memcpy(rec, &site, 4);
    memcpy(rec + 4, &ok, 4);
    memcpy(rec + 8, h->executed, 8);
}

/* The guest goes on at `pc`, set through the context as the host's setPc does inside an exception
   hook (a register write of the PC from a hook would make the engine leave its execution loop and
   enter it again, and on arm64 leaves later memory hooks of the run without their pc synced). */
static inline void kpemu_hits_resume(uc_engine *uc, struct kpemu_probe_hits *h, uint64_t pc) {
    uc_context_save(uc, h->pc_ctx);
    memcpy((uint8_t *)h->pc_ctx + h->pc_offset, &pc, 8);
    uc_context_restore(uc, h->pc_ctx);
    h->count++;
    h->recorded++;
}

#endif
