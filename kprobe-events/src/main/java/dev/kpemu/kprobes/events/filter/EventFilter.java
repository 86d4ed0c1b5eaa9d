package dev.kpemu.kprobes.events.filter;

import java.util.ArrayList;
import java.util.List;

import dev.kpemu.kprobes.events.EventFields;
import dev.kpemu.kprobes.events.TraceRecord;

/**
 * An ftrace event filter ({@code events/GROUP/EVENT/filter}, a hist trigger's {@code if ...}):
 * predicates {@code FIELD OP VALUE} joined by {@code &&} and {@code ||} ({@code &&} binds
 * tighter), {@code !} and parentheses. Numbers compare as the field's size and signedness
 * ({@code ==}, {@code !=}, {@code <}, {@code <=}, {@code >}, {@code >=}, {@code &} a bit test),
 * with values as {@code kstrtoll}/{@code kstrtoull} base 0 read them; strings ({@code "..."} or
 * {@code '...'}) compare whole with {@code ==}/{@code !=} or as a pattern with {@code ~}
 * ({@link FilterPattern}). On kernels whose dialect has them ({@link FilterDialect#cpumaskValues}),
 * the cpu and number fields also compare with a cpulist, {@code CPUS{0,2-3}}: {@code &} is true
 * when the value is in the list, {@code ==} when the list is that one cpu only, {@code !=} the
 * opposite of {@code ==} ({@code do_filter_scalar_cpumask}).
 *
 * <p>The grammar is parsed by recursive descent; every error is the one Linux 6.1 reports, at
 * the position it reports it (its {@code calc_stack} check of quotes and parentheses first,
 * then predicate by predicate, left to right), as recorded under QEMU
 * ({@code guest-images/reference/ARCH/6.1/filters.filter-errors}).
 */
public final class EventFilter {
    private static final String[] OPS = {"~", "!=", "==", "<=", "<", ">=", ">", "&"};
    private static final int MAX_FILTER_STR_VAL = 256;

    private sealed interface Node permits And, Or, Not, Pred {}

    private record And(List<Node> terms) implements Node {}

    private record Or(List<Node> terms) implements Node {}

    private record Not(Node term) implements Node {}

    /** One predicate: a number comparison ({@code pattern} null), a string match, or a number against a cpulist ({@code cpus} not null). */
    private record Pred(EventFields.Field field, String op, long value, FilterPattern pattern, java.util.BitSet cpus) implements Node {
        Pred(EventFields.Field field, String op, long value, FilterPattern pattern) { this(field, op, value, pattern, null); }
    }

    private final String text;
    private final Node root;

    private EventFilter(String text, Node root) {
        this.text = text;
        this.root = root;
    }

    /** The filter as written. */
    public String text() { return text; }

    /**
     * Parses {@code text} against an event's fields.
     *
     * @throws FilterParseException what Linux refuses the filter with
     */
    public static EventFilter parse(String text, EventFields fields) throws FilterParseException {
        return parse(text, fields, FilterDialect.LINUX_6_1);
    }

    /**
     * Parses {@code text} against an event's fields as the kernel of {@code dialect} does.
     *
     * @throws FilterParseException what that Linux refuses the filter with
     */
    public static EventFilter parse(String text, EventFields fields, FilterDialect dialect) throws FilterParseException {
        checkQuotesAndParens(text);
        Parser p = new Parser(text, fields, dialect.trailingOperatorIgnored(), dialect.cpumaskValues());
        Node n = p.parseOr();
        p.skipSpace();
        if (p.i < text.length()) throw p.error(FilterParseException.Error.TOO_MANY_CLOSE, p.i + 1);
        return new EventFilter(text, n);
    }

    /** Whether the record passes ({@code filter_match_preds}). */
    public boolean matches(TraceRecord r) { return eval(root, r); }

    private static boolean eval(Node n, TraceRecord r) {
        return switch (n) {
            case And a -> {
                for (Node t : a.terms) if (!eval(t, r)) yield false;
                yield true;
            }
            case Or o -> {
                for (Node t : o.terms) if (eval(t, r)) yield true;
                yield false;
            }
            case Not x -> !eval(x.term, r);
            case Pred p -> evalPred(p, r);
        };
    }

