//! Consul's HTTP API as service discovery uses it (`/v1/agent/...`, `/v1/catalog/...`,
//! `/v1/health/...`, `/v1/status/...`): Consul clients register, pass their TTL
//! checks and discover — blocking queries included — by being given roster's address.
//! Its paths are rows of the one route table (`endpoint::Route`, patterns such as
//! `/v1/health/service/{service}`), parsed apart here into a [`Call`]; every call
//! needs an authenticated caller (a long-lived API token is what Consul clients hold,
//! sent as `X-Consul-Token`), and the handlers ([`handlers`]) check the permission on
//! the service a call names or leave out of a listing what the caller may not read;
//! the reads and their blocking are [`reads`].
//! How a registration is held is [`mapping`], how instances are shown [`shapes`];
//! `?filter=` is [`filter`].
//!
//! Services live in one namespace and group (`--consul-namespace`, `--consul-group`);
//! every instance there is shown, whichever face registered it. Not served (404): the
//! KV store, sessions, the ACL API, Connect, events, transactions, prepared queries,
//! coordinates, operator and snapshot routes.

pub mod filter;
pub mod handlers;
pub mod mapping;
pub mod reads;
pub mod shapes;

use super::endpoint::Route;

/// Where Consul's API is served.
pub const PREFIX: &str = "/v1/";

/// One operation of Consul's API.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `PUT /agent/service/register`.
    Register,
    /// `PUT /agent/service/deregister/{id}`.
    Deregister,
    /// `PUT /agent/service/maintenance/{id}?enable=`.
    Maintenance,
    /// `PUT /agent/check/pass/{check}`.
    Pass,
    /// `PUT /agent/check/warn/{check}`.
    Warn,
    /// `PUT /agent/check/fail/{check}`.
    Fail,
    /// `PUT /agent/check/update/{check}`.
    Update,
    /// `GET /agent/self`.
    AgentSelf,
    /// `GET /agent/services`.
    AgentServices,
    /// `GET /agent/service/{id}`.
    AgentService,
    /// `GET /agent/checks`.
    AgentChecks,
    /// `GET /catalog/datacenters`.
    Datacenters,
    /// `GET /catalog/services`.
    CatalogServices,
    /// `GET /catalog/service/{service}`.
    CatalogService,
    /// `GET /catalog/nodes`.
    CatalogNodes,
    /// `GET /catalog/node/{node}`.
    CatalogNode,
    /// `GET /health/service/{service}`.
    HealthService,
    /// `GET /health/checks/{service}`.
    HealthChecks,
    /// `GET /health/node/{node}`.
    HealthNode,
    /// `GET /health/state/{state}`.
    HealthState,
    /// `GET /status/leader`.
    Leader,
    /// `GET /status/peers`.
    Peers,
}

impl Op {
    /// Whether it only reads.
    pub fn reads(self) -> bool {
        !matches!(
            self,
            Op::Register
                | Op::Deregister
                | Op::Maintenance
                | Op::Pass
                | Op::Warn
                | Op::Fail
                | Op::Update
        )
    }

    /// Whether it is a TTL check's report (a heartbeat: not audited).
    pub fn is_check_report(self) -> bool {
        matches!(self, Op::Pass | Op::Warn | Op::Fail | Op::Update)
    }

    /// Its route.
    pub fn route(self) -> Route {
        match self {
            Op::Register => Route::ConsulRegister,
            Op::Deregister => Route::ConsulDeregister,
            Op::Maintenance => Route::ConsulMaintenance,
            Op::Pass => Route::ConsulCheckPass,
            Op::Warn => Route::ConsulCheckWarn,
            Op::Fail => Route::ConsulCheckFail,
            Op::Update => Route::ConsulCheckUpdate,
            Op::AgentSelf => Route::ConsulAgentSelf,
            Op::AgentServices => Route::ConsulAgentServices,
            Op::AgentService => Route::ConsulAgentService,
            Op::AgentChecks => Route::ConsulAgentChecks,
            Op::Datacenters => Route::ConsulDatacenters,
            Op::CatalogServices => Route::ConsulCatalogServices,
            Op::CatalogService => Route::ConsulCatalogService,
            Op::CatalogNodes => Route::ConsulCatalogNodes,
            Op::CatalogNode => Route::ConsulCatalogNode,
            Op::HealthService => Route::ConsulHealthService,
            Op::HealthChecks => Route::ConsulHealthChecks,
            Op::HealthNode => Route::ConsulHealthNode,
            Op::HealthState => Route::ConsulHealthState,
            Op::Leader => Route::ConsulLeader,
            Op::Peers => Route::ConsulPeers,
        }
    }
}

