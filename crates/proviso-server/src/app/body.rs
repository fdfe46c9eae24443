//! Reading a request body: its content type, its size and time limits, its JSON syntax.

use super::*;

/// Reads the body within the size limit and the body timeout. A `Content-Length` over the
/// limit is refused before anything is read.
pub(super) async fn read_body(
    headers: &HeaderMap,
    body: axum::body::Body,
    limit: usize,
    timeout: Duration,
) -> Result<Bytes, Response> {
    let announced = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u128>().ok());
    if announced.is_some_and(|n| n > limit as u128) {
        return Err(too_large(limit));
    }
    let limited = http_body_util::Limited::new(body, limit);
    match tokio::time::timeout(timeout, http_body_util::BodyExt::collect(limited)).await {
        Err(_) => {
            let mut response = error(
                StatusCode::REQUEST_TIMEOUT,
                "invalid_request_error",
                Some("body_timeout"),
                format!(
                    "the request body did not arrive within {} s",
                    timeout.as_secs_f32()
                ),
                None,
            );
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            Err(response)
        }
        Ok(Err(e))
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            Err(too_large(limit))
        }
        Ok(Err(_)) => Err(error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            Some("unreadable_body"),
            "the request body could not be read",
            None,
        )),
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
    }
}

/// A request body read as JSON: the content type (415), the size and time limits, the
/// syntax (400).
pub(super) async fn read_json<B: Backend>(
    s: &Shared<B>,
    headers: &HeaderMap,
    body: axum::body::Body,
) -> Result<Value, Response> {
    let json_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
    if !json_type {
        return Err(error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "invalid_request_error",
            Some("unsupported_media_type"),
            "the request body must be sent as Content-Type: application/json",
            None,
        ));
    }
    let body = match read_body(headers, body, s.config.body_limit, s.config.body_timeout).await {
        Ok(b) => b,
        Err(response) => return Err(response),
    };
    serde_json::from_slice(&body).map_err(|e| {
        error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            Some("invalid_json"),
            format!("the request body is not valid JSON: {e}"),
            None,
        )
    })
}
