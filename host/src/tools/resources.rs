//! The roots as MCP resources, and completion of their paths: a face of
//! the tool surface, not a second way to the disk. Every listing, read and
//! completion is a call of a built-in tool through [`Toolbox::call_with_report`]
//! (`list_directory`, `read_file`): `resolve()`, the
//! component in a fresh instance with only that root preopened, the
//! policing filesystem, the limits and the audit line, exactly as the same
//! tool call from the model. This module only names things (URIs) and maps
//! the tools' structured results to resources.
//!
//! A resource is `loomfs://ROOT/PATH`, ROOT and each PATH segment
//! percent-encoded (everything but RFC 3986's unreserved characters): a
//! scheme of our own, never `file://`, which clients take for a path on
//! their own machine (and open it there, past the server) and which would
//! show host paths. A URI that is malformed, names no readable root, is
//! refused by `resolve()` (`..`, a symlink out, a denied name) or names
//! nothing answers the same resource-not-found error, naming only the URI
//! the client sent.

use std::sync::Arc;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};
use rmcp::ErrorData;
use rmcp::model::{CallToolResult, JsonObject};
use rmcp::model::{
    CompletionInfo, ListResourceTemplatesResult, ListResourcesResult, ReadResourceResult, Resource,
    ResourceContents, ResourceTemplate,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{Control, Toolbox};
use crate::policy::{Narrowing, Permission, shown_clipped};

/// The scheme of every resource this server serves.
pub const SCHEME: &str = "loomfs://";

/// Everything but RFC 3986's unreserved characters is encoded, so that a
/// name holding `/`-free oddities (`%`, `?`, `#`, spaces, non-ASCII) round
/// trips exactly.
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Deepest walk of a resource listing (`list_directory`'s own maximum).
const LIST_DEPTH: u32 = 10;

/// Most completion values in one answer (the protocol's cap).
const MAX_COMPLETIONS: usize = CompletionInfo::MAX_VALUES;

/// What a resource request carries from its transport into the calls it
/// makes: its stop switch and its client (for the audit).
#[derive(Clone, Default)]
pub struct ResourceContext {
    pub cancel: CancellationToken,
    pub client: Option<String>,
    /// The session's narrowing (`client_roots = "narrow"`), if any.
    pub narrowing: Option<Arc<Narrowing>>,
}

impl ResourceContext {
    fn control(&self) -> Control {
        Control {
            cancel: self.cancel.clone(),
            activity: Arc::default(),
            client: self.client.clone(),
            narrowing: self.narrowing.clone(),
        }
    }
}

/// `loomfs://ROOT/PATH` for a root-relative path.
pub fn resource_uri(root: &str, path: &str) -> String {
    let mut uri = format!("{SCHEME}{}/", utf8_percent_encode(root, SEGMENT));
    let segments: Vec<String> = path
        .split('/')
        .map(|s| utf8_percent_encode(s, SEGMENT).to_string())
        .collect();
    uri.push_str(&segments.join("/"));
    uri
}

/// The template of a root's resources (RFC 6570; `+` keeps the path's `/`).
fn template_uri(root: &str) -> String {
    format!("{SCHEME}{}/{{+path}}", utf8_percent_encode(root, SEGMENT))
}

/// The root and root-relative path a URI names, or `None` for one that is
/// not ours or does not decode (which answers as a missing resource).
pub fn parse_uri(uri: &str) -> Option<(String, String)> {
    let rest = uri.strip_prefix(SCHEME)?;
    // A query or fragment is no part of a path here: not a resource of ours.
    if rest.contains(['?', '#']) {
        return None;
    }
    let (root, path) = rest.split_once('/').unwrap_or((rest, ""));
    let root = percent_decode_str(root).decode_utf8().ok()?.into_owned();
    let path = percent_decode_str(path).decode_utf8().ok()?.into_owned();
    if root.is_empty() {
        return None;
    }
    Some((root, path))
}

/// The MIME type a file's name suggests; `None` when it suggests none. A
/// read says what the bytes are (`read_file` tells text, images and audio
/// by them and names the type it found).
pub fn mime_of_name(path: &str) -> Option<&'static str> {
    let name = path.rsplit('/').next().unwrap_or(path);
    let ext = name.rsplit_once('.')?.1.to_ascii_lowercase();
    Some(match ext.as_str() {
        "txt" | "log" | "text" => "text/plain",
        "md" | "markdown" => "text/markdown",
        "html" | "htm" => "text/html",
        "css" => "text/css",
        "csv" => "text/csv",
        "xml" => "application/xml",
        "json" => "application/json",
        "js" | "mjs" => "text/javascript",
        "ts" => "text/x-typescript",
        "rs" => "text/x-rust",
        "py" => "text/x-python",
        "c" | "h" => "text/x-c",
        "toml" => "application/toml",
        "yaml" | "yml" => "application/yaml",
        "sh" => "application/x-sh",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "bmp" => "image/bmp",
        "wav" => "audio/wav",
        "mp3" => "audio/mpeg",
        "ogg" => "audio/ogg",
        "flac" => "audio/flac",
        "m4a" => "audio/mp4",
        "pdf" => "application/pdf",
        "zip" => "application/zip",
        "gz" => "application/gzip",
        _ => return None,
    })
}

pub(super) fn not_found(uri: &str) -> ErrorData {
    ErrorData::resource_not_found(
        format!("resource not found: {}", shown_clipped(uri)),
        Some(json!({ "uri": uri })),
    )
}

fn args(value: Value) -> Option<JsonObject> {
    match value {
        Value::Object(o) => Some(o),
        _ => None,
    }
}

/// The text of a failed call, as the protocol error's message.
fn failure_text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect::<Vec<_>>()
        .join("\n")
}

