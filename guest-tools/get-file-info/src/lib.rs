//! `get_file_info`: metadata of one path (type, size, times, links).
//!
//! A symlink inside the root is reported as such, with the type of what it
//! points to. A target that cannot be reached reads the same whether it is
//! missing or outside the root, so the answer never maps the disk beyond it.

use loomfs_guest::{
    Context, Descriptor, Guest, Kind, Output, Permission, READ_ONLY, ToolError, human_bytes,
    io_error, locate, modified, parse_args, root_and_path, sys, timestamp, to_json,
};
use serde::{Deserialize, Serialize};

struct GetFileInfo;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    root: String,
    path: String,
}

#[derive(Serialize)]
struct Info {
    path: String,
    #[serde(rename = "type")]
    kind: &'static str,
    is_symlink: bool,
    size: Option<u64>,
    modified: Option<String>,
    accessed: Option<String>,
    created: Option<String>,
    links: Option<u64>,
    note: Option<String>,
}

const INPUT_SCHEMA: &str = r#"{
  "type": "object",
  "properties": {
    "root": {"type": "string", "description": "Name of the root (see list_roots)."},
    "path": {"type": "string", "description": "Path relative to the root ('.' for the root)."}
  },
  "required": ["root", "path"],
  "additionalProperties": false
}"#;

const OUTPUT_SCHEMA: &str = r#"{
  "type": "object",
  "properties": {
    "path": {"type": "string"},
    "type": {"type": "string", "description": "Type of what the path names, symlinks followed."},
    "is_symlink": {"type": "boolean"},
    "size": {"type": ["integer", "null"], "description": "Bytes, for files."},
    "modified": {"type": ["string", "null"]},
    "accessed": {"type": ["string", "null"]},
    "created": {"type": ["string", "null"]},
    "links": {"type": ["integer", "null"], "description": "Hard link count."},
    "note": {"type": ["string", "null"]}
  },
  "required": ["path", "type", "is_symlink", "size", "modified", "accessed", "created", "links", "note"]
}"#;

impl Guest for GetFileInfo {
    fn describe() -> Descriptor {
        Descriptor {
            name: "get_file_info".into(),
            description: "Metadata of a file or directory: type, size, modification/access \
                          times, hard link count, and whether it is a symlink."
                .into(),
            input_schema: INPUT_SCHEMA.into(),
            output_schema: Some(OUTPUT_SCHEMA.into()),
            permission: Permission::Read,
            annotations: READ_ONLY,
            path_arguments: root_and_path(Permission::Read, false),
            keeps_history: false,
        }
    }

    fn call(ctx: Context, arguments: String) -> Result<Output, ToolError> {
        let args: Args = parse_args(&arguments)?;
        let at = locate(&ctx, &args.root, &args.path)?;
        let own = std::fs::symlink_metadata(&at.full).map_err(|e| io_error(&at.rel, &e))?;
        let is_symlink = own.file_type().is_symlink();
        let (meta, note) = if is_symlink {
            match std::fs::metadata(&at.full) {
                Ok(target) => (target, None),
                Err(_) => (
                    own,
                    Some("symlink whose target cannot be reached (missing or outside the root)"),
                ),
            }
        } else {
            (own, None)
        };
        let kind = Kind::of(meta.file_type(), &at.full, is_symlink);
        let info = Info {
            path: at.rel.clone(),
            kind: kind.name(),
            is_symlink,
            size: (kind == Kind::File).then_some(meta.len()),
            modified: modified(&meta),
            accessed: timestamp(meta.accessed()),
            created: timestamp(meta.created()),
            links: if is_symlink && note.is_some() {
                None
            } else {
                sys::link_count(&at.full)
            },
            note: note.map(str::to_string),
        };
        let mut text = format!("{}: {}", at.shown(), info.kind);
        if is_symlink {
            text.push_str(" (via symlink)");
        }
        if let Some(size) = info.size {
            text.push_str(&format!(", {} ({size} bytes)", human_bytes(size)));
        }
        if let Some(m) = &info.modified {
            text.push_str(&format!(", modified {m}"));
        }
        if let Some(n) = &info.note {
            text.push_str(&format!("; {n}"));
        }
        Ok(Output {
            text: vec![text],
            structured: Some(to_json(&info)),
            images: vec![],
        })
    }
}

loomfs_guest::tool!(GetFileInfo);
