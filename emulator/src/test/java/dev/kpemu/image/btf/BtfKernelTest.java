package dev.kpemu.image.btf;

import static org.junit.jupiter.api.Assertions.*;

import dev.kpemu.image.ElfImage;
import dev.kpemu.image.GuestImages;
import dev.kpemu.image.SymbolTable;
import dev.kpemu.machine.Arch;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

/** The BTF of Debian's real kernels (x86-64 vmlinux with section headers; arm64 raw Image). */
@Tag("kernel")
class BtfKernelTest {
    static GuestImages images;
    static final Map<Arch, BtfLocator.Found> found = new EnumMap<>(Arch.class);
    static final Map<Arch, SymbolTable> symbols = new EnumMap<>(Arch.class);
    static final Map<Arch, KernelStructs> structs = new EnumMap<>(Arch.class);

    @BeforeAll
    static void load() throws Exception {
        images = GuestImages.forRepository();
        for (Arch a : Arch.values()) {
            symbols.put(a, images.symbols(a));
            BtfLocator.Found f = BtfLocator.forGuest(images, a, symbols.get(a));
            found.put(a, f);
            structs.put(a, KernelStructs.of(f.btf(), symbols.get(a), a));
            System.out.println(a.linuxName() + ": " + f);
            System.out.println(a.linuxName() + ": " + structs.get(a));
        }
    }

    @Test
    void x86BtfIsTheElfSection() throws Exception {
        BtfLocator.Found f = found.get(Arch.X86_64);
        assertEquals(BtfLocator.Method.ELF_SECTION, f.method());
        ElfImage elf = ElfImage.read(images.vmlinux(Arch.X86_64));
        ElfImage.Section s = elf.section(".BTF").orElseThrow();
        assertEquals(s.offset(), f.fileOffset());
        assertEquals(s.size(), f.size(), "the blob fills the section exactly");
        // kallsyms brackets it too (KALLSYMS_ALL=y on amd64)
        assertEquals(symbols.get(Arch.X86_64).address("__start_BTF"), f.vaddr().orElseThrow());
        assertEquals(symbols.get(Arch.X86_64).address("__stop_BTF"), f.vaddr().orElseThrow() + f.size());
        // the same blob is what a scan of the whole file finds
        BtfLocator.Found scanned = BtfLocator.scan(elf.bytes(), "vmlinux");
        assertEquals(f.fileOffset(), scanned.fileOffset());
        assertEquals(f.btf().typeCount(), scanned.btf().typeCount());
    }

    @Test
    void aScanInWindowsFindsWhatAScanOfTheWholeFileFinds() throws Exception {
        for (var path : List.of(images.vmlinux(Arch.X86_64), images.kernel(Arch.ARM64))) {
            var file = dev.kpemu.image.OnDemandFileBytes.of(path, Files.size(path));
            BtfLocator.Found windows = BtfLocator.scan(file, path.toString());
            BtfLocator.Found whole = BtfLocator.scan(Files.readAllBytes(path), path.toString());
            assertEquals(whole.fileOffset(), windows.fileOffset(), path.toString());
            assertEquals(whole.size(), windows.size(), path.toString());
            assertEquals(whole.detail(), windows.detail(), path.toString());
            assertEquals(whole.btf().typeCount(), windows.btf().typeCount(), path.toString());
            assertFalse(file.loaded(), "the scan kept no copy of " + path);
        }
    }

    @Test
    void readAnyKernelFile() throws Exception {
        BtfLocator.Found bz = BtfLocator.read(images.kernel(Arch.X86_64));   // bzImage: decompressed first
        assertEquals(found.get(Arch.X86_64).btf().typeCount(), bz.btf().typeCount());
        assertEquals(found.get(Arch.X86_64).fileOffset(), bz.fileOffset());
        BtfLocator.Found arm = BtfLocator.read(images.kernel(Arch.ARM64));
        assertEquals(found.get(Arch.ARM64).fileOffset(), arm.fileOffset());
    }

    @Test
    void arm64BtfIsFoundByItsHeader() throws Exception {
        BtfLocator.Found f = found.get(Arch.ARM64);
        SymbolTable t = symbols.get(Arch.ARM64);
        assertTrue(t.byName("__start_BTF").isEmpty(), "arm64 kallsyms has no data symbols (KALLSYMS_ALL off)");
        assertEquals(BtfLocator.Method.MAGIC_SCAN, f.method());
        assertEquals("", f.detail().replace("no __start_BTF in kallsyms", ""), "exactly one blob parses");
        // inside the Image, after the text
        long end = Files.size(images.kernel(Arch.ARM64));
        assertTrue(f.fileOffset() > t.fileOffset(t.address("_etext")).orElseThrow() && f.fileOffset() + f.size() <= end);
        assertEquals(t.linkBase() + f.fileOffset(), f.vaddr().orElseThrow());
    }

