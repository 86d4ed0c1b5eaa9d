/**
 * Module <code>session</code>, package <code>dev.kpemu.session</code>.
 *
 * <p>the composition root: <code>TracedBoot</code> (a boot with kprobe_events definitions, filters/triggers (<code>setup</code>) and extra event sinks (<code>addSink</code>), the kprobes engine and the jump optimizer attached at the registration point; the identity a recorded trace's header names; every event goes to its sinks as it happens, the CLI keeps none: <code>keepRecords(false)</code>), used by <code>cli</code> and <code>api</code> alike
 */
package dev.kpemu.session;
