//! The byte quota: one token bucket per server, counting the bytes tools read
//! and write.
//!
//! The bucket holds at most `quota_burst_bytes` and refills at
//! `quota_bytes_per_minute`, continuously. A call starts only when the bucket
//! holds [`Quota::start_bytes`] (at least a small file's worth, and as much
//! as its arguments, which is what a write of them needs); while it runs,
//! every read and write takes its bytes from the bucket before it happens, so
//! a read is shortened to what is left and an operation with nothing left
//! fails (`quota`, the WASI code for EDQUOT; see `runtime::meter`). The bucket is the only state: several calls at once share it, and
//! no call can move more bytes than the bucket grants, so an agent stays
//! within the burst plus the refill over any stretch of time.

use std::sync::Mutex;
use std::time::{Duration, Instant};

pub use crate::config::QuotaConfig;

/// The bucket was empty: when to try again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Empty {
    pub retry_after: Duration,
}

/// A token bucket of bytes.
#[derive(Debug)]
pub struct Quota {
    config: QuotaConfig,
    bucket: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    /// Whole and fractional bytes available.
    tokens: f64,
    /// When `tokens` was last brought up to date.
    at: Instant,
}

/// The most a call needs in the bucket to start: enough for a small file.
const START_BYTES: u64 = 4096;

impl Quota {
    /// A full bucket.
    pub fn new(config: QuotaConfig) -> Quota {
        Quota::new_at(config, Instant::now())
    }

    fn new_at(config: QuotaConfig, now: Instant) -> Quota {
        Quota {
            config,
            bucket: Mutex::new(Bucket {
                tokens: config.burst_bytes as f64,
                at: now,
            }),
        }
    }

    pub fn config(&self) -> QuotaConfig {
        self.config
    }

    /// What the bucket must hold for a call whose arguments are `arguments`
    /// bytes long to start: a small file's worth, or the arguments' length
    /// if that is more (a write of them takes as much), or the whole burst
    /// if that is less.
    pub fn start_bytes(&self, arguments: u64) -> u64 {
        START_BYTES.max(arguments).min(self.config.burst_bytes)
    }

    /// Whether a call with `arguments` bytes of arguments may start now.
    pub fn ready(&self, arguments: u64) -> Result<(), Empty> {
        self.ready_at(arguments, Instant::now())
    }

    /// Takes up to `want` bytes: all of them if the bucket holds them, else
    /// what it holds. `Err` when it holds less than one byte.
    pub fn take(&self, want: u64) -> Result<u64, Empty> {
        self.take_at(want, Instant::now())
    }

    /// Takes exactly `want` bytes, or nothing.
    pub fn take_all(&self, want: u64) -> Result<(), Empty> {
        self.take_all_at(want, Instant::now())
    }

    /// Returns bytes taken but not used (a read that came back short).
    pub fn give_back(&self, bytes: u64) {
        let mut b = self.lock();
        b.tokens = (b.tokens + bytes as f64).min(self.config.burst_bytes as f64);
    }

    /// How long until the bucket is full again: when a call that ran out
    /// can be retried with the whole burst.
    pub fn until_full(&self) -> Duration {
        let now = Instant::now();
        let mut b = self.lock();
        self.refill(&mut b, now);
        self.until(&b, self.config.burst_bytes)
    }

    /// Whole bytes available now (for `check_write` permits).
    pub fn available(&self) -> u64 {
        let now = Instant::now();
        let mut b = self.lock();
        self.refill(&mut b, now);
        b.tokens as u64
    }

    fn ready_at(&self, arguments: u64, now: Instant) -> Result<(), Empty> {
        let mut b = self.lock();
        self.refill(&mut b, now);
        let need = self.start_bytes(arguments);
        if b.tokens >= need as f64 {
            Ok(())
        } else {
            Err(self.empty(&b, need))
        }
    }

    fn take_at(&self, want: u64, now: Instant) -> Result<u64, Empty> {
        if want == 0 {
            return Ok(0);
        }
        let mut b = self.lock();
        self.refill(&mut b, now);
        let granted = want.min(b.tokens as u64);
        if granted == 0 {
            return Err(self.empty(&b, START_BYTES));
        }
        b.tokens -= granted as f64;
        Ok(granted)
    }

    fn take_all_at(&self, want: u64, now: Instant) -> Result<(), Empty> {
        let mut b = self.lock();
        self.refill(&mut b, now);
        if b.tokens < want as f64 {
            return Err(self.empty(&b, START_BYTES));
        }
        b.tokens -= want as f64;
        Ok(())
    }

    fn refill(&self, b: &mut Bucket, now: Instant) {
        let elapsed = now.saturating_duration_since(b.at).as_secs_f64();
        let rate = self.config.bytes_per_minute as f64 / 60.0;
        b.tokens = (b.tokens + elapsed * rate).min(self.config.burst_bytes as f64);
        b.at = now;
    }

