package dev.kpemu.junit;

import java.lang.reflect.Method;
import java.util.List;
import java.util.Optional;

import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.InvocationInterceptor;
import org.junit.jupiter.api.extension.ParameterContext;
import org.junit.jupiter.api.extension.ParameterResolutionException;
import org.junit.jupiter.api.extension.ParameterResolver;
import org.junit.jupiter.api.extension.ReflectiveInvocationContext;
import org.junit.platform.commons.support.AnnotationSupport;

import dev.kpemu.api.HandlerFailure;
import dev.kpemu.api.KpemuSession;

/**
 * Gives {@link KpemuTest} methods their {@link KpemuSession}, and fails a test (or one
 * invocation of a parameterized test) that never ran a session it was given, or when a Java
 * handler of one threw:
 * Linux's kprobes go on after a handler's error, so kpemu's do too, and without this a test that
 * forgot to look at {@link dev.kpemu.api.SessionResult#handlerFailures()} would pass.
 */
public final class KpemuExtension implements ParameterResolver, InvocationInterceptor {

    @Override public boolean supportsParameter(ParameterContext p, ExtensionContext ctx) {
        return p.getParameter().getType() == KpemuSession.class && annotation(ctx).isPresent();
    }

    @Override public Object resolveParameter(ParameterContext p, ExtensionContext ctx) {
        return Sessions.build(annotation(ctx).orElseThrow(() -> new ParameterResolutionException("no @KpemuTest")));
    }

    private static Optional<KpemuTest> annotation(ExtensionContext ctx) {
        Optional<KpemuTest> m = ctx.getTestMethod().flatMap(x -> AnnotationSupport.findAnnotation(x, KpemuTest.class));
        return m.isPresent() ? m : ctx.getTestClass().flatMap(c -> AnnotationSupport.findAnnotation(c, KpemuTest.class));
    }

    @Override public void interceptTestMethod(Invocation<Void> invocation, ReflectiveInvocationContext<Method> call,
                                              ExtensionContext ctx) throws Throwable {
        invocation.proceed();
        check(call.getArguments());
    }

    @Override public void interceptTestTemplateMethod(Invocation<Void> invocation, ReflectiveInvocationContext<Method> call,
                                                      ExtensionContext ctx) throws Throwable {
        invocation.proceed();
        check(call.getArguments());
    }

    /**
     * Throws an AssertionError for the first handler failure of any session among the test's
     * arguments, or for a session the test never ran (its probes never saw a kernel: whatever the
     * test asserted, it asserted nothing about one).
     */
    static void check(List<Object> arguments) {
        for (Object a : arguments) {
            if (!(a instanceof KpemuSession s)) continue;
            if (!s.hasRun()) throw new AssertionError("the test never ran its kpemu session (" + s.arch().linuxName() + " " + s.kernel()
                    + "): call session.run()");
            List<HandlerFailure> failures = s.handlerFailures();
            if (failures.isEmpty()) continue;
            AssertionError e = new AssertionError("a kprobe handler threw (" + failures.size() + " failure(s)); first: " + failures.get(0),
                    failures.get(0).error());
            for (int i = 1; i < failures.size(); i++) e.addSuppressed(failures.get(i).error());
            throw e;
        }
    }
}
