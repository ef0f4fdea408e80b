//! How the server counts and names its file descriptors: the cap on those
//! one call may hold, and the test for "none left". Owns no descriptor
//! itself.

/// Most descriptors and directory entry streams one call may hold open at
/// once (each is a host file descriptor: a guest must not exhaust the
/// server's).
pub const MAX_DESCRIPTORS: usize = 256;

/// What a call that found no file descriptor free is told, whatever the
/// tool made of it (WASI has no error code for it: a guest only sees an
/// I/O error).
pub const NO_DESCRIPTORS: &str =
    "the server has no file descriptor free (EMFILE: too many open files)";

/// Whether `e` says the process (or the system) has no descriptor free.
pub fn out_of_descriptors(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error().map(rustix::io::Errno::from_raw_os_error),
        Some(rustix::io::Errno::MFILE | rustix::io::Errno::NFILE)
    )
}
