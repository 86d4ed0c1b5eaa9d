/**
 * kpemu's boards, one per arch: {@link dev.kpemu.machine.board.X86Pc} and
 * {@link dev.kpemu.machine.board.Arm64Board}. A board is the composition of a per-arch machine
 * ({@code machine.x86}, {@code machine.arm64}) with its devices ({@code .devices}): it attaches
 * them to the bus at the arch's layout, connects their {@link dev.kpemu.machine.IrqLine}s to the
 * {@link dev.kpemu.machine.InterruptController} and registers their snapshot state. Boards sit
 * above the machine and device packages and below {@code dev.kpemu.boot}, which loads Linux onto
 * them; the bare-metal tests build on them too. (QEMU keeps its boards apart in the same way:
 * {@code hw/i386/pc.c}, {@code hw/arm/virt.c}, beside the CPU targets and the device models.)
 *
 * <p>the boards, both in one package: <code>X86Pc</code> (the 8259 pair, PIT, two 16550s, CMOS, ACPI PM and tables, reset, the CPUID policy; <code>X86Pc.Interrupts</code>: <code>PIC</code>, the default, the 8259 pair alone, or <code>APIC</code>, QEMU's <code>pc</code> — a <code>LocalApic</code> per CPU as that vCPU's <code>InterruptController</code> with the 8259 on its LINT0 (ExtINT) and its NMI through <code>machine.x86.NmiSource</code>, an <code>IoApic</code> on every ISA IRQ (the PIT on pin 2), the MADT in the XSDT, CPUID's APIC bit; <code>BootRunner.Options.withX86Apic</code>, hidden <code>boot --x86-apic</code>; 1-8 CPUs on the APIC board (<code>BootRunner.Options.withCpus</code>, which implies it): one vCPU each, CPUID in QEMU's <code>-smp N</code> topology, APs started by INIT/SIPI in real mode, <code>X86Machine.startAtSipi</code>) and <code>Arm64Board</code> (GICv2, generic timer, PL011s, at <code>Arm64Layout</code>'s addresses and interrupts; with N &gt; 1 PEs, as QEMU's <code>virt -smp N</code>: vCPUs 1..N-1 added stopped, <code>GicV2(N)</code> with each vCPU's CPU view in front of it, <code>GenericTimer(N)</code> hooked in every engine, each PE's MPIDR through VMPIDR_EL2, PSCI CPU_ON/CPU_OFF on <code>Machine.startCpu</code>/<code>stopCpu</code>); a board composes a per-arch machine with its devices — bus addresses, <code>IrqLine</code>s into the controller, <code>Machine.registerState</code> — and knows nothing of Linux: it sits above <code>machine.x86</code>/<code>.arm64</code> and their devices and below <code>boot</code>, and the bare-metal tests use it as the Linux guests do (as QEMU keeps <code>hw/i386/pc.c</code> and <code>hw/arm/virt.c</code> apart from the CPUs and the device models)
 */
package dev.kpemu.machine.board;
