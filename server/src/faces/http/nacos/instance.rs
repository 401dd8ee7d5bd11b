//! `/nacos/v1/ns/instance*` and `/nacos/v1/ns/health*`: register, deregister, update,
//! detail, list (and UDP subscribe), beat, and manual health of persistent instances.
//!
//! Ephemeral writes go straight to the registry; persistent ones are proposed to Raft and
//! answered once committed.

use std::borrow::Cow;
use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroU16;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{ConnectInfo, FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::HeaderValue;
use axum::response::Response;
use http_body::{Frame, SizeHint};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::{json, json_of};
use crate::error::Error;
use crate::faces::http::params::Params;
use crate::services::auth::Identity;
use crate::services::naming::writes::{BeatOutcome, Stated};
use crate::services::push::udp::{push_capable, push_target};
use crate::state::{AppState, Limits};
use roster_registry::clock::now_ms;
use roster_registry::instance::{Addr, Metadata};
use roster_registry::select::Query;
use roster_registry::service::{ListParts, ServiceKey};
use roster_registry::validate::{
    self, check_cluster_name, check_ip, check_metadata, check_port, check_weight,
    parse_cluster_list, parse_port, parse_weight, read_metadata, Origin, DEFAULT_CLUSTER,
};
use roster_registry::wire::{plain_list_parts, service_info, ListRequest};
use roster_registry::{InstancePatch, Registration};

/// Parses the instance fields of a register call and checks them by the registration
/// rules (`roster_registry::validate::registration`).
fn registration(params: &Params, limits: &Limits) -> Result<Registration, Error> {
    let ip = params.required("ip")?;
    let port = params.port("port")?;
    let cluster = params
        .optional_any(&["clusterName", "cluster"])
        .unwrap_or(DEFAULT_CLUSTER);
    let weight = match params.optional("weight") {
        Some(w) => parse_weight("weight", w)?,
        None => 1.0,
    };
    let mut reg = Registration {
        ip: ip.to_string(),
        port,
        cluster: cluster.to_string(),
        weight,
        healthy: params.boolean("healthy")?.unwrap_or(true),
        enabled: params.boolean_any(&["enabled", "enable"])?.unwrap_or(true),
        ephemeral: params.boolean("ephemeral")?.unwrap_or(true),
        metadata: match params.optional("metadata") {
            Some(raw) => read_metadata("metadata", raw)?,
            None => Metadata::new(),
        },
        instance_id: None,
        client: None,
        owner: None,
    };
    validate::registration(&mut reg, Origin::Http, limits.max_metadata_bytes)?;
    Ok(reg)
}

/// `ip` (in the form instances are kept in, see [`check_ip`]) and `port`, both
/// required and checked.
fn address(params: &Params) -> Result<(Cow<'_, str>, u16), Error> {
    let ip = check_ip("ip", params.required("ip")?)?;
    Ok((ip, params.port("port")?))
}

/// `POST /nacos/v1/ns/instance`: register an instance.
#[tracing::instrument(skip_all)]
pub async fn register(
    State(state): State<AppState>,
    params: Params,
) -> Result<&'static str, Error> {
    let key = params.service_key()?;
    let registration = registration(&params, &state.limits)?;
    state.writes().register(key, registration).await?;
    state.metrics.registrations.inc();
    Ok("ok")
}

/// `DELETE /nacos/v1/ns/instance`: deregister. `ephemeral=false` removes a persistent
/// instance through Raft whatever this node holds yet; otherwise whatever instance holds
/// `ip:port` goes, persistent or ephemeral (Nacos silently keeps a persistent instance
/// when the flag is left at its default), decided on a view at least as new as the
/// leader's commit when this node does not hold the instance. Missing is not an error.
#[tracing::instrument(skip_all)]
pub async fn deregister(
    State(state): State<AppState>,
    params: Params,
) -> Result<&'static str, Error> {
    let key = params.service_key()?;
    let (ip, port) = address(&params)?;
    let stated = Stated::from_ephemeral(params.boolean("ephemeral")?);
    state.writes().deregister(key, &ip, port, stated).await?;
    state.metrics.deregistrations.inc();
    Ok("ok")
}

