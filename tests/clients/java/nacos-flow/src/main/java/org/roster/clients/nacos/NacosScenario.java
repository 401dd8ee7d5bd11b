package org.roster.clients.nacos;

import com.alibaba.nacos.api.NacosFactory;
import com.alibaba.nacos.api.PropertyKeyConst;
import com.alibaba.nacos.api.config.ConfigService;
import com.alibaba.nacos.api.config.listener.Listener;
import com.alibaba.nacos.api.exception.NacosException;
import com.alibaba.nacos.api.naming.NamingService;
import com.alibaba.nacos.api.naming.listener.NamingEvent;
import com.alibaba.nacos.api.naming.pojo.Instance;
import com.alibaba.nacos.api.naming.pojo.ListView;
import com.alibaba.nacos.common.utils.VersionUtils;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.Executor;
import org.roster.clients.RosterHttp;
import org.roster.clients.Steps;

/**
 * The Java nacos-client scenarios, one source for the three lines (1.x: HTTP with UDP push;
 * 2.x and 3.x: gRPC), compiled by each nacos-client-N module against its own line; what
 * differs is in that module's {@link Line}.
 *
 * <ul>
 *   <li>{@code flow}: naming and config on one node from start to end (auth on);
 *   <li>{@code stay}: registers, subscribes and listens, prints every list it is pushed
 *       ("pushed") and every config change ("config"), and answers a "check N" line on stdin
 *       with "healthy"; deregisters and ends when stdin closes;
 *   <li>{@code fuzzy} (3.x only): fuzzy watches the services and configuration items named
 *       {@code --service}* on {@code --server}, while another node ({@code --via}, over HTTP
 *       v1) registers, publishes and removes them: prints the first sync ("naming_watch",
 *       "config_watch") and each change heard.
 * </ul>
 *
 * <p>Arguments: {@code flow|stay --server host:port[,host:port] --username U --password P
 * --home DIR [--service S] [--data-id D] [--ips N] [--via host:port]}. Everything the client writes (its logs,
 * naming cache and config snapshots, which it keeps under the user's home by default) goes
 * under {@code --home}; the address the client announces as its own is pinned to loopback.
 */
public final class NacosScenario {
    private static final String GROUP = "DEFAULT_GROUP";
    private static final ObjectMapper JSON = new ObjectMapper();

    private final Map<String, String> args;
    private final String service;
    private final String dataId;
    private final RosterHttp http;
    private NamingService naming;
    private ConfigService config;

    private NacosScenario(Map<String, String> args) {
        this.args = args;
        this.service = args.getOrDefault("service", "java-orders");
        this.dataId = args.getOrDefault("data-id", "java-app.yaml");
        this.http = new RosterHttp(args.get("server").split(",")[0], args.get("username"), args.get("password"));
    }

    public static void main(String[] argv) throws Exception {
        Steps.capture();
        if (argv.length == 0) {
            throw Steps.fail("args", "usage: flow|stay --server ... --password ... --home DIR");
        }
        Map<String, String> args = new HashMap<>();
        for (int i = 1; i + 1 < argv.length; i += 2) {
            Steps.check("args", argv[i].startsWith("--"), "not an option: " + argv[i]);
            args.put(argv[i].substring(2), argv[i + 1]);
        }
        for (String required : List.of("server", "username", "password", "home")) {
            Steps.check("args", args.containsKey(required), "--" + required + " is required");
        }
        confine(Path.of(args.get("home")));
        NacosScenario s = new NacosScenario(args);
        switch (argv[0]) {
            case "flow" -> {
                Steps.watchdog(Duration.ofSeconds(90));
                s.flow();
            }
            case "stay" -> {
                Steps.watchdog(Duration.ofSeconds(300));
                s.stay(Integer.parseInt(args.getOrDefault("ips", "1")));
            }
            case "gray" -> {
                Steps.watchdog(Duration.ofSeconds(120));
                Steps.check("args", args.containsKey("data-id"), "--data-id is required");
                s.gray();
            }
            case "fuzzy" -> {
                Steps.watchdog(Duration.ofSeconds(120));
                Steps.check("args", Line.FUZZY, Line.NAME + " has no fuzzy watch");
                Steps.check("args", args.containsKey("via"), "--via is required");
                s.fuzzy();
            }
            default -> throw Steps.fail("args", "unknown mode " + argv[0]);
        }
        System.exit(0);
    }

