//! Names Windows reads as something other than a file in the directory
//! (issue 19): a path that would leave the root or reach a device or a
//! stream there without a `..` or a symlink. [`refusal`] is a pure function
//! of the path as the model sent it, unit-tested on every platform;
//! `resolve` applies it on Windows builds only, where these names mean what
//! they say (on Linux and macOS `CON.txt` or `a:b` are ordinary names).
//!
//! Refused:
//! - device namespaces `\\?\`, `\\.\`, `\??\` (either slash): they bypass
//!   the Win32 path rules below;
//! - UNC paths `\\server\share`: another machine;
//! - drive prefixes, `C:\x` (absolute) and `C:x` (relative to that drive's
//!   current directory, anywhere);
//! - a `:` in a name: an alternate data stream (`notes.txt:hidden`,
//!   `file::$DATA`);
//! - reserved device names, in any case, with any extension and with
//!   trailing spaces before it (`CON`, `nul.txt`, `Com1 .log`, `LPT¹`,
//!   `CONIN$`), in any component;
//! - a name ending in a dot or a space: Windows strips them, so `.env.` is
//!   `.env` on disk while the deny list sees another name;
//! - characters no Windows name holds (`<>"|?*`, controls);
//! - names shaped like 8.3 short names (`PROGRA~1`, `ENV~1`): Windows may
//!   resolve them to a long name the deny list never saw.

use super::shown;

/// Why Windows would not read `path` as a plain relative path, if it would
/// not.
pub fn refusal(path: &str) -> Option<String> {
    let unified = path.replace('\\', "/");
    if let Some(prefix) = ["//?/", "//./", "/??/"]
        .iter()
        .find(|p| unified.starts_with(*p))
    {
        return Some(format!(
            "'{}' is a Windows device-namespace path",
            &path[..prefix.len()]
        ));
    }
    if unified.starts_with("//") {
        return Some("a UNC path names another machine's share".into());
    }
    let bytes = unified.as_bytes();
    if bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':' {
        return Some(format!(
            "'{}' is a Windows drive prefix; give a path relative to the root",
            &path[..2]
        ));
    }
    unified
        .split('/')
        .filter(|name| !matches!(*name, "" | "." | ".."))
        .find_map(name_refusal)
}

fn name_refusal(raw: &str) -> Option<String> {
    // Names in messages by the naming rule (`policy::names`).
    let name = shown(raw);
    let name = name.as_ref();
    if raw.contains(':') {
        return Some(format!(
            "'{name}' names an alternate data stream (':' in a name)"
        ));
    }
    if let Some(c) = raw
        .chars()
        .find(|c| matches!(c, '<' | '>' | '"' | '|' | '?' | '*') || (*c as u32) < 0x20)
    {
        return Some(format!("'{name}' holds {c:?}, which no Windows name may"));
    }
    if raw.ends_with('.') || raw.ends_with(' ') {
        return Some(format!(
            "'{name}' ends in a dot or a space, which Windows strips"
        ));
    }
    if let Some(device) = reserved_device(raw) {
        return Some(format!("'{name}' is the Windows device {device}"));
    }
    if is_short_name(raw) {
        return Some(format!(
            "'{name}' has the shape of an 8.3 short name, which Windows may resolve to another name"
        ));
    }
    None
}

/// The device a name opens on Windows: its part before the first dot,
/// trailing spaces dropped, compared without case.
fn reserved_device(name: &str) -> Option<String> {
    let stem = name.split('.').next().unwrap_or(name).trim_end_matches(' ');
    let upper = stem.to_uppercase();
    const PLAIN: [&str; 6] = ["CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$"];
    if PLAIN.contains(&upper.as_str()) {
        return Some(upper);
    }
    let numbered = ["COM", "LPT"].iter().any(|p| {
        upper.strip_prefix(p).is_some_and(|n| {
            let mut chars = n.chars();
            matches!(
                (chars.next(), chars.next()),
                (Some('0'..='9' | '¹' | '²' | '³'), None)
            )
        })
    });
    numbered.then_some(upper)
}

