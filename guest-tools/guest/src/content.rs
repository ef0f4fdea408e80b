//! Telling text from binary, and recognising the images returned as image content.
//! UTF-16 text is told here too, by its BOM or its pattern of NUL bytes: what
//! keeps it from being called binary, and what [`crate::encoding`] detects it by.

use encoding_rs::{Encoding, UTF_8, UTF_16BE, UTF_16LE};

/// How many leading bytes decide whether a file is binary.
pub const SNIFF_BYTES: usize = 4096;

/// A file is binary when its first [`SNIFF_BYTES`] hold a NUL byte and are
/// not UTF-16 text: text in any ASCII-compatible encoding has no NUL, while
/// nearly every binary format has one within its header; UTF-16 has them
/// in a pattern (see [`is_utf16`]), looked at only then.
pub fn is_binary(head: &[u8]) -> bool {
    // memchr: vector compares (simd128) where `contains` goes byte by byte.
    memchr::memchr(0, &head[..head.len().min(SNIFF_BYTES)]).is_some() && !is_utf16(head)
}

/// Whether the head of a file is UTF-16 text (by BOM or by pattern): what
/// keeps it from being called binary for its NUL bytes. A BOM'd head
/// holding a U+0000 unit is not: text has none.
pub fn is_utf16(head: &[u8]) -> bool {
    let head = &head[..head.len().min(SNIFF_BYTES)];
    match Encoding::for_bom(head) {
        Some((e, n)) if e != UTF_8 => !units(&head[n..], e == UTF_16LE).any(|u| u == 0),
        Some(_) => false,
        None => utf16_by_pattern(head, false).is_some(),
    }
}

/// The code units of `bytes` (an odd last byte left out).
fn units(bytes: &[u8], le: bool) -> impl Iterator<Item = u16> + '_ {
    bytes.chunks_exact(2).map(move |u| {
        let pair = [u[0], u[1]];
        if le {
            u16::from_le_bytes(pair)
        } else {
            u16::from_be_bytes(pair)
        }
    })
}

/// UTF-16 without a BOM, told by its NUL bytes in the first
/// [`SNIFF_BYTES`]: at least half the units have a zero byte, all on the
/// same side, none is U+0000, and the units are text (paired surrogates,
/// no control character but tab, line breaks and form feed). A binary file
/// of 16-bit numbers fails the last test: small numbers are controls.
pub(crate) fn utf16_by_pattern(bytes: &[u8], complete: bool) -> Option<&'static Encoding> {
    let head = &bytes[..bytes.len().min(SNIFF_BYTES) & !1];
    if head.len() < 4 || (complete && bytes.len() % 2 == 1) {
        return None;
    }
    let (mut high_zero, mut low_zero) = (0usize, 0usize);
    for u in head.chunks_exact(2) {
        match (u[0], u[1]) {
            (0, 0) => return None,
            (_, 0) => high_zero += 1,
            (0, _) => low_zero += 1,
            _ => {}
        }
    }
    let count = head.len() / 2;
    let le = if high_zero * 2 >= count && low_zero == 0 {
        true
    } else if low_zero * 2 >= count && high_zero == 0 {
        false
    } else {
        return None;
    };
    let cut = head.len() < bytes.len();
    let mut pending_high = false;
    for u in units(head, le) {
        match u {
            0xD800..=0xDBFF if !pending_high => pending_high = true,
            0xDC00..=0xDFFF if pending_high => pending_high = false,
            0xD800..=0xDFFF => return None,
            _ if pending_high => return None,
            0x09 | 0x0A | 0x0C | 0x0D => {}
            0..0x20 | 0x7F => return None,
            _ => {}
        }
    }
    // A high surrogate may end a head cut in the middle of a pair.
    if pending_high && !cut {
        return None;
    }
    Some(if le { UTF_16LE } else { UTF_16BE })
}

/// The MIME type of an image format MCP clients display, by its magic bytes.
pub fn image_mime(head: &[u8]) -> Option<&'static str> {
    if head.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if head.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if head.starts_with(b"GIF87a") || head.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if head.len() >= 12 && &head[..4] == b"RIFF" && &head[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_binaries_are_binary_and_utf16_text_is_not() {
        assert!(!is_binary(b"fn main() {}\n"));
        assert!(!is_binary(b"caf\xE9 cr\xE8me\n"));
        assert!(is_binary(
            b"\x7FELF\x02\x01\x01\0\0\0\0\0\0\0\0\0\x03\0\x3E\0"
        ));
        assert!(is_binary(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x10"));
        // Pseudo-random bytes (a xorshift), as a compressed file looks.
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let random: Vec<u8> = (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        assert!(is_binary(&random));
        let le: Vec<u8> = "a UTF-16 text\r\n"
            .encode_utf16()
            .flat_map(u16::to_le_bytes)
            .collect();
        let be: Vec<u8> = "a UTF-16 text\r\n"
            .encode_utf16()
            .flat_map(u16::to_be_bytes)
            .collect();
        assert!(!is_binary(&le));
        assert!(!is_binary(&be));
        assert!(!is_binary(&[b"\xFF\xFE".as_slice(), &le].concat()));
        assert!(!is_binary(&[b"\xFE\xFF".as_slice(), &be].concat()));
    }
}