    /**
     * Before any client class loads: the client's files under {@code home} (it writes logs
     * under ~/logs/nacos, the naming cache and config snapshots under ~/nacos unless told),
     * its logs through slf4j-simple to stderr, and the address it announces as its own —
     * 1.x names it as the UDP push target — pinned to loopback.
     */
    private static void confine(Path home) throws Exception {
        Files.createDirectories(home);
        String dir = home.toAbsolutePath().toString();
        System.setProperty("user.home", dir);
        System.setProperty("JM.LOG.PATH", dir + "/logs");
        System.setProperty("JM.SNAPSHOT.PATH", dir);
        System.setProperty("com.alibaba.nacos.naming.cache.dir", dir + "/naming");
        System.setProperty("nacos.logging.path", dir + "/logs");
        System.setProperty("nacos.logging.default.config.enabled", "false");
        System.setProperty("org.slf4j.simpleLogger.logFile", "System.err");
        System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        System.setProperty("org.slf4j.simpleLogger.showDateTime", "true");
        System.setProperty("org.slf4j.simpleLogger.dateTimeFormat", "HH:mm:ss.SSS");
        // 1.x reads the first, 2.x and 3.x the second.
        System.setProperty("com.alibaba.nacos.client.naming.local.ip", "127.0.0.1");
        System.setProperty("com.alibaba.nacos.client.local.ip", "127.0.0.1");
    }

    private Properties properties() {
        Properties p = new Properties();
        p.setProperty(PropertyKeyConst.SERVER_ADDR, args.get("server"));
        p.setProperty(PropertyKeyConst.USERNAME, args.get("username"));
        p.setProperty(PropertyKeyConst.PASSWORD, args.get("password"));
        p.setProperty(PropertyKeyConst.NAMING_LOAD_CACHE_AT_START, "false");
        // The config client's worker pool has as many threads as cores (at least 2), and
        // two of them loop for good (listens, and in 3.x fuzzy watches), so on 2 cores a
        // fuzzy watch's request, submitted to that pool, never runs (the client's, not the
        // server's: the same against Nacos). Four threads leave room.
        p.setProperty("clientWorkerThreadCount", "4");
        // Nacos 3's gray label: config gray versions tagged with it are this client's.
        if (Line.GRAY_LABEL && args.containsKey("gray-label")) {
            p.setProperty("nacos.config.gray.label", args.get("gray-label"));
        }
        return p;
    }

    private void connect() {
        try {
            naming = NacosFactory.createNamingService(properties());
            config = NacosFactory.createConfigService(properties());
        } catch (NacosException e) {
            throw Steps.fail("connect", e.toString());
        }
    }

    // ---------------------------------------------------------------------------- flow

    private void flow() throws Exception {
        connect();
        Steps.step("connect", "client", Line.NAME, "version", VersionUtils.version,
                "server_status", naming.getServerStatus());
        naming();
        configs();
        long start = System.nanoTime();
        naming.shutDown();
        long namingMs = (System.nanoTime() - start) / 1_000_000;
        start = System.nanoTime();
        config.shutDown();
        long configMs = (System.nanoTime() - start) / 1_000_000;
        Steps.step("done", "naming_shutdown_ms", namingMs, "config_shutdown_ms", configMs);
    }

    private static Instance instance(String ip, int port, Map<String, String> metadata) {
        Instance i = new Instance();
        i.setIp(ip);
        i.setPort(port);
        i.setWeight(2);
        i.setHealthy(true);
        i.setEnabled(true);
        i.setEphemeral(true);
        i.setClusterName("DEFAULT");
        i.setMetadata(new HashMap<>(metadata));
        return i;
    }

    private static String key(Instance i) {
        return i.getIp() + ":" + i.getPort();
    }

    /** A list as sorted "ip:port", with "!" after an unhealthy one. */
    private static List<String> hosts(List<Instance> list) {
        TreeSet<String> out = new TreeSet<>();
        for (Instance i : list) {
            out.add(key(i) + (i.isHealthy() ? "" : "!"));
        }
        return new ArrayList<>(out);
    }

    private static Instance find(List<Instance> list, String key) {
        if (list == null) {
            return null;
        }
        return list.stream().filter(i -> key(i).equals(key)).findFirst().orElse(null);
    }

    /** What a subscription was handed, newest last. */
    private static final class Heard {
        private final List<List<Instance>> lists = new ArrayList<>();

