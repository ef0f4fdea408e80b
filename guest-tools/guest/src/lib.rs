//! What every built-in loom-fs tool component shares.
//!
//! A tool component receives a [`Context`] (the roots of this call, each
//! preopened at `mount.dir`) and its JSON arguments, does plain WASI file I/O
//! under those mounts, and returns an [`Output`] or a [`ToolError`]. It carries
//! no policy: the host has resolved every path argument before the call and
//! polices every filesystem operation during it (denied names are invisible,
//! escapes fail). This crate holds the pieces every tool needs so no guest
//! carries its own copy: the [`Tool`] trait and [`tool!`], which derive a
//! tool's descriptor and JSON Schemas from its argument and result types
//! (`tool.rs`), argument parsing, locating a root-relative path under its
//! mount, naming file types, error mapping, binary detection, timestamps, a
//! breadth-first walk, and for the tools that change text (`edit_file`,
//! `apply_patch`) a file read whole to be written back as it was stored
//! (`text.rs`) and where a text a model quotes is in it (`matcher.rs`).
//!
//! Messages never carry a mount directory: paths are shown relative to their
//! root, and always through [`shown`], the naming rule of `loomfs-names`
//! (the host's too): a name holding a line break, a control, bidi or
//! invisible format character is shown as a JSON string literal, so no file
//! name can forge a line of a listing. Structured results keep exact names.
//! A call whose text shows such a name also carries
//! [`loomfs_names::QUOTED_NOTE`], saying how to act on it: [`tool!`] adds it.

#[cfg(feature = "check")]
pub mod check;
pub mod content;
pub mod encoding;
pub mod glob;
pub mod ignores;
pub mod lines;
pub mod matcher;
pub mod page;
pub mod sys;
pub mod text;
pub mod tool;
pub mod transfer;
pub mod walk;
pub mod write;

use std::borrow::Cow;
use std::cell::Cell;
use std::fs::{FileType, Metadata};
use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::de::DeserializeOwned;

pub use tool::{About, Answer, Tool};

#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "tool-component",
        pub_export_macro: true,
        default_bindings_module: "loomfs_guest::bindings",
    });
}

pub use bindings::exports::loom_fs::tool::tool::{
    Annotations, Context, Descriptor, Guest, Image, Limits, Mount, Output, PathArgument,
    Permission, ToolError,
};

/// Declares this component's tool: `tool!(Name(Args) -> Result, about)`
/// makes `Name` a [`Tool`] whose arguments are `Args`, whose structured
/// result is `Result`, which says `about` (an [`About`]) of itself and
/// whose calls run the crate's function
/// `call(Context, Args) -> Result<Answer<Result>, ToolError>`.
///
/// A wasm build exports it: its descriptor derived from its types
/// ([`tool::describe`]), its calls parsing the arguments and going through
/// [`noted`], so a text showing a quoted name always says how to act on it.
/// Natively there is no component to export; a native test build gets the
/// tool's unit test instead ([`check::readme_examples`], with the
/// dev-dependency's feature `check`).
#[macro_export]
macro_rules! tool {
    ($tool:ident($args:ty) -> $result:ty, $about:expr) => {
        struct $tool;

        impl $crate::Tool for $tool {
            type Args = $args;
            type Result = $result;

            fn about() -> $crate::About {
                $about
            }

            fn call(
                ctx: $crate::Context,
                args: $args,
            ) -> ::std::result::Result<$crate::Answer<$result>, $crate::ToolError> {
                call(ctx, args)
            }
        }

        #[cfg(test)]
        #[test]
        fn readme_examples_fit_the_types_and_the_schemas() {
            $crate::check::readme_examples::<$tool>(include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../docs/tools.md"
            )));
        }

        #[cfg(target_arch = "wasm32")]
        impl $crate::Guest for $tool {
            fn describe() -> $crate::Descriptor {
                $crate::tool::describe::<$tool>()
            }

            fn call(
                ctx: $crate::Context,
                arguments: ::std::string::String,
            ) -> ::std::result::Result<$crate::Output, $crate::ToolError> {
                $crate::noted(|| $crate::tool::call::<$tool>(ctx, &arguments))
            }
        }

        #[cfg(target_arch = "wasm32")]
        $crate::bindings::export!($tool with_types_in $crate::bindings);

        // What the export would call, so that a native build sees it used.
        #[cfg(not(target_arch = "wasm32"))]
        const _: [fn(); 2] = [
            || drop($crate::tool::describe::<$tool>()),
            || drop($crate::tool::call::<$tool>),
        ];
    };
}

