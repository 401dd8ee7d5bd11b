//! The three ways services are laid out in etcd, and how one key's value maps onto
//! roster's model (reference §5 and §8):
//!
//! - `go-micro`: `<prefix><service>/<node id>` holds a whole go-micro `Service` with one node.
//! - `kratos`: `<prefix><service>/<id>` holds a kratos `ServiceInstance` with endpoint URLs.
//! - `grpc-naming`: `<target>/<anything>` holds `{"Op":0,"Addr":"host:port","Metadata":..}`.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use crate::keyed::{host_port, weight, Entries};
use crate::{Filter, Metadata, ServiceName, SourceError, SourceInstance, SourceUrl};

/// go-micro's default key prefix.
const GO_MICRO_PREFIX: &str = "/micro/registry/";
/// go-kratos' default key prefix (its default namespace `/microservices`).
const KRATOS_PREFIX: &str = "/microservices/";

/// How keys and values are laid out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Layout {
    /// go-micro's etcd registry.
    GoMicro,
    /// go-kratos' etcd registry.
    Kratos,
    /// grpc-go's etcd naming resolver: one service per target.
    GrpcNaming {
        /// The targets (service names), without a trailing `/`.
        targets: Vec<String>,
    },
}

impl Layout {
    /// The layout and the key prefixes to read, from the URL's `layout` and `prefix`.
    pub(super) fn from_url(
        url: &SourceUrl,
        filter: &Filter,
    ) -> Result<(Self, Vec<String>), SourceError> {
        if !url.path.is_empty() {
            return Err(SourceError::Config(format!(
                "etcd:// takes no path ('{}'): give the key prefix as ?prefix=",
                url.path
            )));
        }
        let prefix = url.param("prefix");
        match url.param("layout").unwrap_or("go-micro") {
            "go-micro" => Ok((Self::GoMicro, vec![dir(prefix.unwrap_or(GO_MICRO_PREFIX))])),
            "kratos" => Ok((Self::Kratos, vec![dir(prefix.unwrap_or(KRATOS_PREFIX))])),
            "grpc-naming" => {
                let targets = grpc_targets(prefix.unwrap_or(""), filter)?;
                let prefixes = minimal_prefixes(targets.iter().map(|t| dir(t)).collect());
                Ok((Self::GrpcNaming { targets }, prefixes))
            }
            other => Err(SourceError::Config(format!(
                "unknown layout '{other}' for etcd:// (use go-micro, kratos or grpc-naming)"
            ))),
        }
    }

    /// What the key `key` holding `value` contributes: instances of services `filter`
    /// admits. `Err`: the value cannot be read (the key then contributes nothing).
    pub(super) fn decode(
        &self,
        key: &str,
        value: &[u8],
        filter: &Filter,
    ) -> Result<Entries, String> {
        match self {
            Self::GoMicro => go_micro(key, value, filter),
            Self::Kratos => kratos(key, value, filter),
            Self::GrpcNaming { targets } => grpc_naming(key, value, targets),
        }
    }
}

/// `prefix` as a directory: with exactly one trailing `/`.
fn dir(prefix: &str) -> String {
    format!("{}/", prefix.trim_end_matches('/'))
}

/// The grpc-naming targets of `prefix=a,b`, those the filter admits.
fn grpc_targets(spec: &str, filter: &Filter) -> Result<Vec<String>, SourceError> {
    let mut targets: Vec<String> = spec
        .split(',')
        .map(|t| t.trim().trim_end_matches('/'))
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect();
    if targets.is_empty() {
        return Err(SourceError::Config(
            "etcd://...?layout=grpc-naming needs prefix=<target>[,<target>...]".into(),
        ));
    }
    targets.sort();
    targets.dedup();
    targets.retain(|t| filter.admits(t));
    if targets.is_empty() {
        return Err(SourceError::Config(format!(
            "the service filter admits none of the grpc-naming targets '{spec}'"
        )));
    }
    Ok(targets)
}