        synchronized void add(List<Instance> list) {
            lists.add(new ArrayList<>(list));
        }

        synchronized List<Instance> last() {
            return lists.isEmpty() ? List.of() : lists.get(lists.size() - 1);
        }

        synchronized int size() {
            return lists.size();
        }
    }

    /** The instances of {@code service} the node lists over HTTP v1, by "ip:port". */
    private Map<String, JsonNode> listed(String step, String service) throws Exception {
        String body = http.must(step, "GET", "/nacos/v1/ns/instance/list",
                RosterHttp.params("serviceName", service, "groupName", GROUP));
        Map<String, JsonNode> out = new HashMap<>();
        for (JsonNode h : JSON.readTree(body).path("hosts")) {
            out.put(h.path("ip").asText() + ":" + h.path("port").asInt(), h);
        }
        return out;
    }

    /** A condition of {@link #waitFor}: null when met, else what is seen; may throw. */
    private interface Cond {
        String get() throws Exception;
    }

    /** {@link Steps#waitFor} of a condition that may throw (what it throws is its answer). */
    private static long waitFor(String step, Duration limit, Cond cond) {
        return Steps.waitFor(step, limit, () -> {
            try {
                return cond.get();
            } catch (Exception e) {
                return e.toString();
            }
        });
    }