thread_local! {
    /// Whether this call has shown a name quoted. Names are shown in dozens
    /// of messages, deep in helpers: recording it where the rule decides,
    /// and adding the note once per call in [`noted`], means no message can
    /// show a quoted name without it. (A component instance serves one call,
    /// on one thread; [`noted`] resets it anyway.)
    static QUOTED: Cell<bool> = const { Cell::new(false) };
}

/// `name` (a root-relative path, or a line of a file shown on one line) as
/// text shows it: the naming rule of `loomfs-names`, as it is or as a JSON
/// string literal. Every name in a message or a rendered result goes
/// through here; structured results keep the exact name.
pub fn shown(name: &str) -> Cow<'_, str> {
    let text = loomfs_names::shown(name);
    if loomfs_names::is_quoted(&text) {
        QUOTED.with(|q| q.set(true));
    }
    text
}

/// Runs one call and, if its text showed a name quoted, adds
/// [`loomfs_names::QUOTED_NOTE`]: as a text block of its own to a result,
/// as a last line to an error.
pub fn noted(call: impl FnOnce() -> Result<Output, ToolError>) -> Result<Output, ToolError> {
    QUOTED.with(|q| q.set(false));
    let result = call();
    if !QUOTED.with(Cell::get) {
        return result;
    }
    let note = loomfs_names::QUOTED_NOTE;
    let with_note = |m: String| format!("{m}\n{note}");
    match result {
        Ok(mut output) => {
            output.text.push(note.to_string());
            Ok(output)
        }
        Err(ToolError::InvalidArguments(m)) => Err(ToolError::InvalidArguments(with_note(m))),
        Err(ToolError::NotFound(m)) => Err(ToolError::NotFound(with_note(m))),
        Err(ToolError::Refused(m)) => Err(ToolError::Refused(with_note(m))),
        Err(ToolError::Io(m)) => Err(ToolError::Io(with_note(m))),
    }
}

/// Hints of a tool that only reads: no change, same answer when repeated.
pub const READ_ONLY: Annotations = Annotations {
    read_only: true,
    destructive: false,
    idempotent: true,
};

/// Hints of a tool that replaces or removes what is there (kept in the
/// trash, but gone from its place).
pub const DESTRUCTIVE: Annotations = Annotations {
    read_only: false,
    destructive: true,
    idempotent: false,
};

/// The usual path argument: a root in `root` and a path in `path`, used for
/// `permission` (`optional`: an omitted path means the root itself).
pub fn root_and_path(permission: Permission, optional: bool) -> Vec<PathArgument> {
    vec![PathArgument {
        root_field: "root".into(),
        root_fallback: None,
        path_field: "path".into(),
        permission,
        across_roots: None,
        optional,
    }]
}

/// The arguments of a tool that takes a root and a path and nothing else
/// (what it does with the path, its description says).
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PathArgs {
    pub root: String,
    /// Relative to the root.
    pub path: String,
}

/// The count argument `name`: `value`, or `default` when not given; refused
/// unless between 1 and `max` (`max_from` says where that ceiling comes
/// from, if not from the tool itself).
pub fn count_arg(
    name: &str,
    value: Option<u32>,
    default: u32,
    max: u32,
    max_from: &str,
) -> Result<u32, ToolError> {
    match value.unwrap_or(default) {
        n if (1..=max).contains(&n) => Ok(n),
        n => Err(ToolError::InvalidArguments(format!(
            "'{name}' must be between 1 and {max}{max_from}, not {n}"
        ))),
    }
}

/// Parses the call's JSON arguments into the tool's argument struct.
///
/// Argument structs use `#[serde(deny_unknown_fields)]`, so a misspelt field
/// is named in the error instead of being ignored.
pub fn parse_args<T: DeserializeOwned>(arguments: &str) -> Result<T, ToolError> {
    serde_json::from_str(arguments).map_err(|e| ToolError::InvalidArguments(format!("{e}")))
}

/// A root-relative path located under its mount.
pub struct Located<'a> {
    pub mount: &'a Mount,
    /// Where the guest opens it.
    pub full: PathBuf,
    /// The exact root-relative path, `.` for the root: what structured
    /// results hold. Text shows it through [`Located::shown`].
    pub rel: String,
}

