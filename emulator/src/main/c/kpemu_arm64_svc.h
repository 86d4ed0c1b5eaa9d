/*
 * What kpemu_arm64_svc.c shares with kpemu_arm64_probe_hits.c: the interrupt hook's state, laid
 * out as NativeSvc writes it.
 */
#ifndef KPEMU_ARM64_SVC_H
#define KPEMU_ARM64_SVC_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unicorn/unicorn.h>

#define ARM64_RAM_REGIONS 4

struct kpemu_probe_hits;

struct kpemu_arm64_ram {
    uint64_t base, end;       /* guest-physical [base, end) */
    uint8_t *host;            /* its host memory */
};

typedef void (*kpemu_intr_cb)(uc_engine *uc, uint32_t intno, void *user_data);

struct kpemu_arm64_svc {
    uc_context *ctx;          /* scratch context (uc_context_alloc'd by the host) */
    int64_t syndrome;         /* offset of QEMU's exception syndrome in the context */
    uint64_t vbar_ok;         /* VBAR_EL1 whose lower-EL vector the host verified; 0: none yet */
    kpemu_intr_cb forward;    /* the host's interrupt hook */
    void *forward_data;
    uint64_t taken;           /* SVCs taken here */
    uint64_t forwarded;       /* exceptions passed to `forward` */
    uint64_t from_context;    /* SVCs whose syndrome was read from a saved context */
    uc_context *pc_ctx;       /* a context through the PC only (allocated by the host) */
    int64_t pc;               /* offset of the PC in it */
    int64_t vaddress;         /* offset of QEMU's fault address in the whole context */
    uint64_t vbar_ok_current; /* VBAR_EL1 whose current-EL (SP_EL1) vector the host verified; 0: none yet */
    uint32_t forward_all;     /* nonzero: every abort goes to `forward` */
    uint32_t pad;
    uint64_t aborts;          /* aborts taken here (also counted in `taken`) */
    uint64_t owned_low, owned_high; /* aborts with PC in [owned_low, owned_high) go to `forward` */
    struct kpemu_probe_hits *hits;  /* probe hits recorded here (kpemu_arm64_probe_hits.c); NULL: none */
    uint32_t ram_count;       /* entries of `ram` in use */
    uint32_t pad_ram;
    struct kpemu_arm64_ram ram[ARM64_RAM_REGIONS];
};

/* Reads a probe hit into the hook's record ring (kpemu_arm64_probe_hits.c); 0: the host's to handle. */
int kpemu_arm64_record_hit(uc_engine *uc, struct kpemu_arm64_svc *s);

#endif
