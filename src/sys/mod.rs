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
