package org.roster.clients;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

/**
 * A consumer's calling loop and its reports, for the programs that call providers through
 * a load balancer: one call every {@code interval} ms until {@code end} (Unix ms) or
 * {@code stop} opens; once a second {"step":"calls","by":{"p1":10,...},"errors":0,"at_ms":…}
 * (calls answered per provider name, failed calls, the end of that second in Unix ms; with
 * "last_error" and "last_error_ms" when a call failed); at the end
 * {"step":"done","answered":…,"errors":…}. A call answers the name of the provider that
 * answered it, or throws.
 */
public final class Calls {
    private Map<String, Integer> by = new LinkedHashMap<>();
    private int errors;
    private String lastError;
    private long lastErrorMs;
    private long answered;
    private long failed;

    private Calls() {}

    private synchronized void add(String answeredBy, String error) {
        if (error == null) {
            by.merge(answeredBy, 1, Integer::sum);
            answered++;
        } else {
            errors++;
            failed++;
            lastError = error;
            lastErrorMs = System.currentTimeMillis();
        }
    }

    private synchronized List<Object> second() {
        List<Object> line = new ArrayList<>(List.of("by", by, "errors", errors, "at_ms", System.currentTimeMillis()));
        if (lastError != null) {
            line.addAll(List.of("last_error", lastError, "last_error_ms", lastErrorMs));
        }
        by = new LinkedHashMap<>();
        errors = 0;
        lastError = null;
        return line;
    }

    /** Calls until {@code end} or {@code stop}, reporting each second; prints "done". */
    public static void loop(Supplier<String> call, long interval, long end, CountDownLatch stop) {
        Calls tally = new Calls();
        Thread report = new Thread(() -> {
            while (true) {
                try {
                    Thread.sleep(1000);
                } catch (InterruptedException e) {
                    return;
                }
                Steps.step("calls", tally.second().toArray());
            }
        }, "report");
        report.setDaemon(true);
        report.start();
        try {
            while (System.currentTimeMillis() < end && !stop.await(interval, TimeUnit.MILLISECONDS)) {
                String answeredBy = null;
                String error = null;
                try {
                    answeredBy = call.get();
                    if (answeredBy == null) {
                        error = "no name in the answer";
                    }
                } catch (RuntimeException e) {
                    error = e.toString();
                }
                tally.add(answeredBy, error);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        report.interrupt();
        synchronized (tally) {
            Steps.step("done", "answered", tally.answered, "errors", tally.failed);
        }
    }
}