impl Located<'_> {
    /// The path as text shows it (see [`shown`]).
    pub fn shown(&self) -> Cow<'_, str> {
        shown(&self.rel)
    }
}

/// When a call that can stop early (a search, a hash) should stop to
/// answer in time: a tenth of the call's time limit before it, at least
/// 250 ms (half a short limit).
pub fn soft_deadline(ctx: &Context, started: std::time::Instant) -> std::time::Instant {
    let limit = std::time::Duration::from_millis(ctx.limits.time_limit_ms);
    let margin = (limit / 10).max((limit / 2).min(std::time::Duration::from_millis(250)));
    started + (limit - margin)
}

/// Finds the mount of `root` and joins `path` under it.
///
/// The host has already checked `path` (no absolute path, no escape, no denied
/// name); the checks here only keep a standalone run honest.
pub fn locate<'a>(ctx: &'a Context, root: &str, path: &str) -> Result<Located<'a>, ToolError> {
    let mount =
        ctx.mounts.iter().find(|m| m.name == root).ok_or_else(|| {
            ToolError::InvalidArguments(format!("unknown root '{}'", shown(root)))
        })?;
    if path.starts_with('/') || path.contains('\0') {
        return Err(ToolError::InvalidArguments(format!(
            "path '{}' must be relative to the root",
            shown(path)
        )));
    }
    // By components: `.//a` is `a`, never `/a`; `..` is kept (the host has
    // resolved it, and the filesystem resolves it the same way).
    let parts: Vec<&str> = path
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    let (full, rel) = if parts.is_empty() {
        (PathBuf::from(&mount.dir), ".".to_string())
    } else {
        let rel = parts.join("/");
        (PathBuf::from(&mount.dir).join(&rel), rel)
    };
    Ok(Located { mount, full, rel })
}

/// Maps an I/O error on `rel` (a root-relative path, shown by the rule) to
/// the tool error the model sees.
pub fn io_error(rel: &str, err: &io::Error) -> ToolError {
    let shown = shown(rel);
    match err.kind() {
        io::ErrorKind::NotFound => ToolError::NotFound(format!("'{shown}' does not exist")),
        io::ErrorKind::PermissionDenied => ToolError::Io(format!(
            "'{shown}': access refused by the filesystem policy"
        )),
        io::ErrorKind::NotADirectory => ToolError::Io(format!(
            "'{shown}': a component of the path is not a directory"
        )),
        io::ErrorKind::IsADirectory => ToolError::Refused(format!("'{shown}' is a directory")),
        _ => ToolError::Io(format!("'{shown}': {}", io_kind_text(err))),
    }
}

/// The refusal of a special file (FIFO, socket, device) at `rel`, which a
/// tool `never` opens, writes, copies...: `never` says which.
pub fn special_file(rel: &str, kind: Kind, never: &str) -> ToolError {
    ToolError::Refused(format!(
        "'{}' is a {} (special file): never {never}",
        shown(rel),
        kind.name()
    ))
}

/// The directory `path` of `root` (the root itself when `None`); anything
/// else is refused, with `advice` on what to do instead.
pub fn locate_dir<'a>(
    ctx: &'a Context,
    root: &str,
    path: Option<&str>,
    advice: &str,
) -> Result<Located<'a>, ToolError> {
    let at = locate(ctx, root, path.unwrap_or("."))?;
    let meta = std::fs::metadata(&at.full).map_err(|e| io_error(&at.rel, &e))?;
    if !meta.is_dir() {
        return Err(ToolError::Refused(format!(
            "'{}' is not a directory; {advice}",
            at.shown()
        )));
    }
    Ok(at)
}

/// wasi-libc's errno values for the disk errors (its own numbering, not
/// Linux's): the standard library names none of them on this target, so
/// its text would be "uncategorized error".
const ENOSPC: i32 = 51;
const EDQUOT: i32 = 19;
const EFBIG: i32 = 22;
const EROFS: i32 = 69;
const EMFILE: i32 = 33;

