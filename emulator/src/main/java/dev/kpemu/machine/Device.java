package dev.kpemu.machine;

/** A device model. Devices are small self-contained classes attached to the {@link DeviceBus}. */
public interface Device {
    /** A short name (shown in the memory map and error messages). */
    String name();

    /** Puts the device in its reset state. */
    default void reset() {}

    /** A device that answers guest-physical loads and stores in a window. */
    interface Mmio extends Device {
        /** Window size in bytes (page multiple). */
        long mmioSize();

        long read(long offset, int size);

        void write(long offset, int size, long value);
    }

    /** A device on the x86 I/O port space. */
    interface PortIo extends Device {
        int in(int port, int size);

        void out(int port, int size, int value);
    }
}
