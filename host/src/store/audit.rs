//! The audit log: one JSON line per path resolution (and per refusal by the
//! guest filesystem), to a file with size-based rotation or to stderr —
//! never stdout, which under stdio is the JSON-RPC channel.
//!
//! Paths are the model's, names chosen by whoever made the files: JSON
//! escapes only C0 controls, so a line also escapes DEL, C1 controls,
//! U+2028/U+2029 and format characters (bidi controls, zero-width ones) as
//! `\uXXXX` ([`AuditFormatter`]), the naming rule's classes: the line stays
//! valid JSON with the exact name, and nothing in it acts on an operator's
//! terminal or reorders what an editor shows.
//!
//! Rotation keeps `audit.log`, `audit.log.1` … `audit.log.N`: when the next
//! line would push the live file past `max_bytes`, each backup moves up one
//! number (the oldest is dropped) and a fresh `audit.log` starts. Writers
//! share one mutex, so lines from concurrent calls never interleave.
//!
//! A line that cannot be written (a full disk) is kept, with those after it,
//! in a backlog bounded to [`BACKLOG_BYTES`] (past it, lines are counted and
//! a line saying how many were lost is written in their place), and the log
//! fails closed: [`Audit::writable`] tells the tool path to refuse every
//! call until the backlog could be written, which it tries first, in order,
//! before each call and each new line. A line is never torn: a write cut
//! short is cut back off the file.
//!
//! When the server stops ([`Audit::close`]), lines still waiting are tried
//! once more; what still cannot be written goes to stderr, each line as it
//! would have been in the log behind [`UNWRITTEN_PREFIX`], then a count:
//! no record disappears silently. Lines logged after that (a call still
//! finishing) go the same way if the log still fails.

use std::collections::VecDeque;
use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde::Serialize;
use serde_json::ser::Formatter;

use crate::config::AuditTarget;
use crate::policy::{Permission, Rule, is_escaped, push_unicode_escape};
use rotating::{Rotating, lock_path};

/// What one audit line records.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Record<'a> {
    pub tool: &'a str,
    pub root: &'a str,
    /// Root-relative, as the model wrote it.
    pub path: &'a str,
    pub op: &'a str,
    pub decision: Decision,
    /// The check that refused, or null.
    pub rule: Option<Rule>,
    pub duration_ms: f64,
    pub bytes: u64,
    /// The archive member a `read_document` call read (listed when
    /// absent), as the model wrote it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub member: Option<&'a str>,
    /// Where the previous content of the path went (`.mcp-trash/…`), for a
    /// change that kept it.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub trash: &'a [&'a str],
    /// Why the host stopped the call before it answered (`cancelled`,
    /// `timeout`, `memory`, `crashed`), if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped: Option<Rule>,
    /// The client's address, for a call over HTTP.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client: Option<&'a str>,
    /// The first 12 hex digits of a third-party component's SHA-256: which
    /// build of the tool made the call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sha256: Option<&'a str>,
    /// The call's id (its trash entry's name): `trash list` shows it, and
    /// `trash undo` takes it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call: Option<&'a str>,
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Allow,
    Deny,
}

impl<'a> Record<'a> {
    /// A record for `op` on `root`/`path` by `tool`, allowed, zero cost.
    pub fn new(tool: &'a str, root: &'a str, path: &'a str, op: Permission) -> Record<'a> {
        Record {
            tool,
            root,
            path,
            op: op.as_str(),
            decision: Decision::Allow,
            rule: None,
            duration_ms: 0.0,
            bytes: 0,
            member: None,
            trash: &[],
            stopped: None,
            client: None,
            sha256: None,
            call: None,
        }
    }

    /// The call's id.
    pub fn call(mut self, id: Option<&'a str>) -> Record<'a> {
        self.call = id;
        self
    }

    /// The call's tool is third-party component of this (short) digest.
    pub fn component(mut self, digest: Option<&'a str>) -> Record<'a> {
        self.sha256 = digest;
        self
    }

    pub fn member(mut self, member: Option<&'a str>) -> Record<'a> {
        self.member = member;
        self
    }

    pub fn client(mut self, client: Option<&'a str>) -> Record<'a> {
        self.client = client;
        self
    }

    pub fn stopped(mut self, reason: Option<Rule>) -> Record<'a> {
        self.stopped = reason;
        self
    }

    pub fn kept(mut self, trash: &'a [&'a str]) -> Record<'a> {
        self.trash = trash;
        self
    }

    pub fn denied(mut self, rule: Rule) -> Record<'a> {
        self.decision = Decision::Deny;
        self.rule = Some(rule);
        self
    }

    pub fn took(mut self, duration: Duration, bytes: u64) -> Record<'a> {
        // Microsecond precision is plenty and keeps lines short.
        self.duration_ms = (duration.as_secs_f64() * 1e6).round() / 1e3;
        self.bytes = bytes;
        self
    }
}

