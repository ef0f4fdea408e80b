//! `read_document` on an archive: without `member`, its members listed;
//! with it, that member read as a document, an image, or text by
//! `read_file`'s rules (binary refused, encodings decoded, lines paged).

use loomfs_guest::content::{image_mime, is_binary};
use loomfs_guest::encoding::decode_owned;
use loomfs_guest::{Answer, Image, ToolError, human_bytes, shown};

use crate::archive::{self, Missing, Packing, member_path};
use crate::text::Extracted;
use crate::{DocumentRead, Place, detect, extract, hidden, unreadable};

/// The longest member name asked for: a path's limit on Linux.
const MAX_MEMBER_NAME: usize = 4095;

pub(crate) fn list(
    place: &Place,
    packing: Packing,
    bytes: &[u8],
    max: usize,
) -> Result<Answer<DocumentRead>, ToolError> {
    let hides = |name: &str| hidden(place.root, &format!("{}/{name}", place.rel));
    let listing = archive::list(packing, bytes, &hides, max)
        .map_err(|why| unreadable(place.rel, packing.name(), why))?;
    let mut text: String = listing
        .members
        .iter()
        .map(|m| format!("{}\t{}\n", m.name, human_bytes(m.size)))
        .collect();
    let mut notes = Vec::new();
    if listing.refused > 0 {
        notes.push(format!(
            "{} member{} whose name{} would leave the archive (absolute or with '..') left \
             out by rule 'member-path'",
            listing.refused,
            if listing.refused == 1 { "" } else { "s" },
            if listing.refused == 1 { "" } else { "s" },
        ));
    }
    if listing.truncated {
        notes.push(format!("cut at {max} members (max_list_entries)"));
    }
    let note = (!notes.is_empty()).then(|| notes.join("; "));
    text.push_str(&format!(
        "'{}': {}, {} member{} shown{}. Read one with member.",
        shown(place.rel),
        packing.name(),
        listing.members.len(),
        if listing.members.len() == 1 { "" } else { "s" },
        note.as_ref().map(|n| format!("; {n}")).unwrap_or_default()
    ));
    Ok(Answer::new(
        text,
        DocumentRead {
            path: place.rel.to_string(),
            size: place.size,
            format: packing.name().to_string(),
            members: Some(listing.members),
            truncated: listing.truncated,
            note,
            ..DocumentRead::default()
        },
    ))
}

pub(crate) fn read(
    place: &Place,
    packing: Packing,
    bytes: &[u8],
    member: &str,
) -> Result<Answer<DocumentRead>, ToolError> {
    // Never echoed whole: a name longer than a path may be is no member.
    if member.len() > MAX_MEMBER_NAME {
        return Err(ToolError::InvalidArguments(format!(
            "'member' is {} bytes long; a member's name is at most {MAX_MEMBER_NAME}",
            member.len()
        )));
    }
    let Ok(name) = member_path(member) else {
        return Err(ToolError::Refused(format!(
            "member '{}' is refused by rule 'member-path': a member's name must stay inside \
             its archive (no absolute name, no '..')",
            shown(member)
        )));
    };
    let hides = |name: &str| hidden(place.root, &format!("{}/{name}", place.rel));
    let data = match archive::read(packing, bytes, &name, &hides)
        .map_err(|why| unreadable(place.rel, packing.name(), why))?
    {
        Ok(data) => data,
        Err(Missing::NotThere) => {
            return Err(ToolError::NotFound(format!(
                "'{}' has no member '{}'",
                shown(place.rel),
                shown(&name)
            )));
        }
        Err(Missing::NotAFile(kind)) => {
            return Err(ToolError::Refused(format!(
                "member '{}' of '{}' is a {kind}, not a file",
                shown(&name),
                shown(place.rel)
            )));
        }
    };
    let what = || format!("member '{}' of '{}'", shown(&name), shown(place.rel));
    if let Some(format) = detect::format(&data) {
        let extracted = extract(format, &data)
            .map_err(|why| unreadable(&format!("{}/{name}", place.rel), format.name(), why))?;
        return Ok(place.answer(format.key(), extracted, Some(&name)));
    }
    if archive::packing(&data).is_some() {
        return Err(ToolError::Refused(format!(
            "{} is an archive: an archive inside an archive is not opened",
            what()
        )));
    }
    if let Some(mime) = image_mime(&data) {
        if data.len() as u64 > place.max {
            return Err(ToolError::Refused(format!(
                "{} is a {}, over this root's read limit of {}",
                what(),
                human_bytes(data.len() as u64),
                human_bytes(place.max)
            )));
        }
        let size = data.len() as u64;
        return Ok(Answer {
            text: vec![format!("{}: {mime}, {}.", what(), human_bytes(size))],
            result: DocumentRead {
                path: place.rel.to_string(),
                size: place.size,
                format: mime.to_string(),
                member: Some(name),
                ..DocumentRead::default()
            },
            images: vec![Image {
                mime_type: mime.to_string(),
                data,
            }],
        });
    }
    if is_binary(&data[..data.len().min(4096)]) {
        return Err(ToolError::Refused(format!(
            "{} is a binary file, not text or a document",
            what()
        )));
    }
    let decoded = decode_owned(data, true);
    let mut extracted = Extracted::whole(decoded.text);
    if !decoded.format.is_utf8() {
        extracted.note = Some(format!("{} text, shown decoded", decoded.format.name()));
    }
    Ok(place.answer("text", extracted, Some(&name)))
}