/// `PUT|PATCH /nacos/v1/ns/instance`: change weight, enabled flag or metadata. Only the
/// parameters given change (Nacos' PUT re-enables an instance when `enabled` is
/// absent; roster leaves it as it is). The values are pinned: a re-registration by the
/// client does not undo them.
#[tracing::instrument(skip_all)]
pub async fn update(State(state): State<AppState>, params: Params) -> Result<&'static str, Error> {
    let key = params.service_key()?;
    let (ip, port) = address(&params)?;
    let patch = InstancePatch {
        weight: params
            .optional("weight")
            .map(|w| parse_weight("weight", w))
            .transpose()?,
        enabled: params.boolean_any(&["enabled", "enable"])?,
        metadata: params.metadata("metadata", state.limits.max_metadata_bytes)?,
    };
    state.writes().update(key, &ip, port, patch).await?;
    Ok("ok")
}

/// `GET /nacos/v1/ns/instance`: one instance. With `clusterName` given, the instance
/// must be in that cluster.
pub async fn detail(State(state): State<AppState>, params: Params) -> Result<Response, Error> {
    let key = params.service_key()?;
    let (ip, port) = address(&params)?;
    if params.consistent()? {
        state.store.read_barrier().await?;
    }
    let cluster = params.optional_any(&["clusterName", "cluster"]);
    let grouped = key.grouped();
    let view = state.registry.service_by_key(&key).map(|s| s.view());
    let no_ips = || {
        Error::instance_not_found(format!(
            "no ips found for cluster {} in service {grouped}",
            cluster.unwrap_or(DEFAULT_CLUSTER)
        ))
    };
    let view = view
        .filter(|v| !v.instances.is_empty())
        .ok_or_else(no_ips)?;
    let instance = view
        .instances
        .get(&Addr::new(&ip, port))
        .filter(|i| cluster.is_none_or(|c| *i.cluster == *c))
        .ok_or_else(|| Error::instance_not_found("no matched ip found!"))?;
    Ok(json_of(&json!({
        "service": grouped,
        "ip": instance.ip(),
        "port": instance.port,
        "clusterName": &*instance.cluster,
        "weight": instance.weight,
        "healthy": instance.healthy,
        "enabled": instance.enabled,
        "ephemeral": instance.ephemeral,
        "instanceId": instance.id(&grouped),
        "metadata": &instance.metadata,
    })))
}

/// Who sent a list query, as far as UDP push needs: the client's agent string
/// (`User-Agent`, else `Client-Version`), the IP its connection comes from, and who it
/// is (whether an admin; the user a UDP subscription is made for, which lasts while
/// they may read the service). An extractor of its own so that a list request does not
/// copy every header to read one.
pub struct Requester {
    agent: Option<HeaderValue>,
    /// The connection's peer IP (`None` only where no connection is known).
    peer: Option<IpAddr>,
    identity: Option<Identity>,
}

impl Requester {
    /// The requester of a request with these headers, from `peer`, authenticated as
    /// `identity` (taken, not copied: the hot route owns it).
    pub fn new(
        headers: &axum::http::HeaderMap,
        peer: Option<SocketAddr>,
        identity: Option<Identity>,
    ) -> Requester {
        Requester {
            agent: headers
                .get("user-agent")
                .or_else(|| headers.get("client-version"))
                .cloned(),
            peer: peer.map(|p| p.ip().to_canonical()),
            identity,
        }
    }

    /// Whether it is an admin.
    fn admin(&self) -> bool {
        self.identity.as_ref().is_some_and(|i| i.admin)
    }

    /// The agent, or `""`.
    fn agent(&self) -> &str {
        self.agent
            .as_ref()
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Requester {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let peer = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0);
        Ok(Requester::new(
            &parts.headers,
            peer,
            parts.extensions.get::<Identity>().cloned(),
        ))
    }
}

/// An answered instance query.
pub struct Listed<'p> {
    /// The service asked for.
    pub key: Arc<ServiceKey>,
    /// The clusters parameter as given (echoed, and the key of a UDP subscription).
    pub clusters_raw: &'p str,
    /// The `ServiceInfo` JSON.
    pub body: ListBody,
}

