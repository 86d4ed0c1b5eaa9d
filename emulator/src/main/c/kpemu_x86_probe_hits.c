/*
 * x86-64 probe hits recorded natively. A kprobe event on an ftrace site whose handlers only read
 * registers, kernel memory the host planned (site reads, with the ftrace call's return address
 * pushed first as the host's path pushes it) and the context columns (the current task, its pid and comm, the latency column's
 * words) needs nothing from the host at the hit but those values: this code reads them at the
 * int3, as the host's Java path would read them there (the same registers, the same page walk of
 * the hit's tables, RAM only, kernel addresses only), appends them to a ring of records, and
 * resumes the guest where the host's hit path would (the site's boosted copy). The host formats
 * the records later, in order, before any other of its code sees the guest again: at the next
 * upcall of any hook and when the engine returns (NativeProbeHits, Kprobes' RecordedHits). A hit
 * costs no Java upcall, no context switch of the host's thread state and no FFM call.
 *
 * Everything else is the host's, unchanged: an int3 at an address not in the site table, any
 * int3 while `enabled` is 0 (the host turns it off whenever its probes, events or listeners
 * change, and on again at its next safe point), while `busy` (a hit of the host's is stepping),
 * while the hook forwards every exception (`forward_all`), when the ring is full, in user mode.
 *
 * The state, the site table and the records: kpemu_probe_hits.h (the base register is GS_BASE,
 * the mode register CS).
 */
#include "kpemu_x86_exception.h"
#include "kpemu_probe_hits.h"

#define KERNEL_MIN 0xffff800000000000ull

/* TASK_SIZE_MAX: user addresses lie below it (MachineFetchContext.userRange) */
#define USER_MAX 0x00007ffffffff000ull

size_t kpemu_x86_record_hit_size(void) { return sizeof(struct kpemu_probe_hits); }

/* The hit's page tables and the pages walked in them so far (kpemu_hit_tlb). */
struct hit_walker {
    struct walker w;
    struct kpemu_hit_tlb tlb;
};

static int translate(const void *walker, uint64_t va, uint64_t *pa, uint64_t *page_size) {
    struct hit_walker *hw = (struct hit_walker *)walker;
    if (kpemu_hit_tlb_find(&hw->tlb, va, pa, page_size)) return 1;
    if (!kpemu_x86_translate(&hw->w, va, pa, page_size)) return 0;
    kpemu_hit_tlb_keep(&hw->tlb, va, *pa, *page_size);
    return 1;
}

static int phys_read(const void *walker, uint64_t pa, uint8_t *out, uint32_t len) {
    return kpemu_x86_phys_read(&((const struct hit_walker *)walker)->w, pa, out, len, 1);
}

/* Reads `len` bytes of guest-virtual `va` (kernel addresses, RAM only); 0 when the host's read would fail. */
static int read_kernel(const void *walker, uint64_t va, uint8_t *out, uint32_t len) {
    if (va < KERNEL_MIN) return 0;
    return kpemu_hits_read_pages(walker, va, out, len, translate, phys_read);
}

/* Reads `len` bytes of user-virtual `va` through the hit's tables (RAM only) as the host's user read
   does (copy_from_user_nofault: the whole range below TASK_SIZE_MAX); 0 when it would fail. */
static int read_user(const void *walker, uint64_t va, uint8_t *out, uint32_t len) {
    if (va > USER_MAX || len > USER_MAX - va) return 0;
    return kpemu_hits_read_pages(walker, va, out, len, translate, phys_read);
}

/*
 * Linux's ftrace call at the site pushes its return address (the site + 5) just below the stack
 * pointer, where a handler that reads memory can see it; the host writes it there before such a
 * handler runs (HitPath.ftraceCall), and so does this code before a site's reads. No stack page
 * below: nothing written, as the host. 0 when the host must write it (a slot across pages, guarded
 * memory, not RAM): the hit is then the host's.
 */
static int ftrace_call_pushed(uc_engine *uc, struct kpemu_x86_exception *s, struct hit_walker *w, uint64_t site) {
    uint64_t rsp = 0, pa, size, value = site + 5;
    if (uc_reg_read(uc, UC_X86_REG_RSP, &rsp) != UC_ERR_OK) return 0;
    uint64_t va = rsp - 8;
    if (!translate(w, va, &pa, &size)) return 1;
    if ((va & (size - 1)) > size - 8) return 0;
    if (pa + 8 > s->frame_low && pa < s->frame_high) return 0;
    uint8_t probe[8];
    if (!phys_read(w, pa, probe, 8)) return 0;
    return uc_mem_write(uc, pa, &value, 8) == UC_ERR_OK;
}

/*
 * A kretprobe's entry (kpemu_probe_hits.h): the return address at the stack pointer, which the
 * plan's read found, replaced by the trampoline's, as the host's arch_prepare_kretprobe writes it.
 * 0 when the host must do it (an 8-byte slot across pages, guarded memory, not RAM).
 */
static int return_swapped(uc_engine *uc, struct kpemu_x86_exception *s, struct hit_walker *w, const uint64_t *regs, struct kpemu_probe_hits *h) {
    const uint8_t *slot = (const uint8_t *)(regs + h->nregs) + 16 * (size_t)h->nwords + 16 * (size_t)h->swap_read;
    uint64_t va, pa, size;
    memcpy(&va, slot, 8);
    if (!translate(w, va, &pa, &size) || (va & (size - 1)) > size - 8) return 0;
    if (pa + 8 > s->frame_low && pa < s->frame_high) return 0;
    return uc_mem_write(uc, pa, &h->trampoline, 8) == UC_ERR_OK;
}

int kpemu_x86_record_hit(uc_engine *uc, struct kpemu_x86_exception *s) {
    struct kpemu_probe_hits *h = s->hits;
    if (h->enabled == 0 || h->busy != 0 || h->count >= h->capacity) return 0;
    uint64_t rip = 0;
    uc_reg_read(uc, UC_X86_REG_RIP, &rip);
    int64_t site = kpemu_hits_site(h, rip - 1);   /* Unicorn reports int3 with RIP past the 0xcc */
    int at_return = site < 0 && h->kret_table != NULL && rip - 1 == h->trampoline;
    if (site < 0 && !at_return) return 0;
    uint64_t *regs = kpemu_hits_read_registers(uc, h);
    if (regs == NULL || (regs[h->mode_index] & 3) != 0) return 0;   /* user mode: the host's */
    struct hit_walker w;
    kpemu_x86_walker_now(uc, s, &w.w);
    w.tlb.used = w.tlb.next = 0;
    if (at_return) return kpemu_hits_return(uc, h, regs, read_kernel, &w);
    if (kpemu_hits_site_has_reads(h, (uint32_t)site) && !ftrace_call_pushed(uc, s, &w, rip - 1)) return 0;
    if (!kpemu_hits_site_reads(h, regs, (uint32_t)site, read_kernel, read_user, &w)) return 0;
    if (h->swap_read >= 0 && !return_swapped(uc, s, &w, regs, h)) {
        h->swap_read = -1;
        return 0;
    }
    kpemu_hits_complete(h, regs, (uint32_t)site, read_kernel, &w);
    kpemu_hits_resume(uc, h, h->site_resume[site]);
    return 1;
}
