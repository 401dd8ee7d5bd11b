//! Where services live in a ZooKeeper tree, and how a znode maps onto roster's model
//! (reference §4 and §8):
//!
//! - `dubbo` (Dubbo 2.x, interface level): `<root>/<interface>/providers/<URL-encoded
//!   provider URL>`; everything is in the node name. Service
//!   `providers:<interface>:<version>:<group>`, as Dubbo names it on a Nacos registry.
//! - `dubbo3` and `spring-cloud` (Curator x-discovery): `<root>/<service>/<id>` holding
//!   the Curator `ServiceInstance` JSON.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use crate::keyed::{host_port, weight, Entries};
use crate::{Filter, Metadata, ServiceName, SourceError, SourceInstance, SourceUrl};

/// Dubbo's default provider weight (`dubbo-cluster` `Constants.DEFAULT_WEIGHT`).
const DUBBO_WEIGHT: f64 = 100.0;

/// How services are laid out under the root.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Layout {
    /// Dubbo 2.x interface-level registration (default root `/dubbo`).
    Dubbo,
    /// Dubbo 3 application-level registration, Curator JSON (default root `/services`).
    Dubbo3,
    /// Spring Cloud Zookeeper, Curator JSON (default root `/services`).
    SpringCloud,
}

/// What a znode under the root is, by its path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Node {
    /// `<root>/<interface>/providers/<name>`: a Dubbo provider.
    DubboProvider {
        /// The (encoded) interface directory name.
        interface: String,
        /// The node name: a URL-encoded provider URL.
        name: String,
    },
    /// `<root>/<service>`: a Curator service.
    CuratorService(String),
    /// `<root>/<service>/<id>`: a Curator instance.
    CuratorInstance(String),
    /// Anything else (the root, consumers, configurators, Dubbo 3 metadata...).
    Other,
}

impl Layout {
    /// The layout and root from the URL's `layout` and `root`.
    pub(super) fn from_url(url: &SourceUrl) -> Result<(Self, String), SourceError> {
        if !url.path.is_empty() {
            return Err(SourceError::Config(format!(
                "zookeeper:// takes no path ('{}'): give the root as ?root=",
                url.path
            )));
        }
        let layout = match url.param("layout").unwrap_or("dubbo") {
            "dubbo" => Self::Dubbo,
            "dubbo3" => Self::Dubbo3,
            "spring-cloud" => Self::SpringCloud,
            other => {
                return Err(SourceError::Config(format!(
                    "unknown layout '{other}' for zookeeper:// (use dubbo, dubbo3 or spring-cloud)"
                )))
            }
        };
        let default_root = match layout {
            Self::Dubbo => "/dubbo",
            Self::Dubbo3 | Self::SpringCloud => "/services",
        };
        let root = url.param("root").unwrap_or(default_root);
        if !root.starts_with('/') {
            return Err(SourceError::Config(format!(
                "root '{root}' must start with '/'"
            )));
        }
        let root = match root.trim_end_matches('/') {
            "" => "/".to_string(),
            trimmed => trimmed.to_string(),
        };
        Ok((layout, root))
    }

    /// What the node at `path` is, for a tree rooted at `root`.
    pub(super) fn node(self, root: &str, path: &str) -> Node {
        let Some(relative) = relative(root, path) else {
            return Node::Other;
        };
        let parts: Vec<&str> = relative.split('/').collect();
        match (self, parts.as_slice()) {
            (Self::Dubbo, [interface, "providers", name]) => Node::DubboProvider {
                interface: interface.to_string(),
                name: name.to_string(),
            },
            (Self::Dubbo3 | Self::SpringCloud, [service]) => {
                Node::CuratorService(service.to_string())
            }
            (Self::Dubbo3 | Self::SpringCloud, [service, _id]) => {
                Node::CuratorInstance(service.to_string())
            }
            _ => Node::Other,
        }
    }
}

/// `path` below `root`, without the leading `/`; `None` for the root and paths outside.
fn relative<'a>(root: &str, path: &'a str) -> Option<&'a str> {
    let rest = if root == "/" {
        path.strip_prefix('/')?
    } else {
        path.strip_prefix(root)?.strip_prefix('/')?
    };
    (!rest.is_empty()).then_some(rest)
}

/// `child` under `parent`.
pub(super) fn join(parent: &str, child: &str) -> String {
    if parent == "/" {
        format!("/{child}")
    } else {
        format!("{parent}/{child}")
    }
}