/// A `ServiceInfo` body: serialized for this request, or a service version's cached
/// bytes before and after this request's `lastRefTime` with the time between them.
pub enum ListBody {
    /// Serialized for this request.
    Whole(Vec<u8>),
    /// Head, time, tail; sent as three frames the HTTP layer writes in one `writev`.
    Spliced([Bytes; 3]),
}

impl From<ListBody> for Body {
    fn from(body: ListBody) -> Body {
        match body {
            ListBody::Whole(bytes) => Body::from(bytes),
            ListBody::Spliced(parts) => Body::new(Frames { parts, next: 0 }),
        }
    }
}

/// A body of a few ready byte strings.
struct Frames {
    parts: [Bytes; 3],
    next: usize,
}

impl HttpBody for Frames {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        while let Some(part) = this.parts.get_mut(this.next) {
            this.next += 1;
            if !part.is_empty() {
                return Poll::Ready(Some(Ok(Frame::data(std::mem::take(part)))));
            }
        }
        Poll::Ready(None)
    }

    fn is_end_stream(&self) -> bool {
        self.parts[self.next..].iter().all(Bytes::is_empty)
    }

    fn size_hint(&self) -> SizeHint {
        let left = self.parts[self.next..]
            .iter()
            .map(Bytes::len)
            .sum::<usize>();
        SizeHint::with_exact(left as u64)
    }
}

/// `now_ms` in decimal, as answers splice it in. Kept per thread for the millisecond it
/// names: the hundred-odd lists a node answers per millisecond share one buffer rather
/// than allocating one each.
fn decimal_ms(now_ms: u64) -> Bytes {
    thread_local! {
        static LAST: std::cell::RefCell<(u64, Bytes)> = const {
            std::cell::RefCell::new((u64::MAX, Bytes::new()))
        };
    }
    LAST.with_borrow_mut(|(ms, text)| {
        if *ms != now_ms {
            *ms = now_ms;
            *text = Bytes::copy_from_slice(itoa::Buffer::new().format(now_ms).as_bytes());
        }
        text.clone()
    })
}

/// Answers an instance query — Nacos' `/instance/list` (v1 and v2) and roster's
/// `/api/v1/instances`: the service's `ServiceInfo` after the clusters named by the
/// `clusters_param` parameter, `healthyOnly`, `selector` and `lanes`. With
/// `consistent=true`, persistent data is read as of now on the leader (ephemeral data
/// is as replicated).
pub async fn query<'p>(
    state: &AppState,
    params: &'p Params,
    clusters_param: &str,
) -> Result<Listed<'p>, Error> {
    let name = params.service_name()?;
    let clusters_raw = params.get(clusters_param).unwrap_or("");
    let clusters = parse_cluster_list(clusters_raw)?;
    let healthy_only = params.boolean("healthyOnly")?.unwrap_or(false);
    let selector = params.selector()?;
    let lanes = params.lanes();
    if params.consistent()? {
        state.store.read_barrier().await?;
    }
    let service = state.registry.service(name.namespace, &name.grouped);
    // A known service's own key: no allocation for the key per query.
    let key = service
        .as_ref()
        .map_or_else(|| Arc::new(name.key()), |s| s.key.clone());
    let view = service.map(|s| s.view());
    let grouped = &*name.grouped;
    let request = ListRequest {
        grouped,
        group: Some(name.group),
        clusters_raw,
        query: Query {
            clusters: &clusters,
            healthy_only,
            selector: selector.as_ref(),
            lanes: lanes.as_deref(),
        },
        now_ms: now_ms(),
    };
    let plain = clusters_raw.is_empty() && !healthy_only && selector.is_none() && lanes.is_none();
    let body = match view.as_deref() {
        // The plain query of a known service: serialized once per service version.
        Some(v) if plain => {
            let ListParts { head, tail, .. } = plain_list_parts(v, grouped, name.group);
            // The cached bytes go out as they are, around this request's time: no copy.
            ListBody::Spliced([head, decimal_ms(request.now_ms), tail])
        }
        view => ListBody::Whole(service_info(view, &request)),
    };
    Ok(Listed {
        key,
        clusters_raw,
        body,
    })
}

