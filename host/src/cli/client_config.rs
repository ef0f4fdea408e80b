//! `loom-fs-mcp client-config CLIENT`: prints the entry to paste into a
//! client's configuration to start this binary on the config or the
//! directories given, with absolute paths escaped for the client's format,
//! and where that client keeps its file on this system. It never edits a
//! client's file (Claude Desktop, for one, rewrites its file on exit).

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use serde_json::json;

use super::args::{Cli, Client};
use super::{dir_args, load_config};
use crate::config::Config;
use crate::policy::{Role, Root};

/// The name of the server in the client's configuration.
const ENTRY: &str = "loom-fs";

pub(super) fn client_config(cli: &Cli, client: Client) -> anyhow::Result<()> {
    // What the client would start is checked as serving would check it.
    load_config(cli)?;
    let command = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .context("cannot tell where this binary is")?;
    let command = command
        .to_str()
        .context("this binary's path is not valid UTF-8: clients' files hold text")?;
    let args = server_args(cli)?;
    let (entry, file) = entry(client, command, &args);
    println!("{entry}");
    eprintln!("{file}");
    eprintln!("loom-fs-mcp never edits a client's file: add the entry yourself.");
    Ok(())
}

/// The arguments the client should start the binary with: the config file
/// and each directory by its absolute path, under its role flag.
fn server_args(cli: &Cli) -> anyhow::Result<Vec<String>> {
    let text = |p: &Path| -> anyhow::Result<String> {
        p.to_str().map(str::to_string).with_context(|| {
            format!(
                "{} is not valid UTF-8: clients' files hold text",
                p.display()
            )
        })
    };
    let mut args = Vec::new();
    if let Some(config) = &cli.config {
        let config = std::fs::canonicalize(config)
            .with_context(|| format!("cannot find {}", config.display()))?;
        args.extend(["--config".to_string(), text(&config)?]);
    }
    let dirs = Config::load_with(None, &dir_args(cli), cli.roles.allow_filesystem_root, false);
    let dirs = match dirs {
        Ok(config) => config.roots,
        // Only directories were asked for, and there are none.
        Err(_) if dir_args(cli).is_empty() => Vec::new(),
        Err(e) => return Err(e.into()),
    };
    for role in Role::ALL {
        let of_role: Vec<&Arc<Root>> = dirs.iter().filter(|r| r.role == role).collect();
        if of_role.is_empty() {
            continue;
        }
        // Read only is what a directory gets without a flag.
        if role != Role::Reference {
            args.push(format!("--{}", role.as_str()));
        }
        for r in of_role {
            args.push(text(&r.path)?);
        }
    }
    if cli.read_only {
        args.push("--read-only".into());
    }
    if cli.roles.allow_filesystem_root {
        args.push("--allow-filesystem-root".into());
    }
    Ok(args)
}

/// The entry for `client`, and a line saying where it goes.
fn entry(client: Client, command: &str, args: &[String]) -> (String, String) {
    let stdio = json!({"command": command, "args": args});
    let servers = |key: &str, server: serde_json::Value| {
        serde_json::to_string_pretty(&json!({ key: { ENTRY: server } })).expect("JSON")
    };
    match client {
        Client::ClaudeDesktop => (
            servers("mcpServers", stdio),
            format!(
                "in \"mcpServers\" of {} (quit Claude Desktop completely first)",
                claude_desktop_file()
            ),
        ),
        Client::LmStudio => (
            servers("mcpServers", stdio),
            format!(
                "in \"mcpServers\" of {} (Program → Install → Edit mcp.json), then reload LM Studio",
                home_file(&[".lmstudio", "mcp.json"])
            ),
        ),
        Client::Cursor => (
            servers("mcpServers", stdio),
            format!(
                "in \"mcpServers\" of {} (every project) or .cursor/mcp.json (one project)",
                home_file(&[".cursor", "mcp.json"])
            ),
        ),
        Client::Vscode => {
            let server = json!({"type": "stdio", "command": command, "args": args});
            (
                servers("servers", server),
                "in \"servers\" of .vscode/mcp.json in the workspace (or the user \
                 configuration's: MCP: Open User Configuration)"
                    .into(),
            )
        }
        Client::Codex => {
            let mut table = toml::Table::new();
            table.insert("command".into(), command.into());
            table.insert(
                "args".into(),
                toml::Value::Array(args.iter().map(|a| a.as_str().into()).collect()),
            );
            (
                format!(
                    "[mcp_servers.{ENTRY}]\n{}",
                    toml::to_string(&table).expect("TOML")
                ),
                format!("in {}", home_file(&[".codex", "config.toml"])),
            )
        }
        Client::ClaudeCode => {
            let words: Vec<Cow<str>> = [command]
                .into_iter()
                .chain(args.iter().map(String::as_str))
                .map(shell_word)
                .collect();
            (
                format!("claude mcp add {ENTRY} -- {}", words.join(" ")),
                "run it in a shell (add --scope user for every project); for a project's \
                 .mcp.json, use the claude-desktop entry"
                    .into(),
            )
        }
    }
}

