package org.roster.clients.maintainer;

import com.alibaba.nacos.api.config.model.ConfigCloneInfo;
import com.alibaba.nacos.api.config.model.ConfigDetailInfo;
import com.alibaba.nacos.api.config.model.ConfigHistoryBasicInfo;
import com.alibaba.nacos.api.config.model.SameConfigPolicy;
import com.alibaba.nacos.api.exception.NacosException;
import com.alibaba.nacos.api.exception.runtime.NacosRuntimeException;
import com.alibaba.nacos.api.model.Page;
import com.alibaba.nacos.api.naming.pojo.Instance;
import com.alibaba.nacos.api.naming.pojo.Service;
import com.alibaba.nacos.api.naming.pojo.healthcheck.AbstractHealthChecker;
import com.alibaba.nacos.api.naming.pojo.maintainer.ClientPublisherInfo;
import com.alibaba.nacos.api.naming.pojo.maintainer.ClientSubscriberInfo;
import com.alibaba.nacos.api.naming.pojo.maintainer.ClusterInfo;
import com.alibaba.nacos.api.naming.pojo.maintainer.SubscriberInfo;
import com.alibaba.nacos.api.selector.NoneSelector;
import com.alibaba.nacos.common.utils.JacksonUtils;
import com.alibaba.nacos.maintainer.client.NacosMaintainerFactory;
import com.alibaba.nacos.maintainer.client.config.ConfigMaintainerService;
import com.alibaba.nacos.maintainer.client.naming.NamingMaintainerFactory;
import com.alibaba.nacos.maintainer.client.naming.NamingMaintainerService;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.roster.clients.Steps;

/**
 * Every method of Nacos 3's maintainer client (nacos-maintainer-client: the naming, config
 * and core services) against one node, one step per call: its answer as JSON
 * ({@code "answer"}), or, when the call throws, "ok":false with the error's code and message.
 * A call that throws never ends the run: the test judges each step, the errors roster
 * answers by design included. The scenario exits 0 once every call was made.
 *
 * <p>What it needs from the test: {@code --prepared P}, a service in the public namespace
 * holding one ephemeral instance registered over v1 and one v1 (UDP) subscriber, for the
 * views of clients and subscribers. Everything else it makes itself, and leaves for the test
 * to read through v1: the namespace {@code --namespace}, the service {@code --service}
 * (persistent, one instance on 127.0.0.1:{@code --port} left of two) and the item
 * {@code --data-id} in the public namespace. What it deletes are others made to be deleted
 * ({@code -gone}), and the item's clone in the namespace.
 */
public final class MaintainerScenario {
    private static final String PUBLIC = "public";
    private static final String GROUP = "DEFAULT_GROUP";
    private static final String IP = "127.0.0.1";

    /** A maintainer call. */
    private interface Call<T> {
        T run() throws Exception;
    }

    private MaintainerScenario() {}

    public static void main(String[] args) throws Exception {
        Steps.capture();
        Steps.watchdog(Duration.ofSeconds(120));
        Map<String, String> opts = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            opts.put(args[i].replaceFirst("^--", ""), args[i + 1]);
        }
        String server = opts.get("server");
        String namespace = opts.getOrDefault("namespace", "maint-ns");
        String service = opts.getOrDefault("service", "maint-service");
        String dataId = opts.getOrDefault("data-id", "maint.yaml");
        String prepared = opts.getOrDefault("prepared", "maint-prepared");
        int port = Integer.parseInt(opts.getOrDefault("port", "18081"));

        // One attempt per call: the client otherwise sends a failed call up to 4 times,
        // and the node's request counts would not say what the client asked.
        System.setProperty("MAINTAINER.CLIENT.MAX.RETRY.TIMES", "0");
        Properties props = new Properties();
        props.setProperty("serverAddr", server);
        props.setProperty("username", opts.getOrDefault("username", "nacos"));
        props.setProperty("password", opts.getOrDefault("password", ""));
        NamingMaintainerService naming = call("naming_connect",
                () -> NamingMaintainerFactory.createNamingMaintainerService(props));
        ConfigMaintainerService config = call("config_connect",
                () -> NacosMaintainerFactory.createConfigMaintainerService(props));
        if (naming == null || config == null) {
            Steps.step("done");
            System.exit(0);
        }

