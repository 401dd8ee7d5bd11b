package org.roster.clients.nacos;

import com.alibaba.nacos.api.config.ConfigService;
import com.alibaba.nacos.api.exception.NacosException;
import com.alibaba.nacos.api.naming.NamingService;
import com.alibaba.nacos.api.naming.pojo.Instance;
import com.alibaba.nacos.api.config.listener.ConfigFuzzyWatchChangeEvent;
import com.alibaba.nacos.api.naming.listener.FuzzyWatchChangeEvent;
import com.alibaba.nacos.api.naming.listener.FuzzyWatchEventWatcher;
import com.alibaba.nacos.api.naming.pojo.ListView;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/** nacos-client 3.x: gRPC (HTTP port + 1000), with batch registration, CAS publish and fuzzy watch. */
final class Line {
    static final String NAME = "nacos-client 3.x";
    /** Whether the client speaks gRPC (and has batch registration and CAS publish). */
    static final boolean GRPC = true;

    private Line() {}

    static void batchRegister(NamingService naming, String service, String group, List<Instance> instances)
            throws NacosException {
        naming.batchRegisterInstance(service, group, instances);
    }

    static boolean publishCas(ConfigService config, String dataId, String group, String content, String md5)
            throws NacosException {
        return config.publishConfigCas(dataId, group, content, md5);
    }

    /** Whether the client can fuzzy watch (Nacos 3). */
    static final boolean FUZZY = true;
    /** Whether the client carries Nacos 3's config gray label (`nacos.config.gray.label`). */
    static final boolean GRAY_LABEL = true;

    /**
     * Fuzzy watches the services {@code servicePattern} and {@code groupPattern} match; each
     * event goes to {@code heard} (name, group, namespace, change, sync). Answers the service
     * keys the first sync brought, once it has ended.
     */
    static List<String> fuzzyWatchServices(NamingService naming, String servicePattern, String groupPattern,
            Consumer<Map<String, String>> heard) throws Exception {
        FuzzyWatchEventWatcher watcher = new FuzzyWatchEventWatcher() {
            @Override
            public Executor getExecutor() {
                return null;
            }

            @Override
            public void onEvent(FuzzyWatchChangeEvent e) {
                heard.accept(Map.of("name", e.getServiceName(), "group", e.getGroupName(),
                        "namespace", String.valueOf(e.getNamespace()), "change", e.getChangeType(),
                        "sync", e.getSyncType()));
            }
        };
        ListView<String> keys = naming.fuzzyWatchWithServiceKeys(servicePattern, groupPattern, watcher)
                .get(20, TimeUnit.SECONDS);
        return new ArrayList<>(keys.getData());
    }

    /** As {@link #fuzzyWatchServices}, for configuration items: answers their group keys. */
    static List<String> fuzzyWatchConfigs(ConfigService config, String dataIdPattern, String groupPattern,
            Consumer<Map<String, String>> heard) throws Exception {
        com.alibaba.nacos.api.config.listener.FuzzyWatchEventWatcher watcher =
                new com.alibaba.nacos.api.config.listener.FuzzyWatchEventWatcher() {
                    @Override
                    public Executor getExecutor() {
                        return null;
                    }

                    @Override
                    public void onEvent(ConfigFuzzyWatchChangeEvent e) {
                        heard.accept(Map.of("name", e.getDataId(), "group", e.getGroup(),
                                "namespace", String.valueOf(e.getNamespace()), "change", e.getChangedType(),
                                "sync", e.getSyncType()));
                    }
                };
        Set<String> keys = config.fuzzyWatchWithGroupKeys(dataIdPattern, groupPattern, watcher)
                .get(20, TimeUnit.SECONDS);
        return new ArrayList<>(new TreeSet<>(keys));
    }
}
