/*
 * arm64 `svc` from EL0 taken natively. Unicorn reports every synchronous exception to the
 * interrupt hook and never enters the guest's vector; the host takes it as the architecture does
 * (ARM ARM D1.10): ELR_EL1 = the preferred return address (Unicorn leaves PC after the SVC),
 * SPSR_EL1 = PSTATE, PSTATE = EL1h with DAIF masked, SP_EL0 banked and SP_EL1 live, ESR_EL1 = the
 * syndrome QEMU computed (made from the SVC's imm16 as QEMU makes it, or read from a saved context
 * at the host's calibrated offset when the instruction cannot be read), PC =
 * VBAR_EL1 + 0x400 (lower EL, AArch64, synchronous). Done by a Java upcall, every system call of
 * the guest cost an upcall and about fifteen FFM calls.
 *
 * Only an SVC from EL0 whose VBAR_EL1 the host has already verified (`vbar_ok`: the host's own
 * path found that vector mapped in RAM) is taken here; everything else (breakpoints, the
 * kprobes engine's traps, HVC/SMC, an SVC at EL1, a VBAR the host has not checked) goes to the
 * host's hook (`forward`) unchanged.
 *
 * Data and instruction aborts are taken here the same way (Arm64Machine.takeException with the
 * syndrome and FAR QEMU computed, read from a whole saved context at the host's calibrated
 * offsets) while `forward_all` is clear (the host sets it while a trap handler must see every
 * fault) and the PC is outside [owned_low, owned_high) (the trap handler's: the kprobes engine's
 * slot area), from EL0 to the lower-EL vector the host verified (`vbar_ok`) and from EL1 with SP_EL1
 * to the current-EL vector the host verified (`vbar_ok_current`); any other abort (from EL1 on
 * SP_EL0, from AArch32, a VBAR not verified, an abort at the vector itself) goes to the host.
 */
#include "kpemu_arm64_svc.h"

#define EXCP_SWI 2
#define EXCP_PREFETCH_ABORT 3
#define EXCP_DATA_ABORT 4
#define EXCP_BKPT 7
#define FROM_CURRENT_SPX 0x200
#define PSTATE_SPX 1
#define FROM_LOWER_A64 0x400
#define PSTATE_EL1H_MASKED 0x3c5
#define PSTATE_NRW 0x10          /* PSTATE.nRW (M[4]): the exception came from AArch32 */
#define SVC_MASK 0xffe0001fu     /* SVC #imm16: 1101 0100 000 imm16 000 01 */
#define SVC_BITS 0xd4000001u
#define EC_AA64_SVC 0x15u
#define ESR_IL (1u << 25)

size_t kpemu_arm64_svc_size(void) { return sizeof(struct kpemu_arm64_svc); }

static void write_cp(uc_engine *uc, uint32_t op0, uint32_t op1, uint32_t crn, uint32_t crm, uint32_t op2, uint64_t v) {
    uc_arm64_cp_reg r = { .crn = crn, .crm = crm, .op0 = op0, .op1 = op1, .op2 = op2, .val = v };
    uc_reg_write(uc, UC_ARM64_REG_CP_REG, &r);
}

/*
 * The syndrome QEMU gives an AArch64 SVC (translate-a64.c, syn_aa64_svc): EC 0x15, IL set, the
 * instruction's imm16. Read from the SVC itself (the 4 bytes before the preferred return address,
 * through the CPU's own TLB: it was fetched just now), which costs a TLB lookup where saving the
 * whole context to read QEMU's copy copied 12.6 KB. 0 when the bytes cannot be read or are not an
 * SVC; the caller then reads QEMU's copy.
 */
static uint32_t svc_syndrome(uc_engine *uc, uint64_t pc) {
    uint32_t insn = 0;
    if (uc_vmem_read(uc, pc - 4, UC_PROT_EXEC, &insn, 4) != UC_ERR_OK) return 0;
    if ((insn & SVC_MASK) != SVC_BITS) return 0;
    return (EC_AA64_SVC << 26) | ESR_IL | ((insn >> 5) & 0xffffu);
}

/*
 * Exception entry to EL1h, as Arm64Machine.takeException does: the live SP banked (to SP_EL1 from
 * EL1 with SP_EL1 selected, else SP_EL0), ELR_EL1 = `elr`, PSTATE = EL1h masked on SP_EL1,
 * ESR_EL1, FAR_EL1 when `far` is given, SPSR_EL1 = the old PSTATE, PC = `vector`. The PC goes
 * through the context, after every other write (the save must see them): Unicorn's PC write from a
 * hook sets skip_sync_pc_on_exit, which leaves later memory hooks of the run without the pc synced
 * to their instruction (Arm64Machine.setPc).
 */
