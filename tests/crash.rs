//! A crash never leaves a torn file: the server is killed with SIGKILL while
//! it overwrites large files in a loop; afterwards every target holds one
//! whole version (the first, or one of the written ones), never a mix or a
//! truncated one.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::time::Duration;

use common::*;

const FILES: usize = 4;
const SIZE: usize = 2 << 20;

fn request(id: usize, file: usize, letter: char) -> String {
    let content: String = std::iter::repeat_n(letter, SIZE).collect();
    serde_json::json!({
        "jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "write_file", "arguments": {
            "root": "ws", "path": format!("big-{file}.txt"), "content": content}}
    })
    .to_string()
}

#[test]
fn sigkill_mid_write_leaves_whole_files() {
    // Kill at several points after the first write has completed, while the
    // next ones are in flight.
    for (round, delay_ms) in [0u64, 1, 2, 3, 5, 7, 10, 15, 20, 30, 40, 60]
        .into_iter()
        .enumerate()
    {
        let env = Env::new();
        for f in 0..FILES {
            env.write(&format!("ws/big-{f}.txt"), "A".repeat(SIZE));
        }
        let config = env.config(
            "audit_log = \"audit.log\"\n[[roots]]\nname = \"ws\"\npath = \"ws\"\nrole = \"workspace\"\n",
        );
        let mut child = spawn_stdio(&config, Stdio::null());
        let mut stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        writeln!(stdin, r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"2025-11-25","capabilities":{{}},"clientInfo":{{"name":"crash","version":"0"}}}}}}"#).unwrap();
        writeln!(
            stdin,
            r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
        )
        .unwrap();
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        // A steady stream of overwrites, each a whole file of one letter.
        let writer = std::thread::spawn(move || {
            for i in 0..200 {
                let letter = (b'B' + (i % 24) as u8) as char;
                if writeln!(stdin, "{}", request(i + 1, i % FILES, letter)).is_err() {
                    break;
                }
            }
        });
        line.clear();
        stdout.read_line(&mut line).unwrap();
        assert!(line.contains("\"isError\":false"), "round {round}: {line}");
        std::thread::sleep(Duration::from_millis(delay_ms));
        child.kill().unwrap();
        child.wait().unwrap();
        let _ = writer.join();

        let mut changed = 0;
        for f in 0..FILES {
            let bytes = std::fs::read(env.path(&format!("ws/big-{f}.txt"))).unwrap();
            assert_eq!(
                bytes.len(),
                SIZE,
                "round {round}: big-{f}.txt torn ({} bytes)",
                bytes.len()
            );
            let first = bytes[0];
            assert!(
                bytes.iter().all(|&b| b == first),
                "round {round}: big-{f}.txt mixes versions"
            );
            changed += usize::from(first != b'A');
        }
        assert!(changed > 0, "round {round}: the first write is not on disk");
    }
}
