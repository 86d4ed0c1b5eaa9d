package dev.kpemu.api;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;

import dev.kpemu.image.SymbolTable;
import dev.kpemu.image.btf.Btf;
import dev.kpemu.image.btf.BtfKind;
import dev.kpemu.image.btf.BtfType;
import dev.kpemu.kprobes.Kprobes;
import dev.kpemu.kprobes.KretprobeInstance;
import dev.kpemu.kprobes.Regs;
import dev.kpemu.kprobes.events.GuestText;
import dev.kpemu.kprobes.events.MachineFetchContext;
import dev.kpemu.machine.Arch;
import dev.kpemu.machine.Machine;
import dev.kpemu.machine.StopReason;

/** The one {@link ProbeContext} of a session, reset at every hit. */
final class HitContext implements ProbeContext {
    /** kprobe_events' string limit ({@code MAX_STRING_SIZE}, PATH_MAX). */
    static final int MAX_STRING = 4096;

    private final Machine machine;
    private final Kprobes kprobes;
    private final MachineFetchContext fetch;
    private final SymbolTable symbols;
    private final Btf btf;
    private final Map<String, List<String>> paramNames = new java.util.HashMap<>();
    /** Per-instance data of outstanding kretprobe invocations. */
    private final Map<KretprobeInstance, Object> instanceData = new java.util.IdentityHashMap<>();

    private Probe probe;
    private Regs regs;
    private KretprobeInstance instance;
    private boolean returning, skip;

    HitContext(Machine machine, Kprobes kprobes, MachineFetchContext fetch, SymbolTable symbols, Btf btf) {
        this.machine = machine;
        this.kprobes = kprobes;
        this.fetch = fetch;
        this.symbols = symbols;
        this.btf = btf;
    }

    void begin(Probe p, Regs r, KretprobeInstance ri, boolean atReturn) {
        probe = p;
        regs = r;
        instance = ri;
        returning = atReturn;
        skip = false;
        fetch.begin(r);
    }

    boolean skipped() { return skip; }

    /** A return was handled (or the instance is recycled): its data goes. */
    void forget(KretprobeInstance ri) { instanceData.remove(ri); }

    @Override public Probe probe() { return probe; }

    @Override public Arch arch() { return machine.arch(); }

    @Override public long ip() { return regs.ip(); }

    @Override public long sp() { return regs.sp(); }

    @Override public long reg(String name) { return regs.get(name); }

    @Override public void setReg(String name, long value) { regs.set(name, value); }

    @Override public Map<String, Long> registers() {
        Map<String, Long> m = new LinkedHashMap<>();
        for (String n : regs.names()) m.put(n, regs.get(n));
        return m;
    }

    @Override public long arg(int n) { return regs.arg(n); }

    @Override public long arg(String name) {
        List<String> names = argNames();
        int i = names.indexOf(name);
        if (i < 0) throw new IllegalArgumentException(probe.symbol() + " has no parameter '" + name + "' in the kernel's BTF"
                + (names.isEmpty() ? " (no prototype)" : " (its parameters: " + String.join(", ", names) + ")"));
        return regs.arg(i);
    }

    @Override public List<String> argNames() {
        String fn = probe.symbol();
        if (fn == null || btf == null) return List.of();
        return paramNames.computeIfAbsent(fn, f -> btf.funcProto(f).map(s -> s.params().stream()
                .filter(p -> !p.variadic()).map(p -> p.name()).toList()).orElse(List.of()));
    }

    @Override public List<String> argTypes() {
        return signature().map(sig -> sig.params().stream().map(p -> btf.typeName(p.typeId())).toList()).orElse(List.of());
    }

    private Optional<Btf.FuncSignature> signature() {
        String fn = probe.symbol();
        return fn == null || btf == null ? Optional.empty() : btf.funcProto(fn);
    }

