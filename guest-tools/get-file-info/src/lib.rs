//! `get_file_info`: metadata of one path (type, size, times, links), and
//! with `hash: true` the SHA-256 of a file's contents.
//!
//! A symlink inside the root is reported as such, with the type of what it
//! points to. A target that cannot be reached reads the same whether it is
//! missing or outside the root, so the answer never maps the disk beyond it.
//!
//! The hash reads the file whole, in reads of what the host gives at once,
//! through the policing filesystem like any read (the byte quota counts
//! them); `max_read_bytes` does not apply, since no content reaches the
//! model. It stops with an error near the call's time limit rather than be
//! cut off by it.

use std::io::Read;
use std::time::Instant;

use loomfs_guest::{
    About, Answer, Context, Kind, Permission, ToolError, human_bytes, io_error, locate, modified,
    sys, timestamp,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Most bytes the host gives in one read (wasmtime-wasi's cap).
const ONE_READ: usize = 64 * 1024;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    root: String,
    /// Relative to the root.
    path: String,
    // The description says what it adds.
    #[serde(default)]
    hash: bool,
}

/// What is known of the path; what is not (or false) is left out.
#[derive(Serialize, JsonSchema)]
struct Info {
    path: String,
    /// Type of what the path names, symlinks followed.
    #[serde(rename = "type")]
    kind: &'static str,
    /// Set when the path is a symlink.
    #[serde(skip_serializing_if = "loomfs_guest::is_false")]
    is_symlink: bool,
    /// Bytes, for files.
    #[serde(skip_serializing_if = "Option::is_none")]
    size: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    modified: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    accessed: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    created: Option<String>,
    /// Hard link count.
    #[serde(skip_serializing_if = "Option::is_none")]
    links: Option<u64>,
    /// With `hash`: SHA-256 of the contents, lowercase hex.
    #[serde(skip_serializing_if = "Option::is_none")]
    sha256: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

const DESCRIPTION: &str = "Type, size, times, links and symlink flag of a file or directory \
    ('.' is the root); hash adds a file's SHA-256.";

loomfs_guest::tool!(GetFileInfo(Args) -> Info, {
    About::new("get_file_info", DESCRIPTION, Permission::Read)
});

fn call(ctx: Context, args: Args) -> Result<Answer<Info>, ToolError> {
    let started = Instant::now();
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
    let sha256 = match (args.hash, kind) {
        (false, _) => None,
        (true, Kind::File) => {
            // Stop while there is still time to answer.
            Some(
                sha256(&at.full, loomfs_guest::soft_deadline(&ctx, started)).map_err(
                    |e| match e {
                        Hashing::Io(e) => io_error(&at.rel, &e),
                        Hashing::Time(done) => ToolError::Refused(format!(
                            "'{}': hashing stopped near the time limit ({} ms) after {} of {}: \
                     the file is too large to hash in one call",
                            at.shown(),
                            ctx.limits.time_limit_ms,
                            human_bytes(done),
                            human_bytes(meta.len())
                        )),
                    },
                )?,
            )
        }
        (true, other) => {
            return Err(ToolError::InvalidArguments(format!(
                "'hash' applies to files; '{}' is a {}",
                at.shown(),
                other.name()
            )));
        }
    };
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
        sha256,
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
    if let Some(h) = &info.sha256 {
        text.push_str(&format!(", sha256 {h}"));
    }
    if let Some(n) = &info.note {
        text.push_str(&format!("; {n}"));
    }
    Ok(Answer::new(text, info))
}

/// Why a hash was not made.
enum Hashing {
    Io(std::io::Error),
    /// The deadline came after this many bytes.
    Time(u64),
}

/// The SHA-256 of the file at `path`, as lowercase hex, read before
/// `deadline`.
fn sha256(path: &std::path::Path, deadline: Instant) -> Result<String, Hashing> {
    let mut file = std::fs::File::open(path).map_err(Hashing::Io)?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0; ONE_READ];
    let mut done = 0u64;
    loop {
        if Instant::now() >= deadline {
            return Err(Hashing::Time(done));
        }
        let n = file.read(&mut buffer).map_err(Hashing::Io)?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
        done += n as u64;
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}
