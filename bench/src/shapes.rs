//! Instance shapes: the metadata real clients register with, and how they register
//! (HTTP v1 or a Nacos 2.x gRPC connection). The `rss` group measures memory per shape.

use clap::ValueEnum;
use md5::{Digest, Md5};
use serde_json::{json, Map, Value};

/// The version of Dubbo the `dubbo` shape's metadata names.
const DUBBO_RELEASE: &str = "3.2.10";
/// The first `timestamp` of the `dubbo` shape (2025-12-02 00:00 UTC, in ms); instance
/// `k` registers at `DUBBO_EPOCH_MS + k * 37`.
const DUBBO_EPOCH_MS: u64 = 1_764_633_600_000;

/// What one instance looks like to the registry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, ValueEnum)]
pub enum Shape {
    /// No metadata, over HTTP v1.
    None,
    /// Spring Cloud Alibaba over HTTP v1 (the Nacos 1.x client): three keys, the same
    /// for every instance.
    SpringCloud,
    /// A Dubbo 3 application-level provider over HTTP v1: nine keys, a metadata revision
    /// per service and a registration timestamp per instance. `bench/lua/register.lua`
    /// (shape `dubbo`, the cluster group) sends the same bytes; change both together
    /// (`cluster::tests` compares them).
    Dubbo,
    /// The Spring Cloud metadata over Nacos 2.x gRPC connections, each connection owning
    /// one instance in each of 100 services.
    Grpc,
}

impl Shape {
    /// Every shape, in the order the `rss` group runs them.
    pub const ALL: [Shape; 4] = [Shape::None, Shape::SpringCloud, Shape::Dubbo, Shape::Grpc];

    /// Its name in options, row names and JSON keys.
    pub fn key(self) -> &'static str {
        match self {
            Shape::None => "none",
            Shape::SpringCloud => "spring-cloud",
            Shape::Dubbo => "dubbo",
            Shape::Grpc => "grpc",
        }
    }

    /// Whether instances register over gRPC connections (otherwise HTTP v1).
    pub fn is_grpc(self) -> bool {
        self == Shape::Grpc
    }

    /// The metadata instance `k` of `service` registers with; `None` for no metadata.
    pub fn metadata(self, service: &str, k: usize) -> Option<Map<String, Value>> {
        let value = match self {
            Shape::None => return None,
            Shape::SpringCloud | Shape::Grpc => json!({
                "preserved.register.source": "SPRING_CLOUD",
                "management.port": "8081",
                "management.context-path": "/actuator",
            }),
            Shape::Dubbo => json!({
                "dubbo.metadata-service.url-params": format!(
                    r#"{{"connections":"1","version":"1.0.0","dubbo":"2.0.2","release":"{DUBBO_RELEASE}","side":"provider","port":"20880","protocol":"dubbo"}}"#
                ),
                "dubbo.endpoints": r#"[{"port":20880,"protocol":"dubbo"}]"#,
                "dubbo.metadata.revision": revision(service),
                "dubbo.metadata.storage-type": "local",
                "timestamp": (DUBBO_EPOCH_MS + k as u64 * 37).to_string(),
                "application": service,
                "version": "1.0.0",
                "side": "provider",
                "release": DUBBO_RELEASE,
            }),
        };
        match value {
            Value::Object(map) => Some(map),
            _ => unreachable!("metadata is a JSON object"),
        }
    }

    /// The metadata as the Nacos 1.x client sends it: a JSON object in the `metadata`
    /// parameter; `None` for no metadata.
    pub fn metadata_json(self, service: &str, k: usize) -> Option<String> {
        self.metadata(service, k)
            .map(|m| Value::Object(m).to_string())
    }
}

/// A Dubbo metadata revision for `service`: 32 lower-case hex characters (the md5 of
/// the name; Dubbo takes the md5 of the service's metadata), the same for every
/// instance of the service.
fn revision(service: &str) -> String {
    Md5::digest(service.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_carry_the_metadata_real_clients_send() {
        assert_eq!(Shape::None.metadata("s", 0), None);
        let spring = Shape::SpringCloud.metadata("s", 0).unwrap();
        assert_eq!(spring.len(), 3);
        assert_eq!(spring["preserved.register.source"], "SPRING_CLOUD");
        assert_eq!(Shape::Grpc.metadata("s", 5), Some(spring));
        let a = Shape::Dubbo.metadata("svc-1", 0).unwrap();
        let b = Shape::Dubbo.metadata("svc-1", 1).unwrap();
        assert_eq!(a.len(), 9);
        assert!(a.values().all(Value::is_string));
        let revision = a["dubbo.metadata.revision"].as_str().unwrap();
        assert_eq!(revision.len(), 32);
        assert!(revision.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(a["dubbo.metadata.revision"], b["dubbo.metadata.revision"]);
        assert_ne!(
            a["dubbo.metadata.revision"],
            Shape::Dubbo.metadata("svc-2", 0).unwrap()["dubbo.metadata.revision"]
        );
        assert_eq!(a["timestamp"], "1764633600000");
        assert_eq!(b["timestamp"], "1764633600037");
        assert_eq!(a["application"], "svc-1");
        let params: Value =
            serde_json::from_str(a["dubbo.metadata-service.url-params"].as_str().unwrap()).unwrap();
        assert_eq!(params["port"], "20880");
        let json = Shape::Dubbo.metadata_json("svc-1", 0).unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(&json).unwrap(),
            Value::Object(a)
        );
    }

    #[test]
    fn shape_names_parse_back() {
        for shape in Shape::ALL {
            assert_eq!(Shape::from_str(shape.key(), false), Ok(shape));
        }
    }
}
