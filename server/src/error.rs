//! The one error every protocol face answers with: a kind and a message a person can act
//! on. The kind decides every projection, each one match: the HTTP status (Nacos v1 and
//! roster's own API answer the message as text, [`Error::http_status`]), the Nacos v2
//! `code` ([`Error::v2_code`]) and the gRPC `errorCode` ([`Error::grpc_code`]). Nothing
//! is ever recovered from message text.
//!
//! Lower layers keep errors of their own (`RegistryError`, the registry's validation
//! `Invalid`, the store's `ProposeError`, `AuthError`); each maps to a kind once: the
//! registry's here, the services' where they are defined (the error module imports no
//! service, so every service may use it).
//! The error crosses the peer channel as it is (Distro forwards it whole), so a client
//! gets the same answer whichever node took its request.

use serde::{Deserialize, Serialize};

use roster_registry::validate::{Invalid, Problem};
use roster_registry::RegistryError;

/// What went wrong, as far as a client needs to know.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ErrorKind {
    /// A required parameter is missing.
    MissingParameter,
    /// A parameter's value is not acceptable.
    InvalidParameter,
    /// A weight outside 0..=10000.
    InvalidWeight,
    /// Instance metadata that is malformed, too large, or has bad `preserved.*` values.
    InvalidMetadata,
    /// The service already has stored settings.
    ServiceExists,
    /// The service still holds instances.
    ServiceNotEmpty,
    /// The service does not exist.
    ServiceNotFound,
    /// No such instance.
    InstanceNotFound,
    /// Something else named does not exist (a namespace, a user, a task, a route).
    NotFound,
    /// The request conflicts with current state.
    Conflict,
    /// No credentials.
    Unauthenticated,
    /// Credentials that are wrong, expired, or not allowed this.
    Forbidden,
    /// The request body is larger than allowed.
    TooLarge,
    /// A bounded resource is exhausted for now (password checks): retry shortly.
    TooManyRequests,
    /// Not now: no leader, not ready, a peer unreachable. Retry.
    Unavailable,
    /// A bug or an environment failure; logged, never detailed to the client.
    Internal,
}

/// An error answered to a client: its kind and a message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct Error {
    /// What went wrong.
    pub kind: ErrorKind,
    /// What to tell the client: Nacos' wording where clients or scripts depend on it,
    /// otherwise what to fix.
    pub message: String,
    /// For [`ErrorKind::TooManyRequests`]: the seconds to wait before retrying, answered
    /// over HTTP as `Retry-After`. Left out on the wire when absent, and absent from
    /// errors of builds without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_secs: Option<u64>,
}

impl Error {
    /// An error of `kind`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            retry_after_secs: None,
        }
    }

    /// A bounded resource is exhausted: retry after `retry_after_secs`.
    pub fn too_many_requests(message: impl Into<String>, retry_after_secs: u64) -> Self {
        Self {
            retry_after_secs: Some(retry_after_secs),
            ..Self::new(ErrorKind::TooManyRequests, message)
        }
    }

    /// The request is malformed.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidParameter, message)
    }

    /// The thing named does not exist.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, message)
    }

    /// The service does not exist.
    pub fn service_not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::ServiceNotFound, message)
    }

    /// No such instance.
    pub fn instance_not_found(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InstanceNotFound, message)
    }

    /// Conflicts with current state.
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Conflict, message)
    }

    /// Authenticated but not allowed.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Forbidden, message)
    }

    /// No credentials.
    pub fn unauthenticated(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unauthenticated, message)
    }

    /// Try again later.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unavailable, message)
    }

    /// A missing parameter, in Nacos' words.
    pub fn missing(param: &str) -> Self {
        Self::new(
            ErrorKind::MissingParameter,
            format!("Param '{param}' is required."),
        )
    }

    /// An illegal parameter value, in Nacos' words.
    pub fn illegal(param: &str, problem: impl std::fmt::Display) -> Self {
        Self::bad_request(format!("Param '{param}' is illegal, {problem}"))
    }

    /// The HTTP status this error is answered with.
    pub fn http_status(&self) -> u16 {
        match self.kind {
            ErrorKind::MissingParameter
            | ErrorKind::InvalidParameter
            | ErrorKind::InvalidWeight
            | ErrorKind::InvalidMetadata
            // Nacos answers these two with 400; clients match on it.
            | ErrorKind::ServiceExists
            | ErrorKind::ServiceNotEmpty => 400,
            ErrorKind::Unauthenticated => 401,
            ErrorKind::Forbidden => 403,
            ErrorKind::ServiceNotFound | ErrorKind::InstanceNotFound | ErrorKind::NotFound => 404,
            ErrorKind::Conflict => 409,
            ErrorKind::TooLarge => 413,
            ErrorKind::TooManyRequests => 429,
            ErrorKind::Internal => 500,
            ErrorKind::Unavailable => 503,
        }
    }

    /// The Nacos v2 `code` and its category, as `/nacos/v2/` answers carry them.
    pub fn v2_code(&self) -> (u32, &'static str) {
        match self.kind {
            ErrorKind::MissingParameter => (10000, "parameter missing"),
            ErrorKind::InvalidWeight => (21001, "weight error"),
            ErrorKind::InvalidMetadata => (21002, "instance metadata error"),
            ErrorKind::ServiceExists => (21007, "service already exist"),
            ErrorKind::ServiceNotEmpty => (21009, "service delete failure"),
            ErrorKind::InvalidParameter | ErrorKind::TooLarge => {
                (20002, "parameter validate error")
            }
            ErrorKind::InstanceNotFound => (21003, "instance not found"),
            ErrorKind::ServiceNotFound => (21008, "service not exist"),
            ErrorKind::NotFound => (20004, "resource not found"),
            ErrorKind::Conflict => (20005, "resource conflict"),
            ErrorKind::Unauthenticated | ErrorKind::Forbidden => (10001, "access denied"),
            ErrorKind::Unavailable => (23000, "illegal state"),
            // Nacos has no code for it; 10xxx are its access codes, 429 as in HTTP.
            ErrorKind::TooManyRequests => (10429, "too many requests"),
            ErrorKind::Internal => (30000, "server error"),
        }
    }

    /// The `errorCode` of a Nacos gRPC `ErrorResponse`: Nacos 2.x servers answer
    /// request failures with the HTTP-style code of the failure.
    pub fn grpc_code(&self) -> u16 {
        self.http_status()
    }
}

