package dev.kpemu.kprobes.events;

import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

import dev.kpemu.image.btf.Btf;
import dev.kpemu.image.btf.BtfKind;
import dev.kpemu.image.btf.BtfType;
import dev.kpemu.machine.Arch;

/**
 * What a probe on a function's entry can fetch by name, from the kernel's own BTF
 * ({@code kpemu vars}, as {@code perf probe --vars} lists a function's variables): each
 * parameter with its C type, the fetch type Linux gives it untyped ({@code fetch_type_from_btf_type}),
 * its {@code $argN} and the register that holds it at entry, and what else it can be fetched as;
 * and {@code $retval} of a return probe.
 */
public final class FunctionVariables {
    /**
     * One variable.
     *
     * @param name      the parameter's name ({@code $retval} for the return value)
     * @param cType     its C type as BTF spells it ({@code struct file *})
     * @param fetchType what an untyped argument of that name is fetched as ({@code x64}), or null for void
     * @param argument  {@code $argN}, or null for {@code $retval}
     * @param register  where it is at entry ({@code %di}, {@code %x0}, {@code $stack1}), or the return register
     * @param also      other ways to fetch it ({@code :string/:ustring} for a char pointer, {@code ->member} for a struct pointer), or empty
     */
    public record Variable(String name, String cType, String fetchType, String argument, String register, String also) {}

    /** The prototype as C ({@code ssize_t vfs_read(struct file *file, ...)}) and its variables, parameters first. */
    public record Signature(String function, String prototype, List<Variable> variables) {}

    private FunctionVariables() {}

    /** The function's variables, or empty when the kernel's BTF has no FUNC of that name. */
    public static Optional<Signature> of(Btf btf, Arch arch, String function) {
        var f = btf.byName(function, BtfKind.FUNC);
        if (f.isEmpty()) return Optional.empty();
        BtfType proto = btf.type(f.get().type());
        if (proto == null || proto.kind() != BtfKind.FUNC_PROTO) return Optional.empty();
        RegisterSet regs = RegisterSet.of(arch);
        List<Variable> vars = new ArrayList<>();
        StringBuilder c = new StringBuilder(btf.typeName(proto.type())).append(' ').append(function).append('(');
        List<BtfType.Param> params = proto.params();
        for (int i = 0; i < params.size(); i++) {
            BtfType.Param p = params.get(i);
            if (i > 0) c.append(", ");
            if (p.variadic()) {
                c.append("...");
                continue;
            }
            String type = btf.typeName(p.typeId());
            c.append(type.endsWith("*") ? type + p.name() : type + " " + p.name());
            vars.add(new Variable(p.name(), type, fetchType(btf, p.typeId()), "$arg" + (i + 1), where(regs, arch, i), also(btf, p.typeId())));
        }
        if (params.isEmpty()) c.append("void");
        c.append(')');
        String ret = btf.typeName(proto.type());
        String retRegister = "%" + regs.names().stream().filter(n -> regs.lookup(n).slot() == regs.returnValueSlot()).findFirst().orElse("?");
        vars.add(new Variable("$retval", ret, proto.type() == 0 ? null : fetchType(btf, proto.type()), null, retRegister,
                proto.type() == 0 ? "refused: This function returns 'void' type" : also(btf, proto.type())));
        return Optional.of(new Signature(function, c.toString(), vars));
    }

    /** Every function the BTF describes, in type order (for an index of them). */
    public static java.util.stream.Stream<Signature> all(Btf btf, Arch arch) {
        return btf.idsOfKind(BtfKind.FUNC).mapToObj(btf::nameOf).distinct()
                .map(n -> of(btf, arch, n)).flatMap(Optional::stream);
    }

    /** {@code fetch_type_from_btf_type}, {@code x64} where Linux has none. */
    private static String fetchType(Btf btf, int typeId) {
        BtfType t = btf.resolve(typeId);
        if (t == null) return null;
        FetchType f = BtfFunction.fetchType(t, new int[2]);
        return (f != null ? f : FetchType.DEFAULT).typeName();
    }

    /** The register that holds parameter {@code i} (from 0) at entry, or the stack word x86 passes it in. */
    private static String where(RegisterSet regs, Arch arch, int i) {
        if (i < regs.registerArguments()) {
            int slot = regs.argumentSlot(i);
            return "%" + regs.names().stream().filter(n -> regs.lookup(n).slot() == slot).findFirst().orElse("?");
        }
        return regs.stackArguments() ? "$stack" + (i - regs.registerArguments() + 1) : "(not in a register)";
    }

    private static String also(Btf btf, int typeId) {
        BtfType t = btf.resolve(typeId);
        if (t == null || t.kind() != BtfKind.PTR) return "";
        BtfType target = btf.resolve(t.type());
        if (target == null) return "";
        if (target.kind() == BtfKind.INT && target.intBits() == 8) return ":string or :ustring (the text it points to)";
        if (target.kind().isComposite()) return "->MEMBER (" + btf.typeName(target.id()) + ")";
        return "";
    }
}
