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
 * handler that threw, though the test's own assertions all held.
 */
@Tag("kernel")
class ExtensionFailsOnHandlerErrorsTest {
    @Test
    void aTestWhoseHandlerThrewFails() {
        Launcher launcher = LauncherFactory.create();
        SummaryGeneratingListener listener = new SummaryGeneratingListener();
        launcher.execute(LauncherDiscoveryRequestBuilder.request().selectors(selectClass(ThrowingHandlerScenario.class)).build(), listener);
        TestExecutionSummary s = listener.getSummary();
        assertEquals(1, s.getTestsStartedCount());
        assertEquals(1, s.getTestsFailedCount(), "the extension fails the test");
        Throwable failure = s.getFailures().get(0).getException();
        assertInstanceOf(AssertionError.class, failure);
        assertInstanceOf(IllegalStateException.class, failure.getCause());
        assertEquals(ThrowingHandlerScenario.MESSAGE, failure.getCause().getMessage());
    }
}