static void enter_el1(uc_engine *uc, const struct kpemu_arm64_svc *s, uint64_t pstate, int bank_to_el1,
        uint64_t elr, uint32_t syndrome, const uint64_t *far, uint64_t vector) {
    uint64_t sp = 0, sp1 = 0, masked = PSTATE_EL1H_MASKED;
    uc_reg_read(uc, UC_ARM64_REG_SP, &sp);
    uc_reg_write(uc, bank_to_el1 ? UC_ARM64_REG_SP_EL1 : UC_ARM64_REG_SP_EL0, &sp);
    uc_reg_read(uc, UC_ARM64_REG_SP_EL1, &sp1);
    uc_reg_write(uc, UC_ARM64_REG_ELR_EL1, &elr);
    uc_reg_write(uc, UC_ARM64_REG_PSTATE, &masked);
    uc_reg_write(uc, UC_ARM64_REG_SP, &sp1);
    if (far) uc_reg_write(uc, UC_ARM64_REG_FAR_EL1, far);
    write_cp(uc, 3, 0, 5, 2, 0, syndrome);   /* ESR_EL1 */
    write_cp(uc, 3, 0, 4, 0, 0, pstate);     /* SPSR_EL1; the CP write rebuilds the cached flags */
    uc_context_save(uc, s->pc_ctx);
    memcpy((uint8_t *)s->pc_ctx + s->pc, &vector, 8);
    uc_context_restore(uc, s->pc_ctx);
}

/* An abort taken as Arm64Machine.takeException takes it; 0 (nothing changed) when the host must. */
static int take_abort(uc_engine *uc, struct kpemu_arm64_svc *s) {
    uint64_t pstate = 0, vbar = 0, pc = 0;
    uc_reg_read(uc, UC_ARM64_REG_PSTATE, &pstate);
    uc_reg_read(uc, UC_ARM64_REG_VBAR_EL1, &vbar);
    uc_reg_read(uc, UC_ARM64_REG_PC, &pc);
    if ((pstate & PSTATE_NRW) != 0 || vbar == 0) return 0;
    if (pc - s->owned_low < s->owned_high - s->owned_low) return 0;   /* the trap handler's */
    int el = (int)((pstate >> 2) & 3), spx = (pstate & PSTATE_SPX) != 0;
    uint64_t vector;
    if (el == 0 && vbar == s->vbar_ok) vector = vbar + FROM_LOWER_A64;
    else if (el == 1 && spx && vbar == s->vbar_ok_current) vector = vbar + FROM_CURRENT_SPX;
    else return 0;
    if (pc == vector) return 0;   /* the vector faults itself: the host stops the machine */
    uc_context_save(uc, s->ctx);
    uint32_t syndrome;
    uint64_t far;
    memcpy(&syndrome, (uint8_t *)s->ctx + s->syndrome, 4);
    memcpy(&far, (uint8_t *)s->ctx + s->vaddress, 8);
    enter_el1(uc, s, pstate, el == 1 && spx, pc, syndrome, &far, vector);
    return 1;
}

void kpemu_arm64_svc(uc_engine *uc, uint32_t intno, void *user_data) {
    struct kpemu_arm64_svc *s = (struct kpemu_arm64_svc *)user_data;
    if (intno == EXCP_BKPT && s->hits != NULL && s->forward_all == 0 && kpemu_arm64_record_hit(uc, s)) return;
    if ((intno == EXCP_DATA_ABORT || intno == EXCP_PREFETCH_ABORT) && s->forward_all == 0 && take_abort(uc, s)) {
        s->taken++;
        s->aborts++;
        return;
    }
    uint64_t pstate = 0, vbar = 0;
    if (intno == EXCP_SWI) {
        uc_reg_read(uc, UC_ARM64_REG_PSTATE, &pstate);
        uc_reg_read(uc, UC_ARM64_REG_VBAR_EL1, &vbar);
    }
    if (intno != EXCP_SWI || ((pstate >> 2) & 3) != 0 || (pstate & PSTATE_NRW) != 0 || vbar == 0 || vbar != s->vbar_ok) {
        s->forwarded++;
        s->forward(uc, intno, s->forward_data);
        return;
    }
    s->taken++;
    uint64_t pc = 0;
    uc_reg_read(uc, UC_ARM64_REG_PC, &pc);
    uint32_t syndrome = svc_syndrome(uc, pc);
    if (syndrome == 0) {
        s->from_context++;
        uc_context_save(uc, s->ctx);
        memcpy(&syndrome, (uint8_t *)s->ctx + s->syndrome, 4);
    }
    enter_el1(uc, s, pstate, 0, pc, syndrome, NULL, vbar + FROM_LOWER_A64);
}
