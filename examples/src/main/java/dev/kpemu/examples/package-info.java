/**
 * Module <code>examples</code>, package <code>dev.kpemu.examples</code>.
 *
 * <p><code>samples/kprobes</code>' <code>kprobe_example</code> and <code>kretprobe_example</code>, a jprobe-style typed handler; tests: the samples, <code>MissingFileTest</code>, the extension failing on handler errors, <code>FreshProjectTest</code> (a Maven project outside the repository with only <code>kpemu-junit</code>)
 */
package dev.kpemu.examples;
