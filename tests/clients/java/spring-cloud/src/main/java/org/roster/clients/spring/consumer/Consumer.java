package org.roster.clients.spring.consumer;

import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.roster.clients.Steps;
import org.roster.clients.spring.Boot;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.boot.context.properties.ConfigurationProperties;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.cloud.client.loadbalancer.LoadBalanced;
import org.springframework.cloud.context.config.annotation.RefreshScope;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.http.client.SimpleClientHttpRequestFactory;
import org.springframework.stereotype.Component;
import org.springframework.web.client.RestClient;

/**
 * A Spring Boot application that reads its configuration from roster
 * ({@code spring.config.import=nacos:DATA_ID}, spring-cloud-starter-alibaba-nacos-config)
 * and calls the providers of a service through Spring Cloud LoadBalancer (a
 * {@code @LoadBalanced} RestClient, round robin over what nacos-discovery knows):
 *
 * <pre>
 * Consumer --server H:P --username U --password P --dir DIR --data-id ID
 *          [--service provider] [--interval-ms 50] [--seconds 300]
 * </pre>
 *
 * Prints {"step":"started",...}; {"step":"config","greeting":…,"word":…} at start and each
 * time a value changes (greeting: a {@code @RefreshScope} bean's {@code @Value}; word: a
 * {@code @ConfigurationProperties} bean, both from the item); once a second
 * {"step":"calls","by":{"p1":10,...},"errors":0,"at_ms":…} (calls answered per provider
 * name, failed calls, the end of that second in Unix ms; with "last_error" and
 * "last_error_ms" when a call failed); {"step":"done"} when stdin closes.
 * One attempt per call (no retry), so a call that goes to a provider that is gone shows
 * as an error.
 */
@SpringBootApplication
@EnableConfigurationProperties(Consumer.Word.class)
public class Consumer {
    /** The item's {@code greeting}, re-read when roster's item changes. */
    @Component
    @RefreshScope
    public static class Greeting {
        @Value("${greeting:}")
        private String value;

        public String value() {
            return value;
        }
    }

    /** The item's {@code roster.word}, rebound when roster's item changes. */
    @ConfigurationProperties("roster")
    public static class Word {
        private String word = "";

        public String getWord() {
            return word;
        }

        public void setWord(String word) {
            this.word = word;
        }
    }

    /** The calls of the current second, and of the whole run. */
    static final class Tally {
        private Map<String, Integer> by = new LinkedHashMap<>();
        private int errors;
        private String lastError;
        private long lastErrorMs;
        private long answered;
        private long failed;

        synchronized void add(String answeredBy, String error) {
            if (error == null) {
                by.merge(answeredBy, 1, Integer::sum);
                answered++;
            } else {
                errors++;
                failed++;
                lastError = error;
                lastErrorMs = System.currentTimeMillis();
            }
        }

        /** The report of the second that ends now; starts the next one. */
        synchronized List<Object> second() {
            List<Object> line = new ArrayList<>(List.of("by", by, "errors", errors, "at_ms", System.currentTimeMillis()));
            if (lastError != null) {
                line.addAll(List.of("last_error", lastError, "last_error_ms", lastErrorMs));
            }
            by = new LinkedHashMap<>();
            errors = 0;
            lastError = null;
            return line;
        }

        synchronized List<Object> totals() {
            return List.of("answered", answered, "errors", failed);
        }
    }

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
        String service = boot.flag("service", "provider");
        String dataId = boot.flag("data-id");
        long interval = Long.parseLong(boot.flag("interval-ms", "50"));
        long seconds = Long.parseLong(boot.flag("seconds", "300"));
        List<String> spring = boot.springArgs("consumer");
        spring.add("--spring.config.import=nacos:" + dataId + "?refreshEnabled=true");
        // It calls, it is not called: no web server, so no registration.
        spring.add("--spring.main.web-application-type=none");
        spring.add("--spring.cloud.nacos.discovery.register-enabled=false");
        // Spring Cloud LoadBalancer keeps the instance lists it got for 35 s by default,
        // whatever the registry pushes; without that cache each choice reads nacos-client's
        // list, which roster's pushes keep current.
        spring.add("--spring.cloud.loadbalancer.cache.enabled=false");
        ConfigurableApplicationContext ctx = SpringApplication.run(Consumer.class, spring.toArray(String[]::new));
        Greeting greeting = ctx.getBean(Greeting.class);
        Word word = ctx.getBean(Word.class);
        RestClient client = ctx.getBean(RestClient.Builder.class).build();
        Steps.step("started", "service", service, "data_id", dataId, "greeting", greeting.value(),
                "word", word.getWord(), "started_ms", ManagementFactory.getRuntimeMXBean().getUptime());

        Thread config = new Thread(() -> {
            String[] last = {null, null};
            while (true) {
                String g = greeting.value();
                String w = word.getWord();
                if (!Objects.equals(g, last[0]) || !Objects.equals(w, last[1])) {
                    last[0] = g;
                    last[1] = w;
                    Steps.step("config", "greeting", g, "word", w);
                }
                try {
                    Thread.sleep(100);
                } catch (InterruptedException e) {
                    return;
                }
            }
        }, "config-watch");
        config.setDaemon(true);
        config.start();

        Tally tally = new Tally();
        Thread report = new Thread(() -> {
            while (true) {
                try {
                    Thread.sleep(1000);
                } catch (InterruptedException e) {
                    return;
                }
                Steps.step("calls", tally.second().toArray());
            }
        }, "report");
        report.setDaemon(true);
        report.start();

        CountDownLatch closed = Boot.stdinClosed();
        long end = System.currentTimeMillis() + seconds * 1000;
        try {
            while (System.currentTimeMillis() < end && !closed.await(interval, TimeUnit.MILLISECONDS)) {
                String answeredBy = null;
                String error = null;
                try {
                    Map<?, ?> who = client.get().uri("http://" + service + "/who").retrieve().body(Map.class);
                    answeredBy = who == null ? null : String.valueOf(who.get("name"));
                    if (answeredBy == null) {
                        error = "no body";
                    }
                } catch (RuntimeException e) {
                    error = e.toString();
                }
                tally.add(answeredBy, error);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        report.interrupt();
        Steps.step("done", tally.totals().toArray());
        ctx.close();
        System.exit(0);
    }
}
