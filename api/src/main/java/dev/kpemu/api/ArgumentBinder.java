package dev.kpemu.api;

import java.lang.reflect.Constructor;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.RecordComponent;
import java.util.List;

/**
 * Fills a record from a hit's arguments ({@link Kprobe#typed}): each component is a parameter
 * of the function, by name from the kernel's BTF prototype when there is one (a {@code String}
 * component only for a {@code char *} parameter), else by position.
 * The mapping is worked out at the first hit, when the kernel's BTF is known.
 */
final class ArgumentBinder<A extends Record> {
    private final String function;
    private final Class<A> type;
    private final RecordComponent[] components;
    private final Constructor<A> constructor;
    private int[] index;

    ArgumentBinder(String function, Class<A> type) {
        this.function = function;
        this.type = type;
        this.components = type.getRecordComponents();
        Class<?>[] types = new Class<?>[components.length];
        for (int i = 0; i < types.length; i++) {
            types[i] = components[i].getType();
            if (!supported(types[i])) throw new IllegalArgumentException(type.getSimpleName() + "." + components[i].getName()
                    + ": a typed argument is long, int, short, byte, boolean or String, not " + types[i].getSimpleName());
        }
        try {
            this.constructor = type.getDeclaredConstructor(types);
            this.constructor.setAccessible(true);
        } catch (NoSuchMethodException | RuntimeException e) {
            throw new IllegalArgumentException("cannot construct " + type.getName() + ": " + e, e);
        }
    }

    private static boolean supported(Class<?> c) {
        return c == long.class || c == int.class || c == short.class || c == byte.class || c == boolean.class || c == String.class;
    }

    A bind(ProbeContext ctx) throws ReflectiveOperationException {
        if (index == null) index = mapping(ctx.argNames(), ctx.argTypes());
        Object[] values = new Object[components.length];
        for (int i = 0; i < values.length; i++) {
            long raw = ctx.arg(index[i]);
            Class<?> c = components[i].getType();
            values[i] = c == long.class ? raw : c == int.class ? (int) raw : c == short.class ? (short) raw
                    : c == byte.class ? (byte) raw : c == boolean.class ? raw != 0 : ctx.string(raw).orElse(null);
        }
        try {
            return constructor.newInstance(values);
        } catch (InvocationTargetException e) {
            throw e;
        }
    }

    /** By name when the BTF has the prototype (a String only for a {@code char *}), else by position. */
    private int[] mapping(List<String> btfNames, List<String> btfTypes) {
        int[] m = new int[components.length];
        for (int i = 0; i < m.length; i++) {
            if (btfNames.isEmpty()) {
                m[i] = i;
                continue;
            }
            String name = components[i].getName();
            m[i] = btfNames.indexOf(name);
            if (m[i] < 0) throw new IllegalArgumentException(type.getSimpleName() + "." + name
                    + ": " + function + " has no such parameter (its BTF: " + String.join(", ", btfNames) + ")");
            if (components[i].getType() == String.class && !btfTypes.get(m[i]).endsWith("char *"))
                throw new IllegalArgumentException(type.getSimpleName() + "." + name + ": a String, but " + function
                        + "'s " + name + " is " + btfTypes.get(m[i]));
        }
        return m;
    }
}
