use super::*;
use std::path::Path;
use std::sync::Arc;
use tempfile::TempDir;

#[test]
fn a_line_has_every_key() {
    let audit = Audit::memory();
    audit.log(
        &Record::new("read_file", "docs", "a.txt", Permission::Read)
            .took(Duration::from_micros(1500), 42),
    );
    audit.log(&Record::new("read_file", "docs", ".env", Permission::Read).denied(Rule::Deny));
    let lines = audit.lines();
    let first = lines[0].as_object().unwrap();
    let keys: Vec<&str> = first.keys().map(String::as_str).collect();
    for key in [
        "ts",
        "tool",
        "root",
        "path",
        "op",
        "decision",
        "rule",
        "duration_ms",
        "bytes",
    ] {
        assert!(keys.contains(&key), "missing {key}");
    }
    assert_eq!(first.len(), 9);
    assert_eq!(first["decision"], "allow");
    assert_eq!(first["rule"], serde_json::Value::Null);
    assert_eq!(first["duration_ms"], 1.5);
    assert_eq!(first["bytes"], 42);
    assert!(first["ts"].as_str().unwrap().ends_with('Z'));
    assert_eq!(lines[1]["decision"], "deny");
    assert_eq!(lines[1]["rule"], "deny");
    assert_eq!(lines[1]["path"], ".env");
}

#[test]
fn names_are_written_with_the_naming_rule_s_characters_escaped() {
    let tmp = TempDir::new().unwrap();
    let file = tmp.path().join("audit.log");
    let audit = Audit::open(&AuditTarget::File(file.clone()), 1 << 20, 1).unwrap();
    let name = "rtl\u{202e}txt.exe/\u{7f}\u{85}\u{1b}[0m\u{2028}\u{200b}\u{feff}\u{e0001}\n\"\\é";
    audit.log(&Record::new("delete_file", "ws", name, Permission::Delete));
    let written = fs::read_to_string(&file).unwrap();
    let line = written.strip_suffix('\n').unwrap();
    assert!(!line.chars().any(is_escaped), "{line:?}");
    assert!(
        line.contains(r#""path":"rtl\u202etxt.exe/\u007f\u0085\u001b[0m\u2028\u200b\ufeff\udb40\udc01\n\"\\é""#),
        "{line}"
    );
    let parsed: serde_json::Value = serde_json::from_str(line).unwrap();
    assert_eq!(parsed["path"], name);
}

fn read_lines(path: &Path) -> Vec<String> {
    fs::read_to_string(path)
        .map(|t| t.lines().map(str::to_string).collect())
        .unwrap_or_default()
}

#[test]
fn a_rotation_that_cannot_be_done_loses_no_line_and_moves_nothing() {
    let tmp = TempDir::new().unwrap();
    let path = tmp.path().join("audit.log");
    let audit = Audit::open(&AuditTarget::File(path.clone()), 1024, 2).unwrap();
    // The new file cannot be opened (as with no descriptor free).
    fs::create_dir(tmp.path().join("audit.log.next")).unwrap();
    for i in 0..40 {
        let p = format!("file-{i}.txt");
        audit.log(&Record::new("read_file", "docs", &p, Permission::Read));
    }
    assert_eq!(read_lines(&path).len(), 40, "every line in the live file");
    assert!(fs::metadata(&path).unwrap().len() > 1024);
    assert!(!tmp.path().join("audit.log.1").exists(), "nothing moved");
    // Once it can, the next line rotates.
    fs::remove_dir(tmp.path().join("audit.log.next")).unwrap();
    audit.log(&Record::new(
        "read_file",
        "docs",
        "last.txt",
        Permission::Read,
    ));
    assert_eq!(read_lines(&tmp.path().join("audit.log.1")).len(), 40);
    let live = read_lines(&path);
    assert_eq!(live.len(), 1);
    assert!(live[0].contains("last.txt"));
    assert!(!tmp.path().join("audit.log.next").exists());
}

#[test]
fn rotates_by_size_keeping_n_backups() {
    let tmp = TempDir::new().unwrap();
    let path = tmp.path().join("logs/audit.log");
    let audit = Audit::open(&AuditTarget::File(path.clone()), 4096, 2).unwrap();
    for i in 0..100 {
        let p = format!("file-{i}.txt");
        audit.log(&Record::new("read_file", "docs", &p, Permission::Read));
    }
    let live = read_lines(&path);
    let one = read_lines(&tmp.path().join("logs/audit.log.1"));
    let two = read_lines(&tmp.path().join("logs/audit.log.2"));
    assert!(!tmp.path().join("logs/audit.log.3").exists());
    for file in [&path, &tmp.path().join("logs/audit.log.1")] {
        assert!(fs::metadata(file).unwrap().len() <= 4096);
    }
    assert!(!live.is_empty() && !one.is_empty() && !two.is_empty());
    // Newest lines are in the live file, older ones in .1, then .2.
    let last: serde_json::Value = serde_json::from_str(live.last().unwrap()).unwrap();
    assert_eq!(last["path"], "file-99.txt");
    let n = |line: &String| -> u32 {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        v["path"].as_str().unwrap()[5..]
            .trim_end_matches(".txt")
            .parse()
            .unwrap()
    };
    assert!(n(one.last().unwrap()) < n(live.first().unwrap()));
    assert!(n(two.last().unwrap()) < n(one.first().unwrap()));
    // Lines are whole JSON objects, never split across files.
    for line in live.iter().chain(&one).chain(&two) {
        serde_json::from_str::<serde_json::Value>(line).unwrap();
    }
}

#[test]
fn zero_backups_truncates_in_place() {
    let tmp = TempDir::new().unwrap();
    let path = tmp.path().join("audit.log");
    let audit = Audit::open(&AuditTarget::File(path.clone()), 4096, 0).unwrap();
    for i in 0..100 {
        let p = format!("f{i}");
        audit.log(&Record::new("t", "r", &p, Permission::Read));
    }
    assert!(fs::metadata(&path).unwrap().len() <= 4096);
    assert!(!tmp.path().join("audit.log.1").exists());
}

#[test]
fn an_existing_file_is_appended_to() {
    let tmp = TempDir::new().unwrap();
    let path = tmp.path().join("audit.log");
    fs::write(&path, "{\"earlier\":true}\n").unwrap();
    let audit = Audit::open(&AuditTarget::File(path.clone()), 1 << 20, 1).unwrap();
    audit.log(&Record::new("t", "r", "p", Permission::Read));
    let lines = read_lines(&path);
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0], "{\"earlier\":true}");
}