    private void naming() throws Exception {
        // Beats every second with a 3 s timeout: 1.x sends them (a silent instance would
        // turn unhealthy while the flow runs); 2.x and 3.x hold it by their connection.
        String own = "127.60.0.1:8080";
        Instance mine = instance("127.60.0.1", 8080, Map.of("version", "v1.2", "zone", "a",
                "preserved.heart.beat.interval", "1000", "preserved.heart.beat.timeout", "3000"));
        try {
            naming.registerInstance(service, GROUP, mine);
        } catch (NacosException e) {
            throw Steps.fail("register", e.toString());
        }
        Steps.step("register", "instance", own);

        // A persistent instance, in a service of its own (a service holds one kind): the
        // node checks it by TCP connect to its loopback address.
        String persistentService = service + "-persistent";
        Instance kept = instance("127.60.0.9", 8080, Map.of("kind", "persistent"));
        kept.setEphemeral(false);
        try {
            naming.registerInstance(persistentService, GROUP, kept);
        } catch (NacosException e) {
            throw Steps.fail("register_persistent", e.toString());
        }
        waitFor("register_persistent", Duration.ofSeconds(5), () -> {
            JsonNode h = listed("register_persistent", persistentService).get("127.60.0.9:8080");
            if (h == null || h.path("ephemeral").asBoolean(true)) {
                return "listed over HTTP as " + h;
            }
            return null;
        });
        Steps.step("register_persistent", "instance", "127.60.0.9:8080");

        long took = waitFor("get_all", Duration.ofSeconds(5), () -> {
            Instance i = find(naming.getAllInstances(service, GROUP), own);
            if (i == null || !"v1.2".equals(i.getMetadata().get("version"))
                    || !"a".equals(i.getMetadata().get("zone")) || i.getWeight() != 2.0) {
                return "read " + i;
            }
            return null;
        });
        Steps.step("get_all", "ms", took);
        List<Instance> healthy = naming.selectInstances(service, GROUP, true);
        Steps.check("select_instances", find(healthy, own) != null, "healthy: " + hosts(healthy));
        Steps.step("select_instances", "hosts", hosts(healthy));
        Instance one = naming.selectOneHealthyInstance(service, GROUP);
        Steps.check("select_one", one != null && key(one).equals(own), "picked " + one);
        Steps.step("select_one", "picked", key(one));

        // Subscribe, then change the service over HTTP v1: a registration, a silent
        // instance's unhealthy turn, a deregistration.
        Heard heard = new Heard();
        naming.subscribe(service, GROUP, event -> {
            if (event instanceof NamingEvent e) {
                heard.add(e.getInstances());
                System.err.println("pushed " + hosts(e.getInstances()));
            }
        });
        // Who the node pushes to: a 1.x client is a UDP target, which must be loopback.
        String subscribers = http.must("subscribe", "GET", "/nacos/v1/ns/service/subscribers",
                RosterHttp.params("serviceName", service, "groupName", GROUP));
        Steps.step("subscribe", "subscribers",
                JSON.convertValue(JSON.readTree(subscribers).path("subscribers"), List.class));
        int beatTimeout = 3000;
        String other = "127.60.0.2:8081";
        http.must("push_registered", "POST", "/nacos/v1/ns/instance", RosterHttp.params(
                "serviceName", service, "groupName", GROUP, "ip", "127.60.0.2", "port", "8081",
                "ephemeral", "true", "metadata",
                "{\"preserved.heart.beat.timeout\":\"" + beatTimeout
                        + "\",\"preserved.ip.delete.timeout\":\"60000\"}"));
        long registered = System.nanoTime();
        took = waitFor("push_registered", Duration.ofSeconds(5), () -> {
            Instance i = find(heard.last(), other);
            if (i == null || !i.isHealthy() || find(heard.last(), own) == null) {
                return "pushed " + hosts(heard.last());
            }
            return null;
        });
        Steps.step("push_registered", "ms", took, "hosts", hosts(heard.last()));
        // The HTTP instance sends no beats: it turns unhealthy after its beat timeout, and
        // the subscriber is told within a second more.
        waitFor("push_unhealthy", Duration.ofMillis(beatTimeout + 3000), () -> {
            Instance i = find(heard.last(), other);
            if (i == null || i.isHealthy()) {
                return "pushed " + hosts(heard.last());
            }
            return null;
        });
        Instance stillMine = find(heard.last(), own);
        Steps.check("push_unhealthy", stillMine != null && stillMine.isHealthy(),
                "the client's own instance was pushed as " + hosts(heard.last()));
        long since = (System.nanoTime() - registered) / 1_000_000;
        Steps.check("push_unhealthy", since <= beatTimeout + 1000, "heard " + since
                + " ms after the registration, more than the beat timeout " + beatTimeout + " ms + 1 s");
        Steps.step("push_unhealthy", "ms_after_registration", since, "hosts", hosts(heard.last()));
        http.must("push_deregistered", "DELETE", "/nacos/v1/ns/instance", RosterHttp.params(
                "serviceName", service, "groupName", GROUP, "ip", "127.60.0.2", "port", "8081",
                "ephemeral", "true"));
        took = waitFor("push_deregistered", Duration.ofSeconds(5), () -> {
            if (find(heard.last(), other) != null || find(heard.last(), own) == null) {
                return "pushed " + hosts(heard.last());
            }
            return null;
        });
        Steps.step("push_deregistered", "ms", took, "lists_heard", heard.size());

        if (Line.GRPC) {
            // A batch: both instances in one request, read back over HTTP v1.
            String batch = service + "-batch";
            Line.batchRegister(naming, batch, GROUP, List.of(
                    instance("127.60.1.1", 9090, Map.of("i", "1")),
                    instance("127.60.1.2", 9090, Map.of("i", "2"))));
            waitFor("batch_register", Duration.ofSeconds(5), () -> {
                Map<String, JsonNode> l = listed("batch_register", batch);
                if (l.size() != 2 || !l.containsKey("127.60.1.1:9090") || !l.containsKey("127.60.1.2:9090")
                        || !"2".equals(l.get("127.60.1.2:9090").path("metadata").path("i").asText())) {
                    return "listed over HTTP: " + l;
                }
                return null;
            });
            Steps.step("batch_register");
        }

        ListView<String> services = naming.getServicesOfServer(1, 100, GROUP);
        Steps.check("services", services.getData().contains(service)
                && services.getData().contains(persistentService), "listed " + services.getData());
        Steps.step("services", "count", services.getCount(), "names", services.getData());

        naming.deregisterInstance(service, GROUP, mine);
        waitFor("deregister", Duration.ofSeconds(5), () -> {
            Map<String, JsonNode> l = listed("deregister", service);
            return l.isEmpty() ? null : "still listed over HTTP: " + l.keySet();
        });
        naming.deregisterInstance(persistentService, GROUP, kept);
        waitFor("deregister", Duration.ofSeconds(5), () -> {
            Map<String, JsonNode> l = listed("deregister", persistentService);
            return l.isEmpty() ? null : "persistent still listed over HTTP: " + l.keySet();
        });
        Steps.step("deregister");
    }

    private static String md5(String s) throws Exception {
        byte[] sum = MessageDigest.getInstance("MD5").digest(s.getBytes(StandardCharsets.UTF_8));
        return String.format("%032x", new BigInteger(1, sum));
    }

    /** A config listener that keeps what it hears, newest last. */
    private static final class Changes implements Listener {
        private final List<String> heard = new ArrayList<>();