impl Toolbox {
    /// The roots a client may read, in the config's order.
    fn readable_roots(&self) -> impl Iterator<Item = &crate::policy::Root> {
        self.config
            .roots
            .iter()
            .map(|r| r.as_ref())
            .filter(|r| r.perms.contains(Permission::Read))
    }

    /// The places resources are listed from: each readable root whole, or
    /// under a narrowing the directories it leaves of each (root, path).
    fn areas(&self, narrowing: Option<&Narrowing>) -> Vec<(String, String)> {
        let mut areas = Vec::new();
        for root in self.readable_roots() {
            match narrowing {
                None => areas.push((root.name.clone(), ".".to_string())),
                Some(n) => {
                    for area in n.areas_of(&root.name) {
                        let path = area.to_string_lossy();
                        let path = if path.is_empty() { "." } else { &path };
                        areas.push((root.name.clone(), path.to_string()));
                    }
                }
            }
        }
        areas
    }

    /// One template per readable root (that a narrowing leaves some of).
    pub fn resource_templates(&self, narrowing: Option<&Narrowing>) -> ListResourceTemplatesResult {
        let templates = self
            .readable_roots()
            .filter(|r| narrowing.is_none_or(|n| n.reaches(&r.name)))
            .map(|r| {
                ResourceTemplate::new(template_uri(&r.name), r.name.clone()).with_description(
                    format!(
                        "A file of root '{}' ({}), by its path relative to the root",
                        r.name, r.role
                    ),
                )
            })
            .collect();
        ListResourceTemplatesResult::with_all_items(templates)
    }

