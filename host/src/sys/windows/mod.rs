//! The Windows backend's primitives, on handles, each the twin of what
//! the Linux side asks of its kernel: an open beneath a root one name at a
//! time relative to the directory handle before it ([`beneath`], on
//! [`nt::open_at`]), renames that never replace ([`rename`]), cross-process
//! byte-range locks ([`lock`]) and file identity ([`nt::identity`]).
//! `windows-sys` makes the calls. They are tested under Wine on Linux
//! (`scripts/windows-test`); docs/platforms.md says what that proves.

pub mod beneath;
pub mod lock;
pub mod nt;
pub mod rename;

#[cfg(test)]
mod tests;
