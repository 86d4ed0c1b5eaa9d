/*
 * Probe hits recorded natively, the part both architectures share (kpemu_x86_probe_hits.c,
 * kpemu_arm64_probe_hits.c; the host's side is NativeProbeHits): the state as the host lays it
 * out, the site table's lookup, and the record's layout and words.
 *
 * The sites: open addressing on the probe's address (the breakpoint's), `site_mask + 1` slots,
 * key 0 empty; each slot's resume pc. Records: `record_size` bytes each, `capacity` of them: the
 * slot (u32), bit i of `ok` (u32) set when word i was read, the instruction clock's `executed` at
 * the hit (u64), the `nregs` registers of `regs` (u64 each), then `nwords` words of 16 bytes.
 * Word i is `word_size[i]` bytes at `word_offset[i]` from: 0 nothing (absolute), 1 the register at
 * `base_index` of `regs` (x86-64: GS_BASE), 2 the task (word 0, which must then be read); or
 * 3 no memory at all: the value of register `word_offset[i]` of `regs` (arm64: SP_EL0, the task).
 *
 * Lines (kpemu_hits_format): a site the host gives a line format gets its record's trace line
 * written here too, into `line_buf`, when the record's context (its words, their read flags, its
 * interrupt state and the format's class) is one the host has formatted before and handed over
 * (`contexts`: the context columns are a function of those alone; a context the host marks
 * `task_columns` leaves the task out: its key is the words after the task, pid and comm, and the
 * task's columns are written here from those three words, so a new task in a known state needs no
 * host). The line is the host's bytes: the columns, the timestamp of the live guest time at the
 * hit (`live`: the instruction clock's instr_offset, idle_nanos and nanos_per_instr, VirtualClock.liveNanos's arithmetic), the head and
 * the arguments, each a captured register printed as hex, unsigned or signed decimal of its size.
 * A record whose context is not a known one gets its line without the columns (bit 63 of its
 * meta word): the host puts its own columns in front. `line_meta` holds per record the line's
 * offset and length (0: no line) and the nanoseconds used: the host uses a line only when its own
 * time for the record is the same, else formats it itself. Each line is followed in `line_buf` by a
 * newline its length leaves out, so the lines of consecutive records are one piece of trace text.
 *
 * Site reads (kpemu_hits_site_reads): a site the host gives a read plan gets the guest memory its
 * probe's handler reads (a kprobe event's `+8(%di):u32`, `+0(+16(%si)):x64`) read here too, into
 * the record's `nreads` read slots after the words: each slot the address read (u64) and the value
 * (u64, zero-extended). A plan: u8 reads, each 12 bytes: u8 base (BASE_READ_REGISTER: the register
 * at index `base_index` of `regs`; BASE_READ_VALUE: the value of read `base_index`, an earlier one),
 * u8 base_index, u8 size (1, 2, 4, 8), u8 kind (READ_VALUE, or READ_STRING: a NUL-terminated
 * string, its bytes and NUL into the record's `string_bytes` of string area after the read slots,
 * the slot's value then its offset there | its length with the NUL << 32; no NUL within what is left
 * of the area: the host's; plus READ_USER: user memory, through the arch's user reader, none: the
 * host's), i64 offset. A read that fails (not kernel memory, not mapped, not RAM)
 * leaves the whole hit to the host, whose handler then meets the fault as Linux does.
 *
 * Kretprobe entries (READ_RETURN, READ_RETURN_REGISTER; the last read of a plan): the site's
 * kretprobe takes an instance as `pre_handler_kretprobe` does when its counter in `kret_free` (the
 * offset's high 32 bits; the low 32 are the memory offset) has one free, else the hit is the host's
 * (which counts the miss). The read slot gets the return address (x86-64: the 8 bytes at the stack
 * pointer, which must not overlap what an earlier read of the plan read when READ_RETURN_SEEN
 * says a probe after the kretprobe read them; arm64: x30), and the arch's code swaps it for
 * `trampoline` once every other read succeeded (x86-64: a write of guest memory; arm64: x30 in
 * the context the guest resumes from, and in the record when READ_RETURN_SEEN) and takes the
 * instance from the counter. The host takes it from its pool when it reads the record back, and
 * raises the counter when an instance goes back to the pool. The instance goes into the table of
 * outstanding instances (`kret_table`, every vCPU's ring shares it: the frame key from the register
 * at `entry_frame_index`, the task from word 0, the return address, the counter) at a free slot,
 * which the read slot's address word then holds for the host; no free slot: the host's.
 *
 * Kretprobe returns (kpemu_hits_return): at a breakpoint on the trampoline, while the table is
 * `complete` (the host puts the instances it takes in it too and says when one found no room), the
 * table's one instance of the return's frame key, when its counter's `kret_returns` says its returns
 * are recorded: the record's site word is RETURN_SITE | its slot, the slot is freed, the counter gains
 * the instance and the guest goes on at the real return address. The host reads the instance by its
 * slot and runs the return's handler from the record. Several instances of a frame (several
 * kretprobes on one function), none, or one that saw the trampoline: the host's. A return's line is
 * written as a site's, in its counter's format (`ret_format`), when the host told the head of the
 * counter's returns to that address (`heads`: the head names the caller the function returns to).
 */