    /// One page of the files of the readable roots, breadth-first, root by
    /// root: each page is one `list_directory` call (depth 10, cut at
    /// `max_list_entries`), its regular files become resources. The cursor
    /// is `N` (start root N) or `N:C` (root N from `list_directory`'s cursor
    /// C), opaque to the client.
    pub async fn list_resources(
        self: &Arc<Self>,
        cursor: Option<&str>,
        resource_cx: &ResourceContext,
    ) -> Result<ListResourcesResult, ErrorData> {
        let roots = self.areas(resource_cx.narrowing.as_deref());
        let bad_cursor = || ErrorData::invalid_params("invalid cursor for resources/list", None);
        let (mut index, mut inner) = match cursor {
            None => (0, None),
            Some(c) => {
                let (n, inner) = match c.split_once(':') {
                    Some((n, inner)) => (n, Some(inner.to_string())),
                    None => (c, None),
                };
                let n: usize = n.parse().map_err(|_| bad_cursor())?;
                if n >= roots.len() {
                    return Err(bad_cursor());
                }
                (n, inner)
            }
        };
        let mut resources = Vec::new();
        let mut next = None;
        while index < roots.len() {
            let (root, base) = &roots[index];
            let mut arguments = json!({
                "root": root, "path": base, "depth": LIST_DEPTH, "details": true,
            });
            if let Some(c) = &inner {
                arguments["cursor"] = json!(c);
            }
            let called = self
                .call_with_report("list_directory", args(arguments), resource_cx.control())
                .await?;
            if called.result.is_error == Some(true) {
                if inner.is_some() {
                    return Err(bad_cursor());
                }
                // A client root inside a root that names nothing there (or
                // nothing readable) leaves nothing to list.
                if called.path_missing && base != "." {
                    index += 1;
                    continue;
                }
                return Err(ErrorData::internal_error(
                    format!(
                        "listing root '{root}' failed: {}",
                        failure_text(&called.result)
                    ),
                    None,
                ));
            }
            let page = called.result.structured_content.unwrap_or_default();
            resources.extend(files_of(root, base, &page));
            if let Some(c) = page.get("next_cursor").and_then(Value::as_str) {
                next = Some(format!("{index}:{c}"));
                break;
            }
            index += 1;
            inner = None;
            // A page holds at most one root's page: a client asks again.
            if !resources.is_empty() && index < roots.len() {
                next = Some(index.to_string());
                break;
            }
        }
        let mut result = ListResourcesResult::with_all_items(resources);
        result.next_cursor = next;
        Ok(result)
    }

    /// Reads one resource through `read_file`: text as text, an image or
    /// audio clip as a base64 blob with the type its bytes showed.
    pub async fn read_resource(
        self: &Arc<Self>,
        uri: &str,
        resource_cx: &ResourceContext,
    ) -> Result<ReadResourceResult, ErrorData> {
        let Some((root, path)) = parse_uri(uri) else {
            return Err(not_found(uri));
        };
        let named = mime_of_name(&path);
        let called = self
            .call_with_report(
                "read_file",
                args(json!({ "root": root, "path": path })),
                resource_cx.control(),
            )
            .await?;
        if called.path_missing {
            return Err(not_found(uri));
        }
        if called.result.is_error == Some(true) {
            // The file is there and readable for this role (a refusal or a
            // missing file is `path_missing`): what the tool said of it (binary,
            // too large, a directory) names root-relative paths only.
            return Err(ErrorData::invalid_params(
                failure_text(&called.result),
                None,
            ));
        }
        let mut contents = Vec::new();
        for block in &called.result.content {
            if let Some(image) = block.as_image() {
                contents.push(
                    ResourceContents::blob(image.data.clone(), uri)
                        .with_mime_type(image.mime_type.clone()),
                );
            } else if let Some(audio) = block.as_audio() {
                contents.push(
                    ResourceContents::blob(audio.data.clone(), uri)
                        .with_mime_type(audio.mime_type.clone()),
                );
            }
        }
        if contents.is_empty() {
            // Text: the file's own lines, from the structured result (the
            // text content may carry a note after them).
            let text = called
                .result
                .structured_content
                .as_ref()
                .and_then(|s| s.get("content"))
                .and_then(Value::as_str)
                .ok_or_else(|| {
                    ErrorData::internal_error("read_file returned no content".to_string(), None)
                })?;
            let mime = named
                .filter(|m| !m.starts_with("image/") || *m == "image/svg+xml")
                .unwrap_or("text/plain");
            contents.push(ResourceContents::text(text, uri).with_mime_type(mime));
        }
        Ok(ReadResourceResult::new(contents))
    }

