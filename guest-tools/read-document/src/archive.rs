//! Archives: a zip, tar, tar.gz (tgz) or tar.zst, listed or one member
//! read, all in memory: nothing is extracted to disk. A member's name is
//! judged before anything shows it: an absolute name or one with `..` is
//! refused by rule (`member-path`), and one the root's deny list hides (the
//! host's verdict on `<archive>/<member>`, through the `documents`
//! interface) is as if it were not there. A member inflates to at most
//! [`MAX_MEMBER_BYTES`]; an archive inside an archive is not opened.

use std::io::{Cursor, Read};

use serde::Serialize;

use crate::xml::{MAX_MEMBER_BYTES, bounded};

/// How an archive is packed, by its first bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Packing {
    Zip,
    Tar,
    TarGz,
    TarZst,
}

impl Packing {
    pub fn name(self) -> &'static str {
        match self {
            Packing::Zip => "zip",
            Packing::Tar => "tar",
            Packing::TarGz => "tar.gz",
            Packing::TarZst => "tar.zst",
        }
    }
}

/// The packing of `bytes` (a zip that is a document is the document's, so
/// ask [`crate::detect::format`] first).
pub fn packing(bytes: &[u8]) -> Option<Packing> {
    if bytes.starts_with(b"PK\x03\x04") || bytes.starts_with(b"PK\x05\x06") {
        Some(Packing::Zip)
    } else if bytes.starts_with(&[0x1f, 0x8b]) {
        Some(Packing::TarGz)
    } else if bytes.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Some(Packing::TarZst)
    } else if bytes.get(257..262) == Some(b"ustar") {
        Some(Packing::Tar)
    } else {
        None
    }
}

/// A member as a listing shows it.
#[derive(Serialize)]
pub struct Member {
    /// Its name by the naming rule; a directory's ends in `/`.
    pub name: String,
    pub size: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub modified: Option<String>,
    #[serde(rename = "type")]
    pub kind: &'static str,
}

/// What a member's header says, its name as the archive holds it.
struct Header {
    raw: String,
    size: u64,
    modified: Option<String>,
    kind: &'static str,
}

/// A member's name inside the archive, `/`-separated, without `./` and
/// empty parts; `Err` for a name that would leave it (absolute, a drive,
/// `..`).
pub fn member_path(raw: &str) -> Result<String, ()> {
    let drive = raw.len() > 1 && raw.as_bytes()[1] == b':';
    if raw.starts_with(['/', '\\']) || drive {
        return Err(());
    }
    let mut parts = Vec::new();
    for part in raw.split(['/', '\\']) {
        match part {
            "" | "." => {}
            ".." => return Err(()),
            part => parts.push(part),
        }
    }
    Ok(parts.join("/"))
}

/// Whether the host hides `path` (an archive's root-relative path, then
/// the member's) in `root`.
pub type Hidden<'a> = &'a dyn Fn(&str) -> bool;

/// The members of an archive, in order: at most `max` shown, those the
/// deny list hides left out unseen, those whose names would leave the
/// archive counted (`refused`).
pub struct Listing {
    pub members: Vec<Member>,
    pub refused: u64,
    pub truncated: bool,
}

pub fn list(packing: Packing, bytes: &[u8], hidden: Hidden, max: usize) -> Result<Listing, String> {
    let mut listing = Listing {
        members: Vec::new(),
        refused: 0,
        truncated: false,
    };
    walk(packing, bytes, &mut |header, _| {
        let Ok(name) = member_path(&header.raw) else {
            listing.refused += 1;
            return Walk::Next;
        };
        if name.is_empty() || hidden(&name) {
            return Walk::Next;
        }
        if listing.members.len() == max {
            listing.truncated = true;
            return Walk::Stop;
        }
        let mut shown = loomfs_guest::shown(&name).into_owned();
        if header.kind == "directory" {
            shown.push('/');
        }
        listing.members.push(Member {
            name: shown,
            size: header.size,
            modified: header.modified,
            kind: header.kind,
        });
        Walk::Next
    })?;
    Ok(listing)
}

