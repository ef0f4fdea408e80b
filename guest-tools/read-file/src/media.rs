//! `read_file` of a whole binary file: an image or an audio file as MCP
//! image or audio content.
//!
//! The type comes from the file's bytes (the `infer` crate's magic-byte
//! matchers), never from its name alone: a `.png` holding JPEG bytes is sent
//! as `image/jpeg`, with a note. Images: png, jpeg, gif, webp, bmp. Audio:
//! wav, mp3, ogg, flac, m4a. Any other binary file is refused, naming its
//! type when it has one. (An SVG is text: `read_file` reads it as text.)

use loomfs_guest::content::is_binary;
use loomfs_guest::{Answer, Image, ToolError, human_bytes, shown};
use schemars::JsonSchema;
use serde::Serialize;

#[derive(Serialize, JsonSchema)]
pub(crate) struct Media {
    path: String,
    /// The MIME type, from the file's bytes.
    mime_type: &'static str,
    /// File size in bytes.
    size: u64,
    /// Set when the name's extension says another type than the bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
}

/// What the tool sends, by the MIME type `infer` finds, as MCP clients know
/// the types (`infer` says `audio/x-wav`, `audio/x-flac`, `audio/m4a`).
fn supported(found: &str) -> Option<&'static str> {
    Some(match found {
        "image/png" => "image/png",
        "image/jpeg" => "image/jpeg",
        "image/gif" => "image/gif",
        "image/webp" => "image/webp",
        "image/bmp" => "image/bmp",
        "audio/x-wav" => "audio/wav",
        "audio/mpeg" => "audio/mpeg",
        "audio/ogg" | "audio/opus" => "audio/ogg",
        "audio/x-flac" => "audio/flac",
        "audio/m4a" => "audio/mp4",
        _ => return None,
    })
}

/// The type a file's extension claims, for the note when the bytes differ.
fn claimed(rel: &str) -> Option<&'static str> {
    let ext = rel.rsplit_once('.')?.1.to_ascii_lowercase();
    Some(match ext.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "bmp" => "image/bmp",
        "wav" => "audio/wav",
        "mp3" => "audio/mpeg",
        "ogg" | "oga" | "opus" => "audio/ogg",
        "flac" => "audio/flac",
        "m4a" => "audio/mp4",
        _ => return None,
    })
}

const KINDS: &str = "png, jpeg, gif, webp, bmp; wav, mp3, ogg, flac, m4a";

/// The answer for `data`, the whole of binary file `rel` (at most the
/// root's read limit, `read_file` has checked): an image or audio clip as
/// its content, anything else refused naming its type.
pub(crate) fn answer(rel: &str, data: Vec<u8>) -> Result<Answer<Media>, ToolError> {
    let size = data.len() as u64;
    // A BMP is told by "BM" alone: text starting so is not one (a real
    // header holds NUL bytes).
    let found = infer::get(&data)
        .map(|t| t.mime_type())
        .filter(|m| *m != "image/bmp" || is_binary(&data));
    let mime = match found.and_then(supported) {
        Some(mime) => mime,
        None => return Err(refused(rel, found, size)),
    };
    let note = claimed(rel)
        .filter(|c| *c != mime)
        .map(|c| format!("the name says {c}, the bytes are {mime}: sent as {mime}",));
    let what = if mime.starts_with("audio/") {
        "audio"
    } else {
        "image"
    };
    let mut text = vec![format!(
        "{what} '{}' ({mime}, {})",
        shown(rel),
        human_bytes(size)
    )];
    let images = vec![Image {
        mime_type: mime.into(),
        data,
    }];
    text.extend(note.clone());
    Ok(Answer {
        text,
        result: Media {
            path: rel.to_string(),
            mime_type: mime,
            size,
            note,
        },
        images,
    })
}

/// The refusal of a binary file that is not a supported medium, naming
/// its type when it has a known one.
fn refused(rel: &str, found: Option<&str>, size: u64) -> ToolError {
    let what = found.map(|mime| format!("{mime}, ")).unwrap_or_default();
    ToolError::Refused(format!(
        "'{}' is a binary file ({what}{}) and is not shown: of binary files, read_file \
         sends images and audio ({KINDS})",
        shown(rel),
        human_bytes(size)
    ))
}