    @Override public OptionalLong field(String arg, String path) {
        Btf.FuncSignature sig = signature().orElseThrow(() -> new IllegalArgumentException(probe.symbol() + " has no prototype in the kernel's BTF"));
        List<String> names = sig.paramNames();
        int i = names.indexOf(arg);
        if (i < 0) throw new IllegalArgumentException(probe.symbol() + " has no parameter '" + arg + "' (its parameters: " + String.join(", ", names) + ")");
        int typeId = sig.params().get(i).typeId();
        BtfType ptr = btf.resolve(typeId);
        BtfType target = ptr == null || ptr.kind() != BtfKind.PTR ? null : btf.resolve(ptr.sizeOrType());
        if (target == null || !target.kind().isComposite())
            throw new IllegalArgumentException(arg + " is " + btf.typeName(typeId) + ", not a pointer to a struct or union");
        Btf.Field f;
        try {
            f = btf.offsetOf(target, path);
        } catch (java.util.NoSuchElementException e) {
            throw new IllegalArgumentException(e.getMessage(), e);
        }
        if (f.bitfield()) throw new IllegalArgumentException(path + " is a bitfield");
        if (f.size() != 1 && f.size() != 2 && f.size() != 4 && f.size() != 8)
            throw new IllegalArgumentException(path + " is " + f.size() + " bytes, not a scalar");
        byte[] b = new byte[(int) f.size()];
        if (!fetch.readProbeMemory(regs.arg(i) + f.offset(), b, 0, b.length)) return OptionalLong.empty();
        long v = 0;
        for (int k = b.length - 1; k >= 0; k--) v = (v << 8) | (b[k] & 0xff);
        return OptionalLong.of(v);
    }

    @Override public long returnValue() {
        if (!returning) throw new IllegalStateException("returnValue() is for a kretprobe's return handler");
        return regs.returnValue();
    }

    @Override public Optional<byte[]> readKernel(long address, int length) {
        byte[] b = new byte[length];
        return fetch.readKernel(address, b, 0, length) ? Optional.of(b) : Optional.empty();
    }

    @Override public Optional<byte[]> readUser(long address, int length) {
        byte[] b = new byte[length];
        return fetch.readUser(address, b, 0, length) ? Optional.of(b) : Optional.empty();
    }

    @Override public OptionalLong readLong(long address) {
        byte[] b = new byte[8];
        if (!fetch.readProbeMemory(address, b, 0, 8)) return OptionalLong.empty();
        long v = 0;
        for (int i = 7; i >= 0; i--) v = (v << 8) | (b[i] & 0xff);
        return OptionalLong.of(v);
    }

    @Override public Optional<String> kernelString(long address) { return string(address, 0); }

    @Override public Optional<String> userString(long address) { return string(address, 1); }

    @Override public Optional<String> string(long address) { return string(address, 2); }

    private Optional<String> string(long address, int how) {
        byte[] b = new byte[MAX_STRING];
        int n = switch (how) {
            case 0 -> fetch.readKernelString(address, b, 0, MAX_STRING);
            case 1 -> fetch.readUserString(address, b, 0, MAX_STRING);
            default -> fetch.readProbeString(address, b, 0, MAX_STRING);
        };
        if (n < 0) return Optional.empty();
        return Optional.of(GuestText.decode(b, 0, Math.max(0, n - 1)));
    }

    @Override public String comm() { return GuestText.decode(fetch.comm()); }

    @Override public int pid() { return fetch.pid(); }

    @Override public int tgid() { return fetch.tgid(); }

    @Override public int cpu() { return machine.cpu(); }

    @Override public long currentTask() { return fetch.currentTask(); }

    @Override public long nanos() { return machine.clock().liveNanos(); }

    @Override public List<Long> stackTrace() {
        long[] a = kprobes.stackTrace(regs, 64);
        List<Long> out = new ArrayList<>(a.length);
        for (long x : a) out.add(x);
        return out;
    }

    @Override public String symbolize(long address) { return symbols.format(address); }

    @SuppressWarnings("unchecked")
    @Override public <T> T data() {
        return instance == null ? null : (T) instanceData.get(instance);
    }

    @Override public void setData(Object value) {
        if (instance == null) throw new IllegalStateException("per-instance data is for kretprobes");
        instanceData.put(instance, value);
    }

    @Override public void skipInstance() {
        if (instance == null || returning) throw new IllegalStateException("skipInstance() is for a kretprobe's entry handler");
        skip = true;
    }

    @Override public void stopGuest(String why) {
        machine.requestStopAtSliceEnd(new StopReason.HostRequest(why));
    }

    @Override public String toString() {
        return probe + " at " + symbolize(regs.ip()) + " " + Arrays.toString(new long[] {regs.arg(0), regs.arg(1), regs.arg(2)});
    }
}
