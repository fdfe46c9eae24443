//! Error responses: OpenAI's error body, with the status each failure means (400 syntax,
//! 422 data, 413 size, 503 overload, 504 time, 502 a rejected or failed upstream output).
//! Internal causes are logged with the request id and never sent.

use super::*;

pub(super) fn error(
    status: StatusCode,
    kind: &'static str,
    code: Option<&str>,
    message: impl Into<String>,
    param: Option<String>,
) -> Response {
    (status, Json(ErrorBody::new(kind, code, message, param))).into_response()
}

pub(super) fn invalid(e: InvalidRequest) -> Response {
    let status = if e.unsupported {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::UNPROCESSABLE_ENTITY
    };
    let code = if e.unsupported {
        "unsupported_parameter"
    } else {
        "invalid_value"
    };
    error(
        status,
        "invalid_request_error",
        Some(code),
        e.message,
        e.param,
    )
}

/// A 500 whose cause is logged with the request id; the client gets the id, never the cause.
pub(super) fn internal_error(id: &RequestId, cause: &str) -> Response {
    tracing::error!(request_id = %id.0, cause, "internal error");
    error(
        StatusCode::INTERNAL_SERVER_ERROR,
        "server_error",
        Some("internal_error"),
        format!("internal error (request id {})", id.0),
        None,
    )
}

pub(super) fn too_large(limit: usize) -> Response {
    let mut response = error(
        StatusCode::PAYLOAD_TOO_LARGE,
        "invalid_request_error",
        Some("request_too_large"),
        format!("the request body exceeds {limit} bytes"),
        None,
    );
    // The rest of the body is never read, so the connection cannot carry another request.
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

pub(super) fn overloaded(message: &str) -> Response {
    let mut response = error(
        StatusCode::SERVICE_UNAVAILABLE,
        "server_error",
        Some("overloaded"),
        message,
        None,
    );
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

pub(super) fn run_error(
    e: &RunError,
    timed_out: bool,
    metrics: &Metrics,
    id: &RequestId,
) -> Response {
    let (status, code, message) = describe_run_error(e, timed_out, metrics, id);
    let kind = if status.is_client_error() {
        "invalid_request_error"
    } else {
        "server_error"
    };
    let mut response = error(status, kind, Some(code), message, None);
    let retry_after = match e {
        RunError::Overloaded(_) => Some(1),
        RunError::Upstream {
            fault: crate::UpstreamFault::Unavailable,
            retry_after,
            ..
        } => Some(retry_after.unwrap_or(1)),
        _ => None,
    };
    if let Some(seconds) = retry_after {
        if let Ok(value) = HeaderValue::from_str(&seconds.to_string()) {
            response.headers_mut().insert(header::RETRY_AFTER, value);
        }
    }
    response
}

/// The status, code and client-facing message of a failed run (internal details are logged
/// with the request id, never sent), counting output rejections in the metrics.
pub(super) fn describe_run_error(
    e: &RunError,
    timed_out: bool,
    metrics: &Metrics,
    id: &RequestId,
) -> (StatusCode, &'static str, String) {
    match e {
        RunError::OutputRejected { gate, .. } => {
            metrics.rejection(*gate);
            (StatusCode::BAD_GATEWAY, "output_rejected", e.to_string())
        }
        RunError::UpstreamRefused { .. } => {
            (StatusCode::BAD_REQUEST, "upstream_refused", e.to_string())
        }
        RunError::ConstraintFailed(_) => {
            (StatusCode::BAD_REQUEST, "constraint_failed", e.to_string())
        }
        RunError::Upstream { fault, message, .. } => {
            tracing::warn!(request_id = %id.0, cause = %message, "the upstream failed");
            match fault {
                crate::UpstreamFault::Unavailable => (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "upstream_unavailable",
                    "the upstream is overloaded; retry later".into(),
                ),
                crate::UpstreamFault::Timeout => (
                    StatusCode::GATEWAY_TIMEOUT,
                    "upstream_timeout",
                    "the upstream did not answer in time".into(),
                ),
                _ => (
                    StatusCode::BAD_GATEWAY,
                    "upstream_failed",
                    format!(
                        "the upstream did not give a usable answer (request id {})",
                        id.0
                    ),
                ),
            }
        }
        RunError::Cancelled if timed_out => (
            StatusCode::GATEWAY_TIMEOUT,
            "timeout",
            "the request took longer than the server's per-request timeout".into(),
        ),
        RunError::Cancelled => (
            StatusCode::SERVICE_UNAVAILABLE,
            "cancelled",
            "the request was cancelled".into(),
        ),
        RunError::Overloaded(message) => {
            tracing::warn!(request_id = %id.0, cause = %message, "no memory for the request");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "overloaded",
                "the model's memory is in use by other requests; retry later".into(),
            )
        }
        // `RunError::Internal`, and any failure this server does not know yet: logged with
        // the request id, never sent.
        _ => {
            tracing::error!(request_id = %id.0, cause = %e, "generation failed");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal_error",
                format!("internal error (request id {})", id.0),
            )
        }
    }
}
