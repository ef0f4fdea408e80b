//! What a call returns: structured results and their costs, errors named
//! for the model (quota, descriptors, a full disk), clipped texts, and the
//! `list_roots` tool's own description. Never shows a host path.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};

use super::{AUDIT_CLIP, ERROR_CLIP, capped};
use crate::policy::{
    Permission, Perms, Resolved, Root, Rule, neutralised, normalise_lexically, shown,
};
use crate::runtime;
use crate::runtime::{Activity, CallError, DiskError, ToolError};
use crate::store::quota;
use crate::store::quota::Quota;
use crate::sys::descriptors;
use crate::sys::space;

/// What a call that ran out of quota answers, whatever its guest made of
/// the refused operation (a search might have skipped the file, and its
/// result would look complete; a tool's own error would only say that an
/// I/O operation failed).
pub(super) fn ran_out_of_quota(q: &Quota, activity: &Activity) -> String {
    // The call needed more than the bucket held: retrying before it is full
    // again would only run out sooner.
    format!(
        "refused by rule '{}': the byte quota ran out during the call, after {} bytes read \
         and {} bytes written ({}); {} (a call that needs more than quota_burst_bytes never \
         fits: read by range, copy in parts). {UNFINISHED}",
        Rule::Quota,
        activity.bytes_read(),
        activity.bytes_written(),
        quota_figures(q),
        quota::retry_text(q.until_full().max(Duration::from_millis(1))),
    )
}

/// What a call that stopped part way has changed: nothing, whatever the
/// tool (its changes are published only once it has succeeded).
pub(super) const UNFINISHED: &str = "Nothing was changed: a call's changes are published only when \
     it succeeds";

/// What a call that changed more than the host stages for one call (in
/// `root`) answers, whatever the tool made of the refusal.
pub(super) fn overlay_full(root: &str) -> String {
    format!(
        "the call changed more than {} entries (or {} MiB of their paths) in root '{root}', the \
         most the host stages for one call (rule overlay); change fewer entries per call. \
         {UNFINISHED}",
        crate::runtime::fs::MAX_OVERLAY_ENTRIES,
        crate::runtime::fs::MAX_OVERLAY_BYTES >> 20,
    )
}

/// What a call that found no file descriptor free answers.
pub(super) fn ran_out_of_descriptors() -> String {
    format!(
        "{} during the call, so it could not finish; try again in a moment. {UNFINISHED}",
        descriptors::NO_DESCRIPTORS
    )
}

/// What a call that failed on a disk error answers, whatever the tool made
/// of the error (its own text would say only that an operation failed).
pub(super) fn disk_failed(error: DiskError, root: &str) -> String {
    let way_out = match error {
        DiskError::Reserve(_) => format!("; {}", space::Short::WAY_OUT),
        _ => String::new(),
    };
    format!(
        "{}, so the call could not finish. {UNFINISHED}{way_out}",
        error.text(root)
    )
}

/// Says in `result` what its publish kept: each kept version's place in the
/// trash, in one text block, and in the structured result where it has a
/// `previous` (or, for a deletion, `trash`) field left empty for the path
/// it names (the host fills what the guest cannot know).
pub(super) fn note_kept(
    result: &mut CallToolResult,
    published: &crate::store::publish::Published,
    resolved: &[Resolved],
) {
    if published.kept.is_empty() {
        return;
    }
    let default_root = resolved
        .iter()
        .find(|r| r.op() != Permission::Read)
        .map_or("", |r| r.root().name.as_str());
    if let Some(Value::Object(top)) = result.structured_content.as_mut() {
        fill_kept(top, published, default_root);
        for value in top.values_mut() {
            if let Value::Array(items) = value {
                for item in items {
                    if let Value::Object(o) = item {
                        fill_kept(o, published, default_root);
                    }
                }
            }
        }
    }
    let roots = published
        .kept
        .iter()
        .any(|k| k.root != published.kept[0].root);
    let lines: Vec<String> = published
        .kept
        .iter()
        .map(|k| {
            let root = if roots {
                format!(" (root '{}')", k.root)
            } else {
                String::new()
            };
            format!(
                "kept '{}'{root} as it was at {}",
                shown(&k.from),
                shown(&k.to)
            )
        })
        .collect();
    result.content.push(ContentBlock::text(lines.join("\n")));
}

