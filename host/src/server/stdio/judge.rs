//! The line guard: each line from the client judged before rmcp sees it. A
//! well-formed message is rmcp's (a `tools/call` typed here, straight from
//! the line); anything else gets the answer JSON-RPC gives it, or none.

use serde_json::{Map, Value, json};

use super::Rx;

/// What to do with one line from the client.
#[derive(Debug, PartialEq)]
enum Verdict {
    /// A well-formed message: rmcp's.
    Forward,
    /// Malformed: this error response goes back instead.
    Answer(Value),
    /// Nothing to do (a blank line).
    Skip,
}

/// What one line comes to.
pub(super) enum Line {
    Message(Box<Rx>),
    Answer(Vec<u8>),
    Skip,
}

/// One line's fate: a well-formed message becomes rmcp's, a malformed one
/// gets the guard's answer.
pub(super) fn judge(line: &[u8]) -> Line {
    if let Some(call) = tool_call(line) {
        return Line::Message(Box::new(call));
    }
    match triage(line) {
        Verdict::Skip => Line::Skip,
        Verdict::Answer(answer) => Line::Answer(answer_line(&answer)),
        Verdict::Forward => match serde_json::from_slice::<Rx>(line) {
            Ok(message) => Line::Message(Box::new(message)),
            // Well-formed JSON-RPC that no MCP message fits (rmcp types
            // every request and notification, with catch-alls for methods it
            // does not know: this is a response or error of another shape).
            // As rmcp did, it is answered with a null id: a response's id is
            // one of the server's own requests, which the client would take
            // for one of its own. A request keeps its id; a notification,
            // which rmcp would also have answered, gets no answer.
            Err(e) => match serde_json::from_slice::<Map<String, Value>>(line)
                .ok()
                .map(|mut message| (message.remove("id"), message.contains_key("method")))
            {
                None | Some((None, _)) => Line::Skip,
                Some((Some(id), request)) => Line::Answer(answer_line(&error(
                    match request && (id.is_string() || id.is_i64()) {
                        true => id,
                        false => Value::Null,
                    },
                    -32600,
                    format!(
                        "invalid request: {}",
                        crate::policy::shown_clipped(&e.to_string())
                    ),
                ))),
            },
        },
    }
}

/// The common case, parsed once and straight into its type: a `tools/call`
/// request with an id and object params, nothing else in it. rmcp's own
/// parse tries each message kind and then each of its 20-odd requests in
/// turn over a buffered copy of the line, after the guard has parsed it
/// once already. Anything else (`None`) takes that path.
fn tool_call(line: &[u8]) -> Option<Rx> {
    use rmcp::model::{CallToolRequest, ClientRequest, JsonRpcMessage, NumberOrString};
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Envelope<'a> {
        #[serde(borrow)]
        jsonrpc: std::borrow::Cow<'a, str>,
        id: Value,
        #[serde(borrow)]
        method: std::borrow::Cow<'a, str>,
        #[serde(rename = "params")]
        _params: AnObject,
    }
    let envelope: Envelope = serde_json::from_slice(line).ok()?;
    if envelope.jsonrpc != "2.0" || envelope.method != "tools/call" {
        return None;
    }
    let id = match envelope.id {
        Value::String(id) => NumberOrString::String(id.into()),
        Value::Number(n) => NumberOrString::Number(n.as_i64()?),
        _ => return None,
    };
    let request: CallToolRequest = serde_json::from_slice(line).ok()?;
    Some(JsonRpcMessage::request(ClientRequest::from(request), id))
}

/// A JSON object, its contents skipped; anything else fails.
struct AnObject;

impl<'de> serde::Deserialize<'de> for AnObject {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = AnObject;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<AnObject, A::Error> {
                while map
                    .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
                    .is_some()
                {}
                Ok(AnObject)
            }
        }
        deserializer.deserialize_map(Visitor)
    }
}

/// `answer` as one line for the output, its newline included.
pub(super) fn answer_line(answer: &Value) -> Vec<u8> {
    let mut line = answer.to_string().into_bytes();
    line.push(b'\n');
    line
}

/// Judges one line: a JSON-RPC 2.0 request, notification or response is
/// forwarded; anything else is answered as JSON-RPC says.
fn triage(line: &[u8]) -> Verdict {
    // Exactly the bytes that would be forwarded are judged: JSON's own
    // whitespace only (a form feed is not JSON, and not skipped).
    if line
        .iter()
        .all(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
    {
        return Verdict::Skip;
    }
    let message: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => return Verdict::Answer(error(Value::Null, -32700, format!("parse error: {e}"))),
    };
    let Value::Object(message) = message else {
        return Verdict::Answer(error(
            Value::Null,
            -32600,
            "invalid request: a message is a JSON object (batches are not supported)".into(),
        ));
    };
    let id = message.get("id");
    // rmcp takes a string or an integer that fits an i64.
    let valid_id = id.is_some_and(|id| id.is_string() || id.is_i64());
    let answer_id = if valid_id {
        id.cloned().unwrap_or_default()
    } else {
        Value::Null
    };
    let invalid = |why: &str| {
        Verdict::Answer(error(
            answer_id.clone(),
            -32600,
            format!("invalid request: {why}"),
        ))
    };
    if message.get("jsonrpc") != Some(&json!("2.0")) {
        return invalid("\"jsonrpc\" must be \"2.0\"");
    }
    match (id, message.get("method")) {
        (_, Some(Value::String(method))) => {
            if id.is_some() && !valid_id {
                return invalid("\"id\" must be a string or an integer");
            }
            params_problem(&message, method).map_or(Verdict::Forward, |why| match id {
                Some(_) => Verdict::Answer(error(answer_id.clone(), -32602, why)),
                // A notification gets no answer, right or wrong.
                None => Verdict::Skip,
            })
        }
        (_, Some(_)) => invalid("\"method\" must be a string"),
        (Some(_), None) if message.contains_key("result") || message.contains_key("error") => {
            Verdict::Forward
        }
        _ => invalid("no \"method\": not a request or notification"),
    }
}

