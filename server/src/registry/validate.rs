//! The naming rules, in one place for every protocol face: what a namespace id, group,
//! service name, cluster, address, port, weight and metadata may be, as Nacos defines
//! them (and where Nacos is lax, what roster refuses with a reason). Each check names
//! the field and the problem in an [`Invalid`], which the faces answer in their own
//! shape (`crate::error::Error`).

use std::collections::BTreeMap;
use std::net::IpAddr;

use super::instance::{Metadata, BEAT_INTERVAL_KEY, BEAT_TIMEOUT_KEY, DELETE_TIMEOUT_KEY};
use super::Registration;

/// The default group.
pub const DEFAULT_GROUP: &str = "DEFAULT_GROUP";
/// The default cluster.
pub const DEFAULT_CLUSTER: &str = "DEFAULT";

/// Which rule a value broke, as far as a client's error code tells (Nacos v2 gives
/// weights and metadata codes of their own).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Problem {
    /// The field is required and absent.
    Missing,
    /// A weight outside 0..=10000.
    Weight,
    /// Malformed or oversized metadata.
    Metadata,
    /// Any other rule.
    Other,
}

/// A value that breaks a naming rule: the field, the rule, and what to tell the client
/// (in Nacos' words where clients depend on them).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Invalid {
    /// The parameter, as the client named it.
    pub field: String,
    /// Which rule.
    pub problem: Problem,
    /// The message.
    pub message: String,
}

impl Invalid {
    /// `field` breaks `problem`'s rule.
    pub fn new(field: &str, problem: Problem, message: impl Into<String>) -> Self {
        Self {
            field: field.to_string(),
            problem,
            message: message.into(),
        }
    }

    /// `field` is required, in Nacos' words.
    pub fn missing(field: &str) -> Self {
        Self::new(
            field,
            Problem::Missing,
            format!("Param '{field}' is required."),
        )
    }

    /// `field`'s value is illegal, in Nacos' words.
    pub fn illegal(field: &str, problem: impl std::fmt::Display) -> Self {
        Self::new(
            field,
            Problem::Other,
            format!("Param '{field}' is illegal, {problem}"),
        )
    }

    /// `field`'s metadata is illegal, in Nacos' words.
    pub fn metadata(field: &str, problem: impl std::fmt::Display) -> Self {
        Self::new(
            field,
            Problem::Metadata,
            format!("Param '{field}' is illegal, {problem}"),
        )
    }
}

/// Parses a boolean as Nacos clients send it.
pub fn parse_bool(key: &str, value: &str) -> Result<bool, Invalid> {
    const TRUE: [&str; 6] = ["true", "t", "yes", "y", "on", "1"];
    const FALSE: [&str; 6] = ["false", "f", "no", "n", "off", "0"];
    let v = value.trim();
    if TRUE.iter().any(|t| t.eq_ignore_ascii_case(v)) {
        return Ok(true);
    }
    if FALSE.iter().any(|f| f.eq_ignore_ascii_case(v)) {
        return Ok(false);
    }
    Err(Invalid::illegal(
        key,
        format!("'{value}' is not a boolean (true or false)."),
    ))
}

/// Parses a port, 0 to 65535.
pub fn parse_port(key: &str, value: &str) -> Result<u16, Invalid> {
    let port = value.trim().parse::<i64>().map_err(|_| port_range(key))?;
    check_port(key, port)
}

/// Checks a port given as a number (JSON bodies): 0 to 65535.
pub fn check_port(key: &str, port: i64) -> Result<u16, Invalid> {
    u16::try_from(port).map_err(|_| port_range(key))
}

fn port_range(key: &str) -> Invalid {
    Invalid::illegal(key, "the value should be between 0 and 65535.")
}

/// Parses a weight, 0 to 10000.
pub fn parse_weight(key: &str, value: &str) -> Result<f64, Invalid> {
    let w: f64 = value
        .trim()
        .parse()
        .map_err(|_| Invalid::illegal(key, format!("'{value}' is not a number.")))?;
    check_weight(w)
}

/// Checks a weight given as a number (JSON bodies): 0 to 10000.
pub fn check_weight(weight: f64) -> Result<f64, Invalid> {
    if !weight.is_finite() || !(0.0..=10000.0).contains(&weight) {
        return Err(Invalid::new(
            "weight",
            Problem::Weight,
            "instance format invalid: The weights range from 0.0 to 10000.0",
        ));
    }
    Ok(weight)
}

