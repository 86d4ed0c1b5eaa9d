/*
 * x86-64 faults delivered natively. Unicorn 2.1.4 reports every exception to the interrupt hook
 * and never enters the guest's IDT; the host delivers it as the CPU does in 64-bit mode (Intel SDM
 * vol. 3A, 6.14): the gate from the IDT, the stack (the gate's IST entry of the TSS, RSP0..2 of
 * the TSS on a privilege change, else the current one, aligned down to 16), SS, RSP, RFLAGS, CS,
 * RIP and the error code pushed, TF, NT, RF and VM cleared (IF too for an interrupt gate), CS and
 * the CPL from the gate's selector, RIP = the gate's offset. Done by the Java hook
 * (X86Machine.onException and deliver), every page fault of the guest cost an upcall, a whole
 * context save and restore, and some twenty FFM calls and page walks; this hook does the same work
 * in C, step for step, and leaves to the host (`forward`, the Java hook) everything else:
 *
 *  - every vector not in `native_vectors` (the host sets #DE and the faults with an error code
 *    except #DF: #TS, #NP, #SS, #GP, #PF, #AC); int3, #DB, #UD, NMI, #DF, software interrupts
 *    and external interrupts never come here natively;
 *  - everything while `forward_all` is set: the host sets it while a consumer must see each
 *    fault (exceptions traced, a trap handler that owns every fault, the kprobes engine while
 *    guest writes to probed text wait to be synced);
 *  - a fault whose RIP is in [owned_low, owned_high): the trap handler's (the kprobes engine's
 *    slot area: single steps, boosted copies, detours);
 *  - a fault whose frame would be written into guest-physical [frame_low, frame_high): the pages
 *    of guarded text, whose expected bytes the host's writes update;
 *  - any delivery the host would end in an error or cannot do the common way: a vector beyond
 *    the IDT limit, an unmapped IDT, GDT, TSS or stack, a gate not present (the host then stops
 *    the machine with its message). The decision is taken before anything is changed, so the host
 *    starts from the same state.
 *
 * Guest-virtual addresses are translated as the host's page walker does (X86PageWalker: 4 or 5
 * levels from CR3, 2 MiB and 1 GiB pages, permissions ignored, no accessed or dirty bits set);
 * page tables and descriptors are read from RAM in place (the host's table of its RAM regions,
 * `ram`) or through the engine outside it; the frame is written through the engine
 * (uc_mem_write), as the host writes it.
 *
 * QEMU's "exception in flight" marker and the error code it computed, the segment caches, hflags'
 * CPL and RIP are edited in a saved context at the host's calibrated offsets (X86ContextLayout).
 */
#include <string.h>
#include "kpemu_x86_exception.h"

#define RFLAGS_TF (1ull << 8)
#define RFLAGS_IF (1ull << 9)
#define RFLAGS_NT (1ull << 14)
#define RFLAGS_RF (1ull << 16)
#define RFLAGS_VM (1ull << 17)
#define VEC_DE 0
#define GATE_INTERRUPT 0xe
#define DESC_DPL_SHIFT 13
#define CR0_PG (1ull << 31)
#define CR4_LA57 (1ull << 12)
#define PTE_PRESENT 1ull
#define PTE_LARGE (1ull << 7)
#define PTE_ADDR 0x000ffffffffff000ull

size_t kpemu_x86_exception_size(void) { return sizeof(struct kpemu_x86_exception); }

int kpemu_x86_phys_read(const struct walker *w, uint64_t pa, void *out, size_t len, int ram_only) {
    const struct kpemu_x86_exception *s = w->s;
    for (uint32_t i = 0; i < s->ram_count && i < RAM_REGIONS; i++) {
        const struct kpemu_ram *r = &s->ram[i];
        if (pa >= r->base && pa < r->end) {
            if (len > r->end - pa) break;
            memcpy(out, r->host + (pa - r->base), len);
            return 1;
        }
    }
    return !ram_only && uc_mem_read(w->uc, pa, out, len) == UC_ERR_OK;
}

static int phys_read(const struct walker *w, uint64_t pa, void *out, size_t len) {
    return kpemu_x86_phys_read(w, pa, out, len, 0);
}

