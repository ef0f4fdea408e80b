use super::bounds::{GIB, MIB};
use super::*;
use crate::policy::{Permission, Perms, Role};
use std::fs;
#[cfg(unix)]
use std::os::unix::fs::symlink;
use std::path::Path;
use std::time::Duration;
use tempfile::TempDir;

struct Dirs {
    tmp: TempDir,
}

impl Dirs {
    fn new() -> Dirs {
        let tmp = TempDir::new().unwrap();
        for d in ["a", "b", "a/inner", "data", "data-secrets"] {
            fs::create_dir_all(tmp.path().join(d)).unwrap();
        }
        fs::write(tmp.path().join("file.txt"), "x").unwrap();
        Dirs { tmp }
    }

    fn base(&self) -> &Path {
        self.tmp.path()
    }

    fn parse(&self, text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, self.base(), false)
    }

    fn problems(&self, text: &str) -> Vec<String> {
        match self.parse(text) {
            Err(ConfigError::Invalid(p)) => p,
            Err(other) => vec![other.to_string()],
            Ok(_) => vec![],
        }
    }
}

fn root(name: &str, path: &str, role: &str) -> String {
    format!("[[roots]]\nname = \"{name}\"\npath = \"{path}\"\nrole = \"{role}\"\n")
}

#[test]
fn a_valid_config_loads_with_defaults() {
    let d = Dirs::new();
    let c = d
        .parse(&(root("a", "a", "sourcecode") + &root("b", "b", "reference")))
        .unwrap();
    assert_eq!(c.roots.len(), 2);
    assert_eq!(
        c.roots[0].path,
        fs::canonicalize(d.base().join("a")).unwrap()
    );
    assert_eq!(c.roots[0].perms.to_string(), "[read, write]");
    assert_eq!(c.roots[1].perms.to_string(), "[read]");
    assert_eq!(c.roots[0].max_read_bytes, DEFAULT_MAX_READ_BYTES);
    assert_eq!(c.roots[0].max_document_bytes, 64 * MIB);
    assert_eq!(c.roots[0].min_free_bytes, 256 * MIB);
    assert_eq!(c.roots[0].trash_max_bytes, GIB);
    assert_eq!(c.audit, AuditTarget::Stderr);
    assert_eq!(c.audit_max_bytes, 8 * MIB);
    assert_eq!(c.audit_backups, 3);
    assert_eq!(c.limits.max_search_results, 200);
    assert_eq!(c.limits.max_search_bytes, 64 * MIB);
    assert_eq!(c.limits.tool_timeout, Duration::from_secs(30));
    assert_eq!(c.limits.max_concurrent_calls, 8);
    assert_eq!(c.limits.max_output_bytes, 16 * MIB);
    assert!(!c.read_only);
    assert!(!c.landlock);
    assert!(c.grants(Permission::Write));
    assert!(!c.grants(Permission::Delete));
}

/// The output limit follows the roots' read limits by default, and is
/// refused below what a whole read of a root's largest file returns.
#[test]
fn the_output_limit_holds_a_whole_read() {
    let d = Dirs::new();
    let big = root("x", "a", "reference") + "max_read_bytes = 8388608\n";
    let c = d.parse(&big).unwrap();
    assert_eq!(c.limits.max_output_bytes, 4 * 8 * MIB);
    let small = format!("max_output_bytes = 1048576\n{big}");
    assert_eq!(
        d.problems(&small),
        [
            "max_output_bytes = 1048576 is below 4 times root 'x''s max_read_bytes (8388608): \
          a whole read of its largest file (text plus structured copy) would be refused"
        ]
    );
}