/// The error's kind as words, without the OS code (which means nothing to a
/// model), except the disk errors, whose code an operator looks up. Under
/// loom-fs the host says these in its own words, naming the root; this is
/// the text of a standalone run.
fn io_kind_text(err: &io::Error) -> String {
    let disk = match (err.kind(), err.raw_os_error()) {
        (io::ErrorKind::StorageFull, _) | (_, Some(ENOSPC)) => {
            Some("no space left on the disk (ENOSPC)")
        }
        (io::ErrorKind::QuotaExceeded, _) | (_, Some(EDQUOT)) => {
            Some("disk quota exceeded (EDQUOT)")
        }
        (io::ErrorKind::FileTooLarge, _) | (_, Some(EFBIG)) => Some("file too large (EFBIG)"),
        (io::ErrorKind::ReadOnlyFilesystem, _) | (_, Some(EROFS)) => {
            Some("read-only filesystem (EROFS)")
        }
        (_, Some(EMFILE)) => Some("too many open files (EMFILE)"),
        _ => None,
    };
    if let Some(disk) = disk {
        return disk.to_string();
    }
    let text = err.kind().to_string();
    if text.is_empty() {
        "input/output error".into()
    } else {
        text
    }
}

/// The kind of a filesystem entry, as results name it ([`Kind::name`], and
/// the same name when serialised).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
// In a schema, the field holding a kind says what it is.
#[schemars(description = "")]
pub enum Kind {
    File,
    Directory,
    Symlink,
    Fifo,
    Socket,
    CharDevice,
    BlockDevice,
    Unknown,
}

impl Kind {
    /// The kind std can tell; anything else is looked up with [`Kind::at`].
    fn of_std(ft: FileType) -> Option<Kind> {
        if ft.is_file() {
            Some(Kind::File)
        } else if ft.is_dir() {
            Some(Kind::Directory)
        } else if ft.is_symlink() {
            Some(Kind::Symlink)
        } else {
            None
        }
    }

    /// The kind of `path`, whose std file type is `ft` (symlinks followed or
    /// not, as `ft` was obtained).
    pub fn of(ft: FileType, path: &Path, follow: bool) -> Kind {
        Kind::of_std(ft).unwrap_or_else(|| Kind::at(path, follow))
    }

    /// The exact kind of `path`, from `wasi:filesystem` itself.
    pub fn at(path: &Path, follow: bool) -> Kind {
        sys::kind(path, follow)
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::File => "file",
            Kind::Directory => "directory",
            Kind::Symlink => "symlink",
            Kind::Fifo => "fifo",
            Kind::Socket => "socket",
            Kind::CharDevice => "char_device",
            Kind::BlockDevice => "block_device",
            Kind::Unknown => "unknown",
        }
    }

    /// FIFOs, sockets and devices: never opened, since opening one can block
    /// forever or read without end.
    pub fn is_special(self) -> bool {
        matches!(
            self,
            Kind::Fifo | Kind::Socket | Kind::CharDevice | Kind::BlockDevice | Kind::Unknown
        )
    }
}

/// RFC 3339 UTC timestamp with second precision, or `None` when the
/// filesystem does not record it.
pub fn timestamp(time: io::Result<SystemTime>) -> Option<String> {
    let time = time.ok()?;
    time.duration_since(SystemTime::UNIX_EPOCH).ok()?;
    Some(humantime::format_rfc3339_seconds(time).to_string())
}

/// Modification time of `meta` as RFC 3339.
pub fn modified(meta: &Metadata) -> Option<String> {
    timestamp(meta.modified())
}

/// Modification time of a `wasi:filesystem` stat as RFC 3339.
pub fn modified_at(stat: &wasip2::filesystem::types::DescriptorStat) -> Option<String> {
    let t = stat.data_modification_timestamp?;
    let time = SystemTime::UNIX_EPOCH
        + std::time::Duration::new(t.seconds, t.nanoseconds.min(999_999_999));
    timestamp(Ok(time))
}

/// Whether a flag is false: a structured result leaves such a field out
/// (`#[serde(skip_serializing_if = "loomfs_guest::is_false")]`), since the
/// model pays for every byte.
pub fn is_false(flag: &bool) -> bool {
    !flag
}

/// Whether a count is 0: a structured result leaves such a field out.
pub fn is_zero(count: &u64) -> bool {
    *count == 0
}

/// Serialises a structured result to JSON text.
pub fn to_json<T: serde::Serialize>(value: &T) -> String {
    // Serialising plain structs of strings and numbers cannot fail.
    serde_json::to_string(value).unwrap_or_else(|_| "null".into())
}

/// Human-readable byte count for messages: `1.5 MiB`.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}
