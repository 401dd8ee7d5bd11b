import { App, Button, Modal, Tabs, Typography } from 'antd';
import { CopyOutlined } from '@ant-design/icons';
import { useRef } from 'react';
import { useT } from '../i18n';

/** What a snippet is written for: this server and one service. */
export interface SampleTarget {
  /** `host:port` of this server, as the browser reached it (`location.host`). */
  server: string;
  /** The namespace id; `public` is left out of the snippets (the SDKs' default). */
  namespaceId: string;
  groupName: string;
  serviceName: string;
}

/** A string literal in Java, Go, JavaScript, Python or YAML (JSON's escapes are valid in each). */
const q = (s: string) => JSON.stringify(s);

/** `host` and numeric `port` of `host:port` (IPv6 in brackets; no port means 80). */
function hostPort(server: string): [string, number] {
  const m = /^(\[[^\]]+\]|[^:]+)(?::(\d+))?$/.exec(server);
  if (!m) return [server, 80];
  return [m[1].replace(/^\[|\]$/g, ''), m[2] ? Number(m[2]) : 80];
}

interface Sample {
  key: string;
  label: string;
  code: (s: SampleTarget) => string;
}

/**
 * One snippet per SDK, each against its current API: nacos-client 2.x `NamingService`,
 * Spring Cloud Alibaba discovery, nacos-sdk-go v2, nacos-sdk-python 2.x/3.x (`v2.nacos`,
 * asyncio) and the npm `nacos` package's `NacosNamingClient`. Every one registers an
 * instance and reads the healthy ones back, so a copied snippet shows at once whether
 * address, namespace, group and credentials are right.
 */
const SAMPLES: Sample[] = [
  {
    key: 'java',
    label: 'Java',
    code: (s) => {
      const ns = s.namespaceId === 'public' ? '' : `props.setProperty(PropertyKeyConst.NAMESPACE, ${q(s.namespaceId)});\n`;
      return `// com.alibaba.nacos:nacos-client 2.x
import com.alibaba.nacos.api.PropertyKeyConst;
import com.alibaba.nacos.api.naming.NamingFactory;
import com.alibaba.nacos.api.naming.NamingService;
import com.alibaba.nacos.api.naming.pojo.Instance;
import java.util.List;
import java.util.Properties;

Properties props = new Properties();
props.setProperty(PropertyKeyConst.SERVER_ADDR, ${q(s.server)});
${ns}props.setProperty(PropertyKeyConst.USERNAME, System.getenv("NACOS_USERNAME"));
props.setProperty(PropertyKeyConst.PASSWORD, System.getenv("NACOS_PASSWORD"));
NamingService naming = NamingFactory.createNamingService(props);

// register this process (ephemeral: the client keeps it alive)
naming.registerInstance(${q(s.serviceName)}, ${q(s.groupName)}, "10.0.0.10", 8080);

// the healthy instances, and every later change
List<Instance> healthy = naming.selectInstances(${q(s.serviceName)}, ${q(s.groupName)}, true);
naming.subscribe(${q(s.serviceName)}, ${q(s.groupName)}, event -> System.out.println(event));
`;
    },
  },
  {
    key: 'spring',
    label: 'Spring Cloud Alibaba',
    code: (s) => {
      const ns = s.namespaceId === 'public' ? '' : `        namespace: ${q(s.namespaceId)}\n`;
      return `# application.yaml (com.alibaba.cloud:spring-cloud-starter-alibaba-nacos-discovery)
spring:
  application:
    name: ${q(s.serviceName)}   # registered as this service
  cloud:
    nacos:
      discovery:
        server-addr: ${q(s.server)}
${ns}        group: ${q(s.groupName)}
        username: \${NACOS_USERNAME}
        password: \${NACOS_PASSWORD}

// Application.java
import java.util.List;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.cloud.client.ServiceInstance;
import org.springframework.cloud.client.discovery.DiscoveryClient;
import org.springframework.cloud.client.discovery.EnableDiscoveryClient;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RestController;

@SpringBootApplication
@EnableDiscoveryClient
@RestController
public class Application {
    private final DiscoveryClient discovery;

    Application(DiscoveryClient discovery) {
        this.discovery = discovery;
    }

    // the instances of the service in the configured group
    @GetMapping("/peers")
    List<ServiceInstance> peers() {
        return discovery.getInstances(${q(s.serviceName)});
    }

    public static void main(String[] args) {
        SpringApplication.run(Application.class, args);
    }
}
`;
    },
  },
  {
    key: 'go',
    label: 'Go',
    code: (s) => {
      const [host, port] = hostPort(s.server);
      const ns = s.namespaceId === 'public' ? '' : `\t\t\tconstant.WithNamespaceId(${q(s.namespaceId)}),\n`;
      return `// go get github.com/nacos-group/nacos-sdk-go/v2
package main

import (
\t"fmt"
\t"os"

\t"github.com/nacos-group/nacos-sdk-go/v2/clients"
\t"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
\t"github.com/nacos-group/nacos-sdk-go/v2/vo"
)

func main() {
\tclient, err := clients.NewNamingClient(vo.NacosClientParam{
\t\tClientConfig: constant.NewClientConfig(
${ns}\t\t\tconstant.WithUsername(os.Getenv("NACOS_USERNAME")),
\t\t\tconstant.WithPassword(os.Getenv("NACOS_PASSWORD")),
\t\t\tconstant.WithNotLoadCacheAtStart(true),
\t\t),
\t\tServerConfigs: []constant.ServerConfig{*constant.NewServerConfig(${q(host)}, ${port})},
\t})
\tif err != nil {
\t\tpanic(err)
\t}

\t// register this process (ephemeral: the client keeps it alive)
\tif _, err := client.RegisterInstance(vo.RegisterInstanceParam{
\t\tIp: "10.0.0.10", Port: 8080, Weight: 1, Enable: true, Healthy: true, Ephemeral: true,
\t\tServiceName: ${q(s.serviceName)}, GroupName: ${q(s.groupName)},
\t}); err != nil {
\t\tpanic(err)
\t}

\t// the healthy instances
\thealthy, err := client.SelectInstances(vo.SelectInstancesParam{
\t\tServiceName: ${q(s.serviceName)}, GroupName: ${q(s.groupName)}, HealthyOnly: true,
\t})
\tfmt.Println(healthy, err)
}
`;
    },
  },
  {
    key: 'python',
    label: 'Python',
    code: (s) => {
      const ns = s.namespaceId === 'public' ? '' : `           .namespace_id(${q(s.namespaceId)})\n`;
      return `# pip install nacos-sdk-python  (2.x / 3.x: package v2.nacos, asyncio, gRPC)
import asyncio
import os

from v2.nacos import (ClientConfigBuilder, ListInstanceParam, NacosNamingService,
                      RegisterInstanceParam)


async def main():
    config = (ClientConfigBuilder()
           .server_address(${q(s.server)})
${ns}           .username(os.environ["NACOS_USERNAME"])
           .password(os.environ["NACOS_PASSWORD"])
           .build())
    naming = await NacosNamingService.create_naming_service(config)

    # register this process (ephemeral: the client keeps it alive)
    await naming.register_instance(RegisterInstanceParam(
        service_name=${q(s.serviceName)}, group_name=${q(s.groupName)},
        ip="10.0.0.10", port=8080, ephemeral=True))

    # the healthy instances
    healthy = await naming.list_instances(ListInstanceParam(
        service_name=${q(s.serviceName)}, group_name=${q(s.groupName)}, healthy_only=True))
    print(healthy)


asyncio.run(main())
`;
    },
  },
  {
    key: 'node',
    label: 'Node.js',
    code: (s) => {
      const ns = s.namespaceId === 'public' ? '' : `    namespace: ${q(s.namespaceId)},\n`;
      return `// npm install nacos
const { NacosNamingClient } = require('nacos');

async function main() {
  const client = new NacosNamingClient({
    logger: console,
    serverList: ${q(s.server)},
${ns}    username: process.env.NACOS_USERNAME,
    password: process.env.NACOS_PASSWORD,
  });
  await client.ready();

  // register this process (ephemeral: the client keeps it alive)
  await client.registerInstance(${q(s.serviceName)}, { ip: '10.0.0.10', port: 8080 }, ${q(s.groupName)});

  // the instances, and every later change
  console.log(await client.getAllInstances(${q(s.serviceName)}, ${q(s.groupName)}));
  client.subscribe({ serviceName: ${q(s.serviceName)}, groupName: ${q(s.groupName)} }, (hosts) => console.log(hosts));
}

main();
`;
    },
  },
];