/// The `audit_lost` line saying `lost` lines were dropped past the
/// backlog's bound, with its newline.
fn lost_line(lost: u64) -> Option<String> {
    let record = Record {
        bytes: lost,
        ..Record::new("", "", "", Permission::Read).denied(Rule::AuditLost)
    };
    let mut line = to_line(&Line {
        ts: humantime::format_rfc3339_millis(SystemTime::now()).to_string(),
        record: &record,
    })
    .ok()?;
    line.push('\n');
    Some(line)
}

/// Serialises `value` as one JSON line, the naming rule's classes escaped.
fn to_line(value: &impl Serialize) -> serde_json::Result<String> {
    let mut out = Vec::new();
    value.serialize(&mut serde_json::Serializer::with_formatter(
        &mut out,
        AuditFormatter,
    ))?;
    // The formatter writes only what serde_json gives it and ASCII escapes.
    String::from_utf8(out).map_err(|e| serde::ser::Error::custom(e.to_string()))
}

/// serde_json's compact format, except that inside strings each character
/// of the naming rule's classes ([`is_escaped`]) that serde_json would write
/// raw is written as a `\uXXXX` escape: still JSON, the same string.
struct AuditFormatter;

impl Formatter for AuditFormatter {
    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        let mut rest = fragment;
        while let Some((at, c)) = rest.char_indices().find(|&(_, c)| is_escaped(c)) {
            writer.write_all(&rest.as_bytes()[..at])?;
            let mut escape = String::new();
            push_unicode_escape(&mut escape, c);
            writer.write_all(escape.as_bytes())?;
            rest = &rest[at + c.len_utf8()..];
        }
        writer.write_all(rest.as_bytes())
    }
}

#[derive(Serialize)]
struct Line<'a> {
    ts: String,
    #[serde(flatten)]
    record: &'a Record<'a>,
}

/// Where lines go.
enum Sink {
    Stderr,
    File(Rotating),
    /// Lines kept in memory (tests).
    #[cfg(test)]
    Memory(Vec<String>),
    /// Lines kept in memory, every write failing while the flag is set
    /// (tests).
    #[cfg(test)]
    Failing(bool, Vec<String>),
}

/// Most bytes of lines kept while the log cannot be written: 1 MiB is some
/// thousands of lines, more than the calls that run before the log fails
/// closed (each call in flight writes a few) and the refusals after it.
pub const BACKLOG_BYTES: usize = 1 << 20;

/// Lines not written yet, oldest first.
#[derive(Default)]
struct Backlog {
    lines: VecDeque<String>,
    bytes: usize,
    /// Lines not kept, the backlog being full.
    lost: u64,
    /// Why the last write failed, while lines wait.
    error: Option<String>,
}

impl Backlog {
    fn push(&mut self, line: String) {
        if self.bytes + line.len() > BACKLOG_BYTES {
            self.lost += 1;
        } else {
            self.bytes += line.len();
            self.lines.push_back(line);
        }
    }

    fn is_empty(&self) -> bool {
        self.lines.is_empty() && self.lost == 0
    }
}

struct Inner {
    sink: Sink,
    backlog: Backlog,
    /// The server is stopping: lines that cannot be written go to stderr.
    closed: bool,
}

