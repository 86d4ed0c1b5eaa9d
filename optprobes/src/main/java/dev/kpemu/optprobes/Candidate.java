package dev.kpemu.optprobes;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.TreeSet;

/**
 * Everything {@link OptimizationSafety} needs to decide whether one probe may be jump-optimized.
 *
 * <p>{@code functionBytes} must be the function's <em>original</em> text: bytes of other probes
 * (their {@code int3}/{@code BRK} or jump) already recovered from their saved copies, as Linux's
 * {@code recover_probed_instruction} does before decoding.
 *
 * @param functionStart       first address of the function containing the probe (kallsyms symbol address)
 * @param functionBytes       the function's original bytes (symbol size)
 * @param probeAddress        the probe's address
 * @param otherProbes         addresses of the other armed probes (any function)
 * @param postHandler         the probe (or one child of its aggregate) has a post handler
 * @param enabled             the probe is enabled
 * @param optimizationOn      {@code debug.kprobes_optimization} is 1
 * @param exceptionTable      faulting-instruction addresses of the kernel's {@code __ex_table} entries
 * @param ftraceSites         addresses of ftrace call sites ({@code __mcount_loc} entries)
 * @param reservedText        other text the guest patches at run time: alternatives, jump labels, static calls
 * @param indirectJumpCheck   x86: refuse functions with indirect jumps (Linux always did before 6.x; 6.x
 *                            skips the check on kernels built with retpolines or IBT, which have no jump tables)
 * @param indirectThunks      x86: the {@code __indirect_thunk_start..__indirect_thunk_end} range, or null; a direct
 *                            jump there is a retpolined indirect jump (Linux &le; 5.x with {@code CONFIG_RETPOLINE})
 * @param detectEntryFtraceSite x86: treat a 5-byte {@code call}/{@code nop} at the function entry (after an
 *                            {@code endbr64}) as an ftrace site even when {@code ftraceSites} does not list it
 * @param landingPadsEnforced arm64: BTI is enforced, so a probed {@code bti}/{@code paciasp}/{@code pacibsp}
 *                            (an indirect-branch landing pad) must not become a {@code B}
 * @param groupFormsBoostable x86: the kernel's {@code can_boost} accepts the ALU forms of opcode groups 2&ndash;5
 *                            (shifts and rotates, {@code test}/{@code not}/{@code neg}/{@code mul}/{@code div},
 *                            {@code inc}/{@code dec}), as Linux does from 6.9; before, none of them (the builder's
 *                            default, the rule of Debian 12's 6.1)
 */
public record Candidate(long functionStart, byte[] functionBytes, long probeAddress, Set<Long> otherProbes,
                        boolean postHandler, boolean enabled, boolean optimizationOn, Set<Long> exceptionTable,
                        Set<Long> ftraceSites, List<TextRange> reservedText, boolean indirectJumpCheck,
                        TextRange indirectThunks, boolean detectEntryFtraceSite, boolean landingPadsEnforced,
                        boolean groupFormsBoostable) {

    public Candidate {
        functionBytes = functionBytes.clone();
        otherProbes = Set.copyOf(otherProbes);
        exceptionTable = Set.copyOf(exceptionTable);
        ftraceSites = Set.copyOf(ftraceSites);
        reservedText = List.copyOf(reservedText);
    }

    @Override
    public byte[] functionBytes() {
        return functionBytes.clone();
    }

    /** The function's range. */
    public TextRange function() {
        return TextRange.of(functionStart, functionBytes.length);
    }

    /** A builder with Linux's defaults: enabled, no post handler, optimization on, no tables. */
    public static Builder builder(long functionStart, byte[] functionBytes, long probeAddress) {
        return new Builder(functionStart, functionBytes, probeAddress);
    }

    /** Builder for {@link Candidate}. */
    public static final class Builder {
        private final long functionStart;
        private final byte[] functionBytes;
        private final long probeAddress;
        private final Set<Long> otherProbes = new TreeSet<>();
        private boolean postHandler;
        private boolean enabled = true;
        private boolean optimizationOn = true;
        private final Set<Long> exceptionTable = new TreeSet<>();
        private final Set<Long> ftraceSites = new TreeSet<>();
        private final List<TextRange> reservedText = new ArrayList<>();
        private boolean indirectJumpCheck = true;
        private TextRange indirectThunks;
        private boolean detectEntryFtraceSite = true;
        private boolean landingPadsEnforced;
        private boolean groupFormsBoostable;

        private Builder(long functionStart, byte[] functionBytes, long probeAddress) {
            this.functionStart = functionStart;
            this.functionBytes = Objects.requireNonNull(functionBytes);
            this.probeAddress = probeAddress;
        }

        public Builder otherProbes(Iterable<Long> addresses) { addresses.forEach(otherProbes::add); return this; }
        public Builder otherProbe(long address) { otherProbes.add(address); return this; }
        public Builder postHandler(boolean v) { postHandler = v; return this; }
        public Builder enabled(boolean v) { enabled = v; return this; }
        public Builder optimizationOn(boolean v) { optimizationOn = v; return this; }
        public Builder exceptionTable(Iterable<Long> faultAddresses) { faultAddresses.forEach(exceptionTable::add); return this; }
        public Builder ftraceSites(Iterable<Long> sites) { sites.forEach(ftraceSites::add); return this; }
        public Builder reservedText(TextRange range) { reservedText.add(range); return this; }
        public Builder indirectJumpCheck(boolean v) { indirectJumpCheck = v; return this; }
        public Builder indirectThunks(TextRange range) { indirectThunks = range; return this; }
        public Builder detectEntryFtraceSite(boolean v) { detectEntryFtraceSite = v; return this; }
        public Builder landingPadsEnforced(boolean v) { landingPadsEnforced = v; return this; }
        public Builder groupFormsBoostable(boolean v) { groupFormsBoostable = v; return this; }

        public Candidate build() {
            return new Candidate(functionStart, functionBytes, probeAddress, otherProbes, postHandler, enabled,
                    optimizationOn, exceptionTable, ftraceSites, reservedText, indirectJumpCheck, indirectThunks,
                    detectEntryFtraceSite, landingPadsEnforced, groupFormsBoostable);
        }
    }
}
