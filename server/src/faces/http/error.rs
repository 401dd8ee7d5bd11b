//! How the HTTP API answers an error: the status its kind decides
//! ([`Error::http_status`]) and the message as plain text, as Nacos v1 does, with
//! `Retry-After` when the error says how long to wait (429s). The v2 routes wrap the
//! same error in their envelope (`nacos_v2_envelope`).

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::error::Error;

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        let status =
            StatusCode::from_u16(self.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let retry_after = self.retry_after_secs;
        let mut response = (
            status,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            self.message,
        )
            .into_response();
        if let Some(secs) = retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    #[test]
    fn a_retry_hint_is_answered_as_retry_after() {
        let r = Error::too_many_requests("wait", 40).into_response();
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(r.headers()[header::RETRY_AFTER], "40");
        let r = Error::new(ErrorKind::TooManyRequests, "busy").into_response();
        assert!(r.headers().get(header::RETRY_AFTER).is_none());
    }
}
