//! Telling text from binary, and recognising the images returned as image content.

/// How many leading bytes decide whether a file is binary.
pub const SNIFF_BYTES: usize = 4096;

/// A file is binary when its first [`SNIFF_BYTES`] hold a NUL byte: text in
/// any ASCII-compatible encoding has none, while nearly every binary format
/// does within its header.
pub fn is_binary(head: &[u8]) -> bool {
    // memchr: vector compares (simd128) where `contains` goes byte by byte.
    memchr::memchr(0, &head[..head.len().min(SNIFF_BYTES)]).is_some()
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
