package org.roster.clients.springeureka.provider;

import java.lang.management.ManagementFactory;
import java.util.List;
import java.util.Map;

import org.roster.clients.Steps;
import org.roster.clients.springeureka.Boot;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RestController;

/**
 * A Spring Boot service that registers with roster's Eureka API through
 * spring-cloud-starter-netflix-eureka-client and answers {@code GET /hello} with its name
 * and port:
 *
 * <pre>
 * Provider --server H:P --username U --password P --name p1 --port N
 *          [--service greeter] [--seconds 300]
 * </pre>
 *
 * Prints {"step":"started",...} once Spring is up (the client registers on its own, in the
 * background: the test reads roster for it), then serves until its stdin closes (the
 * context closes: the client cancels its lease; {"step":"stopped"}), until killed, or for
 * --seconds.
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
        List<String> spring = boot.springArgs(service);
        spring.add("--server.port=" + port);
        spring.add("--roster.name=" + name);
        spring.add("--eureka.instance.instance-id=" + name + "-" + port);
        spring.add("--eureka.instance.metadata-map.name=" + name);
        // A provider only registers.
        spring.add("--eureka.client.fetch-registry=false");
        ConfigurableApplicationContext ctx = SpringApplication.run(Provider.class, spring.toArray(String[]::new));
        Steps.step("started", "name", name, "service", service, "port", port,
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