/// A parsed Consul request: the operation and the name its path carries
/// (percent-decoded; empty where the path has none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    /// What is done.
    pub op: Op,
    /// The service id, check id, service name or node the path names.
    pub name: String,
}

/// Whether `path` is under Consul's prefix.
pub fn is_consul(path: &str) -> bool {
    path.starts_with(PREFIX)
}

/// What a request to `rest` (the path after `/v1/`) is: `Ok` a call, `Err(Some)` a
/// known route the method does not answer, `Err(None)` no route. `get`: the method
/// reads (`GET`, `HEAD`); `put`: it is `PUT` (Consul's writes; `POST` is taken too,
/// as Consul's agent takes it). `decode` turns a segment into a name (`None`: not
/// UTF-8, taken as no route).
pub fn parse(
    get: bool,
    put: bool,
    rest: &str,
    decode: impl Fn(&str) -> Option<String>,
) -> Result<Call, Option<Route>> {
    let segments: Vec<&str> = rest.split('/').collect();
    if segments.iter().any(|s| s.is_empty()) {
        return Err(None);
    }
    let (op, named) = match segments.as_slice() {
        ["agent", "service", "register"] => (Op::Register, None),
        ["agent", "service", "deregister", id] => (Op::Deregister, Some(*id)),
        ["agent", "service", "maintenance", id] => (Op::Maintenance, Some(*id)),
        ["agent", "service", id] => (Op::AgentService, Some(*id)),
        ["agent", "services"] => (Op::AgentServices, None),
        ["agent", "checks"] => (Op::AgentChecks, None),
        ["agent", "check", "pass", id] => (Op::Pass, Some(*id)),
        ["agent", "check", "warn", id] => (Op::Warn, Some(*id)),
        ["agent", "check", "fail", id] => (Op::Fail, Some(*id)),
        ["agent", "check", "update", id] => (Op::Update, Some(*id)),
        ["agent", "self"] => (Op::AgentSelf, None),
        ["catalog", "datacenters"] => (Op::Datacenters, None),
        ["catalog", "services"] => (Op::CatalogServices, None),
        ["catalog", "service", name] => (Op::CatalogService, Some(*name)),
        ["catalog", "nodes"] => (Op::CatalogNodes, None),
        ["catalog", "node", node] => (Op::CatalogNode, Some(*node)),
        ["health", "service", name] => (Op::HealthService, Some(*name)),
        ["health", "checks", name] => (Op::HealthChecks, Some(*name)),
        ["health", "node", node] => (Op::HealthNode, Some(*node)),
        ["health", "state", state] => (Op::HealthState, Some(*state)),
        ["status", "leader"] => (Op::Leader, None),
        ["status", "peers"] => (Op::Peers, None),
        _ => return Err(None),
    };
    let answers = if op.reads() { get } else { put };
    if !answers {
        return Err(Some(op.route()));
    }
    let name = match named {
        Some(segment) => decode(segment).ok_or(None)?,
        None => String::new(),
    };
    Ok(Call { op, name })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(get: bool, put: bool, rest: &str) -> Result<Call, Option<Route>> {
        parse(get, put, rest, |s| Some(s.replace("%2F", "/")))
    }

    #[test]
    fn paths_name_their_operation_and_methods_are_checked() {
        let call = at(false, true, "agent/service/deregister/web-1").unwrap();
        assert_eq!((call.op, call.name.as_str()), (Op::Deregister, "web-1"));
        assert_eq!(
            at(false, true, "agent/service/register").unwrap().op,
            Op::Register
        );
        assert_eq!(
            at(true, false, "agent/service/web").unwrap().op,
            Op::AgentService
        );
        assert_eq!(at(true, false, "health/service/a%2Fb").unwrap().name, "a/b");
        assert_eq!(
            at(true, false, "agent/service/register"),
            Err(Some(Route::ConsulRegister))
        );
        assert_eq!(
            at(false, true, "health/service/web"),
            Err(Some(Route::ConsulHealthService))
        );
        assert_eq!(at(true, false, "kv/config"), Err(None));
        assert_eq!(at(true, false, "health/service/"), Err(None));
        assert_eq!(at(true, false, "health/service/a/b"), Err(None));
    }
}