#ifndef KPEMU_PROBE_HITS_H
#define KPEMU_PROBE_HITS_H
#include <stdint.h>
#include <string.h>
#include <unicorn/unicorn.h>

#define HIT_REGS 40
#define HIT_WORDS 8
#define WORD_ABSOLUTE 0
#define WORD_FROM_BASE_REGISTER 1
#define WORD_FROM_TASK 2
#define WORD_REGISTER 3
#define LINE_CONTEXTS 32
#define LINE_COLUMNS_MAX 64
#define LINE_HEX 0
#define LINE_UNSIGNED 1
#define LINE_SIGNED 2
#define LINE_STRING 3 /* a site read of a string (READ_STRING), printed in double quotes as its bytes; an empty one: the host's */
#define LINE_TASK_WORDS 3 /* a task_columns context: words 0, 1, 2 are the task, its pid (4 bytes) and its comm (16 bytes) */
#define LINE_TASK_COLUMNS_MAX 28
#define LINE_READ 128 /* a line argument's index at or past this: the value of site read (index - LINE_READ) */
#define BASE_READ_REGISTER 0
#define BASE_READ_VALUE 1
#define READ_VALUE 0
#define READ_STRING 1
#define READ_USER 2
#define READ_RETURN 4          /* a kretprobe's entry: the return address, 8 bytes at base + offset (x86-64 [rsp]) */
#define READ_RETURN_REGISTER 5 /* a kretprobe's entry: the return address in the register at base_index (arm64 x30) */
#define READ_RETURN_SEEN 16    /* with either: probes that run after the kretprobe's see the trampoline there */

struct kpemu_line_context {
    uint32_t valid, cls;       /* cls: the format's class (what else the columns depend on), as the host numbers it */
    uint32_t irqs_off, ok;     /* the interrupt state; the words' read flags */
    uint64_t words[2 * HIT_WORDS];
    uint32_t len;              /* bytes of columns */
    uint32_t task_columns;     /* nonzero: the key is the words after the task's (LINE_TASK_WORDS) and their read flags,
                                  and the columns follow the task's, written here from those words (kpemu_line_task) */
    uint8_t columns[LINE_COLUMNS_MAX];
};

/* A kretprobe instance outstanding (kpemu_kret_table): the frame key and task its entry saw, the
   return address it swapped for the trampoline, and its kretprobe's counter (-1: its return is the
   host's). */
struct kpemu_kret_instance {
    uint64_t frame, task, ret;
    int32_t counter;
    uint32_t live;
};

/* The outstanding instances, the host's and this code's (one table every vCPU's ring shares, as the
   guest's tasks return on any CPU): slots [0, used) may be live; `complete` is nonzero while every
   instance the host holds has a slot (only then is a return matched here). */
struct kpemu_kret_table {
    uint32_t used, capacity, complete, pad;
    struct kpemu_kret_instance slot[];
};

/* A record of a kretprobe's return has this bit in its site word, its table slot in the others. */
#define RETURN_SITE 0x80000000u

/* The head of a kretprobe return's line ("EVENT: (caller+0x1f/0x80 <- func)") the host wrote for
   returns of counter `counter` to `ret`: copied in place of the format's empty head. */
#define RETURN_HEADS 16
#define RETURN_HEAD_MAX 240
struct kpemu_return_head {
    uint64_t ret;
    int32_t counter;           /* -1: empty */
    uint32_t len;
    uint8_t bytes[RETURN_HEAD_MAX];
};

