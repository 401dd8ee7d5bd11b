package org.roster.clients.dubbo;

import com.alibaba.fastjson2.JSON;
import com.alibaba.fastjson2.JSONArray;
import com.alibaba.fastjson2.JSONObject;
import java.io.IOException;
import java.io.InputStream;
import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.stream.Stream;
import org.apache.dubbo.config.ApplicationConfig;
import org.apache.dubbo.config.ConfigCenterConfig;
import org.apache.dubbo.config.MetadataReportConfig;
import org.apache.dubbo.config.RegistryConfig;
import org.roster.clients.RosterHttp;
import org.roster.clients.Steps;

/**
 * What the provider and the consumer share: the flags, the process settings that keep every
 * file in --dir and every address on loopback, and Dubbo's root configuration — roster as
 * registry (application-level only), metadata report and config centre, each a
 * {@code nacos://} address with the user and password in its parameters, as Dubbo users
 * write it.
 */
final class Options {
    String servers = "127.0.0.1:8848";
    String username = "nacos";
    String password = "";
    String app = "";
    String namespace = "";
    String name = "";
    int port;
    long intervalMs = 50;
    int seconds = 300;
    Path dir;
    boolean ownDir;

    static Options parse(String[] args) {
        Options o = new Options();
        for (int i = 0; i < args.length; i++) {
            String flag = args[i];
            Steps.check("flags", i + 1 < args.length, flag + " needs a value");
            String v = args[++i];
            switch (flag) {
                case "--server" -> o.servers = v;
                case "--username" -> o.username = v;
                case "--password" -> o.password = v;
                case "--app" -> o.app = v;
                case "--namespace" -> o.namespace = v;
                case "--name" -> o.name = v;
                case "--port" -> o.port = Integer.parseInt(v);
                case "--interval-ms" -> o.intervalMs = Long.parseLong(v);
                case "--seconds" -> o.seconds = Integer.parseInt(v);
                case "--dir" -> o.dir = Path.of(v);
                default -> throw Steps.fail("flags", "unknown flag " + flag);
            }
        }
        Steps.check("flags", !o.app.isEmpty() && !o.password.isEmpty(), "--app and --password are required");
        return o;
    }

    /**
     * Points every file the libraries write into --dir (a new temp dir by default), makes
     * Dubbo register and bind loopback only, and starts the watchdog. Runs before any Dubbo
     * or Nacos class loads: they read these properties once.
     */
    void setup() {
        try {
            if (dir == null) {
                dir = Files.createTempDirectory("roster-dubbo-");
                ownDir = true;
            }
            Files.createDirectories(dir);
        } catch (IOException e) {
            throw Steps.fail("dir", e.toString());
        }
        String d = dir.toAbsolutePath().toString();
        // Dubbo's caches (~/.dubbo: registry, metadata and mapping caches) and anything else
        // that writes under the home directory.
        System.setProperty("user.home", d);
        System.setProperty("dubbo.meta.cache.filePath", d + "/.dubbo");
        System.setProperty("dubbo.mapping.cache.filePath", d + "/.dubbo");
        // The Nacos client's log and its snapshot/failover cache.
        System.setProperty("JM.LOG.PATH", d + "/logs");
        System.setProperty("JM.SNAPSHOT.PATH", d + "/nacos");
        System.setProperty("nacos.logging.path", d + "/logs");
        System.setProperty("nacos.logging.default.config.enabled", "false");
        // The address Dubbo registers: loopback. Dubbo takes no 127.x address as given
        // (DUBBO_IP_TO_REGISTRY or DUBBO_IP_TO_BIND = 127.0.0.1 is an error; a protocol host
        // of 127.0.0.1 is replaced by the address of the first usable network interface);
        // it registers 127.0.0.1 only when it finds no usable interface and the host name
        // resolves to loopback. So: every interface ignored, and the host name resolved by
        // a hosts file of ours, read when the JVM first resolves a name (not yet).
        System.setProperty("dubbo.network.interface.ignored", ".*");
        try {
            Path hosts = dir.resolve("hosts");
            String host = Files.readString(Path.of("/proc/sys/kernel/hostname")).trim();
            Files.writeString(hosts, "127.0.0.1 localhost " + host + "\n");
            System.setProperty("jdk.net.hosts.file", hosts.toString());
        } catch (IOException e) {
            throw Steps.fail("hosts", e.toString());
        }
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        System.setProperty("org.slf4j.simpleLogger.logFile", "System.err");
        Steps.watchdog(Duration.ofSeconds(seconds + 30L));
    }

