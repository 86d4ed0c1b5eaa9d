/**
 * Module <code>emulator</code>, package <code>dev.kpemu.boot</code>.
 *
 * <p>booting Linux: <code>X86LinuxLoader</code> (64-bit boot protocol, e820, generated ACPI tables), <code>Arm64LinuxLoader</code> + <code>FdtWriter</code>/<code>Arm64DeviceTree</code> (device tree generated in Java; one <code>cpu&#64;i</code> node per vCPU of the machine, <code>enable-method</code> psci), <code>LinuxGuest</code> per arch, <code>BootRunner</code> (the shared boot loop, how the boot ended (<code>BootOutcome</code>), the guest-time limit), <code>BootHooks</code>, <code>ConsoleMonitor</code>; a command's terminal: <code>GuestTerminal</code> (the second UART's host side), <code>TerminalInput</code> + <code>TerminalFeed</code> (input polled on the virtual clock), <code>HostStop</code> (stop requests from other threads: signals, Ctrl-A x); <code>PhaseLog</code> (start-up timestamps, per-thread CPU and memory on stderr behind <code>-Dkpemu.phases</code>, for measuring where a run's time goes)
 *
 * <p><b>Booting Linux.</b>
 * {@code BootRunner.boot(options, hooks)} resolves the kernel and initramfs (Debian's, fetched by
 * {@code GuestImages}, unless given), lets the arch prepare a {@code LinuxGuest} — x86-64: {@code
 * X86Pc} (PIC, PIT, UART on IRQ 4, CMOS, ACPI PM for power-off; CPUID reports no local APIC, so
 * Linux picks the 8259 + PIT) loaded by the 64-bit boot protocol from the vmlinux extracted from
 * the bzImage; arm64: {@code Arm64Board} (GICv2, PL011, generic timer on the virtual clock, PSCI)
 * of {@code Options.cpus()} PEs on the schedule {@code Options.schedSeed()} names, with a device
 * tree generated in Java — then runs the machine in chunks until power-off (exit 0), panic or
 * unhandled fault (3, with the kernel's last lines and the symbolized PC) or the guest-time limit
 * (4). The top 2 MiB of RAM ({@code LinuxGuest.HostArea}) are left out of the guest's e820 map /
 * device tree: the host keeps its kprobe slots and trampolines there.
 * <p>
 * <b>Several CPUs on x86-64</b> ({@code BootRunner.Options.withCpus(n, seed)}, issue 26; the CLI
 * flag is not wired yet): the APIC board with N vCPUs on the seed's {@code Schedule}; Linux starts
 * the APs itself (INIT/SIPI, its real-mode trampoline). Two things Unicorn cannot do are done by
 * {@code X86LinuxGuest} at host breakpoints (guest text untouched), only with N &gt; 1:
 * IA32_APIC_BASE (MSR 0x1B, read as 0 by Unicorn) answered from the CPU's local APIC in the
 * paravirt {@code native_read_msr}/{@code native_write_msr} functions, and text the kernel patches
 * after boot dropped in each CPU's engine when that CPU runs {@code do_sync_core} ({@code
 * __text_poke} records the ranges). docs/smp-notes.md step 4 has the details and figures.
 *
 * <p><b>A command in the guest ({@code kpemu boot -- CMD}, {@code -i}, {@code --input}).</b>
 * The CLI builds the initramfs ({@code GuestInitramfs}: kpemu's busybox guest, {@code
 * CommandGuest}'s /init, the {@code --add} files) and gives {@code BootRunner.Options} a {@code
 * GuestTerminal}: the machine then has a second UART — x86-64 COM2 (0x2f8, IRQ 3, {@code ttyS1}),
 * arm64 a second PL011 at 0x09040000 (SPI 2, {@code ttyAMA1}, with {@code /aliases} so the console
 * stays {@code ttyAMA0}) — whose output goes to the host's stream; boots without a command do not
 * get it, so their runs (and recorded timestamps) are unchanged. /init runs the command on that
 * UART (batch: stdin {@code /dev/null}, {@code stty -onlcr -echo}; terminal session: {@code setsid
 * -c}, cooked mode) and, after closing it (which waits until the output has drained), writes
 * {@code KPEMU-EXIT-STATUS=N} to {@code /dev/kmsg} at level 0: the console driver prints a log
 * record in one piece, and {@code ConsoleMonitor} hands the line to {@code
 * BootRunner.Result.commandExit} (an {@code --append} without {@code console=} gets the first UART
 * added, {@code CommandGuest.commandLine}; a kernel without the second port makes /init say so on
 * the console, and the CLI prints that one line).
 * <p>
 * Input: {@code TerminalFeed} is an event on the guest clock every 10 ms (1 ms while bytes wait
 * for FIFO space) that asks the {@code TerminalInput} for bytes and puts them in the UART's
 * receive FIFO, raising its receive interrupt (16550: IIR "received data", PL011: RX/RT in RIS).
 * The live source ({@code InteractiveTerminal}) holds the guest back to host time when it is ahead
 * (an idle guest would otherwise race through its timers) and records each delivery with its guest
 * time; the replayed source ({@code ReplayedInput}) delivers each recorded entry at the same poll,
 * so a replay is the same run. Stops from other threads ({@code HostStop}: SIGINT/SIGTERM through
 * {@code Signals}, Ctrl-A x) go through {@code Machine.requestStopFromAnyThread}, read by the run
 * loop between slices; the boot ends with {@code StopReason.HostRequest} and the CLI still flushes
 * the trace and prints the tables.
 * <p>
 * <b>Guest-time limit.</b> {@code BootRunner} schedules the limit as a clock event ({@code
 * StopReason.GuestTimeLimit}): a running slice ends at it, and idling (HLT, WFI) jumps no further
 * than it, so {@code --timeout N} stops at N guest seconds whatever the guest does (before, an
 * idle guest whose next timer was two minutes away jumped past the limit).
 */
package dev.kpemu.boot;