struct kpemu_probe_hits {
    uint32_t enabled;          /* 0: every breakpoint goes to the host */
    uint32_t busy;             /* nonzero: the host has a hit in flight */
    uint32_t site_mask;        /* site slots - 1 (a power of two - 1) */
    uint32_t record_size;      /* bytes per record */
    uint64_t *site_keys;       /* probe addresses (0: empty slot) */
    uint64_t *site_resume;     /* where the guest goes on after the hit */
    uint8_t *ring;             /* capacity records */
    uint32_t capacity, count;  /* records the ring holds, records in it */
    const uint64_t *executed;  /* the instruction clock's count of executed instructions */
    uint32_t nregs, nwords;
    int32_t base_index;        /* slot in `regs` of the register base-relative words add to (-1: none) */
    uint32_t mode_index;       /* slot in `regs` that tells kernel from user mode (x86 CS, arm64 PSTATE) */
    int32_t regs[HIT_REGS];    /* engine register ids read into each record */
    uint32_t word_base[HIT_WORDS];
    int64_t word_offset[HIT_WORDS];
    uint32_t word_size[HIT_WORDS];
    uint64_t recorded;         /* hits recorded here */
    uc_context *pc_ctx;        /* a context of the CPU state's prefix that holds the PC (the host's setPc's) */
    int64_t pc_offset;         /* the PC's offset in it */
    /* lines (see the top of this file) */
    uint32_t lines_on;         /* 0: no line is formatted here */
    uint32_t line_capacity;    /* bytes of line_buf */
    uint8_t *line_buf;
    uint32_t line_used;        /* bytes of line_buf the waiting records' lines take */
    uint32_t pad_lines;
    uint64_t *line_meta;       /* two words per ring record: offset | length << 32 (0: no line) | 1 << 63 (no columns), the nanoseconds */
    const int32_t *site_format; /* per site slot: its format's offset in `formats`, -1: none */
    const uint8_t *formats;
    const int64_t *live;       /* the clock's instr_offset, idle_nanos, nanos_per_instr (a double) */
    uint32_t last_context;     /* the context the last line used: looked at first */
    uint32_t pad_context;
    struct kpemu_line_context contexts[LINE_CONTEXTS];
    uint64_t lines_formatted;  /* lines written here */
    /* site reads (see the top of this file) */
    uint32_t nreads;           /* read slots per record (0: no site reads anywhere) */
    uint32_t pad_reads;
    const int32_t *site_reads; /* per site slot: its plan's offset in `read_plans`, -1: none */
    const uint8_t *read_plans;
    uint32_t string_bytes;     /* bytes of string area per record (0: no string reads anywhere) */
    uint32_t pad_strings;
    /* registers from a context save (kpemu_hits_read_registers) */
    int32_t reg_ctx_offset[HIT_REGS]; /* where register i of `regs` lies in `pc_ctx` once saved; -1: read through the engine */
    uint32_t regs_from_ctx;    /* nonzero: some registers are copied from a save of `pc_ctx` */
    uint32_t ctx_saved;        /* `pc_ctx` was saved by this hit's kpemu_hits_read_registers: kpemu_hits_resume saves no more */
    /* kretprobe entries (see the top of this file) */
    uint64_t trampoline;       /* the kretprobe trampoline's address, which a return address is swapped for */
    int32_t *kret_free;        /* per kretprobe (its counter), instances free for the native code: shared by every vCPU's ring */
    int32_t swap_read;         /* this hit: the read slot of its return address to swap (-1: none) */
    int32_t swap_counter;      /* this hit: its kretprobe's counter */
    int32_t swap_register;     /* this hit: the index in `regs` of the register that holds the return address (-1: in memory) */
    uint32_t kret_count;       /* counters in kret_free */
    /* kretprobe returns (see the top of this file) */
    struct kpemu_kret_table *kret_table; /* the outstanding instances, shared by every vCPU's ring (NULL: no entry or return here) */
    const int32_t *kret_returns;  /* per counter: nonzero when its instances' returns may be recorded here */
    int32_t ret_frame_index;   /* index in `regs` of the register a return's frame key is read from (-1: no return recorded) */
    int32_t entry_frame_index; /* index in `regs` of the register an entry's frame key is */
    int64_t ret_frame_offset;  /* added to it (x86-64: -8, the slot `ret` popped) */
    int32_t swap_slot;         /* this hit: the table slot its entry's instance takes */
    uint32_t pad_returns;
    uint64_t returns_recorded; /* kretprobe returns recorded here */
    /* lines of kretprobe returns (see the top of this file) */
    const int32_t *ret_format; /* per counter: its returns' format's offset in `formats` (its head empty), -1: none; NULL: none at all */
    struct kpemu_return_head heads[RETURN_HEADS];
};

/* Reads `len` bytes of guest-virtual `va` as the host would at the hit; 0 when its read would fail. */
typedef int (*kpemu_hit_reader)(const void *walker, uint64_t va, uint8_t *out, uint32_t len);

/* A page walk's two steps, for kpemu_hits_read_pages: the physical address of `va` and the size
   of its page (0: not mapped), and a read of guest-physical memory (0: not RAM). */
typedef int (*kpemu_hit_translate)(const void *walker, uint64_t va, uint64_t *pa, uint64_t *page_size);
typedef int (*kpemu_hit_phys_read)(const void *walker, uint64_t pa, uint8_t *out, uint32_t len);

/* A hit's translations: the pages (or blocks) its page walks found last. The guest runs no
   instruction during a hit, so its page tables cannot change: the current task, its pid and comm,
   the per-CPU words and a probe's fields lie on a few pages, each walked once a hit. */
#define HIT_TLB 4
struct kpemu_hit_tlb {
    uint64_t va[HIT_TLB], pa[HIT_TLB], size[HIT_TLB];   /* a page's first address, its physical one, its size */
    uint32_t used, next;
};

/* `va`'s physical address and page size from a page this hit walked before; 0: none. */
static inline int kpemu_hit_tlb_find(const struct kpemu_hit_tlb *t, uint64_t va, uint64_t *pa, uint64_t *size) {
    for (uint32_t i = 0; i < t->used; i++) {
        if ((va & ~(t->size[i] - 1)) == t->va[i]) {
            *pa = t->pa[i] | (va & (t->size[i] - 1));
            *size = t->size[i];
            return 1;
        }
    }
    return 0;
}

/* Keeps the page a walk found for `va` (its physical address `pa`, its size `size`). */
static inline void kpemu_hit_tlb_keep(struct kpemu_hit_tlb *t, uint64_t va, uint64_t pa, uint64_t size) {
    uint32_t i = t->used < HIT_TLB ? t->used++ : t->next++ % HIT_TLB;
    t->va[i] = va & ~(size - 1);
    t->pa[i] = pa & ~(size - 1);
    t->size[i] = size;
}

