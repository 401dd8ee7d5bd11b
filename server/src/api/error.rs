//! The one error type of the HTTP API and how every lower-level error maps to a status
//! and a message. Nacos v1 answers errors as plain text; the wording follows Nacos where
//! clients or the reference depend on it, and otherwise says what to fix.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::auth::AuthError;
use crate::registry::RegistryError;
use crate::store::command::Rejection;
use crate::store::ProposeError;

/// An error answered to an HTTP client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Plain-text body.
    pub message: String,
}

impl ApiError {
    /// A status with a message.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }

    /// 400: the request is malformed.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    /// 404: the thing named does not exist.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }

    /// 409: conflicts with current state.
    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, message)
    }

    /// 403: authenticated but not allowed.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, message)
    }

    /// 503: try again later.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, message)
    }

    /// 400 for a missing parameter, in Nacos' words.
    pub fn missing(param: &str) -> Self {
        Self::bad_request(format!("Param '{param}' is required."))
    }

    /// 400 for an illegal parameter value, in Nacos' words.
    pub fn illegal(param: &str, problem: impl std::fmt::Display) -> Self {
        Self::bad_request(format!("Param '{param}' is illegal, {problem}"))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (
            self.status,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            self.message,
        )
            .into_response()
    }
}

impl From<RegistryError> for ApiError {
    fn from(e: RegistryError) -> Self {
        match &e {
            // Wording and status as Nacos answers these (clients and scripts match them).
            RegistryError::ServiceExists(s) => {
                Self::bad_request(format!("specified service {s} already exists!"))
            }
            RegistryError::ServiceNotEmpty(s) => Self::bad_request(format!(
                "Service {s} is not empty, can't be delete. Please unregister instance first"
            )),
            RegistryError::ServiceNotFound(s) => Self::not_found(format!("service {s} not found!")),
            RegistryError::InstanceNotFound { .. } | RegistryError::NamespaceNotFound(_) => {
                Self::not_found(e.to_string())
            }
            RegistryError::KindConflict { .. } | RegistryError::PublicNamespace => {
                Self::bad_request(e.to_string())
            }
            RegistryError::NamespaceExists(_)
            | RegistryError::NamespaceNotEmpty { .. }
            | RegistryError::Imported { .. } => Self::conflict(e.to_string()),
        }
    }
}

impl From<ProposeError> for ApiError {
    fn from(e: ProposeError) -> Self {
        match e {
            ProposeError::Rejected(Rejection::Registry(r)) => r.into(),
            ProposeError::Rejected(
                r @ (Rejection::UserExists(_) | Rejection::AlreadyBootstrapped),
            ) => Self::conflict(r.to_string()),
            ProposeError::Rejected(r @ Rejection::UserNotFound(_)) => {
                Self::not_found(r.to_string())
            }
            ProposeError::Rejected(r @ Rejection::DeleteAdmin(_)) => {
                Self::bad_request(r.to_string())
            }
            ProposeError::Rejected(r @ Rejection::SyncTaskExists(_)) => {
                Self::conflict(r.to_string())
            }
            ProposeError::Rejected(r @ Rejection::SyncTaskNotFound(_)) => {
                Self::not_found(r.to_string())
            }
            ProposeError::Unavailable(m) => Self::unavailable(m),
        }
    }
}

impl From<AuthError> for ApiError {
    fn from(e: AuthError) -> Self {
        let status = match e {
            AuthError::Missing => StatusCode::UNAUTHORIZED,
            AuthError::NotBootstrapped => StatusCode::SERVICE_UNAVAILABLE,
            AuthError::BadCredentials | AuthError::InvalidToken | AuthError::ExpiredToken => {
                StatusCode::FORBIDDEN
            }
        };
        Self::new(status, e.to_string())
    }
}