/// Fills an object's empty `previous` or `trash` with where the version
/// of its `destination` (or `path`) was kept.
fn fill_kept(
    o: &mut serde_json::Map<String, Value>,
    published: &crate::store::publish::Published,
    default_root: &str,
) {
    let root = o
        .get("destination_root")
        .and_then(Value::as_str)
        .unwrap_or(default_root)
        .to_string();
    for (field, key) in [
        ("previous", "destination"),
        ("previous", "path"),
        ("trash", "path"),
    ] {
        if o.get(field) != Some(&Value::Null) {
            continue;
        }
        let Some(path) = o.get(key).and_then(Value::as_str) else {
            continue;
        };
        let path = normalise_lexically(path).unwrap_or_default();
        if let Some(k) = published
            .kept
            .iter()
            .find(|k| k.root == root && Path::new(&k.from) == path)
        {
            o.insert(field.to_string(), Value::String(k.to.clone()));
        }
    }
}

/// Says that the call ran twice: what it saw at `path` changed before its
/// first publish, so it ran again on the new content; this is what the
/// second run answered.
pub(super) fn note_reran(result: &mut CallToolResult, root: &str, path: &str) {
    let then = if result.is_error == Some(true) {
        "it failed on the new content; read it again"
    } else {
        "this is the result on the new content"
    };
    result.content.push(ContentBlock::text(format!(
        "(ran twice: '{}' in root '{root}' was changed by someone else while the call ran; {then})",
        shown(path)
    )));
}

pub(super) fn quota_figures(q: &Quota) -> String {
    let c = q.config();
    format!(
        "quota_bytes_per_minute = {}, quota_burst_bytes = {}",
        c.bytes_per_minute, c.burst_bytes
    )
}

pub(super) fn list_roots_tool() -> Tool {
    let input = json!({"type": "object", "properties": {}, "additionalProperties": false});
    let output = json!({
        "type": "object",
        "properties": {
            // Objects of name, role and permissions: a list of objects is
            // said to be a list only, as in the components' result schemas.
            "roots": {"type": "array"},
            "read_only": {"type": "boolean"}
        },
        "required": ["roots", "read_only"]
    });
    let as_object = |v: Value| match v {
        Value::Object(o) => o,
        _ => JsonObject::new(),
    };
    Tool::new(
        "list_roots",
        "The roots, with role and permissions. Other tools take a root and a path relative to it.",
        Arc::new(as_object(input)),
    )
    .with_raw_output_schema(Arc::new(as_object(output)))
    .with_annotations(
        // Read-only: the other hints mean nothing here (see catalogue).
        ToolAnnotations::new().read_only(true).open_world(false),
    )
}

pub(super) fn clip(s: &str) -> String {
    clip_to(s, AUDIT_CLIP)
}

/// `s`, cut to at most `max` bytes at a character boundary, `…` marking a cut.
pub(super) fn clip_to(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let cut = (0..=max)
        .rev()
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(0);
    format!("{}…", &s[..cut])
}

/// `snake_case`, as MCP clients expect tool names: `[a-z][a-z0-9_]{0,63}`.
pub(super) fn is_tool_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && name.len() <= 64
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// Parses a JSON Schema text; it must be an object.
pub(super) fn schema(text: &str) -> Result<JsonObject, String> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(o)) => Ok(o),
        Ok(_) => Err("not a JSON object".into()),
        Err(e) => Err(e.to_string()),
    }
}

pub(super) fn structured(content: Vec<ContentBlock>, value: Value) -> CallToolResult {
    let mut result = CallToolResult::success(content);
    result.structured_content = Some(value);
    result
}

pub(super) fn error_result(message: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message)])
}