/// A second server on the same log is refused, naming the holder;
/// once the first is gone the log is free again.
#[test]
fn one_server_per_log_file() {
    let tmp = TempDir::new().unwrap();
    let path = tmp.path().join("audit.log");
    let target = AuditTarget::File(path.clone());
    let first = Audit::open(&target, 1 << 20, 1).unwrap();
    let Err(e) = Audit::open(&target, 1 << 20, 1) else {
        panic!("a second instance opened the same audit log")
    };
    let message = e.to_string();
    assert!(
        message.contains(&format!("(pid {})", std::process::id()))
            && message.ends_with("give each instance its own audit_log file"),
        "{message}"
    );
    drop(first);
    assert!(Audit::open(&target, 1 << 20, 1).is_ok());
}

/// `truncate -s 0` (or logrotate's copytruncate) while the server
/// writes: the next lines start at offset 0, no hole, none lost, and the
/// truncated file is not rotated early.
#[test]
fn a_truncated_log_goes_on_from_the_start() {
    let tmp = TempDir::new().unwrap();
    let path = tmp.path().join("audit.log");
    let audit = Audit::open(&AuditTarget::File(path.clone()), 4096, 2).unwrap();
    audit.log(&Record::new("before", "r", "p", Permission::Read));
    // Fill it to just under the rotation size: a stale size counter
    // would rotate at the first line after the truncation.
    let line = fs::metadata(&path).unwrap().len();
    let count = 4095 / line;
    for _ in 1..count {
        audit.log(&Record::new("before", "r", "p", Permission::Read));
    }
    assert!(!tmp.path().join("audit.log.1").exists());
    let copy = tmp.path().join("audit.log.copy");
    fs::copy(&path, &copy).unwrap();
    OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(0)
        .unwrap();
    for _ in 0..5 {
        audit.log(&Record::new("after", "r", "p", Permission::Read));
    }
    let bytes = fs::read(&path).unwrap();
    assert!(!bytes.contains(&0), "a hole of NUL bytes");
    let lines = read_lines(&path);
    assert_eq!(lines.len(), 5);
    assert!(lines.iter().all(|l| l.contains("\"tool\":\"after\"")));
    assert!(!tmp.path().join("audit.log.1").exists(), "rotated early");
    assert_eq!(read_lines(&copy).len() as u64, count);
}

