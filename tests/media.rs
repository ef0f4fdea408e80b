//! End to end: `read_file` of images and audio with the real binary over
//! stdio. Images come back as MCP image content and audio as MCP audio
//! content, the MIME type told by the bytes (a `.png` holding JPEG bytes is
//! sent as JPEG); an SVG as its text; other binaries and files over the
//! read limit refused naming what they are; denied names (as asked, in every position,
//! through a symlink) and paths out of the root refused with nothing read;
//! `read_file` still answers images as before; every call audited.

mod common;

use base64::Engine as _;
use common::*;
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::json;

const PNG: &[u8] =
    b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89";
const JPEG: &[u8] = b"\xff\xd8\xff\xe0\0\x10JFIF\0\x01\x01\0\0\x01\0\x01\0\0\xff\xd9";

/// A WAV header (44 bytes) and `samples` bytes of silence.
fn wav(samples: usize) -> Vec<u8> {
    let mut v = b"RIFF".to_vec();
    v.extend(((36 + samples) as u32).to_le_bytes());
    v.extend(b"WAVEfmt ");
    v.extend(16u32.to_le_bytes());
    v.extend(1u16.to_le_bytes()); // PCM
    v.extend(1u16.to_le_bytes()); // mono
    v.extend(8000u32.to_le_bytes());
    v.extend(8000u32.to_le_bytes());
    v.extend(1u16.to_le_bytes());
    v.extend(8u16.to_le_bytes());
    v.extend(b"data");
    v.extend((samples as u32).to_le_bytes());
    v.extend(std::iter::repeat_n(0x80u8, samples));
    v
}

/// An ID3v2 tag, then an MPEG-1 layer III frame header and padding.
fn mp3() -> Vec<u8> {
    let mut v = b"ID3\x03\0\0\0\0\0\0".to_vec();
    v.extend(b"\xff\xfb\x90\x64");
    v.extend([0u8; 60]);
    v
}

const SVG: &str = "<?xml version=\"1.0\"?>\n<!-- a box -->\n<svg xmlns=\"http://www.w3.org/2000/svg\" \
                   width=\"4\" height=\"4\"><rect width=\"4\" height=\"4\"/></svg>\n";

