package dev.kpemu.decoder;

import java.util.List;
import java.util.Optional;
import java.util.OptionalLong;

/**
 * The result of decoding a range of code linearly (usually one function).
 *
 * @param start         address of the first byte
 * @param size          number of bytes that were offered
 * @param instructions  the instructions decoded, in address order
 * @param undecodableAt where decoding stopped on bytes that are not a (complete) instruction;
 *                      empty if the whole range decoded
 */
public record Disassembly(long start, int size, List<Instruction> instructions, OptionalLong undecodableAt) {

    public Disassembly {
        instructions = List.copyOf(instructions);
    }

    /** True if every byte of the range belongs to a decoded instruction. */
    public boolean complete() {
        return undecodableAt.isEmpty();
    }

    /** Address just past the last decoded instruction. */
    public long decodedEnd() {
        return instructions.isEmpty() ? start : instructions.getLast().nextAddress();
    }

    /** The instruction starting exactly at {@code address}, if the linear walk reached one there. */
    public Optional<Instruction> at(long address) {
        int lo = 0, hi = instructions.size() - 1;
        while (lo <= hi) {
            int mid = (lo + hi) >>> 1;
            long a = instructions.get(mid).address();
            int c = Long.compareUnsigned(a, address);
            if (c == 0) return Optional.of(instructions.get(mid));
            if (c < 0) lo = mid + 1; else hi = mid - 1;
        }
        return Optional.empty();
    }

    /** True if an instruction starts at {@code address} (Linux's {@code can_probe} boundary test). */
    public boolean isBoundary(long address) {
        return at(address).isPresent();
    }
}