/* Reads `len` bytes of guest-virtual `va` page by page; 0 when a page is not mapped or not RAM. */
static inline int kpemu_hits_read_pages(const void *walker, uint64_t va, uint8_t *out, uint32_t len,
        kpemu_hit_translate translate, kpemu_hit_phys_read phys_read) {
    if (va + len - 1 < va) return 0;
    uint32_t done = 0;
    while (done < len) {
        uint64_t a = va + done, pa, size;
        if (!translate(walker, a, &pa, &size)) return 0;
        uint64_t room = size - (a & (size - 1));
        uint32_t n = len - done;
        if (n > room) n = (uint32_t)room;
        if (!phys_read(walker, pa, out + done, n)) return 0;
        done += n;
    }
    return 1;
}

static inline uint32_t kpemu_hits_slot_of(uint64_t address, uint32_t mask) {
    uint64_t h = address * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(h ^ (h >> 32)) & mask;
}

/* The site slot of `address`, or -1 when it is no site. */
static inline int64_t kpemu_hits_site(const struct kpemu_probe_hits *h, uint64_t address) {
    uint32_t mask = h->site_mask, i = kpemu_hits_slot_of(address, mask);
    while (h->site_keys[i] != address) {
        if (h->site_keys[i] == 0) return -1;
        i = (i + 1) & mask;
    }
    return i;
}

/* The next record's registers: those whose place in the CPU state the host found (`reg_ctx_offset`)
   copied from one save of `pc_ctx` (which kpemu_hits_resume then reuses), the others read in one
   engine batch; NULL when they cannot be read. The guest runs nothing in between: the same values. */
static inline uint64_t *kpemu_hits_read_registers(uc_engine *uc, struct kpemu_probe_hits *h) {
    uint8_t *rec = h->ring + (size_t)h->count * h->record_size;
    uint64_t *regs = (uint64_t *)(rec + 16);
    void *ptrs[HIT_REGS];
    int ids[HIT_REGS];
    int n = 0;
    h->ctx_saved = 0;
    if (h->regs_from_ctx) {     /* else every offset is -1 */
        if (uc_context_save(uc, h->pc_ctx) != UC_ERR_OK) return NULL;
        h->ctx_saved = 1;
    }
    const uint8_t *saved = (const uint8_t *)h->pc_ctx;
    for (uint32_t r = 0; r < h->nregs; r++) {
        if (h->reg_ctx_offset[r] >= 0) {
            memcpy(&regs[r], saved + h->reg_ctx_offset[r], 8);
        } else {
            ids[n] = h->regs[r];
            ptrs[n++] = &regs[r];
        }
    }
    if (n > 0 && uc_reg_read_batch(uc, ids, ptrs, n) != UC_ERR_OK) return NULL;
    return regs;
}

static inline uint32_t kpemu_line_digits(uint64_t v) {
    uint32_t d = 1;
    while (v >= 10) { v /= 10; d++; }
    return d;
}

static inline uint8_t *kpemu_line_unsigned(uint8_t *o, uint64_t v) {
    uint32_t d = kpemu_line_digits(v);
    for (uint32_t i = d; i > 0; i--) { o[i - 1] = (uint8_t)('0' + v % 10); v /= 10; }
    return o + d;
}

static inline uint8_t *kpemu_line_fill(uint8_t *o, uint8_t c, int32_t n) {
    for (int32_t i = 0; i < n; i++) *o++ = c;
    return o;
}

/*
 * The task's columns ("%16s-%-7d ": its comm right-aligned in 16, "<idle>" for pid 0, a dash, its
 * pid left-aligned in 7, a space) into `o` from the record's words (read flags `ok`) as the host
 * writes them; NULL when the host must: a word not read, no task, a negative pid, or a comm byte
 * outside printable ASCII.
 */
static inline uint8_t *kpemu_line_task(uint8_t *o, const uint8_t *words, uint32_t ok) {
    const uint32_t all = (1u << LINE_TASK_WORDS) - 1;
    if ((ok & all) != all) return NULL;
    uint64_t task;
    int32_t pid;
    memcpy(&task, words, 8);
    memcpy(&pid, words + 16, 4);
    if (task == 0 || pid < 0) return NULL;
    const uint8_t *name = (const uint8_t *)"<idle>";
    uint32_t n = 6;
    if (pid != 0) {
        name = words + 32;
        for (n = 0; n < 15 && name[n] != 0; n++) if (name[n] < 0x20 || name[n] > 0x7e) return NULL;
    }
    o = kpemu_line_fill(o, ' ', 16 - (int32_t)n);
    memcpy(o, name, n);
    o += n;
    *o++ = '-';
    o = kpemu_line_unsigned(o, (uint64_t)pid);
    o = kpemu_line_fill(o, ' ', 7 - (int32_t)kpemu_line_digits((uint64_t)pid));
    *o++ = ' ';
    return o;
}

/*
 * The trace line of the record at ring index `index` whose registers are `regs` (site slot
 * `slot`), when the site has a format and the record's context is a known one; else none. A
 * format: u16 class, u8 index of the interrupt flags' register, u8 1 when the flag set means
 * interrupts off, u32 the flag's mask; u16 head length, the head; u8 arguments, each: u8 prefix
 * length, the prefix (" name="), u8 register index (or LINE_READ + a site read's index: its value),
 * u8 kind (LINE_HEX, LINE_UNSIGNED, LINE_SIGNED; LINE_STRING of a string read), u8 size in bytes
 * (1, 2, 4, 8; 0 for a string).
 */
