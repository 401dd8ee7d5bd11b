package org.roster.clients.dubbo;

import com.alibaba.fastjson2.JSONObject;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.dubbo.config.ProtocolConfig;
import org.apache.dubbo.config.ServiceConfig;
import org.apache.dubbo.config.bootstrap.DubboBootstrap;
import org.apache.dubbo.rpc.model.ApplicationModel;
import org.roster.clients.RosterHttp;
import org.roster.clients.Steps;
import org.roster.test.GreetReply;
import org.roster.test.GreetRequest;
import org.roster.test.Greeter;

/**
 * A Dubbo 3 provider of {@code org.roster.test.Greeter} over Triple (hessian2) on
 * 127.0.0.1:--port, registered with roster by application:
 *
 * <pre>
 * Provider --server H:P[,H:P...] --username U --password P --app APP --name p1 --port N [--dir D]
 * </pre>
 *
 * It prints {"step":"serving",...} once roster lists its instance (address, metadata
 * revision, the greeting its config centre item gave it), then serves until its stdin closes
 * or --seconds pass. Every reply names it (--name).
 */
public final class Provider {
    private Provider() {}

    public static void main(String[] args) {
        Steps.capture();
        Options o = Options.parse(args);
        Steps.check("flags", !o.name.isEmpty() && o.port > 0, "--name and --port are required");
        o.setup();
        long end = System.nanoTime() + o.seconds * 1_000_000_000L;

        Impl ref = new Impl(o.name);
        ProtocolConfig tri = new ProtocolConfig("tri", o.port);
        // Dubbo treats a 127.x host as unset (see Options.setup for how it ends up
        // registering 127.0.0.1) and binds the port on every address.
        tri.setHost("127.0.0.1");
        tri.setSerialization("hessian2");
        ServiceConfig<Greeter> service = new ServiceConfig<>();
        service.setInterface(Greeter.class);
        service.setRef(ref);

        long started = System.nanoTime();
        DubboBootstrap.getInstance()
                .application(o.application())
                .registry(o.registry())
                .metadataReport(o.metadataReport())
                .configCenter(o.configCenter())
                .protocol(tri)
                .service(service)
                .start();
        // The greeting comes from the config centre: the application's item (data id
        // dubbo.properties, group = the application), which Dubbo reads at start.
        String greeting = ApplicationModel.defaultModel().modelEnvironment().getConfiguration()
                .getString("roster.greeting", "hello");
        ref.greeting = greeting;

        // Serving once roster lists this process under the application's name.
        RosterHttp r = new RosterHttp(o.servers.split(",")[0], o.username, o.password);
        String self = "127.0.0.1:" + o.port;
        String[] revision = {null};
        long took = Steps.waitFor("serving", Duration.ofSeconds(60), () -> {
            Map<String, JSONObject> hosts = o.instances(r, o.app);
            JSONObject meta = hosts.get(self);
            if (meta == null) {
                return self + " not among " + hosts.keySet();
            }
            revision[0] = meta.getString("dubbo.metadata.revision");
            return null;
        });
        Steps.step("serving", "name", o.name, "app", o.app, "addr", self, "revision", revision[0],
                "greeting", greeting, "took_ms", took, "start_ms", (System.nanoTime() - started) / 1_000_000);

        AtomicBoolean closed = Options.stdinClosed();
        while (!closed.get() && System.nanoTime() < end) {
            sleep(100);
        }
        o.exit();
    }

    /** The implementation: names its provider, greets with the config centre's greeting. */
    static final class Impl implements Greeter {
        private final String name;
        volatile String greeting = "hello";

        Impl(String name) {
            this.name = name;
        }

        @Override
        public GreetReply Greet(GreetRequest request) {
            return new GreetReply(name, greeting + ", " + request.getCaller());
        }
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
