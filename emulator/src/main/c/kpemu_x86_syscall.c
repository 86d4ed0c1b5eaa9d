/*
 * x86-64 `syscall` done natively. Unicorn 2.1.4's helper_syscall only calls the UC_HOOK_INSN
 * hooks and steps over the instruction; the host does what the CPU does (Intel SDM vol. 2B,
 * SYSCALL): RCX = the next RIP, R11 = RFLAGS, CS and SS from IA32_STAR[47:32] (flat 64-bit code,
 * flat data, CPL 0), RFLAGS &= ~IA32_FMASK (and RF cleared), RIP = IA32_LSTAR. Done by a Java
 * upcall, every system call of the guest cost an upcall and a dozen FFM calls; this hook does the
 * same register work in C and calls the host (`forward`, a Java upcall) only when EFER.SCE is
 * clear, where the CPU raises #UD and the host delivers it.
 *
 * The CPL lives in QEMU's hflags and the segment caches, which no Unicorn register write reaches
 * in 64-bit mode, so they are edited in a saved context (`ctx`, allocated by the host) at offsets
 * the host calibrated on a throwaway engine (X86ContextLayout), as the Java path does.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unicorn/unicorn.h>

#define MSR_EFER 0xc0000080u
#define MSR_STAR 0xc0000081u
#define MSR_LSTAR 0xc0000082u
#define MSR_FMASK 0xc0000084u
#define RFLAGS_RF (1ull << 16)

typedef void (*kpemu_syscall_cb)(uc_engine *uc, void *user_data);

struct kpemu_syscall {
    uc_context *ctx;          /* scratch context (uc_context_alloc'd by the host) */
    int64_t hflags;           /* offset of hflags in the context */
    int64_t cs_cache, ss_cache; /* offsets of the CS and SS segment caches */
    int32_t seg_selector, seg_base, seg_limit, seg_flags; /* offsets within a segment cache */
    uint32_t hf_cpl_mask;     /* CPL bits of hflags */
    uint32_t code64_flags;    /* segment-cache flags of flat 64-bit code (DPL 0) */
    uint32_t data_flags;      /* segment-cache flags of flat data (DPL 0) */
    uint32_t pad;
    kpemu_syscall_cb forward; /* the host's hook: #UD when EFER.SCE is clear */
    void *forward_data;
    uint64_t calls;           /* syscalls done here */
    uint64_t forwarded;       /* syscalls passed to `forward` */
    int64_t eip;              /* offset of RIP in the context */
};

size_t kpemu_syscall_size(void) { return sizeof(struct kpemu_syscall); }

static uint64_t msr(uc_engine *uc, uint32_t id) {
    uc_x86_msr m = { .rid = id, .value = 0 };
    uc_reg_read(uc, UC_X86_REG_MSR, &m);
    return m.value;
}

static void set_segment(uint8_t *ctx, const struct kpemu_syscall *s, int64_t cache, uint32_t selector, uint32_t flags) {
    uint64_t base = 0;
    uint32_t limit = 0xffffffffu;
    memcpy(ctx + cache + s->seg_selector, &selector, 4);
    memcpy(ctx + cache + s->seg_base, &base, 8);
    memcpy(ctx + cache + s->seg_limit, &limit, 4);
    memcpy(ctx + cache + s->seg_flags, &flags, 4);
}

void kpemu_syscall(uc_engine *uc, void *user_data) {
    struct kpemu_syscall *s = (struct kpemu_syscall *)user_data;
    if ((msr(uc, MSR_EFER) & 1) == 0) {
        s->forwarded++;
        s->forward(uc, s->forward_data);
        return;
    }
    s->calls++;
    uint64_t rip = 0, rflags = 0;
    uc_reg_read(uc, UC_X86_REG_RIP, &rip);
    uc_reg_read(uc, UC_X86_REG_RFLAGS, &rflags);
    uint64_t star = msr(uc, MSR_STAR), lstar = msr(uc, MSR_LSTAR), fmask = msr(uc, MSR_FMASK);
    uint64_t rcx = rip + 2;
    uc_reg_write(uc, UC_X86_REG_RCX, &rcx);
    uc_reg_write(uc, UC_X86_REG_R11, &rflags);
    uint32_t cs = (uint32_t)((star >> 32) & 0xfffc);
    uint8_t *ctx = (uint8_t *)s->ctx;
    uc_context_save(uc, s->ctx);
    set_segment(ctx, s, s->cs_cache, cs, s->code64_flags);
    set_segment(ctx, s, s->ss_cache, cs + 8, s->data_flags);
    uint32_t hf;
    memcpy(&hf, ctx + s->hflags, 4);
    hf &= ~s->hf_cpl_mask;
    memcpy(ctx + s->hflags, &hf, 4);
    /* RIP through the context too: Unicorn's RIP write would make the engine leave its execution
       loop and enter it again, and after this hook the block ends and the next one is looked up
       from RIP anyway. Unicorn adds the instruction's length after the hook. */
    uint64_t target = lstar - 2;
    memcpy(ctx + s->eip, &target, 8);
    uc_context_restore(uc, s->ctx);
    uint64_t flags = rflags & ~fmask & ~RFLAGS_RF;
    uc_reg_write(uc, UC_X86_REG_RFLAGS, &flags);   /* after the restore, which rewrites the saved flags */
}
