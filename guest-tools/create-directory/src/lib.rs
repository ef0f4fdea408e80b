//! `create_directory`: a directory and its missing parents. An existing
//! directory is success; an existing file of that name is not.

use loomfs_guest::{About, Answer, Context, PathArgs, Permission, ToolError, io_error, locate};
use schemars::JsonSchema;
use serde::Serialize;

#[derive(Serialize, JsonSchema)]
struct Created {
    path: String,
    /// False when the directory already existed.
    created: bool,
}

const DESCRIPTION: &str = "Create a directory and missing parents; an existing one is success.";

loomfs_guest::tool!(CreateDirectory(PathArgs) -> Created, {
    About::new("create_directory", DESCRIPTION, Permission::Write).additive()
});

fn call(ctx: Context, args: PathArgs) -> Result<Answer<Created>, ToolError> {
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
    Ok(Answer::new(text, result))
}
