package dev.kpemu.kprobes.events;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;

import dev.kpemu.image.SymbolTable;
import dev.kpemu.image.btf.Btf;
import dev.kpemu.machine.Arch;
import dev.kpemu.machine.Machine;
import dev.kpemu.unicorn.Arm64Reg;
import dev.kpemu.unicorn.X86Reg;

/**
 * Where each address space ({@code struct mm_struct}) maps the files uprobes are on, learned
 * from outside the guest where Linux's own uprobes learn it: host breakpoints (no guest memory
 * written) on the entries of {@code uprobe_mmap(vma)} (every new file-backed VMA: exec's ELF
 * segments, a library's mmap, splits and merges), {@code uprobe_munmap(vma, start, end)},
 * {@code uprobe_dup_mmap(oldmm, newmm)} (fork: the child keeps the parent's mappings) and
 * {@code uprobe_clear_state(mm)} (the mm is freed). Each VMA's {@code vm_start}, {@code vm_end},
 * {@code vm_pgoff}, {@code vm_flags} and file are read through the kernel's BTF; the file is
 * named by its dentry path (walked up {@code d_parent} to the root), kept only when it is one of
 * the watched files. The cost is one host stop per such kernel call, whatever the number of
 * uprobes, and none while no uprobe is registered ({@link #install} is not called then).
 */
public final class UprobeMappings {
    /** {@code PAGE_SHIFT}: 4 KiB pages on both guests. */
    private static final int PAGE_SHIFT = 12;
    /** {@code VM_EXEC}. */
    private static final long VM_EXEC = 0x4;
    /** The deepest directory walk and the longest name read (NAME_MAX). */
    private static final int MAX_DEPTH = 64, NAME_MAX = 255;
    /** The hooked functions, in Linux's names. */
    public static final List<String> HOOKS = List.of("uprobe_mmap", "uprobe_munmap", "uprobe_dup_mmap", "uprobe_clear_state");

    /** One VMA of a watched file in one mm. */
    public record Mapping(long mm, String file, long start, long end, long pgoff, boolean exec) {
        /** The address of file offset {@code offset} in this mapping, or -1 when the mapping does not cover it. */
        public long addressOf(long offset) {
            long va = start + offset - (pgoff << PAGE_SHIFT);
            return Long.compareUnsigned(va, start) >= 0 && Long.compareUnsigned(va, end) < 0 ? va : -1;
        }
    }

    private final Machine machine;
    private final Set<String> files;
    private final Map<Long, List<Mapping>> byMm = new HashMap<>();
    private final Map<String, Long> hooks = new HashMap<>();
    private final int[] argRegs;
    // offsets from BTF
    private final long vmStart, vmEnd, vmMm, vmPgoff, vmFlags, vmFile, fileDentry, dParent, dNameName;
    private long calls;
    private final List<java.util.function.Consumer<Mapping>> onMapped = new ArrayList<>();

    /**
     * @param files the watched files, as canonical absolute paths ({@code /bin/busybox})
     */
    public UprobeMappings(Machine machine, Btf btf, SymbolTable symbols, Set<String> files) {
        this.machine = Objects.requireNonNull(machine);
        this.files = Set.copyOf(files);
        this.argRegs = machine.arch() == Arch.X86_64 ? new int[] {X86Reg.RDI, X86Reg.RSI, X86Reg.RDX}
                : new int[] {Arm64Reg.X0, Arm64Reg.X1, Arm64Reg.X2};
        this.vmStart = bytes(btf, "vm_area_struct", "vm_start");
        this.vmEnd = bytes(btf, "vm_area_struct", "vm_end");
        this.vmMm = bytes(btf, "vm_area_struct", "vm_mm");
        this.vmPgoff = bytes(btf, "vm_area_struct", "vm_pgoff");
        this.vmFlags = bytes(btf, "vm_area_struct", "vm_flags");
        this.vmFile = bytes(btf, "vm_area_struct", "vm_file");
        this.fileDentry = bytes(btf, "file", "f_path.dentry");
        this.dParent = bytes(btf, "dentry", "d_parent");
        this.dNameName = bytes(btf, "dentry", "d_name.name");
        for (String h : HOOKS) {
            var s = symbols.byName(h).orElseThrow(() -> new IllegalArgumentException(
                    "the kernel has no " + h + " (CONFIG_UPROBES off): no user-space probes"));
            hooks.put(h, s.address());
        }
    }

    private static long bytes(Btf btf, String struct, String path) {
        return btf.offsetOf(struct, path).bitOffset() / 8;
    }

    /** Places the host breakpoints on the four hooks. */
    public void install() {
        machine.addBreakpoint(hooks.get("uprobe_mmap"), (m, at) -> { calls++; mapped(arg(0)); return true; });
        machine.addBreakpoint(hooks.get("uprobe_munmap"), (m, at) -> { calls++; unmapped(read(arg(0) + vmMm), arg(1), arg(2)); return true; });
        machine.addBreakpoint(hooks.get("uprobe_dup_mmap"), (m, at) -> { calls++; duplicated(arg(0), arg(1)); return true; });
        machine.addBreakpoint(hooks.get("uprobe_clear_state"), (m, at) -> { calls++; byMm.remove(arg(0)); return true; });
    }

