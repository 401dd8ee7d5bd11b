//! Source URLs: `nacos://`, `consul://`, `eureka://`, `zookeeper://`, `etcd://`.
//!
//! `scheme://[user:password@]host:port[,host:port...][/path][?key=value&...]`. Each
//! scheme accepts its own query keys; an unknown key is an error (a typo would
//! otherwise be silently ignored). Several hosts are tried in turn.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The kind of registry a URL names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SourceKind {
    /// Nacos (or roster) through the Nacos Open API v1.
    Nacos,
    /// Consul's HTTP API.
    Consul,
    /// Eureka's REST API.
    Eureka,
    /// ZooKeeper (Dubbo 2.x, Dubbo 3, Spring Cloud Zookeeper / Curator layouts).
    Zookeeper,
    /// etcd v3 (go-micro, go-kratos, grpc-go naming layouts).
    Etcd,
}

impl SourceKind {
    /// The URL scheme.
    pub fn scheme(self) -> &'static str {
        match self {
            Self::Nacos => "nacos",
            Self::Consul => "consul",
            Self::Eureka => "eureka",
            Self::Zookeeper => "zookeeper",
            Self::Etcd => "etcd",
        }
    }

    /// Nacos-Sync's name for the source type (`syncSource` metadata).
    pub fn sync_source(self) -> &'static str {
        match self {
            Self::Nacos => "NACOS",
            Self::Consul => "CONSUL",
            Self::Eureka => "EUREKA",
            Self::Zookeeper => "ZK",
            Self::Etcd => "ETCD",
        }
    }

    fn allowed_params(self) -> &'static [&'static str] {
        match self {
            Self::Nacos => &["namespace", "group", "username", "password", "configs"],
            Self::Consul => &["dc", "ns", "token"],
            Self::Eureka => &["username", "password"],
            Self::Zookeeper => &["layout", "root"],
            Self::Etcd => &["layout", "prefix", "username", "password"],
        }
    }

    fn default_port(self) -> u16 {
        match self {
            Self::Nacos => 8848,
            Self::Consul => 8500,
            Self::Eureka => 8761,
            Self::Zookeeper => 2181,
            Self::Etcd => 2379,
        }
    }
}

impl FromStr for SourceKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "nacos" => Self::Nacos,
            "consul" => Self::Consul,
            "eureka" => Self::Eureka,
            "zookeeper" | "zk" => Self::Zookeeper,
            "etcd" => Self::Etcd,
            other => {
                return Err(format!(
                    "unknown source scheme '{other}': use nacos://, consul://, eureka://, zookeeper:// or etcd://"
                ))
            }
        })
    }
}

/// Query keys whose values are secrets.
const SECRET_PARAMS: &[&str] = &["password", "token"];

/// A parsed source URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceUrl {
    /// What kind of registry.
    pub kind: SourceKind,
    /// `host:port` of each server, in order.
    pub hosts: Vec<String>,
    /// The path, `""` when absent (Eureka's base path, e.g. `/eureka`).
    pub path: String,
    /// Query parameters (user info is folded into `username`/`password`).
    pub params: BTreeMap<String, String>,
}

impl SourceUrl {
    /// A query parameter.
    pub fn param(&self, key: &str) -> Option<&str> {
        self.params
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// The URL with secrets replaced by `***`, for display.
    pub fn redacted(&self) -> String {
        self.render(true)
    }

    /// A stable id of the source registry: its kind and servers, not its credentials.
    /// Used as `sourceClusterId` on imported instances.
    pub fn cluster_id(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut hosts = self.hosts.clone();
        hosts.sort();
        let text = format!("{}://{}{}", self.kind.scheme(), hosts.join(","), self.path);
        let digest = Sha256::digest(text.as_bytes());
        digest[..16].iter().map(|b| format!("{b:02x}")).collect()
    }

    fn render(&self, redact: bool) -> String {
        let mut out = format!(
            "{}://{}{}",
            self.kind.scheme(),
            self.hosts.join(","),
            self.path
        );
        if !self.params.is_empty() {
            let mut q = form_urlencoded::Serializer::new(String::new());
            for (k, v) in &self.params {
                let secret = redact && SECRET_PARAMS.contains(&k.as_str());
                q.append_pair(k, if secret { "***" } else { v });
            }
            out.push('?');
            out.push_str(&q.finish());
        }
        out
    }
}

impl fmt::Display for SourceUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render(false))
    }
}

