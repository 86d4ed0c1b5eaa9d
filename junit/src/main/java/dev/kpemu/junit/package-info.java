/**
 * Module <code>junit</code>, package <code>dev.kpemu.junit</code>.
 *
 * <p><code>&#64;KpemuTest</code> (a <code>&#64;Test</code> given a built session), <code>&#64;KpemuSource</code> (arch × kernel invocations of a <code>&#64;ParameterizedTest</code>), <code>KpemuExtension</code> (resolves the session; fails the test when a handler of a session among its arguments threw)
 */
package dev.kpemu.junit;
