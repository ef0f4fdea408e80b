//! `text_stats`: an example of a loom-fs tool written outside the project.
//!
//! It counts the lines, words and bytes of a text file and lists its
//! Markdown headings (an outline), using nothing of loom-fs but the WIT
//! package in `wit/`. Like every loom-fs tool it carries no policy: the host
//! resolves the `root`/`path` arguments it declares before the call (deny
//! list, confinement, permission) and polices every file operation during
//! it, so the tool only opens `<mount dir>/<path>` and reports.

wit_bindgen::generate!({
    path: "../../wit",
    world: "tool-component",
});

use exports::loom_fs::tool::tool::{
    Annotations, Context, Descriptor, Guest, Output, PathArgument, Permission, ToolError,
};
use serde::{Deserialize, Serialize};

struct TextStats;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    root: String,
    path: String,
}

#[derive(Serialize)]
struct Stats {
    lines: usize,
    words: usize,
    bytes: usize,
    outline: Vec<Heading>,
}

#[derive(Serialize)]
struct Heading {
    level: usize,
    title: String,
    line: usize,
}

const INPUT_SCHEMA: &str = r#"{
  "type": "object",
  "properties": {
    "root": {"type": "string", "description": "Root name (see list_roots)."},
    "path": {"type": "string", "description": "File path relative to the root."}
  },
  "required": ["root", "path"],
  "additionalProperties": false
}"#;

const OUTPUT_SCHEMA: &str = r#"{
  "type": "object",
  "properties": {
    "lines": {"type": "integer"},
    "words": {"type": "integer"},
    "bytes": {"type": "integer"},
    "outline": {"type": "array", "items": {
      "type": "object",
      "properties": {
        "level": {"type": "integer"},
        "title": {"type": "string"},
        "line": {"type": "integer"}
      },
      "required": ["level", "title", "line"]
    }}
  },
  "required": ["lines", "words", "bytes", "outline"]
}"#;

impl Guest for TextStats {
    fn describe() -> Descriptor {
        Descriptor {
            name: "text_stats".into(),
            description: "Count the lines, words and bytes of a text file and list its Markdown \
                          headings with their line numbers: an outline of a document before \
                          reading it."
                .into(),
            input_schema: INPUT_SCHEMA.into(),
            output_schema: Some(OUTPUT_SCHEMA.into()),
            permission: Permission::Read,
            annotations: Annotations {
                read_only: true,
                destructive: false,
                idempotent: true,
            },
            path_arguments: vec![PathArgument {
                root_field: "root".into(),
                root_fallback: None,
                path_field: "path".into(),
                permission: Permission::Read,
                across_roots: None,
                optional: false,
            }],
        }
    }

    fn call(ctx: Context, arguments: String) -> Result<Output, ToolError> {
        let args: Args = serde_json::from_str(&arguments)
            .map_err(|e| ToolError::InvalidArguments(e.to_string()))?;
        let mount = ctx
            .mounts
            .iter()
            .find(|m| m.name == args.root)
            .ok_or_else(|| ToolError::InvalidArguments(format!("no root '{}'", args.root)))?;
        let file = format!("{}/{}", mount.dir, args.path);
        let shown = &args.path;
        // Check the type and size before opening: a FIFO would block, a huge
        // file would not fit.
        let meta = std::fs::metadata(&file).map_err(|e| io_error(shown, &e))?;
        if !meta.is_file() {
            return Err(ToolError::Refused(format!(
                "'{shown}' is not a regular file"
            )));
        }
        if meta.len() > mount.max_read_bytes {
            return Err(ToolError::Refused(format!(
                "'{shown}' is {} bytes; this root lets a tool read at most {} (max_read_bytes)",
                meta.len(),
                mount.max_read_bytes
            )));
        }
        let bytes = std::fs::read(&file).map_err(|e| io_error(shown, &e))?;
        if bytes.contains(&0) {
            return Err(ToolError::Refused(format!("'{shown}' is not a text file")));
        }
        let stats = stats(&String::from_utf8_lossy(&bytes), bytes.len());
        let mut text = format!(
            "{shown}: {} lines, {} words, {} bytes",
            stats.lines, stats.words, stats.bytes
        );
        for h in &stats.outline {
            let indent = "  ".repeat(h.level - 1);
            text += &format!("\n{indent}{} (line {})", h.title, h.line);
        }
        Ok(Output {
            text: vec![text],
            structured: serde_json::to_string(&stats).ok(),
            images: vec![],
        })
    }
}

/// Counts, and ATX headings (`#` to `######`) outside fenced code blocks.
fn stats(text: &str, bytes: usize) -> Stats {
    let mut outline = Vec::new();
    let mut fence: Option<&str> = None;
    for (n, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if let Some(open) = fence {
            if trimmed.starts_with(open) {
                fence = None;
            }
            continue;
        }
        if let Some(marker) = ["```", "~~~"].into_iter().find(|m| trimmed.starts_with(m)) {
            fence = Some(marker);
            continue;
        }
        let level = trimmed.bytes().take_while(|&b| b == b'#').count();
        let rest = &trimmed[level..];
        if (1..=6).contains(&level) && (rest.is_empty() || rest.starts_with([' ', '\t'])) {
            let title = rest.trim().trim_end_matches('#').trim_end().to_string();
            outline.push(Heading {
                level,
                title,
                line: n + 1,
            });
        }
    }
    Stats {
        lines: text.lines().count(),
        words: text.split_whitespace().count(),
        bytes,
        outline,
    }
}

fn io_error(shown: &str, e: &std::io::Error) -> ToolError {
    match e.kind() {
        std::io::ErrorKind::NotFound => ToolError::NotFound(format!("'{shown}' does not exist")),
        _ => ToolError::Io(format!("'{shown}': {e}")),
    }
}

export!(TextStats);