/// A parsed Dubbo URL: `protocol://[user:password@]host:port/path?k=v&...`.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct DubboUrl {
    /// The scheme, e.g. `dubbo`, `tri`, `rest`.
    pub protocol: String,
    /// IP or host name (IPv6 without brackets).
    pub host: String,
    /// Port.
    pub port: u16,
    /// The path (usually the interface), without the leading `/`.
    pub path: String,
    /// Parameters, as written (Dubbo does not encode their values).
    pub params: BTreeMap<String, String>,
}

impl DubboUrl {
    /// Parses a decoded provider URL.
    pub(super) fn parse(text: &str) -> Result<Self, String> {
        let (protocol, rest) = text
            .split_once("://")
            .ok_or_else(|| format!("'{text}' is not a URL"))?;
        let (before_query, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (authority, path) = before_query.split_once('/').unwrap_or((before_query, ""));
        // Credentials, if any, end at the last '@'.
        let address = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
        let (host, port) =
            host_port(address).ok_or_else(|| format!("'{text}' has no host:port"))?;
        let params = query
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|p| match p.split_once('=') {
                Some((k, v)) => (k.to_string(), v.to_string()),
                // Dubbo's own parser reads a bare `k` as `k=k`.
                None => (p.to_string(), p.to_string()),
            })
            .collect();
        Ok(Self {
            protocol: protocol.to_string(),
            host,
            port,
            path: path.to_string(),
            params,
        })
    }

    /// A parameter, falling back to its `default.` form as Dubbo 2.7 does; `""` if absent.
    pub(super) fn param(&self, key: &str) -> &str {
        match self.params.get(key).filter(|v| !v.is_empty()) {
            Some(v) => v,
            None => self
                .params
                .get(&format!("default.{key}"))
                .map_or("", String::as_str),
        }
    }
}

/// The instance a Dubbo provider node at `path` (in interface directory `interface`,
/// named `name`) stands for, if the filter admits its service.
pub(super) fn dubbo_provider(
    path: &str,
    interface: &str,
    name: &str,
    filter: &Filter,
) -> Result<Entries, String> {
    let url = DubboUrl::parse(&url_decode(name))?;
    let interface = match (url.param("interface"), url.path.as_str()) {
        ("", "") => url_decode(interface),
        ("", path) => path.to_string(),
        (param, _) => param.to_string(),
    };
    let service = format!(
        "providers:{interface}:{}:{}",
        url.param("version"),
        url.param("group")
    );
    if !filter.admits(&service) {
        return Ok(Vec::new());
    }
    let mut metadata: Metadata = url.params.clone();
    metadata.insert("protocol".into(), url.protocol.clone());
    if !url.path.is_empty() {
        metadata.insert("path".into(), url.path.clone());
    }
    let enabled = url.param("disabled") != "true" && url.param("enabled") != "false";
    let instance = SourceInstance {
        cluster: "DEFAULT".into(),
        ip: url.host.clone(),
        port: url.port,
        weight: weight(Some(url.param("weight")), DUBBO_WEIGHT),
        healthy: true,
        enabled,
        metadata,
        source_id: path.to_string(),
    };
    Ok(vec![(ServiceName::plain(service), instance)])
}

/// Decodes `java.net.URLEncoder` output: `+` is a space, `%XX` a byte.
pub(super) fn url_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => match bytes.get(i + 1..i + 3).and_then(hex_byte) {
                Some(b) => {
                    out.push(b);
                    i += 2;
                }
                None => out.push(b'%'),
            },
            other => out.push(other),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The byte two hex digits stand for.
fn hex_byte(pair: &[u8]) -> Option<u8> {
    let digit = |c: u8| (c as char).to_digit(16);
    match pair {
        [hi, lo] => Some((digit(*hi)? * 16 + digit(*lo)?) as u8),
        _ => None,
    }
}

/// A Curator x-discovery `ServiceInstance`, the fields we read.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CuratorInstance {
    #[serde(default)]
    address: Option<String>,
    #[serde(default)]
    port: Option<i64>,
    #[serde(default)]
    ssl_port: Option<i64>,
    #[serde(default)]
    payload: Option<Value>,
    /// Absent in Curator's "compatible serialization mode": enabled.
    #[serde(default)]
    enabled: Option<bool>,
}

/// The instance a Curator node of service `service` at `path` holding `data` stands for.
pub(super) fn curator_instance(
    path: &str,
    service: &str,
    data: &[u8],
    filter: &Filter,
) -> Result<Entries, String> {
    if !filter.admits(service) {
        return Ok(Vec::new());
    }
    let node: CuratorInstance =
        serde_json::from_slice(data).map_err(|e| format!("not a Curator service instance: {e}"))?;
    let ip = node
        .address
        .filter(|a| !a.is_empty())
        .ok_or("the instance has no address")?;
    let port = node
        .port
        .or(node.ssl_port)
        .and_then(|p| u16::try_from(p).ok())
        .filter(|p| *p > 0)
        .ok_or("the instance has no port")?;
    let metadata = payload_metadata(node.payload);
    // Spring Cloud's status entry; load balancers drop anything but UP.
    let up = metadata
        .get("instance_status")
        .is_none_or(|s| s.eq_ignore_ascii_case("UP"));
    let instance = SourceInstance {
        cluster: "DEFAULT".into(),
        ip,
        port,
        weight: weight(metadata.get("weight").map(String::as_str), 1.0),
        healthy: true,
        enabled: node.enabled.unwrap_or(true) && up,
        metadata,
        source_id: path.to_string(),
    };
    Ok(vec![(ServiceName::plain(service), instance)])
}