        @Override
        public Executor getExecutor() {
            return null;
        }

        @Override
        public synchronized void receiveConfigInfo(String content) {
            heard.add(content);
            System.err.println("config changed: " + content);
        }

        synchronized String last() {
            return heard.isEmpty() ? null : heard.get(heard.size() - 1);
        }

        synchronized List<String> all() {
            return new ArrayList<>(heard);
        }
    }

    private void configs() throws Exception {
        Steps.check("publish", config.publishConfig(dataId, GROUP, "port: 1"), "publishConfig answered false");
        Steps.step("publish");
        String read = config.getConfig(dataId, GROUP, 5000);
        Steps.check("get", "port: 1".equals(read), "read " + read);
        Steps.step("get");

        Changes changes = new Changes();
        config.addListener(dataId, GROUP, changes);
        // addListener returns before the client tells the node (its listen loop does): a
        // change made before the node holds the listener is found by a later check, not
        // pushed. Wait until the node lists the listener, as an operator would see it.
        long took = waitFor("listen", Duration.ofSeconds(10), () -> {
            String body = http.must("listen", "GET", "/nacos/v1/cs/configs/listener",
                    RosterHttp.params("dataId", dataId, "group", GROUP));
            JsonNode listeners = JSON.readTree(body).path("listeners");
            return listeners.size() > 0 ? null : "not listed as listening: " + body;
        });
        String body = http.must("listen", "GET", "/nacos/v1/cs/configs/listener",
                RosterHttp.params("dataId", dataId, "group", GROUP));
        Steps.step("listen", "ms", took, "protocol", JSON.readTree(body).path("listeners").path(0).path("protocol").asText());

        http.must("listen_http_change", "POST", "/nacos/v1/cs/configs",
                RosterHttp.params("dataId", dataId, "group", GROUP, "content", "port: 2"));
        took = waitFor("listen_http_change", Duration.ofSeconds(10),
                () -> "port: 2".equals(changes.last()) ? null : "heard " + changes.all());
        Steps.step("listen_http_change", "ms", took);

        if (Line.GRPC) {
            boolean accepted;
            String refused;
            try {
                accepted = Line.publishCas(config, dataId, GROUP, "port: 3", md5("port: 1"));
                refused = "publishConfigCas answered false";
            } catch (NacosException e) {
                accepted = false;
                refused = e.toString();
            }
            Steps.check("cas_stale", !accepted, "a publish with a stale md5 was accepted");
            String now = config.getConfig(dataId, GROUP, 5000);
            Steps.check("cas_stale", "port: 2".equals(now), "the refused publish changed the item to " + now);
            Steps.step("cas_stale", "refused", refused);
            Steps.check("cas_current", Line.publishCas(config, dataId, GROUP, "port: 3", md5("port: 2")),
                    "a publish with the current md5 answered false");
            took = waitFor("cas_current", Duration.ofSeconds(10),
                    () -> "port: 3".equals(changes.last()) ? null : "heard " + changes.all());
            Steps.step("cas_current", "ms", took);
        }

        Steps.check("remove", config.removeConfig(dataId, GROUP), "removeConfig answered false");
        waitFor("remove", Duration.ofSeconds(5), () -> {
            RosterHttp.Answer a = http.call("GET", "/nacos/v1/cs/configs",
                    RosterHttp.params("dataId", dataId, "group", GROUP));
            return a.status() == 404 ? null : "HTTP read answers " + a.status() + " " + a.body();
        });
        String after = config.getConfig(dataId, GROUP, 5000);
        Steps.check("remove", after == null, "the client still reads " + after);
        config.removeListener(dataId, GROUP, changes);
        Steps.step("remove");
    }

    // ---------------------------------------------------------------------------- stay