#[test]
fn every_key_is_read() {
    let d = Dirs::new();
    let text = r#"
        audit_log = "logs/audit.log"
        audit_log_max_bytes = 65536
        audit_log_backups = 5
        max_search_results = 50
        max_search_bytes = 1000000
        max_list_entries = 300
        tool_timeout_ms = 5000
        tool_memory_bytes = 67108864
        max_concurrent_calls = 3
        max_output_bytes = 1048576
        min_free_bytes = 4096
        trash_max_bytes = 65536
        landlock = true
        deny = ["*.sqlite3", "*.dump"]
        [[roots]]
        name = "ws"
        path = "a"
        role = "workspace"
        permissions = ["read", "delete"]
        deny = ["*.tmp"]
        max_read_bytes = 2048
        min_free_bytes = 0
        trash_max_bytes = 0
        [[roots]]
        name = "other"
        path = "b"
        role = "reference"
        max_read_bytes = 1024
    "#;
    let c = d.parse(text).unwrap();
    assert_eq!(c.audit, AuditTarget::File(d.base().join("logs/audit.log")));
    assert_eq!(c.audit_max_bytes, 65536);
    assert_eq!(c.audit_backups, 5);
    assert_eq!(c.limits.max_search_results, 50);
    assert_eq!(c.limits.max_search_bytes, 1_000_000);
    assert_eq!(c.limits.max_list_entries, 300);
    assert_eq!(c.limits.tool_timeout, Duration::from_millis(5000));
    assert_eq!(c.limits.tool_memory_bytes, 64 * MIB);
    assert_eq!(c.limits.max_concurrent_calls, 3);
    assert_eq!(c.limits.max_output_bytes, MIB);
    assert!(c.landlock);
    assert_eq!(c.deny, ["*.sqlite3", "*.dump"]);
    let r = &c.roots[0];
    assert_eq!(r.perms.to_string(), "[read, delete]");
    assert_eq!(r.extra_deny, ["*.tmp"]);
    assert_eq!(r.max_read_bytes, 2048);
    assert_eq!(r.min_free_bytes, 0);
    // The config-wide value is every other root's.
    assert_eq!(c.roots[1].min_free_bytes, 4096);
    assert_eq!((r.trash_max_bytes, c.roots[1].trash_max_bytes), (0, 65536));
    assert!(r.deny.match_path(Path::new("x.tmp")).is_some());
    assert!(r.deny.match_path(Path::new("x.dump")).is_some());
    assert!(r.deny.match_path(Path::new(".env")).is_some());
}

#[test]
fn the_quota_is_off_by_default_and_its_burst_is_a_minute() {
    let d = Dirs::new();
    let plain = root("a", "a", "workspace");
    assert_eq!(d.parse(&plain).unwrap().quota, None);
    let c = d
        .parse(&format!("quota_bytes_per_minute = 1048576\n{plain}"))
        .unwrap();
    let expected = QuotaConfig {
        bytes_per_minute: MIB,
        burst_bytes: MIB,
    };
    assert_eq!(c.quota, Some(expected));
    let c = d
        .parse(&format!(
            "quota_bytes_per_minute = 1048576\nquota_burst_bytes = 4096\n{plain}"
        ))
        .unwrap();
    assert_eq!(c.quota.unwrap().burst_bytes, 4096);
    assert_eq!(
        d.problems(&format!("quota_burst_bytes = 4096\n{plain}")),
        ["quota_burst_bytes is set without quota_bytes_per_minute"]
    );
    assert_eq!(
        d.problems(&format!("quota_bytes_per_minute = 10\n{plain}")),
        ["quota_bytes_per_minute = 10 is out of range (1024 to 1099511627776)"]
    );
}

#[test]
fn relative_paths_resolve_against_the_config_file() {
    let d = Dirs::new();
    let cfg = d.base().join("a/inner/roots.toml");
    fs::write(&cfg, root("up", "../../b", "reference")).unwrap();
    let c = Config::load(&cfg, false).unwrap();
    assert_eq!(
        c.roots[0].path,
        fs::canonicalize(d.base().join("b")).unwrap()
    );
}

#[cfg(unix)]
#[test]
fn a_root_through_a_symlink_is_resolved_once() {
    let d = Dirs::new();
    symlink(d.base().join("b"), d.base().join("link-to-b")).unwrap();
    let c = d.parse(&root("b", "link-to-b", "reference")).unwrap();
    assert_eq!(
        c.roots[0].path,
        fs::canonicalize(d.base().join("b")).unwrap()
    );
}

#[test]
fn missing_and_non_directory_paths() {
    let d = Dirs::new();
    assert_eq!(
        d.problems(&root("x", "nowhere", "reference")),
        ["root 'x': path 'nowhere' does not exist"]
    );
    assert_eq!(
        d.problems(&root("x", "file.txt", "reference")),
        ["root 'x': path 'file.txt' is not a directory"]
    );
    assert_eq!(
        d.problems(&root("x", "", "reference")),
        ["root 'x': path '' is empty"]
    );
}