/// `GET /nacos/v1/ns/instance/list`: the instances of a service. A push-capable client
/// that passes `udpPort` (1 to 65535; 0 means none) is subscribed to UDP pushes, sent to
/// the IP its connection comes from, or to its `clientIP` from an admin (see
/// [`push_target`]).
pub async fn list(
    State(state): State<AppState>,
    requester: Requester,
    params: Params,
) -> Result<Response, Error> {
    let listed = query(&state, &params, "clusters").await?;
    let udp_port = match params.optional("udpPort") {
        Some(p) => parse_port("udpPort", p)?,
        None => 0,
    };
    if let Some(port) = NonZeroU16::new(udp_port) {
        let client_ip = params
            .optional("clientIP")
            .map(|ip| {
                ip.parse::<IpAddr>().map_err(|_| {
                    Error::illegal("clientIP", format!("'{ip}' is not an IP address."))
                })
            })
            .transpose()?;
        let agent = requester.agent();
        let target = push_target(requester.peer, client_ip, requester.admin());
        if let Some(ip) = target.filter(|_| push_capable(agent)) {
            let app = params.optional("app").unwrap_or("unknown");
            let reader = requester
                .identity
                .as_ref()
                .and_then(|i| state.auth.reader(i));
            state.push.subscribe(
                &listed.key,
                SocketAddr::new(ip, port.get()),
                listed.clusters_raw,
                agent,
                app,
                reader,
            );
        }
    }
    Ok(json(listed.body))
}

/// The `beat` JSON clients send (Nacos' `RsInfo`); unknown keys are ignored.
#[derive(Deserialize)]
struct BeatInfo<'a> {
    #[serde(borrow)]
    ip: Option<Text<'a>>,
    port: Option<i64>,
    #[serde(borrow)]
    cluster: Option<Text<'a>>,
    weight: Option<f64>,
    ephemeral: Option<bool>,
    #[serde(default)]
    metadata: Metadata,
}

/// A JSON string borrowed from the input unless it has escapes (serde borrows a `Cow`
/// only as a field of its own, not inside an `Option`).
#[derive(Deserialize)]
struct Text<'a>(#[serde(borrow)] Cow<'a, str>);

impl std::ops::Deref for Text<'_> {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

/// A beat's answer.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BeatReply {
    client_beat_interval: u64,
    code: u32,
    light_beat_enabled: bool,
}

/// What nearly every beat answers (a known instance, the default interval).
const BEAT_OK_DEFAULT: &[u8] =
    br#"{"clientBeatInterval":5000,"code":10200,"lightBeatEnabled":true}"#;

fn beat_reply(code: u32, interval_ms: u64) -> Response {
    if (code, interval_ms) == (10200, 5000) {
        return json(Bytes::from_static(BEAT_OK_DEFAULT));
    }
    json_of(&BeatReply {
        client_beat_interval: interval_ms,
        code,
        light_beat_enabled: true,
    })
}

/// A full beat's JSON, read and checked: the instance it names and, for an ephemeral
/// instance, what a re-registration from it would carry.
struct FullBeat<'a> {
    /// The address, as instances are kept (see [`check_ip`]).
    ip: Cow<'a, str>,
    port: u16,
    cluster: Cow<'a, str>,
    /// Weight and metadata, checked as a registration's (ephemeral beats only).
    stand_in: Option<(f64, Metadata)>,
}

/// Reads the `beat` parameter: the JSON, the address, and for an ephemeral beat
/// (which may stand in for a registration) the cluster, weight and metadata by the
/// registration rules. Each refusal names its field (`beat.ip`, `beat.metadata`, ...).
fn parse_beat(raw: &str, max_metadata_bytes: usize) -> Result<FullBeat<'_>, Error> {
    let beat: BeatInfo = serde_json::from_str(raw)
        .map_err(|e| Error::illegal("beat", format!("it is not valid beat JSON: {e}.")))?;
    let ip = match beat.ip.ok_or_else(|| Error::missing("beat.ip"))?.0 {
        Cow::Borrowed(ip) => check_ip("beat.ip", ip)?,
        Cow::Owned(ip) => Cow::Owned(check_ip("beat.ip", &ip)?.into_owned()),
    };
    let port = beat.port.ok_or_else(|| Error::missing("beat.port"))?;
    let port = check_port("beat.port", port)?;
    let cluster = beat
        .cluster
        .map(|c| c.0)
        .filter(|c| !c.is_empty())
        .unwrap_or(Cow::Borrowed(DEFAULT_CLUSTER));
    let stand_in = if beat.ephemeral.unwrap_or(true) {
        check_cluster_name(&cluster)?;
        let weight = check_weight(beat.weight.unwrap_or(1.0))?;
        check_metadata("beat.metadata", &beat.metadata, max_metadata_bytes)?;
        Some((weight, beat.metadata))
    } else {
        None
    };
    Ok(FullBeat {
        ip,
        port,
        cluster,
        stand_in,
    })
}

