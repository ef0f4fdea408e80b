//! How history is written for the model: dates as git's `--date=iso-strict`
//! writes them, and file diffs in git's unified format.

use git_history::{ChangeKind, FileDiff};
use loomfs_guest::shown;

/// A commit time (seconds since the epoch) at its offset from UTC, as
/// `2024-05-01T12:00:00+02:00`.
pub fn date(time: i64, offset: i32) -> String {
    let local = time + i64::from(offset);
    let (y, m, d) = civil(local.div_euclid(86_400));
    let secs = local.rem_euclid(86_400);
    let sign = if offset < 0 { '-' } else { '+' };
    let off = offset.unsigned_abs() / 60;
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}{sign}{:02}:{:02}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        off / 60,
        off % 60
    )
}

/// The day `days` after 1970-01-01 as (year, month, day): Howard Hinnant's
/// `civil_from_days`.
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// A `since` argument (`2024-05-01`, or RFC 3339 in UTC,
/// `2024-05-01T12:00:00Z`) as seconds since the epoch.
pub fn since(text: &str) -> Option<i64> {
    let full = if text.len() == 10 {
        format!("{text}T00:00:00Z")
    } else {
        text.to_string()
    };
    let time = humantime::parse_rfc3339_weak(&full).ok()?;
    let secs = time.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs();
    i64::try_from(secs).ok()
}

/// What a change did, as the structured results name it.
pub fn change_name(kind: ChangeKind) -> &'static str {
    match kind {
        ChangeKind::Added => "added",
        ChangeKind::Deleted => "deleted",
        ChangeKind::Modified => "modified",
    }
}

/// One file's diff in git's unified format (without the `index` and mode
/// lines, which name objects and modes the model has no use for).
pub fn file_diff(file: &FileDiff) -> String {
    let path = shown(&file.change.path);
    let (old, new) = match file.change.kind {
        ChangeKind::Added => ("/dev/null".to_string(), format!("b/{path}")),
        ChangeKind::Deleted => (format!("a/{path}"), "/dev/null".to_string()),
        ChangeKind::Modified => (format!("a/{path}"), format!("b/{path}")),
    };
    let mut text = format!("diff --git a/{path} b/{path}\n");
    match file.change.kind {
        ChangeKind::Added => text.push_str("new file\n"),
        ChangeKind::Deleted => text.push_str("deleted file\n"),
        ChangeKind::Modified => {}
    }
    match &file.hunks {
        Some(hunks) if hunks.is_empty() => {}
        Some(hunks) => {
            text.push_str(&format!("--- {old}\n+++ {new}\n"));
            text.push_str(hunks);
        }
        None => text.push_str(&format!("Binary files {old} and {new} differ\n")),
    }
    text
}

/// Diffs of `files` joined, cut before the first one that would take the
/// text past `max` bytes: the text, and how many files it holds.
pub fn diffs(files: &[FileDiff], max: u64) -> (String, usize) {
    let mut text = String::new();
    for (i, file) in files.iter().enumerate() {
        let one = file_diff(file);
        if (text.len() + one.len()) as u64 > max {
            return (text, i);
        }
        text.push_str(&one);
    }
    (text, files.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_as_git_writes_them() {
        assert_eq!(date(0, 0), "1970-01-01T00:00:00+00:00");
        assert_eq!(date(1_714_564_800, 7200), "2024-05-01T14:00:00+02:00");
        assert_eq!(date(1_709_164_800, -19_800), "2024-02-28T18:30:00-05:30");
        assert_eq!(date(951_782_400, 0), "2000-02-29T00:00:00+00:00");
    }

    #[test]
    fn since_takes_a_day_or_a_time() {
        assert_eq!(since("1970-01-02"), Some(86_400));
        assert_eq!(since("2024-05-01T12:00:00Z"), Some(1_714_564_800));
        assert_eq!(since("yesterday"), None);
    }
}
