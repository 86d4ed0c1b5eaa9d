package dev.kpemu.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.kpemu.api.KpemuSession;
import dev.kpemu.api.Kprobe;
import dev.kpemu.api.Outcome;
import dev.kpemu.junit.KpemuTest;

/**
 * Not run by surefire (its name is no test's): {@link ExtensionFailsOnHandlerErrorsTest} runs it
 * through JUnit. Its assertions hold, but one test's handler throws at every hit and the other
 * never runs its session: the extension must fail both.
 */
class ThrowingHandlerScenario {
    static final String MESSAGE = "the handler's own bug";

    @KpemuTest(command = {"true"}, timeoutSeconds = 30)
    void aHandlerThrows(KpemuSession session) {
        session.register(Kprobe.on("do_sys_openat2").pre(ctx -> { throw new IllegalStateException(MESSAGE); }));
        assertEquals(Outcome.POWERED_OFF, session.run().outcome());
    }

    /** Asserts nothing false, and boots nothing: the extension fails it for never running the session. */
    @KpemuTest(command = {"true"})
    void theSessionNeverRuns(KpemuSession session) {
        session.register(Kprobe.on("do_sys_openat2"));
    }
}
