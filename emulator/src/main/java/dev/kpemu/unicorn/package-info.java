/**
 * Module <code>emulator</code>, package <code>dev.kpemu.unicorn</code>.
 *
 * <p>the Unicorn 2.1.4 binding on Java 25 FFM: memory, MMIO, registers (x86 MSRs and descriptor tables, arm64 system registers; <code>RegisterBatch</code>: a fixed list read in one <code>uc_reg_read_batch</code> call), hooks, contexts, TB/TLB control
 */
package dev.kpemu.unicorn;