/// `prefixes` without those inside another one, so no key is watched twice.
fn minimal_prefixes(mut prefixes: Vec<String>) -> Vec<String> {
    prefixes.sort();
    let mut kept: Vec<String> = Vec::new();
    for p in prefixes {
        if !kept.iter().any(|k| p.starts_with(k.as_str())) {
            kept.push(p);
        }
    }
    kept
}

/// Metadata from a JSON object: strings as they are, other values as JSON text.
fn metadata_of(value: Option<&Value>) -> Metadata {
    let Some(Value::Object(map)) = value else {
        return Metadata::new();
    };
    map.iter()
        .filter(|(_, v)| !v.is_null())
        .map(|(k, v)| {
            let text = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            (k.clone(), text)
        })
        .collect()
}

/// An instance with the fields every etcd layout shares.
fn instance(ip: String, port: u16, metadata: Metadata, source_id: String) -> SourceInstance {
    SourceInstance {
        cluster: "DEFAULT".into(),
        ip,
        port,
        weight: weight(metadata.get("weight").map(String::as_str), 1.0),
        healthy: true,
        enabled: true,
        metadata,
        source_id,
    }
}

#[derive(Deserialize)]
struct MicroService {
    name: String,
    #[serde(default)]
    version: Option<String>,
    #[serde(default)]
    nodes: Option<Vec<MicroNode>>,
}

#[derive(Deserialize)]
struct MicroNode {
    #[serde(default)]
    id: String,
    #[serde(default)]
    address: String,
    #[serde(default)]
    metadata: Option<Value>,
}

fn go_micro(key: &str, value: &[u8], filter: &Filter) -> Result<Entries, String> {
    let service: MicroService =
        serde_json::from_slice(value).map_err(|e| format!("not a go-micro service: {e}"))?;
    if !filter.admits(&service.name) {
        return Ok(Vec::new());
    }
    let name = ServiceName::plain(&service.name);
    let nodes = service.nodes.unwrap_or_default();
    let several = nodes.len() > 1;
    let mut entries = Vec::new();
    for node in nodes {
        let Some((ip, port)) = host_port(&node.address) else {
            return Err(format!(
                "node '{}' has no host:port address: '{}'",
                node.id, node.address
            ));
        };
        let mut metadata = metadata_of(node.metadata.as_ref());
        if let Some(v) = service.version.as_ref().filter(|v| !v.is_empty()) {
            metadata.insert("version".into(), v.clone());
        }
        // One node per key is the rule; if there are more, tell them apart by node id.
        let source_id = if several {
            format!("{key}#{}", node.id)
        } else {
            key.to_string()
        };
        entries.push((name.clone(), instance(ip, port, metadata, source_id)));
    }
    Ok(entries)
}

#[derive(Deserialize)]
struct KratosInstance {
    name: String,
    #[serde(default)]
    version: String,
    #[serde(default)]
    metadata: Option<Value>,
    #[serde(default)]
    endpoints: Vec<String>,
}

fn kratos(key: &str, value: &[u8], filter: &Filter) -> Result<Entries, String> {
    let service: KratosInstance =
        serde_json::from_slice(value).map_err(|e| format!("not a kratos service instance: {e}"))?;
    if !filter.admits(&service.name) {
        return Ok(Vec::new());
    }
    let name = ServiceName::plain(&service.name);
    let several = service.endpoints.len() > 1;
    let mut entries = Vec::new();
    for url in &service.endpoints {
        let (scheme, ip, port, endpoint) = endpoint_parts(url)?;
        let mut metadata = metadata_of(service.metadata.as_ref());
        if !service.version.is_empty() {
            metadata.insert("version".into(), service.version.clone());
        }
        metadata.insert("protocol".into(), scheme);
        // One roster instance per endpoint.
        let source_id = if several {
            format!("{key}#{endpoint}")
        } else {
            key.to_string()
        };
        entries.push((name.clone(), instance(ip, port, metadata, source_id)));
    }
    Ok(entries)
}