int kpemu_x86_translate(const struct walker *w, uint64_t va, uint64_t *pa, uint64_t *page_size) {
    if (!w->paging) {
        *pa = va;
        *page_size = 1ull << 30;
        return 1;
    }
    uint64_t table = w->cr3 & PTE_ADDR;
    for (int level = w->la57 ? 5 : 4; level >= 1; level--) {
        int shift = 12 + 9 * (level - 1);
        uint64_t entry;
        if (!phys_read(w, table + ((va >> shift) & 0x1ff) * 8, &entry, 8)) return 0;
        if ((entry & PTE_PRESENT) == 0) return 0;
        if (level == 1 || ((level == 2 || level == 3) && (entry & PTE_LARGE) != 0)) {
            uint64_t size = 1ull << shift;
            *pa = (entry & PTE_ADDR & ~(size - 1)) | (va & (size - 1));
            *page_size = size;
            return 1;
        }
        table = entry & PTE_ADDR;
    }
    return 0;
}

/* Reads guest-virtual memory page by page (Machine.readVirtual); 0 when unmapped. */
void kpemu_x86_walker_now(uc_engine *uc, const struct kpemu_x86_exception *s, struct walker *w) {
    uint64_t cr0 = 0, cr4 = 0, cr3 = 0;
    uc_reg_read(uc, UC_X86_REG_CR0, &cr0);
    uc_reg_read(uc, UC_X86_REG_CR4, &cr4);
    uc_reg_read(uc, UC_X86_REG_CR3, &cr3);
    w->uc = uc;
    w->s = s;
    w->cr3 = cr3;
    w->paging = (cr0 & CR0_PG) != 0;
    w->la57 = (cr4 & CR4_LA57) != 0;
}

static int translate(const struct walker *w, uint64_t va, uint64_t *pa, uint64_t *page_size) {
    return kpemu_x86_translate(w, va, pa, page_size);
}

static int virt_read(const struct walker *w, uint64_t va, void *out, size_t len) {
    uint8_t *o = out;
    size_t done = 0;
    while (done < len) {
        uint64_t a = va + done, pa, size;
        if (!translate(w, a, &pa, &size)) return 0;
        size_t n = len - done, room = size - (a & (size - 1));
        if (n > room) n = room;
        if (!phys_read(w, pa, o + done, n)) return 0;
        done += n;
    }
    return 1;
}

static void set_segment(uint8_t *ctx, const struct kpemu_x86_exception *s, int64_t cache, uint32_t selector, uint32_t limit, uint32_t flags) {
    uint64_t base = 0;
    memcpy(ctx + cache + s->seg_selector, &selector, 4);
    memcpy(ctx + cache + s->seg_base, &base, 8);
    memcpy(ctx + cache + s->seg_limit, &limit, 4);
    memcpy(ctx + cache + s->seg_flags, &flags, 4);
}

/* The DPL of the code segment `selector` names (X86Machine.codeSegmentDpl); -1 when its descriptor is unmapped. */
static int code_segment_dpl(const struct walker *w, uint32_t selector) {
    uc_x86_mmr gdtr;
    uc_reg_read(w->uc, UC_X86_REG_GDTR, &gdtr);
    uint32_t index = selector & ~7u;
    if (index == 0 || (uint64_t)index + 7 > gdtr.limit) return selector & 3;
    uint64_t desc;
    if (!virt_read(w, gdtr.base + index, &desc, 8)) return -1;
    return (int)((desc >> 45) & 3);
}