/// Why a member was not read.
pub enum Missing {
    /// No member has that name (or the deny list hides it).
    NotThere,
    /// It is not a file.
    NotAFile(&'static str),
}

/// The contents of the file member `wanted` (a [`member_path`]), at most
/// [`MAX_MEMBER_BYTES`] of them inflated.
pub fn read(
    packing: Packing,
    bytes: &[u8],
    wanted: &str,
    hidden: Hidden,
) -> Result<Result<Vec<u8>, Missing>, String> {
    if hidden(wanted) {
        return Ok(Err(Missing::NotThere));
    }
    let mut found: Option<Result<Result<Vec<u8>, Missing>, String>> = None;
    walk(packing, bytes, &mut |header, content| {
        if member_path(&header.raw).as_deref() != Ok(wanted) {
            return Walk::Next;
        }
        found = Some(match (header.kind, content) {
            ("file", Some(reader)) => match bounded(reader, MAX_MEMBER_BYTES) {
                Ok(data) if data.len() as u64 > MAX_MEMBER_BYTES => Err(format!(
                    "its member inflates past {} MiB (a decompression bomb?)",
                    MAX_MEMBER_BYTES >> 20
                )),
                Ok(data) => Ok(Ok(data)),
                Err(e) => Err(format!(
                    "its member does not inflate ({})",
                    crate::read_error(&e)
                )),
            },
            (kind, _) => Ok(Err(Missing::NotAFile(kind))),
        });
        Walk::Stop
    })?;
    found.unwrap_or(Ok(Err(Missing::NotThere)))
}

/// Calls `each(name, contents)` for each file member, in order, while it
/// returns true: those whose names would leave the archive, and those the
/// deny list hides, left out. Errs when the archive does not read or a
/// member inflates past [`MAX_MEMBER_BYTES`].
pub fn each_file(
    packing: Packing,
    bytes: &[u8],
    hidden: Hidden,
    each: &mut dyn FnMut(&str, Vec<u8>) -> bool,
) -> Result<(), String> {
    let mut failed = None;
    walk(packing, bytes, &mut |header, content| {
        let (Ok(name), Some(reader)) = (member_path(&header.raw), content) else {
            return Walk::Next;
        };
        if header.kind != "file" || name.is_empty() || hidden(&name) {
            return Walk::Next;
        }
        match bounded(reader, MAX_MEMBER_BYTES) {
            Ok(data) if data.len() as u64 > MAX_MEMBER_BYTES => {
                failed = Some(format!(
                    "a member inflates past {} MiB (a decompression bomb?)",
                    MAX_MEMBER_BYTES >> 20
                ));
                Walk::Stop
            }
            Ok(data) => match each(&name, data) {
                true => Walk::Next,
                false => Walk::Stop,
            },
            Err(e) => {
                failed = Some(format!(
                    "a member does not inflate ({})",
                    crate::read_error(&e)
                ));
                Walk::Stop
            }
        }
    })?;
    failed.map_or(Ok(()), Err)
}

enum Walk {
    Next,
    Stop,
}

/// Calls `f` on each member's header, with a reader of its contents when
/// `f` may want them (a file).
fn walk(
    packing: Packing,
    bytes: &[u8],
    f: &mut dyn FnMut(Header, Option<&mut dyn Read>) -> Walk,
) -> Result<(), String> {
    match packing {
        Packing::Zip => zip_walk(bytes, f),
        Packing::Tar => tar_walk(bytes, f),
        Packing::TarGz => tar_walk(flate2::read::GzDecoder::new(bytes), f),
        Packing::TarZst => {
            let decoder = ruzstd::decoding::StreamingDecoder::new(bytes)
                .map_err(|e| format!("its zstd frame does not read ({e})"))?;
            tar_walk(decoder, f)
        }
    }
}

fn zip_walk(
    bytes: &[u8],
    f: &mut dyn FnMut(Header, Option<&mut dyn Read>) -> Walk,
) -> Result<(), String> {
    let mut zip = zip::ZipArchive::new(Cursor::new(bytes))
        .map_err(|e| format!("its zip does not read ({e})"))?;
    for i in 0..zip.len() {
        let mut member = zip
            .by_index(i)
            .map_err(|e| format!("its member {} does not read ({e})", i + 1))?;
        let kind = if member.is_dir() {
            "directory"
        } else if member.is_symlink() {
            "symlink"
        } else if member.is_file() {
            "file"
        } else {
            "other"
        };
        let modified = member.last_modified().map(|t| {
            format!(
                "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
                t.year(),
                t.month(),
                t.day(),
                t.hour(),
                t.minute(),
                t.second()
            )
        });
        let header = Header {
            raw: String::from_utf8_lossy(member.name_raw()).into_owned(),
            size: member.size(),
            modified,
            kind,
        };
        let content: Option<&mut dyn Read> = (kind == "file").then_some(&mut member);
        if let Walk::Stop = f(header, content) {
            break;
        }
    }
    Ok(())
}

fn tar_walk(
    reader: impl Read,
    f: &mut dyn FnMut(Header, Option<&mut dyn Read>) -> Walk,
) -> Result<(), String> {
    let unreadable =
        |e: std::io::Error| format!("its tar does not read ({})", crate::read_error(&e));
    let mut archive = tar::Archive::new(reader);
    for entry in archive.entries().map_err(unreadable)? {
        let mut entry = entry.map_err(unreadable)?;
        let kind = match entry.header().entry_type() {
            tar::EntryType::Regular | tar::EntryType::Continuous => "file",
            tar::EntryType::Directory => "directory",
            tar::EntryType::Symlink | tar::EntryType::Link => "symlink",
            _ => "other",
        };
        let modified = entry
            .header()
            .mtime()
            .ok()
            .map(|s| std::time::UNIX_EPOCH + std::time::Duration::from_secs(s))
            .and_then(|t| loomfs_guest::timestamp(Ok(t)));
        let header = Header {
            raw: String::from_utf8_lossy(&entry.path_bytes()).into_owned(),
            size: entry.size(),
            modified,
            kind,
        };
        let content: Option<&mut dyn Read> = (kind == "file").then_some(&mut entry);
        if let Walk::Stop = f(header, content) {
            break;
        }
    }
    Ok(())
}
