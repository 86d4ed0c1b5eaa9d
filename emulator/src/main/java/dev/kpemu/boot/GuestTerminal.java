package dev.kpemu.boot;

import java.io.OutputStream;

/**
 * The guest command's terminal: a second UART (x86-64 COM2, {@code ttyS1}; arm64 a second PL011,
 * {@code ttyAMA1}) that only boots running a command have. What the guest writes there goes to
 * {@code output}; {@code input} (null: none) feeds it on the virtual clock ({@link TerminalInput}).
 * The kernel's own console stays on the first UART.
 */
public record GuestTerminal(OutputStream output, TerminalInput input) {
    public GuestTerminal {
        if (output == null) throw new IllegalArgumentException("the terminal needs an output");
    }
}