/* Delivers `vector` as X86Machine.onException and deliver do; 0 (nothing changed) when the host must. */
static int deliver(uc_engine *uc, struct kpemu_x86_exception *s, uint32_t vector) {
    uint8_t *ctx = (uint8_t *)s->ctx;
    uint64_t rip = 0;
    uc_reg_read(uc, UC_X86_REG_RIP, &rip);
    if (rip - s->owned_low < s->owned_high - s->owned_low) return 0;   /* the trap handler's */
    uc_x86_mmr idtr;
    uc_reg_read(uc, UC_X86_REG_IDTR, &idtr);
    if ((uint64_t)vector * 16 + 15 > idtr.limit) return 0;
    struct walker w;
    kpemu_x86_walker_now(uc, s, &w);
    uint64_t gate[2];
    if (!virt_read(&w, idtr.base + (uint64_t)vector * 16, gate, 16)) return 0;
    uint64_t lo = gate[0], hi = gate[1];
    if (((lo >> 47) & 1) == 0) return 0;
    uint64_t target = (lo & 0xffff) | ((lo >> 32) & 0xffff0000ull) | (hi << 32);
    uint32_t selector = (uint32_t)((lo >> 16) & 0xffff);
    uint32_t ist = (uint32_t)((lo >> 32) & 7);
    uint32_t type = (uint32_t)((lo >> 40) & 0xf);

    uint64_t rsp = 0, rflags = 0, cs = 0, ss = 0;
    uc_reg_read(uc, UC_X86_REG_RSP, &rsp);
    uc_reg_read(uc, UC_X86_REG_RFLAGS, &rflags);
    uc_reg_read(uc, UC_X86_REG_CS, &cs);
    uc_reg_read(uc, UC_X86_REG_SS, &ss);
    cs &= 0xffff;
    ss &= 0xffff;
    int cpl = (int)(ss & 3);
    int dpl = code_segment_dpl(&w, selector);
    if (dpl < 0) return 0;
    uint64_t new_rsp = rsp;
    if (ist != 0 || dpl < cpl) {
        uc_x86_mmr tr;
        uc_reg_read(uc, UC_X86_REG_TR, &tr);
        uint64_t at = ist != 0 ? tr.base + 0x24 + 8ull * (ist - 1) : tr.base + 4 + 8ull * (uint64_t)dpl;
        if (!virt_read(&w, at, &new_rsp, 8)) return 0;
    }
    new_rsp &= ~0xfull;

    /* QEMU's error code, read before the context is changed (onException). */
    int has_error = vector != VEC_DE;
    int32_t err = 0;
    memcpy(&err, ctx + s->error_code, 4);
    uint64_t frame[6];
    int n = 0;
    if (has_error) frame[n++] = (uint32_t)err;
    frame[n++] = rip;
    frame[n++] = cs;
    frame[n++] = rflags;
    frame[n++] = rsp;
    frame[n++] = ss;
    new_rsp -= 8ull * (uint64_t)n;
    /* Every slot's page is translated before the first write: a frame the host cannot write whole
       is the host's (it writes what it can and stops the machine). */
    uint64_t pa[6];
    for (int i = 0; i < n; i++) {
        uint64_t size;
        if (!translate(&w, new_rsp + 8ull * (uint64_t)i, &pa[i], &size)) return 0;
        if (((new_rsp + 8ull * (uint64_t)i) & (size - 1)) > size - 8) return 0;   /* a slot across pages: the host's */
        if (pa[i] + 8 > s->frame_low && pa[i] < s->frame_high) return 0;          /* guarded text: the host's */
    }
    for (int i = 0; i < n;) {   /* runs of slots contiguous in guest-physical memory, one write each */
        int j = i + 1;
        while (j < n && pa[j] == pa[j - 1] + 8) j++;
        if (uc_mem_write(uc, pa[i], &frame[i], 8u * (uint32_t)(j - i)) != UC_ERR_OK) return 0;
        i = j;
    }

    uint64_t new_flags = rflags & ~(RFLAGS_TF | RFLAGS_NT | RFLAGS_RF | RFLAGS_VM);
    if (type == GATE_INTERRUPT) new_flags &= ~RFLAGS_IF;
    int32_t none = -1;
    memcpy(ctx + s->old_exception, &none, 4);
    if (dpl != cpl) {
        /* SS becomes the null selector with RPL = the new CPL, as the CPU does in 64-bit mode */
        set_segment(ctx, s, s->cs_cache, selector, 0xffffffffu, s->code64_flags | ((uint32_t)dpl << DESC_DPL_SHIFT));
        set_segment(ctx, s, s->ss_cache, (uint32_t)dpl, 0, (uint32_t)dpl << DESC_DPL_SHIFT);
        uint32_t hf;
        memcpy(&hf, ctx + s->hflags, 4);
        hf = (hf & ~s->hf_cpl_mask) | (uint32_t)dpl;
        memcpy(ctx + s->hflags, &hf, 4);
    }
    /* RIP through the context: Unicorn's RIP write would make the engine leave its execution loop
       and enter it again (X86Machine.setPc) */
    memcpy(ctx + s->eip, &target, 8);
    uc_context_restore(uc, s->ctx);
    if (dpl == cpl && selector != cs) {
        uint64_t sel = selector;
        uc_reg_write(uc, UC_X86_REG_CS, &sel);
    }
    uc_reg_write(uc, UC_X86_REG_RSP, &new_rsp);
    uc_reg_write(uc, UC_X86_REG_RFLAGS, &new_flags);
    return 1;
}

void kpemu_x86_exception(uc_engine *uc, uint32_t intno, void *user_data) {
    struct kpemu_x86_exception *s = (struct kpemu_x86_exception *)user_data;
    if (intno == 3 && s->hits != NULL && s->forward_all == 0 && kpemu_x86_record_hit(uc, s)) return;
    if (s->forward_all == 0 && intno < 32 && ((s->native_vectors >> intno) & 1) != 0) {
        uc_context_save(uc, s->ctx);
        if (deliver(uc, s, intno)) {
            s->delivered++;
            return;
        }
    }
    s->forwarded++;
    s->forward(uc, intno, s->forward_data);
}
