/**
 * Module <code>emulator</code>, package <code>dev.kpemu.machine.arm64.devices</code>.
 *
 * <p>(Shared with <code>dev.kpemu.machine.x86.devices</code>.) one small class per device: 8259 PIC, 8254 PIT, 16550 UART, CMOS/RTC, ACPI PM, reset; GICv2, PL011, generic timer — for 1-8 PEs (issue 26: the GIC's SGI/PPI state and CPU interface banked per CPU, SGIs with their source CPU, SPIs routed by ITARGETSR; a pair of timers per PE on its own PPIs; the accessing CPU from a supplier the machine sets; <code>GicV2.cpuController(k)</code> is CPU k's view, the controller in front of vCPU k), wired for N PEs by <code>Arm64Board</code>; the APIC units for issue 26 (<code>IoApic</code>, <code>LocalApic</code> per vCPU, <code>ApicBus</code> routing their messages, IPIs and EOI broadcasts; <code>AcpiTables.madt</code> builds the MADT), on the x86 board as an option (below); each is <code>Stateful</code> (its snapshot state); a device's interrupt is an <code>IrqLine</code> it is given, the controllers implement <code>InterruptController</code>
 */
package dev.kpemu.machine.arm64.devices;
