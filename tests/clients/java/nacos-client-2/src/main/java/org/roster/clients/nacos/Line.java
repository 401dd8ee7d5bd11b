package org.roster.clients.nacos;

import com.alibaba.nacos.api.config.ConfigService;
import com.alibaba.nacos.api.exception.NacosException;
import com.alibaba.nacos.api.naming.NamingService;
import com.alibaba.nacos.api.naming.pojo.Instance;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;

/** nacos-client 2.x: gRPC (HTTP port + 1000), with batch registration and CAS publish. */
final class Line {
    static final String NAME = "nacos-client 2.x";
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

    /** Whether the client can fuzzy watch (Nacos 3): not this line. */
    static final boolean FUZZY = false;
    /** Whether the client carries Nacos 3's config gray label (`nacos.config.gray.label`). */
    static final boolean GRAY_LABEL = false;

    static List<String> fuzzyWatchServices(NamingService naming, String servicePattern, String groupPattern,
            Consumer<Map<String, String>> heard) {
        throw new UnsupportedOperationException("nacos-client 2.x has no fuzzy watch (Nacos 3)");
    }

    static List<String> fuzzyWatchConfigs(ConfigService config, String dataIdPattern, String groupPattern,
            Consumer<Map<String, String>> heard) {
        throw new UnsupportedOperationException("nacos-client 2.x has no fuzzy watch (Nacos 3)");
    }
}
