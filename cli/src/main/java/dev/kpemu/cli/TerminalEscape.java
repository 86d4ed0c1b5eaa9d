package dev.kpemu.cli;

/**
 * The escape keys of {@code boot -i}, as QEMU's {@code -nographic} has them: {@code Ctrl-A x}
 * stops kpemu, {@code Ctrl-A h} shows them, {@code Ctrl-A Ctrl-A} sends one Ctrl-A to the guest;
 * any other key after Ctrl-A is dropped with it. Every other key goes to the guest.
 */
final class TerminalEscape {
    static final int CTRL_A = 0x01;
    static final String HELP = "kpemu: Ctrl-A x stops kpemu, Ctrl-A Ctrl-A sends Ctrl-A, Ctrl-A h shows this";

    /** What a key means. */
    enum Action { SEND, STOP, HELP, NONE }

    private boolean escape;

    /** The meaning of key {@code c}; with {@link Action#SEND} the key itself goes to the guest. */
    Action key(int c) {
        if (escape) {
            escape = false;
            return switch (c) {
                case 'x', 'X' -> Action.STOP;
                case 'h', 'H', '?' -> Action.HELP;
                case CTRL_A -> Action.SEND;
                default -> Action.NONE;
            };
        }
        if (c == CTRL_A) {
            escape = true;
            return Action.NONE;
        }
        return Action.SEND;
    }
}
