/*
 * arm64 `svc` from EL0 taken natively. Unicorn reports every synchronous exception to the
 * interrupt hook and never enters the guest's vector; the host takes it as the architecture does
 * (ARM ARM D1.10): ELR_EL1 = the preferred return address (Unicorn leaves PC after the SVC),
 * SPSR_EL1 = PSTATE, PSTATE = EL1h with DAIF masked, SP_EL0 banked and SP_EL1 live, ESR_EL1 = the
 * syndrome QEMU computed (read from a saved context at the host's calibrated offset), PC =
 * VBAR_EL1 + 0x400 (lower EL, AArch64, synchronous). Done by a Java upcall, every system call of
 * the guest cost an upcall and about fifteen FFM calls.
 *
 * Only an SVC from EL0 whose VBAR_EL1 the host has already verified (`vbar_ok`: the host's own
 * path found that vector mapped in RAM) is taken here; everything else (aborts, breakpoints, the
 * kprobes engine's traps, HVC/SMC, an SVC at EL1, a VBAR the host has not checked) goes to the
 * host's hook (`forward`) unchanged.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unicorn/unicorn.h>

#define EXCP_SWI 2
#define FROM_LOWER_A64 0x400
#define PSTATE_EL1H_MASKED 0x3c5

typedef void (*kpemu_intr_cb)(uc_engine *uc, uint32_t intno, void *user_data);

struct kpemu_arm64_svc {
    uc_context *ctx;          /* scratch context (uc_context_alloc'd by the host) */
    int64_t syndrome;         /* offset of QEMU's exception syndrome in the context */
    uint64_t vbar_ok;         /* VBAR_EL1 whose lower-EL vector the host verified; 0: none yet */
    kpemu_intr_cb forward;    /* the host's interrupt hook */
    void *forward_data;
    uint64_t taken;           /* SVCs taken here */
    uint64_t forwarded;       /* exceptions passed to `forward` */
};

size_t kpemu_arm64_svc_size(void) { return sizeof(struct kpemu_arm64_svc); }

static void write_cp(uc_engine *uc, uint32_t op0, uint32_t op1, uint32_t crn, uint32_t crm, uint32_t op2, uint64_t v) {
    uc_arm64_cp_reg r = { .crn = crn, .crm = crm, .op0 = op0, .op1 = op1, .op2 = op2, .val = v };
    uc_reg_write(uc, UC_ARM64_REG_CP_REG, &r);
}

void kpemu_arm64_svc(uc_engine *uc, uint32_t intno, void *user_data) {
    struct kpemu_arm64_svc *s = (struct kpemu_arm64_svc *)user_data;
    uint64_t pstate = 0, vbar = 0;
    if (intno == EXCP_SWI) {
        uc_reg_read(uc, UC_ARM64_REG_PSTATE, &pstate);
        uc_reg_read(uc, UC_ARM64_REG_VBAR_EL1, &vbar);
    }
    if (intno != EXCP_SWI || ((pstate >> 2) & 3) != 0 || vbar == 0 || vbar != s->vbar_ok) {
        s->forwarded++;
        s->forward(uc, intno, s->forward_data);
        return;
    }
    s->taken++;
    uc_context_save(uc, s->ctx);
    uint32_t syndrome;
    memcpy(&syndrome, (uint8_t *)s->ctx + s->syndrome, 4);
    uint64_t pc = 0, sp = 0, sp1 = 0;
    uc_reg_read(uc, UC_ARM64_REG_PC, &pc);
    uc_reg_read(uc, UC_ARM64_REG_SP, &sp);
    uc_reg_write(uc, UC_ARM64_REG_SP_EL0, &sp);
    uc_reg_read(uc, UC_ARM64_REG_SP_EL1, &sp1);
    uint64_t masked = PSTATE_EL1H_MASKED, vector = vbar + FROM_LOWER_A64;
    uc_reg_write(uc, UC_ARM64_REG_ELR_EL1, &pc);
    uc_reg_write(uc, UC_ARM64_REG_PSTATE, &masked);
    uc_reg_write(uc, UC_ARM64_REG_SP, &sp1);
    write_cp(uc, 3, 0, 5, 2, 0, syndrome);   /* ESR_EL1 */
    write_cp(uc, 3, 0, 4, 0, 0, pstate);     /* SPSR_EL1; the CP write rebuilds the cached flags */
    uc_reg_write(uc, UC_ARM64_REG_PC, &vector);
}
