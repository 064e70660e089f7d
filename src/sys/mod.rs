//! What the operating system provides, as memfold uses it: the one clock, exclusive file locks
//! that say who holds them, file modes and owners, and handing freed memory back.

pub mod access;
pub mod alloc;
pub mod clock;
pub mod host;
pub mod limits;
pub mod lock;
mod random;

pub use random::random_hex;

/// A mutex's guard, also when a thread panicked holding it: memfold's mutexes hold caches and
/// bookkeeping that a panic never leaves half-written, so the next holder goes on with them.
pub fn guard<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