    private static boolean evalPred(Pred p, TraceRecord r) {
        EventFields.Field f = p.field;
        if (p.pattern != null) {
            boolean m = p.pattern.matches(EventFields.string(r, f));
            boolean invert = p.op.equals("!=") || p.pattern.not;
            return m != invert;
        }
        long a = EventFields.number(r, f);
        if (p.cpus != null) return scalarInCpumask(p.op, a, p.cpus);
        long b = EventFields.extend(p.value, f.size(), f.signed());
        int cmp = f.signed() ? Long.compare(a, b) : Long.compareUnsigned(a, b);
        return switch (p.op) {
            case "==" -> a == b;
            case "!=" -> a != b;
            case "<" -> cmp < 0;
            case "<=" -> cmp <= 0;
            case ">" -> cmp > 0;
            case ">=" -> cmp >= 0;
            case "&" -> (a & b) != 0;
            default -> throw new IllegalStateException(p.op);
        };
    }

    /**
     * {@code do_filter_scalar_cpumask}: a value (a cpu number) against a cpulist of more than one
     * cpu (one cpu compares as a number): {@code &} tests membership; {@code ==} holds only for a
     * list of that cpu alone, so never here; {@code !=} is its negation.
     */
    private static boolean scalarInCpumask(String op, long value, java.util.BitSet cpus) {
        int cpu = (int) value;                           // the kernel passes it as unsigned int
        boolean in = cpu >= 0 && cpus.get(cpu);
        boolean onlyOne = cpus.cardinality() == 1;
        return switch (op) {
            case "&" -> in;
            case "==" -> in && onlyOne;
            case "!=" -> !in || !onlyOne;
            default -> false;
        };
    }

    /** {@code calc_stack}: an unclosed quote, a ')' without its '(' or a '(' without its ')' ({@code -EINVAL} with no terms too). */
    private static void checkQuotesAndParens(String s) throws FilterParseException {
        int open = 1, lastQuote = 0, preds = 0;
        char quote = 0;
        boolean isPred = false;
        int i;
        for (i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (Character.isWhitespace(c)) continue;
            if (quote != 0) {
                if (c == quote) quote = 0;
                continue;
            }
            switch (c) {
                case '\'', '"' -> {
                    quote = c;
                    lastQuote = i;
                }
                case '|', '&' -> {
                    if (i + 1 < s.length() && s.charAt(i + 1) == c) {
                        isPred = false;
                        continue;
                    }
                }
                case '(' -> {
                    isPred = false;
                    open++;
                    continue;
                }
                case ')' -> {
                    isPred = false;
                    if (open == 1) throw new FilterParseException(s, FilterParseException.Error.TOO_MANY_CLOSE, i);
                    open--;
                    continue;
                }
                default -> { }
            }
            if (!isPred) {
                preds++;
                isPred = true;
            }
        }
        if (quote != 0) throw new FilterParseException(s, FilterParseException.Error.MISSING_QUOTE, lastQuote);
        if (open != 1) {
            int level = open;
            quote = 0;
            for (i--; i > 0; i--) {
                char c = s.charAt(i);
                if (quote != 0) {
                    if (c == quote) quote = 0;
                    continue;
                }
                if (c == '(') {
                    if (level == open) throw new FilterParseException(s, FilterParseException.Error.TOO_MANY_OPEN, i);
                    level--;
                } else if (c == ')') {
                    level++;
                } else if (c == '\'' || c == '"') {
                    quote = c;
                }
            }
            throw new FilterParseException(s, FilterParseException.Error.TOO_MANY_OPEN, 0);
        }
        if (preds == 0) throw new FilterParseException(s, null, 0);
    }

    private static final class Parser {
        final String s;
        final EventFields fields;
        /** {@link FilterDialect#trailingOperatorIgnored}: nothing after a last "&&" or "||" ends the filter. */
        final boolean trailingOperatorIgnored;
        /** {@link FilterDialect#cpumaskValues}. */
        final boolean cpumaskValues;
        int i;

        Parser(String s, EventFields fields, boolean trailingOperatorIgnored, boolean cpumaskValues) {
            this.s = s;
            this.fields = fields;
            this.trailingOperatorIgnored = trailingOperatorIgnored;
            this.cpumaskValues = cpumaskValues;
        }

        /** After an operator: whether only blanks follow and the kernel takes that as the end. */
        boolean endsAfterOperator() {
            if (!trailingOperatorIgnored) return false;
            skipSpace();
            return i >= s.length();
        }