/// `payload.metadata` when it is an object (values that are not strings as JSON text);
/// any other payload as JSON text under `payload`.
fn payload_metadata(payload: Option<Value>) -> Metadata {
    match payload {
        None | Some(Value::Null) => Metadata::new(),
        Some(Value::Object(mut fields)) if fields.get("metadata").is_some_and(Value::is_object) => {
            let Some(Value::Object(map)) = fields.remove("metadata") else {
                return Metadata::new();
            };
            map.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| match v {
                    Value::String(s) => (k, s),
                    other => (k, other.to_string()),
                })
                .collect()
        }
        Some(other) => Metadata::from([("payload".to_string(), other.to_string())]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ENCODED: &str = "dubbo%3A%2F%2F192.168.1.10%3A20880%2Forg.apache.dubbo.demo.DemoService%3Fanyhost%3Dtrue%26application%3Ddemo-provider%26deprecated%3Dfalse%26dubbo%3D2.0.2%26dynamic%3Dtrue%26generic%3Dfalse%26group%3Dg1%26interface%3Dorg.apache.dubbo.demo.DemoService%26methods%3DsayHello%2CsayHelloAsync%26pid%3D4242%26release%3D2.7.23%26revision%3D1.0.0%26side%3Dprovider%26timestamp%3D1700000000000%26version%3D1.0.0%26weight%3D200";

    #[test]
    fn layout_and_root_from_the_url() {
        let parse = |s: &str| Layout::from_url(&s.parse().unwrap());
        assert_eq!(
            parse("zookeeper://h").unwrap(),
            (Layout::Dubbo, "/dubbo".to_string())
        );
        assert_eq!(
            parse("zookeeper://h?layout=dubbo3").unwrap(),
            (Layout::Dubbo3, "/services".to_string())
        );
        assert_eq!(
            parse("zookeeper://h?layout=spring-cloud&root=/sc/").unwrap(),
            (Layout::SpringCloud, "/sc".to_string())
        );
        assert_eq!(parse("zookeeper://h?root=/").unwrap().1, "/");
        assert!(parse("zookeeper://h/chroot")
            .unwrap_err()
            .to_string()
            .contains("?root="));
    }

    #[test]
    fn classifies_paths() {
        let d = Layout::Dubbo;
        assert_eq!(
            d.node("/dubbo", "/dubbo/a.B/providers/x"),
            Node::DubboProvider {
                interface: "a.B".into(),
                name: "x".into()
            }
        );
        assert_eq!(d.node("/dubbo", "/dubbo/a.B/consumers/x"), Node::Other);
        assert_eq!(d.node("/dubbo", "/dubbo/a.B/providers"), Node::Other);
        assert_eq!(d.node("/dubbo", "/dubbox/a/providers/x"), Node::Other);
        let c = Layout::SpringCloud;
        assert_eq!(
            c.node("/services", "/services/app"),
            Node::CuratorService("app".into())
        );
        assert_eq!(
            c.node("/services", "/services/app/id"),
            Node::CuratorInstance("app".into())
        );
        assert_eq!(c.node("/services", "/services"), Node::Other);
        assert_eq!(c.node("/", "/app/id"), Node::CuratorInstance("app".into()));
        assert_eq!(join("/", "a"), "/a");
        assert_eq!(join("/s", "a"), "/s/a");
    }

    #[test]
    fn decodes_java_url_encoding() {
        assert_eq!(url_decode("a%3A%2F%2Fb+c%2C"), "a://b c,");
        assert_eq!(url_decode("100%"), "100%");
        assert_eq!(url_decode("%zz%4"), "%zz%4");
        assert_eq!(url_decode("%E4%B8%AD"), "中");
    }

    #[test]
    fn dubbo_provider_from_the_reference_example() {
        let path = format!("/dubbo/org.apache.dubbo.demo.DemoService/providers/{ENCODED}");
        let entries = dubbo_provider(
            &path,
            "org.apache.dubbo.demo.DemoService",
            ENCODED,
            &Filter::all(),
        )
        .unwrap();
        let (service, i) = &entries[0];
        assert_eq!(
            service.name,
            "providers:org.apache.dubbo.demo.DemoService:1.0.0:g1"
        );
        assert_eq!(
            (i.ip.as_str(), i.port, i.weight),
            ("192.168.1.10", 20880, 200.0)
        );
        assert!(i.enabled && i.healthy);
        assert_eq!(i.metadata["methods"], "sayHello,sayHelloAsync");
        assert_eq!(i.metadata["protocol"], "dubbo");
        assert_eq!(i.metadata["path"], "org.apache.dubbo.demo.DemoService");
        assert_eq!(i.metadata["application"], "demo-provider");
        assert_eq!(i.source_id, path);
        let other = Filter::parse(Some("providers:x*")).unwrap();
        assert!(dubbo_provider(&path, "i", ENCODED, &other)
            .unwrap()
            .is_empty());
    }

    #[test]
    fn dubbo_urls_with_ipv6_host_names_and_defaults() {
        let url =
            DubboUrl::parse("tri://user:pw@[::1]:50051/com.x.Api?disabled=true&anyhost").unwrap();
        assert_eq!((url.host.as_str(), url.port), ("::1", 50051));
        assert_eq!(url.param("anyhost"), "anyhost");
        let entries = dubbo_provider(
            "/p",
            "com.x.Api",
            "tri%3A%2F%2F%5B%3A%3A1%5D%3A50051%2Fcom.x.Api%3Fdisabled%3Dtrue",
            &Filter::all(),
        )
        .unwrap();
        let (service, i) = &entries[0];
        // Empty version and group keep their separators.
        assert_eq!(service.name, "providers:com.x.Api::");
        assert_eq!((i.ip.as_str(), i.weight, i.enabled), ("::1", 100.0, false));

        let url = "rest://provider.internal:8080?default.version=2.0&enabled=false&weight=oops";
        let entries =
            dubbo_provider("/p", "com.y.Api", &url.replace(':', "%3A"), &Filter::all()).unwrap();
        let (service, i) = &entries[0];
        // No interface parameter, no path: the directory names the interface.
        assert_eq!(service.name, "providers:com.y.Api:2.0:");
        assert_eq!(
            (i.ip.as_str(), i.port, i.weight, i.enabled),
            ("provider.internal", 8080, 100.0, false)
        );
        assert!(dubbo_provider("/p", "i", "dubbo%3A%2F%2Fnoport", &Filter::all()).is_err());
        assert!(dubbo_provider("/p", "i", "garbage", &Filter::all()).is_err());
    }

    #[test]
    fn curator_instances() {
        let spring = br#"{"name":"order-service","id":"6d4e","address":"10.0.0.21","port":8080,"sslPort":null,
            "payload":{"@class":"org.springframework.cloud.zookeeper.discovery.ZookeeperInstance",
                       "id":"order-service-1","name":"order-service",
                       "metadata":{"instance_status":"UP","zone":"az1","weight":"3"}},
            "registrationTimeUTC":1610116500446,"serviceType":"DYNAMIC"}"#;
        let entries = curator_instance(
            "/services/order-service/6d4e",
            "order-service",
            spring,
            &Filter::all(),
        )
        .unwrap();
        let (service, i) = &entries[0];
        assert_eq!(service.name, "order-service");
        assert_eq!(
            (i.ip.as_str(), i.port, i.weight, i.enabled),
            ("10.0.0.21", 8080, 3.0, true)
        );
        assert_eq!(i.metadata["zone"], "az1");
        assert!(!i.metadata.contains_key("@class"));
        assert_eq!(i.source_id, "/services/order-service/6d4e");

        let out = String::from_utf8_lossy(spring).replace("\"UP\"", "\"OUT_OF_SERVICE\"");
        let entries =
            curator_instance("/p", "order-service", out.as_bytes(), &Filter::all()).unwrap();
        assert!(!entries[0].1.enabled);

        let disabled =
            br#"{"address":"h","port":null,"sslPort":8443,"enabled":false,"payload":"plain"}"#;
        let entries = curator_instance("/p", "s", disabled, &Filter::all()).unwrap();
        let i = &entries[0].1;
        assert_eq!((i.port, i.enabled, i.weight), (8443, false, 1.0));
        assert_eq!(i.metadata["payload"], "\"plain\"");

        assert!(curator_instance("/p", "s", br#"{"address":"h"}"#, &Filter::all()).is_err());
        assert!(curator_instance("/p", "s", b"not json", &Filter::all()).is_err());
        let none = Filter::parse(Some("other")).unwrap();
        assert!(curator_instance("/p", "s", b"not json", &none)
            .unwrap()
            .is_empty());
    }
}
