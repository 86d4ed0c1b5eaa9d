/**
 * The guest kernel's own BTF (CONFIG_DEBUG_INFO_BTF): {@link dev.kpemu.image.btf.BtfLocator}
 * finds the blob in a kernel image, {@link dev.kpemu.image.btf.Btf} parses it and answers
 * structure layout and function prototype questions, and
 * {@link dev.kpemu.image.btf.KernelStructs} derives what the probe engine needs ({@code current},
 * {@code task_struct.comm/pid/tgid}, {@code pt_regs}) without per-version constants.
 */
package dev.kpemu.image.btf;
