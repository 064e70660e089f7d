//! This machine's name, as sync names the machine a change came from.

/// The host name, or `this machine` when the system does not say.
pub fn name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname writes at most that many bytes.
    let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
    let len = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    match std::str::from_utf8(&buf[..len]) {
        Ok(name) if ok && !name.trim().is_empty() => name.trim().to_string(),
        _ => "this machine".to_string(),
    }
}