/// Checks an IP address or host name.
pub fn check_ip(key: &str, ip: &str) -> Result<(), Invalid> {
    if ip.parse::<IpAddr>().is_ok() {
        return Ok(());
    }
    let host_ok = ip.len() <= 253
        && ip.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        });
    if host_ok {
        Ok(())
    } else {
        Err(Invalid::illegal(
            key,
            format!("'{ip}' is not an IP address or host name."),
        ))
    }
}

/// Checks a namespace id: 1 to 128 of `[A-Za-z0-9_-]`.
pub fn check_namespace_id(key: &str, id: &str) -> Result<(), Invalid> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(Invalid::illegal(
            key,
            "it should be 1 to 128 characters of letters, digits, '_' and '-'.",
        ))
    }
}

/// Checks a group: up to 128 of `[A-Za-z0-9-_:.]`.
pub fn check_group(group: &str) -> Result<(), Invalid> {
    let ok = group.len() <= 128
        && group
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b':' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(Invalid::illegal(
            "groupName",
            "it should be up to 128 characters of letters, digits and '-_:.'.",
        ))
    }
}

/// Checks a service name (without group): 1 to 512 characters, no whitespace or control
/// characters, no leading '@' and no '@@'.
pub fn check_service_name(name: &str) -> Result<(), Invalid> {
    if name.is_empty() {
        return Err(Invalid::missing("serviceName"));
    }
    if name.chars().count() > 512 {
        return Err(Invalid::illegal(
            "serviceName",
            "the param length should not exceed 512.",
        ));
    }
    if name.starts_with('@')
        || name.contains("@@")
        || name.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(Invalid::illegal(
            "serviceName",
            "illegal characters should not appear in the param.",
        ));
    }
    Ok(())
}

/// Checks a cluster name at registration: `[0-9a-zA-Z-]`, up to 64 (Nacos' rule).
pub fn check_cluster_name(cluster: &str) -> Result<(), Invalid> {
    let ok = !cluster.is_empty()
        && cluster.len() <= 64
        && cluster
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(Invalid::new(
            "clusterName",
            Problem::Other,
            format!(
                "Instance 'clusterName' should be characters with only 0-9a-zA-Z-. (current: {cluster})"
            ),
        ))
    }
}

/// Splits and checks a comma-separated cluster filter (`[0-9a-zA-Z-_]` each).
pub fn parse_cluster_list(raw: &str) -> Result<Vec<&str>, Invalid> {
    let clusters: Vec<&str> = raw
        .split(',')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    for c in &clusters {
        let ok = c.len() <= 64
            && c.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !ok {
            return Err(Invalid::illegal(
                "clusters",
                format!("'{c}' should be up to 64 characters of letters, digits, '-' and '_'."),
            ));
        }
    }
    Ok(clusters)
}

/// Parses metadata: a JSON object (values become strings) or `k=v,k2=v2`.
pub fn parse_metadata(key: &str, raw: &str, max_bytes: usize) -> Result<Metadata, Invalid> {
    let metadata = if raw.trim_start().starts_with('{') {
        let object: serde_json::Map<String, serde_json::Value> = serde_json::from_str(raw)
            .map_err(|e| Invalid::metadata(key, format!("it is not a valid JSON object: {e}.")))?;
        object
            .into_iter()
            .map(|(k, v)| {
                let v = match v {
                    serde_json::Value::String(s) => s,
                    serde_json::Value::Null => String::new(),
                    other => other.to_string(),
                };
                (k, v)
            })
            .collect()
    } else {
        let mut m = BTreeMap::new();
        for segment in raw.split(',').filter(|s| !s.trim().is_empty()) {
            let parts: Vec<&str> = segment.split('=').collect();
            if parts.len() != 2 {
                return Err(Invalid::new(
                    key,
                    Problem::Metadata,
                    format!("metadata format incorrect:{raw}"),
                ));
            }
            m.insert(parts[0].trim().to_string(), parts[1].trim().to_string());
        }
        m
    };
    check_metadata(key, &metadata, max_bytes)?;
    Ok(metadata)
}

/// Checks parsed metadata: its size (keys plus values) and the heartbeat rule.
pub fn check_metadata(key: &str, metadata: &Metadata, max_bytes: usize) -> Result<(), Invalid> {
    let size: usize = metadata.iter().map(|(k, v)| k.len() + v.len()).sum();
    if size > max_bytes {
        return Err(Invalid::metadata(
            key,
            format!("the param length should not exceed {max_bytes}."),
        ));
    }
    check_heartbeat_metadata(metadata)
}

