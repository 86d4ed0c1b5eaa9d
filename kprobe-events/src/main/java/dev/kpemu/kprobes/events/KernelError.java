package dev.kpemu.kprobes.events;

/**
 * The kprobe-relevant entries of the kernel's probe error table ({@code ERRORS} in
 * {@code kernel/trace/trace_probe.h}): the text {@code error_log} shows after
 * {@code trace_kprobe: error: }. Texts are the kernel's, typos included.
 */
public enum KernelError {
    /** Linux 6.1's name and text for a maxactive on a {@code p} probe (renamed later, see {@link #BAD_MAXACT_TYPE}). */
    MAXACT_NO_KPROBE("Maxactive is not for kprobe"),
    BAD_MAXACT_TYPE("Maxactive is only for function exit"),
    BAD_MAXACT("Invalid maxactive number"),
    MAXACT_TOO_BIG("Maxactive is too big"),
    BAD_PROBE_ADDR("Invalid probed address or symbol"),
    NON_UNIQ_SYMBOL("The symbol is not unique"),
    BAD_RETPROBE("Retprobe address must be an function entry"),
    BAD_ADDR_SUFFIX("Invalid probed address suffix"),
    NO_GROUP_NAME("Group name is not specified"),
    GROUP_TOO_LONG("Group name is too long"),
    BAD_GROUP_NAME("Group name must follow the same rules as C identifiers"),
    NO_EVENT_NAME("Event name is not specified"),
    EVENT_TOO_LONG("Event name is too long"),
    BAD_EVENT_NAME("Event name must follow the same rules as C identifiers"),
    EVENT_EXIST("Given group/event name is already used by another event"),
    RETVAL_ON_PROBE("$retval is not available on probe"),
    BAD_STACK_NUM("Invalid stack number"),
    BAD_ARG_NUM("Invalid argument number"),
    BAD_VAR("Invalid $-variable specified"),   // recorded from Debian's 6.1 (the older "valiable" typo is fixed there)
    BAD_REG_NAME("Invalid register name"),
    BAD_MEM_ADDR("Invalid memory address"),
    BAD_IMM("Invalid immediate value"),
    IMMSTR_NO_CLOSE("String is not closed with '\"'"),
    FILE_ON_KPROBE("File offset is not available with kprobe"),
    /** trace_uprobe: {@code @+OFFS} whose offset {@code kstrtol} refuses. */
    BAD_FILE_OFFS("Invalid file offset value"),
    /** trace_uprobe: {@code @SYM}. */
    SYM_ON_UPROBE("Symbol is not available with uprobe"),
    /** trace_uprobe: the place's path does not resolve. */
    FILE_NOT_FOUND("Failed to find the given file"),
    /** trace_uprobe: the place's path is not a regular file. */
    NO_REGULAR_FILE("Not a regular file"),
    /** trace_uprobe: {@code (REF_CTR_OFFSET} without {@code )}. */
    REFCNT_OPEN_BRACE("Reference counter brace is not closed"),
    /** trace_uprobe: text after {@code (REF_CTR_OFFSET)}. */
    BAD_REFCNT_SUFFIX("Reference counter has wrong suffix"),
    /** trace_uprobe: a reference counter offset {@code kstrtoul} refuses. */
    BAD_REFCNT("Invalid reference counter offset"),
    /** trace_uprobe: an offset {@code kstrtoul} refuses. */
    BAD_UPROBE_OFFS("Invalid uprobe offset"),
    TOO_MANY_OPS("Dereference is too much nested"),
    DEREF_NEED_BRACE("Dereference needs a brace"),
    BAD_DEREF_OFFS("Invalid dereference offset"),
    DEREF_OPEN_BRACE("Dereference brace is not closed"),
    COMM_CANT_DEREF("$comm can not be dereferenced"),
    BAD_FETCH_ARG("Invalid fetch argument"),
    ARRAY_NO_CLOSE("Array is not closed"),
    BAD_ARRAY_SUFFIX("Array has wrong suffix"),
    BAD_ARRAY_NUM("Invalid array size"),
    ARRAY_TOO_BIG("Array number is too big"),
    BAD_TYPE("Unknown type is specified"),
    BAD_STRING("String accepts only memory argument"),
    BAD_SYMSTRING("Symbol String doesn't accept data/userdata"),
    BAD_BITFIELD("Invalid bitfield"),
    ARG_NAME_TOO_LONG("Argument name is too long"),
    NO_ARG_NAME("Argument name is not specified"),
    BAD_ARG_NAME("Argument name must follow the same rules as C identifiers"),
    USED_ARG_NAME("This argument name is already used"),
    ARG_TOO_LONG("Argument expression is too long"),
    NO_ARG_BODY("No argument expression"),
    BAD_INSN_BNDRY("Probe point is not an instruction boundary"),
    FAIL_REG_PROBE("Failed to register probe event"),
    DIFF_PROBE_TYPE("Probe type is different from existing probe"),
    DIFF_ARG_TYPE("Argument type or name is different from existing probe"),
    SAME_PROBE("There is already the exact same probe event"),
    NO_RETVAL("This function returns 'void' type"),
    NOSUP_BTFARG("BTF is not available or not supported"),
    NO_BTFARG("This variable is not found at this probe point"),
    NO_BTF_ENTRY("No BTF entry for this probe point"),
    DOUBLE_ARGS("$arg* can be used only once in the parameters"),
    ARGS_2LONG("$arg* failed because the argument list is too long"),
    NO_PTR_STRCT("This is not a pointer to union/structure."),
    NOSUP_DAT_ARG("Non pointer structure/union argument is not supported."),
    BAD_HYPHEN("Failed to parse single hyphen. Forgot '>'?"),
    NO_BTF_FIELD("This field is not found."),
    BAD_BTF_TID("Failed to get BTF type info."),
    BAD_TYPE4STR("This type does not fit for string."),
    EVENT_TOO_BIG("Event too big (too many fields?)"),
    TYPECAST_NOT_EVENT("Typecasts are only for eprobe fields"),
    /** trace_fprobe (6.4+): a {@code t} probe's tracepoint that no loaded code defines (kept for a module when modules exist). */
    NO_TRACEPOINT("Tracepoint is not found"),
    /** trace_fprobe (6.4+): a {@code t} probe's tracepoint name with a character other than letters, digits and '_'. */
    BAD_TP_NAME("Invalid character in tracepoint name"),
    /** dynevent (6.15+): a {@code dynamic_events} command no event type takes (logged by {@code create_dyn_event}). */
    NO_DYNEVENT("No matching dynamic event type"),
    /** Mainline only: {@code $argN} where neither entry nor exit. */
    NOFENTRY_ARGS("$arg* can be used only on function entry or exit"),
    /** Mainline only; Linux 6.1 rejects these silently (-EINVAL, no error_log entry). */
    NEED_STRING_TYPE("$comm and immediate-string only accepts string type"),
    /** Mainline only; Linux 6.1 silently drops arguments past the 128th. */
    TOO_MANY_ARGS("Too many arguments are specified"),
    /** The wprobe entries (linux-next's {@code trace_wprobe}; no kernel of kpemu's matrix has them). */
    BAD_ACCESS_FMT("Access memory address requires @"),
    BAD_ACCESS_TYPE("Bad memory access type"),
    BAD_ACCESS_LEN("This memory access length is not supported"),
    BAD_ACCESS_ADDR("Invalid access memory address");

    private final String message;

    KernelError(String message) { this.message = message; }

    /** The text the kernel prints after {@code error: }. */
    public String message() { return message; }
}
