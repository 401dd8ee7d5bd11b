//! Eureka's server REST API (`/eureka/...`, and the same under `/nacos/eureka/`, as
//! Alibaba MSE serves it): Eureka clients register, renew, cancel and discover by
//! changing only their `defaultZone`. Its paths are rows of the one route table
//! (`endpoint::Route`, patterns such as `/eureka/apps/{app}/{id}`), parsed apart here
//! into a [`Call`]: the operation and the names its path carries. What it needs of a
//! caller and whether it is audited are `match`es in `endpoint::policy`; the handlers are
//! [`handlers`]; how a Eureka instance is held and shown is [`mapping`] (and the README).
//!
//! Applications live in one namespace and group (`--eureka-namespace`,
//! `--eureka-group`); instances are ephemeral address clients kept by beats, written
//! through `Writes` like a Nacos v1 instance, so Distro, expiry and the eviction guard
//! treat them alike. Answers are JSON when the client asks for it, else Eureka's XML
//! ([`xml`]); bodies are JSON.

pub mod handlers;
pub mod mapping;
pub mod xml;

use super::endpoint::Route;

/// Where the Eureka API is served: at the root, and under `/nacos` as MSE does.
const PREFIXES: [&str; 2] = ["/eureka/", "/nacos/eureka/"];

/// One operation of the Eureka API.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `POST /apps/{app}`.
    Register,
    /// `PUT /apps/{app}/{id}`: a renewal (heartbeat).
    Renew,
    /// `DELETE /apps/{app}/{id}`.
    Cancel,
    /// `PUT /apps/{app}/{id}/status?value=`.
    StatusOverride,
    /// `DELETE /apps/{app}/{id}/status`.
    StatusClear,
    /// `PUT /apps/{app}/{id}/metadata?k=v`.
    Metadata,
    /// `GET /apps`.
    Apps,
    /// `GET /apps/delta`.
    Delta,
    /// `GET /apps/{app}`.
    App,
    /// `GET /apps/{app}/{id}`.
    Instance,
    /// `GET /instances/{id}`.
    InstanceById,
    /// `GET /vips/{vip}`.
    Vip,
    /// `GET /svips/{svip}`.
    Svip,
}

impl Op {
    /// Whether it only reads.
    pub fn reads(self) -> bool {
        matches!(
            self,
            Op::Apps | Op::Delta | Op::App | Op::Instance | Op::InstanceById | Op::Vip | Op::Svip
        )
    }

    /// Whether it addresses one application (its permission is on that service).
    pub fn names_app(self) -> bool {
        !matches!(
            self,
            Op::Apps | Op::Delta | Op::InstanceById | Op::Vip | Op::Svip
        )
    }
}

/// A parsed Eureka request: the operation and the names in its path (percent-decoded;
/// empty where the path has none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    /// What is done.
    pub op: Op,
    /// The application (`{app}`), as the path spells it.
    pub app: String,
    /// The instance id, VIP or secure VIP the path names.
    pub name: String,
}

/// The Eureka path `path` is, without its prefix; `None` when it is not one.
pub fn strip(path: &str) -> Option<&str> {
    PREFIXES.iter().find_map(|p| path.strip_prefix(p))
}

/// Whether `path` is under a Eureka prefix.
pub fn is_eureka(path: &str) -> bool {
    strip(path).is_some() || path == "/eureka" || path == "/nacos/eureka"
}