/// Nacos' rule: the beat interval must be below the beat and delete timeouts.
fn check_heartbeat_metadata(metadata: &Metadata) -> Result<(), Invalid> {
    let read = |k: &str| metadata.get(k).and_then(|v| v.trim().parse::<u64>().ok());
    if let Some(interval) = read(BEAT_INTERVAL_KEY) {
        let timeout = read(BEAT_TIMEOUT_KEY).unwrap_or(15_000);
        let delete = read(DELETE_TIMEOUT_KEY).unwrap_or(30_000);
        if timeout < interval || delete < interval {
            return Err(Invalid::new(
                "metadata",
                Problem::Other,
                "Instance 'heart beat interval' must less than 'heart beat timeout' and 'ip delete timeout'.",
            ));
        }
    }
    Ok(())
}

/// Checks the fields of a registration a face has parsed, each named `{prefix}{field}`
/// as the client sent it (`instance.` for gRPC): the address, the cluster, the weight
/// and the metadata. The one rule set every face registers by.
pub fn registration(
    reg: &Registration,
    prefix: &str,
    max_metadata_bytes: usize,
) -> Result<(), Invalid> {
    check_ip(&format!("{prefix}ip"), &reg.ip)?;
    check_cluster_name(&reg.cluster)?;
    check_weight(reg.weight)?;
    check_metadata(
        &format!("{prefix}metadata"),
        &reg.metadata,
        max_metadata_bytes,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn booleans_ports_weights() {
        assert!(parse_bool("x", "True").unwrap());
        assert!(!parse_bool("x", "off").unwrap());
        assert!(parse_bool("x", "maybe")
            .unwrap_err()
            .message
            .contains("'x'"));
        assert_eq!(parse_port("port", "8080").unwrap(), 8080);
        assert_eq!(
            parse_port("port", "99999").unwrap_err().message,
            "Param 'port' is illegal, the value should be between 0 and 65535."
        );
        assert!(parse_port("port", "abc").is_err());
        assert_eq!(
            parse_weight("weight", "20000").unwrap_err().message,
            "instance format invalid: The weights range from 0.0 to 10000.0"
        );
        assert!(parse_weight("weight", "NaN").is_err());
        assert_eq!(parse_weight("weight", "2.5").unwrap(), 2.5);
    }

    #[test]
    fn ips_and_clusters() {
        check_ip("ip", "10.0.0.1").unwrap();
        check_ip("ip", "::1").unwrap();
        check_ip("ip", "host-1.example").unwrap();
        assert!(check_ip("ip", "10.0.0.1 ").is_err());
        assert!(check_ip("ip", "a..b").is_err());
        assert!(check_ip("ip", "bad_host").is_err());
        check_cluster_name("None").unwrap();
        assert_eq!(
            check_cluster_name("a_b").unwrap_err().message,
            "Instance 'clusterName' should be characters with only 0-9a-zA-Z-. (current: a_b)"
        );
        assert_eq!(
            parse_cluster_list("DEFAULT, b_1").unwrap(),
            ["DEFAULT", "b_1"]
        );
        assert!(parse_cluster_list("a b").is_err());
    }

    #[test]
    fn metadata_forms_and_limits() {
        let m = parse_metadata("metadata", r#"{"a":"x","n":1,"b":true}"#, 100).unwrap();
        assert_eq!(m["n"], "1");
        assert_eq!(m["b"], "true");
        let m = parse_metadata("metadata", "k1=v1,k2=v2", 100).unwrap();
        assert_eq!(m["k2"], "v2");
        assert_eq!(
            parse_metadata("metadata", "a=b=c", 100)
                .unwrap_err()
                .message,
            "metadata format incorrect:a=b=c"
        );
        assert!(parse_metadata("metadata", "{bad json", 100)
            .unwrap_err()
            .message
            .contains("JSON"));
        assert!(parse_metadata("metadata", "k=0123456789", 5)
            .unwrap_err()
            .message
            .contains("exceed 5"));
        let bad_beat = r#"{"preserved.heart.beat.interval":"20000"}"#;
        assert!(parse_metadata("metadata", bad_beat, 1000)
            .unwrap_err()
            .message
            .contains("heart beat interval"));
    }
}
