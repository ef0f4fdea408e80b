//! `apply_patch`: several text files of one root changed in one call, all
//! or nothing.
//!
//! The patch is Codex's format or a unified diff, told apart by its first
//! line (`patch.rs`, `codex.rs`, `unified.rs`). Every file it names is read
//! and every hunk matched in memory first (`apply.rs`, by `edit_file`'s
//! rules); only then is anything written. So a hunk that does not apply, a
//! file added where one stands, a file updated or deleted that is not
//! there, or a character a file's encoding cannot hold refuses the whole
//! patch, nothing changed. Writing can still fail part way (a full disk, a
//! removal the root's role does not allow): the error then says what was
//! already changed. What needs delete permission goes first (removals,
//! then moves, each taking back the copy it wrote when the removal is
//! refused), then updates, then new files, so a role without delete
//! permission fails before anything changes.
//!
//! Files are decoded and written back as `edit_file` does
//! (`loomfs_guest::text`, `loomfs_guest::encoding`): encoding, BOM and CRLF
//! kept; binary files, and files whose decoding would not write back byte
//! for byte, refused. New files are UTF-8, with the line breaks of the
//! patch's lines. An update replaces its file atomically
//! (`loomfs_guest::write::replace`), a new file is published only where
//! nothing stands, a deleted file is unlinked: keeping what a call replaces
//! or removes is the host's, and so is publishing the call's changes
//! together when it succeeds (a patch is all or nothing under loom-fs even
//! when a write fails part way). The host resolved the root alone; the
//! patch's paths are checked as text (relative, no `..`) and policed by the
//! host as every operation is: the deny list, the role, the client roots,
//! and the audit log names each file the call changed.
//!
//! It needs delete permission (a patch may delete files): it is listed only
//! on roots that grant it.

use std::io::Write;

use loomfs_guest::encoding::{self, Format};
use loomfs_guest::text::{Text, read_text};
use loomfs_guest::write::{Publish, replace};
use loomfs_guest::{
    About, Answer, Context, Kind, Located, PathArgument, Permission, ToolError, io_error, locate,
    shown, special_file,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use similar::{ChangeTag, TextDiff};

mod apply;
mod codex;
mod patch;
mod unified;

use patch::{Action, FileChange};

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Args {
    root: String,
    patch: String,
    // Said in the description, where it costs fewer bytes.
    #[serde(default)]
    dry_run: bool,
}

#[derive(Serialize, JsonSchema)]
struct Patched {
    /// One per file, in the patch's order.
    files: Vec<Changed>,
    /// With dry_run: the unified diff of every file.
    #[serde(skip_serializing_if = "Option::is_none")]
    diff: Option<String>,
}

#[derive(Serialize, JsonSchema)]
struct Changed {
    path: String,
    action: Done,
    /// Where a move put it.
    #[serde(skip_serializing_if = "Option::is_none")]
    moved_to: Option<String>,
    /// Lines added.
    added: u64,
    /// Lines removed.
    removed: u64,
    /// Where the previous content was kept (root-relative, in the trash).
    previous: Option<String>,
}

#[derive(Serialize, JsonSchema, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
enum Done {
    Add,
    Update,
    Delete,
    Move,
}

/// Every client shows this, the name and the input schema to its model on
/// every turn: kept to 450 bytes together (a unit test measures them).
const DESCRIPTION: &str = "Edit several text files, all or nothing: a Codex patch \
    (*** Begin Patch) or a unified diff. Each hunk must match once. dry_run: diff only.";

loomfs_guest::tool!(ApplyPatch(Args) -> Patched, {
    About::new("apply_patch", DESCRIPTION, Permission::Delete).paths(vec![PathArgument {
        root_field: "root".into(),
        root_fallback: None,
        // The root alone: the patch names the files, each checked as it is
        // opened (see the module).
        path_field: String::new(),
        permission: Permission::Delete,
        across_roots: None,
        optional: true,
    }])
});

fn call(ctx: Context, args: Args) -> Result<Answer<Patched>, ToolError> {
    let changes = patch::parse(&args.patch)
        .map_err(|e| ToolError::InvalidArguments(format!("{e}; nothing was changed")))?;
    let max = locate(&ctx, &args.root, ".")?.mount.max_read_bytes;
    let plans = changes
        .iter()
        .map(|change| Plan::new(&ctx, &args.root, change, max))
        .collect::<Result<Vec<Plan>, ToolError>>()?;
    let files: Vec<Changed> = plans.iter().map(Plan::changed).collect();
    let mut lines: Vec<String> = plans.iter().map(Plan::line).collect();
    if args.dry_run {
        let diff: String = plans.iter().map(Plan::diff).collect();
        lines.insert(
            0,
            "dry run: nothing was written; the patch would do:".into(),
        );
        let mut text = vec![lines.join("\n")];
        if !diff.is_empty() {
            text.push(diff.clone());
        }
        return Ok(Answer {
            text,
            result: Patched {
                files,
                diff: Some(diff),
            },
            images: vec![],
        });
    }
    for plan in &plans {
        plan.still_as_read(max)?;
    }
    write(&plans)?;
    Ok(Answer::new(lines.join("\n"), Patched { files, diff: None }))
}

/// One file's change, worked out in memory before anything is written.
struct Plan<'a> {
    change: &'a FileChange,
    at: Located<'a>,
    /// Whether a deletion removes a symlink (not what it points to).
    symlink: bool,
    /// Where an update moves it.
    to: Option<Located<'a>>,
    /// The file as read: an update's, a text file's that is deleted.
    before: Option<Text>,
    /// What it becomes (none for a deletion), and its bytes.
    after: Option<(String, Vec<u8>)>,
    /// Hunks matched ignoring whitespace at line ends, and where.
    tolerant: Vec<(usize, (usize, usize))>,
    added: u64,
    removed: u64,
}

