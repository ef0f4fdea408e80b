use super::*;

fn root(dir: &Path, name: &str) -> Arc<Root> {
    Arc::new(Root::workspace_for_tests(name, dir))
}

#[test]
fn no_descriptor_free_stops_the_call_instead_of_skipping_the_lock() {
    let errno = |e: rustix::io::Errno| io::Error::from_raw_os_error(e.raw_os_error());
    for e in [rustix::io::Errno::MFILE, rustix::io::Errno::NFILE] {
        for may_make in [true, false] {
            assert_eq!(
                unusable(&errno(e), may_make).err().map(|e| e.to_string()),
                Some(LockError::NoDescriptors.to_string())
            );
        }
    }
    let missing = errno(rustix::io::Errno::NOENT);
    assert_eq!(unusable(&missing, false).ok(), Some(Unusable::Unmade));
    assert_eq!(unusable(&missing, true).ok(), Some(Unusable::Unshared));
    let read_only = errno(rustix::io::Errno::ROFS);
    assert_eq!(unusable(&read_only, true).ok(), Some(Unusable::Unshared));
    assert!(LockError::NoDescriptors.to_string().contains("EMFILE"));
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

fn key(root: &Arc<Root>, rel: &str) -> Key {
    Key {
        root: Arc::clone(root),
        rel: PathBuf::from(rel),
    }
}

#[test]
fn overlap_is_same_path_or_one_below_the_other() {
    let tmp = tempfile::TempDir::new().unwrap();
    let (a, b) = (root(tmp.path(), "a"), root(tmp.path(), "b"));
    assert!(key(&a, "x/y").overlaps(&key(&a, "x/y")));
    assert!(key(&a, "x").overlaps(&key(&a, "x/y/z")));
    assert!(key(&a, "x/y/z").overlaps(&key(&a, "x")));
    assert!(key(&a, "").overlaps(&key(&a, "x")));
    assert!(!key(&a, "x/y").overlaps(&key(&a, "x/yz")));
    assert!(!key(&a, "x").overlaps(&key(&a, "y")));
    assert!(!key(&a, "x").overlaps(&key(&b, "x")));
}

#[test]
fn shared_above_exclusive_at_the_path() {
    let tmp = tempfile::TempDir::new().unwrap();
    let r = root(tmp.path(), "r");
    let bytes = bytes_of([(&r, Path::new("a/b"))].into_iter());
    assert_eq!(
        bytes,
        vec![
            (byte_of(b"a/b"), true),
            (byte_of(b"a"), false),
            (byte_of(b""), false)
        ]
    );
    // A path and a directory above it, in one call: exclusive wins.
    let bytes = bytes_of([(&r, Path::new("a/b")), (&r, Path::new("a"))].into_iter());
    assert!(bytes.contains(&(byte_of(b"a"), true)));
    assert!(bytes.iter().all(|b| b.0 >= 0));
}

/// Within the process: an overlapping call waits until the first gives
/// its keys back; a disjoint one does not wait at all; the wait ends at
/// the deadline (busy) or on cancellation.
#[test]
fn overlapping_calls_wait_disjoint_ones_do_not() {
    let tmp = tempfile::TempDir::new().unwrap();
    let r = root(tmp.path(), "r");
    let locks = PathLocks::new();
    let never = CancellationToken::new();
    rt().block_on(async {
        let far = Instant::now() + Duration::from_secs(3600);
        let first = locks
            .lock(vec![key(&r, "a/b.txt")], far, &never)
            .await
            .unwrap();
        // Disjoint: granted at once, though `first` is held.
        let other = locks
            .lock(vec![key(&r, "a/c.txt")], far, &never)
            .await
            .unwrap();
        drop(other);
        // The directory above: busy until the deadline.
        let soon = Instant::now() + Duration::from_millis(30);
        let err = locks
            .lock(vec![key(&r, "a")], soon, &never)
            .await
            .err()
            .unwrap();
        assert!(
            matches!(&err, LockError::Busy { path, .. } if path == "a"),
            "{err:?}"
        );
        assert!(err.to_string().contains("tool_timeout_ms"));
        // Cancelled while waiting.
        let cancel = CancellationToken::new();
        cancel.cancel();
        let err = locks
            .lock(vec![key(&r, "a/b.txt")], far, &cancel)
            .await
            .err();
        assert_eq!(err, Some(LockError::Cancelled));
        // Given back: the waiter gets it.
        let waiter = {
            let locks = Arc::clone(&locks);
            let k = key(&r, "a/b.txt");
            tokio::spawn(async move {
                let never = CancellationToken::new();
                locks.lock(vec![k], far, &never).await.map(|_| ())
            })
        };
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        drop(first);
        waiter.await.unwrap().unwrap();
    });
}

/// Two open file descriptions stand for two processes: an exclusive
/// byte excludes the other, shared bytes share, and closing gives back.
#[test]
fn byte_locks_exclude_across_open_file_descriptions() {
    let tmp = tempfile::TempDir::new().unwrap();
    let r = root(tmp.path(), "r");
    let (a, _) = open_lock_file(&r).unwrap();
    let (b, _) = open_lock_file(&r).unwrap();
    assert!(try_lock(a.as_fd(), 7, true).unwrap());
    assert!(!try_lock(b.as_fd(), 7, false).unwrap());
    assert!(try_lock(b.as_fd(), 8, true).unwrap());
    assert!(try_lock(a.as_fd(), 9, false).unwrap());
    assert!(try_lock(b.as_fd(), 9, false).unwrap());
    assert!(!try_lock(b.as_fd(), 9, true).unwrap());
    drop(a);
    assert!(try_lock(b.as_fd(), 7, true).unwrap());
    assert!(try_lock(b.as_fd(), 9, true).unwrap());
}

/// A call in this process waits for a lock held from "another process"
/// (another open file description), and gets it once that is closed.
#[test]
fn a_lock_held_elsewhere_is_waited_for() {
    let tmp = tempfile::TempDir::new().unwrap();
    let r = root(tmp.path(), "r");
    let (elsewhere, _) = open_lock_file(&r).unwrap();
    assert!(try_lock(elsewhere.as_fd(), byte_of(b"a"), false).unwrap());
    let locks = PathLocks::new();
    let never = CancellationToken::new();
    rt().block_on(async {
        // Below `a`: shares `a`'s byte, so not blocked.
        let far = Instant::now() + Duration::from_secs(3600);
        drop(locks.lock(vec![key(&r, "a/x")], far, &never).await.unwrap());
        // `a` itself: blocked while the other holds its shared byte.
        let soon = Instant::now() + Duration::from_millis(40);
        let err = locks.lock(vec![key(&r, "a")], soon, &never).await.err();
        assert!(matches!(err, Some(LockError::Busy { .. })), "{err:?}");
        drop(elsewhere);
        drop(locks.lock(vec![key(&r, "a")], far, &never).await.unwrap());
    });
    assert!(tmp.path().join(".mcp-trash/.locks").is_file());
}