/** The sample-code dialog of a service: a tab per SDK, each with a copy button. */
export function SampleCodeDialog({ open, target, onClose }: { open: boolean; target: SampleTarget; onClose(): void }) {
  const t = useT();
  return (
    <Modal
      open={open}
      title={t('detail.sampleTitle', { name: target.serviceName })}
      onCancel={onClose}
      footer={<Button onClick={onClose}>{t('common.close')}</Button>}
      width={820}
      destroyOnHidden
    >
      <div data-testid="sample-dialog">
        <Typography.Paragraph type="secondary" className="sample-hint">
          {t('detail.sampleHint', { server: target.server })}
        </Typography.Paragraph>
        <Tabs
          items={SAMPLES.map((s) => ({
            key: s.key,
            label: <span data-testid={`sample-tab-${s.key}`}>{s.label}</span>,
            children: <Snippet sample={s} target={target} />,
          }))}
        />
      </div>
    </Modal>
  );
}

function Snippet({ sample, target }: { sample: Sample; target: SampleTarget }) {
  const t = useT();
  const { message } = App.useApp();
  const pre = useRef<HTMLPreElement>(null);
  const code = sample.code(target);

  // navigator.clipboard exists only in a secure context (HTTPS, localhost); on plain
  // HTTP the text is selected instead and the person copies it with the keyboard.
  const selectText = () => {
    const el = pre.current;
    const selection = window.getSelection();
    if (!el || !selection) return;
    selection.selectAllChildren(el);
    el.focus();
    message.info({ content: t('detail.sampleSelected'), key: 'sample-copy', duration: 6 });
  };
  const copy = async () => {
    if (!window.isSecureContext || !navigator.clipboard) return selectText();
    try {
      await navigator.clipboard.writeText(code);
      message.success({ content: t('detail.sampleCopied', { lang: sample.label }), key: 'sample-copy' });
    } catch {
      // refused (no permission, the document lost focus): the selection still works
      selectText();
    }
  };

  return (
    <div className="sample">
      <Button
        size="small"
        icon={<CopyOutlined />}
        className="sample-copy"
        aria-label={t('detail.sampleCopyLabel', { lang: sample.label })}
        data-testid={`sample-copy-${sample.key}`}
        onClick={() => void copy()}
      >
        {t('detail.sampleCopy')}
      </Button>
      {/* focusable: it scrolls, and a keyboard has to reach what scrolls */}
      <pre
        ref={pre}
        className="sample-code mono"
        tabIndex={0}
        aria-label={t('detail.sampleCodeLabel', { lang: sample.label })}
        data-testid={`sample-code-${sample.key}`}
      >
        {code}
      </pre>
    </div>
  );
}