/// Host bytes one JSON value of a structured result takes once parsed
/// (`serde_json::Value` is 32 bytes; a map entry holds its key and node):
/// what [`to_result`] charges against `max_output_bytes` before parsing.
pub(super) const JSON_VALUE_COST: u64 = 48;

/// Maps a component's output to an MCP result, with its size in bytes. The
/// text of a third-party tool is [`neutralised`]: the project did not write
/// it, so nothing says its names went through the naming rule. Structured
/// content is passed as it is (exact names; JSON escapes its controls), but
/// counted before it is parsed: a result of tiny values (`[0,0,0,…]`) would
/// take sixteen times its size once parsed, so each value is charged
/// [`JSON_VALUE_COST`] against `max_output`.
pub(super) fn to_result(
    tool: &str,
    output: runtime::Output,
    max_output: u64,
    built_in: bool,
) -> (CallToolResult, u64) {
    let mut bytes = 0u64;
    let mut content = Vec::new();
    for text in output.text {
        bytes += text.len() as u64;
        let text = if built_in {
            text
        } else {
            neutralised(&text).into_owned()
        };
        content.push(ContentBlock::text(text));
    }
    for image in output.images {
        bytes += image.data.len() as u64;
        let data = base64::engine::general_purpose::STANDARD.encode(&image.data);
        // The WIT's `image` carries audio too, told by its MIME type.
        content.push(if image.mime_type.starts_with("audio/") {
            ContentBlock::audio(data, image.mime_type)
        } else {
            ContentBlock::image(data, image.mime_type)
        });
    }
    let Some(text) = output.structured else {
        return (CallToolResult::success(content), bytes);
    };
    // Every value takes a byte of the text at least: a text that short
    // cannot hold too many, and is not counted.
    let counted = match (text.len() as u64).saturating_mul(JSON_VALUE_COST) > max_output {
        true => Some(json_values(&text)),
        false => None,
    };
    match counted {
        Some(Ok(values)) if values.saturating_mul(JSON_VALUE_COST) > max_output => {
            return (
                error_result(format!(
                    "the tool's structured result holds {values} JSON values, more than \
                     max_output_bytes ({max_output}) allows at {JSON_VALUE_COST} bytes each; ask \
                     for less: a range of lines, a narrower search, a smaller depth"
                )),
                0,
            );
        }
        // Malformed or too deep: said below, by the parse itself.
        _ => {}
    }
    match serde_json::from_str::<Value>(&text) {
        Ok(value) => (structured(content, value), bytes),
        Err(e) => {
            tracing::error!(tool, "tool returned malformed structured output: {e}");
            (
                error_result(format!(
                    "tool '{tool}' returned malformed structured output"
                )),
                0,
            )
        }
    }
}

