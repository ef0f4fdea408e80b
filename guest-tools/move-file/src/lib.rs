//! `move_file`: rename a file or directory, within a root or to another.
//!
//! Both ends were resolved by the host with their own operation: write on
//! both, plus delete on the source root when the destination is another
//! root (the entry leaves it). An existing destination file is replaced only
//! with `overwrite`, after its content is kept in the trash; a directory is
//! never replaced. Between filesystems a file is copied then removed.

use std::fs;
use std::io;

use loomfs_guest::transfer::{
    TransferArgs, Transferred, check_destination, copy_tree, locate_ends, path_arguments, within,
};
use loomfs_guest::write::{Publish, create_parents, keep_by_link, keep_by_move, replace, unkeep};
use loomfs_guest::{About, Answer, Context, Kind, Permission, ToolError, io_error, shown};

const DESCRIPTION: &str = "Move or rename a file or directory, within a root or to another \
    (destination_root; that needs delete on the source root). An \
    existing destination file is replaced only with overwrite, its \
    content kept in the trash; a directory is never replaced.";

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
    let previous = if exists {
        Some(keep_by_link(&destination, 1)?)
    } else {
        create_parents(&destination.full, &destination.rel)?;
        None
    };
    let mut out = Transferred {
        source: source.rel.clone(),
        destination: destination.rel.clone(),
        destination_root: destination.mount.name.clone(),
        kind: kind.name(),
        overwritten: exists,
        previous,
        ..Transferred::default()
    };
    let across = source.mount.name != destination.mount.name;
    match fs::rename(&source.full, &destination.full) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::CrossesDevices && across => {
            // Another filesystem: copy, then move the source into its
            // root's trash (the host has checked delete there): what the
            // copy skips is kept, nothing is erased.
            if is_dir {
                copy_tree(&source, &destination, &mut out)?;
            } else {
                let mut from =
                    fs::File::open(&source.full).map_err(|e| io_error(&source.rel, &e))?;
                out.bytes = replace(&destination, Publish::New, |f| io::copy(&mut from, f))?.bytes;
            }
            keep_by_move(&source)?;
        }
        Err(e) if e.kind() == io::ErrorKind::CrossesDevices => {
            // Within a root a move is a rename (write permission), which
            // cannot cross filesystems; a copy and a delete would need
            // delete permission, which a move within a root does not ask.
            if let Some(kept) = &out.previous {
                unkeep(&destination, kept);
            }
            return Err(ToolError::Refused(format!(
                "'{}' and '{}' are on different filesystems (one is mounted inside root '{}'), \
                 and a move within a root is a rename, which cannot cross them; nothing was \
                 moved. Use copy_file, then delete_file on the source",
                source.shown(),
                destination.shown(),
                source.mount.name
            )));
        }
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied && across && is_dir => {
            return Err(ToolError::Refused(format!(
                "moving directory '{}' to root '{}' was refused: the roots deny different \
                 names, and entries hidden in one would appear in the other; copy it instead",
                source.shown(),
                destination.mount.name
            )));
        }
        Err(e) => return Err(io_error(&source.rel, &e)),
    }
    let mut text = format!(
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
    if let Some(p) = &out.previous {
        text.push_str(&format!(
            "; the replaced file is kept at {} (root '{}')",
            shown(p),
            out.destination_root
        ));
    }
    Ok(Answer::new(text, out))
}