        FilterParseException error(FilterParseException.Error e, int pos) { return new FilterParseException(s, e, pos); }

        void skipSpace() {
            while (i < s.length() && Character.isWhitespace(s.charAt(i))) i++;
        }

        char peek() { return i < s.length() ? s.charAt(i) : 0; }

        Node parseOr() throws FilterParseException {
            List<Node> terms = new ArrayList<>();
            terms.add(parseAnd());
            while (true) {
                skipSpace();
                if (peek() == '|' && i + 1 < s.length() && s.charAt(i + 1) == '|') {
                    i += 2;
                    if (endsAfterOperator()) break;
                    terms.add(parseAnd());
                } else {
                    break;
                }
            }
            return terms.size() == 1 ? terms.getFirst() : new Or(terms);
        }

        Node parseAnd() throws FilterParseException {
            List<Node> terms = new ArrayList<>();
            terms.add(parseUnary());
            while (true) {
                skipSpace();
                if (peek() == '&' && i + 1 < s.length() && s.charAt(i + 1) == '&') {
                    i += 2;
                    if (endsAfterOperator()) break;
                    terms.add(parseUnary());
                } else {
                    break;
                }
            }
            return terms.size() == 1 ? terms.getFirst() : new And(terms);
        }

        Node parseUnary() throws FilterParseException {
            skipSpace();
            if (i >= s.length()) throw error(FilterParseException.Error.INVALID_FILTER, s.length());
            char c = peek();
            if (c == '!' && (i + 1 >= s.length() || s.charAt(i + 1) != '=' && s.charAt(i + 1) != '~')) {   // is_not()
                i++;
                return new Not(parseUnary());
            }
            if (c == '(') {
                i++;
                Node n = parseOr();
                skipSpace();
                if (peek() != ')') throw error(FilterParseException.Error.TOO_MANY_OPEN, i);
                i++;
                afterTerm();
                return n;
            }
            Node p = parsePred();
            afterTerm();
            return p;
        }

        /** After a term Linux accepts only ')', the end, "&&" or "||"; anything else is one term too many. */
        void afterTerm() throws FilterParseException {
            skipSpace();
            char c = peek();
            if (c == 0 || c == ')') return;
            if ((c == '&' || c == '|') && i + 1 < s.length() && s.charAt(i + 1) == c) return;
            throw error(FilterParseException.Error.TOO_MANY_PREDS, i);
        }

        /** {@code parse_pred}; positions are reported from one past the predicate's first character, as the kernel's. */
        Node parsePred() throws FilterParseException {
            int start = i, pos = start + 1;
            int j = start;
            while (j < s.length() && (Character.isLetterOrDigit(s.charAt(j)) && s.charAt(j) < 128 || s.charAt(j) == '_')) j++;
            if (j == start) throw new FilterParseException(s, null, 0);
            String name = s.substring(start, j);
            EventFields.Field field = fields.find(name);
            if (field == null) throw error(FilterParseException.Error.FIELD_NOT_FOUND, pos + (j - start));
            while (j < s.length() && Character.isWhitespace(s.charAt(j))) j++;
            String op = null;
            for (String o : OPS) {
                if (s.startsWith(o, j)) {
                    op = o;
                    break;
                }
            }
            if (op == null) throw error(FilterParseException.Error.INVALID_OP, pos + (j - start));
            j += op.length();
            while (j < s.length() && Character.isWhitespace(s.charAt(j))) j++;
            int vs = j;
            char c = j < s.length() ? s.charAt(j) : 0;
            if (cpumaskValues && s.startsWith("CPUS", j)) return cpusPred(field, op, start, pos, j);
            if (c == '\'' || c == '"') {
                if (!op.equals("!=") && !op.equals("~") && !op.equals("=="))
                    throw error(FilterParseException.Error.ILLEGAL_FIELD_OP, pos + (j - start));
                if (!field.isString()) throw error(FilterParseException.Error.EXPECT_DIGIT, pos + (j - start));
                int k = j + 1;
                while (k < s.length() && s.charAt(k) != c) k++;
                if (k >= s.length()) throw error(FilterParseException.Error.MISSING_QUOTE, pos + (k - start));
                String value = s.substring(j + 1, k);
                if (value.length() >= MAX_FILTER_STR_VAL) throw error(FilterParseException.Error.OPERAND_TOO_LONG, pos + (k - start));
                i = k + 1;
                return new Pred(field, op, 0, op.equals("~") ? FilterPattern.glob(value) : FilterPattern.exact(value));
            }
            if (Character.isDigit(c) || c == '-') {
                if (field.isString()) throw error(FilterParseException.Error.EXPECT_STRING, pos + (j - start));
                if (op.equals("~")) throw error(FilterParseException.Error.ILLEGAL_FIELD_OP, pos + (j - start));
                if (c == '-') j++;
                while (j < s.length() && Character.isLetterOrDigit(s.charAt(j)) && s.charAt(j) < 128) j++;
                String num = s.substring(vs, j);
                if (num.length() >= 24) throw error(FilterParseException.Error.OPERAND_TOO_LONG, pos + (j - start));
                Long v = field.signed() ? KernelNumbers.strtoll(num) : KernelNumbers.strtoull(num);
                if (v == null) throw error(FilterParseException.Error.ILLEGAL_INTVAL, pos + (vs - start));
                i = j;
                return new Pred(field, op, v, null);
            }
            throw error(FilterParseException.Error.INVALID_VALUE, pos + (j - start));
        }

