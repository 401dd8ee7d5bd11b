package org.roster.clients;

import java.io.IOException;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * roster's plain Nacos v1 HTTP API on one node, for the steps that change something through
 * another face than the client under test, and for reading back what the node holds.
 */
public final class RosterHttp {
    private final String base;
    private final String username;
    private final String password;
    private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();
    private String token;

    public RosterHttp(String server, String username, String password) {
        this.base = "http://" + server;
        this.username = username;
        this.password = password;
    }

    /** A status and a body. */
    public record Answer(int status, String body) {}

    /** Pairs (name, value, name, value, ...) as an ordered map. */
    public static Map<String, String> params(String... pairs) {
        Map<String, String> m = new LinkedHashMap<>();
        for (int i = 0; i + 1 < pairs.length; i += 2) {
            m.put(pairs[i], pairs[i + 1]);
        }
        return m;
    }

    private static String encode(Map<String, String> params) {
        StringBuilder b = new StringBuilder();
        for (Map.Entry<String, String> e : params.entrySet()) {
            if (b.length() > 0) {
                b.append('&');
            }
            b.append(URLEncoder.encode(e.getKey(), StandardCharsets.UTF_8)).append('=')
                    .append(URLEncoder.encode(e.getValue(), StandardCharsets.UTF_8));
        }
        return b.toString();
    }

    private void login() throws IOException, InterruptedException {
        HttpRequest req = HttpRequest.newBuilder(URI.create(base + "/nacos/v1/auth/login"))
                .timeout(Duration.ofSeconds(10))
                .header("Content-Type", "application/x-www-form-urlencoded")
                .POST(HttpRequest.BodyPublishers.ofString(encode(params("username", username, "password", password))))
                .build();
        HttpResponse<String> resp = http.send(req, HttpResponse.BodyHandlers.ofString());
        Matcher m = Pattern.compile("\"accessToken\"\\s*:\\s*\"([^\"]+)\"").matcher(resp.body());
        if (resp.statusCode() != 200 || !m.find()) {
            throw new IOException("login: " + resp.statusCode() + " " + resp.body());
        }
        token = m.group(1);
    }

    /**
     * Sends {@code method path} with the parameters (in the query for GET and DELETE, as a
     * form otherwise) and the token, logging in first.
     */
    public Answer call(String method, String path, Map<String, String> params) {
        try {
            if (token == null) {
                login();
            }
            Map<String, String> query = new LinkedHashMap<>();
            query.put("accessToken", token);
            boolean inQuery = method.equals("GET") || method.equals("DELETE");
            if (inQuery) {
                query.putAll(params);
            }
            HttpRequest.Builder req = HttpRequest.newBuilder(URI.create(base + path + "?" + encode(query)))
                    .timeout(Duration.ofSeconds(10));
            if (inQuery) {
                req.method(method, HttpRequest.BodyPublishers.noBody());
            } else {
                req.header("Content-Type", "application/x-www-form-urlencoded")
                        .method(method, HttpRequest.BodyPublishers.ofString(encode(params)));
            }
            HttpResponse<String> resp = http.send(req.build(), HttpResponse.BodyHandlers.ofString());
            return new Answer(resp.statusCode(), resp.body());
        } catch (IOException e) {
            return new Answer(0, e.toString());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return new Answer(0, e.toString());
        }
    }

    /** {@link #call} that fails the step unless the answer is 200; answers the body. */
    public String must(String step, String method, String path, Map<String, String> params) {
        Answer a = call(method, path, params);
        Steps.check(step, a.status() == 200, method + " " + path + ": " + a.status() + " " + a.body());
        return a.body();
    }
}