/// Why a message's params cannot be a method's: MCP's are always an object.
fn params_problem(message: &Map<String, Value>, method: &str) -> Option<String> {
    match message.get("params") {
        None | Some(Value::Object(_)) => None,
        Some(_) => Some(format!(
            "invalid params for '{}': params must be an object",
            crate::policy::shown_clipped(method)
        )),
    }
}

/// A JSON-RPC error response.
pub(super) fn error(id: Value, code: i64, message: String) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(line: &str) -> (Value, i64, String) {
        match triage(line.as_bytes()) {
            Verdict::Answer(v) => (
                v["id"].clone(),
                v["error"]["code"].as_i64().unwrap(),
                v["error"]["message"].as_str().unwrap().to_string(),
            ),
            other => panic!("{line}: {other:?}"),
        }
    }

    #[test]
    fn well_formed_messages_go_to_rmcp() {
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":3,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":4,"error":{"code":1,"message":"m"}}"#,
            "  {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r\n",
        ] {
            assert_eq!(triage(line.as_bytes()), Verdict::Forward, "{line}");
        }
        assert_eq!(triage(b"\n"), Verdict::Skip);
    }

    #[test]
    fn malformed_lines_are_answered_with_the_id_when_there_is_one() {
        let (id, code, message) =
            answer(r#"{"jsonrpc":"2.0","id":"p","method":"tools/call","params":5}"#);
        assert_eq!((id, code), (json!("p"), -32602));
        assert_eq!(
            message,
            "invalid params for 'tools/call': params must be an object"
        );
        let (id, code, _) = answer(r#"{"jsonrpc":"2.0","id":7,"method":"x","params":[1]}"#);
        assert_eq!((id, code), (json!(7), -32602));
        for (line, code, message) in [
            (
                "{nope",
                -32700,
                "parse error: key must be a string at line 1 column 2",
            ),
            ("{}", -32600, "invalid request: \"jsonrpc\" must be \"2.0\""),
            (
                "[]",
                -32600,
                "invalid request: a message is a JSON object (batches are not supported)",
            ),
            (
                r#"{"jsonrpc":"2.0"}"#,
                -32600,
                "invalid request: no \"method\": not a request or notification",
            ),
            (
                r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#,
                -32600,
                "invalid request: \"id\" must be a string or an integer",
            ),
        ] {
            assert_eq!(
                answer(line),
                (Value::Null, code, message.to_string()),
                "{line}"
            );
        }
        let (id, code, message) = answer(r#"{"jsonrpc":"2.0","id":9,"method":5}"#);
        assert_eq!(
            (id, code, message.as_str()),
            (
                json!(9),
                -32600,
                "invalid request: \"method\" must be a string"
            )
        );
        let deep = "[".repeat(100_000);
        assert_eq!(answer(&deep).1, -32700);
        assert_eq!(
            answer(r#"{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":"\ud800"}}"#).1,
            -32700
        );
        // What rmcp would not take either: a form feed before the JSON, a
        // fractional id.
        assert_eq!(
            answer("\x0c{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\"}").1,
            -32700
        );
        assert_eq!(
            answer(r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#),
            (
                Value::Null,
                -32600,
                "invalid request: \"id\" must be a string or an integer".to_string()
            )
        );
        // A notification of the wrong shape is dropped: notifications get no answer.
        assert_eq!(
            triage(br#"{"jsonrpc":"2.0","method":"n","params":5}"#),
            Verdict::Skip
        );
    }

    /// The `tools/call` shortcut gives rmcp exactly what its own parse
    /// gives, and leaves to that parse every line that is not a plain call.
    #[test]
    fn a_tool_call_is_typed_as_rmcp_types_it() {
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","arguments":{"root":"ws","path":"a.txt"}}}"#,
            r#"{"id":"x\u00e9","method":"tools/call","jsonrpc":"2.0","params":{"name":"list_roots"}}"#,
            r#"{"jsonrpc":"2.0","id":-7,"method":"tools/call","params":{"_meta":{"progressToken":"p"},"name":"w","arguments":{"content":"a\nb\"c","n":1.5,"big":18446744073709551615}}}"#,
            r#" {"jsonrpc":"2.0","id":2,"method":"tools\/call","params":{"name":"x","arguments":{},"task":{"ttl":5}}} "#,
        ] {
            let fast = tool_call(line.as_bytes()).unwrap_or_else(|| panic!("{line}"));
            let rmcp: Rx = serde_json::from_slice(line.as_bytes()).unwrap();
            assert_eq!(format!("{fast:?}"), format!("{rmcp:?}"), "{line}");
            assert_eq!(
                serde_json::to_value(&fast).unwrap(),
                serde_json::to_value(&rmcp).unwrap()
            );
        }
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"},"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":[1]}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":1.0,"method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":9223372036854775808,"method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":7}}"#,
            r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"x"}}"#,
        ] {
            assert!(tool_call(line.as_bytes()).is_none(), "{line}");
        }
    }
}
