//! Methods 2026-07-28 removed (`initialize`, `ping`, `logging/setLevel`,
//! `resources/subscribe`, `resources/unsubscribe`), asked for by a request
//! of that version: the answer is 404 and `-32601` (SEP-2575). rmcp gives
//! it for a request of the method's own shape, but checks the params of a
//! known method before it finds the method removed, so one without them
//! (`logging/setLevel` with no `level`) got `-32602` with 200. Such an
//! answer, and only it, is turned into the removed method's: the request is
//! still rmcp's to judge first (its `Host`, `Origin`, headers and `_meta`),
//! and nothing of a request whose params did not parse was run.

use axum::body::{Body, to_bytes};
use axum::extract::Request;
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// The methods the 2026-07-28 revision removed.
const REMOVED: &[&str] = &[
    "initialize",
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
];

/// The first revision without them.
const SINCE: &str = "2026-07-28";

/// How long rmcp's refusal may take to be read whole.
const ANSWER_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The removed method a request of 2026-07-28 or later names in its
/// `Mcp-Method` header, if any.
fn removed_method(headers: &HeaderMap) -> Option<&'static str> {
    let version = headers.get("mcp-protocol-version")?.to_str().ok()?;
    // Revisions are dates: later ones sort after.
    if version < SINCE {
        return None;
    }
    let method = headers.get("mcp-method")?.to_str().ok()?;
    REMOVED.iter().copied().find(|m| *m == method)
}

/// Passes `request` on, and answers a removed method's request that rmcp
/// refused for its params as a method not found.
pub async fn answer(request: Request, next: Next, max_body_bytes: usize) -> Response {
    let Some(method) = removed_method(request.headers()) else {
        return next.run(request).await;
    };
    let (parts, body) = request.into_parts();
    let Ok(bytes) = to_bytes(body, max_body_bytes).await else {
        return (
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the request body is over {max_body_bytes} bytes\n"),
        )
            .into_response();
    };
    // The body's own method must be the header's (else rmcp's header check
    // answers), and only a request, with an id, gets an answer.
    let id = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .filter(|m| m["method"] == method)
        .map(|m| m["id"].clone())
        .filter(|id| id.is_string() || id.is_number());
    let response = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await;
    match id {
        Some(id) => not_found_for_params(response, method, id).await,
        None => response,
    }
}

/// `response`, unless it is rmcp's `-32602` for the request as its one
/// answer of 200 (JSON, or an event stream of that one message): then the
/// removed method's 404 and `-32601`, with the request's id.
async fn not_found_for_params(response: Response, method: &str, id: Value) -> Response {
    let kind = response
        .headers()
        .get(header::CONTENT_TYPE)
        .map(|t| t.as_bytes().to_vec())
        .unwrap_or_default();
    let stream = kind.starts_with(b"text/event-stream");
    if response.status() != StatusCode::OK || !(stream || kind.starts_with(b"application/json")) {
        return response;
    }
    let (parts, body) = response.into_parts();
    // rmcp's error answers are a few hundred bytes, and its stream for one
    // request ends with the answer.
    let read = tokio::time::timeout(ANSWER_WAIT, to_bytes(body, 64 * 1024)).await;
    let Ok(Ok(bytes)) = read else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let text = String::from_utf8_lossy(&bytes);
    let messages: Vec<Value> = if stream {
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter(|d| !d.trim().is_empty())
            .filter_map(|d| serde_json::from_str(d.trim()).ok())
            .collect()
    } else {
        serde_json::from_str(&text).into_iter().collect()
    };
    let params_refused = matches!(&messages[..],
        [m] if m["error"]["code"] == -32602 && m["id"] == id);
    if !params_refused {
        return Response::from_parts(parts, Body::from(bytes));
    }
    let answer = json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {
            "code": -32601,
            "message": format!("method not found: '{method}' is not a method of protocol version {SINCE} and later"),
        },
    });
    (
        StatusCode::NOT_FOUND,
        [(header::CONTENT_TYPE, "application/json")],
        answer.to_string(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(version: &str, method: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("mcp-protocol-version", version.parse().unwrap());
        h.insert("mcp-method", method.parse().unwrap());
        h
    }

    #[test]
    fn only_removed_methods_of_2026_and_later() {
        assert_eq!(
            removed_method(&headers("2026-07-28", "logging/setLevel")),
            Some("logging/setLevel")
        );
        assert_eq!(
            removed_method(&headers("2026-07-28", "resources/subscribe")),
            Some("resources/subscribe")
        );
        assert_eq!(removed_method(&headers("2026-07-28", "tools/call")), None);
        assert_eq!(
            removed_method(&headers("2025-11-25", "logging/setLevel")),
            None
        );
        assert_eq!(removed_method(&HeaderMap::new()), None);
    }
}