static inline void kpemu_hits_format_line(struct kpemu_probe_hits *h, const uint64_t *regs, const uint8_t *f,
        const uint8_t *head_override, uint32_t head_override_len, uint32_t index);

static inline void kpemu_hits_format(struct kpemu_probe_hits *h, const uint64_t *regs, uint32_t slot, uint32_t index) {
    int32_t at = h->site_format[slot];
    if (at < 0) return;
    kpemu_hits_format_line(h, regs, h->formats + at, NULL, 0, index);
}

/* The line of the record at ring index `index` in format `f`; its head, when `head_override` is
   not NULL, those bytes instead of the format's (a return's, whose format's head is empty). */
static inline void kpemu_hits_format_line(struct kpemu_probe_hits *h, const uint64_t *regs, const uint8_t *f,
        const uint8_t *head_override, uint32_t head_override_len, uint32_t index) {
    uint64_t *meta = h->line_meta + 2 * (size_t)index;   /* meta[0] is 0 (kpemu_hits_complete) until the line is written */
    uint32_t cls = (uint32_t)f[0] | (uint32_t)f[1] << 8, irq_index = f[2], off_if_set = f[3];
    uint32_t irq_mask;
    memcpy(&irq_mask, f + 4, 4);
    uint32_t irqs_off = ((regs[irq_index] & irq_mask) != 0) == (off_if_set != 0);
    const uint8_t *rec = (const uint8_t *)regs - 16;
    uint32_t ok;
    memcpy(&ok, rec + 4, 4);
    const uint8_t *words = (const uint8_t *)(regs + h->nregs);
    uint8_t task[LINE_TASK_COLUMNS_MAX];
    uint32_t task_len = 0;
    int task_known = -1;        /* whether the task's columns can be written here: found out at the first context that needs them */
    const struct kpemu_line_context *c = NULL;
    for (uint32_t k = 0; k < LINE_CONTEXTS; k++) {
        uint32_t i = (h->last_context + k) % LINE_CONTEXTS;
        const struct kpemu_line_context *e = &h->contexts[i];
        if (!e->valid || e->cls != cls || e->irqs_off != irqs_off) continue;
        if (e->task_columns) {
            if (h->nwords < LINE_TASK_WORDS || (e->ok ^ ok) >> LINE_TASK_WORDS != 0
                    || memcmp(e->words + 2 * LINE_TASK_WORDS, words + 16 * LINE_TASK_WORDS, 16 * (size_t)(h->nwords - LINE_TASK_WORDS)) != 0) {
                continue;
            }
            if (task_known < 0) {
                uint8_t *end = kpemu_line_task(task, words, ok);
                task_known = end != NULL;
                task_len = end != NULL ? (uint32_t)(end - task) : 0;
            }
            if (!task_known) continue;
        } else if (e->ok != ok || memcmp(e->words, words, 16 * (size_t)h->nwords) != 0) {
            continue;
        }
        c = e;
        h->last_context = i;
        break;
    }
    if (c != NULL && !c->task_columns) task_len = 0;
    uint64_t executed;
    memcpy(&executed, rec + 8, 8);
    double npi;
    memcpy(&npi, &h->live[2], 8);
    int64_t nanos = (int64_t)((double)(int64_t)(executed + (uint64_t)h->live[0]) * npi) + h->live[1];
    if (nanos < 0) return;
    uint32_t head_len = (uint32_t)f[8] | (uint32_t)f[9] << 8;
    const uint8_t *head = f + 10, *a = head + head_len;
    uint32_t nargs = *a++;
    if (head_override != NULL) {
        head = head_override;
        head_len = head_override_len;
    }
    uint32_t columns_len = c != NULL ? c->len : 0;
    size_t need = task_len + columns_len + 49 + head_len;   /* the newline after the line included */
    const uint8_t *scan = a;
    const uint64_t *read_slots = (const uint64_t *)((const uint8_t *)(regs + h->nregs) + 16 * (size_t)h->nwords);
    const uint8_t *strings = (const uint8_t *)(read_slots + 2 * (size_t)h->nreads);
    for (uint32_t i = 0; i < nargs; i++) {
        uint32_t plen = scan[0], reg = scan[1 + plen], kind = scan[2 + plen];
        if (kind == LINE_STRING) {
            if (reg < LINE_READ || reg - LINE_READ >= h->nreads) return;
            uint64_t loc = read_slots[2 * (reg - LINE_READ) + 1];
            uint32_t len = (uint32_t)(loc >> 32), first = (uint32_t)loc;
            if (len <= 1 || first + len > h->string_bytes) return;   /* an empty string (a fault on some kernels): the host's */
            need += plen + len + 2;
        } else {
            need += plen + 24;
        }
        scan += 1 + plen + 3;
    }
    if (h->line_used + need > h->line_capacity) return;
    uint8_t *start = h->line_buf + h->line_used, *o = start;
    memcpy(o, task, task_len);
    o += task_len;
    if (c != NULL) memcpy(o, c->columns, columns_len);
    o += columns_len;
    uint64_t t = (uint64_t)nanos / 1000, seconds = t / 1000000, micros = t - seconds * 1000000;
    *o++ = ' ';
    o = kpemu_line_fill(o, ' ', 5 - (int32_t)kpemu_line_digits(seconds));
    o = kpemu_line_unsigned(o, seconds);
    *o++ = '.';
    o = kpemu_line_fill(o, '0', 6 - (int32_t)kpemu_line_digits(micros));
    o = kpemu_line_unsigned(o, micros);
    *o++ = ':';
    *o++ = ' ';
    memcpy(o, head, head_len);
    o += head_len;
    for (uint32_t i = 0; i < nargs; i++) {
        uint32_t plen = *a++;
        memcpy(o, a, plen);
        o += plen;
        a += plen;
        uint32_t reg = a[0], kind = a[1], size = a[2];
        a += 3;
        if (kind == LINE_STRING) {
            uint64_t loc = read_slots[2 * (reg - LINE_READ) + 1];
            uint32_t len = (uint32_t)(loc >> 32), first = (uint32_t)loc;
            *o++ = '"';
            memcpy(o, strings + first, len - 1);    /* its bytes up to the NUL, which ends them (the read stopped there) */
            o += len - 1;
            *o++ = '"';
            continue;
        }
        uint64_t v;
        if (reg < LINE_READ) v = regs[reg];
        else if (reg - LINE_READ >= h->nreads) return;
        else memcpy(&v, (const uint8_t *)(regs + h->nregs) + 16 * (size_t)h->nwords + 16 * (size_t)(reg - LINE_READ) + 8, 8);
        if (size < 8) v &= (1ull << (8 * size)) - 1;
        if (kind == LINE_HEX) {
            *o++ = '0';
            *o++ = 'x';
            int shift = 60;
            while (shift > 0 && (v >> shift) == 0) shift -= 4;
            for (; shift >= 0; shift -= 4) *o++ = (uint8_t)"0123456789abcdef"[(v >> shift) & 0xf];
        } else if (kind == LINE_SIGNED) {
            int64_t sv = size == 8 ? (int64_t)v : (int64_t)(v << (64 - 8 * size)) >> (64 - 8 * size);
            if (sv < 0) {
                *o++ = '-';
                v = (uint64_t)0 - (uint64_t)sv;
            } else {
                v = (uint64_t)sv;
            }
            o = kpemu_line_unsigned(o, v);
        } else {
            o = kpemu_line_unsigned(o, v);
        }
    }
    meta[0] = (uint64_t)h->line_used | (uint64_t)(o - start) << 32 | (c == NULL ? 1ull << 63 : 0);
    meta[1] = (uint64_t)nanos;
    *o++ = '\n';
    h->line_used += (uint32_t)(o - start);
    h->lines_formatted++;
}

