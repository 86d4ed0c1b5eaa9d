/**
 * Module <code>kprobes</code>, package <code>dev.kpemu.kprobes.fail</code>.
 *
 * <p>Linux's fail_function (function error injection, issue #29) on the kprobes engine: the
 * {@code --fail} spec, the fault attributes' decision, the entry probe that makes a function return
 * an error, and the kernels' recorded error-injection lists.
 *
 * <p><b>Fault injection.</b>
 * <b>Fault injection</b> ({@code kprobes.fail}, issue #29) is Linux's fail_function on the engine:
 * {@code FailSpec} parses a {@code --fail} spec, {@code FaultAttr} decides as lib/fault-inject.c's
 * {@code should_fail_ex} (plus kpemu's {@code nth}, {@code comm}, {@code pid}, {@code caller}),
 * {@code FunctionFailure} puts an entry probe whose pre handler calls the arch back end's {@code
 * overrideFunctionWithReturn} (x86: rax, pop the return address into rip; arm64: x0, pc = lr) and
 * skips the step; {@code ErrorInjectionList} reads the recorded error-injection lists. The API's
 * {@code KpemuSession.Builder#fail} arms it at ready.
 */
package dev.kpemu.kprobes.fail;
