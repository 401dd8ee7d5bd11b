package org.roster.clients;

import java.io.PrintStream;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.Supplier;

/**
 * A scenario's report: one JSON object per step on stdout ({"step":…,"ok":true,…}); a failed
 * step prints "ok":false with its reason, a "FAIL step: reason" line on stderr, and ends the
 * process with status 1 ({@link #fail}), or, for a scenario whose test judges every step,
 * prints "ok":false and goes on ({@link #failed}). A watchdog ends it with status 3. The clients' own logs must not
 * go to stdout: {@link #capture()} keeps the real stdout for the steps and points
 * System.out at stderr.
 */
public final class Steps {
    private static PrintStream out = System.out;

    private Steps() {}

    /** Keeps stdout for the step lines; everything else printed goes to stderr. */
    public static void capture() {
        out = System.out;
        System.setOut(System.err);
    }

    /** Ends the process with status 3 after {@code limit}, whatever it is doing. */
    public static void watchdog(Duration limit) {
        Thread t = new Thread(() -> {
            try {
                Thread.sleep(limit.toMillis());
            } catch (InterruptedException e) {
                return;
            }
            System.err.println("FAIL watchdog: the run took longer than " + limit);
            Runtime.getRuntime().halt(3);
        }, "watchdog");
        t.setDaemon(true);
        t.start();
    }

    /** Prints a passed step with its fields (name, value, name, value, ...). */
    public static void step(String name, Object... fields) {
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("step", name);
        line.put("ok", true);
        for (int i = 0; i + 1 < fields.length; i += 2) {
            line.put(String.valueOf(fields[i]), fields[i + 1]);
        }
        emit(line);
    }

    /**
     * Prints a step that did not pass, "ok":false with its fields, and goes on: for a
     * scenario whose every call is judged by the test, an error included.
     */
    public static void failed(String name, Object... fields) {
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("step", name);
        line.put("ok", false);
        for (int i = 0; i + 1 < fields.length; i += 2) {
            line.put(String.valueOf(fields[i]), fields[i + 1]);
        }
        emit(line);
    }

    /** Reports a failed step and ends the process with status 1. */
    public static RuntimeException fail(String name, String reason) {
        Map<String, Object> line = new LinkedHashMap<>();
        line.put("step", name);
        line.put("ok", false);
        line.put("reason", reason);
        emit(line);
        System.err.println("FAIL " + name + ": " + reason);
        System.err.flush();
        Runtime.getRuntime().halt(1);
        return new IllegalStateException("unreachable");
    }

    /** Fails the step when {@code condition} is false. */
    public static void check(String name, boolean condition, String reason) {
        if (!condition) {
            throw fail(name, reason);
        }
    }

    /**
     * Polls {@code cond} every 50 ms until it answers null (met) or {@code limit} passes, then
     * fails the step with the last answer. Answers how long it took, in milliseconds.
     */
    public static long waitFor(String name, Duration limit, Supplier<String> cond) {
        long start = System.nanoTime();
        while (true) {
            String why;
            try {
                why = cond.get();
            } catch (RuntimeException e) {
                why = e.toString();
            }
            long took = (System.nanoTime() - start) / 1_000_000;
            if (why == null) {
                return took;
            }
            if (took > limit.toMillis()) {
                throw fail(name, why + " (after " + took + " ms)");
            }
            try {
                Thread.sleep(50);
            } catch (InterruptedException e) {
                throw fail(name, "interrupted");
            }
        }
    }

    private static synchronized void emit(Map<String, Object> line) {
        out.println(Json.write(line));
        out.flush();
    }
}