#[cfg(unix)]
#[test]
fn nested_roots_in_either_order_and_the_same_directory() {
    let d = Dirs::new();
    let outer_first = root("outer", "a", "reference") + &root("inner", "a/inner", "reference");
    assert_eq!(
        d.problems(&outer_first),
        ["root 'inner' lies inside root 'outer'"]
    );
    let inner_first = root("inner", "a/inner", "reference") + &root("outer", "a", "reference");
    assert_eq!(
        d.problems(&inner_first),
        ["root 'inner' lies inside root 'outer'"]
    );
    let twice = root("one", "a", "reference") + &root("two", "a/inner/..", "reference");
    assert_eq!(
        d.problems(&twice),
        ["roots 'one' and 'two' are the same directory"]
    );
    symlink(d.base().join("a"), d.base().join("alias")).unwrap();
    let via_link = root("one", "a", "reference") + &root("two", "alias", "reference");
    assert_eq!(
        d.problems(&via_link),
        ["roots 'one' and 'two' are the same directory"]
    );
    // Prefix siblings are not nested.
    let siblings = root("d", "data", "reference") + &root("s", "data-secrets", "reference");
    assert!(d.parse(&siblings).is_ok());
}

#[test]
fn names() {
    let d = Dirs::new();
    let dup = root("a", "a", "reference") + &root("a", "b", "reference");
    assert_eq!(d.problems(&dup), ["duplicate root name 'a'"]);
    for (name, reason) in [
        ("", "it is empty"),
        ("a/b", "it contains '/'"),
        ("my docs", "it contains whitespace"),
        ("tab\\there", "it contains whitespace"),
        ("bell\\u0007", "it contains a control character"),
        (
            "rtl\\u202etxt",
            "it contains an invisible or reordering character (a format character)",
        ),
        (
            "zero\\u200bwidth",
            "it contains an invisible or reordering character (a format character)",
        ),
        ("..", "it starts with '.' (reserved)"),
        (".hidden", "it starts with '.' (reserved)"),
    ] {
        let problems = d.problems(&root(name, "a", "reference"));
        assert_eq!(problems.len(), 1, "{name}: {problems:?}");
        assert!(problems[0].ends_with(reason), "{name}: {problems:?}");
        assert!(problems[0].starts_with("root name '"), "{problems:?}");
    }
}

#[test]
fn roles_and_permissions() {
    let d = Dirs::new();
    assert_eq!(
        d.problems(&root("x", "a", "admin")),
        ["root 'x': unknown role 'admin' (expected reference, sourcecode or workspace)"]
    );
    let widen = root("docs", "a", "reference") + "permissions = [\"read\", \"write\"]\n";
    assert_eq!(
        d.problems(&widen),
        ["root 'docs' (role reference) cannot grant write"]
    );
    let widen = root("src", "a", "sourcecode") + "permissions = [\"delete\"]\n";
    assert_eq!(
        d.problems(&widen),
        ["root 'src' (role sourcecode) cannot grant delete"]
    );
    let unknown = root("x", "a", "workspace") + "permissions = [\"execute\"]\n";
    assert_eq!(
        d.problems(&unknown),
        ["root 'x': unknown permission 'execute' (expected read, write or delete)"]
    );
    let empty = root("x", "a", "workspace") + "permissions = []\n";
    assert_eq!(d.problems(&empty), ["root 'x' grants no permission"]);
    let narrowed = root("x", "a", "workspace") + "permissions = [\"read\"]\n";
    assert_eq!(
        d.parse(&narrowed).unwrap().roots[0].perms.to_string(),
        "[read]"
    );
}

#[test]
fn read_only_caps_every_root() {
    let d = Dirs::new();
    let text = root("w", "a", "workspace") + &root("s", "b", "sourcecode");
    let flag = Config::parse(&text, d.base(), true).unwrap();
    assert!(flag.read_only);
    assert!(flag.roots.iter().all(|r| r.perms.to_string() == "[read]"));
    let key = Config::parse(&format!("read_only = true\n{text}"), d.base(), false).unwrap();
    assert!(key.roots.iter().all(|r| r.perms.to_string() == "[read]"));
    assert!(!key.grants(Permission::Write));
    let write_only = root("w", "a", "workspace") + "permissions = [\"write\"]\n";
    let problems = match Config::parse(&write_only, d.base(), true) {
        Err(ConfigError::Invalid(p)) => p,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        problems,
        ["root 'w' grants no permission once read-only caps it at read"]
    );
}

