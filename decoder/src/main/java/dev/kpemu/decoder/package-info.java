/**
 * Module <code>decoder</code>, package <code>dev.kpemu.decoder</code>.
 *
 * <p>Capstone 5 binding and <code>Decoder</code> for both arches: <code>Instruction</code> with length, <code>BranchKind</code>, target, <code>PcRelative</code> (RIP-relative displacement offset/size, ADR/ADRP/literal targets), <code>OutOfLine</code> (COPY, COPY_WITH_FIXUP, SIMULATE, REJECT as Linux's kprobes decides) and <code>boostable</code>; <code>Arm64ExclusiveWindow</code> (Linux's load/store-exclusive scan, used by the kprobes decoder and the optimizer)
 */
package dev.kpemu.decoder;