    @Test
    void blobsParseCompletely() {
        for (Arch a : Arch.values()) {
            Btf btf = found.get(a).btf();
            Btf.Header h = btf.header();
            assertEquals(24, h.hdrLen());
            assertEquals(1, h.version());
            assertEquals(found.get(a).size(), h.totalLength());
            assertTrue(btf.typeCount() > 50_000 && btf.typeCount() < 300_000, a + ": " + btf.typeCount());
            assertEquals(8, btf.pointerSize());
            // every composite's ordinary members lie inside it (a misparse shows up here quickly)
            int structs = 0;
            for (BtfType t : btf.types()) {
                if (t == null || !t.kind().isComposite()) continue;
                structs++;
                for (BtfType.Member m : t.members()) {
                    if (m.isBitfield()) {
                        assertTrue(m.bitOffset() + m.bitfieldSize() <= t.size() * 8, a + " " + t + "." + m.name());
                        continue;
                    }
                    BtfType r = btf.resolve(m.typeId());
                    if (r.kind() == BtfKind.ARRAY && r.array().nelems() == 0) continue;   // flexible array
                    assertTrue(m.byteOffset() + btf.sizeOf(m.typeId()) <= t.size(), a + " " + t + "." + m.name());
                }
            }
            assertTrue(structs > 5000, a + ": " + structs + " structs/unions");
        }
    }

    @Test
    void taskStruct() {
        for (Arch a : Arch.values()) {
            Btf btf = found.get(a).btf();
            BtfType task = btf.structByName("task_struct").orElseThrow();
            assertEquals(1, btf.byName("task_struct").stream().filter(t -> t.kind() == BtfKind.STRUCT).count(), "one definition (deduplicated BTF)");
            assertTrue(task.size() > 2000, a + ": " + task.size());
            Btf.Field comm = btf.member(task, "comm").orElseThrow();
            assertEquals(16, comm.size());
            assertEquals("char[16]", btf.typeName(comm.typeId()));
            for (String m : List.of("pid", "tgid")) {
                Btf.Field f = btf.offsetOf("task_struct", m);
                assertEquals(4, f.size(), m);
                assertEquals("pid_t", btf.typeName(f.typeId()));
                assertEquals("int", btf.typeName(btf.resolve(f.typeId()).id()));
            }
            KernelStructs k = structs.get(a);
            assertEquals(16, k.commLength());
            assertEquals(comm.offset(), k.commOffset());
            assertEquals(k.pidOffset() + 4, k.tgidOffset(), "pid_t pid; pid_t tgid;");
            // thread_info is first (THREAD_INFO_IN_TASK on both arches)
            assertEquals(0, btf.offsetOf("task_struct", "thread_info.flags").offset());
            assertEquals(task.size(), k.taskStructSize());
        }
    }

    @Test
    void doSysOpenat2Prototype() {
        for (Arch a : Arch.values()) {
            Btf btf = found.get(a).btf();
            Btf.FuncSignature f = btf.funcProto("do_sys_openat2").orElseThrow();
            assertEquals(List.of("dfd", "filename", "how"), f.paramNames(), a.toString());
            assertEquals(List.of("int", "const char *", "struct open_how *"),
                    f.params().stream().map(p -> btf.typeName(p.typeId())).toList());
            assertEquals("long int", btf.typeName(f.returnTypeId()));
            assertFalse(f.variadic());
            assertEquals(24, btf.sizeOf(btf.structByName("open_how").orElseThrow()));
            assertEquals(List.of(0L, 8L, 16L), List.of("flags", "mode", "resolve").stream()
                    .map(m -> btf.offsetOf("open_how", m).offset()).toList());
        }
    }

    @Test
    void archesAgreeWhereTheyMust() {
        Btf x = found.get(Arch.X86_64).btf(), r = found.get(Arch.ARM64).btf();
        assertEquals(x.offsetOf("task_struct", "comm").size(), r.offsetOf("task_struct", "comm").size());
        for (String s : List.of("open_how", "list_head", "qstr", "path", "timespec64")) {
            assertEquals(x.sizeOf(x.structByName(s).orElseThrow()), r.sizeOf(r.structByName(s).orElseThrow()), s);
        }
        assertEquals(x.funcProto("do_sys_openat2").orElseThrow().paramNames(), r.funcProto("do_sys_openat2").orElseThrow().paramNames());
        // the layouts differ (arch-specific members), so the offsets are looked up, not shared
        assertNotEquals(structs.get(Arch.X86_64).commOffset(), structs.get(Arch.ARM64).commOffset());
    }

    @Test
    void x86CurrentTask() {
        KernelStructs k = structs.get(Arch.X86_64);
        KernelStructs.CurrentTask c = k.currentTask();
        assertEquals(KernelStructs.CurrentTaskSource.X86_PERCPU, c.source());
        Btf btf = k.btf();
        if (btf.structByName("pcpu_hot").isPresent()) {
            assertEquals("pcpu_hot", c.symbol());
            assertEquals(btf.offsetOf("pcpu_hot", "current_task").offset(), c.memberOffset());
        } else {
            assertEquals("current_task", c.symbol());
            assertEquals(0, c.memberOffset());
            assertEquals("struct task_struct *", btf.typeName(btf.variable("current_task").orElseThrow().typeId()));
        }
        assertEquals(symbols.get(Arch.X86_64).address(c.symbol()) + c.memberOffset(), c.gsOffset());
        assertEquals(btf.variable(c.symbol()).orElseThrow().offset(), symbols.get(Arch.X86_64).address(c.symbol()));
        // and without kallsyms, from the BTF's .data..percpu alone
        assertEquals(c.gsOffset(), assertDoesNotThrow(() -> KernelStructs.of(btf, null, Arch.X86_64)).currentTask().gsOffset());
    }