/// `BASE~N` or `BASE~N.EXT`: a base of at most 6 characters without a dot
/// or a tilde, a tilde and digits (at most 8 characters before the dot),
/// an extension of at most 3 characters.
fn is_short_name(name: &str) -> bool {
    let (stem, ext) = match name.split_once('.') {
        Some((s, e)) => (s, Some(e)),
        None => (name, None),
    };
    if ext.is_some_and(|e| e.is_empty() || e.chars().count() > 3 || e.contains('.')) {
        return false;
    }
    let Some((base, digits)) = stem.rsplit_once('~') else {
        return false;
    };
    !base.is_empty()
        && !base.contains('~')
        && stem.chars().count() <= 8
        && !digits.is_empty()
        && digits.chars().all(|c| c.is_ascii_digit())
        && !digits.starts_with('0')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(path: &str) -> String {
        refusal(path).unwrap_or_else(|| panic!("{path:?} passed"))
    }

    #[test]
    fn device_namespaces_unc_and_drives() {
        for path in [
            r"\\?\C:\Windows",
            r"\\.\PhysicalDrive0",
            "//?/c:/x",
            r"\??\C:\x",
        ] {
            assert!(refused(path).contains("device-namespace"), "{path}");
        }
        for path in [r"\\server\share\x", "//server/share"] {
            assert!(refused(path).contains("UNC"), "{path}");
        }
        for path in ["C:foo", r"C:\Windows", "c:/x", "Z:"] {
            assert!(refused(path).contains("drive prefix"), "{path}");
        }
    }

    #[test]
    fn alternate_data_streams() {
        for path in [
            "notes.txt:hidden",
            "a/file::$DATA",
            r"dir\x:y:$DATA",
            "sub:",
        ] {
            assert!(refused(path).contains("alternate data stream"), "{path}");
        }
    }

    #[test]
    fn reserved_names_with_extensions_in_any_component() {
        for path in [
            "CON",
            "con",
            "nul.txt",
            "a/Aux.tar.gz",
            "PRN/x",
            "deep/er/COM1",
            "com9.log",
            "LPT1 .txt",
            "lpt0",
            "COM¹",
            "lpt³.bin",
            "CONIN$",
            r"x\conout$.txt",
        ] {
            assert!(refused(path).contains("Windows device"), "{path}");
        }
        for path in [
            "CONSOLE",
            "nul-device",
            "COM10",
            "LPTX",
            "comx.txt",
            "auxiliary.c",
            "a.con",
        ] {
            assert_eq!(refusal(path), None, "{path}");
        }
    }

    #[test]
    fn trailing_dots_and_spaces() {
        for path in [".env.", "notes.txt ", "dir./x", r"a\b \c", "x..."] {
            assert!(refused(path).contains("ends in a dot or a space"), "{path}");
        }
        for path in [".", "..", "a/./b", "../x", ".env", "a. b"] {
            assert_eq!(refusal(path), None, "{path}");
        }
    }

    #[test]
    fn characters_windows_names_cannot_hold() {
        for path in ["a<b", "a>b", "q\"x", "a|b", "what?", "*.txt", "tab\there"] {
            assert!(
                refused(path).contains("which no Windows name may"),
                "{path:?}"
            );
        }
    }

    #[test]
    fn short_names() {
        for path in ["PROGRA~1", "progra~1/x", "ENV~1", "DOCU~12.TXT", "a~1.b"] {
            assert!(refused(path).contains("8.3 short name"), "{path}");
        }
        for path in [
            "~1",
            "backup~",
            "file~x.txt",
            "long-name~1",
            "a~1.long",
            "a~01",
            "x~1~2",
            "notes.txt~",
        ] {
            assert_eq!(refusal(path), None, "{path}");
        }
    }

    #[test]
    fn ordinary_relative_paths_pass() {
        for path in [
            "",
            "src/main.rs",
            r"src\lib.rs",
            "a b/c d.txt",
            "naïve/ü.md",
            ".git-keep",
        ] {
            assert_eq!(refusal(path), None, "{path}");
        }
    }
}
