/**
 * Module <code>emulator</code>, package <code>dev.kpemu.boot</code>.
 *
 * <p>booting Linux: <code>X86LinuxLoader</code> (64-bit boot protocol, e820, generated ACPI tables), <code>Arm64LinuxLoader</code> + <code>FdtWriter</code>/<code>Arm64DeviceTree</code> (device tree generated in Java; one <code>cpu&#64;i</code> node per vCPU of the machine, <code>enable-method</code> psci), <code>LinuxGuest</code> per arch, <code>BootRunner</code> (the shared boot loop, how the boot ended (<code>BootOutcome</code>), the guest-time limit), <code>BootHooks</code>, <code>ConsoleMonitor</code>; a command's terminal: <code>GuestTerminal</code> (the second UART's host side), <code>TerminalInput</code> + <code>TerminalFeed</code> (input polled on the virtual clock), <code>HostStop</code> (stop requests from other threads: signals, Ctrl-A x); <code>PhaseLog</code> (start-up timestamps, per-thread CPU and memory on stderr behind <code>-Dkpemu.phases</code>, for measuring where a run's time goes)
 */
package dev.kpemu.boot;
