//! Handing memory the allocator holds free back to the system.
//!
//! glibc keeps what a process frees in its arenas for later allocations; a daemon that read
//! hundreds of MiB once (the index's rows, a settle's compaction) would hold them for good.

/// Hand the memory the allocator holds free back to the system (glibc's `malloc_trim`, which
/// also releases free pages inside its arenas, not only at their ends); elsewhere nothing.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes the allocator's own locks and only returns free pages.
    unsafe {
        libc::malloc_trim(0);
    }
}