/* The NUL-terminated string at `va` into `out` (at most `room` bytes, its NUL included), read up to
   each page's end as the host reads it; its length with the NUL, 0 when a page fails first or no
   NUL comes within `room` (the hit is then the host's). */
static inline uint32_t kpemu_hits_read_string(const void *walker, uint64_t va, uint8_t *out, uint32_t room, kpemu_hit_reader read) {
    uint32_t n = 0;
    while (n < room) {
        uint64_t a = va + n;
        uint32_t chunk = (uint32_t)(0x1000 - (a & 0xfff));
        if (chunk > room - n) chunk = room - n;
        if (!read(walker, a, out + n, chunk)) return 0;
        for (uint32_t i = 0; i < chunk; i++) if (out[n + i] == 0) return n + i + 1;
        n += chunk;
    }
    return 0;
}

/* A plan's kretprobe entry (read `j`): the return address into its slot, the swap left to the arch's
   code (h->swap_read); 0 when the hit must be the host's (no instance free, the slot not readable,
   or, for probes that see the swap, an earlier read overlapping it). */
static inline int kpemu_hits_return_read(struct kpemu_probe_hits *h, uint64_t *regs, uint8_t *slots, const uint8_t *plan, uint32_t j,
        uint32_t base_index, uint32_t kind, int64_t offset, kpemu_hit_reader kernel, const void *walker) {
    uint32_t counter = (uint32_t)((uint64_t)offset >> 32);
    if (h->kret_free == NULL || counter >= h->kret_count || h->kret_free[counter] <= 0 || base_index >= h->nregs) return 0;
    struct kpemu_kret_table *t = h->kret_table;
    if (t == NULL || h->entry_frame_index < 0 || (uint32_t)h->entry_frame_index >= h->nregs) return 0;
    uint32_t free_slot = 0;
    while (free_slot < t->used && t->slot[free_slot].live) free_slot++;
    if (free_slot >= t->capacity) return 0;      /* no room: the host's, which holds it without a slot */
    uint64_t address = 0, value;
    if ((kind & ~(uint32_t)READ_RETURN_SEEN) == READ_RETURN_REGISTER) {
        if (h->reg_ctx_offset[base_index] < 0) return 0;    /* only a register the resume's context holds */
        value = regs[base_index];
        if (kind & READ_RETURN_SEEN) regs[base_index] = h->trampoline;   /* the record shows what they see */
        h->swap_register = (int32_t)base_index;
    } else {
        address = regs[base_index] + (uint64_t)(int64_t)(int32_t)(uint32_t)offset;
        if (!kernel(walker, address, (uint8_t *)&value, 8)) return 0;
        if (kind & READ_RETURN_SEEN) {
            for (uint32_t i = 0; i < j; i++) {       /* what the probes after it read there would be the trampoline */
                const uint8_t *e = plan + 12 * (size_t)i;
                uint64_t a, v, len = e[2];
                memcpy(&a, slots + 16 * (size_t)i, 8);
                memcpy(&v, slots + 16 * (size_t)i + 8, 8);
                if ((e[3] & ~(uint32_t)READ_USER) == READ_STRING) len = v >> 32;
                if (a < address + 8 && address < a + len) return 0;
            }
        }
        h->swap_register = -1;
    }
    memcpy(slots + 16 * (size_t)j, &address, 8);
    memcpy(slots + 16 * (size_t)j + 8, &value, 8);
    h->swap_read = (int32_t)j;
    h->swap_counter = (int32_t)counter;
    h->swap_slot = (int32_t)free_slot;
    return 1;
}