    /// When the bucket will hold `need` bytes (at most the burst).
    fn empty(&self, b: &Bucket, need: u64) -> Empty {
        Empty {
            retry_after: self.until(b, need).max(Duration::from_millis(1)),
        }
    }

    /// How long until the bucket holds `bytes` (at most the burst).
    fn until(&self, b: &Bucket, bytes: u64) -> Duration {
        let missing = (bytes.min(self.config.burst_bytes) as f64 - b.tokens).max(0.0);
        let rate = self.config.bytes_per_minute as f64 / 60.0;
        Duration::from_secs_f64(missing / rate)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Bucket> {
        self.bucket.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// "retry in 250 ms", "retry in 3 s", "retry in 2h 5m": rounded up, never
/// "0".
pub fn retry_text(after: Duration) -> String {
    if after < Duration::from_secs(1) {
        return format!("retry in {} ms", after.as_millis().max(1));
    }
    let secs = after.as_secs() + u64::from(after.subsec_nanos() > 0);
    if secs < 60 {
        format!("retry in {secs} s")
    } else {
        // Whole minutes, rounded up: seconds would be noise.
        let minutes = Duration::from_secs(secs.div_ceil(60) * 60);
        format!("retry in {}", humantime::format_duration(minutes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 60 KiB a minute is 1 KiB a second.
    const CONFIG: QuotaConfig = QuotaConfig {
        bytes_per_minute: 60 * 1024,
        burst_bytes: 8 * 1024,
    };

    #[test]
    fn a_full_bucket_grants_the_burst_then_nothing() {
        let t0 = Instant::now();
        let q = Quota::new_at(CONFIG, t0);
        assert_eq!(q.take_at(5000, t0), Ok(5000));
        // Shortened to what is left.
        assert_eq!(q.take_at(5000, t0), Ok(8 * 1024 - 5000));
        let empty = q.take_at(1, t0).unwrap_err();
        // 4 KiB at 1 KiB/s.
        assert_eq!(empty.retry_after, Duration::from_secs(4));
        assert_eq!(q.ready_at(0, t0), Err(empty));
    }

    #[test]
    fn it_refills_at_the_rate_up_to_the_burst() {
        let t0 = Instant::now();
        let q = Quota::new_at(CONFIG, t0);
        assert_eq!(q.take_at(u64::MAX, t0), Ok(8 * 1024));
        let t1 = t0 + Duration::from_millis(500);
        assert!(
            q.ready_at(0, t1).is_err(),
            "512 bytes is not enough to start"
        );
        assert_eq!(q.take_at(10_000, t1), Ok(512));
        let t2 = t1 + Duration::from_secs(4);
        assert_eq!(q.ready_at(0, t2), Ok(()));
        // A call with 6 KiB of arguments waits for 6 KiB.
        assert_eq!(
            q.ready_at(6 * 1024, t2).unwrap_err().retry_after,
            Duration::from_secs(2)
        );
        assert_eq!(q.until(&q.lock(), u64::MAX), Duration::from_secs(4));
        // An hour later: only the burst.
        let t3 = t2 + Duration::from_secs(3600);
        assert_eq!(q.take_at(u64::MAX, t3), Ok(8 * 1024));
    }

    #[test]
    fn take_all_is_all_or_nothing_and_give_back_is_capped() {
        let t0 = Instant::now();
        let q = Quota::new_at(CONFIG, t0);
        assert!(q.take_all_at(8 * 1024 + 1, t0).is_err());
        assert_eq!(q.take_all_at(8 * 1024, t0), Ok(()));
        assert!(q.take_all_at(1, t0).is_err());
        q.give_back(100_000);
        assert_eq!(q.take_at(u64::MAX, t0), Ok(8 * 1024));
        assert_eq!(q.take_at(0, t0), Ok(0), "nothing asked, nothing refused");
    }

    #[test]
    fn a_burst_below_the_start_amount_still_lets_calls_start() {
        let t0 = Instant::now();
        let q = Quota::new_at(
            QuotaConfig {
                bytes_per_minute: 60,
                burst_bytes: 100,
            },
            t0,
        );
        assert_eq!(q.start_bytes(0), 100);
        assert_eq!(q.start_bytes(1 << 20), 100, "never more than the burst");
        assert_eq!(q.ready_at(0, t0), Ok(()));
        assert_eq!(q.take_at(1000, t0), Ok(100));
        assert_eq!(
            q.ready_at(0, t0).unwrap_err().retry_after,
            Duration::from_secs(100)
        );
    }

    #[test]
    fn retry_texts_round_up() {
        assert_eq!(retry_text(Duration::from_micros(10)), "retry in 1 ms");
        assert_eq!(retry_text(Duration::from_millis(250)), "retry in 250 ms");
        assert_eq!(retry_text(Duration::from_millis(2001)), "retry in 3 s");
        assert_eq!(retry_text(Duration::from_secs(4)), "retry in 4 s");
        assert_eq!(retry_text(Duration::from_secs(61)), "retry in 2m");
        assert_eq!(retry_text(Duration::from_secs(7500)), "retry in 2h 5m");
    }
}