/// `word` as one word of a command line: for a POSIX shell, or where it
/// is a Windows path, for PowerShell (single quotes, a quote doubled).
fn shell_word(word: &str) -> Cow<'_, str> {
    if cfg!(windows) || looks_windows(word) {
        if word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./\\:".contains(c))
        {
            return Cow::Borrowed(word);
        }
        return Cow::Owned(format!("'{}'", word.replace('\'', "''")));
    }
    shlex::try_quote(word).unwrap_or_else(|_| {
        // A NUL cannot be in a path or an argument: never reached.
        Cow::Owned(format!("'{}'", word.replace('\'', r"'\''")))
    })
}

/// `C:\…` or `\\server\…`.
fn looks_windows(word: &str) -> bool {
    let b = word.as_bytes();
    (b.len() >= 3 && b[0].is_ascii_alphabetic() && b[1] == b':' && b[2] == b'\\')
        || word.starts_with(r"\\")
}

fn claude_desktop_file() -> String {
    if cfg!(target_os = "macos") {
        home_file(&[
            "Library",
            "Application Support",
            "Claude",
            "claude_desktop_config.json",
        ])
    } else if cfg!(windows) {
        match std::env::var_os("APPDATA") {
            Some(appdata) => PathBuf::from(appdata)
                .join("Claude")
                .join("claude_desktop_config.json")
                .display()
                .to_string(),
            None => r"%APPDATA%\Claude\claude_desktop_config.json".into(),
        }
    } else {
        home_file(&[".config", "Claude", "claude_desktop_config.json"])
    }
}

fn home_file(parts: &[&str]) -> String {
    let home = std::env::var_os(if cfg!(windows) { "USERPROFILE" } else { "HOME" })
        .map_or_else(|| PathBuf::from("~"), PathBuf::from);
    parts
        .iter()
        .fold(home, |path, part| path.join(part))
        .display()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const WIN_BIN: &str = r"C:\Program Files\loom-fs\loom-fs-mcp.exe";
    const WIN_DIR: &str = r"C:\Users\me\My Project's";

    fn args() -> Vec<String> {
        vec!["--workspace".into(), WIN_DIR.into()]
    }

    #[test]
    fn a_windows_path_survives_each_json_client() {
        for client in [
            Client::ClaudeDesktop,
            Client::LmStudio,
            Client::Cursor,
            Client::Vscode,
        ] {
            let (entry, _) = entry(client, WIN_BIN, &args());
            let v: serde_json::Value = serde_json::from_str(&entry).unwrap();
            let key = if client == Client::Vscode {
                "servers"
            } else {
                "mcpServers"
            };
            let server = &v[key][ENTRY];
            assert_eq!(server["command"], WIN_BIN, "{entry}");
            assert_eq!(server["args"], json!(["--workspace", WIN_DIR]), "{entry}");
            assert!(entry.contains(r"C:\\Program Files"), "{entry}");
        }
        let (entry, _) = entry(Client::Vscode, WIN_BIN, &args());
        assert!(entry.contains(r#""type": "stdio""#), "{entry}");
    }

    #[test]
    fn a_windows_path_survives_codex_toml() {
        let (entry, _) = entry(Client::Codex, WIN_BIN, &args());
        let v: toml::Table = toml::from_str(&entry).unwrap();
        let server = &v["mcp_servers"][ENTRY];
        assert_eq!(server["command"].as_str(), Some(WIN_BIN), "{entry}");
        let args: Vec<&str> = server["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert_eq!(args, ["--workspace", WIN_DIR], "{entry}");
    }

    #[test]
    fn the_claude_code_line_splits_into_the_binary_and_its_arguments() {
        // POSIX: spaces, quotes and `$` in paths.
        let bin = "/home/me/my tools/loom-fs-mcp";
        let dir = "/home/me/it's $HOME";
        let (line, _) = entry(Client::ClaudeCode, bin, &["--workspace".into(), dir.into()]);
        let words = shlex::split(&line).unwrap();
        assert_eq!(
            words,
            ["claude", "mcp", "add", ENTRY, "--", bin, "--workspace", dir]
        );
        // A Windows path, by PowerShell's rule: inside single quotes a
        // quote is doubled and nothing else is special.
        let (line, _) = entry(Client::ClaudeCode, WIN_BIN, &args());
        assert_eq!(
            powershell_split(&line),
            [
                "claude",
                "mcp",
                "add",
                ENTRY,
                "--",
                WIN_BIN,
                "--workspace",
                WIN_DIR
            ]
        );
    }

    /// Splits a command line of bare words and single-quoted ones as
    /// PowerShell does.
    fn powershell_split(line: &str) -> Vec<String> {
        let (mut words, mut word, mut quoted, mut in_word) =
            (Vec::new(), String::new(), false, false);
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\'' if quoted && chars.peek() == Some(&'\'') => {
                    chars.next();
                    word.push('\'');
                }
                '\'' => {
                    quoted = !quoted;
                    in_word = true;
                }
                ' ' if !quoted => {
                    if in_word {
                        words.push(std::mem::take(&mut word));
                    }
                    in_word = false;
                }
                c => {
                    word.push(c);
                    in_word = true;
                }
            }
        }
        if in_word {
            words.push(word);
        }
        words
    }
}
