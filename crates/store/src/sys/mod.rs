//! What the operating system provides, as memfold uses it: the one clock, exclusive file locks
//! that say who holds them, file modes and owners, and handing freed memory back.

pub mod access;
pub mod alloc;
pub mod clock;
pub mod host;
pub mod limits;
pub mod lock;
mod random;
pub mod unit;

pub use random::random_hex;

/// A mutex's guard, also when a thread panicked holding it: memfold's mutexes hold caches and
/// bookkeeping that a panic never leaves half-written, so the next holder goes on with them.
pub fn guard<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Run blocking work (file IO, a commit) on tokio's blocking pool, passing panics on.
pub async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(work).await.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
}

/// What a caught panic said, for an error message.
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("a panic")
}