/// Before each audit line written to stderr at exit because the log could
/// not take it: an operator tells them from the server's messages, and
/// strips it to get the line the log would have held.
pub const UNWRITTEN_PREFIX: &str = "audit-unwritten: ";

/// What [`Audit::close`] could not write to the log, and wrote to stderr.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Spilled {
    /// Lines written to stderr.
    pub lines: usize,
    /// Lines lost before, past the backlog's bound (their `audit_lost`
    /// line is among `lines`).
    pub lost: u64,
}

impl Inner {
    fn write(&mut self, line: &str) -> io::Result<()> {
        match &mut self.sink {
            // Best effort: stderr is the client's to read or close (a
            // client that closes it would otherwise stop every call), and
            // the log's messages would go there too. Failing closed is for
            // the file.
            Sink::Stderr => {
                let _ = io::stderr().lock().write_all(line.as_bytes());
                Ok(())
            }
            Sink::File(file) => file.write_line(line.as_bytes()),
            #[cfg(test)]
            Sink::Memory(lines) => {
                lines.push(line.to_string());
                Ok(())
            }
            #[cfg(test)]
            Sink::Failing(fail, lines) => {
                if *fail {
                    Err(io::Error::from_raw_os_error(28))
                } else {
                    lines.push(line.to_string());
                    Ok(())
                }
            }
        }
    }

    /// Writes the backlog, oldest first, then how many lines were lost;
    /// stops at the first failure. Whether it is empty now.
    fn flush(&mut self) -> bool {
        while let Some(line) = self.backlog.lines.front().cloned() {
            if let Err(e) = self.write(&line) {
                self.failed(e);
                return false;
            }
            self.backlog.bytes -= line.len();
            self.backlog.lines.pop_front();
        }
        if self.backlog.lost > 0 {
            if let Some(line) = lost_line(self.backlog.lost)
                && let Err(e) = self.write(&line)
            {
                self.failed(e);
                return false;
            }
            self.backlog.lost = 0;
        }
        if self.backlog.error.take().is_some() {
            tracing::warn!("the audit log can be written again: calls are served again");
        }
        true
    }

    /// Writes the backlog to stderr, each line behind [`UNWRITTEN_PREFIX`]
    /// (the count of lines lost as its `audit_lost` line), then how many;
    /// empties it. For the server's exit, when the log cannot take them.
    fn spill(&mut self) -> Spilled {
        let mut out = Vec::new();
        let lost = self.backlog.lost;
        let mut lines: Vec<String> = self.backlog.lines.drain(..).collect();
        if lost > 0 {
            lines.extend(lost_line(lost));
        }
        for line in &lines {
            out.extend_from_slice(UNWRITTEN_PREFIX.as_bytes());
            out.extend_from_slice(line.as_bytes());
        }
        let error = self.backlog.error.take().unwrap_or_default();
        out.extend_from_slice(
            format!(
                "loom-fs-mcp: {} audit line(s) could not be written to the audit log ({error}) and \
                 are above, each behind '{}'{}\n",
                lines.len(),
                UNWRITTEN_PREFIX.trim_end(),
                if lost > 0 {
                    format!(
                        "; {lost} more were lost past the backlog's bound (the audit_lost line)"
                    )
                } else {
                    String::new()
                }
            )
            .as_bytes(),
        );
        // One write: the lines stay together, and stderr is all that is left.
        let _ = io::stderr().lock().write_all(&out);
        self.backlog = Backlog::default();
        Spilled {
            lines: lines.len(),
            lost,
        }
    }

    fn failed(&mut self, e: io::Error) {
        if self.backlog.error.is_none() {
            tracing::error!(
                "audit log write failed: {e}; calls are refused until the audit log can be written"
            );
        }
        self.backlog.error = Some(e.to_string());
    }
}

/// The audit log, shared by every call; a clone is the same log (the
/// server keeps one to close it at exit).
#[derive(Clone)]
pub struct Audit {
    inner: Arc<Mutex<Inner>>,
}

