package org.roster.clients.springconsul.provider;

import java.lang.management.ManagementFactory;
import java.util.List;
import java.util.Map;

import org.roster.clients.Steps;
import org.roster.clients.springconsul.Boot;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RestController;

/**
 * A Spring Boot service that registers with roster's Consul API through
 * spring-cloud-starter-consul-discovery and answers {@code GET /hello} with its name and
 * port:
 *
 * <pre>
 * Provider --server H:P --token T --name p1 --port N [--service greeter]
 *          [--mode http|ttl] [--seconds 300]
 * </pre>
 *
 * {@code --mode http} (the starter's default): the registration carries an HTTP check on
 * {@code /actuator/health} (spring-boot-starter-actuator) every second, which roster's
 * leader runs; {@code --mode ttl}: a 3 s TTL check the starter passes itself
 * ({@code heartbeat.enabled}). Prints {"step":"started",...} once Spring is up (it has
 * registered then), then serves until its stdin closes (the context closes: the starter
 * deregisters; {"step":"stopped"}), until killed, or for --seconds.
 */
@SpringBootApplication
@RestController
public class Provider {
    @Value("${roster.name}")
    private String name;

    @Value("${server.port}")
    private int port;

    @GetMapping("/hello")
    public Map<String, Object> hello() {
        return Map.of("name", name, "port", port);
    }

    public static void main(String[] args) {
        Boot boot = Boot.start(args);
        String name = boot.flag("name");
        int port = Integer.parseInt(boot.flag("port"));
        String service = boot.flag("service", "greeter");
        String mode = boot.flag("mode", "http");
        List<String> spring = boot.springArgs(service);
        spring.add("--server.port=" + port);
        spring.add("--roster.name=" + name);
        spring.add("--spring.cloud.consul.discovery.instance-id=" + name + "-" + port);
        spring.add("--spring.cloud.consul.discovery.metadata.name=" + name);
        // The starter's health indicator (part of /actuator/health, which the HTTP check
        // GETs) reads GET /v1/status/leader and GET /v1/catalog/services without the ACL
        // token: roster answers those to anyone, as a Consul agent does, so it stays on.
        switch (mode) {
            case "http" -> {
                spring.add("--spring.cloud.consul.discovery.health-check-path=/actuator/health");
                spring.add("--spring.cloud.consul.discovery.health-check-interval=1s");
            }
            case "ttl" -> {
                spring.add("--spring.cloud.consul.discovery.heartbeat.enabled=true");
                spring.add("--spring.cloud.consul.discovery.heartbeat.ttl=3s");
            }
            default -> throw Steps.fail("args", "--mode is http or ttl, not " + mode);
        }
        ConfigurableApplicationContext ctx = SpringApplication.run(Provider.class, spring.toArray(String[]::new));
        Steps.step("started", "name", name, "service", service, "port", port, "mode", mode,
                "started_ms", ManagementFactory.getRuntimeMXBean().getUptime());
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
