package dev.kpemu.unicorn;

/** A Java hook threw; the engine was stopped and the original throwable is the cause. */
public class HookFailedException extends UnicornException {
    public HookFailedException(Throwable cause) {
        super(-1, "hook failed: " + cause);
        initCause(cause);
    }
}