        /**
         * {@code parse_pred}'s {@code CPUS{...}} value at {@code j} (6.6+): the cpu field or a number
         * field (a string field is refused), the operators {@code ==}, {@code !=} and {@code &}; the
         * list runs to the next {@code '}'} (not stopping at {@code )} or {@code &&}); one cpu
         * compares as a number ({@code &} as {@code ==}).
         */
        Node cpusPred(EventFields.Field field, String op, int start, int pos, int j) throws FilterParseException {
            if (field.isString()) throw error(FilterParseException.Error.ILLEGAL_FIELD_OP, pos + (j - start));
            if (!op.equals("==") && !op.equals("!=") && !op.equals("&"))
                throw error(FilterParseException.Error.ILLEGAL_FIELD_OP, pos + (j - start));
            j += 4;
            if (j >= s.length() || s.charAt(j) != '{') throw error(FilterParseException.Error.MISSING_BRACE_OPEN, pos + (j + 1 - start));   // after the char read
            j++;
            int maskStart = j;
            while (j < s.length() && s.charAt(j) != '}') j++;
            if (j >= s.length()) throw error(FilterParseException.Error.MISSING_BRACE_CLOSE, pos + (j - start));
            if (j == maskStart) throw error(FilterParseException.Error.INVALID_CPULIST, pos + (j - start));
            java.util.BitSet cpus = cpulist(s.substring(maskStart, j));
            if (cpus == null || cpus.isEmpty()) throw error(FilterParseException.Error.INVALID_CPULIST, pos + (maskStart - start));
            i = j + 1;
            if (cpus.cardinality() == 1) return new Pred(field, op.equals("&") ? "==" : op, cpus.nextSetBit(0), null);
            return new Pred(field, op, 0, null, cpus);
        }
    }

    /** The kernel's cpus ({@code nr_cpumask_bits} with {@code NR_CPUS} 8192, Debian's): a cpulist's bound. */
    static final int CPUMASK_BITS = 8192;

    /**
     * {@code bitmap_parselist}: comma-separated cpus and ranges {@code a-b}, a range optionally
     * {@code a-b:used/group}; null when it does not parse or names a cpu at or above
     * {@link #CPUMASK_BITS}.
     */
    static java.util.BitSet cpulist(String list) {
        java.util.BitSet out = new java.util.BitSet();
        for (String part : list.split(",", -1)) {
            java.util.regex.Matcher m = java.util.regex.Pattern.compile("(\\d+)(?:-(\\d+)(?::(\\d+)/(\\d+))?)?").matcher(part.strip());
            if (!m.matches()) return null;
            try {
                int a = Integer.parseInt(m.group(1)), b = m.group(2) == null ? a : Integer.parseInt(m.group(2));
                int used = m.group(3) == null ? 1 : Integer.parseInt(m.group(3)), group = m.group(4) == null ? 1 : Integer.parseInt(m.group(4));
                if (a > b || b >= CPUMASK_BITS || used == 0 || group == 0 || used > group) return null;
                for (int c = a; c <= b; c++) if ((c - a) % group < used) out.set(c);
            } catch (NumberFormatException e) {
                return null;
            }
        }
        return out;
    }
}
