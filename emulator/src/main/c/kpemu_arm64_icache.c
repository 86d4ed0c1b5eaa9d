/*
 * arm64 instruction-cache maintenance for kpemu's engines (docs/smp-notes.md, "Code one vCPU
 * writes"): Linux follows every change of code with IC IVAU (by address) or IC IALLU(IS), and
 * kpemu's engine must then run the new code. Unicorn 2.1.4 does not see every store to code as
 * one: a store through another virtual alias of the page (Linux patches its text through the
 * linear map, `lm_alias`, and the fixmap) leaves the engine's translated blocks of the text's own
 * address in place, and the engine runs the old instructions (measured: Debian 13's 6.12 ran
 * fpsimd_thread_switch's boot-time early return after the alternatives had patched it away).
 *
 * This SYS-instruction hook (uc_cb_insn_sys_t shape, CRn 7) drops, on an IC IVAU of an executable
 * address, the engine's own translations of the line at once (an invalidation unlinks the blocks,
 * as QEMU's own self-modifying-code path does from a store); it forwards to the Java hook every IC
 * IALLU / IC IALLUIS (the machine flushes the engine at its next slice boundary, and the other
 * vCPUs' engines), and IC IVAU when `forward_ivau` is set (several vCPUs: the other engines); every
 * other CRn 7 instruction (DC ZVA, DC CVAU, AT, ...) completes as usual, without a Java call.
 * An IC IVAU of a non-executable address (Linux names the linear map's alias of a user page it
 * maps executable) is not dropped here: Unicorn's TB_REMOVE_CACHE translates the address as an
 * instruction fetch, and a fault inside a running engine leaves a pending exception behind
 * (measured: the boot died in __pi_strlen); docs/smp-notes.md, "Code written through an alias".
 */
#include <stdint.h>
#include <unicorn/unicorn.h>

typedef uint32_t (*kpemu_ic_forward_cb)(uc_engine *uc, uc_arm64_reg reg, const uc_arm64_cp_reg *cp_reg, void *user_data);

struct kpemu_ic_filter {
    kpemu_ic_forward_cb forward;  /* the Java hook */
    void *forward_data;           /* its user_data */
    uint64_t line;                /* CTR_EL0.IminLine in bytes */
    int32_t forward_ivau;         /* 1: IC IVAU goes to Java too (after the drop here) */
    uint32_t pad;
};

size_t kpemu_ic_filter_size(void) { return sizeof(struct kpemu_ic_filter); }

uint32_t kpemu_ic_filter(uc_engine *uc, uc_arm64_reg reg, const uc_arm64_cp_reg *cp, void *user_data) {
    struct kpemu_ic_filter *f = (struct kpemu_ic_filter *)user_data;
    if (cp->crn != 7) return 0;
    if (cp->op1 == 3 && cp->crm == 5 && cp->op2 == 1) {            /* IC IVAU, Xt */
        uint64_t va = 0, pa;
        if (reg != UC_ARM64_REG_XZR) uc_reg_read(uc, reg, &va);
        va &= ~(f->line - 1);
        /* only an executable address: TB_REMOVE_CACHE translates it as a fetch, and a fault there
           would leave an exception pending in the running engine (the probe below raises none) */
        if (uc_vmem_translate(uc, va, UC_PROT_EXEC, &pa) == UC_ERR_OK) uc_ctl_remove_cache(uc, va, va + f->line);
        return f->forward_ivau ? f->forward(uc, reg, cp, f->forward_data) : 0;
    }
    if (cp->op1 == 0 && cp->op2 == 0 && (cp->crm == 1 || cp->crm == 5))     /* IC IALLUIS, IC IALLU */
        return f->forward(uc, reg, cp, f->forward_data);
    return 0;
}