    /** The kernel's own machine code uses the offsets BTF gives. */
    @Test
    void x86MachineCodeAgrees() throws Exception {
        KernelStructs k = structs.get(Arch.X86_64);
        ElfImage elf = ElfImage.read(images.vmlinux(Arch.X86_64));
        SymbolTable t = symbols.get(Arch.X86_64);
        // __x64_sys_getpid: mov %gs:disp32, %rdi (65 48 8b 3c 25 disp32) reads current
        byte[] getpid = elf.bytesAt(t.address("__x64_sys_getpid"), (int) t.byName("__x64_sys_getpid").orElseThrow().size());
        assertTrue(containsGsLoad(getpid, k.currentTask().gsOffset()), "getpid reads %gs:0x" + Long.toHexString(k.currentTask().gsOffset()));
        // __get_task_comm: lea disp32(%reg), %rsi with disp32 = comm
        byte[] gtc = elf.bytesAt(t.address("__get_task_comm"), (int) t.byName("__get_task_comm").orElseThrow().size());
        assertTrue(containsLeaDisp32(gtc, k.commOffset()), "__get_task_comm uses comm at 0x" + Long.toHexString(k.commOffset()));
    }

    @Test
    void arm64MachineCodeAgrees() throws Exception {
        KernelStructs k = structs.get(Arch.ARM64);
        SymbolTable t = symbols.get(Arch.ARM64);
        byte[] image = Files.readAllBytes(images.kernel(Arch.ARM64));
        long at = t.fileOffset(t.address("__get_task_comm")).orElseThrow();
        int size = (int) t.byName("__get_task_comm").orElseThrow().size();
        ByteBuffer b = ByteBuffer.wrap(image).order(ByteOrder.LITTLE_ENDIAN);
        boolean found = false;
        for (int i = 0; i < size; i += 4) {
            int w = b.getInt((int) at + i);
            // ADD Xd, Xn, #imm12 (64-bit, no shift)
            if ((w & 0xffc00000) == 0x91000000 && ((w >>> 10) & 0xfff) == k.commOffset()) found = true;
        }
        assertTrue(found, "__get_task_comm adds comm's offset 0x" + Long.toHexString(k.commOffset()));
        assertEquals(KernelStructs.CurrentTaskSource.ARM64_SP_EL0, k.currentTask().source());
    }

    private static boolean containsGsLoad(byte[] code, long disp) {
        for (int i = 0; i + 9 <= code.length; i++) {
            if ((code[i] & 0xff) == 0x65 && (code[i + 1] & 0xf8) == 0x48 && (code[i + 2] & 0xff) == 0x8b
                    && (code[i + 3] & 0xc7) == 0x04 && (code[i + 4] & 0xff) == 0x25
                    && ByteBuffer.wrap(code, i + 5, 4).order(ByteOrder.LITTLE_ENDIAN).getInt() == disp) return true;
        }
        return false;
    }

    private static boolean containsLeaDisp32(byte[] code, long disp) {
        for (int i = 0; i + 7 <= code.length; i++) {
            if ((code[i] & 0xf8) == 0x48 && (code[i + 1] & 0xff) == 0x8d && (code[i + 2] & 0xc0) == 0x80
                    && ByteBuffer.wrap(code, i + 3, 4).order(ByteOrder.LITTLE_ENDIAN).getInt() == disp) return true;
        }
        return false;
    }

    @Test
    void ptRegs() {
        KernelStructs x = structs.get(Arch.X86_64), r = structs.get(Arch.ARM64);
        assertEquals(21 * 8, x.ptRegsSize());
        assertEquals(14 * 8, x.ptRegs().get("di"));
        assertEquals(13 * 8, x.ptRegsOffset("si"));
        assertEquals(16 * 8, x.ptRegsOffset("ip"));
        assertEquals(19 * 8, x.ptRegsOffset("sp"));
        assertEquals(10 * 8, x.ptRegsOffset("ax"));
        // arm64: regs/sp/pc/pstate live in an anonymous struct inside an anonymous union
        assertEquals(0, r.ptRegsOffset("regs[0]"));
        assertEquals(3 * 8, r.ptRegsOffset("regs[3]"));
        assertEquals(31 * 8, r.ptRegs().get("sp"));
        assertEquals(32 * 8, r.ptRegsOffset("pc"));
        assertEquals(33 * 8, r.ptRegsOffset("pstate"));
        assertEquals(0, r.ptRegsOffset("user_regs"));
        assertTrue(r.ptRegs().containsKey("orig_x0"));
    }
}