/* Whether the site at slot `site` has planned reads. */
static inline int kpemu_hits_site_has_reads(const struct kpemu_probe_hits *h, uint32_t site) {
    return h->site_reads != NULL && h->site_reads[site] >= 0;
}

/* The site's planned reads into the read slots of the record whose registers are `regs`; 0 when
   one fails (the hit is then the host's: nothing of the record counts until kpemu_hits_resume). */
static inline int kpemu_hits_site_reads(struct kpemu_probe_hits *h, uint64_t *regs, uint32_t site,
        kpemu_hit_reader kernel, kpemu_hit_reader user, const void *walker) {
    h->swap_read = -1;
    if (h->site_reads == NULL) return 1;
    uint8_t *slots = (uint8_t *)(regs + h->nregs) + 16 * (size_t)h->nwords;
    int32_t at = h->site_reads[site];
    if (at < 0) return 1;
    const uint8_t *plan = h->read_plans + at;
    uint32_t n = plan[0];
    if (n > h->nreads) return 0;
    const uint8_t *r = plan + 1;
    uint8_t *area = slots + 16 * (size_t)h->nreads;
    uint32_t used = 0;
    for (uint32_t j = 0; j < n; j++, r += 12) {
        uint32_t base_kind = r[0], base_index = r[1], size = r[2], kind = r[3];
        int64_t offset;
        memcpy(&offset, r + 4, 8);
        if ((kind & ~(uint32_t)READ_RETURN_SEEN) == READ_RETURN || (kind & ~(uint32_t)READ_RETURN_SEEN) == READ_RETURN_REGISTER) {
            if (j != n - 1) return 0;   /* the plan's last read: nothing fails after the swap is decided */
            if (!kpemu_hits_return_read(h, regs, slots, plan + 1, j, base_index, kind, offset, kernel, walker)) return 0;
            continue;
        }
        uint64_t base;
        if (base_kind == BASE_READ_REGISTER && base_index < h->nregs) base = regs[base_index];
        else if (base_kind == BASE_READ_VALUE && base_index < j) memcpy(&base, slots + 16 * (size_t)base_index + 8, 8);
        else return 0;
        uint64_t address = base + (uint64_t)offset, value = 0;
        kpemu_hit_reader read = (kind & READ_USER) ? user : kernel;
        if (read == NULL) return 0;
        kind &= ~(uint32_t)READ_USER;
        if (kind == READ_STRING) {
            uint32_t len = kpemu_hits_read_string(walker, address, area + used, h->string_bytes - used, read);
            if (len == 0) return 0;
            value = (uint64_t)used | (uint64_t)len << 32;
            used += len;
            memcpy(slots + 16 * (size_t)j, &address, 8);
            memcpy(slots + 16 * (size_t)j + 8, &value, 8);
            continue;
        }
        if (kind != READ_VALUE || size == 0 || size > 8) return 0;
        if (!read(walker, address, (uint8_t *)&value, size)) return 0;
        memcpy(slots + 16 * (size_t)j, &address, 8);
        memcpy(slots + 16 * (size_t)j + 8, &value, 8);
    }
    return 1;
}

/* Reads the words into the record whose registers are `regs` and completes it; the host's pc for
   the guest is then the slot's resume address, which the caller writes. */
static inline void kpemu_hits_complete(struct kpemu_probe_hits *h, uint64_t *regs, uint32_t site,
        kpemu_hit_reader read, const void *walker) {
    uint8_t *rec = (uint8_t *)regs - 16;
    uint32_t ok = 0;
    uint8_t *words = rec + 16 + 8 * (size_t)h->nregs;
    memset(words, 0, 16 * (size_t)h->nwords);
    uint64_t task = 0;
    for (uint32_t k = 0; k < h->nwords; k++) {
        uint64_t base;
        switch (h->word_base[k]) {
            case WORD_FROM_BASE_REGISTER: base = h->base_index >= 0 ? regs[h->base_index] : 0; break;
            case WORD_FROM_TASK:
                if ((ok & 1) == 0) continue;
                base = task;
                break;
            case WORD_REGISTER: {
                uint64_t v = regs[h->word_offset[k]];
                memcpy(words + 16 * k, &v, 8);
                ok |= 1u << k;
                if (k == 0) task = v;
                continue;
            }
            default: base = 0;
        }
        if (read(walker, base + (uint64_t)h->word_offset[k], words + 16 * k, h->word_size[k])) {
            ok |= 1u << k;
            if (k == 0) memcpy(&task, words, 8);
        }
    }
    memcpy(rec, &site, 4);
    memcpy(rec + 4, &ok, 4);
    memcpy(rec + 8, h->executed, 8);
    if (h->line_meta != NULL) {
        h->line_meta[2 * (size_t)h->count] = 0;
        if (h->lines_on && (site & RETURN_SITE) == 0) kpemu_hits_format(h, regs, site, h->count);
    }
}

