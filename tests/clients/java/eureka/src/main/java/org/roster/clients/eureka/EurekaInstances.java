package org.roster.clients.eureka;

import com.netflix.appinfo.ApplicationInfoManager;
import com.netflix.appinfo.InstanceInfo;
import com.netflix.appinfo.InstanceInfo.InstanceStatus;
import com.netflix.discovery.DiscoveryClient;
import com.netflix.discovery.Jersey3DiscoveryClientOptionalArgs;
import com.netflix.discovery.shared.transport.jersey3.Jersey3TransportClientFactories;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import org.roster.clients.Steps;
import org.springframework.cloud.commons.util.InetUtils;
import org.springframework.cloud.commons.util.InetUtilsProperties;
import org.springframework.cloud.netflix.eureka.EurekaClientConfigBean;
import org.springframework.cloud.netflix.eureka.EurekaInstanceConfigBean;
import org.springframework.cloud.netflix.eureka.InstanceInfoFactory;

/**
 * Application instances registered through the real Eureka client: one
 * {@link DiscoveryClient} per instance (Netflix's Jersey 3 transport; the instance built by
 * Spring Cloud's {@link InstanceInfoFactory} from an {@link EurekaInstanceConfigBean}, as a
 * Spring Cloud application builds it), renewing its lease every second with a 3 s lease,
 * never fetching the registry. Every address is the loopback one the test gives.
 *
 * <pre>
 * java ... org.roster.clients.eureka.EurekaInstances --server http://[user:password@]127.0.0.1:P/eureka/ [--seconds 120]
 * </pre>
 *
 * Credentials in the URL go as HTTP Basic: the Eureka client's own transport sends them
 * (from its {@code defaultZone}), and so do this program's checks of what the server shows.
 *
 * Commands on stdin, one a line; each answers with a step once the server shows its effect
 * ({@code GET /eureka/apps/APP/ID}):
 * <ul>
 *   <li>{@code register APP IP PORT ID [key=value ...]}: registers (status UP, metadata) →
 *       {@code registered} (id, app, status);</li>
 *   <li>{@code status ID STATUS}: the client sets its own status (DOWN, STARTING, UP) and
 *       replicates it → {@code status} (id, status);</li>
 *   <li>{@code override ID STATUS}: an operator's status override on the server
 *       ({@code PUT .../status?value=OUT_OF_SERVICE}, what the client cannot set for
 *       itself while UP) → {@code override} (id, status);</li>
 *   <li>{@code stop-renewing ID}: the client shuts down without cancelling: its lease
 *       lapses → {@code stopped-renewing} (id);</li>
 *   <li>{@code cancel ID}: the client shuts down and cancels → {@code cancelled} (id);</li>
 *   <li>{@code discover APP ID STATUS}: a second, fetching client (full fetch, then a delta
 *       every second) waits until its local registry holds ID of APP with STATUS ({@code
 *       absent}: holds no ID) → {@code discovered} (id, status, ip, port, metadata, and the
 *       full and delta fetches it made).</li>
 * </ul>
 * When stdin closes, the clients still running cancel and it prints {@code stopped}.
 */
public final class EurekaInstances {
    private static final Duration SHOWN_WITHIN = Duration.ofSeconds(20);

    /** One registered instance. */
    private record Registered(String app, DiscoveryClient client, UnregisterSwitch config) {}

    /** The client's configuration, whose unregister-on-shutdown the commands choose. */
    private static final class UnregisterSwitch extends EurekaClientConfigBean {
        volatile boolean unregister = true;

        @Override
        public boolean shouldUnregisterOnShutdown() {
            return unregister;
        }
    }

    private static String server;
    /** {@code Basic ...} from the URL's credentials, or null. */
    private static String basic;
    /** The fetching client, made by the first {@code discover}. */
    private static DiscoveryClient reader;
    private static final HttpClient HTTP = HttpClient.newHttpClient();
    private static final Map<String, Registered> INSTANCES = new LinkedHashMap<>();

