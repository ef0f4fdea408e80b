//! A text file read whole, to be changed and written back as it was
//! stored (`edit_file`, `apply_patch`).
//!
//! What cannot be changed as text is refused before anything is written: a
//! special file, a directory, a file over the root's read limit, a binary
//! file, and a file whose decoding would not be written back byte for byte
//! (bytes invalid in its encoding, a character with two byte forms), since
//! writing it back would change bytes the call did not touch.

use std::io::Read;
use std::path::Path;

use crate::content::is_binary;
use crate::encoding::{self, Format};
use crate::{Kind, ToolError, human_bytes, io_error, shown, special_file};

/// A file's text, decoded, and how it is stored.
#[derive(PartialEq)]
pub struct Text {
    pub text: String,
    pub format: Format,
}

/// The file (`rel`) as text, refusing what cannot be edited as text or
/// would not be written back byte for byte.
pub fn read_text(full: &Path, rel: &str, max: u64) -> Result<Text, ToolError> {
    // The host refuses to open special files (FIFO, socket, device); a
    // refusal is named by a stat.
    let file = std::fs::File::open(full).map_err(|e| match Kind::at(full, true) {
        kind if kind.is_special() && kind != Kind::Unknown => special_file(rel, kind, "edited"),
        _ => io_error(rel, &e),
    })?;
    let meta = file.metadata().map_err(|e| io_error(rel, &e))?;
    let kind = Kind::of(meta.file_type(), full, true);
    if kind.is_special() && kind != Kind::Unknown {
        return Err(special_file(rel, kind, "edited"));
    }
    let shown = shown(rel);
    if kind != Kind::File {
        return Err(ToolError::Refused(format!(
            "'{shown}' is a {}, not a text file",
            kind.name()
        )));
    }
    if meta.len() > max {
        return Err(ToolError::Refused(format!(
            "'{shown}' is {}, over this root's read limit of {}; it cannot be edited whole",
            human_bytes(meta.len()),
            human_bytes(max)
        )));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io_error(rel, &e))?;
    if bytes.len() as u64 > max {
        return Err(ToolError::Refused(format!(
            "'{shown}' grew past this root's read limit while being read"
        )));
    }
    if is_binary(&bytes) {
        return Err(ToolError::Refused(format!(
            "'{shown}' is a binary file and cannot be edited as text"
        )));
    }
    let decoded = encoding::decode(&bytes);
    let name = decoded.format.name();
    match decoded.round_trips(&bytes) {
        Ok(()) => Ok(Text {
            text: decoded.text,
            format: decoded.format,
        }),
        Err(at) if decoded.malformed => Err(ToolError::Refused(format!(
            "'{shown}' is not valid {name} (at byte offset {at}) and cannot be edited as text \
             without changing bytes no edit touches"
        ))),
        Err(at) => Err(ToolError::Refused(format!(
            "'{shown}' is {name} text that would not be written back byte for byte (from byte \
             offset {at}: a character with two byte forms) and cannot be edited as text"
        ))),
    }
}