#[test]
fn invalid_globs_anywhere() {
    let d = Dirs::new();
    let global = format!("deny = [\"[abc\"]\n{}", root("x", "a", "reference"));
    let problems = d.problems(&global);
    assert_eq!(problems.len(), 1);
    assert!(
        problems[0].starts_with("deny: invalid deny pattern '[abc': "),
        "{problems:?}"
    );
    let local = root("x", "a", "reference") + "deny = [\"\"]\n";
    assert_eq!(d.problems(&local), ["root 'x': empty deny pattern"]);
}

#[test]
fn no_roots() {
    let d = Dirs::new();
    assert_eq!(
        d.problems(""),
        ["no roots declared: add at least one [[roots]] table"]
    );
}

#[test]
fn unknown_keys_anywhere() {
    let d = Dirs::new();
    for text in [
        format!("base_deny = []\n{}", root("x", "a", "reference")),
        root("x", "a", "reference") + "colour = \"red\"\n",
        format!(
            "{}[[components]]\npath = \"file.txt\"\ncolour = \"00\"\n",
            root("x", "a", "reference")
        ),
    ] {
        let err = d.parse(&text).unwrap_err();
        assert!(matches!(err, ConfigError::Parse { .. }), "{err}");
        assert!(err.to_string().contains("unknown field"), "{err}");
    }
}

#[test]
fn components_are_files_relative_to_the_config() {
    let d = Dirs::new();
    let with = |paths: &[&str]| {
        let mut text = root("x", "a", "reference");
        for p in paths {
            text += &format!("[[components]]\npath = \"{p}\"\nunpinned = true\n");
        }
        text
    };
    let c = d.parse(&with(&["file.txt"])).unwrap();
    assert_eq!(c.components[0].path, d.base().join("file.txt"));
    assert!(d.parse(&with(&[])).unwrap().components.is_empty());
    assert_eq!(
        d.problems(&with(&["missing.wasm", "a", "file.txt", "./file.txt"])),
        [
            // The system's own words for "not found" (code 2 on both).
            format!(
                "component 'missing.wasm': {}",
                std::io::Error::from_raw_os_error(2)
            ),
            "component 'a': not a regular file".to_string(),
            "component './file.txt' is declared twice".to_string(),
        ]
    );
}

#[test]
fn zero_and_absurd_limits() {
    let d = Dirs::new();
    for (line, message) in [
        (
            "max_search_results = 0",
            "max_search_results = 0 is out of range (1 to 100000)",
        ),
        (
            "audit_log_max_bytes = 10",
            "audit_log_max_bytes = 10 is out of range (4096 to 68719476736)",
        ),
        (
            "tool_timeout_ms = 0",
            "tool_timeout_ms = 0 is out of range (10 to 3600000)",
        ),
        (
            "tool_memory_bytes = 99999999999",
            "tool_memory_bytes = 99999999999 is out of range (16777216 to 4294967296)",
        ),
        (
            "max_list_entries = 0",
            "max_list_entries = 0 is out of range (1 to 100000)",
        ),
        (
            "max_search_bytes = 0",
            "max_search_bytes = 0 is out of range (1 to 1099511627776)",
        ),
        (
            "max_concurrent_calls = 0",
            "max_concurrent_calls = 0 is out of range (1 to 64)",
        ),
        (
            "max_concurrent_calls = 65",
            "max_concurrent_calls = 65 is out of range (1 to 64)",
        ),
        (
            "audit_log_backups = 5000",
            "audit_log_backups = 5000 is out of range (0 to 1000)",
        ),
        (
            "max_output_bytes = 1024",
            "max_output_bytes = 1024 is out of range (65536 to 4294967296)",
        ),
    ] {
        let text = format!("{line}\n{}", root("x", "a", "reference"));
        assert_eq!(d.problems(&text), [message]);
    }
    let huge = root("x", "a", "reference") + "min_free_bytes = 2199023255552\n";
    assert_eq!(
        d.problems(&huge),
        ["root 'x': min_free_bytes = 2199023255552 is out of range (0 to 1099511627776)"]
    );
    assert_eq!(
        d.problems(&format!(
            "min_free_bytes = 2199023255552\n{}",
            root("x", "a", "reference")
        )),
        ["min_free_bytes = 2199023255552 is out of range (0 to 1099511627776)"]
    );
    let huge = root("x", "a", "reference") + "trash_max_bytes = 1125899906842625\n";
    assert_eq!(
        d.problems(&huge),
        ["root 'x': trash_max_bytes = 1125899906842625 is out of range (0 to 1125899906842624)"]
    );
    let zero = root("x", "a", "reference") + "max_read_bytes = 0\n";
    assert_eq!(
        d.problems(&zero),
        ["root 'x': max_read_bytes = 0 is out of range (1 to 67108864)"]
    );
    // A read cap the guest's memory could not hold.
    let big = root("x", "a", "reference") + "max_read_bytes = 1073741824\n";
    assert_eq!(
        d.problems(&big),
        ["root 'x': max_read_bytes = 1073741824 is out of range (1 to 67108864)"]
    );
    // A document is read whole: the same bound as a whole read.
    let big = root("x", "a", "reference") + "max_document_bytes = 67108865\n";
    assert_eq!(
        d.problems(&big),
        ["root 'x': max_document_bytes = 67108865 is out of range (1 to 67108864)"]
    );
    assert_eq!(
        d.problems(&format!(
            "audit_log = \"stdout\"\n{}",
            root("x", "a", "reference")
        )),
        ["audit_log cannot be stdout: under stdio it is the JSON-RPC channel"]
    );
}

