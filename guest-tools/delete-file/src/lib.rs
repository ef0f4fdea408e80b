//! `delete_file`: a file or a directory moves to the root's trash,
//! `<root>/.mcp-trash/<UTC timestamp>/<path>`. Nothing is erased; the trash
//! is out of every tool's reach, and the root itself is never deleted.

use loomfs_guest::write::keep_by_move;
use loomfs_guest::{
    Context, DESTRUCTIVE, Descriptor, Guest, Kind, Output, Permission, ToolError, io_error, locate,
    parse_args, root_and_path, shown, to_json,
};
use serde::{Deserialize, Serialize};

struct DeleteFile;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    root: String,
    path: String,
}

#[derive(Serialize)]
struct Deleted {
    path: String,
    #[serde(rename = "type")]
    kind: &'static str,
    trash: String,
}

const INPUT_SCHEMA: &str = r#"{
  "type": "object",
  "properties": {
    "root": {"type": "string", "description": "Name of the root (see list_roots)."},
    "path": {"type": "string", "description": "File or directory relative to the root."}
  },
  "required": ["root", "path"],
  "additionalProperties": false
}"#;

const OUTPUT_SCHEMA: &str = r#"{
  "type": "object",
  "properties": {
    "path": {"type": "string"},
    "type": {"type": "string"},
    "trash": {"type": "string", "description": "Where it went (root-relative); a person can restore it from there."}
  },
  "required": ["path", "type", "trash"]
}"#;

impl Guest for DeleteFile {
    fn describe() -> Descriptor {
        Descriptor {
            name: "delete_file".into(),
            description: "Delete a file or a directory (with its contents) by moving it to the \
                          root's trash, from which a person can restore it."
                .into(),
            input_schema: INPUT_SCHEMA.into(),
            output_schema: Some(OUTPUT_SCHEMA.into()),
            permission: Permission::Delete,
            annotations: DESTRUCTIVE,
            path_arguments: root_and_path(Permission::Delete, false),
            keeps_history: true,
        }
    }

    fn call(ctx: Context, arguments: String) -> Result<Output, ToolError> {
        let args: Args = parse_args(&arguments)?;
        let at = locate(&ctx, &args.root, &args.path)?;
        let meta = std::fs::symlink_metadata(&at.full).map_err(|e| io_error(&at.rel, &e))?;
        let kind = Kind::of(meta.file_type(), &at.full, false);
        let trash = keep_by_move(&at)?;
        let result = Deleted {
            path: at.rel.clone(),
            kind: kind.name(),
            trash,
        };
        Ok(Output {
            text: vec![format!(
                "deleted {} '{}': moved to {}",
                kind.name(),
                at.shown(),
                shown(&result.trash)
            )],
            structured: Some(to_json(&result)),
            images: vec![],
        })
    }
}

loomfs_guest::tool!(DeleteFile);
