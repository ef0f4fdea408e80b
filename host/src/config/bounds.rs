//! Every numeric key: its default when unset and the range outside which
//! a value is absurd (a [`Bound`]), and the defaults other layers need.

use std::time::Duration;

/// A numeric key: its default and the range outside which a value is absurd.
pub(super) struct Bound {
    pub(super) key: &'static str,
    pub(super) default: u64,
    pub(super) min: u64,
    pub(super) max: u64,
}

impl Bound {
    /// The bound of `key`: `default` when unset, `min..=max` when set.
    pub(super) const fn new(key: &'static str, default: u64, min: u64, max: u64) -> Bound {
        Bound {
            key,
            default,
            min,
            max,
        }
    }

    /// `value` if it is in range, else the default and a problem naming
    /// the key (after `prefix`, e.g. the root it belongs to).
    pub(super) fn take(&self, value: Option<u64>, problems: &mut Vec<String>, prefix: &str) -> u64 {
        match value {
            None => self.default,
            Some(v) if (self.min..=self.max).contains(&v) => v,
            Some(v) => {
                problems.push(format!(
                    "{prefix}{} = {v} is out of range ({} to {})",
                    self.key, self.min, self.max
                ));
                self.default
            }
        }
    }
}

pub(super) const KIB: u64 = 1024;
pub(super) const MIB: u64 = 1024 * KIB;
pub(super) const GIB: u64 = 1024 * MIB;

pub(super) const AUDIT_MAX_BYTES: Bound =
    Bound::new("audit_log_max_bytes", 8 * MIB, 4 * KIB, 64 * GIB);
pub(super) const AUDIT_BACKUPS: Bound = Bound::new("audit_log_backups", 3, 0, 1000);
pub(super) const SEARCH_RESULTS: Bound = Bound::new("max_search_results", 200, 1, 100_000);
pub(super) const SEARCH_BYTES: Bound = Bound::new("max_search_bytes", 64 * MIB, 1, 1024 * GIB);
pub(super) const LIST_ENTRIES: Bound = Bound::new("max_list_entries", 1000, 1, 100_000);
pub(super) const TIMEOUT_MS: Bound = Bound::new("tool_timeout_ms", 30_000, 10, 3_600_000);
// A guest is wasm32: 4 GiB is the most linear memory it can have.
pub(super) const MEMORY_BYTES: Bound =
    Bound::new("tool_memory_bytes", 256 * MIB, 16 * MIB, 4 * GIB);
// The default is worked out from the roots (see `output_bytes`).
pub(super) const OUTPUT_BYTES: Bound = Bound::new("max_output_bytes", 16 * MIB, 64 * KIB, 4 * GIB);
/// A whole read of a root's largest file comes back as text and again in the
/// structured result, with JSON's escapes: the output limit must hold this
/// many times `max_read_bytes`.
pub const OUTPUT_PER_READ: u64 = 4;
/// The runtime reserves one instance slot per call slot, plus one.
pub const MAX_CONCURRENT_CALLS: u64 = 64;
pub(super) const CONCURRENT_CALLS: Bound =
    Bound::new("max_concurrent_calls", 8, 1, MAX_CONCURRENT_CALLS);
/// Subscriptions per session: a client UI subscribes to the files it shows
/// (a few dozen); 256 leaves room without letting one session make the
/// server match every event against thousands of entries.
pub(super) const SUBSCRIPTIONS: Bound = Bound::new("max_subscriptions", 256, 1, 100_000);
/// Change notifications per session per second: 20 keeps a build that
/// rewrites hundreds of files from flooding a client, while one file a
/// person saves is told at once.
pub(super) const NOTIFICATIONS_PER_SECOND: Bound =
    Bound::new("max_notifications_per_second", 20, 1, 10_000);
pub(super) const QUOTA_PER_MINUTE: Bound = Bound::new("quota_bytes_per_minute", 0, KIB, 1024 * GIB);
pub(super) const QUOTA_BURST: Bound = Bound::new("quota_burst_bytes", 0, KIB, 1024 * GIB);
/// Free space kept on a root's disk. The default keeps 256 MiB: when an
/// agent fills a laptop's disk to the last byte, the system and the user's
/// own programs fail first (logs, editors saving, package managers), and
/// 256 MiB is a few minutes of them, yet small enough that no disk a person
/// is still working on is refused. 0 keeps none.
pub(super) const MIN_FREE_BYTES: Bound = Bound::new("min_free_bytes", 256 * MIB, 0, 1024 * GIB);
/// Bytes a root's trash may hold. The default, 1 GiB, is under 1% of a
/// laptop's disk (128 GiB and up), so a runaway agent that overwrites a
/// large file again and again is stopped long before the disk is full,
/// yet it holds hundreds of thousands of versions of source files, which
/// is what an agent mostly rewrites. Past it, changes that would keep more
/// are refused (never an old version silently dropped) until the operator
/// purges. 0 turns the budget off.
pub(super) const TRASH_MAX_BYTES: Bound = Bound::new("trash_max_bytes", GIB, 0, 1024 * 1024 * GIB);

/// A call's memory, time and output limits when no config sets them (what
/// `component inspect` runs a component's `describe` with).
pub fn default_call_limits() -> (u64, Duration, u64) {
    (
        MEMORY_BYTES.default,
        Duration::from_millis(TIMEOUT_MS.default),
        OUTPUT_BYTES.default,
    )
}

/// Default per-root read cap.
pub const DEFAULT_MAX_READ_BYTES: u64 = MIB;
/// A document is read whole (`read_document`): 64 MiB, or a quarter of a
/// guest's memory where that is less, as for `max_read_bytes`.
pub(super) const DEFAULT_MAX_DOCUMENT_BYTES: u64 = 64 * MIB;
pub(super) const MAX_DOCUMENT_BYTES: Bound =
    Bound::new("max_document_bytes", DEFAULT_MAX_DOCUMENT_BYTES, 1, GIB);