/// Why calls are refused: the audit log cannot be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unwritable {
    /// The error of the last write tried.
    pub error: String,
    /// Lines waiting to be written (kept), and lines lost past the bound.
    pub waiting: usize,
    pub lost: u64,
}

impl std::fmt::Display for Unwritable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "refused by rule '{}': the audit log cannot be written ({}), and no call is served \
             unrecorded; {} line(s) wait to be written first{}. Calls are served again as soon as \
             the audit log can be written (the operator frees space on its disk); try again later",
            Rule::Audit,
            self.error,
            self.waiting,
            if self.lost > 0 {
                format!(" ({} more were lost, past the backlog's bound)", self.lost)
            } else {
                String::new()
            }
        )
    }
}

impl Audit {
    /// Opens the audit target; a file that cannot be opened is an error, so
    /// the server refuses to start rather than run unaudited.
    pub fn open(target: &AuditTarget, max_bytes: u64, backups: u32) -> io::Result<Audit> {
        let sink = match target {
            AuditTarget::Stderr => Sink::Stderr,
            AuditTarget::File(path) => Sink::File(Rotating::open(path, max_bytes, backups)?),
        };
        Ok(Audit::with(sink))
    }

    fn with(sink: Sink) -> Audit {
        Audit {
            inner: Arc::new(Mutex::new(Inner {
                sink,
                backlog: Backlog::default(),
                closed: false,
            })),
        }
    }

    /// Whether calls may be served: every line so far is written (lines
    /// waiting are tried now, oldest first). Fails closed: while a line
    /// waits, every call is refused.
    pub fn writable(&self) -> Result<(), Unwritable> {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if inner.backlog.is_empty() || inner.flush() {
            return Ok(());
        }
        Err(Unwritable {
            error: inner.backlog.error.clone().unwrap_or_default(),
            waiting: inner.backlog.lines.len(),
            lost: inner.backlog.lost,
        })
    }

    /// Whether `target` could be opened, without taking it (for `check`,
    /// which may run beside the server using it).
    pub fn probe(target: &AuditTarget) -> io::Result<()> {
        match target {
            AuditTarget::Stderr => Ok(()),
            AuditTarget::File(path) => {
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    fs::create_dir_all(dir)?;
                }
                OpenOptions::new().create(true).append(true).open(path)?;
                // The lock too, without taking it.
                OpenOptions::new()
                    .create(true)
                    .truncate(false)
                    .write(true)
                    .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
                    .open(lock_path(path))
                    .map(drop)
            }
        }
    }

    #[cfg(test)]
    fn memory() -> Audit {
        Audit::with(Sink::Memory(Vec::new()))
    }

    /// Writes one line, after any line still waiting. A line that cannot be
    /// written waits in the backlog (and the log refuses calls until it is
    /// written, see [`Audit::writable`]); it is reported on stderr once.
    pub fn log(&self, record: &Record<'_>) {
        let line = Line {
            ts: humantime::format_rfc3339_millis(SystemTime::now()).to_string(),
            record,
        };
        let mut text = match to_line(&line) {
            Ok(text) => text,
            Err(e) => {
                tracing::error!("audit line not serialisable: {e}");
                return;
            }
        };
        text.push('\n');
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.backlog.push(text);
        if !inner.flush() && inner.closed {
            inner.spill();
        }
    }

    /// For the server's exit: tries the lines still waiting once more, and
    /// writes to stderr what still cannot be written (see [`Inner::spill`]);
    /// from now on a line that cannot be written goes there at once. What
    /// went to stderr.
    pub fn close(&self) -> Spilled {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.closed = true;
        if inner.backlog.is_empty() || inner.flush() {
            return Spilled::default();
        }
        inner.spill()
    }

    #[cfg(test)]
    fn lines(&self) -> Vec<serde_json::Value> {
        match &self.inner.lock().unwrap().sink {
            Sink::Memory(lines) | Sink::Failing(_, lines) => lines
                .iter()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect(),
            _ => vec![],
        }
    }
}

mod rotating;
#[cfg(test)]
mod tests;