/// `PUT /nacos/v1/ns/instance/beat`: a heartbeat. A light beat (no `beat` JSON) for an
/// unknown instance answers code 20404 so the client re-registers; a full beat
/// re-registers the instance itself (Python and npm clients never re-register any other
/// way). A missing `weight` in the beat means 1.0 (Nacos uses 0.0, which would silently
/// drain a re-registered instance).
pub async fn beat(State(state): State<AppState>, params: Params) -> Result<Response, Error> {
    let name = params.service_name()?;
    let full = params
        .optional("beat")
        .map(|raw| parse_beat(raw, state.limits.max_metadata_bytes))
        .transpose()?;
    let (ip, port, cluster, stand_in) = match full {
        Some(b) => (b.ip, b.port, b.cluster, b.stand_in),
        None => {
            let (ip, port) = address(&params)?;
            let cluster = params
                .optional_any(&["clusterName", "cluster"])
                .unwrap_or(DEFAULT_CLUSTER);
            (ip, port, Cow::Borrowed(cluster), None)
        }
    };
    state.metrics.beats.inc();
    // Nearly every beat is for an instance this node owns and holds: answered without
    // building (and allocating) the op a forward would need.
    let writes = state.writes();
    if let Some(hb) = writes.beat_here(name.namespace, &name.grouped, &ip, port) {
        return Ok(beat_reply(10200, hb.interval_ms));
    }
    let re_register = stand_in.map(|(weight, metadata)| Registration {
        ip: ip.to_string(),
        port,
        cluster: cluster.into_owned(),
        weight,
        healthy: true,
        enabled: true,
        ephemeral: true,
        metadata,
        instance_id: None,
        client: None,
        owner: None,
    });
    match writes.beat(name.key(), &ip, port, re_register).await? {
        BeatOutcome::Known(interval) => Ok(beat_reply(10200, interval)),
        BeatOutcome::Unknown => Ok(beat_reply(20404, 5000)),
    }
}