    /// Completion of a template's `path`: the entries of the directory typed
    /// so far (one `list_directory` call, depth 1) that start with what
    /// follows its last `/`, at most 100. A directory that is missing or
    /// refused completes to nothing, as an empty one does.
    pub async fn complete_path(
        self: &Arc<Self>,
        template: &str,
        argument: &str,
        value: &str,
        resource_cx: &ResourceContext,
    ) -> Result<CompletionInfo, ErrorData> {
        let Some(root) = self
            .readable_roots()
            .filter(|r| {
                resource_cx
                    .narrowing
                    .as_deref()
                    .is_none_or(|n| n.reaches(&r.name))
            })
            .find(|r| template_uri(&r.name) == template)
            .map(|r| r.name.clone())
        else {
            return Err(ErrorData::invalid_params(
                format!("no resource template '{}'", shown_clipped(template)),
                None,
            ));
        };
        if argument != "path" {
            return Err(ErrorData::invalid_params(
                format!(
                    "the template has one argument, 'path', not '{}'",
                    shown_clipped(argument)
                ),
                None,
            ));
        }
        let (dir, prefix) = match value.rfind('/') {
            Some(i) => (&value[..=i], &value[i + 1..]),
            None => ("", value),
        };
        let listed = if dir.is_empty() { "." } else { dir };
        let called = self
            .call_with_report(
                "list_directory",
                args(json!({ "root": root, "path": listed, "depth": 1 })),
                resource_cx.control(),
            )
            .await?;
        if called.result.is_error == Some(true) {
            return Ok(CompletionInfo::default());
        }
        let page = called.result.structured_content.unwrap_or_default();
        let matching: Vec<String> = page
            .get("entries")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .filter(|e| e.starts_with(prefix))
            .map(|e| format!("{dir}{e}"))
            .collect();
        let cut = page.get("next_cursor").is_some();
        let total = matching.len();
        let values: Vec<String> = matching.into_iter().take(MAX_COMPLETIONS).collect();
        CompletionInfo::with_pagination(
            values,
            Some(u32::try_from(total).unwrap_or(u32::MAX)),
            cut || total > MAX_COMPLETIONS,
        )
        .map_err(|e| ErrorData::internal_error(e, None))
    }
}

/// The regular files of a `list_directory` page with details (entries
/// `[path, size, modified]`, directories ending in `/`, other types in
/// `types`, paths relative to the directory listed, `base`) as resources
/// of `root`.
fn files_of(root: &str, base: &str, page: &Value) -> Vec<Resource> {
    let types = page.get("types").and_then(Value::as_object);
    page.get("entries")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|entry| {
            let path = entry.get(0)?.as_str()?;
            let other = types.is_some_and(|t| t.contains_key(path));
            if path.ends_with('/') || other {
                return None;
            }
            let path = &match base {
                "." => path.to_string(),
                _ => format!("{base}/{path}"),
            };
            let mut resource = Resource::new(
                resource_uri(root, path),
                format!("{root}/{}", crate::policy::shown(path)),
            );
            if let Some(size) = entry.get(1).and_then(Value::as_u64) {
                resource = resource.with_size(size);
            }
            if let Some(mime) = mime_of_name(path) {
                resource = resource.with_mime_type(mime);
            }
            Some(resource)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_round_trip_odd_names() {
        for (root, path) in [
            ("docs", "README.md"),
            ("d%o?c#s", "a b/ü/100%.txt"),
            ("r", "dir/sub/x"),
        ] {
            let uri = resource_uri(root, path);
            assert!(!uri[SCHEME.len()..].contains(['?', '#', ' ']), "{uri}");
            assert_eq!(parse_uri(&uri), Some((root.to_string(), path.to_string())));
        }
    }

    #[test]
    fn foreign_or_malformed_uris_are_not_ours() {
        for uri in [
            "file:///etc/passwd",
            "loomfs:///x",
            "loomfs://docs/a?b",
            "loomfs://docs/a#b",
            "loomfs://docs/%ff",
        ] {
            assert_eq!(parse_uri(uri), None, "{uri}");
        }
        // `..` decodes as it is: resolve() refuses it, not the parser.
        assert_eq!(
            parse_uri("loomfs://docs/%2E%2E/x"),
            Some(("docs".into(), "../x".into()))
        );
    }

    #[test]
    fn files_of_keeps_regular_files_only() {
        let page = json!({
            "path": ".",
            "entries": [["sub/", null, "t"], ["a.md", 3, "t"], ["link", null, "t"], ["sub/b.png", 9, "t"]],
            "types": {"link": "symlink"},
        });
        let files = files_of("r", ".", &page);
        let uris: Vec<&str> = files.iter().map(|f| f.uri.as_str()).collect();
        assert_eq!(uris, ["loomfs://r/a.md", "loomfs://r/sub/b.png"]);
        assert_eq!(files[0].size, Some(3));
        assert_eq!(files[1].mime_type.as_deref(), Some("image/png"));
        let under = files_of("r", "sub", &page);
        assert_eq!(under[0].uri, "loomfs://r/sub/a.md");
    }
}
