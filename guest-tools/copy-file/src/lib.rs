//! `copy_file`: copy a file or a directory tree, within a root or to another.
//!
//! The source is read (read on its root), the destination written (write on
//! its root). A file is written atomically; an existing destination file is
//! replaced only with `overwrite` (the host keeps its content in the trash). A
//! directory is copied to a new path only, recursively, skipping symlinks and
//! special files (listed in `skipped`) and, unseen, denied entries.

use std::fs;
use std::io;

use loomfs_guest::transfer::{
    TransferArgs, Transferred, check_destination, copy_tree, locate_ends, path_arguments, within,
};
use loomfs_guest::write::{Publish, replace};
use loomfs_guest::{
    About, Answer, Context, Kind, Permission, ToolError, human_bytes, io_error, special_file,
};

const DESCRIPTION: &str = "Copy a file or directory tree, within a root or to destination_root. An existing file \
    is replaced only with overwrite.";

loomfs_guest::tool!(CopyFile(TransferArgs) -> Transferred, {
    About::new("copy_file", DESCRIPTION, Permission::Write)
        .paths(path_arguments(Permission::Read, None))
});

fn call(ctx: Context, args: TransferArgs) -> Result<Answer<Transferred>, ToolError> {
    let (source, destination) = locate_ends(&ctx, &args)?;
    let meta = fs::metadata(&source.full).map_err(|e| io_error(&source.rel, &e))?;
    let kind = Kind::of(meta.file_type(), &source.full, true);
    let mut out = Transferred {
        source: source.rel.clone(),
        destination: destination.rel.clone(),
        destination_root: destination.mount.name.clone(),
        kind: kind.name(),
        ..Transferred::default()
    };
    match kind {
        Kind::Directory => {
            if within(&source, &destination) {
                return Err(ToolError::Refused(format!(
                    "cannot copy '{}' into itself",
                    source.shown()
                )));
            }
            check_destination(&destination, true, args.overwrite)?;
            copy_tree(&source, &destination, &mut out)?;
        }
        Kind::File => {
            let exists = check_destination(&destination, false, args.overwrite)?;
            let mut from = fs::File::open(&source.full).map_err(|e| io_error(&source.rel, &e))?;
            let publish = if exists {
                Publish::Replace
            } else {
                Publish::New
            };
            let done = replace(&destination, publish, |f| io::copy(&mut from, f))?;
            out.overwritten = exists;
            out.files = 1;
            out.bytes = done.bytes;
        }
        other => return Err(special_file(&source.rel, other, "copied")),
    }
    let mut text = format!(
        "copied {} '{}' to '{}'",
        out.kind,
        source.shown(),
        destination.shown()
    );
    if out.destination_root != args.root {
        text.push_str(&format!(" in root '{}'", out.destination_root));
    }
    if kind == Kind::Directory {
        text.push_str(&format!(
            ": {} files, {} directories, {}",
            out.files,
            out.directories,
            human_bytes(out.bytes)
        ));
    }
    if !out.skipped_shown.is_empty() {
        text.push_str(&format!("; skipped: {}", out.skipped_shown.join(", ")));
    }
    Ok(Answer::new(text, out))
}
