/*
 * arm64 probe hits recorded natively: what kpemu_x86_probe_hits.c does at an int3, done at a BRK
 * (the site table, the records and their words: kpemu_probe_hits.h). A kprobe event whose
 * handlers only read registers and the context columns needs nothing from the host at the hit
 * but those values: this code reads them at the BRK as the host's Java path reads them there
 * (the pt_regs registers and SP_EL0, the kernel's `current`; the task's pid, comm and the latency
 * column's words through the hit's page tables as Arm64PageWalker walks them, RAM only, kernel
 * addresses only), with the kernel and user memory the site's reads plan (user memory through
 * TTBR0_EL1's tables, pages EL0 may read, below TASK_SIZE_MAX), appends them to the ring, and
 * resumes the guest where the host's hit path would (the site's boosted copy). No Java upcall.
 *
 * Everything else is the host's, unchanged: a BRK at an address not in the site table, any BRK
 * while `enabled` is 0 or `busy`, while the hook forwards every abort (`forward_all`: a trap
 * handler must see every fault), when the ring is full, at EL0.
 */
#include "kpemu_arm64_svc.h"
#include "kpemu_probe_hits.h"

#define PAGE_SIZE 4096ull
#define OA_MASK 0x0000fffffffff000ull
#define TTBR_BADDR_MASK 0x0000fffffffffffeull
/* TASK_SIZE_MAX: user addresses lie below it, kernel ones from it (MachineFetchContext.userRange, kernelAddress) */
#define USER_MAX (1ull << 48)

/* The hit's translation registers and RAM (Arm64PageWalker's snapshot). */
struct arm64_walker {
    const struct kpemu_arm64_svc *s;
    uint64_t sctlr, tcr, ttbr0, ttbr1;
    int ttbr0_read;             /* ttbr0 read (at the hit's first user read) */
    uc_engine *uc;
    struct kpemu_hit_tlb tlb;   /* the pages walked so far in this hit: kernel pages, and user pages EL0 may read */
};

static uint64_t read_cp(uc_engine *uc, uint32_t op0, uint32_t op1, uint32_t crn, uint32_t crm, uint32_t op2) {
    uc_arm64_cp_reg r = { .crn = crn, .crm = crm, .op0 = op0, .op1 = op1, .op2 = op2, .val = 0 };
    uc_reg_read(uc, UC_ARM64_REG_CP_REG, &r);
    return r.val;
}

/* The host memory of guest-physical [pa, pa + len) when it lies in one RAM region; NULL otherwise. */
static const uint8_t *ram_at(const struct kpemu_arm64_svc *s, uint64_t pa, uint64_t len) {
    for (uint32_t i = 0; i < s->ram_count; i++) {
        const struct kpemu_arm64_ram *r = &s->ram[i];
        if (pa >= r->base && pa < r->end && len <= r->end - pa) return r->host + (pa - r->base);
    }
    return NULL;
}

/* Arm64PageWalker.translate: the physical address and the size of `va`'s page or block, through
   TTBR1_EL1 (`upper`) or TTBR0_EL1, and whether EL0 may read it; 0 when the walk fails. */
static int walk(const struct arm64_walker *w, uint64_t va, int upper, uint64_t *pa, uint64_t *size, int *user);

/* walk for an upper-half (TTBR1_EL1) address. */
static int walk_upper(const struct arm64_walker *w, uint64_t va, uint64_t *pa, uint64_t *size) {
    int user;
    return walk(w, va, 1, pa, size, &user);
}

/* walk_upper through the hit's pages walked so far. */
static int translate_upper(const void *walker, uint64_t va, uint64_t *pa, uint64_t *size) {
    struct arm64_walker *w = (struct arm64_walker *)walker;
    if ((w->sctlr & 1) != 0 && kpemu_hit_tlb_find(&w->tlb, va, pa, size)) return 1;
    if (!walk_upper(w, va, pa, size)) return 0;
    if ((w->sctlr & 1) != 0) kpemu_hit_tlb_keep(&w->tlb, va, *pa, *size);
    return 1;
}

/* A user page's walk through the hit's pages walked so far: only pages EL0 may read are kept. */
static int translate_user(const void *walker, uint64_t va, uint64_t *pa, uint64_t *size) {
    struct arm64_walker *w = (struct arm64_walker *)walker;
    if ((w->sctlr & 1) != 0 && kpemu_hit_tlb_find(&w->tlb, va, pa, size)) return 1;
    if (!w->ttbr0_read) {
        if (uc_reg_read(w->uc, UC_ARM64_REG_TTBR0_EL1, &w->ttbr0) != UC_ERR_OK) return 0;
        w->ttbr0_read = 1;
    }
    int user;
    if (!walk(w, va, 0, pa, size, &user) || !user) return 0;
    if ((w->sctlr & 1) != 0) kpemu_hit_tlb_keep(&w->tlb, va, *pa, *size);
    return 1;
}