    /** Removes the host breakpoints (the last uprobe is gone); the map is forgotten. */
    public void uninstall() {
        for (long a : hooks.values()) machine.removeBreakpoint(a);
        byMm.clear();
    }

    /** The watched mappings of {@code mm}, in the order they were made. */
    public List<Mapping> mappings(long mm) {
        return Collections.unmodifiableList(byMm.getOrDefault(mm, List.of()));
    }

    /** Every mm that maps a watched file now, with its mappings. */
    public Map<Long, List<Mapping>> all() {
        Map<Long, List<Mapping>> out = new HashMap<>();
        byMm.forEach((k, v) -> out.put(k, List.copyOf(v)));
        return out;
    }

    /** Calls {@code listener} with each watched mapping as the guest makes it (where a uprobe gets placed in that mm). */
    public void onMapped(java.util.function.Consumer<Mapping> listener) {
        onMapped.add(Objects.requireNonNull(listener));
    }

    /** Calls {@code listener} with each watched mapping a fork copies into the child's mm (the child keeps the parent's probes). */
    public void onCopied(java.util.function.Consumer<Mapping> listener) {
        onCopied.add(Objects.requireNonNull(listener));
    }

    private final List<java.util.function.Consumer<Mapping>> onCopied = new ArrayList<>();

    /** How many times the guest called a hooked function (each a host stop). */
    public long hookCalls() { return calls; }

    private long arg(int i) { return machine.engine().regRead(argRegs[i]); }

    private long read(long va) { return machine.readVirtualLong(va); }

    private void mapped(long vma) {
        long file = read(vma + vmFile);
        if (file == 0) return;
        String path = dentryPath(read(file + fileDentry));
        if (path == null || !files.contains(path)) return;
        long mm = read(vma + vmMm), start = read(vma + vmStart), end = read(vma + vmEnd);
        Mapping m = new Mapping(mm, path, start, end, read(vma + vmPgoff), (read(vma + vmFlags) & VM_EXEC) != 0);
        List<Mapping> list = byMm.computeIfAbsent(mm, k -> new ArrayList<>());
        cut(list, start, end);           // a VMA merged or split anew replaces what covered its range
        list.add(m);
        for (var l : onMapped) l.accept(m);
    }

    private void unmapped(long mm, long start, long end) {
        List<Mapping> list = byMm.get(mm);
        if (list == null) return;
        cut(list, start, end);
        if (list.isEmpty()) byMm.remove(mm);
    }

    private void duplicated(long oldMm, long newMm) {
        List<Mapping> parent = byMm.get(oldMm);
        if (parent == null) return;
        List<Mapping> child = new ArrayList<>();
        for (Mapping p : parent) child.add(new Mapping(newMm, p.file(), p.start(), p.end(), p.pgoff(), p.exec()));
        byMm.put(newMm, child);
        // the child's copies of the parent's pages keep the breakpoints (Linux: dup_mmap copies the
        // VMAs, uprobe_dup_mmap only marks the mm)
        for (Mapping m : child) for (var l : onCopied) l.accept(m);
    }

    /** Removes [start, end) from the mappings, keeping the parts outside it. */
    private static void cut(List<Mapping> list, long start, long end) {
        List<Mapping> out = new ArrayList<>();
        for (Mapping m : list) {
            if (Long.compareUnsigned(m.end(), start) <= 0 || Long.compareUnsigned(m.start(), end) >= 0) { out.add(m); continue; }
            if (Long.compareUnsigned(m.start(), start) < 0)
                out.add(new Mapping(m.mm(), m.file(), m.start(), start, m.pgoff(), m.exec()));
            if (Long.compareUnsigned(m.end(), end) > 0)
                out.add(new Mapping(m.mm(), m.file(), end, m.end(), m.pgoff() + ((end - m.start()) >>> PAGE_SHIFT), m.exec()));
        }
        list.clear();
        list.addAll(out);
    }

    /** The dentry's path from its file system's root ({@code /bin/busybox}), or null when unreadable. */
    private String dentryPath(long dentry) {
        List<String> names = new ArrayList<>();
        try {
            for (int depth = 0; depth < MAX_DEPTH; depth++) {
                long parent = read(dentry + dParent);
                if (parent == dentry || parent == 0) break;
                names.add(cString(read(dentry + dNameName)));
                dentry = parent;
            }
        } catch (RuntimeException unreadable) {
            return null;
        }
        Collections.reverse(names);
        return "/" + String.join("/", names);
    }

    /** A NUL-terminated name of at most NAME_MAX bytes, read a page at a time (never past its page). */
    private String cString(long va) {
        StringBuilder sb = new StringBuilder();
        while (sb.length() <= NAME_MAX) {
            int chunk = (int) Math.min(NAME_MAX + 1 - sb.length(), 4096 - (va & 4095));
            byte[] b = machine.readVirtual(va, chunk);
            for (byte c : b) {
                if (c == 0) return sb.toString();
                sb.append((char) (c & 0xff));
            }
            va += chunk;
        }
        return sb.toString();
    }
}
