/**
 * Module <code>emulator</code>, package <code>dev.kpemu.machine</code>.
 *
 * <p>the arch-neutral <code>Machine</code>: <code>GuestMemory</code> (named physical regions; RAM is host memory, <code>HostRam</code>, an anonymous <code>mmap</code> the engine maps with <code>uc_mem_map_ptr</code>, so the host reads guest RAM in place — page walks and probe fetches make no engine call — while its writes still go through the engine's memory API, as before; every region is mapped into every engine the machine has, <code>Machine.openSecondaryEngine</code>'s included, the seed of one engine per vCPU), <code>DeviceBus</code> (MMIO and port I/O to <code>Device</code>s, hooked in every engine; <code>Machine.invalidateCode</code> drops code in every engine), <code>VirtualClock</code>, <code>InstructionClock</code> (with <code>GranuleBitmap</code>, its one test per block for guarded text and, on arm64, host breakpoints; on x86, <code>Machine.keepStackPageWritable</code>: at each slice's first block, the stack page of a stack pointer in a code-free range, Linux's .data, marked dirty in Unicorn's TLB with Unicorn's own <code>tlb_set_dirty</code>, so its stores leave the slow path Unicorn keeps for writable and executable mappings; and <code>Machine.keepStringStoresWritable</code>: the pages a rep string instruction stores to in a code-free range, Linux's .bss and .brk that clear_bss zeroes, marked the same way after a few iterations, on the boot vCPU until the range has been stored over), <code>StopReason</code>, the run loop, virtual-memory access through <code>PageTableWalker</code>; <code>Watchpoints</code> (data watchpoints on physical ranges in every engine: watched pages read-only with a WRITE_PROT hook that performs the store, reads by a bounded MEM_READ hook; <code>Machine.changeMemoryMap</code> for any page-permission change on a running guest: whole TLB, code and block cache dropped, x86 CPU state kept; docs/watchpoint-notes.md); vCPUs (<code>Machine.addCpu</code>; on a booted kernel: arm64's <code>Arm64Board</code> of N PEs, below; x86's <code>X86Pc</code> of N CPUs on the APIC board, below: each an engine joined as above with its own <code>InstructionClock</code>, run state and interrupt latch or controller; <code>engine()</code>, <code>pc()</code>, registers and page walks answer for the *current* vCPU, <code>cpu()</code>) run in turn on the run loop's thread in quanta of guest instructions on a <code>Schedule</code> (a seed: <code>Schedule.DEFAULT_SEED</code> a round-robin of 10,000-instruction quanta, any other a seeded draw of order and quanta), halted vCPUs skipped, arm64 monitors cleared at each switch (<code>arm64.ExclusiveMonitor</code>); with one vCPU the run loop is the one it always was; one <code>IrqLine</code> (a device's interrupt output, QEMU's <code>qemu_irq</code>) and one <code>InterruptController</code> (input lines, the output to the CPU, the acknowledge: the 8259 pair's INTA vector, the GIC's GICC_IAR), which the machine holds for both backends
 * <p>Module <code>base</code> holds <code>Arch</code> of this package: the guest architectures (<code>X86_64</code>, <code>ARM64</code>; Linux's names, parsing). <code>base</code> is what <code>decoder</code> needs without the emulator; packages keep their names, so a class moved here changed no import
 *
 * <p><b>How a run flows.</b>
 * <ol><li>
 * <b>Set-up.</b> {@code X86Machine.create(ram)} / {@code Arm64Machine.create(ram)} opens a Unicorn
 * engine (CPU model first; arm64 also gets the SCR_EL3/HCR_EL2 fix so EL1 uses AArch64 tables),
 * maps RAM as named regions and installs the backend's hooks: the interrupt hook (every guest
 * exception), invalid-instruction, {@code syscall} (x86), HVC (arm64), and the C block hook of the
 * instruction clock. Devices attach to the {@code DeviceBus} (MMIO windows become Unicorn MMIO
 * mappings; x86 ports go through IN/OUT instruction hooks).
 * </li><li>
 * <b>Run loop</b> ({@code Machine.run(budget)}): fire due {@code VirtualClock} events (timers),
 * let the backend inject a pending interrupt if the CPU state allows it (RFLAGS.IF outside the
 * shadow of {@code sti}/{@code mov ss}, PSTATE.I), else turn on the C hook's interrupt-enable
 * watch (the slice ends before the first block where the guest unmasks), arm the instruction
 * deadline (the smaller of the slice, the budget and the next timer event), and start the engine.
 * It returns when the C hook stops it before a block that would pass the deadline, when a host
 * hook requested a stop, or by itself on HLT/WFI, which idles the clock forward to the next event.
 * </li><li>
 * <b>Guest exceptions.</b> Unicorn only reports them to the interrupt hook and never enters the
 * guest's handler; the backend does what the CPU would:
 * <ul><li>
 * x86: read the IDT gate, pick the stack (IST, RSP0 on a privilege change), push SS, RSP, RFLAGS,
 * CS, RIP and the error code, clear IF for interrupt gates, jump. The #PF error code and the
 * "exception in flight" marker (which Unicorn never clears, turning the second fault into #DF)
 * live in Unicorn's saved context; their offsets are found at start-up by calibration on a
 * throwaway engine ({@code X86ContextLayout}), never hard-coded.
 * </li><li>
 * arm64: vector offset by source EL/SP and type, ELR/SPSR/ESR/FAR, PSTATE = EL1h masked. ESR and
 * FAR come from QEMU's own syndrome in the context ({@code ExceptionStateLayout}, calibrated the
 * same way); a system-register write after PSTATE changes makes Unicorn rebuild its cached EL.
 * </li><li>
 * System calls, the most frequent crossing of a guest workload, are entered by native hooks in
 * kpemu's C library ({@code emulator/src/main/c}, built by {@code scripts/fetch-natives.sh} with
 * the clock): x86 {@code syscall} ({@code NativeSyscall}, {@code kpemu_x86_syscall.c}: RCX/R11,
 * CS/SS, the CPL and RIP = LSTAR in a saved context at {@code X86ContextLayout}'s offsets, RFLAGS
 * masked by FMASK; the Java hook only for #UD when EFER.SCE is clear) and arm64 {@code svc} from
 * EL0 ({@code NativeSvc}, {@code kpemu_arm64_svc.c}: the machine's interrupt hook; it takes an
 * AArch64 SVC from EL0 as {@code takeException} does once the Java path has verified VBAR_EL1's
 * vector, with ESR_EL1 made from the SVC's imm16 as QEMU makes it, and passes every other
 * exception to the Java hook). No Java upcall per system call; the same instructions run (a boot's
 * instruction count is unchanged on both arches).
 * </li><li>
 * x86 edits of the CPU state Unicorn's register API cannot reach (the CPL, the segment caches) or
 * should not use (RIP inside the exception hooks) go through a <i>prefix context</i> ({@code
 * Unicorn.contextAllocPrefix}): Unicorn 2.1.4's x86 save and restore copy as many bytes as the
 * context's header says, so a context whose size covers RIP, hflags and the CS/SS caches (a few
 * hundred bytes) saves and restores only those instead of the whole 5.5 KB state. RIP set that way
 * inside the interrupt and invalid-instruction hooks ({@code X86Machine.setPc}, the native {@code
 * syscall} hook) spares Unicorn's exit from and re-entry into its execution loop that a register
 * write of RIP forces; after those hooks the engine looks the next block up from RIP anyway.
 * </li><li>
 * Breakpoints (int3, BRK) go first to the machine's {@code TrapHandler} — the kprobes engine — and
 * reach the guest only when the host declines them. A breakpoint copies no CPU context: x86's
 * {@code int3} leaves no exception-in-flight marker (QEMU sets it for faults only), and arm64
 * reads the BRK's syndrome only when the handler wants the immediate ({@code
 * TrapHandler.usesBreakpointImmediate}; the kprobes engine tells its traps by address) or the
 * guest takes the exception.
 * </li></ul>
 * </li><li>
 * <b>Time.</b> Guest time is executed instructions × a nominal period (1 ns), plus idle jumps;
 * never host time, so two runs of the same workload see the same clock. A block is charged when it
 * starts (a block cut short by an exception is charged in full); x86 blocks' counts are cached by
 * address and size, the entry rewritten by a {@code UC_HOOK_EDGE_GENERATED} hook whenever Unicorn
 * translates a block ({@code kpemu_clock_tb_generated}), so a block re-translated after the guest
 * rewrote its text is charged its own count. x86 {@code rdtsc}/{@code rdtscp} and arm64 {@code
 * CNTVCT_EL0}/{@code CNTPCT_EL0} read this clock too, in C (native instruction hooks in {@code
 * kpemu_clock.c}, Unicorn 2.1.4; arm64: the system-register filter computes {@code
 * VirtualClock.liveNanos()} from offsets the run loop sets before each slice), and the CPU is
 * qemu64 without RDRAND/RDSEED, so no host state reaches the guest: the same kernel, initramfs and
 * probes give byte-identical console and trace on both arches ({@code DeterministicRunTest}). Its
 * CPUID shows CX16, but the engines run a model without it and kpemu's native #UD hook executes
 * {@code cmpxchg16b}: Unicorn 2.1.4's own can take an earlier instruction's operand for RFLAGS
 * ({@code X86Pc.cpuPolicy}, {@code X86Cmpxchg16bFlagsTest}). It carries QEMU
 * 7.2's qemu64 signature (family 15, model 107, stepping 1) and leaf 0xB, so Linux takes the
 * reference machine's AMD paths; what the guest sees of its CPU is compared with QEMU's in {@code
 * CpuModelTest} ({@code guest-images/record-cpu.sh}), whose documented remainder is TSC and APIC.
 * </li><li>
 * <b>Stopping rules</b> (from measurements, {@code ../shared/reference/unicorn-facts.md}): never
 * stop the engine from another thread or with Unicorn's {@code timeout} (both corrupt state);
 * never stop it from a memory or MMIO callback (the access replays) — devices record and the run
 * loop acts at the next safe point; never mix {@code count}-limited and uncounted runs on one
 * engine (the engine never runs a nested {@code uc_emu_start}; the bare-metal tests' fixture
 * {@code GuestFunctionCall}, in kprobes' test-jar, does, for handlers that call a guest function).
 * </li><li>
 * <b>No Unicorn code hooks while a guest runs</b> (a rule from 2.1.1, kept; 2.1.4 no longer shows
 * the fault: {@code CodeHookRewindTest} now asserts that). Measured on 2.1.1: the mere presence of
 * a {@code UC_HOOK_CODE} (even bounded to an address never executed) makes a run stopped from a
 * block hook resume at the previous block's start with that block's effects kept, so it runs
 * twice; Debian's kernels break at once on both arches. Host breakpoints ({@code
 * Machine.addBreakpoint}) are therefore checked in C when Unicorn translates a block ({@code
 * kpemu_clock_tb_generated}, a {@code UC_HOOK_EDGE_GENERATED} hook, against a small address list):
 * they stop at block starts (function entries, branch targets), before the block runs. The host
 * drops the block at a break address from Unicorn's cache when it adds the break and after each
 * stop there, so every arrival is translated, and checked, again; a slice that resumes from a
 * break runs just that block ({@code InstructionClock.stopsBefore}/{@code afterSlice}). A running
 * block pays nothing for breaks. Java block hooks are fine.
 * </li></ol>
 */
package dev.kpemu.machine;