#[test]
fn every_problem_is_reported_at_once() {
    let d = Dirs::new();
    let text = root("x", "nowhere", "reference") + &root("y", "a", "boss");
    let problems = d.problems(&text);
    assert_eq!(problems.len(), 2, "{problems:?}");
    let shown = ConfigError::Invalid(problems).to_string();
    assert!(
        shown.starts_with("invalid config:\n  - root 'x'"),
        "{shown}"
    );
}

/// Each key of a `[[components]]` entry and `[trust]` refused with the
/// rule it breaks, naming the entry and the key.
#[test]
fn component_entries_are_pinned_scoped_and_within_the_server_limits() {
    let d = Dirs::new();
    let pin = "ab".repeat(32);
    let entry = |keys: &str| {
        format!(
            "tool_timeout_ms = 5000\n{}{}[[components]]\npath = \"file.txt\"\n{keys}\n",
            root("x", "a", "workspace"),
            root("y", "b", "reference"),
        )
    };
    let ok = d
        .parse(&entry(&format!(
            "sha256 = \"{}\"\nroots = [\"x\"]\npermissions = [\"read\"]\ntimeout_ms = 100\n\
             memory_bytes = 16777216",
            pin.to_uppercase()
        )))
        .unwrap();
    let c = &ok.components[0];
    assert_eq!(c.sha256.as_deref(), Some(pin.as_str()), "kept lowercase");
    assert_eq!(c.roots.as_deref(), Some(&["x".to_string()][..]));
    assert_eq!(c.cap, Some(Perms::of(&[Permission::Read])));
    assert_eq!(c.timeout, Duration::from_millis(100));
    assert_eq!(c.memory_bytes, 16 * MIB);
    assert_eq!(
        c.max_output_bytes, ok.limits.max_output_bytes,
        "the server's"
    );
    let at = "component 'file.txt'";
    for (keys, problem) in [
        ("", format!("{at}: not pinned: add sha256 = \"…\"")),
        (
            "sha256 = \"00\"",
            format!("{at}: sha256 = \"00\" is not a SHA-256 digest (64 hexadecimal digits)"),
        ),
        (
            &format!("sha256 = \"{pin}\"\nunpinned = true"),
            format!("{at}: sha256 and unpinned = true contradict each other"),
        ),
        (
            "unpinned = true\nsigned = true",
            format!("{at}: signed = true, but no [trust] keys are listed"),
        ),
        (
            "unpinned = true\nroots = [\"z\"]",
            format!("{at}: roots names 'z', which is not a root"),
        ),
        (
            "unpinned = true\nroots = []",
            format!("{at}: roots is empty"),
        ),
        (
            "unpinned = true\npermissions = [\"write\"]",
            format!("{at}: permissions must include read"),
        ),
        (
            "unpinned = true\npermissions = [\"read\", \"rename\"]",
            format!("{at}: unknown permission 'rename'"),
        ),
        (
            "unpinned = true\ntimeout_ms = 5001",
            format!("{at}: timeout_ms = 5001 is more than the server's tool_timeout_ms (5000)"),
        ),
        (
            "unpinned = true\nmemory_bytes = 268435457",
            format!(
                "{at}: memory_bytes = 268435457 is more than the server's tool_memory_bytes \
                 (268435456)"
            ),
        ),
        (
            "unpinned = true\nmax_output_bytes = 1099511627776",
            format!(
                "{at}: max_output_bytes = 1099511627776 is more than the server's max_output_bytes"
            ),
        ),
        (
            "unpinned = true\n[trust]\nkeys = [\"RWnot-a-key\"]",
            "[trust] keys[0] is not a minisign public key".to_string(),
        ),
    ] {
        let problems = d.problems(&entry(keys));
        assert!(
            problems.iter().any(|p| p.starts_with(&problem)),
            "{keys}: {problems:?}"
        );
    }
}

