package dev.kpemu.machine;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

import dev.kpemu.unicorn.Unicorn;

/**
 * Routes guest MMIO and (x86) port I/O to devices. MMIO windows are Unicorn MMIO mappings whose
 * callbacks call the device directly; a device must not stop the engine from a callback (that
 * replays the access): it records what it needs and the machine acts at the next safe point.
 *
 * <p>The bus serves every engine its {@link GuestMemory} serves: each MMIO window is mapped, and
 * the x86 port I/O hooks ({@code UC_HOOK_INSN} on IN and OUT) are installed, in each of them —
 * the machine's engine and every one that joined ({@link Machine#openSecondaryEngine}), before or
 * after the device was attached — and all of them call the same device objects.
 */
public final class DeviceBus {
    public record Attachment(Device device, long base, long size) {}

    private final Unicorn uc;
    private final GuestMemory memory;
    private final List<Attachment> mmio = new ArrayList<>();
    private final PortIoSlot[] ports = new PortIoSlot[0x10000];
    private final List<Attachment> portDevices = new ArrayList<>();
    /** True once the port I/O hooks are installed (in every engine served). */
    private boolean portHooks;

    private record PortIoSlot(Device.PortIo device) {}

    DeviceBus(Unicorn uc, GuestMemory memory) {
        this.uc = uc;
        this.memory = memory;
    }

    /** Attaches an MMIO device at guest-physical {@code base}. */
    public <D extends Device.Mmio> D attach(long base, D device) {
        memory.addMmio(device.name(), base, device.mmioSize());
        Attachment a = new Attachment(device, base, device.mmioSize());
        for (Unicorn e : memory.engines()) mapMmio(e, a);
        mmio.add(a);
        return device;
    }

    private static void mapMmio(Unicorn engine, Attachment a) {
        Device.Mmio d = (Device.Mmio) a.device();
        engine.mmioMap(a.base(), a.size(), d::read, d::write);
    }

    private void hookPorts(Unicorn engine) {
        engine.hookPortIn((u, port, size) -> in(port, size));
        engine.hookPortOut((u, port, size, value) -> out(port, size, value));
    }

    /**
     * Serves {@code engine} as the machine's own (call after {@link GuestMemory#join}, which makes
     * later attachments reach it): every MMIO window attached so far mapped, the port I/O hooks
     * installed when there are ports.
     */
    void join(Unicorn engine) {
        for (Attachment a : mmio) mapMmio(engine, a);
        if (portHooks) hookPorts(engine);
    }

    /** Attaches a port-I/O device on {@code count} ports starting at {@code first} (x86 only). */
    public <D extends Device.PortIo> D attachPorts(int first, int count, D device) {
        if (uc.arch() != Unicorn.ARCH_X86) throw new IllegalStateException("port I/O exists only on x86");
        for (int p = first; p < first + count; p++) {
            if (ports[p] != null) throw new IllegalArgumentException(device.name() + ": port 0x" + Integer.toHexString(p) + " taken by " + ports[p].device().name());
        }
        for (int p = first; p < first + count; p++) ports[p] = new PortIoSlot(device);
        portDevices.add(new Attachment(device, first, count));
        if (!portHooks) {
            for (Unicorn e : memory.engines()) hookPorts(e);
            portHooks = true;
        }
        return device;
    }

    /** Reads a port; unclaimed ports read as all ones, as on a PC. */
    public int in(int port, int size) {
        PortIoSlot s = ports[port & 0xffff];
        if (s == null) return size == 1 ? 0xff : size == 2 ? 0xffff : -1;
        return s.device().in(port, size);
    }

    /** Writes a port; writes to unclaimed ports are dropped. */
    public void out(int port, int size, int value) {
        PortIoSlot s = ports[port & 0xffff];
        if (s != null) s.device().out(port, size, value);
    }

    public List<Attachment> mmioDevices() { return Collections.unmodifiableList(mmio); }

    public List<Attachment> portDevices() { return Collections.unmodifiableList(portDevices); }

    public void reset() {
        for (Attachment a : mmio) a.device().reset();
        for (Attachment a : portDevices) a.device().reset();
    }
}
