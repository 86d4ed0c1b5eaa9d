/*
 * x86-64 probe hits recorded natively. A kprobe event on an ftrace site whose handlers only read
 * registers and the context columns (the current task, its pid and comm, the latency column's
 * words) needs nothing from the host at the hit but those values: this code reads them at the
 * int3, as the host's Java path would read them there (the same registers, the same page walk of
 * the hit's tables, RAM only, kernel addresses only), appends them to a ring of records, and
 * resumes the guest where the host's hit path would (the site's boosted copy). The host formats
 * the records later, in order, before any other of its code sees the guest again: at the next
 * upcall of any hook and when the engine returns (NativeProbeHits, Kprobes' RecordedHits). A hit
 * costs no Java upcall, no context switch of the host's thread state and no FFM call.
 *
 * Everything else is the host's, unchanged: an int3 at an address not in the site table, any
 * int3 while `enabled` is 0 (the host turns it off whenever its probes, events or listeners
 * change, and on again at its next safe point), while `busy` (a hit of the host's is stepping),
 * while the hook forwards every exception (`forward_all`), when the ring is full, in user mode.
 *
 * The sites: open addressing on the probe's address (the int3's), `site_mask + 1` slots, key 0
 * empty; each slot's resume pc. Records: `record_size` bytes each, `capacity` of them: the slot
 * (u32), bit i of `ok` (u32) set when word i was read, the instruction clock's `executed` at the
 * hit (u64), the `nregs` registers of `regs` (u64 each), then `nwords` words of 16 bytes.
 * Word i is `word_size[i]` bytes at `word_offset[i]` from: 0 nothing (absolute), 1 GS_BASE (the
 * register at `gs_index` of `regs`), 2 the task (word 0, which must then be read).
 */
#include <string.h>
#include "kpemu_x86_exception.h"

#define HIT_REGS 32
#define HIT_WORDS 8
#define KERNEL_MIN 0xffff800000000000ull

struct kpemu_x86_hits {
    uint32_t enabled;          /* 0: every int3 goes to the host */
    uint32_t busy;             /* nonzero: the host has a hit in flight */
    uint32_t site_mask;        /* site slots - 1 (a power of two - 1) */
    uint32_t record_size;      /* bytes per record */
    uint64_t *site_keys;       /* probe addresses (0: empty slot) */
    uint64_t *site_resume;     /* where the guest goes on after the hit */
    uint8_t *ring;             /* capacity records */
    uint32_t capacity, count;  /* records the ring holds, records in it */
    const uint64_t *executed;  /* the instruction clock's count of executed instructions */
    uint32_t nregs, nwords;
    uint32_t gs_index, cs_index; /* slots of GS_BASE and CS in `regs` */
    int32_t regs[HIT_REGS];    /* engine register ids read into each record */
    uint32_t word_base[HIT_WORDS];
    int64_t word_offset[HIT_WORDS];
    uint32_t word_size[HIT_WORDS];
    uint64_t recorded;         /* hits recorded here */
    uc_context *pc_ctx;        /* a context of the CPU state's prefix that holds RIP (the host's setPc's) */
    int64_t eip;               /* RIP's offset in it */
};

size_t kpemu_x86_record_hit_size(void) { return sizeof(struct kpemu_x86_hits); }

static uint32_t slot_of(uint64_t address, uint32_t mask) {
    uint64_t h = address * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(h ^ (h >> 32)) & mask;
}

/* Reads `len` bytes of guest-virtual `va` (kernel addresses, RAM only); 0 when the host's read would fail. */
static int read_kernel(const struct walker *w, uint64_t va, uint8_t *out, uint32_t len) {
    if (va < KERNEL_MIN) return 0;
    if (va + len - 1 < va) return 0;
    uint32_t done = 0;
    while (done < len) {
        uint64_t a = va + done, pa, size;
        if (!kpemu_x86_translate(w, a, &pa, &size)) return 0;
        uint64_t room = size - (a & (size - 1));
        uint32_t n = len - done;
        if (n > room) n = (uint32_t)room;
        if (!kpemu_x86_phys_read(w, pa, out + done, n, 1)) return 0;
        done += n;
    }
    return 1;
}

int kpemu_x86_record_hit(uc_engine *uc, struct kpemu_x86_exception *s) {
    struct kpemu_x86_hits *h = s->hits;
    if (h->enabled == 0 || h->busy != 0 || h->count >= h->capacity) return 0;
    uint64_t rip = 0;
    uc_reg_read(uc, UC_X86_REG_RIP, &rip);
    uint64_t address = rip - 1;                 /* Unicorn reports int3 with RIP past the 0xcc */
    uint32_t mask = h->site_mask, i = slot_of(address, mask);
    while (h->site_keys[i] != address) {
        if (h->site_keys[i] == 0) return 0;
        i = (i + 1) & mask;
    }
    uint8_t *rec = h->ring + (size_t)h->count * h->record_size;
    uint64_t *regs = (uint64_t *)(rec + 16);
    void *ptrs[HIT_REGS];
    for (uint32_t r = 0; r < h->nregs; r++) ptrs[r] = &regs[r];
    if (uc_reg_read_batch(uc, (int *)h->regs, ptrs, (int)h->nregs) != UC_ERR_OK) return 0;
    if ((regs[h->cs_index] & 3) != 0) return 0;   /* user mode: the host's */

    struct walker w;
    kpemu_x86_walker_now(uc, s, &w);

    uint32_t ok = 0;
    uint8_t *words = rec + 16 + 8 * (size_t)h->nregs;
    memset(words, 0, 16 * (size_t)h->nwords);
    uint64_t task = 0;
    for (uint32_t k = 0; k < h->nwords; k++) {
        uint64_t base;
        switch (h->word_base[k]) {
            case 1: base = regs[h->gs_index]; break;
            case 2:
                if ((ok & 1) == 0) continue;
                base = task;
                break;
            default: base = 0;
        }
        if (read_kernel(&w, base + (uint64_t)h->word_offset[k], words + 16 * k, h->word_size[k])) {
            ok |= 1u << k;
            if (k == 0) memcpy(&task, words, 8);
        }
    }
    uint32_t site = i;
    memcpy(rec, &site, 4);
    memcpy(rec + 4, &ok, 4);
    memcpy(rec + 8, h->executed, 8);

    /* RIP through the context, as the host's setPc does inside the exception hook: Unicorn's RIP
       write would make the engine leave its execution loop and enter it again */
    uc_context_save(uc, h->pc_ctx);
    memcpy((uint8_t *)h->pc_ctx + h->eip, &h->site_resume[i], 8);
    uc_context_restore(uc, h->pc_ctx);
    h->count++;
    h->recorded++;
    return 1;
}
