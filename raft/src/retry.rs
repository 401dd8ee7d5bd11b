//! Patience with storage errors that pass. openraft treats every storage error as fatal:
//! Raft stops, and roster's watchdog then stops the node. A write that failed because the
//! process ran out of descriptors (EMFILE — a flood of idle connections did exactly that to
//! a snapshot), the system out of open files (ENFILE), the disk out of space or quota, or
//! the machine out of memory is therefore tried again here, with backoff, for a bounded
//! time; any other error — a failing disk, a corrupt file — is handed on at once.

use std::future::Future;
use std::io;
use std::time::Duration;

use tokio::time::Instant;

/// EMFILE and ENFILE have these numbers on Linux, the BSDs and macOS; std gives them no
/// `ErrorKind` of their own.
const EMFILE: i32 = 24;
const ENFILE: i32 = 23;

/// The first wait after a transient error; it doubles up to [`MAX_DELAY`].
const FIRST_DELAY: Duration = Duration::from_millis(50);
/// The longest wait between two attempts.
const MAX_DELAY: Duration = Duration::from_secs(2);
/// While an operation keeps failing, one warning per this long (a storm of errors would
/// otherwise write a line per attempt).
const WARN_EVERY: Duration = Duration::from_secs(10);

/// Whether `e` may pass by itself: out of descriptors or file slots, space, quota or
/// memory, or interrupted. Everything else is taken as lasting.
pub fn is_transient(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(EMFILE | ENFILE))
        || matches!(
            e.kind(),
            io::ErrorKind::OutOfMemory
                | io::ErrorKind::StorageFull
                | io::ErrorKind::QuotaExceeded
                | io::ErrorKind::Interrupted
                | io::ErrorKind::WouldBlock
                | io::ErrorKind::TimedOut
        )
}

/// Runs `attempt` until it succeeds, fails with an error `transient` does not accept, or
/// has failed transiently for longer than `patience`; waits 50 ms after the first failure,
/// doubling up to 2 s. Logs a warning at most every 10 s while it waits, and once more
/// when it recovers or gives up.
pub async fn with_patience<T, E, Fut>(
    what: &'static str,
    patience: Duration,
    transient: impl Fn(&E) -> bool,
    mut attempt: impl FnMut() -> Fut,
) -> Result<T, E>
where
    E: std::fmt::Display,
    Fut: Future<Output = Result<T, E>>,
{
    let started = Instant::now();
    let mut delay = FIRST_DELAY;
    let mut failures = 0u64;
    let mut last_warning: Option<Instant> = None;
    loop {
        let error = match attempt().await {
            Ok(value) => {
                if failures > 0 {
                    tracing::warn!(
                        what,
                        failures,
                        waited_ms = started.elapsed().as_millis() as u64,
                        "storage recovered from transient errors"
                    );
                }
                return Ok(value);
            }
            Err(e) => e,
        };
        if !transient(&error) {
            return Err(error);
        }
        let waited = started.elapsed();
        if waited >= patience {
            tracing::error!(what, failures, error = %error, waited_ms = waited.as_millis() as u64,
                "storage error outlasted the retries; giving up");
            return Err(error);
        }
        failures += 1;
        if last_warning.is_none_or(|at| at.elapsed() >= WARN_EVERY) {
            tracing::warn!(what, error = %error, failures, waited_ms = waited.as_millis() as u64,
                "transient storage error; retrying");
            last_warning = Some(Instant::now());
        }
        tokio::time::sleep(delay.min(patience - waited)).await;
        delay = (delay * 2).min(MAX_DELAY);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn descriptors_space_and_memory_pass_other_errors_last() {
        assert!(is_transient(&io::Error::from_raw_os_error(EMFILE)));
        assert!(is_transient(&io::Error::from_raw_os_error(ENFILE)));
        assert!(is_transient(&io::Error::from(io::ErrorKind::StorageFull)));
        assert!(is_transient(&io::Error::from(io::ErrorKind::OutOfMemory)));
        assert!(!is_transient(&io::Error::from(
            io::ErrorKind::PermissionDenied
        )));
        assert!(!is_transient(&io::Error::other("corrupt")));
        // EIO: a failing disk is not waited for.
        assert!(!is_transient(&io::Error::from_raw_os_error(5)));
    }

    #[tokio::test]
    async fn transient_errors_are_retried_until_they_pass() {
        let calls = Cell::new(0);
        let result = with_patience("test", Duration::from_secs(60), is_transient, || {
            calls.set(calls.get() + 1);
            let n = calls.get();
            async move {
                if n < 5 {
                    Err(io::Error::from_raw_os_error(EMFILE))
                } else {
                    Ok(n)
                }
            }
        })
        .await;
        assert_eq!(result.unwrap(), 5);
    }

    #[tokio::test]
    async fn lasting_errors_end_at_once_and_transient_ones_after_the_patience() {
        let calls = Cell::new(0);
        let result: Result<(), io::Error> =
            with_patience("test", Duration::from_secs(60), is_transient, || {
                calls.set(calls.get() + 1);
                async { Err(io::Error::from(io::ErrorKind::PermissionDenied)) }
            })
            .await;
        assert!(result.is_err());
        assert_eq!(calls.get(), 1);

        // Waits 50 + 100 + 150 ms (cut at the patience), then gives up.
        let started = Instant::now();
        let result: Result<(), io::Error> =
            with_patience("test", Duration::from_millis(300), is_transient, || async {
                Err(io::Error::from_raw_os_error(ENFILE))
            })
            .await;
        assert!(result.is_err());
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_millis(300) && waited < Duration::from_secs(2),
            "{waited:?}"
        );
    }
}