#[test]
fn subscription_caps_and_client_roots_are_read_and_bounded() {
    let d = Dirs::new();
    let a = root("a", "a", "reference");
    let c = d.parse(&a).unwrap();
    assert_eq!(c.limits.max_subscriptions, 256);
    assert_eq!(c.limits.max_notifications_per_second, 20);
    assert_eq!(c.client_roots, ClientRoots::Ignore);
    let c = d
        .parse(&format!(
            "max_subscriptions = 3\nmax_notifications_per_second = 7\nclient_roots = \"narrow\"\n{a}"
        ))
        .unwrap();
    assert_eq!(c.limits.max_subscriptions, 3);
    assert_eq!(c.limits.max_notifications_per_second, 7);
    assert_eq!(c.client_roots, ClientRoots::Narrow);
    let problems = d.problems(&format!(
        "max_subscriptions = 0\nmax_notifications_per_second = 0\nclient_roots = \"widen\"\n{a}"
    ));
    assert_eq!(problems.len(), 3, "{problems:?}");
    assert!(problems[0].contains("max_subscriptions = 0 is out of range"));
    assert!(problems[1].contains("max_notifications_per_second = 0 is out of range"));
    assert!(
        problems[2].contains("client_roots = 'widen'"),
        "{problems:?}"
    );
}

/// A root's repository: its own `.git` directory by default, one above it
/// only with `git_history = true` (and then limited to the root's part), none
/// with `false`; a `.git` file is not followed; `true` with none is refused.
#[test]
fn a_root_offers_the_history_of_its_repository_as_configured() {
    let d = Dirs::new();
    fs::create_dir_all(d.base().join("a/.git/objects")).unwrap();
    fs::write(d.base().join("a/.git/HEAD"), "ref: refs/heads/main\n").unwrap();
    fs::create_dir_all(d.base().join("a/inner/deep")).unwrap();
    let repository = |text: &str| {
        let config = d.parse(text).unwrap();
        config.roots[0]
            .repository
            .as_ref()
            .map(|r| (r.scope.clone(), r.git.path.clone(), r.git.perms))
    };
    let git = fs::canonicalize(d.base().join("a/.git")).unwrap();
    let reading = Role::Reference.ceiling();
    assert_eq!(
        repository(&root("a", "a", "workspace")),
        Some((String::new(), git.clone(), reading))
    );
    assert_eq!(
        repository(&(root("a", "a", "reference") + "git_history = false\n")),
        None
    );
    assert_eq!(repository(&root("deep", "a/inner/deep", "reference")), None);
    assert_eq!(
        repository(&(root("deep", "a/inner/deep", "reference") + "git_history = true\n")),
        Some(("inner/deep".to_string(), git, reading))
    );
    // The git directory hides what git would run.
    let config = d.parse(&root("a", "a", "reference")).unwrap();
    let git_root = &config.roots[0].repository.as_ref().unwrap().git;
    assert!(
        git_root
            .deny
            .match_path(Path::new("hooks/pre-commit"))
            .is_some()
    );
    assert!(
        git_root
            .deny
            .match_path(Path::new("objects/pack"))
            .is_none()
    );

    fs::write(d.base().join("b/.git"), "gitdir: ../a/.git\n").unwrap();
    assert_eq!(repository(&root("b", "b", "reference")), None);
    let problems = d.problems(&(root("b", "b", "reference") + "git_history = true\n"));
    assert!(
        problems
            .iter()
            .any(|p| p.contains("root 'b': git_history = true, but no git repository holds it")),
        "{problems:?}"
    );
}
