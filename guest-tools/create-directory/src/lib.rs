//! `create_directory`: a directory and its missing parents. An existing
//! directory is success; an existing file of that name is not.

use loomfs_guest::{
    Annotations, Context, Descriptor, Guest, Output, Permission, ToolError, io_error, locate,
    parse_args, root_and_path, to_json,
};
use serde::{Deserialize, Serialize};

struct CreateDirectory;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    root: String,
    path: String,
}

#[derive(Serialize)]
struct Created {
    path: String,
    created: bool,
}

const INPUT_SCHEMA: &str = r#"{
  "type": "object",
  "properties": {
    "root": {"type": "string", "description": "Name of the root (see list_roots)."},
    "path": {"type": "string", "description": "Directory path relative to the root; parents are created."}
  },
  "required": ["root", "path"],
  "additionalProperties": false
}"#;

const OUTPUT_SCHEMA: &str = r#"{
  "type": "object",
  "properties": {
    "path": {"type": "string"},
    "created": {"type": "boolean", "description": "False when the directory already existed."}
  },
  "required": ["path", "created"]
}"#;

impl Guest for CreateDirectory {
    fn describe() -> Descriptor {
        Descriptor {
            name: "create_directory".into(),
            description: "Create a directory, with its missing parents. An existing directory \
                          is success."
                .into(),
            input_schema: INPUT_SCHEMA.into(),
            output_schema: Some(OUTPUT_SCHEMA.into()),
            permission: Permission::Write,
            annotations: Annotations {
                read_only: false,
                destructive: false,
                idempotent: true,
            },
            path_arguments: root_and_path(Permission::Write, false),
            keeps_history: false,
        }
    }

    fn call(ctx: Context, arguments: String) -> Result<Output, ToolError> {
        let args: Args = parse_args(&arguments)?;
        let at = locate(&ctx, &args.root, &args.path)?;
        let rel = at.rel.as_str();
        let created = match std::fs::metadata(&at.full) {
            Ok(meta) if meta.is_dir() => false,
            Ok(_) => {
                return Err(ToolError::Refused(format!(
                    "'{}' exists and is not a directory",
                    at.shown()
                )));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(&at.full).map_err(|e| io_error(rel, &e))?;
                true
            }
            Err(e) => return Err(io_error(rel, &e)),
        };
        let result = Created {
            path: rel.to_string(),
            created,
        };
        let shown = at.shown();
        let text = if created {
            format!("created directory '{shown}'")
        } else {
            format!("directory '{shown}' already exists")
        };
        Ok(Output {
            text: vec![text],
            structured: Some(to_json(&result)),
            images: vec![],
        })
    }
}

loomfs_guest::tool!(CreateDirectory);
