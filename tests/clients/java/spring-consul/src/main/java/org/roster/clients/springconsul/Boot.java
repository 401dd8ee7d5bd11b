package org.roster.clients.springconsul;

import java.io.IOException;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;

import org.roster.clients.Steps;

/**
 * What the Consul provider and consumer share: their flags ({@code --name value}), the
 * Spring properties both start with (roster as their Consul agent, a roster API token as
 * their ACL token), and the end of a run (its stdin closing). Not a Spring component.
 */
public final class Boot {
    private final Map<String, String> flags = new LinkedHashMap<>();

    private Boot(String[] args) {
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (!a.startsWith("--") || i + 1 >= args.length) {
                throw Steps.fail("args", "expected --name value pairs, got " + a);
            }
            flags.put(a.substring(2), args[++i]);
        }
    }

    /** Parses the flags; step lines on stdout, everything else on stderr; a watchdog. */
    public static Boot start(String[] args) {
        Steps.capture();
        Boot boot = new Boot(args);
        Steps.watchdog(java.time.Duration.ofSeconds(Long.parseLong(boot.flag("seconds", "300")) + 30));
        return boot;
    }

    public String flag(String name) {
        String v = flags.get(name);
        if (v == null) {
            throw Steps.fail("args", "missing --" + name);
        }
        return v;
    }

    public String flag(String name, String otherwise) {
        return flags.getOrDefault(name, otherwise);
    }

    /**
     * The properties of both programs, as Spring command-line arguments: roster's HTTP
     * address as the Consul agent's ({@code spring.cloud.consul.host/port}), a roster API
     * token as the ACL token, no Consul config (discovery only); every address on
     * loopback; no banner, the logs on stderr.
     */
    public List<String> springArgs(String application) {
        String server = flag("server");
        int colon = server.lastIndexOf(':');
        Map<String, String> p = new LinkedHashMap<>();
        p.put("spring.application.name", application);
        p.put("spring.main.banner-mode", "off");
        p.put("spring.cloud.consul.host", server.substring(0, colon));
        p.put("spring.cloud.consul.port", server.substring(colon + 1));
        p.put("spring.cloud.consul.discovery.acl-token", flag("token"));
        p.put("spring.cloud.consul.config.enabled", "false");
        p.put("spring.cloud.consul.discovery.prefer-ip-address", "true");
        p.put("spring.cloud.consul.discovery.ip-address", "127.0.0.1");
        p.put("spring.cloud.consul.discovery.hostname", "127.0.0.1");
        p.put("spring.cloud.inetutils.preferred-networks", "127.");
        p.put("server.address", "127.0.0.1");
        p.put("logging.level.root", flag("log-level", "WARN"));
        List<String> out = new ArrayList<>();
        p.forEach((k, v) -> out.add("--" + k + "=" + v));
        return out;
    }

    /** A latch released when stdin closes (the test ending the program). */
    public static CountDownLatch stdinClosed() {
        CountDownLatch closed = new CountDownLatch(1);
        Thread t = new Thread(() -> {
            InputStream in = System.in;
            byte[] buf = new byte[256];
            try {
                while (in.read(buf) >= 0) {
                    // Nothing is read from stdin but its end.
                }
            } catch (IOException e) {
                // A broken stdin ends the run as a closed one does.
            }
            closed.countDown();
        }, "stdin");
        t.setDaemon(true);
        t.start();
        return closed;
    }
}
