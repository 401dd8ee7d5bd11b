package org.roster.clients.eureka;

import jakarta.servlet.Filter;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import org.roster.clients.Steps;
import org.springframework.boot.Banner;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.boot.web.servlet.FilterRegistrationBean;
import org.springframework.cloud.netflix.eureka.server.EnableEurekaServer;
import org.springframework.cloud.netflix.eureka.server.EurekaServerConfigBean;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.core.Ordered;

/**
 * The Spring Cloud Netflix Eureka server, standalone on 127.0.0.1 (no peers: it neither
 * registers with nor fetches from another server), tuned so that a test sees changes in
 * seconds: no read-only response cache (every read comes from the cache the registry
 * invalidates on each change), eviction every second, self-preservation off unless asked.
 *
 * <pre>
 * java ... org.roster.clients.eureka.EurekaServer --port N [--self-preservation]
 *     [--delta-retention-ms MS] [--disable-delta] [--seconds 120]
 * </pre>
 *
 * Steps: {@code ready} (port, url) once {@code GET /eureka/apps} answers JSON; then a
 * {@code request} line (path, status) for each read of the whole registry
 * ({@code /eureka/apps}) or of its delta ({@code /eureka/apps/delta}), which is what a sync
 * task reads. Commands on stdin change what the registry reads on each use:
 * {@code delta-retention-ms MS} (how long a change stays in the delta; the queue is swept
 * every 250 ms) and {@code disable-delta true|false} (then the delta answers 403); each
 * answers {@code set}. It ends when stdin closes, or by watchdog after {@code --seconds} + 30.
 */
@SpringBootApplication
@EnableEurekaServer
public class EurekaServer {
    /** A request carrying this header is the program's own probe: not logged. */
    static final String PROBE = "x-roster-probe";

    public static void main(String[] args) throws Exception {
        Steps.capture();
        int port = 0;
        boolean selfPreservation = false;
        boolean disableDelta = false;
        long deltaRetentionMs = 180_000;
        int seconds = 120;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--port" -> port = Integer.parseInt(args[++i]);
                case "--self-preservation" -> selfPreservation = true;
                case "--disable-delta" -> disableDelta = true;
                case "--delta-retention-ms" -> deltaRetentionMs = Long.parseLong(args[++i]);
                case "--seconds" -> seconds = Integer.parseInt(args[++i]);
                default -> throw Steps.fail("args", "unknown argument " + args[i]);
            }
        }
        Steps.check("args", port > 0, "--port is required");
        Steps.watchdog(Duration.ofSeconds(seconds + 30L));
        String url = "http://127.0.0.1:" + port + "/eureka/";

        Map<String, Object> p = new LinkedHashMap<>();
        p.put("spring.application.name", "eureka-server");
        p.put("server.address", "127.0.0.1");
        p.put("server.port", port);
        p.put("spring.jmx.enabled", false);
        p.put("logging.level.root", "WARN");
        p.put("eureka.dashboard.enabled", false);
        // Standalone: its own URL is its only peer, and it is not a peer of itself
        // (the instance's hostname is the URL's host).
        p.put("eureka.instance.hostname", "127.0.0.1");
        p.put("eureka.instance.ip-address", "127.0.0.1");
        p.put("eureka.instance.prefer-ip-address", true);
        p.put("eureka.client.register-with-eureka", false);
        p.put("eureka.client.fetch-registry", false);
        p.put("eureka.client.service-url.defaultZone", url);
        p.put("eureka.server.registry-sync-retries", 0);
        p.put("eureka.server.wait-time-in-ms-when-sync-empty", 0);
        p.put("eureka.server.enable-self-preservation", selfPreservation);
        p.put("eureka.server.eviction-interval-timer-in-ms", 1000);
        p.put("eureka.server.use-read-only-response-cache", false);
        p.put("eureka.server.response-cache-update-interval-ms", 1000);
        p.put("eureka.server.disable-delta", disableDelta);
        p.put("eureka.server.retention-time-in-m-s-in-delta-queue", deltaRetentionMs);
        // How often changes older than the retention leave the delta (30 s by default).
        p.put("eureka.server.delta-retention-timer-interval-in-ms", 250);

        SpringApplication app = new SpringApplication(EurekaServer.class);
        app.setDefaultProperties(p);
        app.setBannerMode(Banner.Mode.OFF);
        app.setLogStartupInfo(false);
        ConfigurableApplicationContext context = app.run();

        HttpClient http = HttpClient.newHttpClient();
        HttpRequest probe = HttpRequest.newBuilder(URI.create(url + "apps"))
                .header("accept", "application/json")
                .header(PROBE, "1")
                .timeout(Duration.ofSeconds(5))
                .build();
        long took = Steps.waitFor("ready", Duration.ofSeconds(60), () -> {
            try {
                HttpResponse<String> r = http.send(probe, HttpResponse.BodyHandlers.ofString());
                return r.statusCode() == 200 && r.body().contains("\"applications\"")
                        ? null
                        : "GET /eureka/apps: " + r.statusCode() + " " + r.body();
            } catch (IOException | InterruptedException e) {
                return "GET /eureka/apps: " + e;
            }
        });
        Steps.step("ready", "port", port, "url", url, "ms", took,
                "selfPreservation", selfPreservation, "deltaRetentionMs", deltaRetentionMs,
                "disableDelta", disableDelta);

        // Settings the registry reads on each use, changed while it runs; until stdin closes.
        EurekaServerConfigBean config = context.getBean(EurekaServerConfigBean.class);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            String[] w = line.trim().split("\\s+");
            switch (w[0]) {
                case "" -> { }
                case "delta-retention-ms" -> config.setRetentionTimeInMSInDeltaQueue(Long.parseLong(w[1]));
                case "disable-delta" -> config.setDisableDelta(Boolean.parseBoolean(w[1]));
                default -> throw Steps.fail("command", "unknown command: " + line);
            }
            Steps.step("set", "deltaRetentionMs", config.getRetentionTimeInMSInDeltaQueue(),
                    "disableDelta", config.shouldDisableDelta());
        }
        context.close();
        Steps.step("stopped");
        System.exit(0);
    }

    /** Logs each read of the registry or of its delta (after Jersey answered it). */
    @Bean
    FilterRegistrationBean<Filter> registryReads() {
        Filter log = (request, response, chain) -> {
            chain.doFilter(request, response);
            if (request instanceof HttpServletRequest req
                    && response instanceof HttpServletResponse res
                    && "GET".equals(req.getMethod())
                    && req.getHeader(PROBE) == null) {
                String path = req.getRequestURI().replaceAll("/+$", "");
                if (path.equals("/eureka/apps") || path.equals("/eureka/apps/delta")) {
                    Steps.step("request", "path", path, "status", res.getStatus(),
                            "accept", String.valueOf(req.getHeader("accept")));
                }
            }
        };
        FilterRegistrationBean<Filter> bean = new FilterRegistrationBean<>(log);
        bean.addUrlPatterns("/eureka/*");
        bean.setOrder(Ordered.HIGHEST_PRECEDENCE);
        return bean;
    }
}
