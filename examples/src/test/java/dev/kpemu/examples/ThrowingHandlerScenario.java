package dev.kpemu.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.kpemu.api.KpemuSession;
import dev.kpemu.api.Kprobe;
import dev.kpemu.api.Outcome;
import dev.kpemu.junit.KpemuTest;

/**
 * Not run by surefire (its name is no test's): {@link ExtensionFailsOnHandlerErrorsTest} runs it
 * through JUnit. Its only assertion holds; its handler throws at every hit, so the extension must
 * fail it.
 */
class ThrowingHandlerScenario {
    static final String MESSAGE = "the handler's own bug";

    @KpemuTest(command = {"true"}, timeoutSeconds = 30)
    void aHandlerThrows(KpemuSession session) {
        session.register(Kprobe.on("do_sys_openat2").pre(ctx -> { throw new IllegalStateException(MESSAGE); }));
        assertEquals(Outcome.POWERED_OFF, session.run().outcome());
    }
}