    private void stay(int ips) throws Exception {
        connect();
        List<Instance> mine = new ArrayList<>();
        for (int i = 1; i <= ips; i++) {
            mine.add(instance("127.62.0." + i, 8080, Map.of("client", "java")));
        }
        try {
            if (mine.size() == 1 || !Line.GRPC) {
                for (Instance i : mine) {
                    naming.registerInstance(service, GROUP, i);
                }
            } else {
                Line.batchRegister(naming, service, GROUP, mine);
            }
        } catch (NacosException e) {
            throw Steps.fail("register", e.toString());
        }
        naming.subscribe(service, GROUP, event -> {
            if (event instanceof NamingEvent e) {
                Steps.step("pushed", "hosts", hosts(e.getInstances()), "at_ms", System.currentTimeMillis());
            }
        });
        config.addListener(dataId, GROUP, new Listener() {
            @Override
            public Executor getExecutor() {
                return null;
            }

            @Override
            public void receiveConfigInfo(String content) {
                Steps.step("config", "content", content, "at_ms", System.currentTimeMillis());
            }
        });
        Steps.step("ready", "instances", ips);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            if (line.startsWith("check ")) {
                String n = line.substring("check ".length());
                String error = "";
                List<String> listed = List.of();
                try {
                    // Not from the subscription's cache: a query to the node.
                    List<Instance> all = naming.getAllInstances(service, GROUP, false);
                    listed = hosts(all);
                    if (all.isEmpty()) {
                        error = "an empty list";
                    }
                } catch (NacosException e) {
                    error = e.toString();
                }
                Steps.step("healthy", "n", n, "server_healthy", "UP".equals(naming.getServerStatus()),
                        "hosts", listed, "error", error);
            }
        }
        for (Instance i : mine) {
            naming.deregisterInstance(service, GROUP, i);
        }
        naming.shutDown();
        config.shutDown();
        Steps.step("done");
    }

    // ---------------------------------------------------------------------------- fuzzy

    /** What the fuzzy watchers heard, in order. */
    private static final class Told {
        private final List<Map<String, String>> events = new ArrayList<>();

        synchronized void add(Map<String, String> event) {
            events.add(event);
        }

        /** Whether an event of {@code name} with {@code change} (and {@code sync}) came. */
        synchronized boolean has(String name, String change, String sync) {
            return events.stream().anyMatch(e -> e.get("name").equals(name) && e.get("change").equals(change)
                    && e.get("sync").equals(sync));
        }

        synchronized List<String> names() {
            return events.stream().map(e -> e.get("name")).distinct().sorted().toList();
        }

        synchronized String all() {
            return events.toString();
        }
    }

    /** Fuzzy watches through a watch that may be refused until the client has the server's abilities. */
    private interface Watch {
        List<String> start() throws Exception;
    }

    private static List<String> watchWhenAble(String step, Watch watch) {
        long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
        while (true) {
            try {
                return watch.start();
            } catch (Exception e) {
                // Abilities arrive with the setup ack, just after the connection.
                if (System.nanoTime() > deadline || !String.valueOf(e.getMessage()).contains("too low")) {
                    throw Steps.fail(step, e.toString());
                }
            }
            try {
                Thread.sleep(200);
            } catch (InterruptedException e) {
                throw Steps.fail(step, "interrupted");
            }
        }
    }

    private void fuzzy() throws Exception {
        RosterHttp via = new RosterHttp(args.get("via"), args.get("username"), args.get("password"));
        String prefix = args.getOrDefault("service", "java-fuzzy");
        String pre = prefix + "-pre";
        String live = prefix + "-live";
        String other = "other-" + prefix;
        String preYaml = prefix + "-pre.yaml";
        String liveYaml = prefix + "-live.yaml";
        connect();
        Steps.step("connect", "client", Line.NAME, "version", VersionUtils.version);

        // Before the watch, through the other node: a persistent instance (Raft) and an item.
        via.must("seeded", "POST", "/nacos/v1/ns/instance", RosterHttp.params("serviceName", pre,
                "groupName", GROUP, "ip", "127.61.0.1", "port", "8080", "ephemeral", "false"));
        via.must("seeded", "POST", "/nacos/v1/cs/configs", RosterHttp.params("dataId", preYaml,
                "group", GROUP, "content", "seeded: true"));
        long took = waitFor("seeded", Duration.ofSeconds(10), () -> {
            if (listed("seeded", pre).isEmpty()) {
                return "the watcher's node does not list " + pre + " yet";
            }
            RosterHttp.Answer a = http.call("GET", "/nacos/v1/cs/configs",
                    RosterHttp.params("dataId", preYaml, "group", GROUP));
            return a.status() == 200 ? null : "the watcher's node answers " + a.status() + " for " + preYaml;
        });
        Steps.step("seeded", "ms", took);

        Told services = new Told();
        Told items = new Told();
        List<String> serviceKeys = watchWhenAble("naming_watch",
                () -> Line.fuzzyWatchServices(naming, prefix + "*", GROUP, services::add));
        Steps.check("naming_watch", serviceKeys.stream().anyMatch(k -> k.endsWith("@@" + pre)),
                "the first sync brought " + serviceKeys);
        took = waitFor("naming_watch", Duration.ofSeconds(5), () -> services.has(pre, "ADD_SERVICE",
                "FUZZY_WATCH_INIT_NOTIFY") ? null : "heard " + services.all());
        Steps.step("naming_watch", "keys", serviceKeys, "events", services.names());
        List<String> groupKeys = watchWhenAble("config_watch",
                () -> Line.fuzzyWatchConfigs(config, prefix + "*", GROUP, items::add));
        Steps.check("config_watch", groupKeys.stream().anyMatch(k -> k.startsWith(preYaml + "+")),
                "the first sync brought " + groupKeys);
        waitFor("config_watch", Duration.ofSeconds(5), () -> items.has(preYaml, "ADD_CONFIG",
                "FUZZY_WATCH_INIT_NOTIFY") ? null : "heard " + items.all());
        Steps.step("config_watch", "keys", groupKeys, "events", items.names());

        // Changes through the other node: an ephemeral instance (Distro), a service the
        // pattern does not match, the persistent one removed (Raft); items published and removed.
        String changed = "FUZZY_WATCH_RESOURCE_CHANGED";
        via.must("naming_added", "POST", "/nacos/v1/ns/instance", RosterHttp.params("serviceName", other,
                "groupName", GROUP, "ip", "127.61.0.3", "port", "8080", "ephemeral", "true"));
        via.must("naming_added", "POST", "/nacos/v1/ns/instance", RosterHttp.params("serviceName", live,
                "groupName", GROUP, "ip", "127.61.0.2", "port", "8080", "ephemeral", "true"));
        took = waitFor("naming_added", Duration.ofSeconds(10),
                () -> services.has(live, "ADD_SERVICE", changed) ? null : "heard " + services.all());
        Steps.step("naming_added", "ms", took);
        via.must("naming_removed", "DELETE", "/nacos/v1/ns/instance", RosterHttp.params("serviceName", live,
                "groupName", GROUP, "ip", "127.61.0.2", "port", "8080", "ephemeral", "true"));
        took = waitFor("naming_removed", Duration.ofSeconds(10),
                () -> services.has(live, "DELETE_SERVICE", changed) ? null : "heard " + services.all());
        Steps.step("naming_removed", "ms", took);
        via.must("naming_removed_persistent", "DELETE", "/nacos/v1/ns/instance", RosterHttp.params(
                "serviceName", pre, "groupName", GROUP, "ip", "127.61.0.1", "port", "8080", "ephemeral", "false"));
        took = waitFor("naming_removed_persistent", Duration.ofSeconds(10),
                () -> services.has(pre, "DELETE_SERVICE", changed) ? null : "heard " + services.all());
        Steps.step("naming_removed_persistent", "ms", took);

        via.must("config_added", "POST", "/nacos/v1/cs/configs", RosterHttp.params("dataId", "other-" + liveYaml,
                "group", GROUP, "content", "a: 1"));
        via.must("config_added", "POST", "/nacos/v1/cs/configs", RosterHttp.params("dataId", liveYaml,
                "group", GROUP, "content", "a: 1"));
        took = waitFor("config_added", Duration.ofSeconds(10),
                () -> items.has(liveYaml, "ADD_CONFIG", changed) ? null : "heard " + items.all());
        Steps.step("config_added", "ms", took);
        via.must("config_removed", "DELETE", "/nacos/v1/cs/configs", RosterHttp.params("dataId", liveYaml,
                "group", GROUP));
        took = waitFor("config_removed", Duration.ofSeconds(10),
                () -> items.has(liveYaml, "DELETE_CONFIG", changed) ? null : "heard " + items.all());
        Steps.step("config_removed", "ms", took);

        // What the patterns do not match was never told.
        List<String> heardNames = new ArrayList<>(services.names());
        heardNames.addAll(items.names());
        Steps.check("unmatched", !heardNames.contains(other) && !heardNames.contains("other-" + liveYaml),
                "heard of " + heardNames);
        Steps.step("unmatched", "heard", heardNames);
        via.call("DELETE", "/nacos/v1/ns/instance", RosterHttp.params("serviceName", other,
                "groupName", GROUP, "ip", "127.61.0.3", "port", "8080", "ephemeral", "true"));
        via.call("DELETE", "/nacos/v1/cs/configs", RosterHttp.params("dataId", "other-" + liveYaml, "group", GROUP));
        via.call("DELETE", "/nacos/v1/cs/configs", RosterHttp.params("dataId", preYaml, "group", GROUP));
        naming.shutDown();
        config.shutDown();
        Steps.step("done");
    }

    /**
     * Gray releases of one item, published over HTTP v1 while the client listens: a beta
     * for another address leaves it the formal content; a beta for its own (127.0.0.1)
     * reaches its listener and its reads, and stopping the beta brings the formal content
     * back; with {@code --gray-label} (3.x), a tag version for that label the same way.
     */
    private void gray() throws Exception {
        String dataId = args.get("data-id");
        String formal = "stage: formal";
        connect();
        Steps.step("connect", "client", Line.NAME, "version", VersionUtils.version);
        http.must("formal", "POST", "/nacos/v1/cs/configs",
                RosterHttp.params("dataId", dataId, "group", GROUP, "content", formal));
        List<String> heard = java.util.Collections.synchronizedList(new ArrayList<>());
        String first = config.getConfigAndSignListener(dataId, GROUP, 5000, new Listener() {
            @Override
            public Executor getExecutor() {
                return null;
            }

            @Override
            public void receiveConfigInfo(String content) {
                heard.add(content);
            }
        });
        Steps.check("listening", formal.equals(first), "read " + first);
        Steps.step("listening", "content", first);

        // A beta for another address: this client reads and hears the formal content.
        http.must("beta_elsewhere", "POST", "/nacos/v1/cs/configs", RosterHttp.params("dataId", dataId,
                "group", GROUP, "content", "stage: far", "betaIps", "127.0.0.9"));
        String read = config.getConfig(dataId, GROUP, 5000);
        Steps.check("beta_elsewhere", formal.equals(read), "read " + read);
        // A beta for this client's address: heard and read; stopped, the formal content again.
        http.must("beta", "POST", "/nacos/v1/cs/configs", RosterHttp.params("dataId", dataId,
                "group", GROUP, "content", "stage: beta", "betaIps", "127.0.0.1,127.0.0.9"));
        long took = waitFor("beta", Duration.ofSeconds(15),
                () -> heard.contains("stage: beta") ? null : "heard " + heard);
        read = config.getConfig(dataId, GROUP, 5000);
        Steps.check("beta", "stage: beta".equals(read), "read " + read);
        Steps.check("beta_elsewhere", !heard.contains("stage: far"), "heard " + heard);
        Steps.step("beta", "ms", took);
        http.must("beta_stopped", "DELETE", "/nacos/v1/cs/configs",
                RosterHttp.params("dataId", dataId, "group", GROUP, "beta", "true"));
        took = waitFor("beta_stopped", Duration.ofSeconds(15),
                () -> formal.equals(last(heard)) ? null : "heard " + heard);
        read = config.getConfig(dataId, GROUP, 5000);
        Steps.check("beta_stopped", formal.equals(read), "read " + read);
        Steps.step("beta_stopped", "ms", took);

        // A tag version for this client's gray label (3.x): the same.
        if (Line.GRAY_LABEL && args.containsKey("gray-label")) {
            String label = args.get("gray-label");
            http.must("label", "POST", "/nacos/v1/cs/configs", RosterHttp.params("dataId", dataId,
                    "group", GROUP, "content", "stage: " + label, "tag", label));
            took = waitFor("label", Duration.ofSeconds(15),
                    () -> heard.contains("stage: " + label) ? null : "heard " + heard);
            read = config.getConfig(dataId, GROUP, 5000);
            Steps.check("label", ("stage: " + label).equals(read), "read " + read);
            Steps.step("label", "ms", took);
            http.must("label_removed", "DELETE", "/nacos/v1/cs/configs",
                    RosterHttp.params("dataId", dataId, "group", GROUP, "tag", label));
            took = waitFor("label_removed", Duration.ofSeconds(15),
                    () -> formal.equals(last(heard)) ? null : "heard " + heard);
            Steps.step("label_removed", "ms", took);
        }
        config.shutDown();
        Steps.step("done", "heard", heard);
    }

    /** The newest of {@code heard}, or null. */
    private static String last(List<String> heard) {
        synchronized (heard) {
            return heard.isEmpty() ? null : heard.get(heard.size() - 1);
        }
    }
}
