/**
 * kpemu's boards, one per arch: {@link dev.kpemu.machine.board.X86Pc} and
 * {@link dev.kpemu.machine.board.Arm64Board}. A board is the composition of a per-arch machine
 * ({@code machine.x86}, {@code machine.arm64}) with its devices ({@code .devices}): it attaches
 * them to the bus at the arch's layout, connects their {@link dev.kpemu.machine.IrqLine}s to the
 * {@link dev.kpemu.machine.InterruptController} and registers their snapshot state. Boards sit
 * above the machine and device packages and below {@code dev.kpemu.boot}, which loads Linux onto
 * them; the bare-metal tests build on them too. (QEMU keeps its boards apart in the same way:
 * {@code hw/i386/pc.c}, {@code hw/arm/virt.c}, beside the CPU targets and the device models.)
 */
package dev.kpemu.machine.board;
