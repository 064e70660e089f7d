//! Random tokens from the operating system's source.

/// 32 random bytes as lowercase hex.
pub fn random_hex() -> String {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the operating system's random source works");
    hex::encode(bytes)
}