/// What a request to `rest` (the path after the prefix) is: `Ok` a call, `Err(Some)` a
/// known route the method does not answer, `Err(None)` no route. `decode` turns a
/// segment into a name (`None`: not UTF-8, taken as no route). One trailing slash is
/// dropped (the Java client asks for `apps/`).
pub fn parse(
    get: bool,
    method: &axum::http::Method,
    rest: &str,
    decode: impl Fn(&str) -> Option<String>,
) -> Result<Call, Option<Route>> {
    use axum::http::Method as M;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let segments: Vec<&str> = rest.split('/').collect();
    if segments.iter().any(|s| s.is_empty()) {
        return Err(None);
    }
    let name = |s: &str| decode(s).ok_or(None);
    let call = |op, app: String, name: String| Ok(Call { op, app, name });
    let (route, call) = match segments.as_slice() {
        ["apps"] => (
            Route::EurekaApps,
            get.then(|| call(Op::Apps, String::new(), String::new())),
        ),
        ["apps", "delta"] => (
            Route::EurekaDelta,
            get.then(|| call(Op::Delta, String::new(), String::new())),
        ),
        ["apps", app] => {
            let op = match *method {
                M::POST => Some(Op::Register),
                _ if get => Some(Op::App),
                _ => None,
            };
            (
                Route::EurekaApp,
                op.map(|op| call(op, name(app)?, String::new())),
            )
        }
        ["apps", app, id] => {
            let op = match *method {
                M::PUT => Some(Op::Renew),
                M::DELETE => Some(Op::Cancel),
                _ if get => Some(Op::Instance),
                _ => None,
            };
            (
                Route::EurekaInstance,
                op.map(|op| call(op, name(app)?, name(id)?)),
            )
        }
        ["apps", app, id, "status"] => {
            let op = match *method {
                M::PUT => Some(Op::StatusOverride),
                M::DELETE => Some(Op::StatusClear),
                _ => None,
            };
            (
                Route::EurekaStatus,
                op.map(|op| call(op, name(app)?, name(id)?)),
            )
        }
        ["apps", app, id, "metadata"] => {
            let op = (*method == M::PUT).then_some(Op::Metadata);
            (
                Route::EurekaMetadata,
                op.map(|op| call(op, name(app)?, name(id)?)),
            )
        }
        ["instances", id] => (
            Route::EurekaInstanceById,
            get.then(|| call(Op::InstanceById, String::new(), name(id)?)),
        ),
        ["vips", vip] => (
            Route::EurekaVip,
            get.then(|| call(Op::Vip, String::new(), name(vip)?)),
        ),
        ["svips", svip] => (
            Route::EurekaSvip,
            get.then(|| call(Op::Svip, String::new(), name(svip)?)),
        ),
        _ => return Err(None),
    };
    call.unwrap_or(Err(Some(route)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::Method;

    fn parsed(method: Method, path: &str) -> Result<Call, Option<Route>> {
        let get = matches!(method, Method::GET | Method::HEAD);
        let rest = strip(path).expect("a Eureka path");
        parse(get, &method, rest, |s| Some(s.replace("%20", " ")))
    }

    #[test]
    fn paths_and_methods_name_one_operation() {
        let op = |m, p| parsed(m, p).map(|c| c.op);
        assert_eq!(op(Method::GET, "/eureka/apps/"), Ok(Op::Apps));
        assert_eq!(op(Method::GET, "/nacos/eureka/apps"), Ok(Op::Apps));
        assert_eq!(op(Method::GET, "/eureka/apps/delta"), Ok(Op::Delta));
        assert_eq!(op(Method::POST, "/eureka/apps/ORDER"), Ok(Op::Register));
        assert_eq!(op(Method::GET, "/eureka/apps/ORDER"), Ok(Op::App));
        assert_eq!(op(Method::PUT, "/eureka/apps/ORDER/i-1"), Ok(Op::Renew));
        assert_eq!(op(Method::DELETE, "/eureka/apps/ORDER/i-1"), Ok(Op::Cancel));
        assert_eq!(op(Method::HEAD, "/eureka/apps/ORDER/i-1"), Ok(Op::Instance));
        assert_eq!(
            op(Method::PUT, "/eureka/apps/ORDER/i-1/status"),
            Ok(Op::StatusOverride)
        );
        assert_eq!(
            op(Method::DELETE, "/eureka/apps/ORDER/i-1/status"),
            Ok(Op::StatusClear)
        );
        assert_eq!(
            op(Method::PUT, "/eureka/apps/ORDER/i-1/metadata"),
            Ok(Op::Metadata)
        );
        assert_eq!(
            op(Method::GET, "/eureka/instances/i-1"),
            Ok(Op::InstanceById)
        );
        assert_eq!(op(Method::GET, "/eureka/vips/order"), Ok(Op::Vip));
        assert_eq!(op(Method::GET, "/eureka/svips/order"), Ok(Op::Svip));
        let call = parsed(Method::PUT, "/eureka/apps/A%20B/x%20y").unwrap();
        assert_eq!((call.app.as_str(), call.name.as_str()), ("A B", "x y"));
        // Known paths, other methods: the route (a 405); unknown paths: none.
        assert_eq!(
            op(Method::POST, "/eureka/apps"),
            Err(Some(Route::EurekaApps))
        );
        assert_eq!(
            op(Method::POST, "/eureka/apps/A/i/status"),
            Err(Some(Route::EurekaStatus))
        );
        assert_eq!(op(Method::GET, "/eureka/apps/A/i/other"), Err(None));
        assert_eq!(op(Method::GET, "/eureka/apps//i"), Err(None));
        assert_eq!(op(Method::GET, "/eureka/"), Err(None));
    }
}