/// How many values (scalars, arrays, objects) a JSON text holds, counted
/// without building them; serde_json's depth limit (128) applies.
pub(super) fn json_values(text: &str) -> serde_json::Result<u64> {
    use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

    struct Count(u64);

    impl<'de> Deserialize<'de> for Count {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Count, D::Error> {
            d.deserialize_any(Counter)
        }
    }

    struct Counter;

    impl<'de> Visitor<'de> for Counter {
        type Value = Count;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("JSON")
        }
        fn visit_bool<E>(self, _: bool) -> Result<Count, E> {
            Ok(Count(1))
        }
        fn visit_i64<E>(self, _: i64) -> Result<Count, E> {
            Ok(Count(1))
        }
        fn visit_u64<E>(self, _: u64) -> Result<Count, E> {
            Ok(Count(1))
        }
        fn visit_f64<E>(self, _: f64) -> Result<Count, E> {
            Ok(Count(1))
        }
        fn visit_str<E>(self, _: &str) -> Result<Count, E> {
            Ok(Count(1))
        }
        fn visit_unit<E>(self) -> Result<Count, E> {
            Ok(Count(1))
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Count, A::Error> {
            let mut n = 1u64;
            while let Some(Count(c)) = seq.next_element::<Count>()? {
                n = n.saturating_add(c);
            }
            Ok(Count(n))
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Count, A::Error> {
            let mut n = 1u64;
            while map.next_key::<IgnoredAny>()?.is_some() {
                let Count(c) = map.next_value::<Count>()?;
                n = n.saturating_add(c);
            }
            Ok(Count(n))
        }
    }

    serde_json::from_str::<Count>(text).map(|Count(n)| n)
}

/// The text of a call that failed. `entry_limit`: the limit that stopped it
/// is its `[[components]]` entry's own, lower than the server's, and is
/// named so (`timeout_ms`, `memory_bytes`, `max_output_bytes` of the entry).
pub(super) fn call_error_text(
    tool: &str,
    e: CallError,
    built_in: bool,
    entry_limit: bool,
) -> String {
    let key = |server: &'static str, entry: &'static str| {
        if entry_limit {
            format!("{entry} of the tool's [[components]] entry")
        } else {
            server.to_string()
        }
    };
    // A third-party tool's words are not the project's: clipped, and
    // neutralised like its results.
    // A built-in tool's errors show names by the rule, but may echo what
    // the model sent (a glob, a regex, a misspelt field): neutralised too,
    // which leaves the rule's own output alone (it holds no raw control).
    let from_tool = |m: String| {
        if built_in {
            neutralised(&m).into_owned()
        } else {
            neutralised(&clip_to(&m, ERROR_CLIP)).into_owned()
        }
    };
    match e {
        CallError::Tool(ToolError::InvalidArguments(m)) => {
            format!("invalid arguments: {}", from_tool(clip_to(&m, ERROR_CLIP)))
        }
        CallError::Tool(ToolError::NotFound(m) | ToolError::Refused(m) | ToolError::Io(m)) => {
            from_tool(m)
        }
        CallError::Timeout(limit) => format!(
            "the call took longer than {} ms and was stopped ({}); nothing was changed",
            limit.as_millis(),
            key("tool_timeout_ms", "timeout_ms")
        ),
        CallError::Cancelled => "the call was cancelled; nothing was changed".into(),
        CallError::Memory(limit) => format!(
            "the call needed more than {} MiB of memory and was stopped ({}); nothing was changed",
            limit / (1024 * 1024),
            key("tool_memory_bytes", "memory_bytes")
        ),
        CallError::Crashed(detail) => {
            tracing::error!(tool, "tool crashed: {detail}");
            "the tool failed unexpectedly; the server log has details; nothing was changed".into()
        }
        CallError::Setup(m) => m,
        CallError::OutputTooLarge(limit) => format!(
            "the tool's result would take more than {limit} bytes of the server's memory and was \
             refused as it was read ({}); nothing was changed; ask for less: a range of lines, a \
             narrower search, a smaller depth",
            key("max_output_bytes", "max_output_bytes")
        ),
    }
}

/// Names the roots a tool may act on in its schema: each root field
/// becomes an enum of the roots that grant what its path arguments need
/// (a copy reads from more roots than it writes to), so a client knows them
/// without a call and the model reads them once per tool, in a few bytes
/// (a root's role is `list_roots`' to tell). A component's own wording of
/// the field stays. Whether its schema had a root field to name them in.
pub(super) fn offer_roots(
    input: &mut JsonObject,
    paths: &[runtime::PathArgument],
    view: &[Arc<Root>],
    cap: Option<Perms>,
) -> bool {
    let Some(Value::Object(properties)) = input.get_mut("properties") else {
        return false;
    };
    let mut offered = false;
    for (field, property) in properties.iter_mut() {
        let needs: Vec<Permission> = paths
            .iter()
            .filter(|p| &p.root_field == field)
            .map(|p| capped(p.permission.into(), cap))
            .collect();
        let Value::Object(property) = property else {
            continue;
        };
        if needs.is_empty() {
            continue;
        }
        let names: Vec<&str> = view
            .iter()
            .filter(|r| needs.iter().any(|n| r.perms.contains(*n)))
            .map(|r| r.name.as_str())
            .collect();
        property.remove("type");
        property.insert("enum".into(), Value::from(names));
        offered = true;
    }
    offered
}
