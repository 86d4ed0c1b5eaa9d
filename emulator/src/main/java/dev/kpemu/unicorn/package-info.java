/**
 * Module <code>emulator</code>, package <code>dev.kpemu.unicorn</code>.
 *
 * <p>the Unicorn 2.1.4 binding on Java 25 FFM: memory, MMIO, registers (x86 MSRs and descriptor tables, arm64 system registers; <code>RegisterBatch</code>: a fixed list read in one <code>uc_reg_read_batch</code> call), hooks, contexts, TB/TLB control.
 *
 * <p><code>Unicorn.open(arch, mode, model)</code> opens and initializes an engine with a 128 MiB
 * translation buffer that <code>CodePlacement</code> puts within a direct call of libunicorn's
 * helpers (address space reserved near the library when the first engine opens), its block hook
 * called through a jump below the buffer: translated code calls both at every block, and a call
 * through memory made the same run up to 40 % slower (docs/reference.md, issue 30's sixth session).
 *
 * <p><code>setExitAfterAccess(false)</code> leaves out the helper call Unicorn puts after every
 * guest load and store (so a stop asked for inside an access waits for the next block start, as
 * under QEMU); <code>AccessExitFlag</code> finds the engine flag that does it in libunicorn's own
 * code. Code and memory hooks keep the call while they exist.
 */
package dev.kpemu.unicorn;
