/*
 * x86-64 `cmpxchg16b` done natively. Unicorn 2.1.4's helper computes CF/PF/AF/SF/OF from a stale
 * flags operation when an earlier instruction of the same block set the flags (docs/x86-boot-notes.md).
 * kpemu therefore opens its x86 engines with a CPU model whose feature words lack CX16, so the
 * translator raises #UD for every `cmpxchg16b` (the exception's state restore leaves RFLAGS
 * exact and RIP at the instruction), while the guest's CPUID (kpemu's hook) still shows CX16.
 * This invalid-instruction hook runs before the host's: for a `cmpxchg16b m128` it does what
 * the CPU does (Intel SDM vol. 2A, CMPXCHG8B/CMPXCHG16B): #GP(0) unless the operand is 16-byte
 * aligned; compare RDX:RAX with m128; equal: ZF = 1 and m128 = RCX:RBX; else ZF = 0 and
 * RDX:RAX = m128 (the destination is written back either way, as the locked cycle does); the
 * other flags unchanged; RIP past the instruction. Anything else (another #UD, a fault of the
 * operand) returns "not handled" so the host's hook runs; a fault is left in `fault_*` for it.
 *
 * The model also lacks LAHF_LM, so 64-bit `lahf`/`sahf` trap too and are done here (AH <->
 * SF ZF AF PF CF, bit 1 set); the translator checks no other feature bit qemu64 has and it lacks.
 *
 * Atomicity: kpemu runs one engine at a time (its vCPUs take turns on one host thread), so the
 * read-compare-write below cannot interleave with another vCPU.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unicorn/unicorn.h>

#define RFLAGS_ZF (1ull << 6)
#define VEC_GP 13
#define VEC_PF 14
#define PF_P 1u
#define PF_W 2u
#define PF_U 4u

struct kpemu_cmpxchg16b {
    uint64_t handled;       /* instructions done here */
    int32_t fault_vector;   /* -1, or the fault the host must deliver (VEC_GP, VEC_PF) */
    uint32_t fault_error;   /* its error code */
    uint64_t fault_address; /* #PF: CR2 */
    uc_context *ctx;        /* scratch context (a prefix through RIP, allocated by the host) */
    int64_t eip;            /* offset of RIP in the context */
};

size_t kpemu_cmpxchg16b_size(void) { return sizeof(struct kpemu_cmpxchg16b); }

static const int GPR[16] = {
    UC_X86_REG_RAX, UC_X86_REG_RCX, UC_X86_REG_RDX, UC_X86_REG_RBX,
    UC_X86_REG_RSP, UC_X86_REG_RBP, UC_X86_REG_RSI, UC_X86_REG_RDI,
    UC_X86_REG_R8, UC_X86_REG_R9, UC_X86_REG_R10, UC_X86_REG_R11,
    UC_X86_REG_R12, UC_X86_REG_R13, UC_X86_REG_R14, UC_X86_REG_R15,
};

static uint64_t reg(uc_engine *uc, int id) {
    uint64_t v = 0;
    uc_reg_read(uc, id, &v);
    return v;
}

static void set_reg(uc_engine *uc, int id, uint64_t v) { uc_reg_write(uc, id, &v); }

/*
 * RIP past the instruction, through the scratch context, not uc_reg_write: Unicorn 2.1.4's PC
 * write from a hook sets the engine's skip_sync_pc_on_exit, which only a block's exit-request
 * check clears; until then every memory hook of the run sees a stale PC (no cpu_restore_state
 * before UC_HOOK_MEM_WRITE_PROT and the others), so watchpoints reported the wrong instruction.
 * The other registers are written first: the context is saved after them.
 */
static void set_rip(uc_engine *uc, const struct kpemu_cmpxchg16b *s, uint64_t rip) {
    uc_context_save(uc, s->ctx);
    memcpy((uint8_t *)s->ctx + s->eip, &rip, 8);
    uc_context_restore(uc, s->ctx);
}

/* Fetches up to 15 bytes at rip; returns how many could be read. */
static size_t fetch(uc_engine *uc, uint64_t rip, uint8_t *buf) {
    if (uc_vmem_read(uc, rip, UC_PROT_EXEC, buf, 15) == UC_ERR_OK) return 15;
    size_t n = 0;
    while (n < 15 && uc_vmem_read(uc, rip + n, UC_PROT_EXEC, buf + n, 1) == UC_ERR_OK) n++;
    return n;
}