impl<'a> Plan<'a> {
    fn new(
        ctx: &'a Context,
        root: &str,
        change: &'a FileChange,
        max: u64,
    ) -> Result<Plan<'a>, ToolError> {
        let at = locate(ctx, root, &change.path)?;
        let rel = at.rel.clone();
        let rel = rel.as_str();
        let mut plan = Plan {
            change,
            symlink: false,
            to: None,
            before: None,
            after: None,
            tolerant: Vec::new(),
            added: 0,
            removed: 0,
            at,
        };
        match &change.action {
            Action::Add { content } => {
                absent(
                    &plan.at,
                    "Add File never replaces a file; update it instead",
                )?;
                plan.after = Some((content.clone(), content.as_bytes().to_vec()));
            }
            Action::Delete { hunks } => {
                let meta =
                    std::fs::symlink_metadata(&plan.at.full).map_err(|e| io_error(rel, &e))?;
                let kind = Kind::of(meta.file_type(), &plan.at.full, false);
                match kind {
                    Kind::File => {}
                    Kind::Symlink if hunks.is_empty() => {}
                    Kind::Directory => {
                        return Err(ToolError::Refused(format!(
                            "'{}' is a directory: a patch deletes files; nothing was changed",
                            shown(rel)
                        )));
                    }
                    kind if kind.is_special() && kind != Kind::Symlink => {
                        return Err(special_file(rel, kind, "deleted by a patch"));
                    }
                    kind => {
                        return Err(ToolError::Refused(format!(
                            "'{}' is a {}, not a text file; nothing was changed",
                            shown(rel),
                            kind.name()
                        )));
                    }
                }
                // A file that is not text is deleted all the same, unless
                // hunks say what it holds; a symlink is not read through.
                plan.symlink = kind == Kind::Symlink;
                plan.before = match read_text(&plan.at.full, rel, max) {
                    _ if plan.symlink => None,
                    Ok(text) => Some(text),
                    Err(_) if hunks.is_empty() => None,
                    Err(e) => return Err(e),
                };
                if let Some(before) = plan.before.as_ref().filter(|_| !hunks.is_empty()) {
                    let left = apply::apply(&before.text, hunks)
                        .map_err(|m| ToolError::Refused(m.message(rel, hunks)))?
                        .text;
                    if !left.is_empty() {
                        return Err(ToolError::Refused(format!(
                            "'{}' is deleted by the patch, but its hunks leave {} line(s) of it; \
                             nothing was changed",
                            shown(rel),
                            left.lines().count()
                        )));
                    }
                }
            }
            Action::Update { move_to, hunks } => {
                let before = read_text(&plan.at.full, rel, max)?;
                let (applied, bytes) = updated(&before, hunks, rel)?;
                if let Some(to) = move_to {
                    let to = locate(ctx, root, to)?;
                    absent(&to, "a patch moves a file only to a free path")?;
                    plan.to = Some(to);
                }
                plan.tolerant = applied.tolerant;
                plan.after = Some((applied.text, bytes));
                plan.before = Some(before);
            }
        }
        let before = plan.before.as_ref().map_or("", |t| t.text.as_str());
        let after = plan.after.as_ref().map_or("", |(t, _)| t.as_str());
        (plan.added, plan.removed) = counts(before, after);
        Ok(plan)
    }

    fn done(&self) -> Done {
        match &self.change.action {
            Action::Add { .. } => Done::Add,
            Action::Delete { .. } => Done::Delete,
            Action::Update { .. } if self.to.is_some() => Done::Move,
            Action::Update { .. } => Done::Update,
        }
    }

    /// Whether an update leaves the text as it was (then nothing is
    /// written, unless it moves).
    fn unchanged(&self) -> bool {
        matches!((&self.before, &self.after), (Some(b), Some((a, _))) if b.text == *a)
    }

    fn changed(&self) -> Changed {
        Changed {
            path: self.at.rel.clone(),
            action: self.done(),
            moved_to: self.to.as_ref().map(|to| to.rel.clone()),
            added: self.added,
            removed: self.removed,
            previous: None,
        }
    }

    /// What is (or would be) done: `updated 'src/a.rs'`.
    fn what(&self) -> String {
        let shown = self.at.shown();
        match (self.done(), &self.to) {
            (Done::Add, _) => format!("added '{shown}'"),
            (Done::Delete, _) if self.symlink => format!("deleted the symlink '{shown}'"),
            (Done::Delete, _) => format!("deleted '{shown}'"),
            (Done::Move, Some(to)) => format!("moved '{shown}' to '{}'", to.shown()),
            _ => format!("updated '{shown}'"),
        }
    }

    /// The file's line of the text: what is done, the lines it adds and
    /// removes, how its hunks matched.
    fn line(&self) -> String {
        let mut line = format!("{} (+{} -{})", self.what(), self.added, self.removed);
        if self.unchanged() {
            line.push_str("; its hunks leave its text as it was");
        }
        for (hunk, (first, last)) in &self.tolerant {
            let lines = if first == last {
                format!("line {first}")
            } else {
                format!("lines {first}-{last}")
            };
            line.push_str(&format!(
                "; hunk {hunk} matched ignoring whitespace at line ends ({lines}), written with \
                 the file's indentation"
            ));
        }
        if let Some(before) = &self.before
            && self.after.is_some()
            && before.format != Format::UTF8
        {
            line.push_str(&format!(
                "; in {}, as the file was",
                before.format.describe()
            ));
        }
        line
    }

    /// The file's unified diff, its headers naming it by the rule (as
    /// `edit_file`'s do).
    fn diff(&self) -> String {
        let old = match self.done() {
            Done::Add => "/dev/null".to_string(),
            _ => shown(&format!("a/{}", self.at.rel)).into_owned(),
        };
        let new = match (self.done(), &self.to) {
            (Done::Delete, _) => "/dev/null".to_string(),
            (_, Some(to)) => shown(&format!("b/{}", to.rel)).into_owned(),
            _ => shown(&format!("b/{}", self.at.rel)).into_owned(),
        };
        if self.done() == Done::Delete && self.before.is_none() && !self.symlink {
            return format!("Binary files {old} and {new} differ\n");
        }
        let before = self.before.as_ref().map_or("", |t| t.text.as_str());
        let after = self.after.as_ref().map_or("", |(t, _)| t.as_str());
        let diff = TextDiff::from_lines(before, after)
            .unified_diff()
            .context_radius(3)
            .header(&old, &new)
            .to_string();
        if diff.is_empty() && (self.done() != Done::Update) {
            // A move, an empty file added or deleted, a symlink deleted:
            // its headers alone.
            return format!("--- {old}\n+++ {new}\n");
        }
        diff
    }

    /// Refuses the patch if a file it read changed since (an editor, a
    /// build): the hunks were matched against what it was.
    fn still_as_read(&self, max: u64) -> Result<(), ToolError> {
        let Some(before) = &self.before else {
            return Ok(());
        };
        let rel = self.at.rel.as_str();
        if read_text(&self.at.full, rel, max).ok().as_ref() != Some(before) {
            return Err(ToolError::Refused(format!(
                "'{}' changed while the patch was being applied; nothing was written; read it \
                 again",
                shown(rel)
            )));
        }
        Ok(())
    }

    /// Writes this file's change.
    fn write(&self) -> Result<(), ToolError> {
        let rel = self.at.rel.as_str();
        let content = |f: &mut std::fs::File, bytes: &[u8]| {
            f.write_all(bytes)?;
            Ok(bytes.len() as u64)
        };
        match (&self.after, &self.to) {
            (None, _) => std::fs::remove_file(&self.at.full).map_err(|e| io_error(rel, &e)),
            (Some((_, bytes)), Some(to)) => {
                replace(to, Publish::New, |f| content(f, bytes))?;
                if let Err(e) = std::fs::remove_file(&self.at.full) {
                    // Not moved: the copy is taken back (this call made it).
                    let _ = std::fs::remove_file(&to.full);
                    return Err(io_error(rel, &e));
                }
                Ok(())
            }
            (Some(_), None) if self.unchanged() => Ok(()),
            (Some((_, bytes)), None) => {
                let publish = if self.done() == Done::Add {
                    Publish::New
                } else {
                    Publish::Replace
                };
                replace(&self.at, publish, |f| content(f, bytes)).map(drop)
            }
        }
    }
}

