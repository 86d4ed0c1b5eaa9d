/**
 * The guest kernel's own BTF (CONFIG_DEBUG_INFO_BTF): {@link dev.kpemu.image.btf.BtfLocator}
 * finds the blob in a kernel image, {@link dev.kpemu.image.btf.Btf} parses it and answers
 * structure layout and function prototype questions, and
 * {@link dev.kpemu.image.btf.KernelStructs} derives what the probe engine needs ({@code current},
 * {@code task_struct.comm/pid/tgid}, {@code pt_regs}) without per-version constants.
 *
 * <p>the kernel's own BTF (<code>.BTF</code> section or found by its header in the arm64 Image; <code>Btf</code> checks every record and indexes names when parsed and decodes a type when first asked for): struct member offsets (<code>task_struct.comm/pid/tgid</code>, <code>pt_regs</code>), function prototypes, <code>struct module</code>'s kallsyms and memory layout (<code>ModuleLayout</code>, 6.1 and 6.4+), x86's per-CPU <code>current_task</code> (a uniprocessor kernel's plain global, no GS) (<code>KernelStructs</code>)
 */
package dev.kpemu.image.btf;
