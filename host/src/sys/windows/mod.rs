//! The Windows backend's primitives, on handles, each the twin of what
//! the Linux side asks of its kernel: an open beneath a root one name at a
//! time relative to the directory handle before it ([`beneath`], on
//! [`nt::open_at`]), renames and hard links that never replace
//! ([`rename`]), a directory's entries ([`entries`]), size, times, removal,
//! flushes and free space by handle ([`info`]), cross-process byte-range
//! locks ([`lock`]) and file identity ([`nt::identity`]).
//! `windows-sys` makes the calls. They are tested under Wine on Linux
//! (`scripts/windows-test`); docs/platforms.md says what that proves.

pub mod beneath;
pub mod entries;
pub mod info;
pub mod lock;
pub mod nt;
pub mod rename;

#[cfg(test)]
mod tests;