/// `before` with `hunks` applied, and its bytes in the file's encoding
/// and BOM (the line breaks are the file's already).
fn updated(
    before: &Text,
    hunks: &[patch::Hunk],
    rel: &str,
) -> Result<(apply::Applied, Vec<u8>), ToolError> {
    let applied =
        apply::apply(&before.text, hunks).map_err(|m| ToolError::Refused(m.message(rel, hunks)))?;
    let bytes = encoding::encode(&applied.text, before.format)
        .map_err(|e| unencodable(&e, before.format, rel))?;
    Ok((applied, bytes))
}

/// Writes every change: removals, moves, updates, new files (see the
/// module). A failure part way says what was already written.
fn write(plans: &[Plan]) -> Result<(), ToolError> {
    let mut done: Vec<String> = Vec::new();
    for kind in [Done::Delete, Done::Move, Done::Update, Done::Add] {
        for plan in plans.iter().filter(|p| p.done() == kind) {
            plan.write().map_err(|e| already(e, &done))?;
            done.push(plan.what());
        }
    }
    Ok(())
}

/// `e`, saying what the patch had already changed when it came.
fn already(e: ToolError, done: &[String]) -> ToolError {
    if done.is_empty() {
        return e;
    }
    let note = |m: String| {
        format!(
            "{m}\nThe patch was applied in part: before this, it {}. Nothing else was written.",
            done.join("; ")
        )
    };
    match e {
        ToolError::InvalidArguments(m) => ToolError::InvalidArguments(note(m)),
        ToolError::NotFound(m) => ToolError::NotFound(note(m)),
        ToolError::Refused(m) => ToolError::Refused(note(m)),
        ToolError::Io(m) => ToolError::Io(note(m)),
    }
}

