/*
 * kpemu's instruction clock: a Unicorn block hook in C (a Java upcall per block costs 6-20x
 * on tight code, this one 1.2-2x). It charges each translated block's instruction count to
 * `executed` before the block runs and stops the engine, from inside the hook (the safe,
 * exact place), before a block that would pass `deadline`. The first block after the host
 * clears `blocks` always runs, so a slice always makes progress.
 *
 * x86 block instruction counts come from Unicorn's own translation (UC_CTL_TB_REQUEST_CACHE)
 * and are cached by (address, size); arm64 blocks are size/4 instructions.
 */
#include <stdint.h>
#include <string.h>
#include <unicorn/unicorn.h>

#define KPEMU_CLOCK_CACHE 8192 /* power of two */

struct kpemu_clock {
    uint64_t executed;  /* instructions charged so far */
    uint64_t deadline;  /* do not start a block that would end past this */
    uint64_t blocks;    /* blocks started since the host last cleared it */
    uint32_t stopped;   /* 1 when this hook stopped the engine */
    uint32_t arm64;     /* 1: arm64 (fixed 4-byte instructions) */
    uint64_t keys[KPEMU_CLOCK_CACHE];
    uint16_t counts[KPEMU_CLOCK_CACHE];
};

size_t kpemu_clock_size(void) { return sizeof(struct kpemu_clock); }

void kpemu_clock_forget(struct kpemu_clock *c) {
    memset(c->keys, 0, sizeof c->keys);
    memset(c->counts, 0, sizeof c->counts);
}

static uint32_t x86_block_icount(uc_engine *uc, struct kpemu_clock *c, uint64_t address, uint32_t size) {
    uint64_t key = address ^ ((uint64_t)size << 52) ^ 1;
    uint32_t slot = (uint32_t)((address ^ (address >> 13) ^ size) & (KPEMU_CLOCK_CACHE - 1));
    if (c->keys[slot] == key && c->counts[slot] != 0) return c->counts[slot];
    uc_tb tb;
    memset(&tb, 0, sizeof tb);
    uint32_t n = 0;
    if (uc_ctl_request_cache(uc, address, &tb) == UC_ERR_OK && tb.icount != 0) n = tb.icount;
    if (n == 0) n = size ? (size + 3) / 4 : 1; /* cannot happen for a block that runs; keep it deterministic */
    c->keys[slot] = key;
    c->counts[slot] = (uint16_t)n;
    return n;
}

void kpemu_clock_block(uc_engine *uc, uint64_t address, uint32_t size, void *user_data) {
    struct kpemu_clock *c = (struct kpemu_clock *)user_data;
    uint32_t n = c->arm64 ? (size + 3) / 4 : x86_block_icount(uc, c, address, size);
    if (c->blocks != 0 && c->executed + n > c->deadline) {
        c->stopped = 1;
        uc_emu_stop(uc);
        return;
    }
    c->blocks++;
    c->executed += n;
}