/* The guest goes on at `pc`, set through the context as the host's setPc does inside an exception
   hook (a register write of the PC from a hook would make the engine leave its execution loop and
   enter it again, and on arm64 leaves later memory hooks of the run without their pc synced). */
static inline void kpemu_hits_resume(uc_engine *uc, struct kpemu_probe_hits *h, uint64_t pc) {
    if (!h->ctx_saved) uc_context_save(uc, h->pc_ctx);
    h->ctx_saved = 0;
    memcpy((uint8_t *)h->pc_ctx + h->pc_offset, &pc, 8);
    if (h->swap_read >= 0) {          /* a kretprobe's entry: its instance taken, a register's return address swapped */
        if (h->swap_register >= 0) memcpy((uint8_t *)h->pc_ctx + h->reg_ctx_offset[h->swap_register], &h->trampoline, 8);
        h->kret_free[h->swap_counter]--;
        uint8_t *rec = h->ring + (size_t)h->count * h->record_size;
        const uint64_t *regs = (const uint64_t *)(rec + 16);
        uint8_t *words = (uint8_t *)(regs + h->nregs);
        uint32_t ok;
        memcpy(&ok, rec + 4, 4);
        struct kpemu_kret_instance *e = &h->kret_table->slot[h->swap_slot];
        e->frame = regs[h->entry_frame_index];
        e->task = 0;
        if (h->nwords > 0 && (ok & 1)) memcpy(&e->task, words, 8);
        uint8_t *read = (uint8_t *)(words + 16 * (size_t)h->nwords) + 16 * (size_t)h->swap_read;
        memcpy(&e->ret, read + 8, 8);
        uint64_t slot_index = (uint64_t)h->swap_slot;   /* the read's address word, once swapped: the instance's table slot */
        memcpy(read, &slot_index, 8);
        e->counter = h->swap_counter;
        e->live = 1;
        if ((uint32_t)h->swap_slot >= h->kret_table->used) h->kret_table->used = (uint32_t)h->swap_slot + 1;
        h->swap_read = -1;
    }
    uc_context_restore(uc, h->pc_ctx);
    h->count++;
    h->recorded++;
}

/*
 * A kretprobe's return at the trampoline (`regs` its registers, read as a record's): the one
 * instance of the frame, matched as the host's trampoline handler matches it (its frame key: the
 * register at `ret_frame_index` + `ret_frame_offset`), recorded (site word RETURN_SITE | its slot;
 * the words read as at any hit), given back to its counter, and the guest resumed at the real
 * return address. 0 when the host must: the table is not complete, no instance or several of the
 * frame (several kretprobes on one function: the host runs them newest first), one that saw the
 * trampoline, or one whose kretprobe's returns are not recorded.
 */
static inline int kpemu_hits_return(uc_engine *uc, struct kpemu_probe_hits *h, uint64_t *regs,
        kpemu_hit_reader read, const void *walker) {
    struct kpemu_kret_table *t = h->kret_table;
    if (t == NULL || !t->complete || h->ret_frame_index < 0 || (uint32_t)h->ret_frame_index >= h->nregs) return 0;
    uint64_t frame = regs[h->ret_frame_index] + (uint64_t)h->ret_frame_offset;
    int64_t found = -1;
    for (uint32_t i = 0; i < t->used; i++) {
        if (!t->slot[i].live || t->slot[i].frame != frame) continue;
        if (found >= 0) return 0;
        found = i;
    }
    if (found < 0) return 0;
    struct kpemu_kret_instance *e = &t->slot[found];
    if (e->ret == h->trampoline || e->counter < 0 || (uint32_t)e->counter >= h->kret_count || h->kret_returns == NULL
            || !h->kret_returns[e->counter]) return 0;
    h->swap_read = -1;
    kpemu_hits_complete(h, regs, RETURN_SITE | (uint32_t)found, read, walker);
    if (h->lines_on && h->ret_format != NULL && h->ret_format[e->counter] >= 0) {
        for (uint32_t i = 0; i < RETURN_HEADS; i++) {
            const struct kpemu_return_head *k = &h->heads[i];
            if (k->counter != e->counter || k->ret != e->ret) continue;
            kpemu_hits_format_line(h, regs, h->formats + h->ret_format[e->counter], k->bytes, k->len, h->count);
            break;
        }
    }
    e->live = 0;
    while (t->used > 0 && !t->slot[t->used - 1].live) t->used--;
    h->kret_free[e->counter]++;
    h->returns_recorded++;
    kpemu_hits_resume(uc, h, e->ret);
    return 1;
}

#endif
