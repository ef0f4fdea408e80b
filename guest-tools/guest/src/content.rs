//! Telling text from binary, and recognising the images returned as image content.

/// How many leading bytes decide whether a file is binary.
pub const SNIFF_BYTES: usize = 4096;

/// A file is binary when its first [`SNIFF_BYTES`] hold a NUL byte and are
/// not UTF-16 text: text in any ASCII-compatible encoding has no NUL, while
/// nearly every binary format has one within its header; UTF-16 has them
/// in a pattern (see [`crate::encoding::is_utf16`]), looked at only then.
pub fn is_binary(head: &[u8]) -> bool {
    // memchr: vector compares (simd128) where `contains` goes byte by byte.
    memchr::memchr(0, &head[..head.len().min(SNIFF_BYTES)]).is_some()
        && !crate::encoding::is_utf16(head)
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
