package dev.kpemu.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.platform.engine.discovery.DiscoverySelectors.selectClass;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.platform.launcher.Launcher;
import org.junit.platform.launcher.core.LauncherDiscoveryRequestBuilder;
import org.junit.platform.launcher.core.LauncherFactory;
import org.junit.platform.launcher.listeners.SummaryGeneratingListener;
import org.junit.platform.launcher.listeners.TestExecutionSummary;

/**
 * Issue 16: a handler's exception is caught by the engine and the guest goes on (as in Linux), so
 * a test must fail for it anyway: {@code @KpemuTest}'s extension fails a test whose session had a
 * handler that threw, though the test's own assertions all held, and one that never ran its session.
 */
@Tag("kernel")
class ExtensionFailsOnHandlerErrorsTest {
    @Test
    void aTestWhoseHandlerThrewOrThatNeverRanItsSessionFails() {
        Launcher launcher = LauncherFactory.create();
        SummaryGeneratingListener listener = new SummaryGeneratingListener();
        launcher.execute(LauncherDiscoveryRequestBuilder.request().selectors(selectClass(ThrowingHandlerScenario.class)).build(), listener);
        TestExecutionSummary s = listener.getSummary();
        assertEquals(2, s.getTestsStartedCount());
        assertEquals(2, s.getTestsFailedCount(), "the extension fails both tests");
        java.util.Map<String, Throwable> failures = new java.util.HashMap<>();
        for (var f : s.getFailures()) failures.put(f.getTestIdentifier().getDisplayName().replaceAll("\\(.*", ""), f.getException());
        Throwable threw = failures.get("aHandlerThrows");
        assertInstanceOf(AssertionError.class, threw);
        assertInstanceOf(IllegalStateException.class, threw.getCause());
        assertEquals(ThrowingHandlerScenario.MESSAGE, threw.getCause().getMessage());
        Throwable neverRan = failures.get("theSessionNeverRuns");
        assertInstanceOf(AssertionError.class, neverRan);
        assertEquals("the test never ran its kpemu session (x86_64 debian): call session.run()", neverRan.getMessage());
    }
}