/* Decodes `cmpxchg16b m128` at buf; returns its length and the effective address, or 0. */
static size_t decode(uc_engine *uc, uint64_t rip, const uint8_t *b, size_t n, uint64_t *address) {
    size_t i = 0;
    uint64_t segment_base = 0;
    bool addr32 = false;
    for (; i < n; i++) {
        uint8_t p = b[i];
        if (p == 0xf0 || p == 0xf2 || p == 0xf3 || p == 0x66 || p == 0x2e || p == 0x36 || p == 0x3e || p == 0x26) continue;
        if (p == 0x64) { segment_base = reg(uc, UC_X86_REG_FS_BASE); continue; }
        if (p == 0x65) { segment_base = reg(uc, UC_X86_REG_GS_BASE); continue; }
        if (p == 0x67) { addr32 = true; continue; }
        break;
    }
    uint8_t rex = 0;
    if (i < n && (b[i] & 0xf0) == 0x40) rex = b[i++];
    if (!(rex & 8) || i + 3 > n || b[i] != 0x0f || b[i + 1] != 0xc7) return 0;
    i += 2;
    uint8_t modrm = b[i++];
    int mod = modrm >> 6, regf = (modrm >> 3) & 7, rm = modrm & 7;
    if (mod == 3 || regf != 1) return 0;
    uint64_t ea = 0;
    bool rip_relative = false;
    if (rm == 4) {
        if (i >= n) return 0;
        uint8_t sib = b[i++];
        int scale = sib >> 6, index = ((sib >> 3) & 7) | ((rex & 2) << 2), base = (sib & 7) | ((rex & 1) << 3);
        if (index != 4) ea += reg(uc, GPR[index]) << scale;
        if ((base & 7) == 5 && mod == 0) {
            if (i + 4 > n) return 0;
            int32_t d;
            memcpy(&d, b + i, 4);
            i += 4;
            ea += (int64_t)d;
        } else {
            ea += reg(uc, GPR[base]);
        }
    } else if (rm == 5 && mod == 0) {
        rip_relative = true;
    } else {
        ea += reg(uc, GPR[rm | ((rex & 1) << 3)]);
    }
    if (mod == 1) {
        if (i >= n) return 0;
        ea += (int64_t)(int8_t)b[i++];
    } else if (mod == 2 || rip_relative) {
        if (i + 4 > n) return 0;
        int32_t d;
        memcpy(&d, b + i, 4);
        i += 4;
        ea += (int64_t)d;
    }
    if (rip_relative) ea += rip + i;
    if (addr32) ea &= 0xffffffffull;
    *address = segment_base + ea;
    return i;
}

#define LAHF_FLAGS 0xd5ull /* SF ZF AF PF CF */

/* 64-bit `lahf` (9f) or `sahf` (9e) after prefixes: done, true; anything else: false. */
static bool lahf_sahf(uc_engine *uc, const struct kpemu_cmpxchg16b *s, uint64_t rip, const uint8_t *b, size_t n) {
    size_t i = 0;
    while (i < n && (b[i] == 0x66 || b[i] == 0xf2 || b[i] == 0xf3 || b[i] == 0x2e || b[i] == 0x36 || b[i] == 0x3e
            || b[i] == 0x26 || b[i] == 0x64 || b[i] == 0x65 || b[i] == 0x67 || (b[i] & 0xf0) == 0x40)) i++;
    if (i >= n || (b[i] != 0x9e && b[i] != 0x9f)) return false;
    uint64_t rflags = reg(uc, UC_X86_REG_RFLAGS), rax = reg(uc, UC_X86_REG_RAX);
    if (b[i] == 0x9f) {
        rax = (rax & ~0xff00ull) | (((rflags & LAHF_FLAGS) | 2) << 8);
        set_reg(uc, UC_X86_REG_RAX, rax);
    } else {
        rflags = (rflags & ~LAHF_FLAGS) | ((rax >> 8) & LAHF_FLAGS);
        set_reg(uc, UC_X86_REG_RFLAGS, rflags);
    }
    set_rip(uc, s, rip + i + 1);
    return true;
}

bool kpemu_cmpxchg16b(uc_engine *uc, void *user_data) {
    struct kpemu_cmpxchg16b *s = (struct kpemu_cmpxchg16b *)user_data;
    s->fault_vector = -1;
    uint64_t rip = reg(uc, UC_X86_REG_RIP), address = 0;
    uint8_t code[15];
    size_t n = fetch(uc, rip, code);
    size_t len = decode(uc, rip, code, n, &address);
    if (len == 0) return lahf_sahf(uc, s, rip, code, n);
    if (address & 15) {
        s->fault_vector = VEC_GP;
        s->fault_error = 0;
        return false;
    }
    uint64_t physical = 0;
    if (uc_vmem_translate(uc, address, UC_PROT_WRITE, &physical) != UC_ERR_OK) {
        uint64_t ignored;
        s->fault_vector = VEC_PF;
        s->fault_error = PF_W | ((reg(uc, UC_X86_REG_CS) & 3) == 3 ? PF_U : 0)
                | (uc_vmem_translate(uc, address, UC_PROT_READ, &ignored) == UC_ERR_OK ? PF_P : 0);
        s->fault_address = address;
        return false;
    }
    uint64_t m[2];
    if (uc_mem_read(uc, physical, m, 16) != UC_ERR_OK) return false;
    uint64_t rax = reg(uc, UC_X86_REG_RAX), rdx = reg(uc, UC_X86_REG_RDX);
    uint64_t rflags = reg(uc, UC_X86_REG_RFLAGS);
    if (m[0] == rax && m[1] == rdx) {
        uint64_t n[2] = { reg(uc, UC_X86_REG_RBX), reg(uc, UC_X86_REG_RCX) };
        if (uc_mem_write(uc, physical, n, 16) != UC_ERR_OK) return false;
        rflags |= RFLAGS_ZF;
    } else {
        if (uc_mem_write(uc, physical, m, 16) != UC_ERR_OK) return false;
        set_reg(uc, UC_X86_REG_RAX, m[0]);
        set_reg(uc, UC_X86_REG_RDX, m[1]);
        rflags &= ~RFLAGS_ZF;
    }
    set_reg(uc, UC_X86_REG_RFLAGS, rflags);
    set_rip(uc, s, rip + len);
    s->handled++;
    return true;
}
