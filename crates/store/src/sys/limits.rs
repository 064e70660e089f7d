//! The process's limit on open files, raised where the system allows, and what it leaves for
//! connections.
//!
//! A daemon serving many agents holds a file descriptor per connection. Linux starts processes
//! with a low soft limit (often 1,024) below a much higher hard one; the daemon raises the soft
//! limit to the hard one at start, then serves as many connections as that leaves room for
//! after [`RESERVED`] descriptors for its own files (LanceDB's, the watcher's, the logs').

/// File descriptors kept for the daemon's own files.
pub const RESERVED: u64 = 512;
/// Connections never fewer than this, whatever the limit.
pub const MIN_CONNECTIONS: u64 = 64;

/// Raise the soft limit on open files to the hard one (where the system lets the process);
/// returns the soft limit in force afterwards.
pub fn raise_open_files() -> u64 {
    #[cfg(unix)]
    {
        let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: getrlimit writes one rlimit into the struct we own.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
            return 1024;
        }
        // The hard limit itself; where that is refused (macOS answers "unlimited" but takes
        // no more than its per-process maximum), the most a per-process maximum usually is.
        for target in [limit.rlim_max, 1 << 16, 10_240] {
            if target <= limit.rlim_cur || target > limit.rlim_max {
                continue;
            }
            let raised = libc::rlimit { rlim_cur: target, rlim_max: limit.rlim_max };
            // SAFETY: setrlimit reads the struct we pass; raising the soft limit up to the hard
            // one needs no privilege.
            if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
                return target;
            }
        }
        limit.rlim_cur
    }
    #[cfg(not(unix))]
    1024
}

/// The connections a daemon serves at once: `configured`, or with 0, what `open_files` leaves.
pub fn connections(configured: usize, open_files: u64) -> usize {
    if configured > 0 {
        return configured;
    }
    open_files.saturating_sub(RESERVED).clamp(MIN_CONNECTIONS, 1 << 20) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_limit_is_raised_and_leaves_room_for_connections() {
        let soft = raise_open_files();
        assert!(soft >= 64, "{soft}");
        assert_eq!(connections(100, soft), 100, "a configured cap stands");
        assert_eq!(connections(0, 20_000), 20_000 - RESERVED as usize);
        assert_eq!(connections(0, 256), MIN_CONNECTIONS as usize);
    }
}
