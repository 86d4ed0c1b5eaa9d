package dev.kpemu.api;

/**
 * A jprobe-style entry handler: {@code args} is a record whose components mirror the probed
 * function's parameters ({@link Kprobe#typed}).
 */
@FunctionalInterface
public interface TypedHandler<A extends Record> {
    void handle(ProbeContext ctx, A args) throws Exception;
}
