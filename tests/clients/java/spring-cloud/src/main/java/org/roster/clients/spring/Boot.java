package org.roster.clients.spring;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;

import org.roster.clients.Steps;

/**
 * What the provider and the consumer share: their flags ({@code --name value}), the Spring
 * properties every Spring Cloud Alibaba application here starts with, and the end of a run
 * (its stdin closing). Not a Spring component: each main class is its own application.
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

    /**
     * Parses the flags and prepares the process: step lines on stdout, everything else on
     * stderr; nacos-client's logs and snapshots (naming cache, config snapshots) under
     * {@code --dir}, never in the home directory.
     */
    public static Boot start(String[] args) {
        Steps.capture();
        Boot boot = new Boot(args);
        Path dir = Path.of(boot.flag("dir"));
        try {
            Files.createDirectories(dir);
        } catch (IOException e) {
            throw Steps.fail("args", "cannot create " + dir + ": " + e);
        }
        System.setProperty("JM.LOG.PATH", dir.resolve("logs").toString());
        System.setProperty("JM.SNAPSHOT.PATH", dir.resolve("snapshot").toString());
        System.setProperty("nacos.logging.path", dir.resolve("logs").toString());
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
     * The properties of every application here, as Spring command-line arguments: roster
     * with auth, every address on loopback, no banner, the client's logs on stderr.
     */
    public List<String> springArgs(String application) {
        Map<String, String> p = new LinkedHashMap<>();
        p.put("spring.application.name", application);
        p.put("spring.main.banner-mode", "off");
        p.put("spring.cloud.nacos.server-addr", flag("server"));
        p.put("spring.cloud.nacos.username", flag("username"));
        p.put("spring.cloud.nacos.password", flag("password"));
        // The address announced to roster, and the one Spring Cloud's InetUtils would pick.
        p.put("spring.cloud.nacos.discovery.ip", "127.0.0.1");
        p.put("spring.cloud.inetutils.preferred-networks", "127.");
        p.put("server.address", "127.0.0.1");
        p.put("logging.level.root", flag("log-level", "WARN"));
        List<String> out = new ArrayList<>();
        p.forEach((k, v) -> out.add("--" + k + "=" + v));
        return out;
    }

    /**
     * A latch released when stdin closes (the test ending the program) — only when stdin is
     * a pipe or a file; a terminal's stdin keeps the program running until its watchdog.
     */
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