/// `scheme://host:port[/path][?query]` → scheme, host, port, and the URL without query.
fn endpoint_parts(url: &str) -> Result<(String, String, u16, String), String> {
    let bare = url.split(['?', '#']).next().unwrap_or(url);
    let (scheme, rest) = bare
        .split_once("://")
        .ok_or_else(|| format!("endpoint '{url}' is not scheme://host:port"))?;
    let authority = rest.split('/').next().unwrap_or(rest);
    let (ip, port) =
        host_port(authority).ok_or_else(|| format!("endpoint '{url}' has no host:port"))?;
    Ok((scheme.to_ascii_lowercase(), ip, port, bare.to_string()))
}

#[derive(Deserialize)]
struct NamingUpdate {
    /// 0 = add, 1 = delete (grpc naming `Operation`); stored values are adds.
    #[serde(default, rename = "Op")]
    op: u8,
    #[serde(rename = "Addr")]
    addr: String,
    #[serde(default, rename = "Metadata")]
    metadata: Option<Value>,
}

fn grpc_naming(key: &str, value: &[u8], targets: &[String]) -> Result<Entries, String> {
    let services: Vec<&String> = targets
        .iter()
        .filter(|t| {
            key.strip_prefix(t.as_str())
                .is_some_and(|rest| rest.starts_with('/'))
        })
        .collect();
    if services.is_empty() {
        return Ok(Vec::new());
    }
    let update: NamingUpdate =
        serde_json::from_slice(value).map_err(|e| format!("not a grpc naming update: {e}"))?;
    if update.op != 0 {
        return Ok(Vec::new());
    }
    let (ip, port) = host_port(&update.addr)
        .ok_or_else(|| format!("Addr '{}' is not host:port", update.addr))?;
    let metadata = match update.metadata {
        None | Some(Value::Null) => Metadata::new(),
        Some(object @ Value::Object(_)) => metadata_of(Some(&object)),
        Some(Value::String(s)) => BTreeMap::from([("metadata".to_string(), s)]),
        Some(other) => BTreeMap::from([("metadata".to_string(), other.to_string())]),
    };
    let mut instance = instance(ip, port, metadata, key.to_string());
    // grpc naming has no weights; a `weight` in its metadata is not a convention.
    instance.weight = 1.0;
    Ok(services
        .into_iter()
        .map(|t| (ServiceName::plain(t), instance.clone()))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> SourceUrl {
        s.parse().unwrap()
    }

    #[test]
    fn layouts_and_prefixes_from_the_url() {
        let all = Filter::all();
        let (layout, prefixes) = Layout::from_url(&url("etcd://h:2379"), &all).unwrap();
        assert_eq!(
            (layout, prefixes),
            (Layout::GoMicro, vec!["/micro/registry/".to_string()])
        );
        let (layout, prefixes) =
            Layout::from_url(&url("etcd://h?layout=kratos&prefix=/ms"), &all).unwrap();
        assert_eq!(
            (layout, prefixes),
            (Layout::Kratos, vec!["/ms/".to_string()])
        );
        let (layout, prefixes) = Layout::from_url(
            &url("etcd://h?layout=grpc-naming&prefix=svc/a,svc,other/"),
            &all,
        )
        .unwrap();
        assert_eq!(
            layout,
            Layout::GrpcNaming {
                targets: vec!["other".into(), "svc".into(), "svc/a".into()]
            }
        );
        // `svc/a/` lies inside `svc/`: watched once.
        assert_eq!(prefixes, vec!["other/".to_string(), "svc/".to_string()]);
        let only_b = Filter::parse(Some("b")).unwrap();
        let err =
            Layout::from_url(&url("etcd://h?layout=grpc-naming&prefix=a"), &only_b).unwrap_err();
        assert!(err.to_string().contains("admits none"), "{err}");
        let err = Layout::from_url(&url("etcd://h/micro"), &all).unwrap_err();
        assert!(err.to_string().contains("?prefix="), "{err}");
    }

    #[test]
    fn go_micro_node() {
        let value = br#"{"name":"helloworld","version":"latest","metadata":null,"endpoints":[],
            "nodes":[{"metadata":{"protocol":"mucp","registry":"etcd","weight":"7"},
                      "id":"helloworld-1","address":"10.0.0.5:45678"}]}"#;
        let key = "/micro/registry/helloworld/helloworld-1";
        let entries = Layout::GoMicro.decode(key, value, &Filter::all()).unwrap();
        assert_eq!(entries.len(), 1);
        let (service, i) = &entries[0];
        assert_eq!(service, &ServiceName::plain("helloworld"));
        assert_eq!((i.ip.as_str(), i.port, i.weight), ("10.0.0.5", 45678, 7.0));
        assert_eq!(i.metadata["protocol"], "mucp");
        assert_eq!(i.metadata["version"], "latest");
        assert_eq!(i.source_id, key);
        assert!(i.healthy && i.enabled);
        let other = Filter::parse(Some("other")).unwrap();
        assert!(Layout::GoMicro
            .decode(key, value, &other)
            .unwrap()
            .is_empty());
        assert!(Layout::GoMicro.decode(key, b"{", &Filter::all()).is_err());
        let no_port = br#"{"name":"s","nodes":[{"id":"n","address":"10.0.0.5"}]}"#;
        assert!(Layout::GoMicro
            .decode(key, no_port, &Filter::all())
            .is_err());
    }

    #[test]
    fn kratos_endpoints_become_instances() {
        let value = br#"{"id":"3f2c","name":"order-service","version":"v1.4.2",
            "metadata":{"zone":"az1","weight":"10"},
            "endpoints":["http://10.0.0.31:8000?isSecure=false","grpc://[fd00::31]:9000"]}"#;
        let key = "/microservices/order-service/3f2c";
        let entries = Layout::Kratos.decode(key, value, &Filter::all()).unwrap();
        let got: Vec<_> = entries
            .iter()
            .map(|(_, i)| {
                (
                    i.ip.as_str(),
                    i.port,
                    i.metadata["protocol"].as_str(),
                    i.source_id.as_str(),
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "10.0.0.31",
                    8000,
                    "http",
                    "/microservices/order-service/3f2c#http://10.0.0.31:8000"
                ),
                (
                    "fd00::31",
                    9000,
                    "grpc",
                    "/microservices/order-service/3f2c#grpc://[fd00::31]:9000"
                ),
            ]
        );
        let i = &entries[0].1;
        assert_eq!((i.weight, i.metadata["version"].as_str()), (10.0, "v1.4.2"));
        let single = br#"{"id":"x","name":"s","endpoints":["grpc://h.example:9000"]}"#;
        let entries = Layout::Kratos
            .decode("/microservices/s/x", single, &Filter::all())
            .unwrap();
        assert_eq!(entries[0].1.source_id, "/microservices/s/x");
        assert_eq!(
            (entries[0].1.ip.as_str(), entries[0].1.weight),
            ("h.example", 1.0)
        );
    }

    #[test]
    fn grpc_naming_update() {
        let layout = Layout::GrpcNaming {
            targets: vec!["foo/bar".into(), "foo/bar/baz".into()],
        };
        let value = br#"{"Op":0,"Addr":"10.0.0.5:50051","Metadata":{"zone":"a","n":1}}"#;
        let entries = layout
            .decode("foo/bar/baz/e1", value, &Filter::all())
            .unwrap();
        let services: Vec<_> = entries.iter().map(|(s, _)| s.name.as_str()).collect();
        assert_eq!(services, vec!["foo/bar", "foo/bar/baz"]);
        let i = &entries[0].1;
        assert_eq!((i.ip.as_str(), i.port, i.weight), ("10.0.0.5", 50051, 1.0));
        assert_eq!(
            (i.metadata["zone"].as_str(), i.metadata["n"].as_str()),
            ("a", "1")
        );
        let text = br#"{"Addr":"10.0.0.6:1","Metadata":"primary"}"#;
        let entries = layout.decode("foo/bar/x", text, &Filter::all()).unwrap();
        assert_eq!(entries[0].1.metadata["metadata"], "primary");
        // Not under a target + "/": not an endpoint.
        assert!(layout
            .decode("foo/barx/1", value, &Filter::all())
            .unwrap()
            .is_empty());
        let delete = br#"{"Op":1,"Addr":"10.0.0.5:50051"}"#;
        assert!(layout
            .decode("foo/bar/e", delete, &Filter::all())
            .unwrap()
            .is_empty());
    }
}