impl FromStr for SourceUrl {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let (scheme, rest) = s
            .split_once("://")
            .ok_or_else(|| format!("'{s}' is not a source URL: expected scheme://host:port, e.g. etcd://127.0.0.1:2379"))?;
        let kind: SourceKind = scheme.to_ascii_lowercase().parse()?;
        let (rest, query) = match rest.split_once('?') {
            Some((r, q)) => (r, Some(q)),
            None => (rest, None),
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
            None => (rest, ""),
        };
        let mut params = BTreeMap::new();
        let hosts_part = match authority.rsplit_once('@') {
            Some((userinfo, hosts)) => {
                let (user, pass) = userinfo.split_once(':').unwrap_or((userinfo, ""));
                let decode = |v: &str| {
                    form_urlencoded::parse(format!("x={v}").as_bytes())
                        .next()
                        .map(|(_, v)| v.into_owned())
                        .unwrap_or_default()
                };
                params.insert("username".to_string(), decode(user));
                if !pass.is_empty() {
                    params.insert("password".to_string(), decode(pass));
                }
                hosts
            }
            None => authority,
        };
        let mut hosts = Vec::new();
        for host in hosts_part
            .split(',')
            .map(str::trim)
            .filter(|h| !h.is_empty())
        {
            hosts.push(normalize_host(host, kind.default_port())?);
        }
        if hosts.is_empty() {
            return Err(format!(
                "'{s}' names no host: expected {}://host:port",
                kind.scheme()
            ));
        }
        for (k, v) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
            if !kind.allowed_params().contains(&k.as_ref()) {
                return Err(format!(
                    "unknown parameter '{k}' for {}:// (allowed: {})",
                    kind.scheme(),
                    kind.allowed_params().join(", ")
                ));
            }
            params.insert(k.into_owned(), v.into_owned());
        }
        if kind == SourceKind::Eureka && path.is_empty() {
            return Err(
                "eureka:// needs the server's base path, e.g. eureka://host:8761/eureka".into(),
            );
        }
        let url = SourceUrl {
            kind,
            hosts,
            path: path.to_string(),
            params,
        };
        validate(&url)?;
        Ok(url)
    }
}

fn normalize_host(host: &str, default_port: u16) -> Result<String, String> {
    if host.starts_with('[') {
        // [v6]:port or [v6]
        return match host.rsplit_once("]:") {
            Some((_, port)) => {
                port.parse::<u16>()
                    .map_err(|_| format!("bad port in host '{host}'"))?;
                Ok(host.to_string())
            }
            None if host.ends_with(']') => Ok(format!("{host}:{default_port}")),
            None => Err(format!("bad host '{host}'")),
        };
    }
    match host.rsplit_once(':') {
        Some((name, port)) => {
            if name.is_empty() {
                return Err(format!("bad host '{host}': no host name"));
            }
            port.parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| format!("bad port in host '{host}': expected 1-65535"))?;
            Ok(host.to_string())
        }
        None => Ok(format!("{host}:{default_port}")),
    }
}

fn validate(url: &SourceUrl) -> Result<(), String> {
    match url.kind {
        SourceKind::Zookeeper => {
            let layout = url.param("layout").unwrap_or("dubbo");
            if !["dubbo", "dubbo3", "spring-cloud"].contains(&layout) {
                return Err(format!(
                    "unknown layout '{layout}' for zookeeper:// (use dubbo, dubbo3 or spring-cloud)"
                ));
            }
            if let Some(root) = url.param("root") {
                if !root.starts_with('/') {
                    return Err(format!("root '{root}' must start with '/'"));
                }
            }
        }
        SourceKind::Etcd => {
            let layout = url.param("layout").unwrap_or("go-micro");
            if !["go-micro", "kratos", "grpc-naming"].contains(&layout) {
                return Err(format!(
                    "unknown layout '{layout}' for etcd:// (use go-micro, kratos or grpc-naming)"
                ));
            }
            if layout == "grpc-naming" && url.param("prefix").is_none() {
                return Err("etcd://...?layout=grpc-naming needs prefix=<target>[,<target>...]: grpc-go naming has no index of services".into());
            }
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_each_scheme() {
        let u: SourceUrl = "nacos://nacos:secret@10.0.0.1:8848?namespace=prod"
            .parse()
            .unwrap();
        assert_eq!(u.kind, SourceKind::Nacos);
        assert_eq!(u.hosts, vec!["10.0.0.1:8848"]);
        assert_eq!(u.param("username"), Some("nacos"));
        assert_eq!(u.param("password"), Some("secret"));
        assert_eq!(u.param("namespace"), Some("prod"));
        assert_eq!(
            u.redacted(),
            "nacos://10.0.0.1:8848?namespace=prod&password=***&username=nacos"
        );

        let u: SourceUrl = "eureka://127.0.0.1:8761/eureka/".parse().unwrap();
        assert_eq!(u.path, "/eureka");

        let u: SourceUrl = "zookeeper://a:2181,b?layout=spring-cloud".parse().unwrap();
        assert_eq!(u.hosts, vec!["a:2181", "b:2181"]);

        let u: SourceUrl = "etcd://[::1]:2379?layout=kratos".parse().unwrap();
        assert_eq!(u.hosts, vec!["[::1]:2379"]);
    }

    #[test]
    fn rejects_what_cannot_work() {
        for (url, needle) in [
            ("10.0.0.1:8848", "not a source URL"),
            ("redis://x:1", "unknown source scheme"),
            (
                "consul://x:1?datacenter=dc1",
                "unknown parameter 'datacenter'",
            ),
            ("etcd://x:1?layout=grpc-naming", "needs prefix"),
            ("zookeeper://x?layout=dubbo4", "unknown layout"),
            ("eureka://x:8761", "base path"),
            ("consul://x:99999", "bad port"),
            ("consul://", "names no host"),
        ] {
            let err = url.parse::<SourceUrl>().unwrap_err();
            assert!(err.contains(needle), "{url}: {err}");
        }
    }

    #[test]
    fn cluster_id_ignores_credentials_and_host_order() {
        let a: SourceUrl = "consul://a:8500,b:8500?token=x".parse().unwrap();
        let b: SourceUrl = "consul://b:8500,a:8500".parse().unwrap();
        assert_eq!(a.cluster_id(), b.cluster_id());
        assert_eq!(a.cluster_id().len(), 32);
    }
}