/// Refuses a path where something stands (`rule` says why).
fn absent(at: &Located, rule: &str) -> Result<(), ToolError> {
    match std::fs::symlink_metadata(&at.full) {
        Ok(_) => Err(ToolError::Refused(format!(
            "'{}' already exists: {rule}; nothing was changed",
            at.shown()
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_error(&at.rel, &e)),
    }
}

/// Lines `after` adds to `before` and removes from it.
fn counts(before: &str, after: &str) -> (u64, u64) {
    let diff = TextDiff::from_lines(before, after);
    diff.iter_all_changes()
        .fold((0, 0), |(added, removed), c| match c.tag() {
            ChangeTag::Insert => (added + 1, removed),
            ChangeTag::Delete => (added, removed + 1),
            ChangeTag::Equal => (added, removed),
        })
}

/// The refusal of a hunk bringing a character the file's encoding cannot
/// hold.
fn unencodable(e: &encoding::Unencodable, format: Format, rel: &str) -> ToolError {
    ToolError::Refused(format!(
        "{e}, the encoding of '{}' (line and column in the patched text); nothing was changed. \
         Use characters {} has, or convert the file first with write_file and an encoding that \
         has it, such as \"UTF-8\"",
        shown(rel),
        format.name()
    ))
}

#[cfg(test)]
mod tests;