static int walk(const struct arm64_walker *w, uint64_t va, int upper, uint64_t *pa, uint64_t *size, int *user) {
    *user = 1;
    if ((w->sctlr & 1) == 0) { *pa = va; *size = PAGE_SIZE; return 1; }
    if ((int)((va >> 55) & 1) != upper) return 0;
    int tsz = (int)(upper ? (w->tcr >> 16) & 0x3f : w->tcr & 0x3f);
    int epd = (int)((w->tcr >> (upper ? 23 : 7)) & 1), tbi = (int)((w->tcr >> (upper ? 38 : 37)) & 1);
    int tg = (int)(upper ? (w->tcr >> 30) & 3 : (w->tcr >> 14) & 3);
    if (epd || tg != (upper ? 2 : 0)) return 0;     /* walks off, or not the 4 KiB granule */
    if (tsz < 16) tsz = 16;
    int va_bits = 64 - tsz, check_top = tbi ? 56 : 64;
    if (check_top > va_bits) {
        int64_t field = (int64_t)(va << (64 - check_top)) >> (64 - check_top + va_bits);
        if (field != (upper ? -1 : 0)) return 0;
    }
    int start = 3 - (va_bits - 12 - 1) / 9;
    uint64_t table = (upper ? w->ttbr1 : w->ttbr0) & TTBR_BADDR_MASK;
    int no_el0 = 0;                         /* APTable[1] on the way down: EL0 may not read below it */
    for (int level = start; level <= 3; level++) {
        int shift = 12 + 9 * (3 - level);
        int bits = level == start ? va_bits - shift : 9;
        uint64_t index = (va >> shift) & ((1ull << bits) - 1);
        const uint8_t *p = ram_at(w->s, table + index * 8, 8);
        if (p == NULL) return 0;
        uint64_t d;
        memcpy(&d, p, 8);
        if ((d & 1) == 0) return 0;
        int table_or_page = (d & 2) != 0;
        if (level < 3 && table_or_page) {
            no_el0 |= (int)((d >> 61) & 1);
            table = d & OA_MASK;
            continue;
        }
        if (level == 3 && !table_or_page) return 0;
        if (level == 0) return 0;
        uint64_t sz = 1ull << shift;
        *pa = (d & OA_MASK & ~(sz - 1)) | (va & (sz - 1));
        *size = sz;
        *user = (int)((d >> 6) & 1) && !no_el0;     /* AP[1]: EL0 may access */
        return 1;
    }
    return 0;
}

static int phys_read(const void *walker, uint64_t pa, uint8_t *out, uint32_t len) {
    const uint8_t *p = ram_at(((const struct arm64_walker *)walker)->s, pa, len);
    if (p == NULL) return 0;
    memcpy(out, p, len);
    return 1;
}

/* Reads `len` bytes of kernel-virtual `va` (RAM only); 0 when the host's read would fail. */
static int read_kernel(const void *walker, uint64_t va, uint8_t *out, uint32_t len) {
    if (va < USER_MAX) return 0;
    return kpemu_hits_read_pages(walker, va, out, len, translate_upper, phys_read);
}

/* Reads `len` bytes of user-virtual `va` through TTBR0_EL1's tables (RAM only, pages EL0 may read)
   as the host's user read does (the whole range up to TASK_SIZE_MAX); 0 when it would fail. */
static int read_user(const void *walker, uint64_t va, uint8_t *out, uint32_t len) {
    if (va > USER_MAX || len > USER_MAX - va) return 0;
    return kpemu_hits_read_pages(walker, va, out, len, translate_user, phys_read);
}

size_t kpemu_arm64_record_hit_size(void) { return sizeof(struct kpemu_probe_hits); }

int kpemu_arm64_record_hit(uc_engine *uc, struct kpemu_arm64_svc *s) {
    struct kpemu_probe_hits *h = s->hits;
    if (h->enabled == 0 || h->busy != 0 || h->count >= h->capacity) return 0;
    uint64_t pc = 0;
    uc_reg_read(uc, UC_ARM64_REG_PC, &pc);       /* Unicorn reports BRK with the PC at it */
    int64_t site = kpemu_hits_site(h, pc);
    int at_return = site < 0 && h->kret_table != NULL && pc == h->trampoline;
    if (site < 0 && !at_return) return 0;
    uint64_t *regs = kpemu_hits_read_registers(uc, h);
    if (regs == NULL || ((regs[h->mode_index] >> 2) & 3) == 0) return 0;   /* EL0: the host's */
    struct arm64_walker w = { .s = s, .uc = uc };
    w.sctlr = read_cp(uc, 3, 0, 1, 0, 0);
    w.tcr = read_cp(uc, 3, 0, 2, 0, 2);
    uc_reg_read(uc, UC_ARM64_REG_TTBR1_EL1, &w.ttbr1);
    if (at_return) return kpemu_hits_return(uc, h, regs, read_kernel, &w);
    if (!kpemu_hits_site_reads(h, regs, (uint32_t)site, read_kernel, read_user, &w)) return 0;
    kpemu_hits_complete(h, regs, (uint32_t)site, read_kernel, &w);
    kpemu_hits_resume(uc, h, h->site_resume[site]);
    return 1;
}
