package org.roster.clients.spring.provider;

import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import org.roster.clients.RosterHttp;
import org.roster.clients.Steps;
import org.roster.clients.spring.Boot;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RestController;

/**
 * A Spring Boot service that registers in roster through
 * spring-cloud-starter-alibaba-nacos-discovery (nacos-client 3.x over gRPC, auth on) and
 * answers {@code GET /who} with its name and port:
 *
 * <pre>
 * Provider --server H:P --username U --password P --dir DIR --name p1 --port N
 *          [--service provider] [--seconds 300]
 * </pre>
 *
 * Prints {"step":"serving",...} once roster's HTTP v1 list shows its instance (on
 * 127.0.0.1:N, with its name in the metadata), then serves until its stdin closes
 * (deregistering: {"step":"stopped"}), until killed, or for --seconds.
 */
@SpringBootApplication
@RestController
public class Provider {
    @Value("${roster.name}")
    private String name;

    @Value("${server.port}")
    private int port;

    @GetMapping("/who")
    public Map<String, Object> who() {
        return Map.of("name", name, "port", port);
    }

    public static void main(String[] args) {
        Boot boot = Boot.start(args);
        String name = boot.flag("name");
        int port = Integer.parseInt(boot.flag("port"));
        String service = boot.flag("service", "provider");
        List<String> spring = boot.springArgs(service);
        spring.add("--server.port=" + port);
        spring.add("--roster.name=" + name);
        spring.add("--spring.cloud.nacos.discovery.metadata.name=" + name);
        // The provider reads no configuration from roster (the consumer does).
        spring.add("--spring.cloud.nacos.config.enabled=false");
        spring.add("--spring.cloud.nacos.config.import-check.enabled=false");
        // On a graceful stop the starter deregisters, then waits for the consumers to hear
        // of it before the web server stops (10 s by default): 1 s here.
        spring.add("--spring.cloud.nacos.discovery.graceful-shutdown-wait-time=1000");
        ConfigurableApplicationContext ctx = SpringApplication.run(Provider.class, spring.toArray(String[]::new));
        long started = ManagementFactory.getRuntimeMXBean().getUptime();

        // The registration, as roster's plain HTTP API shows it.
        RosterHttp http = new RosterHttp(boot.flag("server"), boot.flag("username"), boot.flag("password"));
        ObjectMapper json = new ObjectMapper();
        JsonNode[] mine = new JsonNode[1];
        long took = Steps.waitFor("registered", Duration.ofSeconds(30), () -> {
            String body = http.must("registered", "GET", "/nacos/v1/ns/instance/list",
                    RosterHttp.params("serviceName", service));
            try {
                for (JsonNode h : json.readTree(body).path("hosts")) {
                    if (h.path("port").asInt() == port) {
                        mine[0] = h;
                        return null;
                    }
                }
            } catch (Exception e) {
                return "list: " + e;
            }
            return "roster does not list port " + port + ": " + body;
        });
        JsonNode h = mine[0];
        Steps.check("registered", h.path("ip").asText().equals("127.0.0.1"), "registered off loopback: " + h);
        Steps.check("registered", h.path("metadata").path("name").asText().equals(name), "metadata: " + h);
        Steps.step("serving", "name", name, "service", service, "ip", h.path("ip").asText(), "port", port,
                "healthy", h.path("healthy").asBoolean(), "ephemeral", h.path("ephemeral").asBoolean(),
                "started_ms", started, "registered_ms", took);

        try {
            Boot.stdinClosed().await();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        ctx.close();
        Steps.step("stopped", "name", name);
        System.exit(0);
    }
}
