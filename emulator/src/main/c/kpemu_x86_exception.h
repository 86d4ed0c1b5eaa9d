/*
 * What kpemu_x86_exception.c shares with kpemu_x86_probe_hits.c: the hook's state (laid out as
 * NativeExceptions writes it) and its page walker over the host's table of RAM regions.
 */
#ifndef KPEMU_X86_EXCEPTION_H
#define KPEMU_X86_EXCEPTION_H
#include <stddef.h>
#include <stdint.h>
#include <unicorn/unicorn.h>

#define RAM_REGIONS 4

struct kpemu_probe_hits;

typedef void (*kpemu_intr_cb)(uc_engine *uc, uint32_t intno, void *user_data);

struct kpemu_ram {
    uint64_t base, end;       /* guest-physical [base, end) */
    uint8_t *host;            /* its host memory */
};

struct kpemu_x86_exception {
    uc_context *ctx;          /* a whole-state context (uc_context_alloc'd by the host) */
    int64_t error_code;       /* offset of QEMU's error_code in the context */
    int64_t old_exception;    /* offset of QEMU's old_exception */
    int64_t hflags;           /* offset of hflags */
    int64_t cs_cache, ss_cache; /* offsets of the CS and SS segment caches */
    int64_t eip;              /* offset of RIP */
    int32_t seg_selector, seg_base, seg_limit, seg_flags; /* offsets within a segment cache */
    uint32_t hf_cpl_mask;     /* CPL bits of hflags */
    uint32_t code64_flags;    /* segment-cache flags of flat 64-bit code, DPL 0 */
    uint32_t native_vectors;  /* bit v set: vector v is delivered here */
    uint32_t forward_all;     /* nonzero: every exception goes to `forward` */
    kpemu_intr_cb forward;    /* the host's interrupt hook */
    void *forward_data;
    uint64_t delivered;       /* exceptions delivered here */
    uint64_t forwarded;       /* exceptions passed to `forward` */
    uint32_t ram_count;       /* entries of `ram` in use */
    uint32_t pad;
    struct kpemu_ram ram[RAM_REGIONS];
    uint64_t owned_low, owned_high; /* faults with RIP in [owned_low, owned_high) go to `forward` */
    uint64_t frame_low, frame_high; /* frames touching guest-physical [frame_low, frame_high) are the host's */
    struct kpemu_probe_hits *hits;    /* probe hits recorded here (kpemu_x86_probe_hits.c); NULL: none */
};

/* The page tables as they are now (X86PageWalker.now). */
struct walker {
    uc_engine *uc;
    const struct kpemu_x86_exception *s;
    int paging, la57;
    uint64_t cr3;
};

/* The page tables as they are now: CR0's paging bit, CR4's LA57, CR3 (X86PageWalker.now). */
void kpemu_x86_walker_now(uc_engine *uc, const struct kpemu_x86_exception *s, struct walker *w);

/* Reads guest-physical memory: RAM in place; elsewhere through the engine unless `ram_only`. 1 when read. */
int kpemu_x86_phys_read(const struct walker *w, uint64_t pa, void *out, size_t len, int ram_only);

/* The physical address of `va` and the size of its page; 0 when a level is not present. */
int kpemu_x86_translate(const struct walker *w, uint64_t va, uint64_t *pa, uint64_t *page_size);

/* Reads a probe hit into the hook's record ring (kpemu_x86_probe_hits.c); 0: the host's to handle. */
int kpemu_x86_record_hit(uc_engine *uc, struct kpemu_x86_exception *s);

#endif