    public static void main(String[] args) throws IOException {
        Steps.capture();
        int seconds = 120;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--server" -> server = args[++i];
                case "--seconds" -> seconds = Integer.parseInt(args[++i]);
                default -> throw Steps.fail("args", "unknown argument " + args[i]);
            }
        }
        Steps.check("args", server != null && server.endsWith("/"), "--server URL/ is required");
        URI given = URI.create(server);
        if (given.getRawUserInfo() != null) {
            basic = "Basic " + java.util.Base64.getEncoder().encodeToString(
                    given.getRawUserInfo().getBytes(StandardCharsets.UTF_8));
        }
        Steps.watchdog(Duration.ofSeconds(seconds + 30L));
        Steps.step("started", "server", server);

        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            String[] w = line.trim().split("\\s+");
            switch (w[0]) {
                case "" -> { }
                case "register" -> register(w);
                case "status" -> status(w[1], InstanceStatus.valueOf(w[2]));
                case "override" -> override(w[1], w[2]);
                case "stop-renewing" -> shutdown("stopped-renewing", w[1], false);
                case "cancel" -> shutdown("cancelled", w[1], true);
                case "discover" -> discover(w[1], w[2], w[3]);
                default -> throw Steps.fail("command", "unknown command: " + line);
            }
        }
        for (String id : INSTANCES.keySet().toArray(String[]::new)) {
            shutdown("cancelled", id, true);
        }
        if (reader != null) {
            reader.shutdown();
        }
        Steps.step("stopped");
        System.exit(0);
    }

    private static void register(String[] w) {
        String app = w[1];
        String ip = w[2];
        int port = Integer.parseInt(w[3]);
        String id = w[4];
        Steps.check("register", ip.startsWith("127."), "not a loopback address: " + ip);
        Map<String, String> metadata = new LinkedHashMap<>();
        for (int i = 5; i < w.length; i++) {
            int eq = w[i].indexOf('=');
            metadata.put(w[i].substring(0, eq), w[i].substring(eq + 1));
        }

        // The loopback address given, never one found on the machine's interfaces.
        InetUtils loopback = new InetUtils(new InetUtilsProperties()) {
            @Override
            public HostInfo findFirstNonLoopbackHostInfo() {
                HostInfo h = new HostInfo(ip);
                h.setIpAddress(ip);
                return h;
            }
        };
        EurekaInstanceConfigBean instance = new EurekaInstanceConfigBean(loopback);
        instance.setAppname(app);
        instance.setVirtualHostName(app.toLowerCase());
        instance.setSecureVirtualHostName(app.toLowerCase());
        instance.setInstanceId(id);
        instance.setIpAddress(ip);
        instance.setHostname(ip);
        instance.setPreferIpAddress(true);
        instance.setNonSecurePort(port);
        instance.setLeaseRenewalIntervalInSeconds(1);
        instance.setLeaseExpirationDurationInSeconds(3);
        instance.setInstanceEnabledOnit(true);
        instance.setMetadataMap(metadata);
        InstanceInfo info = new InstanceInfoFactory().create(instance);
        ApplicationInfoManager manager = new ApplicationInfoManager(instance, info);

        UnregisterSwitch client = new UnregisterSwitch();
        client.setServiceUrl(Map.of("defaultZone", server));
        client.setRegisterWithEureka(true);
        client.setFetchRegistry(false);
        client.setShouldEnforceRegistrationAtInit(true);
        client.setInstanceInfoReplicationIntervalSeconds(1);
        client.setInitialInstanceInfoReplicationIntervalSeconds(1);
        client.setEurekaServiceUrlPollIntervalSeconds(300);
        DiscoveryClient discovery = new DiscoveryClient(manager, client,
                new Jersey3TransportClientFactories(), new Jersey3DiscoveryClientOptionalArgs());
        INSTANCES.put(id, new Registered(app.toUpperCase(), discovery, client));
        long ms = Steps.waitFor("registered", SHOWN_WITHIN, () -> shows(app, id, "UP"));
        Steps.step("registered", "id", id, "app", app.toUpperCase(), "ip", ip, "port", port,
                "metadata", metadata, "ms", ms);
    }

    /** The client sets its own status; its replicator sends it with the next registration. */
    private static void status(String id, InstanceStatus status) {
        Registered r = known("status", id);
        r.client().getApplicationInfoManager().setInstanceStatus(status);
        long ms = Steps.waitFor("status", SHOWN_WITHIN, () -> shows(r.app(), id, status.name()));
        Steps.step("status", "id", id, "status", status.name(), "ms", ms);
    }

    /** An operator's override, through the server's status endpoint. */
    private static void override(String id, String status) {
        Registered r = known("override", id);
        String path = server + "apps/" + r.app() + "/" + id + "/status?value="
                + URLEncoder.encode(status, StandardCharsets.UTF_8);
        HttpRequest put = authorized(HttpRequest.newBuilder(plain(path)))
                .PUT(HttpRequest.BodyPublishers.noBody())
                .timeout(Duration.ofSeconds(5))
                .build();
        int code = send("override", put).statusCode();
        Steps.check("override", code == 200, "PUT status: HTTP " + code);
        long ms = Steps.waitFor("override", SHOWN_WITHIN, () -> shows(r.app(), id, status));
        Steps.step("override", "id", id, "status", status, "ms", ms);
    }

    /** Shuts the client down, cancelling its lease or leaving it to lapse. */
    private static void shutdown(String step, String id, boolean cancel) {
        Registered r = known(step, id);
        r.config().unregister = cancel;
        r.client().shutdown();
        INSTANCES.remove(id);
        long ms = cancel ? Steps.waitFor(step, SHOWN_WITHIN, () -> shows(r.app(), id, null)) : 0;
        Steps.step(step, "id", id, "ms", ms);
    }

    private static Registered known(String step, String id) {
        Registered r = INSTANCES.get(id);
        Steps.check(step, r != null, "no running client for " + id);
        return r;
    }

    /** Null when the server shows the instance with {@code status} (null: shows no such instance). */
    private static String shows(String app, String id, String status) {
        HttpRequest get = authorized(HttpRequest.newBuilder(plain(server + "apps/" + app.toUpperCase() + "/" + id)))
                .header("accept", "application/json")
                .timeout(Duration.ofSeconds(5))
                .build();
        HttpResponse<String> r = send("get", get);
        if (status == null) {
            return r.statusCode() == 404 ? null : "still there: " + r.statusCode() + " " + r.body();
        }
        return r.statusCode() == 200 && r.body().contains("\"status\":\"" + status + "\"")
                ? null
                : "want " + status + ", server answers " + r.statusCode() + " " + r.body();
    }

    /** {@code url} without its credentials (they go in a header). */
    private static URI plain(String url) {
        URI u = URI.create(url);
        try {
            return new URI(u.getScheme(), null, u.getHost(), u.getPort(), u.getPath(), u.getQuery(), null);
        } catch (java.net.URISyntaxException e) {
            throw Steps.fail("url", url + ": " + e);
        }
    }

    private static HttpRequest.Builder authorized(HttpRequest.Builder b) {
        return basic == null ? b : b.header("authorization", basic);
    }

    /**
     * Waits until the fetching client's registry holds {@code id} of {@code app} with
     * {@code status} ({@code absent}: without it), as the real client fetches: the full
     * registry first, then deltas checked against the server's reconcile hash.
     */
    private static void discover(String app, String id, String status) {
        if (reader == null) {
            EurekaInstanceConfigBean self = new EurekaInstanceConfigBean(new InetUtils(new InetUtilsProperties()) {
                @Override
                public HostInfo findFirstNonLoopbackHostInfo() {
                    HostInfo h = new HostInfo("127.0.0.1");
                    h.setIpAddress("127.0.0.1");
                    return h;
                }
            });
            self.setAppname("roster-reader");
            self.setIpAddress("127.0.0.1");
            self.setHostname("127.0.0.1");
            self.setInstanceId("roster-reader");
            InstanceInfo info = new InstanceInfoFactory().create(self);
            EurekaClientConfigBean config = new EurekaClientConfigBean();
            config.setServiceUrl(Map.of("defaultZone", server));
            config.setRegisterWithEureka(false);
            config.setFetchRegistry(true);
            config.setRegistryFetchIntervalSeconds(1);
            config.setFilterOnlyUpInstances(false);
            config.setEurekaServiceUrlPollIntervalSeconds(300);
            reader = new DiscoveryClient(new ApplicationInfoManager(self, info), config,
                    new Jersey3TransportClientFactories(), new Jersey3DiscoveryClientOptionalArgs());
        }
        InstanceInfo[] seen = new InstanceInfo[1];
        long ms = Steps.waitFor("discovered", SHOWN_WITHIN, () -> {
            com.netflix.discovery.shared.Application a = reader.getApplication(app.toUpperCase());
            InstanceInfo i = a == null ? null : a.getByInstanceId(id);
            seen[0] = i;
            if (status.equals("absent")) {
                return i == null ? null : "still holds " + id + " " + i.getStatus();
            }
            if (i == null) {
                return "holds no " + id + " of " + app;
            }
            return i.getStatus().name().equals(status) ? null : "holds " + id + " " + i.getStatus();
        });
        InstanceInfo i = seen[0];
        Steps.step("discovered", "id", id, "status", i == null ? "absent" : i.getStatus().name(),
                "ip", i == null ? "" : i.getIPAddr(), "port", i == null ? 0 : i.getPort(),
                "metadata", i == null ? Map.of() : i.getMetadata(),
                "vip", i == null ? "" : String.valueOf(i.getVIPAddress()),
                "hashcode", reader.getApplications().getAppsHashCode(), "ms", ms);
    }

    private static HttpResponse<String> send(String step, HttpRequest request) {
        try {
            return HTTP.send(request, HttpResponse.BodyHandlers.ofString());
        } catch (IOException e) {
            throw Steps.fail(step, request.uri() + ": " + e);
        } catch (InterruptedException e) {
            throw Steps.fail(step, "interrupted");
        }
    }
}