    /**
     * roster as Dubbo addresses it: {@code nacos://FIRST?backup=OTHERS&username=..&password=..}.
     */
    String nacosAddress() {
        String[] list = servers.split(",");
        StringBuilder b = new StringBuilder("nacos://").append(list[0]).append('?');
        if (list.length > 1) {
            b.append("backup=").append(String.join(",", Arrays.copyOfRange(list, 1, list.length))).append('&');
        }
        b.append("username=").append(enc(username)).append("&password=").append(enc(password));
        if (!namespace.isEmpty()) {
            b.append("&namespace=").append(enc(namespace));
        }
        return b.toString();
    }

    private static String enc(String s) {
        return URLEncoder.encode(s, StandardCharsets.UTF_8);
    }

    ApplicationConfig application() {
        ApplicationConfig a = new ApplicationConfig(app);
        // Application-level discovery only: the instance is registered, no interface.
        a.setRegisterMode("instance");
        // The revision's metadata goes to the metadata report (roster), as dubbo-go's.
        a.setMetadataType("remote");
        a.setQosEnable(false);
        return a;
    }

    RegistryConfig registry() {
        RegistryConfig r = new RegistryConfig(nacosAddress());
        // The discovery model Dubbo 3 users configure: instances by application.
        r.setParameters(Map.of("registry-type", "service"));
        r.setUseAsConfigCenter(false);
        r.setUseAsMetadataCenter(false);
        return r;
    }

    MetadataReportConfig metadataReport() {
        return new MetadataReportConfig(nacosAddress());
    }

    ConfigCenterConfig configCenter() {
        ConfigCenterConfig c = new ConfigCenterConfig();
        c.setAddress(nacosAddress());
        c.setGroup("dubbo");
        return c;
    }

    /** A watcher of stdin: true once it has reached its end (the tests close it to stop). */
    static AtomicBoolean stdinClosed() {
        AtomicBoolean closed = new AtomicBoolean();
        Thread t = new Thread(() -> {
            byte[] buf = new byte[256];
            try (InputStream in = System.in) {
                while (in.read(buf) >= 0) {
                    // Only the end matters.
                }
            } catch (IOException e) {
                // An unreadable stdin ends the run like a closed one.
            }
            closed.set(true);
        }, "stdin");
        t.setDaemon(true);
        t.start();
        return closed;
    }

    /** The instances roster lists for {@code service} ("ip:port" → metadata); throws when it cannot tell. */
    Map<String, JSONObject> instances(RosterHttp r, String service) {
        Map<String, String> p = RosterHttp.params("serviceName", service, "groupName", "DEFAULT_GROUP");
        if (!namespace.isEmpty()) {
            p.put("namespaceId", namespace);
        }
        RosterHttp.Answer a = r.call("GET", "/nacos/v1/ns/instance/list", p);
        if (a.status() != 200) {
            // Steps.waitFor retries: a node that is not ready yet is no failure.
            throw new IllegalStateException("instance list: " + a.status() + " " + a.body());
        }
        JSONObject v = JSON.parseObject(a.body());
        Map<String, JSONObject> out = new LinkedHashMap<>();
        JSONArray hosts = v.getJSONArray("hosts");
        for (int i = 0; hosts != null && i < hosts.size(); i++) {
            JSONObject h = hosts.getJSONObject(i);
            JSONObject meta = h.getJSONObject("metadata");
            out.put(h.getString("ip") + ":" + h.getIntValue("port"), meta == null ? new JSONObject() : meta);
        }
        return out;
    }

    /** Ends a run that passed at once (no graceful shutdown), removing the temp dir it made. */
    void exit() {
        System.out.flush();
        System.err.flush();
        if (ownDir) {
            try (Stream<Path> files = Files.walk(dir)) {
                List<Path> all = new ArrayList<>(files.toList());
                all.sort(Comparator.reverseOrder());
                for (Path f : all) {
                    Files.deleteIfExists(f);
                }
            } catch (IOException e) {
                // A leftover temp dir is no failure.
            }
        }
        Runtime.getRuntime().halt(0);
    }
}
