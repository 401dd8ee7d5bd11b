package org.roster.clients.dubbo;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.dubbo.config.ReferenceConfig;
import org.apache.dubbo.config.bootstrap.DubboBootstrap;
import org.roster.clients.Steps;
import org.roster.test.GreetReply;
import org.roster.test.GreetRequest;
import org.roster.test.Greeter;

/**
 * A Dubbo 3 consumer of {@code org.roster.test.Greeter} over Triple (hessian2), finding its
 * providers by application through roster (the interface → application mapping, then the
 * applications' instances and their revisions' metadata):
 *
 * <pre>
 * Consumer --server H:P[,H:P...] --username U --password P --app APP [--interval-ms 50] [--dir D]
 * </pre>
 *
 * It prints {"step":"dialed"} once its reference is made, calls Greet every interval (one
 * attempt per call, round robin) and prints once a second
 * {"step":"calls","by":{"p1":10,...},"errors":0,"at_ms":...} (calls answered per provider,
 * failed calls, the end of that second in Unix ms, the last error if any); it prints
 * {"step":"done"} and exits when its stdin closes or after --seconds.
 */
public final class Consumer {
    private Consumer() {}

    public static void main(String[] args) {
        Steps.capture();
        Options o = Options.parse(args);
        o.setup();
        long end = System.nanoTime() + o.seconds * 1_000_000_000L;

        ReferenceConfig<Greeter> reference = new ReferenceConfig<>();
        reference.setInterface(Greeter.class);
        reference.setProtocol("tri");
        // Providers may come later: no check at start.
        reference.setCheck(false);
        // One attempt per call: a call to a provider that fails is an error, not a retry
        // that hides it.
        reference.setCluster("failfast");
        reference.setRetries(0);
        reference.setLoadbalance("roundrobin");
        reference.setTimeout(2000);
        reference.setParameters(Map.of("serialization", "hessian2"));

        long started = System.nanoTime();
        DubboBootstrap.getInstance()
                .application(o.application())
                .registry(o.registry())
                .metadataReport(o.metadataReport())
                .configCenter(o.configCenter())
                .reference(reference)
                .start();
        Greeter greeter = reference.get();
        Steps.step("dialed", "interface", Greeter.class.getName(), "start_ms", (System.nanoTime() - started) / 1_000_000);

        Tally tally = new Tally();
        Thread reporter = new Thread(() -> {
            while (true) {
                Provider.sleep(1000);
                tally.report();
            }
        }, "reporter");
        reporter.setDaemon(true);
        reporter.start();

        AtomicBoolean closed = Options.stdinClosed();
        while (!closed.get() && System.nanoTime() < end) {
            try {
                GreetReply reply = greeter.Greet(new GreetRequest(o.app));
                tally.answered(String.valueOf(reply.getProvider()));
            } catch (RuntimeException e) {
                tally.failed(e);
            }
            Provider.sleep(o.intervalMs);
        }
        synchronized (tally) {
            Steps.step("done");
        }
        o.exit();
    }

    /** The calls of the current second: answered per provider, failed, the last error. */
    static final class Tally {
        private Map<String, Integer> by = new LinkedHashMap<>();
        private int errors;
        private String lastError;

        synchronized void answered(String provider) {
            by.merge(provider, 1, Integer::sum);
        }

        synchronized void failed(RuntimeException e) {
            errors++;
            lastError = e.toString();
        }

        /** Prints the second's line and starts the next second. */
        synchronized void report() {
            Steps.step("calls", "by", by, "errors", errors, "at_ms", System.currentTimeMillis(),
                    "last_error", lastError);
            by = new LinkedHashMap<>();
            errors = 0;
            lastError = null;
        }
    }
}