impl From<Invalid> for Error {
    fn from(e: Invalid) -> Self {
        let kind = match e.problem {
            Problem::Missing => ErrorKind::MissingParameter,
            Problem::Weight => ErrorKind::InvalidWeight,
            Problem::Metadata => ErrorKind::InvalidMetadata,
            Problem::Other => ErrorKind::InvalidParameter,
        };
        Self::new(kind, e.to_string())
    }
}

impl From<RegistryError> for Error {
    fn from(e: RegistryError) -> Self {
        // Wording as Nacos answers these where clients and scripts match them.
        let (kind, message) = match &e {
            RegistryError::ServiceExists(s) => (
                ErrorKind::ServiceExists,
                format!("specified service {s} already exists!"),
            ),
            RegistryError::ServiceNotEmpty(s) => (
                ErrorKind::ServiceNotEmpty,
                format!(
                    "Service {s} is not empty, can't be delete. Please unregister instance first"
                ),
            ),
            RegistryError::ServiceNotFound(s) => (
                ErrorKind::ServiceNotFound,
                format!("service {s} not found!"),
            ),
            RegistryError::InstanceNotFound { .. } => (ErrorKind::InstanceNotFound, e.to_string()),
            RegistryError::NamespaceNotFound(_) => (ErrorKind::NotFound, e.to_string()),
            RegistryError::KindConflict { .. } | RegistryError::PublicNamespace => {
                (ErrorKind::InvalidParameter, e.to_string())
            }
            RegistryError::NamespaceExists(_)
            | RegistryError::NamespaceNotEmpty { .. }
            | RegistryError::Imported { .. } => (ErrorKind::Conflict, e.to_string()),
        };
        Self::new(kind, message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::services::auth::AuthError;

    #[test]
    fn every_projection_follows_the_kind() {
        let cases = [
            (Error::missing("ip"), 400, 10000),
            (Error::illegal("port", "out of range"), 400, 20002),
            (
                Error::new(ErrorKind::InvalidWeight, "weights range"),
                400,
                21001,
            ),
            (Error::new(ErrorKind::InvalidMetadata, "bad"), 400, 21002),
            (
                RegistryError::ServiceExists("g@@s".into()).into(),
                400,
                21007,
            ),
            (
                RegistryError::ServiceNotFound("g@@s".into()).into(),
                404,
                21008,
            ),
            (
                Error::instance_not_found("no matched ip found!"),
                404,
                21003,
            ),
            (Error::not_found("no such user"), 404, 20004),
            (Error::conflict("exists"), 409, 20005),
            (AuthError::Missing.into(), 401, 10001),
            (AuthError::ExpiredToken.into(), 403, 10001),
            (Error::unavailable("no leader"), 503, 23000),
            (AuthError::TooManyChecks.into(), 429, 10429),
        ];
        for (e, status, code) in cases {
            assert_eq!(e.http_status(), status, "{e:?}");
            assert_eq!(e.v2_code().0, code, "{e:?}");
            assert_eq!(e.grpc_code(), status, "{e:?}");
        }
        // The text decides nothing: a message that mentions metadata is not a
        // metadata error.
        assert_eq!(Error::bad_request("metadata selector").v2_code().0, 20002);
    }

    #[test]
    fn it_crosses_the_peer_channel_whole() {
        let e = Error::new(ErrorKind::InvalidWeight, "weights range 0..=10000");
        let bytes = rmp_serde::to_vec_named(&e).unwrap();
        assert_eq!(rmp_serde::from_slice::<Error>(&bytes).unwrap(), e);
        let e = Error::from(AuthError::Throttled {
            retry_after_secs: 20,
        });
        assert_eq!((e.http_status(), e.retry_after_secs), (429, Some(20)));
        let bytes = rmp_serde::to_vec_named(&e).unwrap();
        assert_eq!(rmp_serde::from_slice::<Error>(&bytes).unwrap(), e);
        // A build without the retry hint reads it, and this one reads that build's.
        #[derive(Debug, PartialEq, Serialize, Deserialize)]
        struct Older {
            kind: ErrorKind,
            message: String,
        }
        let older: Older = rmp_serde::from_slice(&bytes).unwrap();
        assert_eq!(older.kind, ErrorKind::TooManyRequests);
        let bytes = rmp_serde::to_vec_named(&older).unwrap();
        assert_eq!(
            rmp_serde::from_slice::<Error>(&bytes)
                .unwrap()
                .retry_after_secs,
            None
        );
    }
}