/// `PUT /nacos/v1/ns/health/instance`: set the health of a persistent instance whose
/// cluster is not checked by the server (health checker `NONE`).
pub async fn health(State(state): State<AppState>, params: Params) -> Result<&'static str, Error> {
    let key = params.service_key()?;
    let (ip, port) = address(&params)?;
    let healthy = params
        .boolean_any(&["healthy", "valid"])?
        .ok_or_else(|| Error::missing("healthy"))?;
    state.writes().set_health(key, &ip, port, healthy).await?;
    Ok("ok")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn beat_json_strings_are_borrowed_unless_escaped() {
        let plain: BeatInfo =
            serde_json::from_str(r#"{"ip":"10.0.0.1","port":80,"cluster":"c1"}"#).unwrap();
        assert!(matches!(
            plain.ip.as_ref().unwrap().0,
            Cow::Borrowed("10.0.0.1")
        ));
        assert_eq!(plain.cluster.as_deref(), Some("c1"));
        let escaped: BeatInfo = serde_json::from_str(r#"{"ip":"10.0.0.\u0031"}"#).unwrap();
        assert_eq!(escaped.ip.as_deref(), Some("10.0.0.1"));
        assert!(escaped.port.is_none());
    }

    #[test]
    fn the_usual_beat_answer_is_the_serialized_one() {
        let serialized = serde_json::to_vec(&BeatReply {
            client_beat_interval: 5000,
            code: 10200,
            light_beat_enabled: true,
        })
        .unwrap();
        assert_eq!(serialized, BEAT_OK_DEFAULT);
    }

    #[test]
    fn beats_are_checked_as_registrations() {
        let b = parse_beat(r#"{"ip":"0:0:0:0:0:0:0:1","port":80,"weight":2}"#, 100).unwrap();
        assert_eq!((&*b.ip, b.port, &*b.cluster), ("::1", 80, DEFAULT_CLUSTER));
        assert_eq!(b.stand_in.map(|s| s.0), Some(2.0));
        let refused = [
            (r#"{"ip":"999.1.1.1","port":80}"#, "'beat.ip'"),
            (r#"{"ip":"01.02.03.004","port":80}"#, "'beat.ip'"),
            (r#"{"ip":"1.1.1","port":80}"#, "'beat.ip'"),
            (r#"{"port":80}"#, "'beat.ip'"),
            (r#"{"ip":"127.0.0.1","port":70000}"#, "'beat.port'"),
            (
                r#"{"ip":"127.0.0.1","port":80,"cluster":"a b"}"#,
                "clusterName",
            ),
            (r#"{"ip":"127.0.0.1","port":80,"weight":-1}"#, "weights"),
            (
                r#"{"ip":"127.0.0.1","port":80,"metadata":{"k":"0123456789"}}"#,
                "'beat.metadata'",
            ),
            (r#"{"ip":"127.0.0.1""#, "'beat'"),
        ];
        for (raw, field) in refused {
            let e = parse_beat(raw, 5).map(|_| ()).unwrap_err();
            assert!(e.message.contains(field), "{raw}: {}", e.message);
        }
        // A persistent instance's beat re-registers nothing, so only its address counts.
        let b = parse_beat(
            r#"{"ip":"127.0.0.1","port":80,"cluster":"a b","ephemeral":false}"#,
            5,
        )
        .unwrap();
        assert!(b.stand_in.is_none());
    }

    mod fuzz {
        use proptest::prelude::*;
        use serde_json::{json, Value};

        use super::*;

        /// Values of every JSON type, for any field.
        fn any_json() -> impl Strategy<Value = Value> {
            prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::from),
                any::<i64>().prop_map(Value::from),
                any::<f64>().prop_map(|f| json!(f)),
                "\\PC{0,20}".prop_map(Value::from),
                prop_oneof![
                    Just("127.0.0.1"),
                    Just("::1"),
                    Just("999.1.1.1"),
                    Just("a.b")
                ]
                .prop_map(Value::from),
                proptest::collection::btree_map("\\PC{0,5}", "\\PC{0,5}", 0..3)
                    .prop_map(|m| json!(m)),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig {
                cases: 2_000,
                failure_persistence: None,
                ..ProptestConfig::default()
            })]

            /// Any text: an answer, never a panic.
            #[test]
            fn any_text(raw in "\\PC{0,120}") {
                let _ = parse_beat(&raw, 1024);
            }

            /// Beat-shaped JSON with fields of any type, cut short anywhere: what is
            /// accepted is an address kept in normal form, a port, and a registration
            /// within the rules.
            #[test]
            fn beat_shaped_json(
                fields in proptest::collection::btree_map(
                    prop_oneof![Just("ip"), Just("port"), Just("cluster"), Just("weight"), Just("ephemeral"), Just("metadata"), Just("other")],
                    any_json(),
                    0..7,
                ),
                cut in any::<proptest::sample::Index>(),
            ) {
                let raw = json!(fields).to_string();
                let mut at = cut.index(raw.len() + 1);
                while !raw.is_char_boundary(at) {
                    at -= 1;
                }
                for text in [raw.as_str(), &raw[..at]] {
                    if let Ok(b) = parse_beat(text, 64) {
                        prop_assert!(matches!(check_ip("ip", &b.ip), Ok(Cow::Borrowed(_))));
                        if let Some((weight, metadata)) = &b.stand_in {
                            prop_assert!((0.0..=10000.0).contains(weight));
                            prop_assert!(metadata.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>() <= 64);
                            check_cluster_name(&b.cluster).unwrap();
                        }
                    }
                }
            }
        }
    }
}