fn fixture() -> (Env, std::path::PathBuf) {
    let env = Env::new();
    env.write("m/sound.wav", wav(100))
        .write("m/song.mp3", mp3())
        .write("m/box.svg", SVG)
        .write("m/photo.png", JPEG)
        .write("m/real.png", PNG)
        .write("m/clip.ogg", b"OggS\0\x02\0\0\0\0\0\0\0\0rest")
        .write("m/clip.flac", b"fLaC\0\0\0\x22rest")
        .write("m/clip.m4a", b"\0\0\0\x20ftypM4A \0\0\0\0isom")
        .write("m/pic.bmp", b"BM\x3a\0\0\0\0\0\0\0\x36\0\0\0(\0\0\0")
        .write("m/anim.gif", b"GIF89a\x01\0\x01\0\0\0\0;")
        .write("m/pic.webp", b"RIFF\x1a\0\0\0WEBPVP8 \0\0\0\0")
        .write("m/long.wav", wav(5000))
        .write("m/notes.txt", "BM is not a bitmap\n")
        .write("m/doc.pdf", b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n")
        .write(
            "m/data.zip",
            b"PK\x03\x04\x14\0\0\0\x08\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0",
        )
        .write("m/blob.bin", b"\x01\x02\0\0\x03")
        .write("m/.env", wav(10))
        .write("m/id_rsa.png", PNG)
        .write("m/sub/.env", PNG)
        .write("m/.git/logo.png", PNG)
        .write("outside/secret.png", PNG)
        .symlink(".env", "m/alias.wav")
        .symlink("../outside/secret.png", "m/link_out.png");
    let config = env.config(&format!(
        r#"
        audit_log = "{}"

        [[roots]]
        name = "m"
        path = "m"
        role = "reference"
        max_read_bytes = 4096
        "#,
        env.path("audit.log").display()
    ));
    (env, config)
}

fn media(r: &CallToolResult) -> (&str, Vec<u8>) {
    let block = r
        .content
        .iter()
        .find_map(|c| match c {
            ContentBlock::Image(i) => Some((i.mime_type.as_str(), i.data.as_str())),
            ContentBlock::Audio(a) => Some((a.mime_type.as_str(), a.data.as_str())),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no image or audio content: {r:?}"));
    let data = base64::engine::general_purpose::STANDARD
        .decode(block.1)
        .unwrap();
    (block.0, data)
}

fn is_audio(r: &CallToolResult) -> bool {
    r.content
        .iter()
        .any(|c| matches!(c, ContentBlock::Audio(_)))
}

#[tokio::test]
async fn images_and_audio_come_back_as_their_content_with_the_type_of_their_bytes() {
    let (env, config) = fixture();
    let client = start(&config).await;
    let mut results = Vec::new();
    for (path, mime, audio) in [
        ("sound.wav", "audio/wav", true),
        ("song.mp3", "audio/mpeg", true),
        ("clip.ogg", "audio/ogg", true),
        ("clip.flac", "audio/flac", true),
        ("clip.m4a", "audio/mp4", true),
        ("real.png", "image/png", false),
        ("photo.png", "image/jpeg", false),
        ("pic.bmp", "image/bmp", false),
        ("anim.gif", "image/gif", false),
        ("pic.webp", "image/webp", false),
    ] {
        let r = call_ok(&client, "read_file", json!({"root": "m", "path": path})).await;
        let (got, data) = media(&r);
        assert_eq!(got, mime, "{path}");
        assert_eq!(is_audio(&r), audio, "{path}");
        assert_eq!(data, std::fs::read(env.path(&format!("m/{path}"))).unwrap());
        let s = structured(&r);
        assert_eq!(
            (s["path"].as_str(), s["mime_type"].as_str()),
            (Some(path), Some(mime))
        );
        assert_eq!(s["size"], data.len());
        results.push(r);
    }
    // The name said PNG, the bytes JPEG: sent as JPEG, and said.
    let photo = &results[6];
    assert_eq!(
        structured(photo)["note"],
        "the name says image/png, the bytes are image/jpeg: sent as image/jpeg"
    );
    assert!(
        text(photo).contains("image 'photo.png' (image/jpeg, 22 B)"),
        "{}",
        text(photo)
    );
    assert!(text(&results[0]).starts_with("audio 'sound.wav' (audio/wav, 144 B)"));
    assert_eq!(structured(&results[0]).get("note"), None);

    // An SVG is text: its source, no image content.
    let svg = call_ok(
        &client,
        "read_file",
        json!({"root": "m", "path": "box.svg"}),
    )
    .await;
    assert_eq!(text(&svg), SVG);
    assert_eq!(structured(&svg)["content"], SVG);
    assert!(svg.content.iter().all(|c| c.as_text().is_some()));
    results.push(svg);

    // read_file still answers an image as image content, by its bytes.
    let old = call_ok(
        &client,
        "read_file",
        json!({"root": "m", "path": "photo.png"}),
    )
    .await;
    assert_eq!(media(&old).0, "image/jpeg");
    results.push(old);
    assert_clean(&env, &results);
}

#[tokio::test]
async fn anything_else_is_refused_naming_what_it_is() {
    let (env, config) = fixture();
    let before = (env.snapshot_of("m"), env.snapshot_of("outside"));
    let client = start(&config).await;
    let mut results = Vec::new();
    for (path, needle) in [
        (
            "data.zip",
            "'data.zip' is a binary file (application/zip, 30 B) and is not shown: of binary \
             files, read_file sends images and audio (png, jpeg, gif, webp, bmp; wav, mp3, ogg, \
             flac, m4a)",
        ),
        (
            "blob.bin",
            "'blob.bin' is a binary file (5 B) and is not shown",
        ),
        (
            "long.wav",
            "'long.wav' is 4.9 KiB, over this root's read limit of 4.0 KiB",
        ),
        ("sub", "'sub' is a directory; use list_directory"),
        ("nope.wav", "'nope.wav' does not exist"),
    ] {
        let r = call(&client, "read_file", json!({"root": "m", "path": path})).await;
        assert_refused(&r, needle);
        results.push(r);
    }
    // Denied names, as asked, in every position and through a symlink, and
    // paths out of the root: refused by rule before anything is opened.
    for (path, rule) in [
        (".env", "deny"),
        ("id_rsa.png", "deny"),
        ("sub/.env", "deny"),
        ("sub/../.env", "deny"),
        (".git/logo.png", "deny"),
        ("alias.wav", "deny"),
        ("link_out.png", "confinement"),
        ("../outside/secret.png", "confinement"),
    ] {
        let r = call(&client, "read_file", json!({"root": "m", "path": path})).await;
        assert_refused(&r, &format!("refused by rule '{rule}'"));
        assert!(
            r.content.iter().all(|c| c.as_text().is_some()),
            "{path}: media content in a refusal"
        );
        results.push(r);
    }
    assert_clean(&env, &results);
    assert!((env.snapshot_of("m"), env.snapshot_of("outside")) == before);

    client.cancel().await.unwrap();
    let audit = audit(&env);
    let line = |path: &str| {
        audit
            .iter()
            .find(|l| l["tool"] == "read_file" && l["path"] == path)
            .unwrap_or_else(|| panic!("no audit line for {path}: {audit:?}"))
    };
    assert_eq!(line("data.zip")["decision"], "allow");
    assert_eq!(line("id_rsa.png")["rule"], "deny");
    assert_eq!(line("link_out.png")["rule"], "confinement");
}
