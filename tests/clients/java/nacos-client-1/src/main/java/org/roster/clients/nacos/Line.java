package org.roster.clients.nacos;

import com.alibaba.nacos.api.config.ConfigService;
import com.alibaba.nacos.api.naming.NamingService;
import com.alibaba.nacos.api.naming.pojo.Instance;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;

/**
 * nacos-client 1.x: HTTP with UDP push, and beats for ephemeral instances. Its API has no
 * batch registration and no compare-and-set publish, so the scenario leaves those out.
 */
final class Line {
    static final String NAME = "nacos-client 1.x";
    /** Whether the client speaks gRPC (and has batch registration and CAS publish). */
    static final boolean GRPC = false;

    private Line() {}

    static void batchRegister(NamingService naming, String service, String group, List<Instance> instances) {
        throw new UnsupportedOperationException("nacos-client 1.x has no batchRegisterInstance");
    }

    static boolean publishCas(ConfigService config, String dataId, String group, String content, String md5) {
        throw new UnsupportedOperationException("nacos-client 1.x has no publishConfigCas");
    }

    /** Whether the client can fuzzy watch (Nacos 3): not this line. */
    static final boolean FUZZY = false;
    /** Whether the client carries Nacos 3's config gray label (`nacos.config.gray.label`). */
    static final boolean GRAY_LABEL = false;

    static List<String> fuzzyWatchServices(NamingService naming, String servicePattern, String groupPattern,
            Consumer<Map<String, String>> heard) {
        throw new UnsupportedOperationException("nacos-client 1.x has no fuzzy watch (Nacos 3)");
    }

    static List<String> fuzzyWatchConfigs(ConfigService config, String dataIdPattern, String groupPattern,
            Consumer<Map<String, String>> heard) {
        throw new UnsupportedOperationException("nacos-client 1.x has no fuzzy watch (Nacos 3)");
    }
}