        core(naming, namespace);
        naming(naming, service, prepared, port);
        config(config, dataId, namespace);
        unserved(naming, config);

        Steps.step("done");
        // The client's HTTP client is one per process: shut it down once, at the end.
        try {
            naming.shutdown();
            config.shutdown();
        } catch (Exception e) {
            // Nothing to report: the steps are done.
        }
        System.exit(0);
    }

    /** The core service: the node's state, its members, namespaces, connections. */
    private static void core(NamingMaintainerService m, String namespace) {
        call("server_state", m::getServerState);
        call("liveness", m::liveness);
        call("readiness", m::readiness);
        call("cluster_nodes", () -> m.listClusterNodes(null, null));
        call("cluster_nodes_up", () -> m.listClusterNodes(null, "UP"));
        call("namespace_create", () -> m.createNamespace(namespace, namespace + "-name", "made by the maintainer"));
        call("namespace_get", () -> m.getNamespace(namespace));
        call("namespace_update", () -> m.updateNamespace(namespace, namespace + "-renamed", "renamed"));
        call("namespace_get_updated", () -> m.getNamespace(namespace));
        call("namespace_check", () -> m.checkNamespaceIdExist(namespace));
        call("namespace_check_absent", () -> m.checkNamespaceIdExist(namespace + "-absent"));
        call("namespace_create_gone", () -> m.createNamespace(namespace + "-gone", namespace + "-gone", ""));
        call("namespace_delete", () -> m.deleteNamespace(namespace + "-gone"));
        call("namespace_check_deleted", () -> m.checkNamespaceIdExist(namespace + "-gone"));
        call("namespace_list", m::getNamespaceList);
        call("loader_current", m::getCurrentClients);
        call("loader_cluster", m::getClusterLoaderMetrics);
        call("loader_reload_client", () -> m.reloadSingleClient("no-such-connection", null));
        call("loader_reload_current", () -> m.reloadConnectionCount(0, null));
        call("loader_smart_reload", () -> m.smartReloadCluster("0.1"));
    }

    /** The naming service: services, instances, clusters, health, clients, metrics. */
    private static void naming(NamingMaintainerService m, String name, String prepared, int port) {
        Service service = new Service();
        service.setNamespaceId(PUBLIC);
        service.setGroupName(GROUP);
        service.setName(name);
        service.setEphemeral(false);
        service.setProtectThreshold(0.5f);
        service.setMetadata(new HashMap<>(Map.of("owner", "maint")));
        call("service_create", () -> m.createService(service));
        call("service_detail", () -> m.getServiceDetail(PUBLIC, GROUP, name));
        call("service_update", () -> m.updateService(PUBLIC, GROUP, name, false,
                new HashMap<>(Map.of("owner", "maint", "tier", "gold")), 0.7f, new NoneSelector()));
        call("service_detail_updated", () -> m.getServiceDetail(PUBLIC, GROUP, name));
        call("service_list", () -> m.listServices(PUBLIC, "", "", false, 1, 100));
        call("service_list_filtered", () -> m.listServices(PUBLIC, GROUP, name, false, 1, 10));
        call("service_list_detail", () -> m.listServicesWithDetail(PUBLIC, "", "", 1, 100));

        Instance first = instance(port, 2.0, Map.of("a", "1"));
        Instance second = instance(port + 1, 1.0, Map.of("a", "1"));
        call("instance_register", () -> m.registerInstance(service, first));
        call("instance_register_second", () -> m.registerInstance(service, second));
        call("instance_detail", () -> m.getInstanceDetail(service, instance(port, 1.0, Map.of())));
        Instance updated = instance(port, 3.0, Map.of("a", "2"));
        call("instance_update", () -> m.updateInstance(service, updated));
        call("instance_detail_updated", () -> m.getInstanceDetail(service, instance(port, 1.0, Map.of())));
        // The client sends every field of a partial update; the metadata is merged in.
        Instance partial = instance(port, 4.0, Map.of("b", "3"));
        call("instance_partial", () -> m.partialUpdateInstance(service, partial));
        call("instance_detail_partial", () -> m.getInstanceDetail(service, instance(port, 1.0, Map.of())));
        call("instance_list", () -> m.listInstances(service, null, false));
        List<Instance> both = List.of(instance(port, 1.0, Map.of()), instance(port + 1, 1.0, Map.of()));
        call("metadata_batch_update", () -> m.batchUpdateInstanceMetadata(service, both,
                new HashMap<>(Map.of("batch", "yes"))));
        call("instance_list_batch_updated", () -> m.listInstances(service, null, false));
        call("metadata_batch_delete", () -> m.batchDeleteInstanceMetadata(service, both,
                new HashMap<>(Map.of("batch", "yes"))));
        call("instance_list_batch_deleted", () -> m.listInstances(service, null, false));

        // Health checked by no one, so that an operator may set it.
        ClusterInfo cluster = new ClusterInfo();
        cluster.setClusterName("DEFAULT");
        cluster.setHealthChecker(new AbstractHealthChecker.None());
        cluster.setHealthyCheckPort(port);
        cluster.setUseInstancePortForCheck(false);
        cluster.setMetadata(new HashMap<>(Map.of("zone", "z1")));
        call("cluster_update", () -> m.updateCluster(service, cluster));
        call("service_detail_cluster", () -> m.getServiceDetail(PUBLIC, GROUP, name));
        Instance unhealthy = instance(port + 1, 1.0, Map.of());
        unhealthy.setHealthy(false);
        call("health_update", () -> m.updateInstanceHealthStatus(service, unhealthy));
        call("instance_detail_unhealthy", () -> m.getInstanceDetail(service, instance(port + 1, 1.0, Map.of())));
        call("health_checkers", m::getHealthCheckers);
        call("selector_types", m::listSelectorTypes);
        call("metrics", () -> m.getMetrics(false));
        call("metrics_status", () -> m.getMetrics(true));

        // The service the test prepared over v1: its instance and its subscriber.
        Page<SubscriberInfo> page = call("subscribers", () -> m.getSubscribers(PUBLIC, GROUP, prepared, 1, 10, true));
        List<Instance> preparedInstances = call("prepared_instances",
                () -> m.listInstances(PUBLIC, GROUP, prepared, null, false));
        Instance held = preparedInstances == null || preparedInstances.isEmpty() ? instance(0, 1.0, Map.of())
                : preparedInstances.get(0);
        call("client_list", m::getClientList);
        List<ClientPublisherInfo> publishers = call("service_publishers",
                () -> m.getPublishedClientList(PUBLIC, GROUP, prepared, held.getIp(), held.getPort()));
        String publisher = publishers == null || publishers.isEmpty() ? "no-publisher" : publishers.get(0).getClientId();
        call("client_detail", () -> m.getClientDetail(publisher));
        call("client_published", () -> m.getPublishedServiceList(publisher));
        SubscriberInfo sub = page == null || page.getPageItems() == null || page.getPageItems().isEmpty() ? null
                : page.getPageItems().get(0);
        List<ClientSubscriberInfo> subscribers = call("service_subscribers", () -> m.getSubscribeClientList(PUBLIC,
                GROUP, prepared, sub == null ? IP : sub.getIp(), sub == null ? 0 : sub.getPort()));
        String subscriber = subscribers == null || subscribers.isEmpty() ? "no-subscriber"
                : subscribers.get(0).getClientId();
        call("client_subscribed", () -> m.getSubscribeServiceList(subscriber));
        call("client_detail_subscriber", () -> m.getClientDetail(subscriber));

        // The first instance and the service stay, for the test to read over v1.
        call("instance_deregister", () -> m.deregisterInstance(service, instance(port + 1, 1.0, Map.of())));
        call("instance_list_deregistered", () -> m.listInstances(service, null, false));
        String gone = name + "-gone";
        call("service_create_gone", () -> m.createService(PUBLIC, GROUP, gone));
        call("service_remove", () -> m.removeService(PUBLIC, GROUP, gone));
        call("service_list_removed", () -> m.listServices(PUBLIC, "", "", false, 1, 100));
        call("service_detail_removed", () -> m.getServiceDetail(PUBLIC, GROUP, gone));
    }

    /** The config service: items, their history, listeners, beta, clone. */
    private static void config(ConfigMaintainerService m, String dataId, String namespace) {
        call("config_publish", () -> m.publishConfig(dataId, GROUP, PUBLIC, "k: v1", "maint-app", "maint-user",
                "t1,t2", "first", "yaml"));
        call("config_publish_again", () -> m.publishConfig(dataId, GROUP, PUBLIC, "k: v2", "maint-app",
                "maint-user", "t1,t2", "second", "yaml"));
        ConfigDetailInfo item = call("config_get", () -> m.getConfig(dataId, GROUP, PUBLIC));
        call("config_get_absent", () -> m.getConfig(dataId + ".absent", GROUP, PUBLIC));
        call("config_list", () -> m.listConfigs(dataId, GROUP, PUBLIC, "", "", "", 1, 10));
        call("config_list_namespace", () -> m.listConfigs(PUBLIC));
        call("config_search", () -> m.searchConfigs(dataId.substring(0, Math.min(4, dataId.length())), "", PUBLIC));
        call("config_search_detail", () -> m.searchConfigs("", "", PUBLIC, "v2", null));
        call("config_listeners", () -> m.getListeners(dataId, GROUP, PUBLIC, true));
        call("listeners_by_ip", () -> m.getAllSubClientConfigByIp(IP, true, PUBLIC, true));

        Page<ConfigHistoryBasicInfo> history = call("history_list",
                () -> m.listConfigHistory(dataId, GROUP, PUBLIC, 1, 10));
        Long newest = null;
        if (history != null && !history.getPageItems().isEmpty()) {
            newest = history.getPageItems().get(0).getId();
            for (ConfigHistoryBasicInfo h : history.getPageItems()) {
                if (h.getId() != null && h.getId() > newest) {
                    newest = h.getId();
                }
            }
        }
        Long nid = newest;
        call("history_detail", () -> m.getConfigHistoryInfo(dataId, GROUP, PUBLIC, nid));
        call("history_previous", () -> m.getPreviousConfigHistoryInfo(dataId, GROUP, PUBLIC, nid));
        call("history_configs", () -> m.getConfigListByNamespace(PUBLIC));

        call("beta_publish", () -> m.publishBetaConfig(dataId, GROUP, PUBLIC, "k: beta", "maint-app", "maint-user",
                null, "beta", "yaml", IP));
        call("beta_get", () -> m.queryBeta(dataId, GROUP, PUBLIC));
        call("beta_stop", () -> m.stopBeta(dataId, GROUP, PUBLIC));
        call("beta_get_stopped", () -> m.queryBeta(dataId, GROUP, PUBLIC));

        ConfigCloneInfo clone = new ConfigCloneInfo();
        clone.setConfigId(item == null ? null : item.getId());
        clone.setTargetGroupName(GROUP);
        clone.setTargetDataId(dataId + ".clone");
        call("config_clone", () -> m.cloneConfig(namespace, List.of(clone), "maint-user", SameConfigPolicy.ABORT));
        ConfigDetailInfo cloned = call("config_get_clone", () -> m.getConfig(dataId + ".clone", GROUP, namespace));

        call("config_metadata", () -> m.updateConfigMetadata(dataId, GROUP, PUBLIC, "described", "t3"));
        call("config_get_metadata", () -> m.getConfig(dataId, GROUP, PUBLIC));

        // The item stays, for the test to read over v1; another one goes.
        call("config_publish_gone", () -> m.publishConfig(dataId + ".gone", GROUP, PUBLIC, "gone"));
        call("config_delete", () -> m.deleteConfig(dataId + ".gone", GROUP, PUBLIC));
        call("config_get_deleted", () -> m.getConfig(dataId + ".gone", GROUP, PUBLIC));
        List<Long> ids = new ArrayList<>();
        if (cloned != null && cloned.getId() != null) {
            ids.add(cloned.getId());
        }
        call("config_batch_delete", () -> m.deleteConfigs(ids));
        call("config_get_batch_deleted", () -> m.getConfig(dataId + ".clone", GROUP, namespace));
        call("history_list_deleted", () -> m.listConfigHistory(dataId + ".gone", GROUP, PUBLIC, 1, 10));
        call("config_local_cache", m::updateLocalCacheFromStore);
    }

    /** What roster answers 501 by design: log levels, raft, id generators, lookup, plugins. */
    private static void unserved(NamingMaintainerService naming, ConfigMaintainerService config) {
        call("naming_log", () -> naming.setLogLevel("naming-server", "INFO"));
        call("config_log", () -> config.setLogLevel("config-server", "INFO"));
        call("core_log", () -> {
            naming.updateLogLevel("core-auth", "INFO");
            return null;
        });
        call("raft_ops", () -> naming.raftOps("doSnapshot", "", "naming_persistent_service_v2"));
        call("id_generators", naming::getIdGenerators);
        call("lookup_mode", () -> naming.updateLookupMode("file"));
        call("plugin_list", () -> naming.listPlugins(null));
        call("plugin_detail", () -> naming.getPluginDetail("auth", "nacos"));
        call("plugin_availability", () -> naming.getPluginAvailability("auth", "nacos"));
        call("plugin_status", () -> {
            naming.updatePluginStatus("auth", "nacos", true);
            return null;
        });
        call("plugin_config", () -> {
            naming.updatePluginConfig("auth", "nacos", Map.of("k", "v"));
            return null;
        });
    }

    /** A persistent instance on the loopback address in the default cluster. */
    private static Instance instance(int port, double weight, Map<String, String> metadata) {
        Instance i = new Instance();
        i.setIp(IP);
        i.setPort(port);
        i.setWeight(weight);
        i.setClusterName("DEFAULT");
        i.setEphemeral(false);
        i.setMetadata(new HashMap<>(metadata));
        return i;
    }

    /**
     * Runs one call and prints its step: its answer as JSON, or its error's code and
     * message (the call's answer is then null).
     */
    private static <T> T call(String name, Call<T> call) {
        try {
            T answer = call.run();
            Steps.step(name, "answer", tree(answer));
            return answer;
        } catch (NacosException e) {
            Steps.failed(name, "code", e.getErrCode(), "message", e.getErrMsg(), "error", e.getClass().getName());
        } catch (NacosRuntimeException e) {
            Steps.failed(name, "code", e.getErrCode(), "message", e.getMessage(), "error", e.getClass().getName());
        } catch (Exception e) {
            Steps.failed(name, "code", null, "message", String.valueOf(e.getMessage()), "error",
                    e.getClass().getName());
        }
        return null;
    }

    /** An answer as maps, lists and plain values (what Jackson makes of the client's model). */
    private static Object tree(Object answer) {
        if (answer == null || answer instanceof String || answer instanceof Boolean || answer instanceof Number) {
            return answer;
        }
        if (answer instanceof NamingMaintainerService || answer instanceof ConfigMaintainerService) {
            return answer.getClass().getSimpleName();
        }
        Object tree = JacksonUtils.toObj(JacksonUtils.toJson(answer), Object.class);
        return tree instanceof Map || tree instanceof List ? tree : String.valueOf(tree);
    }
}
