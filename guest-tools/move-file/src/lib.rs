//! `move_file`: rename a file or directory, within a root or to another.
//!
//! Both ends were resolved by the host with their own operation: write on
//! both, plus delete on the source root when the destination is another
//! root (the entry leaves it). An existing destination file is replaced only
//! with `overwrite` (the host keeps its content in the trash); a directory
//! is never replaced. Between roots, or between filesystems, the entry is
//! copied then removed (the host keeps what is removed).

use std::fs;
use std::io;

use loomfs_guest::transfer::{
    TransferArgs, Transferred, check_destination, copy_tree, locate_ends, path_arguments, within,
};
use loomfs_guest::write::{Publish, create_parents, replace};
use loomfs_guest::{About, Answer, Context, Kind, Permission, ToolError, io_error};

const DESCRIPTION: &str = "Move or rename a file or directory, within a root or to destination_root (needing delete on \
    root). An existing file is replaced only with overwrite.";

loomfs_guest::tool!(MoveFile(TransferArgs) -> Transferred, {
    About::new("move_file", DESCRIPTION, Permission::Write)
        .paths(path_arguments(Permission::Write, Some(Permission::Delete)))
});

fn call(ctx: Context, args: TransferArgs) -> Result<Answer<Transferred>, ToolError> {
    let (source, destination) = locate_ends(&ctx, &args)?;
    let meta = fs::symlink_metadata(&source.full).map_err(|e| io_error(&source.rel, &e))?;
    let kind = Kind::of(meta.file_type(), &source.full, false);
    let is_dir = kind == Kind::Directory;
    if is_dir && within(&source, &destination) {
        return Err(ToolError::Refused(format!(
            "cannot move '{}' into itself",
            source.shown()
        )));
    }
    let exists = check_destination(&destination, is_dir, args.overwrite)?;
    if !exists {
        create_parents(&destination.full, &destination.rel)?;
    }
    let mut out = Transferred {
        source: source.rel.clone(),
        destination: destination.rel.clone(),
        destination_root: destination.mount.name.clone(),
        kind: kind.name(),
        overwritten: exists,
        previous: None,
        ..Transferred::default()
    };
    let across = source.mount.name != destination.mount.name;
    match fs::rename(&source.full, &destination.full) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::CrossesDevices && across => {
            // Another root (or filesystem): copy, then remove the source
            // (the host has checked delete there, and keeps it whole in
            // that root's trash, with what the copy skips: nothing is
            // erased).
            if is_dir {
                copy_tree(&source, &destination, &mut out)?;
            } else {
                let mut from =
                    fs::File::open(&source.full).map_err(|e| io_error(&source.rel, &e))?;
                let publish = if exists {
                    Publish::Replace
                } else {
                    Publish::New
                };
                out.bytes = replace(&destination, publish, |f| io::copy(&mut from, f))?.bytes;
                out.files = 1;
            }
            let removed = if is_dir {
                fs::remove_dir(&source.full).or_else(|e| match e.kind() {
                    // A standalone run: nothing hidden, nothing kept.
                    io::ErrorKind::DirectoryNotEmpty => fs::remove_dir_all(&source.full),
                    _ => Err(e),
                })
            } else {
                fs::remove_file(&source.full)
            };
            removed.map_err(|e| io_error(&source.rel, &e))?;
        }
        Err(e) if e.kind() == io::ErrorKind::CrossesDevices => {
            // Within a root a move is a rename (write permission), which
            // cannot cross filesystems; a copy and a delete would need
            // delete permission, which a move within a root does not ask.
            return Err(ToolError::Refused(format!(
                "'{}' and '{}' are on different filesystems (one is mounted inside root '{}'), \
                 and a move within a root is a rename, which cannot cross them; nothing was \
                 moved. Use copy_file, then delete_file on the source",
                source.shown(),
                destination.shown(),
                source.mount.name
            )));
        }
        Err(e) => return Err(io_error(&source.rel, &e)),
    }
    let text = format!(
        "moved {} '{}' to '{}'{}",
        out.kind,
        source.shown(),
        destination.shown(),
        if across {
            format!(" in root '{}'", out.destination_root)
        } else {
            String::new()
        }
    );
    Ok(Answer::new(text, out))
}
