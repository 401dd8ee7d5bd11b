package org.roster.clients.springeureka.consumer;

import java.lang.management.ManagementFactory;
import java.util.List;
import java.util.Map;

import org.roster.clients.Calls;
import org.roster.clients.Steps;
import org.roster.clients.springeureka.Boot;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.cloud.client.loadbalancer.LoadBalanced;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.http.client.SimpleClientHttpRequestFactory;
import org.springframework.web.client.RestClient;

/**
 * A Spring Boot application that fetches the registry from roster's Eureka API
 * (spring-cloud-starter-netflix-eureka-client: a full fetch, then deltas every second) and
 * calls the providers of a service through Spring Cloud LoadBalancer (a
 * {@code @LoadBalanced} RestClient on {@code http://SERVICE/hello}, round robin):
 *
 * <pre>
 * Consumer --server H:P --username U --password P [--service greeter]
 *          [--interval-ms 50] [--seconds 300]
 * </pre>
 *
 * Prints {"step":"started",...}; then the reports of {@link Calls}. One attempt per call
 * (no retry), so a call to a provider that is gone shows as an error.
 */
@SpringBootApplication
public class Consumer {
    @Bean
    @LoadBalanced
    RestClient.Builder loadBalanced() {
        SimpleClientHttpRequestFactory f = new SimpleClientHttpRequestFactory();
        f.setConnectTimeout(1000);
        f.setReadTimeout(2000);
        return RestClient.builder().requestFactory(f);
    }

    public static void main(String[] args) {
        Boot boot = Boot.start(args);
        String service = boot.flag("service", "greeter");
        long interval = Long.parseLong(boot.flag("interval-ms", "50"));
        long seconds = Long.parseLong(boot.flag("seconds", "300"));
        List<String> spring = boot.springArgs("consumer");
        // It calls, it is not called: no web server, no registration.
        spring.add("--spring.main.web-application-type=none");
        spring.add("--eureka.client.register-with-eureka=false");
        // Spring Cloud LoadBalancer keeps the instance lists it got for 35 s by default;
        // without that cache each choice reads the Eureka client's registry, which its
        // fetches (every second) keep current.
        spring.add("--spring.cloud.loadbalancer.cache.enabled=false");
        ConfigurableApplicationContext ctx = SpringApplication.run(Consumer.class, spring.toArray(String[]::new));
        RestClient client = ctx.getBean(RestClient.Builder.class).build();
        Steps.step("started", "service", service, "started_ms", ManagementFactory.getRuntimeMXBean().getUptime());
        Calls.loop(() -> {
            Map<?, ?> who = client.get().uri("http://" + service + "/hello").retrieve().body(Map.class);
            return who == null || who.get("name") == null ? null : String.valueOf(who.get("name"));
        }, interval, System.currentTimeMillis() + seconds * 1000, Boot.stdinClosed());
        ctx.close();
        System.exit(0);
    }
}