#[test]
fn an_unopenable_file_is_an_error() {
    let tmp = TempDir::new().unwrap();
    let blocker = tmp.path().join("not-a-dir");
    fs::write(&blocker, "").unwrap();
    let target = AuditTarget::File(blocker.join("audit.log"));
    assert!(Audit::open(&target, 1 << 20, 1).is_err());
}

#[test]
fn a_log_that_cannot_be_written_fails_closed_and_keeps_its_lines_bounded() {
    let audit = Audit::with(Sink::Failing(true, Vec::new()));
    assert_eq!(audit.writable(), Ok(()));
    for path in ["a", "b", "c"] {
        audit.log(&Record::new("read_file", "ws", path, Permission::Read));
    }
    let refused = audit.writable().unwrap_err();
    assert_eq!((refused.waiting, refused.lost), (3, 0));
    assert!(
        refused.to_string().contains("refused by rule 'audit'"),
        "{refused}"
    );
    assert!(audit.lines().is_empty());
    // Past the bound, lines are counted, not kept.
    let long = "x".repeat(64 * 1024);
    for _ in 0..20 {
        audit.log(&Record::new("read_file", "ws", &long, Permission::Read));
    }
    let refused = audit.writable().unwrap_err();
    assert!(refused.lost > 0 && refused.waiting < 23, "{refused:?}");
    // Space again: the waiting lines first, in order, then the count.
    if let Sink::Failing(fail, _) = &mut audit.inner.lock().unwrap().sink {
        *fail = false;
    }
    assert_eq!(audit.writable(), Ok(()));
    audit.log(&Record::new("read_file", "ws", "d", Permission::Read));
    let lines = audit.lines();
    let paths: Vec<&str> = lines.iter().map(|l| l["path"].as_str().unwrap()).collect();
    assert_eq!(&paths[..3], ["a", "b", "c"]);
    assert_eq!(paths.last(), Some(&"d"));
    let lost = &lines[lines.len() - 2];
    assert_eq!(lost["rule"], "audit_lost");
    assert_eq!(lost["bytes"], refused.lost);
    assert_eq!(lines.len(), refused.waiting + 2);
}

#[test]
fn concurrent_writers_never_interleave() {
    let tmp = TempDir::new().unwrap();
    let path = tmp.path().join("audit.log");
    let audit = Arc::new(Audit::open(&AuditTarget::File(path.clone()), 1 << 30, 1).unwrap());
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let audit = Arc::clone(&audit);
            std::thread::spawn(move || {
                for i in 0..200 {
                    let p = format!("thread-{t}/file-{i}-{}", "x".repeat(i % 50));
                    audit.log(&Record::new("read_file", "docs", &p, Permission::Read));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let lines = read_lines(&path);
    assert_eq!(lines.len(), 1600);
    for line in &lines {
        serde_json::from_str::<serde_json::Value>(line).unwrap();
    }
}

#[test]
fn lines_waiting_at_close_are_written_if_the_log_takes_them_and_spilled_otherwise() {
    // The log takes them at close: nothing spilled, every line in order.
    let audit = Audit::with(Sink::Failing(true, Vec::new()));
    audit.log(&Record::new("read_file", "ws", "a", Permission::Read));
    if let Sink::Failing(fail, _) = &mut audit.inner.lock().unwrap().sink {
        *fail = false;
    }
    assert_eq!(audit.close(), Spilled::default());
    assert_eq!(audit.lines().len(), 1);
    // It does not: every waiting line, and the count of those lost, is
    // spilled (to stderr), and the backlog is empty after.
    let audit = Audit::with(Sink::Failing(true, Vec::new()));
    let long = "x".repeat(64 * 1024);
    for _ in 0..20 {
        audit.log(&Record::new("read_file", "ws", &long, Permission::Read));
    }
    let refused = audit.writable().unwrap_err();
    assert!(refused.lost > 0);
    let spilled = audit.close();
    assert_eq!(
        spilled,
        Spilled {
            lines: refused.waiting + 1,
            lost: refused.lost
        }
    );
    assert!(audit.inner.lock().unwrap().backlog.is_empty());
    // A line logged after close that cannot be written is spilled at once.
    audit.log(&Record::new("read_file", "ws", "late", Permission::Read));
    assert!(audit.inner.lock().unwrap().backlog.is_empty());
    assert!(audit.lines().is_empty());
}
