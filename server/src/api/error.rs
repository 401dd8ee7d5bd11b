//! How the HTTP API answers an error: the status its kind decides
//! ([`Error::http_status`]) and the message as plain text, as Nacos v1 does. The v2
//! routes wrap the same error in their envelope (`nacos_v2`).

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::error::Error;

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        let status =
            StatusCode::from_u16(self.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (
            status,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            self.message,
        )
            .into_response()
    }
}
